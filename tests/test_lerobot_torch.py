"""TorchDataset over LeRobot datasets (v2.1, v3.0): items equal ``Dataset.sample(hz, decode=True)``, video
frames decoded by each process's own decoder (DataLoader workers too), image statistics from the decoded
frames, nothing written into the dataset folder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import tree_snapshot

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.synthetic import write_synthetic

torch = pytest.importorskip("torch")
pytest.importorskip("av")

from openarm_sim_dataset.torch import TorchDataset  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_lerobot_torch")

FPS = 15
HZ = 10  # not the fps: the grid picks frames and rows by the causal rule, some twice
FORMATS = ["lerobot_v2.1", "lerobot_v3.0"]


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("lrt")
    src = write_synthetic(base / "src", episodes=3, seconds=1.2, camera_hz=30, size=(64, 48), jitter_ns=300_000)
    ds = Dataset(src)
    out = {fmt: ds.write(base / fmt, format=fmt, fps=FPS) for fmt in FORMATS}
    other = base / "so100"
    shutil.copytree(out["lerobot_v3.0"], other)
    info = json.loads((other / "meta/info.json").read_text())
    for key in ("observation.state", "action"):
        info["features"][key]["names"] = [f"motor_{i}.pos" for i in range(16)]
    info["robot_type"] = "so100_follower"
    (other / "meta/info.json").write_text(json.dumps(info))
    out["so100"] = other
    return out


@pytest.fixture(scope="module")
def before(exports) -> dict[str, dict]:
    return {k: tree_snapshot(p) for k, p in exports.items()}


def _state(sample, kind: str) -> np.ndarray:
    values = sample.obs if kind == "obs" else sample.action
    return np.concatenate([values["arms/right/qpos"], values["arms/left/qpos"]])


def _check_item(item: dict, s, cameras) -> None:
    assert (item["episode"], item["timestamp"]) == (s.episode, s.timestamp_ns)
    np.testing.assert_array_equal(item["observation.state"].numpy(), _state(s, "obs"))
    np.testing.assert_array_equal(item["action"][0].numpy(), _state(s, "action"))
    for cam in cameras:
        img = item[f"observation.images.{cam}"]
        assert img.dtype == torch.uint8 and img.is_contiguous() and img.shape == (3, 48, 64)
        assert np.array_equal(img.numpy(), s.cameras[cam].transpose(2, 0, 1)), (s.episode, s.timestamp_ns, cam)


@pytest.mark.parametrize("fmt", [pytest.param("lerobot_v2.1", marks=pytest.mark.slow), "lerobot_v3.0"])
@pytest.mark.parametrize("workers", [0, 2])
def test_items_equal_the_decoded_samples(fmt, workers, exports, before):
    ds = Dataset(exports[fmt])
    samples = list(ds.sample(HZ, decode=True))  # the parent decodes first: the workers must open their own
    loader = TorchDataset(exports[fmt], hz=HZ)
    assert len(loader) == len(samples) > 20 and loader.cameras == ("head", "wrist_right")
    assert loader.index.camera_video.all() and (loader.index.frame_pts >= 0).all()
    if workers:  # the parent's loader opens decoders first: a forked worker inherits them and must not free them
        _check_item(loader[len(loader) - 1], samples[-1], loader.cameras)
        assert len(loader._handles.videos) == 2  # (no reference held here: the worker's copy must not be freed)
    # a worker that hangs (as one freeing its parent's decoders did) fails the test after 60 s
    items = list(torch.utils.data.DataLoader(loader, batch_size=None, num_workers=workers, shuffle=False,
                                             timeout=60 if workers else 0))
    assert len(items) == len(samples)
    for item, s in zip(items, samples):
        _check_item(item, s, loader.cameras)
    if workers:  # the items were read by the workers: the parent's handles are as they were
        assert loader._handles.pid == os.getpid() and len(loader._handles.videos) == 2
    assert tree_snapshot(exports[fmt]) == before[fmt]


def test_history_horizon_split_and_image_stats(exports, before, tmp_path):
    root = exports["lerobot_v3.0"]
    samples = Dataset(root).sample(HZ, decode=True)
    loader = TorchDataset(root, hz=HZ, history=2, action_horizon=3, cameras=["head"])
    train, val = loader.split(0.34, seed=1)
    for part in (loader, train, val):
        for i in range(len(part)):
            item = part[i]
            k = loader.index_of(item["episode"], item["step"])
            prev = k - 1 if item["step"] > 0 else k
            frames = item["observation.images.head"].numpy()
            assert frames.shape == (2, 3, 48, 64)
            np.testing.assert_array_equal(frames[1], samples[k].cameras["head"].transpose(2, 0, 1))
            np.testing.assert_array_equal(frames[0], samples[prev].cameras["head"].transpose(2, 0, 1))
            assert item["observation_is_pad"].tolist() == [item["step"] == 0, False]
    stats = loader.stats(cache_dir=tmp_path / "cache", images=True)["observation.images.head"]
    # every distinct frame the grid shows, once, decoded as the items are
    idx = loader.index
    seen = {(e, int(f)) for e in range(idx.num_episodes) for f in np.unique(idx.frame_index[idx.starts[e]:idx.starts[e + 1], 0])}
    cams = {e: Dataset(root).load_camera("head", e) for e in range(idx.num_episodes)}
    pixels = np.concatenate([cams[e].load_frame(f).reshape(-1, 3) for e, f in sorted(seen)]).astype(np.float64)
    np.testing.assert_allclose(stats["mean"].ravel(), pixels.mean(0))
    np.testing.assert_allclose(stats["std"].ravel(), pixels.std(0))
    np.testing.assert_array_equal(stats["max"].ravel(), pixels.max(0))
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    assert tree_snapshot(root) == before["lerobot_v3.0"]


def test_another_robots_features_load_by_name(exports, before):
    root = exports["so100"]
    with pytest.raises(ValueError, match="no obs stream 'qpos' \\(have lerobot/observation.state\\)"):
        TorchDataset(root, hz=HZ)
    loader = TorchDataset(root, hz=HZ, state=["observation.state"], action=["action"], cameras=[])
    samples = Dataset(root).sample(HZ)
    assert loader.state_names[0] == "lerobot/observation.state/motor_0.pos" and len(loader) == len(samples)
    for i in (0, len(loader) - 1):
        np.testing.assert_array_equal(loader[i]["observation.state"].numpy(), samples[i].obs["lerobot/observation.state"])
        np.testing.assert_array_equal(loader[i]["action"][0].numpy(), samples[i].action["lerobot/action"])
    assert tree_snapshot(root) == before["so100"]


LEROBOT_FIXTURES = Path(__file__).parent / "fixture" / "lerobot"


@pytest.mark.parametrize("name, kw", [
    ("v30_bi_openarm_av1", {}),  # AV1 video, as LeRobot 0.4.4 encodes it
    ("v30_other_robot", {"state": ["observation.state"], "action": ["action"]}),  # PNG images in the parquet
])
def test_datasets_written_by_lerobot_load_as_sampled(name, kw, tmp_path):
    root = LEROBOT_FIXTURES / name
    if not root.is_dir():
        pytest.skip("tests/fixture/lerobot (datasets written by LeRobot) is not here")
    before = tree_snapshot(root)
    samples = list(Dataset(root).sample(30, decode=True))
    loader = TorchDataset(root, hz=30, **kw)
    assert len(loader) == len(samples) > 100 and loader.index.camera_decoded.all()
    assert loader.index.camera_video.all() == (name != "v30_other_robot")
    items = list(torch.utils.data.DataLoader(loader, batch_size=None, num_workers=2, shuffle=False, timeout=60))
    for item, s in zip(items, samples):
        assert (item["episode"], item["timestamp"]) == (s.episode, s.timestamp_ns)
        for cam in loader.cameras:
            assert np.array_equal(item[f"observation.images.{cam}"].numpy(), s.cameras[cam].transpose(2, 0, 1))
    stats = loader.stats(cache_dir=tmp_path, images=True)[f"observation.images.{loader.cameras[0]}"]
    assert stats["mean"].shape == (3, 1, 1) and 0 <= stats["min"].min() < stats["max"].max() <= 255
    assert tree_snapshot(root) == before
