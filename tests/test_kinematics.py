"""Arm state representations: FK/rot6d agree with openarm_dataset, IK seeded from qpos, files untouched."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from openarm_sim_dataset import Dataset, kinematics as K
from openarm_sim_dataset.streams import state_table
from openarm_sim_dataset.synthetic import write_synthetic

pytest.importorskip("mujoco")


#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_kinematics")

def tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("kin") / "src", episodes=1, seconds=1.0, camera_hz=10, size=(32, 24))


@pytest.mark.parametrize("state", ["pose", "rot6d"])
def test_fk_and_rot6d_agree_with_openarm_dataset(synth, state):
    od = pytest.importorskip("openarm_dataset")
    before = tree_hashes(synth)
    ref = od.Dataset(synth)
    ds = Dataset(synth)
    for loader in ("load_obs", "load_action"):
        r = getattr(ref, loader)(ref.meta.episodes[0], state=state)
        o = getattr(K, loader)(ds, 0, state)
        assert list(r) == list(o)
        for key in r:
            assert list(r[key].columns) == list(o[key].columns), key
            np.testing.assert_array_equal(r[key].index.to_numpy(), o[key].index.to_numpy())
            a, b = r[key].to_numpy(np.float64), o[key].to_numpy(np.float64)
            np.testing.assert_allclose(b[:, :3], a[:, :3], atol=1e-5, rtol=0)  # positions within 1e-5 m
            np.testing.assert_allclose(b, a, atol=1e-5, rtol=0)
    assert tree_hashes(synth) == before  # files never modified


def test_sample_with_state_converts_the_picked_rows(synth):
    ds = Dataset(synth)
    samples = list(K.sample(ds, 5, "rot6d"))
    plain = list(ds.sample(5))
    assert len(samples) == len(plain) > 0
    q = np.stack([s.obs["arms/left/qpos"] for s in plain])
    expected = K.quat_to_rot6d(K.arm_kinematics().qpos_to_pose("left", q))
    got = np.stack([s.obs["arms/left/rot6d"] for s in samples])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert "arms/left/qpos" not in samples[0].obs and "arms/left/qvel" in samples[0].obs


def _pose_only(tmp_path: Path, synth: Path) -> Path:
    """A copy whose action streams store pose (from FK of the recorded qpos) instead of qpos."""
    import shutil

    out = tmp_path / "pose_only"
    shutil.copytree(synth, out)
    ds = Dataset(out)
    for side in ("right", "left"):
        s = ds.streams(0, "action")[f"arms/{side}/qpos"]
        pose = K.arm_kinematics().qpos_to_pose(side, s.values)
        pq.write_table(state_table(s.timestamps, {"pose": pose}), s.path)
    return out


def test_ik_recovers_the_pose_from_the_recorded_qpos_seed(synth, tmp_path):
    out = _pose_only(tmp_path, synth)
    ds = Dataset(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every sample solvable: no warning
        qpos = K.load_action(ds, 0, "qpos")
    pose = K.load_action(ds, 0, "pose")
    for side in ("right", "left"):
        q = qpos[f"arms/{side}/qpos"].to_numpy(np.float32)
        p = pose[f"arms/{side}/pose"].to_numpy(np.float32)
        back = K.arm_kinematics().qpos_to_pose(side, q)
        np.testing.assert_allclose(back[:, :3], p[:, :3], atol=2e-4)  # 0.1 mm IK tolerance (+ float32)
        np.testing.assert_allclose(np.abs((back[:, 3:7] * p[:, 3:7]).sum(1)), 1, atol=1e-5)
        np.testing.assert_array_equal(q[:, 7], p[:, 7])  # gripper passes through


def test_ik_warns_for_unreachable_samples(synth, tmp_path):
    out = _pose_only(tmp_path, synth)
    s = Dataset(out).streams(0, "action")["arms/right/pose"]
    values = s.values.copy()
    values[5:8, 0] = 3.0  # 3 m away: out of reach
    pq.write_table(state_table(s.timestamps, {"pose": values}), s.path)
    with pytest.warns(UserWarning, match=r"did not reach .* for 3 of"):
        K.load_action(Dataset(out), 0, "qpos")


def test_rot6d_columns_are_orthonormal():
    q = np.random.default_rng(0).normal(size=(50, 4))
    pose = np.concatenate([np.zeros((50, 3)), q, np.ones((50, 1))], axis=1)
    r6 = K.quat_to_rot6d(pose)
    np.testing.assert_allclose(np.linalg.norm(r6[:, 3:6], axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(r6[:, 6:9], axis=1), 1, atol=1e-6)
    np.testing.assert_allclose((r6[:, 3:6] * r6[:, 6:9]).sum(1), 0, atol=1e-6)
    with pytest.raises(ValueError, match="state must be one of"):
        K.convert_rows("right", {"qpos": np.zeros((1, 8))}, "euler")


def test_dataset_state_option_delegates_to_kinematics():
    from conftest import OWN_FIXTURES

    from openarm_sim_dataset import Dataset

    ds = Dataset(OWN_FIXTURES / "dataset_0.3.0")
    pose = ds.load_obs(0, state="pose")
    assert "arms/right/pose" in pose and "arms/right/qpos" not in pose
    assert list(pose["arms/right/pose"].columns) == ["x", "y", "z", "qw", "qx", "qy", "qz", "gripper"]
    rot = ds.load_action(0, state="rot6d")["arms/left/rot6d"]
    assert rot.shape[1] == 10
    s = next(ds.sample(10, state="pose"))
    assert s.obs["arms/right/pose"].shape == (8,)
