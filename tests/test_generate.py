"""Generation on the real OpenArm model: layout, reference interop, determinism, exact replay, resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import (
    CLI_ARGS,
    REPO,
    SMALL,
    SUBPROCESS_ENV,
    assert_reads_like_reference,
    generate_cmd,
    tiny_config,
    tree_bytes,
)

from openarm_sim_dataset import Dataset

pytest.importorskip("mujoco")

from openarm_sim_dataset import sidecar  # noqa: E402
from openarm_sim_dataset.sim.generate import GenerateConfig, GenerateError, generate, wilson_interval  # noqa: E402
from openarm_sim_dataset.sim.models import load_model  # noqa: E402
from openarm_sim_dataset.sim.recorder import RecordConfig  # noqa: E402
from openarm_sim_dataset.sim.replay import replay  # noqa: E402
from openarm_sim_dataset.sim.scene import SceneConfig  # noqa: E402


def test_layout_and_reference_reads_it(generated):
    od = pytest.importorskip("openarm_dataset")
    ref = od.Dataset(generated)
    assert ref.validate()
    assert assert_reads_like_reference(generated) > 1000
    ds = Dataset(generated)
    sim = ds.meta.simulation
    assert sim["model_sha256"] and sim["mujoco_version"] and sim["asset_sha256"]
    assert set(sim["cameras"]) == {"head", "wrist_right", "wrist_left"} and len(sim["cameras"]["head"]["K"]) == 3
    for i in range(2):
        ep = ds.episode(i)
        assert ep["outcome"] in ("success", "ik_failed", "grasp_missed", "dropped_lifting", "dropped_carrying",
                                 "missed_tray", "never_picked", "timeout")
        obs = ds.streams(i, "obs")
        assert set(obs) == {f"arms/{s}/{a}" for s in ("right", "left") for a in ("qpos", "qvel", "qtorque")}
        ts = obs["arms/right/qpos"].timestamps
        assert np.all(np.diff(ts) == 4_000_000)  # 250 Hz exactly
        cam = ds.load_camera("head", i)
        assert np.all(np.diff(cam.timestamps) == 200_000_000)  # 5 Hz exactly
        assert cam.get_frame(0).load().shape == (96, 128, 3)


def test_sample_returns_sim_streams_aligned(generated):
    ds = Dataset(generated)
    side = sidecar.load_npz(generated / "episodes/1/sim/sidecar.npz")
    samples = list(ds.sample(5, episode=1))
    assert samples
    for s in samples:
        k = int(np.searchsorted(side["frame_timestamp"], s.timestamp_ns, side="right") - 1)
        np.testing.assert_array_equal(s.sim["object_pose"], side["object_pose"][k])
        np.testing.assert_array_equal(s.sim["cam_mat/wrist_right"], side["cam_mat_wrist_right"][k])
        assert s.sim["depth/head"].shape == (96, 128) and s.sim["labels/head"].dtype == np.uint8
        assert s.cameras["head"].timestamp_ns == side["frame_timestamp"][k]


def test_replay_is_bit_exact_and_resume_needs_the_full_state(generated):
    model = load_model(SMALL.scene)
    for i in range(2):
        side = sidecar.load_npz(generated / f"episodes/{i}/sim/sidecar.npz")
        shapes = sidecar.expected_shapes(list(SMALL.scene.cameras), model.nq, model.nv, model.nu, len(side["initial_state"]))
        assert sidecar.check_arrays(side, shapes, "x") == []
        full = replay(model, side)
        assert full.ok and full.max_qpos_diff == 0.0, full
        mid = len(side["step"]) // 2
        assert replay(model, side, from_frame=mid).ok
    # resuming from qpos+qvel alone (no warm start) is not exact over a contact-rich episode
    side = sidecar.load_npz(generated / "episodes/1/sim/sidecar.npz")
    naive = replay(model, side, from_frame=len(side["step"]) // 2, state_only="qpos_qvel")
    assert not naive.ok and naive.max_qpos_diff > 0


@pytest.mark.slow
def test_regeneration_is_identical_file_for_file(tiny_generated, tmp_path):
    """Episode 1 generated again, alone and in this process, equals the one the tiny CLI run made."""
    summary = generate(tmp_path / "again", range(1, 2), tiny_config())
    assert summary.made == 1
    a = {k: v for k, v in tree_bytes(tiny_generated["path"]).items() if k.startswith("episodes/1/")}
    b = tree_bytes(tmp_path / "again")
    assert a.keys() == b.keys() and len(a) > 10
    assert [k for k in a if a[k] != b[k]] == []


@pytest.mark.slow
def test_contradicting_arguments_and_second_writer_refused(generated, tmp_path):
    import shutil

    from openarm_sim_dataset.sim.generate import OutputLock

    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    other = GenerateConfig(seed=10, scene=SceneConfig(width=128, height=96), record=RecordConfig(camera_hz=10.0))
    with pytest.raises(GenerateError, match="camera_hz: stored 5.0 vs now 10.0"):
        generate(copy, range(3), other)
    with pytest.raises(GenerateError, match="seed: stored 10 vs now 11"):
        generate(copy, range(3), GenerateConfig(seed=11, scene=SMALL.scene, record=SMALL.record))
    lock = OutputLock(copy)
    try:
        r = subprocess.run([sys.executable, "-m", "openarm_sim_dataset.cli.generate", "--out", str(copy),
                            "--episodes", "3", *CLI_ARGS], capture_output=True, text=True, cwd=REPO, timeout=300)
    finally:
        lock.release()
    assert r.returncode == 2 and "another process is writing" in r.stderr and "Traceback" not in r.stderr
    summary = generate(copy, range(2), SMALL)  # everything present: nothing to do
    assert summary.made == 0 and summary.skipped == 2


@pytest.mark.slow
def test_killed_generation_resumes_to_identical_dataset(tiny_generated, tmp_path):
    out = tmp_path / "killed"
    cmd = generate_cmd(out)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=SUBPROCESS_ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    # wait until episode 0 is listed, then kill while episode 1 is being simulated
    while time.time() < deadline and proc.poll() is None:
        meta = out / "metadata.yaml"
        if meta.exists() and "id: '0'" in meta.read_text():
            break
        time.sleep(0.01)
    time.sleep(0.2)
    assert proc.poll() is None, "generation finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ds = Dataset(out)  # opens, lists only complete episodes
    assert ds.episode_ids == ["0"]
    r = subprocess.run(cmd, cwd=tmp_path, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "1 generated, 1 already present" in r.stdout
    # two generations of one seed (one killed and resumed) are identical file for file, nothing excluded:
    # metadata.yaml included, no lock or other non-data file left in the folder
    assert tree_bytes(out, skip=()) == tree_bytes(tiny_generated["path"], skip=())
    assert Dataset(out).episode_ids == ["0", "1"]


def test_wilson_interval():
    lo, hi = wilson_interval(95, 100)
    assert abs(lo - 0.8882) < 1e-3 and abs(hi - 0.9785) < 1e-3
    assert wilson_interval(0, 0) == (0.0, 1.0)
