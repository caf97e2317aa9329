"""What the LeRobot layouts (v2.1, v3.0, gr00t) share: causal resampling, named vectors, stats.

Every chosen episode is resampled at ``fps`` on the integer-nanosecond grid of
:meth:`Dataset.sample` with ``align="previous"`` (causal: the latest value at or before each grid
time, never a later one); LeRobot frame ``i`` of an episode is grid point ``i`` and is stamped
``timestamp = i / fps`` seconds (float32, as LeRobot's own writer stores it).

``observation.state`` and ``action`` concatenate, per embodiment component in metadata order, the
arm state in the chosen representation (:mod:`openarm_sim_dataset.kinematics`), named
``right_joint1.pos`` ... ``right_gripper.pos`` (qpos), ``right_x.pos`` ... ``right_qz.pos`` (pose) or
``right_r11.pos`` ... (rot6d) as openarm_dataset names them, and ``elevation.pos`` for a lifter.
``arm_dynamics`` appends the recorded obs ``qvel`` (``right_joint1.vel``, rad/s) and ``qtorque``
(``right_joint1.effort``, N m) to ``observation.state``.

Stats follow LeRobot's ``compute_episode_stats``: per feature ``min``, ``max``, ``mean``, ``std``
(shape (D,) or (1,)), ``count`` (shape (1,)), quantiles ``q01`` ... ``q99``; images per channel in
[0, 1] with shape (3, 1, 1), over the exported frames (pixels strided to ~150 px on the long side).
Dataset-wide stats aggregate the per-episode ones (count-weighted mean and pooled variance).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from openarm_sim_dataset.core import kinematics, layout, sampler
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError, StreamError

from .source import remap_tasks, select_episodes
from .video import CODEC_NAME, PIX_FMT, even_size

ROBOT_TYPE = "openarm_bimanual"
CHUNK_SIZE = 1000
QUANTILES = {"q01": 1, "q10": 10, "q50": 50, "q90": 90, "q99": 99}
SCALAR_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
IMAGE_STATS_SIDE = 150


@dataclass
class LeRobotOptions:
    """fps: output frame rate (Hz, integer); state: qpos | pose | rot6d; gop: keyframe interval in
    frames (default fps // 2); crf: H.264 quality (lower is better); train_split: fraction of the
    episodes in info.json's ``train`` split, the rest ``val`` (openarm_dataset's; default all
    train); smoothing_cutoff: low-pass the streams at this many Hz before sampling (None: raw
    values; openarm_dataset smooths at 1 Hz by default), ``smoothing`` filtfilt | lfilter."""

    fps: int = 30
    state: str = "qpos"
    arm_dynamics: bool = False
    valid_only: bool = False
    success_only: bool = False
    exclude_knocked: bool = False
    gop: int | None = None
    crf: int = 18
    preset: str = "veryfast"
    train_split: float = 1.0
    smoothing_cutoff: float | None = None
    smoothing: str = "filtfilt"


def splits(n: int, train_split: float) -> dict[str, str]:
    """info.json's ``splits``: the first ``round(n * train_split)`` episodes train, the rest val (as
    openarm_dataset splits them)."""
    if not 0.0 <= train_split <= 1.0:
        raise ValueError(f"train_split must be between 0 and 1, got {train_split}")
    end = round(n * train_split)
    out = {"train": f"0:{end}"}
    if end < n:
        out["val"] = f"{end}:{n}"
    return out


@dataclass
class Episode:
    """One exported episode: ``index`` and ``task_index`` are the output's (contiguous) indices."""

    entry: dict
    index: int
    task_index: int
    task: str
    grid: np.ndarray  # int64 ns, source time of each frame
    obs: np.ndarray  # (N, D) float32
    action: np.ndarray  # (N, A) float32
    frames: dict[str, tuple[object, np.ndarray]] = field(default_factory=dict)  # camera -> (Camera, frame index per row)

    @property
    def length(self) -> int:
        return len(self.grid)


def image_key(camera: str) -> str:
    return f"observation.images.{camera}"


def vector_names(ds: Dataset, state: str, arm_dynamics: bool) -> tuple[list[str], list[str]]:
    """(observation.state names, action names) in the concatenation order of :func:`sample_episode`."""
    obs, act = [], []
    for emb in ds.meta.embodiments:
        if emb.id == layout.EMBODIMENT_OPENARM:
            for comp in emb.components:
                names = [f"{comp}_{j}.pos" for j in kinematics.STATE_JOINTS[state]]
                obs += names
                act += names
        else:
            names = [f"{j}.pos" for j in emb.joints]
            obs += names
            act += names
    if arm_dynamics:
        for emb in ds.meta.embodiments:
            if emb.id == layout.EMBODIMENT_OPENARM:
                for comp in emb.components:
                    obs += [f"{comp}_{j}.vel" for j in layout.ARM_JOINTS]
                    obs += [f"{comp}_{j}.effort" for j in layout.ARM_JOINTS]
    return obs, act


