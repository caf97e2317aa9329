"""Hostile input corpus (tests/hostile/build.py): every reader raises a documented exception naming
the file, the CLIs print one line and exit 2 (1 for a dataset that opens but fails validation; see the
level table in build.py), nothing is written outside the output directory, no input or source changes.
"""

from __future__ import annotations

import hashlib
import os
import random
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import OWN_FIXTURES, REPO
from hostile.build import (
    ACCEPTED_UNITS,
    CASES,
    DOCUMENTED,
    ESCAPE_MARK,
    STATE,
    Case,
    expected_file,
    read_all,
    with_timestamp_unit,
)

from openarm_sim_dataset import Dataset

#: expected exit codes per level: (dataset-validate, dataset-sample --decode, dataset-convert)
EXIT = {"dataset": (2, 2, 2), "episode": (1, 2, 2), "content": (1, 2, 0)}


def bases(request, case: Case) -> dict[str, Path]:
    b = {"dir": OWN_FIXTURES / "dataset_0.4.0", "tar": OWN_FIXTURES / "dataset_0.4.0_tar"}
    if case.base == "sim":
        pytest.importorskip("mujoco")
        b["sim"] = request.getfixturevalue("generated_one")  # faults are planted in episode 0
    return b


def level(case: Case) -> str:
    return case.level


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: regular files by hash, links by target, others by type (never opened)."""
    out = {}
    if not root.exists() and not root.is_symlink():
        return out
    entries = [root] + (sorted(root.rglob("*")) if root.is_dir() and not root.is_symlink() else [])
    for p in entries:
        st = os.lstat(p)
        key = p.relative_to(root).as_posix()
        if stat.S_ISLNK(st.st_mode):
            out[key] = "link:" + os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            out[key] = f"file:{st.st_size}:{h.hexdigest()}"
        else:
            out[key] = f"type:{stat.S_IFMT(st.st_mode)}"
    return out


def source_hash() -> dict[str, str]:
    """Hash of each of the package's source files (must not change while hostile input is read)."""
    return {p.relative_to(REPO).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((REPO / "openarm_sim_dataset").rglob("*.py"))}


def changed_sources(before: dict[str, str]) -> list[str]:
    after = source_hash()
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def escaped(tmp_path: Path) -> list[str]:
    """Files named with the escape mark anywhere they could land."""
    found = [p.as_posix() for p in tmp_path.parent.rglob(f"*{ESCAPE_MARK}*")]
    found += [p for p in (f"/tmp/{ESCAPE_MARK}", f"/{ESCAPE_MARK}", str(REPO / ESCAPE_MARK)) if os.path.lexists(p)]
    return found


@pytest.fixture
def box(tmp_path) -> Path:
    """The case's own folder, one level below the test's tmp_path: the escape scan of its parent (where
    a ``../`` one level too far would land) then covers this test's files only, not every earlier
    test's folder in the session's temporary root (which made the scan grow with the run)."""
    d = tmp_path / "box"
    d.mkdir()
    return d


def make_case(request, case: Case, tmp_path: Path) -> Path:
    # nested, so that "../" names would land inside tmp_path (and be seen)
    return case.make(bases(request, case), tmp_path / "in" / "a" / "b" / "c" / "ds")


# ---------------------------------------------------------------------------------------- library
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_library_refuses_naming_the_file(request, case, box, monkeypatch):
    root = make_case(request, case, box)
    work = box / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = snapshot(box / "in")
    with pytest.raises(DOCUMENTED) as err:
        read_all(root)
    assert isinstance(err.value, case.error), (type(err.value).__name__, str(err.value))
    assert str(expected_file(case, root)) in str(err.value), str(err.value)
    assert "\n" not in str(err.value)
    assert snapshot(box / "in") == before
    assert list(work.iterdir()) == [] and escaped(box) == []


# ------------------------------------------------------------------------------------------- CLIs
def _cli_argv(root: Path, out: Path) -> list[tuple[str, str, list[str]]]:
    return [
        # every check meets the hostile file; sim_render on every 8th frame (its every-frame cost and
        # exactness are test_validate's: here, robustness is the point)
        ("validate", "dataset-validate", [str(root), "--sim-render-stride", "8"]),
        ("sample", "dataset-sample", [str(root), "--decode", "--hz", "5"]),
        ("convert", "dataset-convert", [str(root), str(out), "-q"]),
    ]


def _check_cli(case: Case, name: str, code: int, stdout: str, stderr: str, want: int, root: Path) -> None:
    assert "Traceback" not in stderr, stderr
    assert code == want, (name, code, stdout[-2000:], stderr)
    if want == 2:
        assert stderr.endswith("\n") and stderr.count("\n") == 1, (name, stderr)
        assert stderr.startswith(f"dataset-{name}: error: "), stderr
        shown = str(expected_file(case, root))
        assert shown in stderr or shown[:40] in stderr, (name, stderr)
    else:
        assert stderr.count("\n") <= 1, (name, stderr)


def _allowed_change(case: Case, tmp_path: Path, before: dict, after: dict, codes: dict) -> None:
    """Only the output folder may appear; metadata.yaml may change only by validate's valid flags."""
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    meta = [k for k in changed if k.endswith("/ds/metadata.yaml") and k.startswith("in/")]
    other = changed - set(meta)
    assert not {k for k in other if not k.startswith("out/")}, sorted(other)[:10]
    if meta:
        assert codes["validate"] == 1, meta
        doc = yaml.safe_load(Path(tmp_path, meta[0]).read_text())
        assert all(isinstance(ep.get("valid"), bool) for ep in doc["episodes"])


