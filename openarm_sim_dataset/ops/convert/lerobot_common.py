"""What the LeRobot layouts (v2.1, v3.0, gr00t) share: causal resampling, named vectors, stats.

Every chosen episode is resampled at ``fps`` on the integer-nanosecond grid of
:meth:`Dataset.sample` with ``align="previous"`` (causal: the latest value at or before each grid
time, never a later one); LeRobot frame ``i`` of an episode is grid point ``i`` and is stamped
``timestamp = i / fps`` seconds (float32, as LeRobot's own writer stores it).

With ``LeRobotOptions.reference`` the frames are instead the samples of one stream (a camera's frame
stamps, or an obs/action component's): every other stream and camera is taken as of each frame time
(its latest sample at or before it, never a later one), a frame before some input's first sample, or
(with ``max_age_s``) whose input is older than ``max_age_s``, is dropped, and the drops are counted per
episode and reason (:func:`sample_reference`, :class:`DropTally`).

``observation.state`` and ``action`` concatenate, per embodiment component in metadata order, the
arm state in the chosen representation (:mod:`openarm_sim_dataset.kinematics`), named
``right_joint1.pos`` ... ``right_gripper.pos`` (qpos), ``right_x.pos`` ... ``right_qz.pos`` (pose) or
``right_r11.pos`` ... (rot6d) as openarm_dataset names them, and ``elevation.pos`` for a lifter.
``arm_dynamics`` appends the recorded obs ``qvel`` (``right_joint1.vel``, rad/s) and ``qtorque``
(``right_joint1.effort``, N m) to ``observation.state``.

Stats (:mod:`.lerobot_stats`) follow LeRobot's ``compute_episode_stats``: per feature ``min``, ``max``, ``mean``, ``std``
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
SCALAR_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
#: how far the reference's median interval may differ from 1/fps before the summary says so
RATE_TOLERANCE = 0.05


@dataclass
class LeRobotOptions:
    """fps: output frame rate (Hz, integer); state: qpos | pose | rot6d; gop: keyframe interval in
    frames (default fps // 2); crf: H.264 quality (lower is better); train_split: fraction of the
    episodes in info.json's ``train`` split, the rest ``val`` (openarm_dataset's; default all
    train); smoothing_cutoff: low-pass the streams at this many Hz before sampling (None: raw
    values; openarm_dataset smooths at 1 Hz by default), ``smoothing`` filtfilt | lfilter.

    reference: None (default) resamples on the fixed ``fps`` grid over the streams' common range.
    Otherwise the stream whose samples are the frames: ``"cameras/<name>"`` (the camera's frame stamps)
    or ``"obs/<embodiment>/<component>"`` / ``"action/<embodiment>/<component>"`` (e.g.
    ``"obs/arms/right"``; a trailing ``/<attribute>``, e.g. ``/qpos``, may follow: all attributes of
    a component share its stamps). Frame i of an episode is at the reference's i-th sample time (in
    seconds on the source's clock); every other stream and camera is taken as of it: its latest sample
    at or before that time, never a later one. A frame before some stream's or camera's first sample is
    dropped. ``fps`` stays the caller's (give the reference's nominal rate; the summary notes a median
    interval more than 5% off 1/fps).

    max_age_s: with a reference, the freshness window in seconds: a frame where some stream's or
    camera's as-of sample is older than this (frame time - sample time > max_age_s) is dropped
    (None: no limit). Dropped frames are counted per episode by reason (the first in the order
    cameras, obs, action, each by name), in ``Episode.dropped`` and the export's summary notes. LeRobot
    stamps frame i ``i / fps`` and the kept frames are renumbered contiguously, so a frame dropped in the
    middle closes the gap on LeRobot's time axis: the summary says where each episode's first and last
    drop run lie (seconds from the episode's first reference sample, and the LeRobot frames around it)."""

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
    reference: str | None = None
    max_age_s: float | None = None


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
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> frames dropped (reference only)
    drops: Drops | None = None  # with a reference: what was dropped and where (None: the fps grid)

    @property
    def length(self) -> int:
        return len(self.grid)


@dataclass
class Drops:
    """What one episode's reference frames lost: ``candidates`` reference samples, ``reasons`` (reason ->
    count, in the fixed order), ``spans`` (reason -> (first, last) dropped time), ``runs`` text (where
    the first and last drop runs lie), ``interval_ns`` the reference's median sample interval. Times are
    seconds from the episode's first reference sample."""

    reference: str
    candidates: int
    reasons: dict[str, int]
    spans: dict[str, tuple[float, float]]
    runs: str
    interval_ns: float | None

    @property
    def total(self) -> int:
        return sum(self.reasons.values())

    def note(self, episode: str) -> str:
        """``episode 3: 7 of 300 frames dropped: 5 obs/arms/right stale (> 0.1 s) at 1.234 s..1.301 s, ...``"""
        parts = ", ".join(f"{n} {r} at {_secs(*self.spans[r])}" for r, n in self.reasons.items())
        return f"episode {episode}: {self.total} of {self.candidates} frames dropped: {parts}; {self.runs}"


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


def _load_episode(ds: Dataset, entry: dict, opts: LeRobotOptions) -> tuple[dict, dict]:
    """({"obs": streams, "action": streams} (smoothed as asked), cameras) of one episode, checked:
    every stream and camera non-empty with strictly increasing stamps."""
    groups = {"obs": ds.streams(entry, "obs"), "action": ds.streams(entry, "action")}
    if opts.smoothing_cutoff is not None:
        groups = {kind: ds.smoothed(kind, g, opts.smoothing_cutoff, opts.smoothing) for kind, g in groups.items()}
    cameras = ds.load_cameras(entry)
    for _kind, g in groups.items():
        for key, s in g.items():
            if len(s.timestamps) == 0 or not sampler.is_strictly_increasing(s.timestamps):
                raise StreamError(s.path, f"{key} timestamps are empty or not strictly increasing")
    for name, cam in cameras.items():
        if cam.num_frames == 0 or not sampler.is_strictly_increasing(cam.timestamps):
            raise StreamError(cam.path, f"camera {name} has no frames or unsorted stamps")
    if not any(groups.values()) and not cameras:
        raise StreamError(ds.episode_path(entry), "episode has no streams and no cameras")
    return groups, cameras


def _assemble(ds: Dataset, entry: dict, opts: LeRobotOptions, groups: dict, idx: dict, n: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """(obs (N, D), action (N, A)) float32 from the rows ``idx`` (kind -> stream key -> row per frame)."""
    ep_id = ds.episode_id(entry)
    # IK seeds: the recorded obs qpos at the first frame
    seeds = {k.rsplit("/", 1)[0]: groups["obs"][k].values[idx["obs"][k][0]] for k in groups["obs"]
             if k.endswith("/qpos") and n}
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
    obs = np.concatenate(obs_parts, axis=1).astype(np.float32) if obs_parts else np.zeros((n, 0), np.float32)
    act = np.concatenate(act_parts, axis=1).astype(np.float32) if act_parts else np.zeros((n, 0), np.float32)
    return obs, act


def sample_episode(ds: Dataset, entry: dict, opts: LeRobotOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(grid int64 ns, obs (N, D), action (N, A), {camera: (Camera, frame index per row)}) of one
    episode on ``Dataset.sample``'s grid with causal (previous) alignment, vectorised; with
    ``opts.reference``, the kept reference frames of :func:`sample_reference` instead."""
    if opts.reference is not None:
        return sample_reference(ds, entry, opts)[:4]
    groups, cameras = _load_episode(ds, entry, opts)
    stamps = [s.timestamps for g in groups.values() for s in g.values()] + [c.timestamps for c in cameras.values()]
    start, end = sampler.common_range(stamps)
    grid = sampler.time_grid(start, end, opts.fps)
    idx = {kind: {k: sampler.align(s.timestamps, grid, "previous") for k, s in g.items()} for kind, g in groups.items()}
    obs, act = _assemble(ds, entry, opts, groups, idx, len(grid))
    frames = {name: (cam, sampler.align(cam.timestamps, grid, "previous")) for name, cam in cameras.items()}
    return grid, obs, act, frames


def _sources(groups: dict, cameras: dict) -> dict[str, list[np.ndarray]]:
    """Every input by the name a reference and a drop reason use, in the fixed order (cameras, obs,
    action; each by name): ``cameras/<name>`` -> [stamps], ``obs/<embodiment>/<component>`` -> the
    stamps of each of its attributes' streams."""
    out: dict[str, list[np.ndarray]] = {f"cameras/{n}": [cameras[n].timestamps] for n in sorted(cameras)}
    for kind in ("obs", "action"):
        comps: dict[str, list[np.ndarray]] = {}
        for key in sorted(groups[kind]):
            comps.setdefault(f"{kind}/{key.rsplit('/', 1)[0]}", []).append(groups[kind][key].timestamps)
        out.update(comps)
    return out


def _reference_stamps(ds: Dataset, entry: dict, ref: str, groups: dict, cameras: dict, sources: dict) -> np.ndarray:
    """The sample times (int64 ns) of the reference ``ref``; an unknown one is a one-line StreamError."""
    kind, _, rest = ref.partition("/")
    if kind == "cameras" and rest in cameras:
        return np.asarray(cameras[rest].timestamps, dtype=np.int64)
    if kind in ("obs", "action") and rest:
        if rest in groups[kind]:
            return np.asarray(groups[kind][rest].timestamps, dtype=np.int64)
        attrs = sorted(k for k in groups[kind] if k.rsplit("/", 1)[0] == rest)
        if attrs:  # a component: its qpos (all attributes of a component share the stamps)
            key = f"{rest}/qpos" if f"{rest}/qpos" in attrs else attrs[0]
            return np.asarray(groups[kind][key].timestamps, dtype=np.int64)
    raise StreamError(ds.episode_path(entry),
                      f"episode {ds.episode_id(entry)}: reference {ref!r} is not one of its streams or cameras "
                      f"({', '.join(sources) or 'none'}; a component may end in /<attribute>)")


def sample_reference(ds: Dataset, entry: dict, opts: LeRobotOptions
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict, Drops]:
    """(frame times int64 ns, obs, action, {camera: (Camera, frame index per row)}, drops) of one
    episode whose frames are the samples of ``opts.reference``, every input as of each frame (its latest
    sample at or before it), the frames before an input's first sample or (``opts.max_age_s``) older
    than the window dropped; vectorised. Raises DatasetError when every frame is dropped."""
    ref = opts.reference
    groups, cameras = _load_episode(ds, entry, opts)
    sources = _sources(groups, cameras)
    t = _reference_stamps(ds, entry, ref, groups, cameras, sources)
    max_age_ns = None if opts.max_age_s is None else int(round(opts.max_age_s * 1e9))
    # per input (fixed order): 0 fine, 1 before its first sample, 2 stale; the age of a component is
    # the oldest of its attributes' as-of samples
    codes = np.zeros((len(sources), len(t)), dtype=np.int8)
    for row, stamp_list in enumerate(sources.values()):
        before = np.zeros(len(t), dtype=bool)
        age = np.zeros(len(t), dtype=np.int64)
        for stamps in stamp_list:
            i = sampler.align(stamps, t, "previous")  # clipped to 0 before the first sample
            before |= t < stamps[0]
            age = np.maximum(age, t - stamps[i])
        if max_age_ns is not None:
            codes[row] = np.where(age > max_age_ns, 2, 0)
        codes[row][before] = 1
    bad = codes > 0
    dropped = bad.any(axis=0)
    keep = ~dropped
    first = bad.argmax(axis=0)  # the first input (in order) that drops the frame
    reason_id = first * 2 + codes[first, np.arange(len(t))] - 1  # valid where dropped
    names = list(sources)
    labels = []
    for name in names:
        labels += [f"before the first sample of {name}", f"{name} stale (> {opts.max_age_s:g} s)"
                   if opts.max_age_s is not None else f"{name} stale"]
    rel = (t - t[0]) / 1e9
    counts = np.bincount(reason_id[dropped], minlength=len(labels))
    reasons, spans = {}, {}
    for r in np.flatnonzero(counts):
        at = rel[dropped & (reason_id == r)]
        reasons[labels[r]] = int(counts[r])
        spans[labels[r]] = (float(at[0]), float(at[-1]))
    interval = float(np.median(np.diff(t))) if len(t) > 1 else None
    drops = Drops(ref, len(t), reasons, spans, _runs(dropped, rel), interval)
    if not keep.any():
        raise DatasetError(ds.episode_path(entry), f"episode {ds.episode_id(entry)}: every frame of reference "
                                                   f"{ref} dropped: {drops.note(ds.episode_id(entry))}")
    grid = t[keep]
    idx = {kind: {k: sampler.align(s.timestamps, grid, "previous") for k, s in g.items()} for kind, g in groups.items()}
    obs, act = _assemble(ds, entry, opts, groups, idx, len(grid))
    frames = {name: (cam, sampler.align(cam.timestamps, grid, "previous")) for name, cam in cameras.items()}
    return grid, obs, act, frames, drops


def _secs(a: float, b: float) -> str:
    return f"{a:.3f} s" if a == b else f"{a:.3f} s..{b:.3f} s"


def _runs(dropped: np.ndarray, rel: np.ndarray) -> str:
    """Where the first and last runs of dropped frames lie: their reference times, and the kept frames
    around each (LeRobot frame index, its reference time), between which LeRobot's axis closes the gap."""
    if not dropped.any():
        return "no run"
    edges = np.diff(np.concatenate(([0], dropped.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    kept_before = np.concatenate(([0], np.cumsum(~dropped)))  # kept frames before index i
    n_kept = int(kept_before[-1])

    def where(s: int, e: int) -> str:
        k = int(kept_before[s])
        if n_kept == 0:
            side = "no frame kept"
        elif k == 0:
            side = f"before LeRobot frame 0 at {rel[e + 1]:.3f} s"
        elif k == n_kept:
            side = f"after the last LeRobot frame {k - 1} at {rel[s - 1]:.3f} s"
        else:
            side = f"between LeRobot frames {k - 1} at {rel[s - 1]:.3f} s and {k} at {rel[e + 1]:.3f} s"
        return f"{_secs(rel[s], rel[e])} ({side})"

    if len(starts) == 1:
        return f"1 run: {where(starts[0], ends[0])}"
    return f"{len(starts)} runs, the first {where(starts[0], ends[0])}, the last {where(starts[-1], ends[-1])}"


class DropTally:
    """The summary notes of an export with a reference: one per episode that dropped frames, a total,
    and a note when the reference's median interval is more than 5% off ``1 / fps``. Nothing without a
    reference."""

    def __init__(self, opts: LeRobotOptions):
        self.opts = opts
        self.episode_notes: list[str] = []
        self.reasons: dict[str, int] = {}
        self.candidates = self.kept = self.episodes = self.dropping = 0
        self.off_rate: list[tuple[str, float]] = []

    def add(self, ep: Episode) -> None:
        d = ep.drops
        if d is None:
            return
        ep_id = str(ep.entry.get("id"))
        self.episodes += 1
        self.candidates += d.candidates
        self.kept += ep.length
        if d.total:
            self.dropping += 1
            self.episode_notes.append(d.note(ep_id))
            for r, n in d.reasons.items():
                self.reasons[r] = self.reasons.get(r, 0) + n
        period = 1e9 / self.opts.fps
        if d.interval_ns is not None and abs(d.interval_ns - period) > RATE_TOLERANCE * period:
            self.off_rate.append((ep_id, d.interval_ns))

    def notes(self) -> list[str]:
        if self.opts.reference is None:
            return []
        out = list(self.episode_notes)
        total = self.candidates - self.kept
        age = f", max age {self.opts.max_age_s:g} s" if self.opts.max_age_s is not None else ""
        what = ", ".join(f"{n} {r}" for r, n in sorted(self.reasons.items(), key=lambda x: -x[1]))
        out.append(f"frames dropped (reference {self.opts.reference}{age}): {total} of {self.candidates} in "
                   f"{self.dropping} of {self.episodes} episode(s)" + (f": {what}" if what else "")
                   + (" (times: s from each episode's first reference sample; LeRobot's timestamps close each gap)"
                      if total else ""))
        if self.off_rate:
            ms = [v / 1e6 for _, v in self.off_rate]
            span = f"{min(ms):.1f} ms" if min(ms) == max(ms) else f"{min(ms):.1f}..{max(ms):.1f} ms"
            eps = ", ".join(e for e, _ in self.off_rate[:10]) + (", ..." if len(self.off_rate) > 10 else "")
            out.append(f"reference {self.opts.reference}: median interval {span} in episode(s) {eps} is more than "
                       f"{RATE_TOLERANCE:.0%} off 1/fps = {1e3 / self.opts.fps:.1f} ms ({self.opts.fps} fps)")
        return out


def plan(ds: Dataset, opts: LeRobotOptions) -> tuple[list[dict], dict[int, int], list[str]]:
    """(chosen entries, old task index -> new, task prompts by new index)."""
    if opts.state not in kinematics.STATES:
        raise ValueError(f"state must be one of {kinematics.STATES}, not {opts.state!r}")
    if isinstance(opts.fps, bool) or not isinstance(opts.fps, int) or opts.fps <= 0:
        raise ValueError(f"fps must be a positive integer, not {opts.fps!r}")
    if opts.reference is not None and not isinstance(opts.reference, str):
        raise ValueError(f"reference must be cameras/<name>, obs/<embodiment>/<component> or "
                         f"action/<embodiment>/<component>, not {opts.reference!r}")
    if opts.max_age_s is not None:
        if opts.reference is None:
            raise ValueError("max_age_s applies with a reference (the frames of the fps grid are never stale)")
        if isinstance(opts.max_age_s, bool) or not isinstance(opts.max_age_s, (int, float)) \
                or not 0 < opts.max_age_s < float("inf"):
            raise ValueError(f"max_age_s must be a positive number of seconds, not {opts.max_age_s!r}")
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
        if opts.reference is not None:
            grid, obs, act, frames, drops = sample_reference(ds, entry, opts)
        else:
            (grid, obs, act, frames), drops = sample_episode(ds, entry, opts), None
        if len(grid) == 0:
            raise DatasetError(ds.episode_path(entry), f"shorter than one frame at {opts.fps} fps: nothing to export")
        ti, task = task_of(entry, remap, prompts)
        yield Episode(entry, new_index, ti, task, grid, obs, act, frames,
                      dropped=dict(drops.reasons) if drops else {}, drops=drops)


_POOL = None


def _decode_pool():
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)), thread_name_prefix="jpeg")
    return _POOL


def encode_frames(ep: Episode, camera: str, writer, stats, lookahead: int = 8) -> None:  # stats: lerobot_stats.ImageStats
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