def _vectors(ds: Dataset, ep_id: str, streams: dict, idx: dict, kind: str, state: str, seeds: dict) -> list[np.ndarray]:
    parts = []
    for emb in ds.meta.embodiments:
        if emb.id == layout.EMBODIMENT_OPENARM:
            for comp in emb.components:
                prefix = f"{emb.name}/{comp}"
                rows = {a: streams[f"{prefix}/{a}"].values[idx[f"{prefix}/{a}"]] for a in ("qpos", "pose")
                        if f"{prefix}/{a}" in streams}
                what = f"{ds.root}: episode {ep_id} {kind} {prefix}"
                if not rows:
                    raise StreamError(ds.episode_path(ep_id), f"{kind} has no qpos or pose for {prefix}")
                parts.append(kinematics.convert_rows(comp, rows, state, seed=seeds.get(prefix), what=what))
        else:
            for attr in emb.legacy_attributes:
                key = f"{emb.name}/{attr}"
                if key not in streams:
                    raise StreamError(ds.episode_path(ep_id), f"{kind} has no {key} stream")
                parts.append(streams[key].values[idx[key]])
    return parts


def sample_episode(ds: Dataset, entry: dict, opts: LeRobotOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(grid int64 ns, obs (N, D), action (N, A), {camera: (Camera, frame index per row)}) of one
    episode on ``Dataset.sample``'s grid with causal (previous) alignment, vectorised."""
    ep_id = ds.episode_id(entry)
    groups = {"obs": ds.streams(entry, "obs"), "action": ds.streams(entry, "action")}
    if opts.smoothing_cutoff is not None:
        groups = {kind: ds.smoothed(kind, g, opts.smoothing_cutoff, opts.smoothing) for kind, g in groups.items()}
    cameras = ds.load_cameras(entry)
    stamps = [s.timestamps for g in groups.values() for s in g.values()] + [c.timestamps for c in cameras.values()]
    for _kind, g in groups.items():
        for key, s in g.items():
            if len(s.timestamps) == 0 or not sampler.is_strictly_increasing(s.timestamps):
                raise StreamError(s.path, f"{key} timestamps are empty or not strictly increasing")
    for name, cam in cameras.items():
        if cam.num_frames == 0 or not sampler.is_strictly_increasing(cam.timestamps):
            raise StreamError(cam.path, f"camera {name} has no frames or unsorted stamps")
    if not stamps:
        raise StreamError(ds.episode_path(entry), "episode has no streams and no cameras")
    start, end = sampler.common_range(stamps)
    grid = sampler.time_grid(start, end, opts.fps)
    idx = {kind: {k: sampler.align(s.timestamps, grid, "previous") for k, s in g.items()} for kind, g in groups.items()}
    # IK seeds: the recorded obs qpos at the first grid time
    seeds = {k.rsplit("/", 1)[0]: groups["obs"][k].values[idx["obs"][k][0]] for k in groups["obs"]
             if k.endswith("/qpos") and len(grid)}
    obs_parts = _vectors(ds, ep_id, groups["obs"], idx["obs"], "obs", opts.state, seeds)
    act_parts = _vectors(ds, ep_id, groups["action"], idx["action"], "action", opts.state, seeds)
    if opts.arm_dynamics:
        for emb in ds.meta.embodiments:
            if emb.id != layout.EMBODIMENT_OPENARM:
                continue
            for comp in emb.components:
                for attr in ("qvel", "qtorque"):
                    key = f"{emb.name}/{comp}/{attr}"
                    if key not in groups["obs"]:
                        raise StreamError(ds.episode_path(entry), f"--arm-dynamics: obs {key} is not recorded")
                    obs_parts.append(groups["obs"][key].values[idx["obs"][key]])
    obs = np.concatenate(obs_parts, axis=1).astype(np.float32) if obs_parts else np.zeros((len(grid), 0), np.float32)
    act = np.concatenate(act_parts, axis=1).astype(np.float32) if act_parts else np.zeros((len(grid), 0), np.float32)
    frames = {name: (cam, sampler.align(cam.timestamps, grid, "previous")) for name, cam in cameras.items()}
    return grid, obs, act, frames


def plan(ds: Dataset, opts: LeRobotOptions) -> tuple[list[dict], dict[int, int], list[str]]:
    """(chosen entries, old task index -> new, task prompts by new index)."""
    if opts.state not in kinematics.STATES:
        raise ValueError(f"state must be one of {kinematics.STATES}, not {opts.state!r}")
    if isinstance(opts.fps, bool) or not isinstance(opts.fps, int) or opts.fps <= 0:
        raise ValueError(f"fps must be a positive integer, not {opts.fps!r}")
    chosen = select_episodes(ds, opts.valid_only, opts.success_only, opts.exclude_knocked)
    tasks, remap = remap_tasks(ds.meta.tasks, chosen)
    prompts = [t.get("prompt") or t.get("description") or f"task {i}" for i, t in enumerate(tasks)]
    if any(ep.get("task_index") is None for ep in chosen):
        if "" not in prompts:
            prompts.append("")
    return chosen, remap, prompts


def task_of(entry: dict, remap: dict[int, int], prompts: list[str]) -> tuple[int, str]:
    ti = entry.get("task_index")
    if ti is None:
        return prompts.index(""), ""
    return remap[ti], prompts[remap[ti]]


def describe(x: np.ndarray) -> dict[str, np.ndarray]:
    """LeRobot's per-feature stats of (N, D) or (N,) values (D-vectors, or shape (1,) for scalars)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    out = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([len(x)])}
    qs = np.percentile(x, list(QUANTILES.values()), axis=0)
    out.update({k: q for k, q in zip(QUANTILES, qs)})
    return out


class ImageStats:
    """Per-channel min/max/mean/std in [0, 1] of RGB frames (pixels strided to ~150 px on the long
    side), exact from per-channel histograms of the uint8 values."""

    def __init__(self):
        self.hist = np.zeros((3, 256), dtype=np.int64)
        self.frames = 0

    def add(self, img: np.ndarray) -> None:
        step = max(1, max(img.shape[:2]) // IMAGE_STATS_SIDE)
        px = img[::step, ::step].reshape(-1, 3)
        for c in range(3):
            self.hist[c] += np.bincount(px[:, c], minlength=256)
        self.frames += 1

    def result(self) -> dict[str, np.ndarray]:
        v = np.arange(256, dtype=np.float64) / 255
        n = self.hist.sum(1)
        mean = (self.hist * v).sum(1) / n
        std = np.sqrt(np.maximum((self.hist * v**2).sum(1) / n - mean**2, 0))
        nz = self.hist > 0
        lo = np.array([v[np.flatnonzero(r)[0]] for r in nz])
        hi = np.array([v[np.flatnonzero(r)[-1]] for r in nz])
        shape = (3, 1, 1)
        return {"min": lo.reshape(shape), "max": hi.reshape(shape), "mean": mean.reshape(shape),
                "std": std.reshape(shape), "count": np.array([self.frames])}


def episode_stats(ep: Episode, fps: int, first_index: int, images: dict[str, dict]) -> dict[str, dict[str, np.ndarray]]:
    n = ep.length
    stats = {
        "observation.state": describe(ep.obs),
        "action": describe(ep.action),
        "timestamp": describe(frame_timestamps(n, fps)),
        "frame_index": describe(np.arange(n)),
        "episode_index": describe(np.full(n, ep.index)),
        "index": describe(np.arange(first_index, first_index + n)),
        "task_index": describe(np.full(n, ep.task_index)),
    }
    for cam, s in images.items():
        stats[image_key(cam)] = s
    return stats


def aggregate(per_episode: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Dataset stats from per-episode stats: count-weighted means, pooled variance, min of mins..."""
    out = {}
    for key in per_episode[0]:
        items = [s[key] for s in per_episode]
        counts = np.array([float(s["count"][0]) for s in items])
        total = counts.sum()
        shape = (-1,) + (1,) * (np.asarray(items[0]["mean"]).ndim)
        w = (counts / total).reshape(shape)
        means = np.stack([s["mean"] for s in items])
        mean = (means * w).sum(0)
        var = ((np.stack([s["std"] for s in items]) ** 2 + (means - mean) ** 2) * w).sum(0)
        agg = {"min": np.min(np.stack([s["min"] for s in items]), 0), "max": np.max(np.stack([s["max"] for s in items]), 0),
               "mean": mean, "std": np.sqrt(var), "count": np.array([int(total)])}
        for q in QUANTILES:
            if all(q in s for s in items):
                agg[q] = (np.stack([s[q] for s in items]) * w).sum(0)
        out[key] = agg
    return out


def jsonable(stats: dict[str, dict[str, np.ndarray]]) -> dict:
    return {k: {n: np.asarray(v).tolist() for n, v in d.items()} for k, d in stats.items()}


def frame_timestamps(n: int, fps: int) -> np.ndarray:
    """LeRobot frame times i / fps, float32 seconds (as LeRobot stores them)."""
    return (np.arange(n, dtype=np.float64) / fps).astype(np.float32)


def features(obs_names: list[str], act_names: list[str], cameras: dict[str, tuple[int, int]], fps: int,
             with_fps: bool) -> dict:
    """info.json ``features``; ``cameras`` maps a camera to its encoded (height, width)."""
    def f(d):
        return dict(d, fps=fps) if with_fps else d

    feats = {
        "observation.state": f({"dtype": "float32", "shape": [len(obs_names)], "names": obs_names}),
        "action": f({"dtype": "float32", "shape": [len(act_names)], "names": act_names}),
    }
    for cam, (h, w) in cameras.items():
        feats[image_key(cam)] = {
            "dtype": "video", "shape": [h, w, 3], "names": ["height", "width", "channels"],
            "info": {"video.height": h, "video.width": w, "video.codec": CODEC_NAME, "video.pix_fmt": PIX_FMT,
                     "video.is_depth_map": False, "video.fps": fps, "video.channels": 3, "has_audio": False},
        }
    feats["timestamp"] = f({"dtype": "float32", "shape": [1], "names": None})
    for k in ("frame_index", "episode_index", "index", "task_index"):
        feats[k] = f({"dtype": "int64", "shape": [1], "names": None})
    return feats


def data_table(ep: Episode, fps: int, first_index: int):
    """The frames of one episode as an Arrow table with LeRobot's columns."""
    import pyarrow as pa

    n = ep.length

    def fixed(values: np.ndarray):
        v = np.ascontiguousarray(values, dtype=np.float32)
        return pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1), type=pa.float32()), v.shape[1])

    return pa.table({
        "observation.state": fixed(ep.obs),
        "action": fixed(ep.action),
        "timestamp": pa.array(frame_timestamps(n, fps), type=pa.float32()),
        "frame_index": pa.array(np.arange(n, dtype=np.int64)),
        "episode_index": pa.array(np.full(n, ep.index, dtype=np.int64)),
        "index": pa.array(np.arange(first_index, first_index + n, dtype=np.int64)),
        "task_index": pa.array(np.full(n, ep.task_index, dtype=np.int64)),
    })


