"""``Dataset``: episodes of any OpenArm layout, their streams and cameras, and resampling.

The Dataset knows how to find and read streams; it does not know converters or validators exist
(they take a Dataset). Time stays in int64 nanoseconds; ``use_unixtime`` converts at the edge.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from . import layout, sampler, sidecar
from .camera import Camera, Frame
from .errors import DatasetError, StreamError
from .metadata import Metadata
from .sampler import Sample
from .smoothing import check as smoothing_check
from .streams import Stream, read_attribute_file, read_state_file, read_timestamps
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


def folder_problem(path: Path) -> str:
    """Why ``path``, which is not a folder, cannot be a dataset: missing, or what it is instead."""
    if not os.path.lexists(path):
        return "no such folder"
    if os.path.islink(path) and not os.path.exists(path):
        return "is a broken symbolic link, not a dataset folder"
    return f"is {'a file' if os.path.isfile(path) else 'not a folder'}, not a dataset folder"


class Dataset:
    """An OpenArm dataset folder of any layout (0.4.0, 0.3.0, 0.2.0, 0.1.0, unversioned).

    Takes openarm_dataset's arguments: ``meta`` (a :class:`Metadata` to use instead of the stored one),
    ``camera_names`` (a subset; legacy names such as ``left_wrist`` accepted), ``kinematics`` (must be
    None: FK/IK are this package's own, :mod:`.kinematics`). ``cutoff`` (Hz) low-pass filters every
    obs/action stream returned by ``load_obs``/``load_action``/``sample`` (4th-order Butterworth,
    ``smoothing="filtfilt"`` as openarm_dataset, zero lag but looking ahead; ``"lfilter"`` causal);
    see :meth:`set_smoothing` and :mod:`.smoothing`. Files are never smoothed.
    """

    def __init__(self, path: str | os.PathLike, meta: Metadata | None = None, camera_names: list[str] | None = None,
                 kinematics: object | None = None, *, cutoff: float | None = None, smoothing: str = "filtfilt"):
        self.root = Path(path)
        if meta is None and not self.root.is_dir():
            raise DatasetError(self.root, folder_problem(self.root))
        if kinematics is not None:
            raise ValueError("kinematics=: openarm_dataset's FK/IK engines are not used here; state= conversions use "
                             "openarm_sim_dataset.kinematics (the MuJoCo model)")
        self.meta = Metadata.load(self.root) if meta is None else meta
        self._camera_names = None
        if camera_names is not None:
            self._camera_names = [self.meta.camera_name(n, self.root / layout.METADATA_FILE) for n in camera_names]
        self.set_smoothing(cutoff, smoothing)

    @property
    def root_path(self) -> Path:
        """The dataset folder (openarm_dataset's name for :attr:`root`)."""
        return self.root

    def set_smoothing(self, cutoff: float | None, smoothing: str = "filtfilt") -> None:
        """Low-pass filter obs/action streams from now on (``cutoff`` in Hz; None: off). ``smoothing``:
        ``filtfilt`` (openarm_dataset's, zero phase, looks ahead) or ``lfilter`` (causal: a value never
        depends on later samples)."""
        smoothing_check(cutoff, smoothing)
        self._cutoff, self._smoothing = cutoff, smoothing

    # ------------------------------------------------------------------ episodes
    @property
    def version(self) -> str:
        """Layout the dataset was read from ('unversioned' for the oldest)."""
        return self.meta.layout

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

    @property
    def camera_format(self) -> str | None:
        """``"dir"`` or ``"tar"``: how every camera of every episode is stored (None without cameras).
        Mixed formats raise ValueError, as in openarm_dataset."""
        formats = {self.load_camera(name, ep).format for ep in self.meta.episodes for name in self.camera_names}
        if len(formats) > 1:
            raise ValueError(f"Inconsistent camera formats: {sorted(formats)} in {self.root}")
        return formats.pop() if formats else None

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
        try:
            return eps[self.meta.index_of(want)]
        except KeyError:
            raise KeyError(f"{self.root / layout.METADATA_FILE}: no episode with id {want!r}") from None

    def episode_id(self, episode: EpisodeRef) -> str:
        return layout.check_name(self.episode(episode)["id"], "episode id", self.root / layout.METADATA_FILE)

    def episode_path(self, episode: EpisodeRef | None = None) -> Path:
        """The episode's folder (the dataset folder for ``None``, as in openarm_dataset)."""
        if episode is None:
            return self.root
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

    def load_obs(self, episode: EpisodeRef, use_unixtime: bool = False, cutoff: float | None = None,
                 state: str | None = None, smoothing: str | None = None) -> dict[str, pd.DataFrame]:
        """Obs streams as DataFrames indexed by timestamp (datetime64[ns], or float Unix seconds
        with ``use_unixtime``), columns joint1..joint7, gripper (x..qz, gripper for pose).
        ``state="qpos"|"pose"|"rot6d"`` converts arm states on the fly (see :mod:`.kinematics`);
        ``cutoff`` (Hz, default the dataset's :meth:`set_smoothing`) low-pass filters the values
        (float64 then), ``smoothing`` ``filtfilt``|``lfilter`` (see :mod:`.smoothing`)."""
        return self._load("obs", episode, use_unixtime, cutoff, state, smoothing)

    def load_action(self, episode: EpisodeRef, use_unixtime: bool = False, cutoff: float | None = None,
                    state: str | None = None, smoothing: str | None = None) -> dict[str, pd.DataFrame]:
        """Action streams (the commands sent), same form and options as :meth:`load_obs`."""
        return self._load("action", episode, use_unixtime, cutoff, state, smoothing)

    def _load(self, kind: str, episode: EpisodeRef, use_unixtime: bool, cutoff: float | None, state: str | None,
              smoothing: str | None) -> dict[str, pd.DataFrame]:
        streams = self.streams(episode, kind)
        if state is not None:
            from . import kinematics

            streams = kinematics.represent_streams(self, episode, kind, streams, state)
        streams = self.smoothed(kind, streams, cutoff, smoothing)
        return {k: _frame(s, use_unixtime) for k, s in streams.items()}

    def smoothed(self, kind: str, streams: dict[str, Stream], cutoff: float | None = None,
                 smoothing: str | None = None) -> dict[str, Stream]:
        """``streams`` low-pass filtered at ``cutoff`` Hz (default: :meth:`set_smoothing`'s; None and no
        default: unchanged). Each stream's rate is the one metadata.yaml declares for it (250 Hz,
        openarm_dataset's fixed value, when it declares none); pose quaternions and rot6d columns are
        renormalised afterwards, as openarm_dataset does."""
        from . import smoothing as sm

        cutoff = self._cutoff if cutoff is None else cutoff
        mode = smoothing or self._smoothing
        if cutoff is None:
            return streams
        sm.check(cutoff, mode)
        out = {}
        for key, s in streams.items():
            prefix, attr = key.rsplit("/", 1)
            emb, _, comp = prefix.partition("/")
            rate = self.meta.frequency(kind, emb, comp or None) or sm.DEFAULT_RATE_HZ
            values = sm.lowpass(s.values, cutoff, rate, mode)
            if values is not s.values:
                values = sm.renormalize(attr, values)
            out[key] = Stream(s.key, s.path, s.timestamps, values, s.columns)
        return out

    # ------------------------------------------------------------------- cameras
    def load_camera(self, name: str, episode: EpisodeRef) -> Camera:
        """One camera of an episode; ``name`` may be a legacy name (``left_wrist`` for ``wrist_left``)."""
        name = self.meta.camera_name(name, self.root / layout.METADATA_FILE)
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

    def load_cameras(self, episode: EpisodeRef) -> CameraDict:
        """Cameras of an episode by name (0.1.0/unversioned wrist cameras renamed wrist_left/right;
        the old names work as keys too)."""
        return CameraDict({name: self.load_camera(name, episode) for name in self.camera_names})

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        hz: float,
        episode: EpisodeRef | None = None,
        align: str = "previous",
        decode: bool = False,
        workers: int | None = None,
        state: str | None = None,
        *,
        episode_index: int | None = None,
    ) -> SampleSequence:
        """Resample every episode (or one) on a fixed ``hz`` grid over the common time range.

        Returns a lazy :class:`SampleSequence`: ``len``, indexing (negative too), slicing and
        iteration, items built on access (one episode's arrays held at a time), and ``next()`` as
        on the iterator this used to return. The grid starts at the latest first stamp of all
        streams and cameras and stops before the earliest last stamp (openarm_dataset's range).
        ``align`` picks, per stream, the sample ``previous`` (latest at or before t; default,
        causal), ``next`` (first at or after t, as openarm_dataset does) or ``nearest``. With
        ``decode=True`` frames are decoded (when iterating, ahead by a pool of ``workers``
        threads, default the CPU count); otherwise they stay lazy Frames. ``state="qpos"|"pose"|"rot6d"``
        converts the arm entries per episode (see :mod:`.kinematics`). ``episode_index`` is
        openarm_dataset's README spelling of ``episode``. Smoothing (:meth:`set_smoothing`) applies.
        """
        if episode_index is not None:
            if episode is not None:
                raise ValueError("give episode or episode_index, not both")
            episode = episode_index
        sampler.period_ns(hz)
        if align not in sampler.ALIGNMENTS:
            raise ValueError(f"align must be one of {sampler.ALIGNMENTS}, not {align!r}")
        if state is not None:
            from .kinematics import STATES

            if state not in STATES:
                raise ValueError(f"state must be one of {STATES}, not {state!r}")
        episodes = self.meta.episodes if episode is None else [self.episode(episode)]
        return SampleSequence(self, episodes, hz, align, decode, workers, state)

    def sim_streams(self, episode: EpisodeRef) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Simulation streams of a generated episode (empty for recorded data): ``object_pose``,
        ``cam_pos/<cam>``, ``cam_mat/<cam>``, ``depth/<cam>``, ``labels/<cam>`` as
        (frame timestamps in int64 ns, per-frame arrays). See :mod:`openarm_sim_dataset.sidecar`."""
        folder = layout.sim_dir(self.root, self.episode_id(episode))
        if not (folder / sidecar.SIDECAR_FILE).is_file():
            return {}
        return sidecar.sim_streams(folder, self.camera_names)

    def sample_grid(self, episode: EpisodeRef, hz: float) -> np.ndarray:
        """The grid (int64 ns) :meth:`sample` uses for an episode, from the timestamps alone (no
        values read): ``time_grid`` over the common range of every stream and camera."""
        stamp_arrays = []
        for kind in layout.KINDS:
            for f in self.stream_files(episode, kind):
                stamps, names = read_timestamps(f.path)
                # named like the first stream of the file, as _episode_plan's check names it
                first = f.attribute or next((n for n in names if n != layout.TIMESTAMP_COLUMN), "state")
                _check_stamps(stamps, f.path, f"{f.prefix}/{first}")
                stamp_arrays.append(stamps)
        for name, cam in self.load_cameras(episode).items():
            _check_stamps(cam.timestamps, cam.path, f"camera {name}")
            stamp_arrays.append(cam.timestamps)
        if not stamp_arrays:
            raise StreamError(self.episode_path(episode), "episode has no streams and no cameras")
        start, end = sampler.common_range(stamp_arrays)
        return sampler.time_grid(start, end, hz)

    def _episode_plan(self, episode: dict, hz: float, how: str) -> _EpisodePlan:
        ep_id = self.episode_id(episode)
        groups = {kind: self.streams(episode, kind) for kind in layout.KINDS}
        cameras = self.load_cameras(episode)
        sim = self.sim_streams(episode)
        grid = episode_grid(self.episode_path(episode), groups, cameras, hz)
        groups = {kind: self.smoothed(kind, streams) for kind, streams in groups.items()}
        gathered = {
            kind: [(key, s.values[sampler.align(s.timestamps, grid, how)]) for key, s in streams.items()]
            for kind, streams in groups.items()
        }
        sim_rows = [(key, vals[sampler.align(ts, grid, how)]) for key, (ts, vals) in sim.items()]
        cam_idx = [(name, cam, sampler.align(cam.timestamps, grid, how)) for name, cam in cameras.items()]
        # a CameraDict (legacy names as keys) only where the dataset stores legacy names, the only case
        # where ported code asks for them; elsewhere a plain dict keeps the per-sample cost down
        renamed = any(self.meta.stored_camera_name(name) != name for name in cameras)
        return _EpisodePlan(ep_id, grid, gathered["obs"], gathered["action"], sim_rows, cam_idx, renamed)

    def _sample_episode(self, episode: dict, hz: float, how: str, pool) -> Iterator[Sample]:
        plan = self._episode_plan(episode, hz, how)
        if pool is None:
            cam_cols = [(name, [Frame(cam, int(i), int(cam.timestamps[i])) for i in idx]) for name, cam, idx in plan.cameras]
        else:
            cam_cols = [(name, _DecodedColumn(cam, idx, *pool)) for name, cam, idx in plan.cameras]
        ep, obs, action, sim = plan.episode, plan.obs, plan.action, plan.sim
        if plan.renamed:
            for k, t in enumerate(plan.grid.tolist()):
                yield Sample(ep, t, {key: v[k] for key, v in obs}, {key: v[k] for key, v in action},
                             CameraDict([(name, col[k]) for name, col in cam_cols]), {key: v[k] for key, v in sim})
            return
        for k, t in enumerate(plan.grid.tolist()):  # the hot loop: inlined, plain dicts (no alias to resolve)
            yield Sample(ep, t, {key: v[k] for key, v in obs}, {key: v[k] for key, v in action},
                         {name: col[k] for name, col in cam_cols}, {key: v[k] for key, v in sim})

    # ----------------------------------------------------------------- validation
    def validate(self, on_error: Callable[[str], object] | None = None, **options):
        """Run the validation checks (see :func:`openarm_sim_dataset.validate.validate`) and return a
        ``Report``: rows ``(check, status pass|warn|fail|skip, detail, episodes)`` with ``.counts`` of
        passed, warned, failed and skipped apart (a warning leaves its episodes usable); its truth value is the verdict (``if ds.validate():``, as
        openarm_dataset's bool). ``on_error`` (openarm_dataset's callback) is called with
        ``<file>: includes null values`` for each stream file holding a null/NaN, then with
        ``<check>: <detail>`` for each failed check. Does not modify the dataset."""
        from .validate import validate

        report = validate(self, **options)
        if on_error is not None:
            for line in report.file_lines:
                on_error(line)
            for r in report:
                if r.failed:
                    on_error(f"{r.check}: {r.detail}")
        return report

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
            data.cameras[name] = ((f.timestamp_ns, f.read_bytes()) for f in cam.frames())
        sim = self.episode_path(episode) / layout.SIM_DIR
        if sim.is_dir():
            for p in sorted(sim.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    data.files[p.relative_to(self.episode_path(episode)).as_posix()] = p
        return data

    def write(self, out: str | os.PathLike, format: str | None = None, camera_format: str = "dir",
              episodes: list[EpisodeRef] | None = None, progress: Callable[[str], None] | None = None,
              **options) -> Path:
        """Write (a selection of) this dataset as a new dataset at ``out``.

        ``format`` (openarm_dataset's argument): ``None``/``"openarm"`` writes 0.4.0 (``camera_format``
        ``dir`` or ``tar``); ``lerobot_v2.1``, ``lerobot_v3.0``, ``gr00t`` and ``rrd`` go through
        :mod:`openarm_sim_dataset.convert` (``options``: its options, e.g. ``fps=30``). The whole output
        is built in a temporary sibling and renamed into place, so ``out`` either does not exist or is
        complete. An existing ``out`` is refused. Smoothing never applies to what is written.
        """
        out = Path(out)
        if format not in (None, "openarm"):
            from .convert import write_format

            return write_format(self, out, format, camera_format=camera_format, **options)
        if options:
            raise TypeError(f"unexpected options for the openarm format: {', '.join(sorted(options))}")
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


class CameraDict(dict):
    """``{name: Camera}`` where a legacy name (``left_wrist``, ``right_wrist``) finds the camera that
    this package calls ``wrist_left``/``wrist_right``, as ported openarm_dataset code asks for it."""

    def _alias(self, key):
        new = layout.LEGACY_CAMERA_RENAMES.get(key) if isinstance(key, str) else None
        return new if new is not None and dict.__contains__(self, new) else None

    def __missing__(self, key):
        alias = self._alias(key)
        if alias is None:
            raise KeyError(key)
        return self[alias]

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or self._alias(key) is not None

    def get(self, key, default=None):
        return self[key] if key in self else default


class _EpisodePlan:
    """One episode's sampling, decided: the grid and, per stream, the rows picked at each grid point."""

    __slots__ = ("episode", "grid", "obs", "action", "sim", "cameras", "renamed")

    def __init__(self, episode: str, grid: np.ndarray, obs: list, action: list, sim: list, cameras: list,
                 renamed: bool):
        self.episode, self.grid, self.obs, self.action, self.sim, self.cameras = episode, grid, obs, action, sim, cameras
        self.renamed = renamed

    def frames(self, k: int, decode: bool) -> dict:
        out = CameraDict() if self.renamed else {}
        for name, cam, idx in self.cameras:
            i = int(idx[k])
            f = Frame(cam, i, int(cam.timestamps[i]))
            if decode:
                arr = f.load()
                arr.flags.writeable = False
                out[name] = arr
            else:
                out[name] = f
        return out

    def sample(self, k: int, t: int, cameras: dict) -> Sample:
        return Sample(self.episode, t, {key: v[k] for key, v in self.obs}, {key: v[k] for key, v in self.action},
                      cameras, {key: v[k] for key, v in self.sim})


class SampleSequence(Sequence):
    """The samples of :meth:`Dataset.sample`, built on access.

    ``len()`` reads only timestamps (once per episode); ``seq[k]`` (negative too) loads the episode
    holding k and keeps that one episode's arrays; ``seq[a:b:c]`` is a list of those samples;
    iterating goes episode by episode (frames decoded ahead with ``decode=True``) and can be repeated.
    ``next(seq)`` continues a private iterator, so code written for the generator this used to be
    still runs. Memory stays that of one episode however long the dataset.
    """

    def __init__(self, ds: Dataset, episodes: list[dict], hz: float, align: str, decode: bool,
                 workers: int | None, state: str | None):
        self._ds, self._episodes, self._hz, self._align = ds, episodes, hz, align
        self._decode, self._workers, self._state = decode, workers, state
        self._lengths: list[int] | None = None
        self._offsets: np.ndarray | None = None
        self._cached: tuple[int, _EpisodePlan, list | None] | None = None
        self._cursor: Iterator[Sample] | None = None

    # -------------------------------------------------------------- sizes
    def _sizes(self, upto: int | None = None) -> np.ndarray:
        """Offsets of the episodes' first samples, read up to the episode holding sample ``upto``
        (None: all): the first sample of a 100,000-episode dataset reads one episode's stamps."""
        if self._lengths is None:
            self._lengths = []
        n = len(self._episodes)
        if len(self._lengths) < n and (upto is None or self._offsets is None or self._offsets[-1] <= upto):
            total = int(self._offsets[-1]) if self._offsets is not None else 0
            while len(self._lengths) < n and (upto is None or total <= upto):
                self._lengths.append(len(self._ds.sample_grid(self._episodes[len(self._lengths)], self._hz)))
                total += self._lengths[-1]
            self._offsets = np.cumsum([0] + self._lengths)
        if self._offsets is None:
            self._offsets = np.zeros(1, dtype=np.int64)
        return self._offsets

    def __len__(self) -> int:
        return int(self._sizes()[-1])

    # ------------------------------------------------------------ access
    def _episode(self, e: int) -> tuple[_EpisodePlan, list | None]:
        if self._cached is None or self._cached[0] != e:
            self._cached = None  # release the previous episode's arrays before loading the next
            plan = self._ds._episode_plan(self._episodes[e], self._hz, self._align)
            converted = None
            if self._state is not None:  # FK/IK run per episode in one batch, as when iterating
                from . import kinematics

                batch = [plan.sample(k, t, plan.frames(k, False)) for k, t in enumerate(plan.grid.tolist())]
                converted = list(kinematics._convert_batch(self._ds, batch, self._state)) if batch else []
            self._cached = (e, plan, converted)
        return self._cached[1], self._cached[2]

    def _item(self, k: int) -> Sample:
        offsets = self._sizes(k)
        e = int(np.searchsorted(offsets, k, side="right") - 1)
        plan, converted = self._episode(e)
        j = k - int(offsets[e])
        if converted is not None:
            return self._item_of(plan, converted, j)
        return plan.sample(j, int(plan.grid[j]), plan.frames(j, self._decode))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._item(k) for k in range(*index.indices(len(self)))]
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"sample indices must be integers or slices, not {type(index).__name__}")
        index = int(index)
        if index >= 0:
            offsets = self._sizes(index)
            if index < offsets[-1]:
                return self._item(index)
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"sample index {index} out of range ({n} samples)")
        return self._item(index % n)

    def __iter__(self) -> Iterator[Sample]:
        if self._state is not None:
            for e in range(len(self._episodes)):
                plan, converted = self._episode(e)
                yield from (self._item_of(plan, converted, j) for j in range(len(converted)))
            return
        if not self._decode:
            for ep in self._episodes:
                yield from self._ds._sample_episode(ep, self._hz, self._align, None)
            return
        workers = self._workers or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jpeg") as pool:
            for ep in self._episodes:
                yield from self._ds._sample_episode(ep, self._hz, self._align, (pool, workers))

    def _item_of(self, plan: _EpisodePlan, converted: list, j: int) -> Sample:
        s = converted[j]
        if self._decode:
            return Sample(s.episode, s.timestamp_ns, s.obs, s.action, plan.frames(j, True), s.sim)
        return s

    def __next__(self) -> Sample:
        if self._cursor is None:
            self._cursor = iter(self)
        return next(self._cursor)

    def __repr__(self) -> str:
        n = "?" if self._offsets is None or len(self._lengths or ()) < len(self._episodes) else str(len(self))
        return f"SampleSequence({n} samples of {len(self._episodes)} episode(s) at {self._hz:g} Hz, align={self._align!r})"


def episode_grid(where: Path, groups: Mapping[str, Mapping[str, Stream]], cameras: Mapping[str, Camera],
                 hz: float) -> np.ndarray:
    """The sampling grid (int64 ns) of one episode's loaded streams (``{kind: {key: Stream}}``) and cameras:
    ``time_grid`` over their common range, after checking that each is non-empty and strictly increasing
    (a :class:`StreamError` names the file). What :meth:`Dataset.sample` and the PyTorch loader sample on."""
    stamp_arrays = []
    for streams in groups.values():
        for key, s in streams.items():
            _check_stamps(s.timestamps, s.path, key)
            stamp_arrays.append(s.timestamps)
    for name, cam in cameras.items():
        _check_stamps(cam.timestamps, cam.path, f"camera {name}")
        stamp_arrays.append(cam.timestamps)
    if not stamp_arrays:
        raise StreamError(where, "episode has no streams and no cameras")
    return sampler.time_grid(*sampler.common_range(stamp_arrays), hz)


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
