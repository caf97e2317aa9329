"""Concurrent writers on one output: a second dataset-generate refuses with a clear one-line message
while the first runs; the lock (``flock`` on ``<parent>/.<out>.lock``, beside the output) dies with its holder, so a SIGKILLed
writer never leaves an output locked; two generators started at once cooperate (one works, the other
refuses or finds everything done) and the result equals an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SUBPROCESS_ENV as ENV, generate_cmd as gen, tree_bytes

from openarm_sim_dataset.sim.generate import lock_path

pytest.importorskip("mujoco")


def run(cmd, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def reference(tiny_generated) -> Path:
    """The uninterrupted run (the session's shared tiny generation)."""
    return tiny_generated["path"]


@pytest.mark.slow  # CI; the default run keeps the refusal (test_generate: a held lock refuses the CLI in one line)
# and the dead holder (test_generate: a SIGKILLed generation resumes, so its lock died with it)
def test_second_writer_refused_and_dead_holder_does_not_block(reference, tmp_path):
    out = tmp_path / "ds"
    first = subprocess.Popen(gen(out), cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "metadata.yaml").exists():
        time.sleep(0.01)
    # held still while it holds the lock: a tiny generation can otherwise finish (and remove its lock)
    # while the second writer starts
    os.killpg(first.pid, signal.SIGSTOP)
    assert first.poll() is None, "first writer ended too early"
    second = run(gen(out), tmp_path)
    assert second.returncode == 2, second
    assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
    assert "another process is writing this dataset (lock held)" in second.stderr
    assert str(out) in second.stderr
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert lock_path(out).exists()  # the file stays beside the output; the kernel released the lock
    assert not (out / ".lock").exists()
    third = run(gen(out), tmp_path)
    assert third.returncode == 0, third.stderr
    assert not lock_path(out).exists()  # removed by the holder that finished
    assert tree_bytes(out, skip=()) == tree_bytes(reference, skip=())  # nothing excluded


@pytest.mark.slow  # CI; the default run keeps the dead-holder case (test_generate's killed run resumes)
def test_stale_lock_file_with_dead_pid_is_not_stuck(reference, tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock_path(out).write_text(f"{dead.pid}\n")  # what a killed holder leaves behind
    (out / ".lock").write_text(f"{dead.pid}\n")  # and what versions that locked inside the output left
    r = run(gen(out), tmp_path)
    assert r.returncode == 0, r.stderr
    assert not lock_path(out).exists() and not (out / ".lock").exists()
    assert tree_bytes(out, skip=()) == tree_bytes(reference, skip=())  # nothing excluded


@pytest.mark.slow  # a race of two whole generations; the default run keeps the refusal and stale-lock tests
def test_two_generators_started_together_cooperate(reference, tmp_path):
    out = tmp_path / "ds"
    procs = [subprocess.Popen(gen(out), cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes in ([0, 0], [0, 2]), results
    for code, _out, err in results:
        assert "Traceback" not in err
        if code == 2:
            assert err.count("\n") == 1 and "lock held" in err
    assert tree_bytes(out, skip=()) == tree_bytes(reference, skip=())  # nothing excluded
