"""The loader's index: every episode resampled once on its ``hz`` grid, held in flat numpy arrays.

Built in the process that creates the loader, from the same pieces as ``Dataset.sample`` (the
integer-nanosecond grid over the common range of the streams and cameras, and ``sampler.align``):
each parquet file, camera listing and sidecar is read once. It holds no open file and no per-step
Python object, so DataLoader workers inherit it (fork) or receive it pickled, and touching it does not
make their memory grow (no reference counts written on shared pages).

Step ``k`` of the whole index is step ``k - starts[e]`` of episode ``e``, with
``starts[e] <= k < starts[e + 1]``; episodes keep their metadata order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout, sampler, sidecar
from openarm_sim_dataset.core.dataset import Dataset, episode_grid
from openarm_sim_dataset.core.errors import CameraError, StreamError
from openarm_sim_dataset.core.video_camera import DecodedCamera

#: Simulation streams the loader can serve: per frame, from ``sim/sidecar.npz`` (small, gathered when the
#: index is built) and ``sim/frames.npz`` (images, read lazily per worker).
SIM_SMALL = ("object_pose", "cam_pos", "cam_mat")
SIM_IMAGES = ("depth", "labels")
SIM_STREAMS = SIM_SMALL + SIM_IMAGES
_PER_CAMERA = ("cam_pos", "cam_mat", "depth", "labels")


@dataclass(frozen=True)
class EpisodeIndex:
    """Grid-aligned values of a set of episodes (see the module docstring for the step numbering).

    ``timestamps`` int64 ns (N,); ``state``/``action`` float32 (N, D) in ``state_names``/``action_names``
    order (units of the streams: radians, metres + wxyz); ``frame_index`` (N, C) int64: frame of camera
    ``cameras[c]`` shown at each step (an index into that episode's sorted frames, ``camera_frames[e, c]``
    of them, at ``camera_paths[e, c]`` in folder form); ``sim_small`` maps ``object_pose`` /
    ``cam_pos/<cam>`` / ``cam_mat/<cam>`` to (N, ...) float64 arrays; ``sim_frame`` (N,) the sidecar
    frame of each step, for ``sim_images`` (``depth/<cam>``, ``labels/<cam>``) read from ``sim_dirs[e]``.

    So that an item opens its frame without listing a folder or indexing a tar (random access over many
    episodes would otherwise repeat that for nearly every item), each step also holds the frame's
    ``frame_stamp`` (int64 ns: the file ``<stamp>.jpeg`` of a folder camera whose names are all canonical,
    ``camera_direct[e, c]``) and, for tar cameras, ``frame_offset``/``frame_size`` of its bytes in
    ``<camera_paths[e, c]>.tar`` (-1 for folders).

    A LeRobot dataset's cameras are decoded from another encoding (``camera_decoded[e, c]``): a video
    camera (``camera_video[e, c]``) has its MP4 as ``camera_paths[e, c]`` and, each step, the presentation
    timestamp of its frame in ``frame_pts`` (-1 elsewhere), decoded by the process's own decoder of the
    file; an image camera (PNG in the frame table) is opened again through the reader
    (:func:`open_decoded_camera`). Either gives the frame ``Dataset.sample(decode=True)`` gives.
    """

    root: str
    hz: float
    align: str
    episode_ids: np.ndarray
    tasks: np.ndarray
    starts: np.ndarray
    timestamps: np.ndarray
    state: np.ndarray
    action: np.ndarray
    state_names: tuple[str, ...]
    action_names: tuple[str, ...]
    cameras: tuple[str, ...]
    camera_paths: np.ndarray
    camera_frames: np.ndarray
    frame_index: np.ndarray
    frame_stamp: np.ndarray
    frame_offset: np.ndarray
    frame_size: np.ndarray
    camera_direct: np.ndarray
    camera_decoded: np.ndarray | None = None
    camera_video: np.ndarray | None = None
    frame_pts: np.ndarray | None = None
    sim_small: dict[str, np.ndarray] = field(default_factory=dict)
    sim_images: tuple[str, ...] = ()
    sim_frame: np.ndarray | None = None
    sim_frames: np.ndarray | None = None
    sim_dirs: np.ndarray | None = None

    @property
    def num_episodes(self) -> int:
        return len(self.episode_ids)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def episode_of(self, k: np.ndarray | int) -> np.ndarray | int:
        """Episode position(s) holding global step(s) ``k`` (0 <= k < len)."""
        return np.searchsorted(self.starts, k, side="right") - 1

    def subset(self, positions: Sequence[int]) -> EpisodeIndex:
        """The index of the episodes at ``positions`` (in that order); arrays are copied, not shared."""
        pos = np.asarray(positions, dtype=np.int64)
        lengths = np.diff(self.starts)[pos]
        rows = np.concatenate([np.arange(self.starts[p], self.starts[p + 1]) for p in pos]) if len(pos) else \
            np.empty(0, np.int64)
        return replace(
            self,
            episode_ids=self.episode_ids[pos], tasks=self.tasks[pos],
            starts=np.r_[0, np.cumsum(lengths)].astype(np.int64),
            timestamps=self.timestamps[rows], state=self.state[rows], action=self.action[rows],
            camera_paths=self.camera_paths[pos], camera_frames=self.camera_frames[pos],
            frame_index=self.frame_index[rows], frame_stamp=self.frame_stamp[rows],
            frame_offset=self.frame_offset[rows], frame_size=self.frame_size[rows],
            camera_direct=self.camera_direct[pos],
            camera_decoded=None if self.camera_decoded is None else self.camera_decoded[pos],
            camera_video=None if self.camera_video is None else self.camera_video[pos],
            frame_pts=None if self.frame_pts is None else self.frame_pts[rows],
            sim_small={k: v[rows] for k, v in self.sim_small.items()},
            sim_frame=None if self.sim_frame is None else self.sim_frame[rows],
            sim_frames=None if self.sim_frames is None else self.sim_frames[pos],
            sim_dirs=None if self.sim_dirs is None else self.sim_dirs[pos],
        )


def open_decoded_camera(index: EpisodeIndex, e: int, c: int, ds: Dataset | None = None) -> DecodedCamera:
    """Camera ``c`` of episode ``e`` of a LeRobot dataset (``index.camera_decoded[e, c]``) opened again
    through the reader (``ds``: the dataset at ``index.root``, to read its metadata once)."""
    ds = Dataset(index.root) if ds is None else ds
    cam = ds.load_camera(index.cameras[c], str(index.episode_ids[e]))
    if cam.num_frames != index.camera_frames[e, c]:
        raise CameraError(cam.path, f"camera {index.cameras[c]!r} has {cam.num_frames} frames, "
                                    f"{index.camera_frames[e, c]} when the loader was built (the dataset changed; build it again)")
    return cam


def _load_cameras(ds: Dataset, ep: dict, ep_id: str) -> dict:
    """The episode's cameras, checked before any item is read (so that a DataLoader worker never meets
    it first): every file opens and is indexed, and a video holds one frame per row of the episode's frame
    table (``length``), as LeRobot's own loader requires; an error names the file, episode and frame."""
    try:
        cameras = ds.load_cameras(ep)
    except CameraError as err:
        if f"episode {ep_id}" in err.message or err.path is None:
            raise
        raise CameraError(err.path, f"episode {ep_id}: {err.message}") from None
    rows = ep.get("length")
    for name, cam in cameras.items():
        if cam.format != "video" or rows is None or cam.num_frames == int(rows):
            continue
        n, m = int(rows), cam.num_frames
        what = (f"frames {m}..{n - 1} (from {m / cam.fps:.3f} s) are missing" if m < n else
                f"frames {n}..{m - 1} (from {float(cam.seconds[n]):.3f} s) have no row")
        raise CameraError(cam.path, f"episode {ep_id}, camera {name!r}: {m} frames in its window for the frame table's "
                                    f"{n} rows: {what}")
    return cameras


