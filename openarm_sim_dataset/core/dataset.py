"""``Dataset``: episodes of any OpenArm layout, their streams and cameras, and resampling.

The Dataset knows how to find and read streams; resampling is :mod:`.resample`'s, DataFrames are
:mod:`.dataframe`'s. It does not import converters or validators (they take a Dataset, and sit above
it): :meth:`Dataset.write` finds the converter of a format in :mod:`.formats`, where the converters
register themselves. Time stays in int64 nanoseconds; ``use_unixtime`` converts at the edge.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from . import formats, kinematics, layout, lerobot_layout, sampler, sidecar, smoothing as sm
from .camera import Camera
from .dataframe import stream_dataframe
from .errors import DatasetError, StreamError
from .lerobot import LeRobotSource
from .metadata import Metadata
from .resample import CameraDict, SampleSequence, check_stamps, episode_grid  # noqa: F401 (re-exported: the PyTorch loader's index imports it from here)
from .streams import Stream, attribute_stream, read_table, read_timestamps, state_streams
from .writer import ComponentStreams, EpisodeData, new_dataset, write_episode_tree

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
    """An OpenArm dataset folder of any layout (0.4.0, 0.3.0, 0.2.0, 0.1.0, unversioned), or a LeRobot
    dataset (v2.0, v2.1, v3.0: see :mod:`.lerobot`), recognised by its content.

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
        #: the LeRobot dataset being read (None for an OpenArm layout): consumers branch on it, never on paths
        self.lerobot: LeRobotSource | None = None
        if meta is None and lerobot_layout.is_lerobot(self.root):
            self.lerobot = LeRobotSource(self.root)
            meta = self.lerobot.metadata
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
        sm.check(cutoff, smoothing)
        self._cutoff, self._smoothing = cutoff, smoothing

    # ------------------------------------------------------------------ episodes
    @property
    def version(self) -> str:
        """Layout the dataset was read from ('unversioned' for the oldest; ``lerobot_v3.0`` for LeRobot)."""
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
        return layout.check_dataset_name(self.episode(episode)["id"], "episode id", self.root)

    def episode_path(self, episode: EpisodeRef | None = None) -> Path:
        """The episode's folder (the dataset folder for ``None``, as in openarm_dataset); for a LeRobot
        dataset the parquet file holding its frames."""
        if episode is None:
            return self.root
        if self.lerobot is not None:
            return self.lerobot.data_path(self.episode_id(episode))
        return layout.episode_dir(self.root, self.episode_id(episode))

    # ------------------------------------------------------------------- streams
    def stream_files(self, episode: EpisodeRef, kind: str) -> list[StreamFile]:
        """The parquet files holding an episode's obs or action streams (nothing is read); none for a
        LeRobot dataset, whose streams are columns of a frame table (:meth:`streams` reads them)."""
        ep_id = self.episode_id(episode)
        if self.lerobot is not None:
            return []
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

    def streams(self, episode: EpisodeRef, kind: str, *, copy: bool = True) -> dict[str, Stream]:
        """All obs or action streams of an episode, keyed ``arms/right/qpos`` (each file read once).
        ``copy=False``: values may be read-only views of the files' buffers (sampling, which only
        gathers rows, skips copying whole streams)."""
        return self.kinds_streams(episode, (kind,), copy=copy)[kind]

    def kinds_streams(self, episode: EpisodeRef, kinds: tuple[str, ...], *, copy: bool = True) -> dict[str, dict[str, Stream]]:
        """:meth:`streams` of several kinds (``{kind: streams}``), with the same errors: every file
        of them is read before any is converted (decoding back to back, then the numpy work back to
        back, is cheaper than alternating them). A file that cannot be read stops the reading; its
        error is raised after the files before it are converted, so the first file at fault is named."""
        if self.lerobot is not None:
            return {kind: self.lerobot.streams(self.episode_id(episode), kind) for kind in kinds}
        files: list[tuple[str, StreamFile]] = []
        tables, unread = [], None
        try:
            for kind in kinds:
                kind_files = self.stream_files(episode, kind)
                files += [(kind, f) for f in kind_files]
                for f in kind_files:
                    tables.append(read_table(f.path))
        except StreamError as e:
            unread = e
        out: dict[str, dict[str, Stream]] = {kind: {} for kind in kinds}
        for (kind, f), table in zip(files, tables):
            streams = out[kind]
            if f.attribute is None:
                streams.update(state_streams(table, f.path, f.prefix, copy=copy))
                continue
            key = f"{f.prefix}/{f.attribute}"
            if key in streams:
                raise StreamError(f.path, f"{key} is stored both here and in {layout.STATE_FILE}")
            streams[key] = attribute_stream(table, f.path, key, f.columns, copy=copy)
        if unread is not None:
            raise unread
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
            streams = kinematics.represent_streams(self, episode, kind, streams, state)
        streams = self.smoothed(kind, streams, cutoff, smoothing)
        return {k: stream_dataframe(s, use_unixtime) for k, s in streams.items()}

    def smoothed(self, kind: str, streams: dict[str, Stream], cutoff: float | None = None,
                 smoothing: str | None = None) -> dict[str, Stream]:
        """``streams`` low-pass filtered at ``cutoff`` Hz (default: :meth:`set_smoothing`'s; None and no
        default: unchanged). Each stream's rate is the one metadata.yaml declares for it (250 Hz,
        openarm_dataset's fixed value, when it declares none); pose quaternions and rot6d columns are
        renormalised afterwards, as openarm_dataset does."""
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
    def load_camera(self, name: str, episode: EpisodeRef, *, missing_ok: bool = False) -> Camera:
        """One camera of an episode; ``name`` may be a legacy name (``left_wrist`` for ``wrist_left``).
        ``missing_ok``: a LeRobot camera whose MP4 is missing comes back as a
        :class:`~.lerobot.MissingVideo` (frames on the rows' times, reading one raises the
        :class:`CameraError` naming the file) instead of raising that error here."""
        if name not in self.meta.cameras:  # a legacy name, or an unknown one (the error names this file)
            name = self.meta.camera_name(name, self.meta.path if self.lerobot else self.root / layout.METADATA_FILE)
        ep_id = self.episode_id(episode)
        if self.lerobot is not None:
            return self.lerobot.camera(ep_id, name, missing_ok=missing_ok)
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

    def load_cameras(self, episode: EpisodeRef, *, missing_ok: bool = False) -> CameraDict:
        """Cameras of an episode by name (0.1.0/unversioned wrist cameras renamed wrist_left/right;
        the old names work as keys too); ``missing_ok`` as :meth:`load_camera`."""
        return CameraDict({name: self.load_camera(name, episode, missing_ok=missing_ok) for name in self.camera_names})

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

        A LeRobot dataset whose videos are missing is sampled all the same (its cameras' frames lie on
        the rows' times, as the layout promises): the joints are served, and loading a frame of a camera
        whose MP4 is missing raises the :class:`CameraError` naming the file.
        """
        if episode_index is not None:
            if episode is not None:
                raise ValueError("give episode or episode_index, not both")
            episode = episode_index
        sampler.period_ns(hz)
        if align not in sampler.ALIGNMENTS:
            raise ValueError(f"align must be one of {sampler.ALIGNMENTS}, not {align!r}")
        if state is not None and state not in kinematics.STATES:
            raise ValueError(f"state must be one of {kinematics.STATES}, not {state!r}")
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
        if self.lerobot is not None:
            ep_id = self.episode_id(episode)
            stamps = self.lerobot.row_timestamps(ep_id)
            check_stamps(stamps, self.lerobot.data_path(ep_id), f"episode {ep_id} rows")
            stamp_arrays.append(stamps)
        for kind in layout.KINDS:
            for f in self.stream_files(episode, kind):
                stamps, names = read_timestamps(f.path)
                # named like the first stream of the file, as episode_grid's check (sampling) names it
                first = f.attribute or next((n for n in names if n != layout.TIMESTAMP_COLUMN), "state")
                check_stamps(stamps, f.path, f"{f.prefix}/{first}")
                stamp_arrays.append(stamps)
        for name, cam in self.load_cameras(episode, missing_ok=True).items():
            check_stamps(cam.timestamps, cam.path, f"camera {name}")
            stamp_arrays.append(cam.timestamps)
        if not stamp_arrays:
            raise StreamError(self.episode_path(episode), "episode has no streams and no cameras")
        start, end = sampler.common_range(stamp_arrays)
        return sampler.time_grid(start, end, hz)

    # ----------------------------------------------------------------- validation
    def validate(self, on_error: Callable[[str], object] | None = None, **options):
        """Run the validation checks (see :func:`openarm_sim_dataset.validate.validate`) and return a
        ``Report``: rows ``(check, status pass|warn|fail|skip, detail, episodes)`` with ``.counts`` of
        passed, warned, failed and skipped apart (a warning leaves its episodes usable); its truth value is the verdict (``if ds.validate():``, as
        openarm_dataset's bool). ``on_error`` (openarm_dataset's callback) is called with
        ``<file>: includes null values`` for each stream file holding a null/NaN, then with
        ``<check>: <detail>`` for each failed check. Does not modify the dataset."""
        from openarm_sim_dataset.validate import (
            validate,  # above the reader (imports it) and 0.1-0.4 s to import: on call
        )

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
        if format not in (None, "openarm") or (self.lerobot is not None and episodes is None and progress is None):
            # the converters sit above the reader: formats imports them on first use, they register there;
            # a LeRobot source goes through the openarm converter (stamps from an epoch, JPEG quality)
            fmt = format or "openarm"
            return formats.writer(fmt)(self, out, fmt, camera_format=camera_format, **options)
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
