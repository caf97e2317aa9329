"""LeRobot's rules for a dataset folder, restated as checks (no lerobot import).

What LeRobot's readers assert or rely on (lerobot 0.3.x for v2.1, >= 0.4 for v3.0): info.json keys;
every data and video file referenced present (else it tries to download); contiguous episode
indices from 0; a global ``index`` 0..total_frames-1; timestamps i/fps within 1e-4 s inside an episode;
stats arrays with ndim >= 1, ``count`` of shape (1,), image stats of shape (3, 1, 1); decoded video
frames at the requested times within 1e-4 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from openarm_sim_dataset.convert.video import decode_mp4

TOL = 1e-4


def _check_stats(stats: dict, features: dict, where: str) -> None:
    for key, d in stats.items():
        assert key in features, f"{where}: stats for unknown feature {key}"
        for name, v in d.items():
            a = np.asarray(v)
            assert a.ndim >= 1, f"{where}: {key}/{name} has ndim 0"
            if name == "count":
                assert a.shape == (1,), f"{where}: {key}/count shape {a.shape}"
            elif features[key]["dtype"] in ("video", "image"):
                assert a.shape == (3, 1, 1), f"{where}: {key}/{name} shape {a.shape}"
                assert 0 <= a.min() and a.max() <= 1, f"{where}: {key}/{name} outside [0, 1]"
            else:
                assert a.shape == tuple(features[key]["shape"]), f"{where}: {key}/{name} shape {a.shape}"
    for key, _f in features.items():
        assert key in stats, f"{where}: no stats for {key}"


def _check_frames(table, fps: int, length: int, episode: int, first_index: int, features: dict) -> None:
    ts = table.column("timestamp").to_numpy()
    assert len(ts) == length
    np.testing.assert_allclose(ts, np.arange(length) / fps, atol=TOL, rtol=0)
    assert np.all(np.abs(np.diff(ts) - 1 / fps) <= TOL)
    assert table.column("frame_index").to_pylist() == list(range(length))
    assert set(table.column("episode_index").to_pylist()) == {episode}
    assert table.column("index").to_pylist() == list(range(first_index, first_index + length))
    for key in ("observation.state", "action"):
        arr = np.asarray(table.column(key).to_pylist(), dtype=np.float32)
        assert arr.shape == (length, features[key]["shape"][0]) == (length, len(features[key]["names"]))
        assert np.isfinite(arr).all()


def _check_video(path: Path, fps: int, frames: int, first: int = 0) -> list[np.ndarray]:
    assert path.is_file(), f"missing video {path}"
    decoded = list(decode_mp4(path))
    assert len(decoded) >= first + frames
    times = np.array([t for t, _img, _k in decoded])
    np.testing.assert_allclose(times, np.arange(len(decoded)) / fps, atol=TOL, rtol=0)
    return [img for _t, img, _k in decoded[first:first + frames]]


def check_v21(root: Path) -> dict:
    """Assert LeRobot v2.1's rules; returns {(episode, video_key): decoded frames}."""
    info = json.loads((root / "meta/info.json").read_text())
    for key in ("codebase_version", "fps", "features", "data_path", "video_path", "chunks_size", "total_episodes",
                "total_frames", "total_tasks", "total_chunks", "splits"):
        assert key in info, key
    assert info["codebase_version"] == "v2.1"
    fps, feats = info["fps"], info["features"]
    episodes = [json.loads(line) for line in (root / "meta/episodes.jsonl").read_text().splitlines()]
    tasks = [json.loads(line) for line in (root / "meta/tasks.jsonl").read_text().splitlines()]
    stats = [json.loads(line) for line in (root / "meta/episodes_stats.jsonl").read_text().splitlines()]
    assert [e["episode_index"] for e in episodes] == list(range(len(episodes))) == [s["episode_index"] for s in stats]
    assert [t["task_index"] for t in tasks] == list(range(len(tasks))) and len(tasks) == info["total_tasks"]
    assert len(episodes) == info["total_episodes"]
    task_names = {t["task"] for t in tasks}
    video_keys = [k for k, f in feats.items() if f["dtype"] == "video"]
    videos = {}
    index = 0
    for ep, st in zip(episodes, stats):
        i = ep["episode_index"]
        assert set(ep["tasks"]) <= task_names
        chunk = i // info["chunks_size"]
        data = root / info["data_path"].format(episode_chunk=chunk, episode_index=i)
        assert data.is_file(), f"missing {data}"
        table = pq.read_table(data)
        _check_frames(table, fps, ep["length"], i, index, feats)
        assert set(table.column("task_index").to_pylist()) <= set(range(len(tasks)))
        _check_stats(st["stats"], {k: f for k, f in feats.items()}, f"episode {i}")
        for key in video_keys:
            path = root / info["video_path"].format(episode_chunk=chunk, video_key=key, episode_index=i)
            videos[(i, key)] = _check_video(path, fps, ep["length"])
        index += ep["length"]
    assert index == info["total_frames"]
    _check_stats(json.loads((root / "meta/stats.json").read_text()), feats, "stats.json")
    return videos