def _resolve(specs: Sequence[str], streams: dict, kind: str, where: Path) -> list[str]:
    """Stream keys named by ``specs``: a full key (``arms/right/qpos``) or an attribute (``qpos``: every
    ``*/qpos`` stream, in the episode's stream order)."""
    keys: list[str] = []
    for spec in specs:
        found = [spec] if spec in streams else [k for k in streams if k.rsplit("/", 1)[-1] == spec]
        if not found:
            raise StreamError(where, f"no {kind} stream {spec!r} (have {', '.join(streams) or 'none'})")
        keys += [k for k in found if k not in keys]
    return keys


def _sim_wanted(sim: bool | Sequence[str] | None) -> tuple[tuple[str, ...], bool]:
    """(stream kinds asked for, whether each must exist): ``True`` means those present in every episode."""
    if sim is None or sim is False:
        return (), True
    if sim is True:
        return SIM_STREAMS, False
    names = (sim,) if isinstance(sim, str) else tuple(sim)
    unknown = [n for n in names if n not in SIM_STREAMS]
    if unknown:
        raise ValueError(f"sim streams must be among {', '.join(SIM_STREAMS)}, not {', '.join(map(repr, unknown))}")
    return names, True


def _sim_keys(kinds: tuple[str, ...], cameras: Sequence[str]) -> list[str]:
    return [k for kind in kinds for k in ([f"{kind}/{c}" for c in cameras] if kind in _PER_CAMERA else [kind])]


