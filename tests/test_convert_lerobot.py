"""dataset-convert --format lerobot_v2.1 / lerobot_v3.0 / gr00t: LeRobot's rules, values, video fidelity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import run_cli
from lerobot_rules import check_v21, check_v30

from openarm_sim_dataset import Dataset, sampler
from openarm_sim_dataset.synthetic import write_synthetic

pytest.importorskip("av")

from openarm_sim_dataset.convert.video import decode_mp4, encode_mp4, psnr  # noqa: E402

#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_convert_lerobot")

FPS = 10
MIN_PSNR_DB = 30.0  # decoded H.264 (crf 18, yuv420p) vs the source JPEG decoded by PIL


def cli(*args, check: int | None = 0):
    return run_cli("convert", *args, check=check)


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    """3 episodes, 250 Hz jittered streams, two 30 Hz cameras at 96x72, two tasks, one failure."""
    root = write_synthetic(tmp_path_factory.mktemp("lr") / "src", episodes=3, seconds=1.5, camera_hz=30,
                           size=(96, 72), jitter_ns=300_000)
    path = root / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["tasks"] = [{"prompt": "wave"}, {"prompt": "unused"}, {"prompt": "point"}]
    for ep, (task, ok) in zip(doc["episodes"], [(2, True), (0, False), (2, True)]):
        ep["task_index"], ep["success"] = task, ok
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


@pytest.fixture(scope="module")
def outputs(src, tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("lr_out")
    out = {}
    for fmt in ("lerobot_v2.1", "lerobot_v3.0", "gr00t"):
        out[fmt] = base / fmt
        r = cli(src, out[fmt], "--format", fmt, "--fps", FPS)
        assert "3 episode(s)" in r.stdout and "frame(s)" in r.stdout and " s (" in r.stdout
    return out


def _expected(src: Path):
    """Per episode: (causal Dataset.sample rows of obs/action, camera frame indices)."""
    ds = Dataset(src)
    out = []
    for i in range(ds.num_episodes):
        samples = list(ds.sample(FPS, episode=i, align="previous"))
        obs = np.stack([np.concatenate([s.obs["arms/right/qpos"], s.obs["arms/left/qpos"]]) for s in samples])
        act = np.stack([np.concatenate([s.action["arms/right/qpos"], s.action["arms/left/qpos"]]) for s in samples])
        frames = {c: [s.cameras[c] for s in samples] for c in ds.camera_names}
        out.append((obs, act, frames))
    return out


@pytest.mark.parametrize("fmt", ["lerobot_v2.1", "lerobot_v3.0"])
def test_output_follows_lerobots_rules_and_equals_the_causal_sample(fmt, src, outputs):
    root = outputs[fmt]
    videos = (check_v21 if fmt == "lerobot_v2.1" else check_v30)(root)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["features"]["observation.state"]["names"][:2] == ["right_joint1.pos", "right_joint2.pos"]
    assert info["features"]["action"]["names"][15] == "left_gripper.pos"
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    table = pads.dataset(sorted((root / "data").rglob("*.parquet")), format="parquet").to_table()
    expected = _expected(src)
    worst = np.inf
    for i, (obs, act, frames) in enumerate(expected):
        rows = table.filter(pads.field("episode_index") == i)
        np.testing.assert_array_equal(np.asarray(rows.column("observation.state").to_pylist(), np.float32), obs)
        np.testing.assert_array_equal(np.asarray(rows.column("action").to_pylist(), np.float32), act)
        for cam, fr in frames.items():
            decoded = videos[(i, f"observation.images.{cam}")]
            assert len(decoded) == len(fr)
            for img, frame in zip(decoded, fr):
                worst = min(worst, psnr(img, frame.load()))
    assert worst >= MIN_PSNR_DB, worst
    print(f"{fmt}: min PSNR of decoded frames vs source JPEGs {worst:.1f} dB")
    # tasks: only the used ones, contiguous; the unused middle task is dropped
    if fmt == "lerobot_v2.1":
        tasks = [json.loads(x) for x in (root / "meta/tasks.jsonl").read_text().splitlines()]
        assert tasks == [{"task_index": 0, "task": "wave"}, {"task_index": 1, "task": "point"}]
    else:
        assert list(pq.read_table(root / "meta/tasks.parquet").to_pandas().index) == ["wave", "point"]
    assert sorted(set(table.column("task_index").to_pylist())) == [0, 1]
    assert table.filter(pads.field("episode_index") == 1).column("task_index").to_pylist()[0] == 0


def test_gr00t_is_v21_plus_modality(outputs):
    check_v21(outputs["gr00t"])
    modality = json.loads((outputs["gr00t"] / "meta/modality.json").read_text())
    assert modality["state"]["right_arm"] == {"start": 0, "end": 7}
    assert modality["state"]["right_gripper"] == {"start": 7, "end": 8}
    assert modality["state"]["left_gripper"] == {"start": 15, "end": 16}
    assert set(modality["video"]) == {"head", "wrist_right"}
    assert modality["annotation"]["human.action.task_description"] == {"original_key": "task_index"}


def test_video_timestamps_gop_and_psnr(tmp_path, src):
    ds = Dataset(src)
    cam = ds.load_camera("head", 0)
    imgs = [f.load() for f in cam.frames()]
    path = tmp_path / "v.mp4"
    assert encode_mp4(path, imgs, fps=30, gop=8) == len(imgs)
    decoded = list(decode_mp4(path))
    assert [round(t * 30, 9) for t, _i, _k in decoded] == list(range(len(imgs)))  # exactly i / fps
    keys = [i for i, (_t, _img, k) in enumerate(decoded) if k]
    assert keys[0] == 0 and max(np.diff(keys + [len(decoded)])) <= 8
    assert min(psnr(a, b) for a, (_t, b, _k) in zip(imgs, decoded)) >= MIN_PSNR_DB
    # odd sizes are padded to even
    odd = [np.full((25, 33, 3), 100, np.uint8)] * 3
    encode_mp4(tmp_path / "odd.mp4", odd, fps=10)
    (_t, img, _k), *_ = decode_mp4(tmp_path / "odd.mp4")
    assert img.shape == (26, 34, 3) and abs(int(img[:25, :33].mean()) - 100) <= 2


def test_success_only_remaps_episodes_and_tasks(src, tmp_path):
    out = tmp_path / "ok"
    cli(src, out, "--format", "lerobot_v2.1", "--fps", FPS, "--success-only", "-q")
    check_v21(out)
    episodes = [json.loads(x) for x in (out / "meta/episodes.jsonl").read_text().splitlines()]
    assert [e["episode_index"] for e in episodes] == [0, 1] and [e["tasks"] for e in episodes] == [["point"], ["point"]]
    assert [json.loads(x) for x in (out / "meta/tasks.jsonl").read_text().splitlines()] == [{"task_index": 0, "task": "point"}]


@pytest.mark.slow
def test_state_pose_rot6d_and_arm_dynamics(src, tmp_path):
    od_kin = pytest.importorskip("openarm_dataset.kinematics")
    out = tmp_path / "pose"
    cli(src, out, "--format", "lerobot_v3.0", "--fps", FPS, "--state", "pose", "--arm-dynamics", "-q")
    check_v30(out)
    import pyarrow.parquet as pq

    info = json.loads((out / "meta/info.json").read_text())
    names = info["features"]["observation.state"]["names"]
    assert names[:8] == ["right_x.pos", "right_y.pos", "right_z.pos", "right_qw.pos", "right_qx.pos",
                         "right_qy.pos", "right_qz.pos", "right_gripper.pos"]
    assert names[16:18] == ["right_joint1.vel", "right_joint2.vel"] and names[24] == "right_joint1.effort"
    assert len(names) == 16 + 32 and len(info["features"]["action"]["names"]) == 16
    table = pq.read_table(next((out / "data").rglob("*.parquet")))
    state = np.asarray(table.column("observation.state").to_pylist(), np.float32)
    ep0 = np.asarray(table.column("episode_index").to_pylist()) == 0
    obs, _act, _fr = _expected(src)[0]
    engines = od_kin.create_engines()
    ref_r = engines["right"].qpos_to_pose(obs[:, :8])
    np.testing.assert_allclose(state[ep0, :3], ref_r[:, :3], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.abs((state[ep0, 3:7] * ref_r[:, 3:7]).sum(1)), 1, atol=1e-5)
    # arm dynamics: recorded qvel / qtorque at the same causal indices
    ds = Dataset(src)
    s = ds.streams(0, "obs")
    grid = sampler.time_grid(*sampler.common_range(
        [x.timestamps for x in s.values()] + [x.timestamps for x in ds.streams(0, "action").values()]
        + [c.timestamps for c in ds.load_cameras(0).values()]), FPS)
    qvel = s["arms/right/qvel"].values[sampler.align(s["arms/right/qvel"].timestamps, grid, "previous")]
    np.testing.assert_array_equal(state[ep0, 16:24], qvel)
    out6 = tmp_path / "rot6d"
    cli(src, out6, "--format", "lerobot_v2.1", "--fps", FPS, "--state", "rot6d", "-q")
    check_v21(out6)
    r6 = np.asarray(pq.read_table(out6 / "data/chunk-000/episode_000000.parquet").column("observation.state").to_pylist())
    c1, c2 = r6[:, 3:6], r6[:, 6:9]
    np.testing.assert_allclose(np.linalg.norm(c1, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose((c1 * c2).sum(1), 0, atol=1e-5)
    np.testing.assert_allclose(r6[:, :3], state[ep0, :3], atol=1e-6)


def test_bad_requests_are_one_line_errors(src, tmp_path):
    r = cli(src, tmp_path / "a", "--format", "lerobot_v2.1", "--fps", "0", check=2)
    assert "fps" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    noqvel = write_synthetic(tmp_path / "nq", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24))
    for side in ("right", "left"):
        p = noqvel / f"episodes/0/obs/arms/{side}/state.parquet"
        import pyarrow.parquet as pq

        pq.write_table(pq.read_table(p).select(["timestamp", "qpos"]), p)
    r = cli(noqvel, tmp_path / "b", "--format", "lerobot_v3.0", "--arm-dynamics", check=2)
    assert "qvel" in r.stderr and "episodes/0" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".tmp-b*"))
