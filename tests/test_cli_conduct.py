"""What a new user hit, tried as one would (issue 26, item 8), one test each: a dataset with no episodes
is one verdict; every command that writes refuses an output inside any of its inputs, and an output
path that is an existing file, naming it; a closed stdout pipe is a quiet exit; progress off a terminal
is lines, never carriage returns; a bad flag value is one line without the usage block; a missing folder
is reported as missing."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SUBPROCESS_ENV, run_cli, tree_hashes

pytest.importorskip("mujoco")

from openarm_sim_dataset import Dataset  # noqa: E402
from openarm_sim_dataset.cli import LineProgress, progress_bar, progress_line  # noqa: E402

#: one worker: the module's source dataset is built once, not once per worker
pytestmark = pytest.mark.xdist_group("test_cli_conduct")


@pytest.fixture(scope="module")
def src(tmp_path_factory, tiny_generated) -> Path:
    """A copy of the session's tiny generation (2 episodes, one 32x24 camera): commands are pointed at
    outputs inside it, so a failure could not touch the shared dataset."""
    out = Path(shutil.copytree(tiny_generated["path"], tmp_path_factory.mktemp("conduct") / "src"))
    (out.parent / "other").mkdir()  # a second folder for merge's arguments
    return out


def one_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "usage:" not in r.stderr, r
    return lines[0]


# ------------------------------------------------------------------ (a) no episodes: one verdict
def test_a_dataset_with_no_episodes_is_one_verdict(tiny_generated, tmp_path):
    """A generation interrupted before its first commit leaves ``episodes: []``: exit 1 (a failing
    validation, the dataset opens) with one line saying it has no episodes, not rows of per-episode
    checks that read like faults; metadata.yaml is not rewritten; a leftover folder is counted."""
    empty = tmp_path / "empty"
    empty.mkdir()
    doc = yaml.safe_load((tiny_generated["path"] / "metadata.yaml").read_text())
    doc["episodes"] = []
    (empty / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    before = (empty / "metadata.yaml").read_bytes()
    r = run_cli("validate", empty, check=1)
    assert r.stdout.strip().splitlines() == [
        f"{empty}: INVALID ({empty / 'metadata.yaml'}: the dataset has no episodes (episodes: []), nothing to validate)"]
    assert r.stderr == "" and (empty / "metadata.yaml").read_bytes() == before
    report = Dataset(empty).validate()
    assert [(row.check, row.status) for row in report] == [("episodes", "fail")] and not report.valid
    (empty / "episodes" / "0").mkdir(parents=True)  # renamed into place, not yet listed, when the kill came
    r = run_cli("validate", empty, "--json", check=1)
    out = yaml.safe_load(r.stdout)
    assert out["valid"] is False and out["episodes"] == {} and len(out["rows"]) == 1
    assert "1 unlisted folder(s) under episodes/ (0)" in out["rows"][0]["detail"]


# ------------------------------------------------------------------ (b) output inside an input
INSIDE = {
    "render": lambda s: ["render", s, s / "episodes" / "out", "--quiet"],
    "convert": lambda s: ["convert", s, s / "converted", "-q"],
    "convert_rrd": lambda s: ["convert", s, s / "episodes" / "x.rrd", "--format", "rrd", "-q"],
    "repair": lambda s: ["repair", s, "-o", s / "repaired", "-q"],
    "merge": lambda s: ["merge", s, s.parent / "other", "-o", s / "merged", "-q"],
    "show": lambda s: ["show", s, "-o", s / "episodes" / "0" / "frame.png"],
    "evaluate_initial_states": lambda s: ["evaluate", "--policy", "zero", "--initial-states", s, "--out", s / "rollouts"],
    "evaluate_compare": lambda s: ["evaluate", "--policy", "zero", "--episodes", "1", "--out", s / "episodes" / "r",
                                   "--compare", s],
    "evaluate_compare_out": lambda s: ["evaluate", "--policy", "zero", "--episodes", "1", "--out", s.parent / "r",
                                       "--compare", "scripted", "--compare-out", s.parent / "r" / "c"],
    "render_onto_itself": lambda s: ["render", s, s, "--quiet"],
}


@pytest.mark.parametrize("case", sorted(INSIDE))
def test_every_writer_refuses_an_output_inside_its_input(case, src):
    before = tree_hashes(src)
    args = INSIDE[case](src)
    r = run_cli(args[0], *args[1:], check=2)
    line = one_line(r)
    assert line.startswith(f"dataset-{args[0]}: error: ") and ("inside the input" in line or "itself" in line), line
    assert tree_hashes(src) == before  # nothing written, the source untouched
    assert not (src.parent / "r").exists()


# ------------------------------------------------------------------ (g) --out FILE
OUT_FILE = {
    "generate": lambda s, f: ["generate", "--out", f, "--episodes", "1", "--quiet"],
    "render": lambda s, f: ["render", s, f, "--quiet"],
    "convert": lambda s, f: ["convert", s, f, "-q"],
    "merge": lambda s, f: ["merge", s, s.parent / "other", "-o", f],
    "evaluate": lambda s, f: ["evaluate", "--policy", "zero", "--episodes", "1", "--out", f],
    "repair": lambda s, f: ["repair", s, "-o", f],
}


@pytest.mark.parametrize("tool", sorted(OUT_FILE))
def test_an_output_that_is_an_existing_file_is_named_as_a_file(tool, src, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("mine\n")
    args = OUT_FILE[tool](src, f)
    line = one_line(run_cli(args[0], *args[1:], check=2))
    assert f"{f}: exists and is a file, not a folder" in line and "File exists" not in line, line
    assert f.read_text() == "mine\n"


# ------------------------------------------------------------------ (f) a missing folder
@pytest.mark.parametrize("args", [
    ["info", "{missing}"], ["validate", "{missing}"], ["sample", "{missing}"], ["render", "{missing}", "{out}"],
    ["convert", "{missing}", "{out}"], ["merge", "{src}", "{missing}", "-o", "{out}"], ["replay", "{missing}"],
    ["repair", "{missing}"],
], ids=lambda a: a[0])
def test_a_missing_folder_is_reported_as_missing(args, src, tmp_path):
    fill = {"missing": tmp_path / "nope", "out": tmp_path / "out", "src": src}
    args = [a.format(**fill) for a in args]
    line = one_line(run_cli(args[0], *args[1:], check=2))
    assert f"{tmp_path / 'nope'}: no such folder" in line and "not a dataset" not in line, line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ (e) a bad flag value
BAD_FLAGS = {
    "validate": ["{src}", "--max-gap-seconds", "abc"],
    "generate": ["--out", "{out}", "--episodes", "1", "--size", "3"],
    "render": ["{src}", "{out}", "--size", "big"],
    "convert": ["{src}", "{out}", "--format", "hdf5"],
    "merge": ["{src}", "{src}"],  # -o missing
    "info": ["{src}", "--bogus"],
    "sample": ["{src}", "--hz", "fast"],
    "replay": ["{src}", "--from-frame", "x"],
    "show": ["{src}", "-o", "{out}", "--frame", "x"],
    "evaluate": ["--policy", "zero", "--out", "{out}", "--episodes", "many"],
    "repair": ["{src}", "--bogus"],
}


@pytest.mark.parametrize("tool", sorted(BAD_FLAGS))
def test_a_bad_flag_value_is_one_line_without_the_usage_block(tool, src, tmp_path):
    args = [a.format(src=src, out=tmp_path / "out") for a in BAD_FLAGS[tool]]
    line = one_line(run_cli(tool, *args, check=2))
    assert line.startswith(f"dataset-{tool}: error: ") and not (tmp_path / "out").exists(), line
    assert "usage:" in run_cli(tool, "--help").stdout  # the usage is one flag away


# ------------------------------------------------------------------ (c) a closed stdout pipe
@pytest.mark.parametrize("tool, args", [("info", []), ("info", ["--json"]),
                                        ("validate", ["--quick", "--no-update-metadata"])])
def test_a_closed_stdout_pipe_is_a_quiet_exit(tool, args, src):
    """``dataset-info DIR | head -1`` once head has gone: exit 141 (128 + SIGPIPE, as ``cat`` killed by
    the signal), nothing on stderr (was: ``error: : Broken pipe``, exit 2)."""
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line
    try:
        r = subprocess.run([sys.executable, "-m", f"openarm_sim_dataset.cli.{tool}", str(src), *args], stdout=write,
                           stderr=subprocess.PIPE, text=True, env=SUBPROCESS_ENV, timeout=120)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (141, "")


# ------------------------------------------------------------------ (d) progress off a terminal
def test_progress_off_a_terminal_is_newline_terminated_lines(monkeypatch):
    err = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stderr", err)
    bar = progress_bar(3, "generate", unit="ep")
    assert isinstance(bar, LineProgress)
    for k in range(3):
        bar.set_postfix_str(f"success {k + 1}")
        bar.update(1)
    bar.update(0)  # the episodes found done: nothing to say
    bar.close()
    progress_line("1/2 episode 0 pick_place: success")
    assert "\r" not in err.getvalue()
    assert err.getvalue().splitlines() == ["generate: 1/3 success 1", "generate: 2/3 success 2", "generate: 3/3 success 3",
                                           "1/2 episode 0 pick_place: success"]


@pytest.mark.slow  # a real render process: ~6 s
def test_render_progress_written_to_a_file_is_lines(src, tmp_path):
    """A real ``dataset-render`` with its stderr in a file (not a terminal): one line per episode."""
    with open(tmp_path / "err.txt", "w") as err:
        r = subprocess.run([sys.executable, "-m", "openarm_sim_dataset.cli.render", str(src), str(tmp_path / "out"),
                            "--cameras", "head", "--size", "16x12"], stdout=subprocess.PIPE, stderr=err, text=True,
                           env=SUBPROCESS_ENV, timeout=300)
    text = (tmp_path / "err.txt").read_text()
    assert r.returncode == 0, text
    assert "\r" not in text and text.splitlines() == ["render: 1/2 episode 0", "render: 2/2 episode 1"], text