def _npz_key(key: str) -> str:
    return key.replace("/", "_")


def build_index(ds: Dataset, hz: float, align: str = "previous", state: Sequence[str] = ("qpos",),
                action: Sequence[str] = ("qpos",), sim: bool | Sequence[str] | None = False,
                episodes: Sequence | None = None) -> EpisodeIndex:
    """Resample the episodes of ``ds`` (or ``episodes``: ids or positions) on an ``hz`` grid.

    The grid and the alignment are ``Dataset.sample``'s: ``start + floor(k * 1e9 / hz)`` over the latest
    first stamp to the earliest last stamp of every obs/action stream and camera of ``ds``, each value
    the one ``align`` picks (default ``previous``: causal). ``state``/``action`` name the streams
    concatenated into the state and action vectors.
    """
    sampler.period_ns(hz)
    if align not in sampler.ALIGNMENTS:
        raise ValueError(f"align must be one of {sampler.ALIGNMENTS}, not {align!r}")
    chosen = ds.episodes if episodes is None else [ds.episode(e) for e in episodes]
    if not chosen:
        raise StreamError(ds.root / layout.METADATA_FILE, "has no episode to load")
    sim_kinds, sim_required = _sim_wanted(sim)
    cams = tuple(ds.camera_names)
    tasks_meta = ds.meta.tasks
    ids, tasks, lengths, stamps_out, states, actions, frames_idx = [], [], [], [], [], [], []
    cam_paths, cam_counts, stamps_f, offsets_f, sizes_f, direct = [], [], [], [], [], []
    decoded, video, pts_f = [], [], []
    sim_small: dict[str, list] = {}
    sim_frame_rows, sim_counts, sim_dirs = [], [], []
    state_names = action_names = None
    sim_keys: list[str] | None = None
    for ep in chosen:
        ep_id = ds.episode_id(ep)
        where = ds.episode_path(ep)
        groups = {"obs": ds.streams(ep, "obs"), "action": ds.streams(ep, "action")}
        cameras = _load_cameras(ds, ep, ep_id)
        grid = episode_grid(where, groups, cameras, hz)  # Dataset.sample's grid and checks
        if len(grid) == 0:
            raise StreamError(where, f"episode spans less than one step at {hz} Hz")
        vectors = []
        for kind, specs in (("obs", state), ("action", action)):
            keys = _resolve(specs, groups[kind], kind, where)
            names = tuple(f"{k}/{c}" for k in keys for c in groups[kind][k].columns)
            known = state_names if kind == "obs" else action_names
            if known is not None and names != known:
                raise StreamError(where, f"{kind} streams differ from the first episode's ({', '.join(keys)})")
            if kind == "obs":
                state_names = names
            else:
                action_names = names
            s = groups[kind]
            vectors.append(np.concatenate([s[k].values[sampler.align(s[k].timestamps, grid, align)] for k in keys],
                                          axis=1).astype(np.float32, copy=False))
        states.append(vectors[0])
        actions.append(vectors[1])
        used = np.stack([sampler.align(cameras[c].timestamps, grid, align) for c in cams], axis=1) if cams \
            else np.empty((len(grid), 0), np.int64)
        frames_idx.append(used)
        stamps_f.append(np.stack([cameras[c].timestamps[used[:, j]] for j, c in enumerate(cams)], axis=1) if cams
                        else used)
        offs, sizes = np.full(used.shape, -1, np.int64), np.full(used.shape, -1, np.int64)
        pts = np.full(used.shape, -1, np.int64)
        for j, c in enumerate(cams):
            if cameras[c].format == "video":
                pts[:, j] = cameras[c].pts[used[:, j]]
                continue
            spans = cameras[c].member_spans()
            if spans is not None:
                offs[:, j], sizes[:, j] = spans[0][used[:, j]], spans[1][used[:, j]]
        offsets_f.append(offs)
        sizes_f.append(sizes)
        pts_f.append(pts)
        video.append([cameras[c].format == "video" for c in cams])
        decoded.append([isinstance(cameras[c], DecodedCamera) for c in cams])
        direct.append([cameras[c].format == "tar" or cameras[c].names_are_canonical() for c in cams])
        # folder form of each camera's path (a tar camera is found beside it again in a worker)
        cam_paths.append([str(cameras[c].path.with_name(cameras[c].path.name.removesuffix(layout.TAR_SUFFIX)))
                          if cameras[c].format == "tar" else str(cameras[c].path) for c in cams])
        cam_counts.append([cameras[c].num_frames for c in cams])
        for cam in cameras.values():
            cam.close()
        if sim_kinds:
            folder = layout.sim_dir(ds.root, ep_id)
            side_path, frames_path = folder / sidecar.SIDECAR_FILE, folder / sidecar.FRAMES_FILE
            have = set(sidecar.npz_names(side_path)) if side_path.exists() else set()
            have |= set(sidecar.npz_names(frames_path)) if frames_path.exists() else set()
            wanted = _sim_keys(sim_kinds, cams)
            present = [k for k in wanted if _npz_key(k) in have]
            if sim_required and len(present) < len(wanted):
                missing = next(k for k in wanted if _npz_key(k) not in have)
                src = frames_path if missing.split("/")[0] in SIM_IMAGES else side_path
                raise sidecar.SidecarError(src, f"no {_npz_key(missing)!r} array (sim stream {missing!r} asked for)")
            sim_keys = present if sim_keys is None else [k for k in sim_keys if k in present]
            small = [k for k in present if k.split("/")[0] in SIM_SMALL]
            if present:
                arrays = sidecar.load_npz(side_path, members={"frame_timestamp", *map(_npz_key, small)})
                ts = arrays.get("frame_timestamp")
                if ts is None or ts.dtype != np.int64 or ts.ndim != 1 or len(ts) == 0 or \
                        not sampler.is_strictly_increasing(ts):
                    raise sidecar.SidecarError(side_path, "frame_timestamp must be strictly increasing 1-D int64 ns")
                rows = sampler.align(ts, grid, align)
                for k in small:
                    values = arrays[_npz_key(k)]
                    if values.ndim == 0 or len(values) != len(ts):
                        raise sidecar.SidecarError(side_path, f"{_npz_key(k)} has not one row per frame ({len(ts)})")
                    sim_small.setdefault(k, []).append(values[rows])
                sim_frame_rows.append(rows)
                sim_counts.append(len(ts))
            else:
                sim_frame_rows.append(np.zeros(len(grid), np.int64))
                sim_counts.append(0)
            sim_dirs.append(str(folder))
        ti = ep.get("task_index", 0 if tasks_meta else None)
        prompt = tasks_meta[ti].get("prompt") if ti is not None and ti < len(tasks_meta) else None
        ids.append(ep_id)
        tasks.append(prompt or "")
        lengths.append(len(grid))
        stamps_out.append(grid)
    sim_keys = sim_keys or []
    small_keys = [k for k in sim_keys if k.split("/")[0] in SIM_SMALL]
    image_keys = tuple(k for k in sim_keys if k.split("/")[0] in SIM_IMAGES)
    return EpisodeIndex(
        root=str(ds.root), hz=float(hz), align=align,
        episode_ids=np.array(ids, dtype=str), tasks=np.array(tasks, dtype=str),
        starts=np.r_[0, np.cumsum(lengths)].astype(np.int64),
        timestamps=np.concatenate(stamps_out), state=np.concatenate(states), action=np.concatenate(actions),
        state_names=state_names, action_names=action_names, cameras=cams,
        camera_paths=np.array(cam_paths, dtype=str).reshape(len(ids), len(cams)),
        camera_frames=np.array(cam_counts, dtype=np.int64).reshape(len(ids), len(cams)),
        frame_index=np.concatenate(frames_idx).astype(np.int64),
        frame_stamp=np.concatenate(stamps_f).astype(np.int64),
        frame_offset=np.concatenate(offsets_f), frame_size=np.concatenate(sizes_f),
        camera_direct=np.array(direct, dtype=bool).reshape(len(ids), len(cams)),
        camera_decoded=np.array(decoded, dtype=bool).reshape(len(ids), len(cams)),
        camera_video=np.array(video, dtype=bool).reshape(len(ids), len(cams)),
        frame_pts=np.concatenate(pts_f).astype(np.int64),
        # a stream some episode lacks (sim=True keeps what all have) is dropped from every episode
        sim_small={k: np.concatenate(sim_small[k]) for k in small_keys if len(sim_small.get(k, ())) == len(ids)},
        sim_images=image_keys,
        sim_frame=np.concatenate(sim_frame_rows) if sim_kinds else None,
        sim_frames=np.array(sim_counts, dtype=np.int64) if sim_kinds else None,
        sim_dirs=np.array(sim_dirs, dtype=str) if sim_kinds else None,
    )
