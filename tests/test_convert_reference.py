"""LeRobot export driven by a reference stream (``LeRobotOptions.reference``, ``dataset-convert --reference``):
frames at the reference's samples, every other input as of each frame (never a later sample), the freshness
window (``max_age_s``, ``--max-age``) and the dropped frames counted per episode in the summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, run_cli_process

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import DatasetError, StreamError
from openarm_sim_dataset.core.synthetic import synthetic_episode, synthetic_metadata, write_synthetic
from openarm_sim_dataset.core.writer import ComponentStreams, new_dataset, write_episode_tree

pytest.importorskip("av")

from openarm_sim_dataset.ops.convert.lerobot import LeRobotOptions, to_lerobot  # noqa: E402
from openarm_sim_dataset.ops.convert.lerobot_common import iter_episodes  # noqa: E402

#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_convert_reference")

SIZE = (32, 24)
ARMS = ("right", "left")  # observation.state / action: right qpos (8), then left qpos (8)


def _write(root: Path, episodes: list, camera_hz: float, cameras=("head", "wrist_right")) -> Path:
    """A 0.4.0 dataset of the given EpisodeData, written by the package's writer."""
    with new_dataset(root) as tmp:
        for i, ep in enumerate(episodes):
            write_episode_tree(layout.episode_dir(tmp, str(i)), ep)
        synthetic_metadata(len(episodes), tuple(cameras), 250.0, camera_hz).write(tmp)
    return root


def _table(root: Path):
    import pyarrow.dataset as pads

    return pads.dataset(sorted((root / "data").rglob("*.parquet")), format="parquet").to_table()


def _rows(table, episode: int, column: str) -> np.ndarray:
    import pyarrow.dataset as pads

    rows = table.filter(pads.field("episode_index") == episode)
    return np.asarray(rows.column(column).to_pylist(), dtype=np.float64 if column == "timestamp" else np.float32)


def _as_of(src: Path, episode: int, kind: str, t: np.ndarray) -> np.ndarray:
    """The rows of right then left qpos whose stamp is the latest at or before each time of ``t``
    (numpy's searchsorted, independent of the package's sampler)."""
    streams = Dataset(src).streams(episode, kind)
    parts = []
    for side in ARMS:
        s = streams[f"arms/{side}/qpos"]
        i = np.searchsorted(s.timestamps, t, side="right") - 1
        assert (i >= 0).all()
        parts.append(s.values[i])
    return np.concatenate(parts, axis=1).astype(np.float32)


def _validates(root: Path) -> None:
    r = run_cli("validate", root, "--json", check=None)
    assert r.returncode == 0, r


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    """2 episodes of 1.5 s: 250 Hz arm streams and two 30 Hz cameras, every stamp jittered by 0.3 ms."""
    return write_synthetic(tmp_path_factory.mktemp("ref") / "src", episodes=2, seconds=1.5, camera_hz=30,
                           size=SIZE, jitter_ns=300_000)


@pytest.fixture(scope="module")
def later(tmp_path_factory) -> Path:
    """1 episode, cameras at 10 Hz on the 250 Hz state grid, obs arms/left shifted 1 ms later: at every
    camera frame the nearest left sample is 1 ms after it and the as-of one 3 ms before it."""
    ep = synthetic_episode(0, 1.0, 250.0, 10.0, ("head", "wrist_right"), SIZE, seed=1)
    left = ep.obs[("arms", "left")]
    ep.obs[("arms", "left")] = ComponentStreams(left.timestamps + 1_000_000, left.attributes)
    return _write(tmp_path_factory.mktemp("later") / "src", [ep], 10.0)


@pytest.fixture(scope="module")
def holed(tmp_path_factory) -> Path:
    """1 episode of 1.5 s (no jitter, cameras at 30 Hz) whose obs arms/right has no sample from 0.3 s to 0.8 s."""
    ep = synthetic_episode(0, 1.5, 250.0, 30.0, ("head", "wrist_right"), SIZE, seed=2)
    right = ep.obs[("arms", "right")]
    rel = right.timestamps - right.timestamps[0]
    keep = (rel < 300_000_000) | (rel >= 800_000_000)
    ep.obs[("arms", "right")] = ComponentStreams(right.timestamps[keep],
                                                 {a: v[keep] for a, v in right.attributes.items()})
    return _write(tmp_path_factory.mktemp("holed") / "src", [ep], 30.0)


