"""A machine whose OpenGL libraries are missing: one line naming what to install, exit 2, before any
output exists (real processes; the missing library is simulated by an OpenGL package that fails to load,
first on the path, as PyOpenGL does when libEGL.so.1 is absent)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, SUBPROCESS_ENV

pytest.importorskip("mujoco")


@pytest.fixture()
def broken_gl_env(tmp_path) -> dict:
    fake = tmp_path / "fake" / "OpenGL"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        'raise ImportError("libEGL.so.1: cannot open shared object file: No such file or directory")\n')
    return dict(SUBPROCESS_ENV, PYTHONPATH=f"{fake.parent}:{REPO}", MUJOCO_GL="egl")


def run(env, tool, *args):
    return subprocess.run([sys.executable, "-m", f"openarm_sim_dataset.cli.{tool}", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_missing_gl_is_one_line_before_any_work(broken_gl_env, generated_one, tmp_path):
    out = tmp_path / "out"
    r = run(broken_gl_env, "generate", "--out", out, "--episodes", 1, "--size", "32x24", "--quiet")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "MUJOCO_GL=egl" in r.stderr and "libEGL.so.1" in r.stderr
    assert "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri" in r.stderr
    assert not out.exists()
    before = (generated_one / "metadata.yaml").read_bytes()
    r = run(broken_gl_env, "validate", generated_one, "--regenerate", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "apt-get install" in r.stderr, r.stderr
    assert (generated_one / "metadata.yaml").read_bytes() == before  # no episode flagged for the machine's fault
    r = run(broken_gl_env, "replay", generated_one, "--render")
    assert r.returncode == 2 and "MuJoCo cannot render" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_rendering_check_passes_here():
    from openarm_sim_dataset.gl import check_rendering

    check_rendering()
    check_rendering()  # once per process