def check_v30(root: Path) -> dict:
    """Assert LeRobot v3.0's rules; returns {(episode, video_key): decoded frames}."""
    info = json.loads((root / "meta/info.json").read_text())
    for key in ("codebase_version", "fps", "features", "data_path", "video_path", "chunks_size", "total_episodes",
                "total_frames", "total_tasks", "data_files_size_in_mb", "video_files_size_in_mb"):
        assert key in info, key
    assert info["codebase_version"] == "v3.0"
    fps, feats = info["fps"], info["features"]
    ep_files = sorted((root / "meta/episodes").glob("chunk-*/file-*.parquet"))
    assert ep_files
    episodes = [r for f in ep_files for r in pq.read_table(f).to_pylist()]
    assert [e["episode_index"] for e in episodes] == list(range(info["total_episodes"]))
    tasks = pq.read_table(root / "meta/tasks.parquet").to_pandas()
    assert tasks.index.name == "task" and list(tasks["task_index"]) == list(range(len(tasks))) == list(range(info["total_tasks"]))
    video_keys = [k for k, f in feats.items() if f["dtype"] == "video"]
    index = 0
    videos = {}
    decoded_files: dict[Path, list] = {}
    for ep in episodes:
        i, n = ep["episode_index"], ep["length"]
        assert set(ep["tasks"]) <= set(tasks.index)
        assert (ep["dataset_from_index"], ep["dataset_to_index"]) == (index, index + n)
        data = root / info["data_path"].format(chunk_index=ep["data/chunk_index"], file_index=ep["data/file_index"])
        assert data.is_file(), f"missing {data}"
        table = pq.read_table(data)
        first = table.column("index").to_numpy()
        rows = np.flatnonzero((first >= index) & (first < index + n))
        _check_frames(table.take(rows), fps, n, i, index, feats)
        stats = {}
        for key, v in ep.items():
            if key.startswith("stats/"):
                feat, name = key[len("stats/"):].rsplit("/", 1)
                stats.setdefault(feat, {})[name] = v
        _check_stats(stats, feats, f"episode {i}")
        for key in video_keys:
            path = root / info["video_path"].format(video_key=key, chunk_index=ep[f"videos/{key}/chunk_index"],
                                                   file_index=ep[f"videos/{key}/file_index"])
            t0, t1 = ep[f"videos/{key}/from_timestamp"], ep[f"videos/{key}/to_timestamp"]
            assert abs((t1 - t0) - n / fps) <= TOL
            if path not in decoded_files:
                assert path.is_file(), f"missing {path}"
                decoded_files[path] = list(decode_mp4(path))
                times = np.array([t for t, _i, _k in decoded_files[path]])
                np.testing.assert_allclose(times, np.arange(len(times)) / fps, atol=TOL, rtol=0)
            frames = decoded_files[path]
            first_frame = int(round(t0 * fps))
            assert abs(frames[first_frame][0] - t0) <= TOL and len(frames) >= first_frame + n
            videos[(i, key)] = [img for _t, img, _k in frames[first_frame:first_frame + n]]
        index += n
    assert index == info["total_frames"]
    _check_stats(json.loads((root / "meta/stats.json").read_text()), feats, "stats.json")
    return videos
