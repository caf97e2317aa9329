"""Command-line tools as real subprocesses: output, exit codes, one-line errors."""

from __future__ import annotations

import subprocess
import sys

from conftest import OWN_FIXTURES, REPO


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_dataset_sample_cli():
    r = run("openarm_sim_dataset.cli.sample", str(OWN_FIXTURES / "dataset_0.3.0"), "--hz", "10", "--decode")
    assert r.returncode == 0, r.stderr
    assert "samples from 2 episode(s) at 10 Hz" in r.stdout


def test_dataset_sample_cli_bad_input(tmp_path):
    r = run("openarm_sim_dataset.cli.sample", str(tmp_path / "missing"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "missing: no such folder" in r.stderr
    (tmp_path / "metadata.yaml").write_text("episodes: [\n")
    r = run("openarm_sim_dataset.cli.sample", str(tmp_path))
    assert r.returncode == 2 and "metadata.yaml: invalid YAML" in r.stderr and "Traceback" not in r.stderr