def _cli_params() -> list:
    """Every case, the default run's share unmarked: the first two of each family, every third
    metadata case and the in-process library test above for all of them; the rest under -m slow
    (CI). A simulated-base case costs ~1 s here (validate replays its physics)."""
    seen: dict[str, int] = {}
    out = []
    for c in CASES:
        fam = c.id.split("-")[0]
        k = seen[fam] = seen.get(fam, -1) + 1
        default = k < 2 or (fam != "sidecar" and k % 3 == 0)
        out.append(pytest.param(c, id=c.id, marks=() if default else pytest.mark.slow))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", _cli_params())
def test_clis_refuse_in_one_line(request, case, box, monkeypatch, capsys):
    from openarm_sim_dataset.cli import convert, sample, validate

    root = make_case(request, case, box)
    (box / "out").mkdir()
    out = box / "out" / "converted"
    work = box / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    mains = {"validate": validate.main, "sample": sample.main, "convert": convert.main}
    before = snapshot(box)
    codes = {}
    for (name, _prog, argv), want in zip(_cli_argv(root, out), EXIT[case.level]):
        code = mains[name](argv)
        cap = capsys.readouterr()
        _check_cli(case, name, code, cap.out, cap.err, want, root)
        codes[name] = code
    if codes["convert"] != 0:
        assert not out.exists()
    else:  # carried verbatim: the copy is flagged by validate just like its input
        assert validate.main([str(out), "--no-update-metadata", "--sim-render-stride", "8"]) == 1
        capsys.readouterr()
    _allowed_change(case, box, before, snapshot(box), codes)
    assert list(work.iterdir()) == [] and escaped(box) == []


def _subprocess_cases() -> list[Case]:
    """One case per family in the default run."""
    seen, out = set(), []
    for c in CASES:
        fam = c.id.split("-")[0]
        if fam not in seen:
            seen.add(fam)
            out.append(c)
    return out


SUB_FAST = _subprocess_cases()
def _slow_cases(per_family: int = 6) -> list[Case]:
    """Under -m slow: a seeded choice of more cases per family (every case runs in-process above)."""
    rng, out = random.Random(7), []
    for fam in sorted({c.id.split("-")[0] for c in CASES}):
        rest = [c for c in CASES if c.id.startswith(fam + "-") and c not in SUB_FAST]
        out += rng.sample(rest, min(per_family, len(rest)))
    return out


SUB_SLOW = _slow_cases()


def _run_subprocess_case(request, case: Case, box: Path) -> None:
    root = make_case(request, case, box)
    (box / "out").mkdir()
    out = box / "out" / "converted"
    work, home, tmpdir = box / "cwd", box / "home", box / "tmpdir"
    for d in (work, home, tmpdir):
        d.mkdir()
    env = dict(os.environ, HOME=str(home), TMPDIR=str(tmpdir), PYTHONPATH=str(REPO), MUJOCO_GL="egl",
               PYTHONDONTWRITEBYTECODE="1")
    before, src = snapshot(box), source_hash()
    codes = {}
    for (name, _prog, argv), want in zip(_cli_argv(root, out), EXIT[case.level]):
        r = subprocess.run([sys.executable, "-m", f"openarm_sim_dataset.cli.{name}", *argv], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
        _check_cli(case, name, r.returncode, r.stdout, r.stderr, want, root)
        codes[name] = r.returncode
    if codes["convert"] != 0:
        assert not out.exists()
    after = snapshot(box)
    for d in ("cwd", "home", "tmpdir"):
        after = {k: v for k, v in after.items() if k != d}
        before = {k: v for k, v in before.items() if k != d}
    _allowed_change(case, box, before, after, codes)
    for d in (work, home, tmpdir):
        assert list(d.iterdir()) == [], (d, list(d.iterdir()))
    assert escaped(box) == []
    # (a concurrent editor of the working tree would show up here too: the message names the file)
    assert changed_sources(src) == []


@pytest.mark.slow
@pytest.mark.parametrize("case", SUB_FAST, ids=[c.id for c in SUB_FAST])
def test_cli_subprocess_one_per_family(request, case, box):
    _run_subprocess_case(request, case, box)


@pytest.mark.slow
@pytest.mark.parametrize("case", SUB_SLOW, ids=[c.id for c in SUB_SLOW])
def test_cli_subprocess_every_case(request, case, box):
    _run_subprocess_case(request, case, box)


# -------------------------------------------------------------------------------- accepted inputs
@pytest.mark.parametrize("unit", ACCEPTED_UNITS)
def test_timestamp_units_read_as_exact_nanoseconds(tmp_path, unit):
    import shutil

    import numpy as np

    root = tmp_path / "ds"
    shutil.copytree(OWN_FIXTURES / "dataset_0.4.0", root)
    want = with_timestamp_unit(root, unit)
    got = Dataset(root).streams(0, "obs")["arms/right/qpos"]
    assert got.path == root / STATE
    np.testing.assert_array_equal(got.timestamps, want)


def test_corpus_size():
    """The corpus covers every family the issue lists (figures for the note)."""
    fams: dict[str, int] = {}
    for c in CASES:
        fams[c.id.split("-")[0]] = fams.get(c.id.split("-")[0], 0) + 1
    assert set(fams) == {"meta", "parquet", "tar", "jpeg", "sidecar", "folder"}
    assert len(CASES) >= 150, fams
