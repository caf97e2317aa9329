"""Kill tests: real subprocesses, real SIGKILL at seeded random moments, for every writer.

After each kill the output is consistent (absent, or it opens, every listed episode is complete and
byte-identical to an uninterrupted run's, the form checks pass on it, no half-written file sits under a
final name), and rerunning the same command completes to a result identical to an uninterrupted run.

Writers: dataset-generate (episodes committed one by one), dataset-convert and dataset-merge (whole
output built in a temporary sibling, renamed), dataset-validate (metadata.yaml rewritten atomically).
Half of the kills are uniform over the whole run, half aimed at the moment files are being written
(a ``.tmp-`` entry is visible). The default run kills a few times per writer; ``-m slow`` (CI) kills
``KILLS`` times per writer. ``report`` prints the tallies (``pytest -s``).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import SUBPROCESS_ENV, generate_cmd, tree_bytes

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.atomic import TMP_PREFIX

pytest.importorskip("mujoco")

#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_reliability_kill")

KILLS = 20
SEED = 20260530
# SOURCE_DATE_EPOCH fixes dataset-validate's validated_at, so that reruns write byte-identical documents
ENV = dict(SUBPROCESS_ENV, SOURCE_DATE_EPOCH="1800000000")
TALLY: dict[str, list[int]] = {}


def cli(name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"openarm_sim_dataset.cli.{name}", *map(str, args)]


def report(writer: str, survived: bool) -> None:
    t = TALLY.setdefault(writer, [0, 0])
    t[0] += bool(survived)
    t[1] += 1


def run_ok(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def tmp_entries(where: Path) -> set[str]:
    """Temporary (``.tmp-``) entries of any writer in ``where`` and in ``where/episodes``."""
    found = set()
    for d in (where, where / "episodes"):
        try:
            found |= {f"{d}/{e.name}" for e in os.scandir(d) if e.name.startswith(TMP_PREFIX)}
        except (FileNotFoundError, NotADirectoryError):
            pass
    return found


def run_and_kill(cmd: list[str], cwd: Path, rng: random.Random, span: float, watch: Path) -> tuple[bool, str]:
    """Start ``cmd``; SIGKILL it (its process group) at a seeded random moment. Returns (killed, when).

    Half of the moments are uniform over ``1.1 * span`` seconds; the other half wait until a new
    ``.tmp-`` entry appears under ``watch`` (a write in progress) and kill after a short random delay.
    """
    aimed = rng.random() < 0.5
    delay = rng.uniform(0.0, 0.03) if aimed else rng.uniform(0.0, 1.1 * span)
    old = tmp_entries(watch)  # leftovers of an earlier kill do not count
    p = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    t0 = time.perf_counter()
    if aimed:
        deadline = t0 + 3 * span + 30
        while p.poll() is None and not (tmp_entries(watch) - old) and time.perf_counter() < deadline:
            time.sleep(0.001)
        time.sleep(delay)
    else:
        while p.poll() is None and time.perf_counter() - t0 < delay:
            time.sleep(0.002)
    if p.poll() is not None:
        return False, "finished"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    return True, ("aimed" if aimed else "uniform") + f"@{time.perf_counter() - t0:.2f}s"


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    run_ok(cmd, cwd)
    return time.perf_counter() - t0


def final_files(root: Path) -> list[Path]:
    """Entries under ``root`` that are not inside a temporary (``.tmp-``) entry."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(TMP_PREFIX)]
        out += [Path(dirpath) / f for f in filenames if not f.startswith(TMP_PREFIX)]
    return out


