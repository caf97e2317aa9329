"""``Dataset``: episodes of any OpenArm layout, their streams and cameras, and resampling.

The Dataset knows how to find and read streams; it does not know converters or validators exist
(they take a Dataset). Time stays in int64 nanoseconds; ``use_unixtime`` converts at the edge.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from . import layout, sampler, sidecar
from .camera import Camera, Frame
from .errors import CameraError, DatasetError, StreamError
from .metadata import Metadata
from .streams import Stream, read_attribute_file, read_state_file
from .writer import (
    ComponentStreams,
    EpisodeData,
    new_dataset,
    write_episode_tree,
)

if TYPE_CHECKING:  # pandas is imported when a DataFrame is built, so that tools that never build one start fast
    import pandas as pd

EpisodeRef = dict | str | int


class StreamFile(NamedTuple):
    """One parquet file of an episode: ``prefix`` (``arms/right``), its path, and ``attribute``
    (None for a ``state.parquet`` holding several attributes; ``qpos``/``elevation`` for the
    per-attribute files of older layouts), with the value columns of each row."""

    prefix: str
    path: Path
    attribute: str | None
    columns: tuple[str, ...]


class Sample:
    """One grid point of one episode.

    ``timestamp`` is int64 nanoseconds (``unixtime`` gives float seconds); ``obs``/``action`` map
    ``arms/right/qpos``-style keys to float32 rows; ``cameras`` map names to lazy :class:`Frame`
    objects, or to decoded read-only HxWx3 uint8 arrays when sampling with ``decode=True``;
    ``sim`` holds simulation streams (empty for recorded data).
    """

    __slots__ = ("episode", "timestamp", "obs", "action", "cameras", "sim")

    def __init__(self, episode: str, timestamp: int, obs: dict, action: dict, cameras: dict, sim: dict):
        self.episode = episode
        self.timestamp = timestamp
        self.obs = obs
        self.action = action
        self.cameras = cameras
        self.sim = sim

    @property
    def unixtime(self) -> float:
        return self.timestamp / 1e9

    def __iter__(self):
        return iter((self.episode, self.timestamp, self.obs, self.action, self.cameras))

    def __repr__(self) -> str:
        return f"Sample(episode={self.episode!r}, timestamp={self.timestamp})"


class Dataset:
    """An OpenArm dataset folder of any layout (0.4.0, 0.3.0, 0.2.0, 0.1.0, unversioned)."""

    def __init__(self, path: str | os.PathLike, camera_names: list[str] | None = None):
        self.root = Path(path)
        if not self.root.is_dir():
            raise DatasetError(self.root, "is not a dataset folder")
        self.meta = Metadata.load(self.root)
        self._camera_names = camera_names
        if camera_names is not None:
            unknown = set(camera_names) - set(self.meta.cameras)
            if unknown:
                raise CameraError(self.root / layout.METADATA_FILE, f"no camera named {', '.join(sorted(unknown))}")

    # ------------------------------------------------------------------ episodes
    @property
    def version(self) -> str:
        """Layout the dataset was read from ('unversioned' for the oldest)."""
        return self.meta.version

    @property
    def num_episodes(self) -> int:
        return self.meta.num_episodes

    @property
    def episodes(self) -> list[dict]:
        return self.meta.episodes

    @property
    def episode_ids(self) -> list[str]:
        """Episode ids in metadata order (integers normalised to strings)."""
        return self.meta.episode_ids

    @property
    def camera_names(self) -> list[str]:
        return list(self._camera_names) if self._camera_names is not None else self.meta.cameras

    def episode(self, episode: EpisodeRef) -> dict:
        """The metadata entry of an episode given as its entry, its id (str) or its index (int)."""
        eps = self.meta.episodes
        if isinstance(episode, dict):
            want = layout.check_name(episode.get("id"), "episode id")
        elif isinstance(episode, (int, np.integer)) and not isinstance(episode, bool):
            if not -len(eps) <= int(episode) < len(eps):
                raise IndexError(f"{self.root}: episode index {episode} out of range (0..{len(eps) - 1})")
            return eps[int(episode)]
        else:
            want = layout.check_name(episode, "episode id")
        for ep in eps:
            if layout.check_name(ep["id"], "episode id") == want:
                return ep
        raise KeyError(f"{self.root / layout.METADATA_FILE}: no episode with id {want!r}")

    def episode_id(self, episode: EpisodeRef) -> str:
        return layout.check_name(self.episode(episode)["id"], "episode id", self.root / layout.METADATA_FILE)

    def episode_path(self, episode: EpisodeRef) -> Path:
        return layout.episode_dir(self.root, self.episode_id(episode))

    # ------------------------------------------------------------------- streams
    def stream_files(self, episode: EpisodeRef, kind: str) -> list[StreamFile]:
        """The parquet files holding an episode's obs or action streams (nothing is read)."""
        ep_id = self.episode_id(episode)
        out: list[StreamFile] = []
        for emb in self.meta.embodiments:
            for comp in emb.components or (None,):
                folder = layout.component_dir(self.root, ep_id, kind, emb.name, comp, self.version)
                prefix = f"{emb.name}/{comp}" if comp else emb.name
                state = folder / layout.STATE_FILE
                if state.is_file():
                    out.append(StreamFile(prefix, state, None, emb.joints))
                elif os.path.lexists(state):  # a device, FIFO, folder or dangling link is not a stream
                    raise StreamError(state, "is not a regular file")
                for attr in emb.legacy_attributes:
                    path = folder / f"{attr}.parquet"
                    if path.is_file():
                        out.append(StreamFile(prefix, path, attr, emb.joints))
        return out

    def streams(self, episode: EpisodeRef, kind: str) -> dict[str, Stream]:
        """All obs or action streams of an episode, keyed ``arms/right/qpos`` (each file read once)."""
        out: dict[str, Stream] = {}
        for f in self.stream_files(episode, kind):
            if f.attribute is None:
                out.update(read_state_file(f.path, f.prefix))
                continue
            key = f"{f.prefix}/{f.attribute}"
            if key in out:
                raise StreamError(f.path, f"{key} is stored both here and in {layout.STATE_FILE}")
            out[key] = read_attribute_file(f.path, key, f.columns)
        return out

    def load_obs(self, episode: EpisodeRef, use_unixtime: bool = False, state: str | None = None) -> dict[str, pd.DataFrame]:
        """Obs streams as DataFrames indexed by timestamp (datetime64[ns], or float Unix seconds
        with ``use_unixtime``), columns joint1..joint7, gripper (x..qz, gripper for pose).
        ``state="qpos"|"pose"|"rot6d"`` converts arm states on the fly (see :mod:`.kinematics`)."""
        if state is not None:
            from . import kinematics

            return kinematics.load_obs(self, episode, state, use_unixtime)
        return {k: _frame(s, use_unixtime) for k, s in self.streams(episode, "obs").items()}

    def load_action(self, episode: EpisodeRef, use_unixtime: bool = False, state: str | None = None) -> dict[str, pd.DataFrame]:
        """Action streams (the commands sent), same form and options as :meth:`load_obs`."""
        if state is not None:
            from . import kinematics

            return kinematics.load_action(self, episode, state, use_unixtime)
        return {k: _frame(s, use_unixtime) for k, s in self.streams(episode, "action").items()}

    # ------------------------------------------------------------------- cameras
    def load_camera(self, name: str, episode: EpisodeRef) -> Camera:
        if name not in self.meta.cameras:
            raise KeyError(f"{self.root / layout.METADATA_FILE}: no camera {name!r} (have {self.meta.cameras})")
        ep_id = self.episode_id(episode)
        stored = self.meta.stored_camera_name(name)
        path = layout.camera_dir(self.root, ep_id, name, self.version, stored)
        fallbacks = []
        if self.version == layout.UNVERSIONED and stored.endswith("_wrist"):
            # the oldest recorder named wrist camera folders <side>_image
            fallbacks.append(stored.removesuffix("_wrist"))
        # openarm_dataset's write of a 0.1.0 dataset renames wrist cameras in metadata.yaml but
        # not on disk: accept the old folder name so that its output stays readable
        fallbacks += [old for old, new in layout.LEGACY_CAMERA_RENAMES.items() if new == name]
        for alt in fallbacks:
            if path.exists() or path.with_name(path.name + layout.TAR_SUFFIX).exists():
                break
            path = layout.camera_dir(self.root, ep_id, name, self.version, alt)
        return Camera(name, path)

    def load_cameras(self, episode: EpisodeRef) -> dict[str, Camera]:
        """Cameras of an episode by name (0.1.0/unversioned wrist cameras renamed wrist_left/right)."""
        return {name: self.load_camera(name, episode) for name in self.camera_names}

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        hz: float,
        episode: EpisodeRef | None = None,
        align: str = "previous",
        decode: bool = False,
        workers: int | None = None,
        state: str | None = None,
    ) -> Iterator[Sample]:
        """Resample every episode (or one) on a fixed ``hz`` grid over the common time range.

        The grid starts at the latest first stamp of all streams and cameras and stops before the
        earliest last stamp (openarm_dataset's range). ``align`` picks, per stream, the sample
        ``previous`` (latest at or before t; default, causal), ``next`` (first at or after t, as
        openarm_dataset does) or ``nearest``. With ``decode=True`` frames are decoded ahead by a
        pool of ``workers`` threads (default: CPU count); otherwise they stay lazy Frames.
        ``state="qpos"|"pose"|"rot6d"`` converts the arm entries per episode (see :mod:`.kinematics`).
        """
        if state is not None:
            from . import kinematics

            yield from kinematics.sample(self, hz, state, episode=episode, align=align, decode=decode)
            return
        sampler.period_ns(hz)
        if align not in sampler.ALIGNMENTS:
            raise ValueError(f"align must be one of {sampler.ALIGNMENTS}, not {align!r}")
        episodes = self.meta.episodes if episode is None else [self.episode(episode)]
        if not decode:
            for ep in episodes:
                yield from self._sample_episode(ep, hz, align, None)
            return
        workers = workers or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jpeg") as pool:
            for ep in episodes:
                yield from self._sample_episode(ep, hz, align, (pool, workers))

    def sim_streams(self, episode: EpisodeRef) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Simulation streams of a generated episode (empty for recorded data): ``object_pose``,
        ``cam_pos/<cam>``, ``cam_mat/<cam>``, ``depth/<cam>``, ``labels/<cam>`` as
        (frame timestamps in int64 ns, per-frame arrays). See :mod:`openarm_sim_dataset.sidecar`."""
        folder = layout.sim_dir(self.root, self.episode_id(episode))
        if not (folder / sidecar.SIDECAR_FILE).is_file():
            return {}
        return sidecar.sim_streams(folder, self.camera_names)

    def _sample_episode(self, episode: dict, hz: float, how: str, pool) -> Iterator[Sample]:
        ep_id = self.episode_id(episode)
        groups = {"obs": self.streams(episode, "obs"), "action": self.streams(episode, "action")}
        cameras = self.load_cameras(episode)
        sim = self.sim_streams(episode)
        stamp_arrays = []
        for kind, streams in groups.items():
            for key, s in streams.items():
                _check_stamps(s.timestamps, s.path, key)
                stamp_arrays.append(s.timestamps)
        for name, cam in cameras.items():
            _check_stamps(cam.timestamps, cam.path, f"camera {name}")
            stamp_arrays.append(cam.timestamps)
        if not stamp_arrays:
            raise StreamError(self.episode_path(episode), "episode has no streams and no cameras")
        start, end = sampler.common_range(stamp_arrays)
        grid = sampler.time_grid(start, end, hz)
        gathered = {
            kind: [(key, s.values[sampler.align(s.timestamps, grid, how)]) for key, s in streams.items()]
            for kind, streams in groups.items()
        }
        sim_rows = [(key, vals[sampler.align(ts, grid, how)]) for key, (ts, vals) in sim.items()]
        cam_idx = [(name, cam, sampler.align(cam.timestamps, grid, how)) for name, cam in cameras.items()]
        obs_rows, act_rows = gathered["obs"], gathered["action"]
        grid_list = grid.tolist()
        if pool is None:
            cam_cols = [(name, [Frame(cam, int(i), int(cam.timestamps[i])) for i in idx]) for name, cam, idx in cam_idx]
        else:
            cam_cols = [(name, _DecodedColumn(cam, idx, *pool)) for name, cam, idx in cam_idx]
        for k, t in enumerate(grid_list):
            yield Sample(
                ep_id,
                t,
                {key: v[k] for key, v in obs_rows},
                {key: v[k] for key, v in act_rows},
                {name: col[k] for name, col in cam_cols},
                {key: v[k] for key, v in sim_rows},
            )

    # ----------------------------------------------------------------- validation
    def validate(self, **options) -> list:
        """Run the validation checks (see :func:`openarm_sim_dataset.validate.validate`) and return a
        ``Report``: rows ``(check, status pass|fail|skip, detail, episodes)`` with ``.counts`` of passed,
        failed and skipped apart. Does not modify the dataset."""
        from .validate import validate

        return validate(self, **options)

    # -------------------------------------------------------------------- writing
    def episode_data(self, episode: EpisodeRef) -> EpisodeData:
        """An episode's content in the writer's terms (streams grouped per component, frame bytes)."""
        data = EpisodeData()
        for kind, target in (("obs", data.obs), ("action", data.action)):
            for key, s in self.streams(episode, kind).items():
                prefix, attr = key.rsplit("/", 1)
                emb, _, comp = prefix.partition("/")
                group = target.setdefault((emb, comp or None), ComponentStreams(s.timestamps, {}))
                if not np.array_equal(group.timestamps, s.timestamps):
                    raise StreamError(s.path, f"{key} has other timestamps than the rest of {prefix}; cannot share one state.parquet")
                group.attributes[attr] = s.values
        for name, cam in self.load_cameras(episode).items():
            data.cameras[name] = ((f.timestamp, f.read_bytes()) for f in cam.frames())
        sim = self.episode_path(episode) / layout.SIM_DIR
        if sim.is_dir():
            for p in sorted(sim.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    data.files[p.relative_to(self.episode_path(episode)).as_posix()] = p
        return data

    def write(self, out: str | os.PathLike, camera_format: str = "dir", episodes: list[EpisodeRef] | None = None,
              progress: Callable[[str], None] | None = None) -> Path:
        """Write (a selection of) this dataset as a new 0.4.0 dataset at ``out``.

        The whole output is built in a temporary sibling folder and renamed into place, so ``out``
        either does not exist or is complete. An existing ``out`` is refused.
        """
        out = Path(out)
        chosen = self.meta.episodes if episodes is None else [self.episode(e) for e in episodes]
        with new_dataset(out) as tmp:
            for ep in chosen:
                ep_id = self.episode_id(ep)
                write_episode_tree(layout.episode_dir(tmp, ep_id), self.episode_data(ep), camera_format)
                if progress:
                    progress(ep_id)
            meta = self.meta.copy()
            keep = {self.episode_id(ep) for ep in chosen}
            meta.data["episodes"] = [dict(ep) for ep in meta.episodes if layout.check_name(ep["id"], "episode id") in keep]
            meta.write(tmp)
        return out


def _check_stamps(stamps: np.ndarray, path: Path, what: str) -> None:
    if len(stamps) == 0:
        raise StreamError(path, f"{what} is empty: nothing to sample")
    if not sampler.is_strictly_increasing(stamps):
        raise StreamError(path, f"{what} timestamps are not strictly increasing")


def _frame(stream: Stream, use_unixtime: bool) -> pd.DataFrame:
    import pandas as pd  # only DataFrame users pay for pandas (~0.3 s to import)

    if use_unixtime:
        index = pd.Index(stream.timestamps / 1e9, name="timestamp")
    else:
        index = pd.DatetimeIndex(stream.timestamps.view("datetime64[ns]"), name="timestamp")
    return pd.DataFrame(stream.values, index=index, columns=list(stream.columns))


class _DecodedColumn:
    """Indexable in increasing order only; keeps at most ``4 * workers`` decodes in flight."""

    def __init__(self, cam: Camera, idx: np.ndarray, pool: ThreadPoolExecutor, workers: int):
        self._cam = cam
        change = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]]) if len(idx) else np.empty(0, np.int64)
        self._unique = idx[change].tolist()  # consecutive repeats decoded once
        self._slot = np.cumsum(np.r_[True, idx[1:] != idx[:-1]]) - 1 if len(idx) else idx
        self._slot = self._slot.tolist()
        self._pool = pool
        self._pending: deque = deque()
        self._next_submit = 0
        self._current = (-1, None)
        self._window = 4 * workers

    def _decode(self, i: int) -> np.ndarray:
        arr = self._cam.get_frame(i).load()
        arr.flags.writeable = False
        return arr

    def _fill(self) -> None:
        while self._next_submit < len(self._unique) and len(self._pending) < self._window:
            i = self._next_submit
            self._pending.append((i, self._pool.submit(self._decode, self._unique[i])))
            self._next_submit += 1

    def __getitem__(self, k: int) -> np.ndarray:
        slot = self._slot[k]
        if slot == self._current[0]:
            return self._current[1]
        self._fill()
        while True:
            s, fut = self._pending.popleft()
            self._fill()
            if s == slot:
                self._current = (s, fut.result())
                return self._current[1]
