"""dataset-replay: exact replay in a fresh process, resume, re-render; refusals that name what differs (in-process)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml
from conftest import run_cli, run_cli_process

from openarm_sim_dataset import sidecar

pytest.importorskip("mujoco")


def edit_sim(path, **changes):
    doc = yaml.safe_load((path / "metadata.yaml").read_text())
    for key, value in changes.items():
        if callable(value):
            value(doc["simulation"])
        else:
            doc["simulation"][key] = value
    (path / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.slow
def test_replay_exact_resume_and_rerender(generated):
    # a fresh interpreter (not the one that generated the data): exactness must not depend on process state
    r = run_cli_process("replay", generated, "--episode", "1", "--render")
    assert "episode 1: from initial state: " in r.stdout and "largest difference qpos 0, qvel 0" in r.stdout
    frames = int(r.stdout.split("from initial state: ")[1].split("/")[0])
    assert f"{frames}/{frames} frames bit-exact" in r.stdout
    assert "depth exact" in r.stdout and "labels exact" in r.stdout
    for key in ("depth exact", "labels exact", "JPEG bytes identical"):
        done, total = r.stdout.split(key + " ")[1].split(",")[0].split("/")
        assert done == total, (key, r.stdout)
    r = run_cli("replay", generated, "--episode", "0", "--from-frame", "5")
    assert "from frame 5:" in r.stdout and "bit-exact" in r.stdout
    assert "replay equal: states of 1 episode(s) as stored" in r.stdout


@pytest.mark.slow
def test_render_exits_1_on_a_stale_frame(generated, tmp_path):
    """A JPEG replaced by the frame before it: states replay exactly, the images do not (exit 1)."""
    from corrupt import STALE_FRAME, plant

    copy = tmp_path / "copy"
    plant(generated, copy, "stale_frame")
    r = run_cli("replay", copy, "--episode", "0", "--render", check=1)
    assert "largest difference qpos 0, qvel 0" in r.stdout
    assert f"first differing frame: wrist_right #{STALE_FRAME}" in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "replay differs: JPEG bytes (episode 0)"


def test_refuses_across_provenance_mismatch_naming_it(generated, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    edit_sim(copy, mujoco_version="3.1.0")
    r = run_cli("replay", copy, check=2)
    assert "refused" in r.stderr and "MuJoCo 3.1.0 recorded" in r.stderr and r.stderr.count("\n") == 1

    shutil.rmtree(copy)
    shutil.copytree(generated, copy)

    def asset_changed(sim):
        name = sorted(sim["asset_sha256"])[0]
        sim["asset_sha256"][name] = "0" * 64
        sim["model_sha256"] = "f" * 64

    edit_sim(copy, asset_changed=asset_changed)
    r = run_cli("replay", copy, check=2)
    first = sorted(yaml.safe_load((generated / "metadata.yaml").read_text())["simulation"]["asset_sha256"])[0]
    assert "model hash ffffffffffff recorded" in r.stderr and f"asset files changed: {first}" in r.stderr

    shutil.rmtree(copy)
    shutil.copytree(generated, copy)
    edit_sim(copy, timestep_s=0.001)
    r = run_cli("replay", copy, check=2)
    assert "timestep 0.001 s recorded" in r.stderr


def test_drift_is_reported_with_package_differences(generated, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    p = copy / "episodes/1/sim/sidecar.npz"
    side = sidecar.load_npz(p)
    side["physics_ctrl"][len(side["physics_ctrl"]) // 3, 0] += 1e-9  # one command, off by a nanoradian
    sidecar.save_npz(p, side)
    edit_sim(copy, numpy="1.0.0")
    r = run_cli("replay", copy, "--episode", "1", check=1)
    assert "first mismatch at frame" in r.stdout
    assert "replay differs: states" in r.stdout and "numpy 1.0.0 recorded" in r.stdout
    assert not np.array_equal(side["physics_ctrl"], sidecar.load_npz(generated / "episodes/1/sim/sidecar.npz")["physics_ctrl"])