def doc_without_commit(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    gen = (doc.get("simulation") or {}).get("generator") or {}
    gen.pop("git_commit", None)  # the tree may move between the reference and the chain
    return doc


def form_rows(ds: Dataset, episodes: list[str]) -> dict[str, bool]:
    return {r.check: r.passed or r.skipped for r in ds.validate(simulation=False, episodes=episodes)}


# --------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def ref(tmp_path_factory, tiny_generated):
    """Uninterrupted reference runs of every writer (tiny settings), with their durations; the
    generation is the session's shared one (conftest.tiny_generated)."""
    base = tmp_path_factory.mktemp("ref")
    work = base / "cwd"
    work.mkdir()
    r = {"base": base, "cwd": work}
    r["gen_cmd"] = lambda out: generate_cmd(out)
    r["gen"] = tiny_generated["path"]
    r["gen_s"] = tiny_generated["seconds"]
    r["gen_form"] = form_rows(Dataset(r["gen"]), ["0", "1"])
    r["in2"] = base / "in2"
    shutil.copytree(r["gen"], r["in2"])
    r["conv_cmd"] = lambda out: cli("convert", r["gen"], out, "--camera-format", "tar", "-q")
    r["conv"] = base / "conv"
    r["conv_s"] = timed(r["conv_cmd"](r["conv"]), work)
    r["merge_cmd"] = lambda out: cli("merge", r["gen"], r["in2"], "-o", out, "-q", "--allow-duplicates")  # in2 copies gen
    r["merge"] = base / "merge"
    r["merge_s"] = timed(r["merge_cmd"](r["merge"]), work)
    r["val_in"] = base / "val_in"
    shutil.copytree(r["gen"], r["val_in"])
    r["val_old"] = (r["val_in"] / "metadata.yaml").read_bytes()
    r["val_cmd"] = lambda ds: cli("validate", ds, "--no-simulation")
    r["val_s"] = timed(r["val_cmd"](r["val_in"]), work)
    r["val_new"] = (r["val_in"] / "metadata.yaml").read_bytes()
    assert r["val_new"] != r["val_old"] and b"valid: " in r["val_new"]
    r["inputs"] = {p: tree_bytes(p, skip=()) for p in (r["gen"], r["in2"])}
    return r


@pytest.fixture(scope="module", autouse=True)
def print_tally():
    yield
    if TALLY:
        print("\nkills survived / tried: " + ", ".join(f"{w} {s}/{n}" for w, (s, n) in sorted(TALLY.items())))


# ------------------------------------------------------------------------------------ generate
def check_generate(out: Path, ref: dict) -> None:
    """The state of a killed generation: absent, or a dataset whose listed episodes are complete."""
    if not out.exists():
        return
    meta = out / "metadata.yaml"
    if not meta.exists():
        assert [p.name for p in final_files(out)] == [], final_files(out)
        return
    ds = Dataset(out)  # opens
    listed = ds.episode_ids  # metadata.yaml's entries, then its journal's (episodes committed, not yet folded)
    assert set(listed) <= {"0", "1"}, listed
    want = doc_without_commit(ref["gen"] / "metadata.yaml")
    got = doc_without_commit(meta)
    assert got["simulation"] == want["simulation"]
    # what openarm_dataset sees (metadata.yaml alone) is a prefix of what was committed
    assert got["episodes"] == want["episodes"][: len(got["episodes"])] and len(got["episodes"]) <= len(listed)
    assert ds.episodes == want["episodes"][: len(listed)]
    ref_files = tree_bytes(ref["gen"])
    for p in final_files(out):
        rel = p.relative_to(out).as_posix()
        if rel in ("metadata.yaml", "metadata.journal"):
            continue
        # every file under a final name, listed or not (renamed, not yet listed), is complete
        assert rel in ref_files and p.read_bytes() == ref_files[rel], rel
    for ep in listed:
        n_ref = sum(1 for k in ref_files if k.startswith(f"episodes/{ep}/"))
        assert sum(1 for p in final_files(out / "episodes" / ep)) == n_ref, ep
    if listed:
        rows = form_rows(ds, listed)
        bad = [k for k, ok in rows.items() if not ok and ref["gen_form"].get(k, False) and k != "episode_folders"]
        assert bad == [], bad


def check_generate_final(out: Path, ref: dict) -> None:
    assert tree_bytes(out) == tree_bytes(ref["gen"])
    assert doc_without_commit(out / "metadata.yaml") == doc_without_commit(ref["gen"] / "metadata.yaml")
    assert not [p for p in out.rglob(f"{TMP_PREFIX}*")], "leftovers after a completed run"


def kill_generate(ref: dict, tmp_path: Path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    chain, done, out = 0, 0, None
    outcomes = []
    while done < kills:
        if out is None:
            out = tmp_path / f"chain{chain}" / "ds"
            chain += 1
        # aimed kills watch the episode commits (3 in 4) or the first metadata write
        watch = out / "episodes" if rng.random() < 0.75 else out
        killed, when = run_and_kill(ref["gen_cmd"](out), ref["cwd"], rng, ref["gen_s"], watch)
        check_generate(out, ref)
        outcomes.append(when)
        if killed:
            done += 1
            report("generate", True)
        else:
            check_generate_final(out, ref)
            out = None
    if out is not None:
        run_ok(ref["gen_cmd"](out), ref["cwd"])  # the same command resumes to the reference
        check_generate_final(out, ref)
    print(f"\ngenerate: {done} kills over {chain} chains: {outcomes}")


@pytest.mark.slow  # the default run keeps test_generate's killed-resume test; CI runs this and 20 kills
def test_generate_survives_kills(ref, tmp_path):
    kill_generate(ref, tmp_path, 3, SEED)


@pytest.mark.slow
def test_generate_survives_many_kills(ref, tmp_path):
    kill_generate(ref, tmp_path, KILLS, SEED + 1)


# ------------------------------------------------------------------------- convert and merge
def check_whole_output(out: Path, reference: Path) -> None:
    """Built in a temporary sibling and renamed: ``out`` is absent or identical to the reference."""
    if out.exists():
        assert tree_bytes(out, skip=()) == tree_bytes(reference, skip=())
    leftovers = [p.name for p in out.parent.iterdir() if p.name != out.name]
    assert all(n.startswith(TMP_PREFIX) for n in leftovers), leftovers


def kill_whole(ref: dict, tmp_path: Path, writer: str, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    cmd, reference, span = ref[f"{writer}_cmd"], ref[writer], ref[f"{writer}_s"]
    done, i, outcomes = 0, 0, []
    while done < kills:
        out = tmp_path / f"run{i}" / "out"
        out.parent.mkdir()
        i += 1
        killed, when = run_and_kill(cmd(out), ref["cwd"], rng, span, out.parent)
        outcomes.append(when + ("/out" if out.exists() else "/absent"))
        check_whole_output(out, reference)
        if killed:
            done += 1
            report(writer, True)
            if not out.exists():
                run_ok(cmd(out), ref["cwd"])  # the same command completes
            check_whole_output(out, reference)
            assert out.exists()
        for p, files in ref["inputs"].items():  # inputs never modified
            assert tree_bytes(p, skip=()) == files
    print(f"\n{writer}: {done} kills: {outcomes}")


@pytest.mark.slow  # CI, beside its 20-kill sibling; the module's shared setup is ~12 s
def test_convert_survives_kills(ref, tmp_path):
    kill_whole(ref, tmp_path, "conv", 2, SEED + 2)


@pytest.mark.slow  # CI, beside its 20-kill sibling; the module's shared setup is ~12 s
def test_merge_survives_kills(ref, tmp_path):
    kill_whole(ref, tmp_path, "merge", 2, SEED + 3)


@pytest.mark.slow
def test_convert_survives_many_kills(ref, tmp_path):
    kill_whole(ref, tmp_path, "conv", KILLS, SEED + 4)


@pytest.mark.slow
def test_merge_survives_many_kills(ref, tmp_path):
    kill_whole(ref, tmp_path, "merge", KILLS, SEED + 5)


# ---------------------------------------------------------------------- validate's metadata update
def kill_validate(ref: dict, tmp_path: Path, kills: int, seed: int) -> None:
    """metadata.yaml is always the old or the new complete document; rerunning gives the new one."""
    rng = random.Random(seed)
    ds = tmp_path / "ds"
    shutil.copytree(ref["gen"], ds)
    others = tree_bytes(ds)  # everything but metadata.yaml
    done, seen = 0, {"old": 0, "new": 0}
    # the reference run's time; the first run of a fresh checkout also compiles the package, so a run that
    # ends before its kill shortens the span to what it took (else no kill might ever land, and the loop spin)
    span = ref["val_s"]
    while done < kills:
        (ds / "metadata.yaml").write_bytes(ref["val_old"])
        # aim at the end of the run, where the document is written
        p = subprocess.Popen(ref["val_cmd"](ds), cwd=ref["cwd"], env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        delay = rng.uniform(0.5 * span, 1.1 * span)
        t0 = time.perf_counter()
        while p.poll() is None and time.perf_counter() - t0 < delay:
            time.sleep(0.002)
        if p.poll() is not None:
            span = min(span, time.perf_counter() - t0)
            continue
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        done += 1
        now = (ds / "metadata.yaml").read_bytes()
        assert now in (ref["val_old"], ref["val_new"])
        seen["old" if now == ref["val_old"] else "new"] += 1
        Dataset(ds)  # opens
        # a kill inside the atomic write leaves its .tmp- file (checked just below), nothing else changes
        assert {k: v for k, v in tree_bytes(ds).items() if not Path(k).name.startswith(TMP_PREFIX)} == others
        assert all(p.name.startswith(TMP_PREFIX) or p.name == "metadata.yaml" for p in ds.iterdir() if p.is_file())
        r = subprocess.run(ref["val_cmd"](ds), cwd=ref["cwd"], env=ENV, capture_output=True, text=True, timeout=600)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
        assert (ds / "metadata.yaml").read_bytes() == ref["val_new"]
        assert not list(ds.glob(f"{TMP_PREFIX}*")), "the rerun removes the killed run's temporary file"
        report("validate", True)
    print(f"\nvalidate: {done} kills, metadata.yaml found old {seen['old']} / new {seen['new']} times")


@pytest.mark.slow  # CI, beside its 20-kill sibling; the module's shared setup is ~12 s
def test_validate_metadata_update_survives_kills(ref, tmp_path):
    kill_validate(ref, tmp_path, 2, SEED + 6)


@pytest.mark.slow
def test_validate_metadata_update_survives_many_kills(ref, tmp_path):
    kill_validate(ref, tmp_path, KILLS, SEED + 7)