@pytest.mark.parametrize("fmt", ["lerobot_v2.1", "lerobot_v3.0", "gr00t"])
def test_camera_reference_gives_one_frame_per_camera_frame_with_as_of_rows(fmt, src, tmp_path):
    out = tmp_path / "out"
    summary = to_lerobot(Dataset(src), out, fmt, LeRobotOptions(fps=30, reference="cameras/wrist_right"))
    table = _table(out)
    ds = Dataset(src)
    total = 0
    for i in range(ds.num_episodes):
        cam = ds.load_camera("wrist_right", i).timestamps
        firsts = [s.timestamps[0] for k in ("obs", "action") for s in ds.streams(i, k).values()]
        firsts += [ds.load_camera(c, i).timestamps[0] for c in ds.camera_names]
        t = cam[cam >= max(firsts)]  # the camera's frames within range (none later is ever too old here)
        assert len(t) == len(cam) == 45
        np.testing.assert_array_equal(_rows(table, i, "observation.state"), _as_of(src, i, "obs", t))
        np.testing.assert_array_equal(_rows(table, i, "action"), _as_of(src, i, "action", t))
        np.testing.assert_array_equal(_rows(table, i, "timestamp"),
                                      (np.arange(len(t)) / 30).astype(np.float32).astype(np.float64))
        total += len(t)
    info = json.loads((out / "meta/info.json").read_text())
    assert info["total_frames"] == total == summary.frames and info["fps"] == 30
    assert summary.notes == ["frames dropped (reference cameras/wrist_right): 0 of 90 in 0 of 2 episode(s)"]
    back = Dataset(out)  # the package reads its own export
    assert back.num_episodes == 2 and len(back.streams(1, "obs")["arms/right/qpos"].timestamps) == 45
    _validates(out)


def test_never_a_later_sample_and_frames_before_a_first_sample_dropped(later, tmp_path):
    ds = Dataset(later)
    cam = ds.load_camera("head", 0).timestamps
    left = ds.streams(0, "obs")["arms/left/qpos"].timestamps
    nearest = np.abs(left[None, :] - cam[:, None]).argmin(axis=1)
    assert (left[nearest][1:] - cam[1:] == 1_000_000).all()  # the nearest sample is the later one
    out = tmp_path / "out"
    summary = to_lerobot(ds, out, "lerobot_v3.0", LeRobotOptions(fps=10, reference="cameras/head"))
    t = cam[1:]  # frame 0 comes before obs arms/left's first sample
    got = _rows(_table(out), 0, "observation.state")
    np.testing.assert_array_equal(got, _as_of(later, 0, "obs", t))
    left_values = ds.streams(0, "obs")["arms/left/qpos"].values
    earlier = np.searchsorted(left, t, side="right") - 1
    assert (cam[1:] - left[earlier] == 3_000_000).all()
    np.testing.assert_array_equal(got[:, 8:], left_values[earlier])
    assert not (got[:, 8:] == left_values[nearest[1:]]).all(axis=1).any()
    eps = list(iter_episodes(ds, LeRobotOptions(fps=10, reference="cameras/head")))
    assert eps[0].dropped == {"before the first sample of obs/arms/left": 1} and eps[0].length == len(t)
    assert summary.notes[0].startswith("episode 0: 1 of 10 frames dropped: 1 before the first sample of "
                                       "obs/arms/left at 0.000 s; 1 run: 0.000 s (before LeRobot frame 0 at 0.100 s)")
    # an obs component as the reference, with or without its attribute: frames at its own stamps
    for ref in ("obs/arms/left", "obs/arms/left/qpos"):
        eps = list(iter_episodes(ds, LeRobotOptions(fps=250, reference=ref)))
        np.testing.assert_array_equal(eps[0].grid, left[left >= cam[0]])
        assert eps[0].dropped == {}


def test_freshness_window_drops_exactly_the_frames_in_the_hole(holed, tmp_path):
    ds = Dataset(holed)
    cam = ds.load_camera("head", 0).timestamps
    right = ds.streams(0, "obs")["arms/right/qpos"].timestamps
    age = cam - right[np.searchsorted(right, cam, side="right") - 1]
    stale = age > 100_000_000
    rel = (cam - cam[0]) / 1e9
    n = int(stale.sum())
    assert n == 12 and np.flatnonzero(stale).tolist() == list(range(12, 24))  # 0.400 s..0.767 s
    out = tmp_path / "out"
    opts = LeRobotOptions(fps=30, reference="cameras/head", max_age_s=0.1)
    summary = to_lerobot(ds, out, "lerobot_v2.1", opts)
    kept = cam[~stale]
    table = _table(out)
    np.testing.assert_array_equal(_rows(table, 0, "observation.state"), _as_of(holed, 0, "obs", kept))
    np.testing.assert_array_equal(_rows(table, 0, "timestamp"),
                                  (np.arange(len(kept)) / 30).astype(np.float32).astype(np.float64))
    assert summary.frames == len(kept) == 45 - n
    ep = next(iter_episodes(ds, opts))
    assert ep.dropped == {"obs/arms/right stale (> 0.1 s)": n}
    first, last = np.flatnonzero(stale)[[0, -1]]
    note = (f"episode 0: {n} of 45 frames dropped: {n} obs/arms/right stale (> 0.1 s) at {rel[first]:.3f} s.."
            f"{rel[last]:.3f} s; 1 run: {rel[first]:.3f} s..{rel[last]:.3f} s (between LeRobot frames 11 at "
            f"{rel[first - 1]:.3f} s and 12 at {rel[last + 1]:.3f} s)")
    assert summary.notes[0] == note, summary.notes
    assert summary.notes[1].startswith(f"frames dropped (reference cameras/head, max age 0.1 s): {n} of 45 in "
                                       f"1 of 1 episode(s): {n} obs/arms/right stale (> 0.1 s)")
    assert note in summary.line()
    # without the window the hole's frames stay (as of the last sample before it)
    assert next(iter_episodes(ds, LeRobotOptions(fps=30, reference="cameras/head"))).length == 45
    _validates(out)