def camera_size(ds: Dataset, entry: dict) -> dict[str, tuple[int, int]]:
    """Encoded (height, width) of each camera, from the first frame of ``entry``."""
    out = {}
    for name, cam in ds.load_cameras(entry).items():
        h, w = cam.get_frame(0).load().shape[:2]
        w2, h2 = even_size(w, h)
        out[name] = (h2, w2)
    return out


def iter_episodes(ds: Dataset, opts: LeRobotOptions):
    """Yield the export's episodes in order (sampled lazily, one at a time)."""
    chosen, remap, prompts = plan(ds, opts)
    for new_index, entry in enumerate(chosen):
        grid, obs, act, frames = sample_episode(ds, entry, opts)
        if len(grid) == 0:
            raise DatasetError(ds.episode_path(entry), f"shorter than one frame at {opts.fps} fps: nothing to export")
        ti, task = task_of(entry, remap, prompts)
        yield Episode(entry, new_index, ti, task, grid, obs, act, frames)


_POOL = None


def _decode_pool():
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)), thread_name_prefix="jpeg")
    return _POOL


def encode_frames(ep: Episode, camera: str, writer, stats: ImageStats, lookahead: int = 8) -> None:
    """Decode the episode's frames of ``camera`` (each source JPEG once, decoded ahead in threads:
    PIL releases the GIL) and append them to ``writer`` in order."""
    from collections import deque

    cam, idx = ep.frames[camera]
    idx = idx.tolist()
    unique = [i for k, i in enumerate(idx) if k == 0 or i != idx[k - 1]]
    pool = _decode_pool()
    pending: deque = deque()
    nxt = 0
    last, img = -1, None
    for i in idx:
        if i != last:
            while nxt < len(unique) and len(pending) < lookahead:
                pending.append(pool.submit(lambda j: cam.get_frame(j).load(), unique[nxt]))
                nxt += 1
            img = pending.popleft().result()
            last = i
        writer.write(img)
        stats.add(img)