def test_a_reference_rate_off_fps_is_noted_not_refused(src, tmp_path):
    summary = to_lerobot(Dataset(src), tmp_path / "out", "lerobot_v3.0",
                         LeRobotOptions(fps=10, reference="cameras/head"))
    assert summary.frames == 90
    assert summary.notes[-1].startswith("reference cameras/head: median interval 33.")
    assert "in episode(s) 0, 1 is more than 5% off 1/fps = 100.0 ms (10 fps)" in summary.notes[-1]


def test_default_path_unchanged(src, tmp_path):
    """No reference: the fps grid over the common range, causal rows, byte for byte as before."""
    ds = Dataset(src)
    a = to_lerobot(ds, tmp_path / "a", "lerobot_v3.0", LeRobotOptions(fps=10))
    b = to_lerobot(ds, tmp_path / "b", "lerobot_v3.0", LeRobotOptions(fps=10, reference=None, max_age_s=None))
    assert a.notes == b.notes == []
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.parquet"))
    assert files and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    table = _table(tmp_path / "a")
    for i in range(ds.num_episodes):
        stamps = [s.timestamps for k in ("obs", "action") for s in ds.streams(i, k).values()]
        stamps += [ds.load_camera(c, i).timestamps for c in ds.camera_names]
        start, end = max(s[0] for s in stamps), min(s[-1] for s in stamps)
        grid = start + (np.arange(0, end - start, 100_000_000, dtype=np.int64))  # 10 Hz: exact 1e8 ns
        np.testing.assert_array_equal(_rows(table, i, "observation.state"), _as_of(src, i, "obs", grid))
        np.testing.assert_array_equal(_rows(table, i, "action"), _as_of(src, i, "action", grid))
    assert all(ep.dropped == {} and ep.drops is None for ep in iter_episodes(ds, LeRobotOptions(fps=10)))


def test_bad_references_are_one_line_errors(src, later, tmp_path):
    ds = Dataset(src)
    with pytest.raises(StreamError, match=r"episode 0: reference 'cameras/nope' is not one of its streams or "
                                          r"cameras \(cameras/head, cameras/wrist_right, obs/arms/left, "
                                          r"obs/arms/right, action/arms/left, action/arms/right;"):
        to_lerobot(ds, tmp_path / "a", "lerobot_v3.0", LeRobotOptions(reference="cameras/nope"))
    with pytest.raises(DatasetError, match="obs/arms/right/qposx"):
        next(iter_episodes(ds, LeRobotOptions(reference="obs/arms/right/qposx")))
    with pytest.raises(ValueError, match="max_age_s applies with a reference"):
        to_lerobot(ds, tmp_path / "b", "lerobot_v3.0", LeRobotOptions(max_age_s=0.1))
    with pytest.raises(ValueError, match="max_age_s must be a positive"):
        to_lerobot(ds, tmp_path / "c", "lerobot_v3.0", LeRobotOptions(reference="cameras/head", max_age_s=0))
    # every frame dropped (obs arms/left is 3 ms old at each frame): an error, not an empty episode
    with pytest.raises(DatasetError, match="every frame of reference cameras/head dropped: episode 0: 10 of 10"):
        next(iter_episodes(Dataset(later), LeRobotOptions(fps=10, reference="cameras/head", max_age_s=0.001)))
    assert not any(tmp_path.iterdir())


def test_cli_reference_and_max_age(src, tmp_path):
    out = tmp_path / "out"
    r = run_cli_process("convert", src, out, "--format", "lerobot_v3.0", "--fps", "30", "--reference",
                        "cameras/head", "--max-age", "0.1")
    assert "2 episode(s), 90 frame(s)" in r.stdout
    assert "frames dropped (reference cameras/head, max age 0.1 s): 0 of 90" in r.stdout
    assert json.loads((out / "meta/info.json").read_text())["total_frames"] == 90
    r = run_cli_process("convert", src, tmp_path / "bad", "--format", "lerobot_v3.0", "--reference", "nope", check=2)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "episode 0: reference 'nope'" in lines[0] and "cameras/head" in lines[0], lines
    assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".tmp-bad*"))
    r = run_cli("convert", src, tmp_path / "o", "--format", "openarm", "--max-age", "0.1", check=2)
    assert "--reference and --max-age apply to the LeRobot formats only" in r.stderr
    r = run_cli("convert", src, tmp_path / "o", "--format", "lerobot_v3.0", "--reference", "cameras/head",
                "--max-age", "0", check=2)
    assert "--max-age must be a positive number" in r.stderr
    r = run_cli("convert", src, tmp_path / "o", "--format", "lerobot_v3.0", "--max-age", "0.1", check=2)
    assert "--max-age applies with --reference" in r.stderr
    assert not (tmp_path / "o").exists()
