"""Live recording of a robot into a 0.4.0 dataset: crash-safe, and never blocking the control loop.

::

    rec = Recorder("out/ds", metadata)                 # opens, or resumes, a dataset (one writer: a lock)
    ep = rec.start_episode(task_index=0)               # next free id
    ep.add_obs("arms/right", t_ns, qpos=q, qvel=dq, qtorque=tau)   # any component: "arms/left", "lifter"
    ep.add_action("arms/right", t_ns, qpos=q_cmd)
    ep.add_frame("head", t_ns, jpeg_bytes)             # or an HxWx3 uint8 array (encoded off the loop)
    ep.save(success=True)                              # or ep.discard()
    rec.close()

Units: timestamps int64 nanoseconds (Unix epoch, one clock for every stream and camera); joint
positions rad, velocities rad/s, torques N·m, the lifter's elevation as the robot reports it.

**Commit protocol.** The one of :mod:`.writer` (the generator's): an episode is written into
``episodes/.tmp-<id>...`` as it comes (parquet row groups of ``rows_per_group`` rows, one JPEG file or
tar member per frame), and :meth:`Episode.save` closes the files, writes the integrity manifest,
fsyncs, renames the folder to ``episodes/<id>`` and only then lists it in ``metadata.yaml``
(atomically). A process killed at any instant leaves a dataset whose listed episodes are complete;
the next :class:`Recorder` on that folder removes the partial episode, and its id is used again (it
was never listed). A discarded episode (:meth:`Episode.discard`, or a stale camera) is removed too,
but its id stays used — a gap, as the reference recorder leaves — and is recorded with its reason
under ``discarded_episodes:`` in ``metadata.yaml`` (a key readers ignore), so that a later process
does not reuse it either.

**Threads.** ``add_*`` only copy the values into preallocated per-stream blocks (a full block goes
to the writer thread) or hand a frame over; the writer thread does every disk write, and JPEG
encoding of array frames runs in ``encoder_threads`` threads. What waits for the writer is bounded
in bytes (``max_pending_bytes``): a frame that does not fit is **dropped**, and a block of state
rows is dropped only above twice the bound (rows are ~100 kB/s, frames MB/s). Every drop is
counted per stream (:attr:`Episode.dropped`, ``dropped:`` in the episode's metadata entry) and
warned about once per episode; ``add_*`` return False for a sample not stored.

**Stale cameras.** A declared camera that sends no frame, or only byte-identical frames, for longer
than ``stale_after_s`` (default 1 s, measured on the samples' own timestamps) discards the episode;
:attr:`Episode.reason` says which camera and for how long, and :meth:`Episode.save` raises
:class:`EpisodeDiscarded` with it.

**Frequencies.** Each saved entry records ``measured_hz`` (1 / median interval of each stream and
camera, same shape as ``frequencies:``); the dataset's ``frequencies:`` are the median over the
listed episodes, rounded to 0.1 Hz. Declared streams never recorded keep the value the metadata
gave.
"""

from __future__ import annotations

import copy
import hashlib
import io
import os
import queue
import threading
import time
import warnings
from array import array
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import layout
from .atomic import remove_tree
from .camera import FrameWriter
from .errors import DatasetError, MetadataError
from .lock import OutputLock
from .metadata import Metadata, load_yaml_document
from .writer import CAMERA_FORMATS, StreamWriter, begin_episode, finish_episode, remove_uncommitted

#: metadata.yaml key listing discarded episodes (id and reason): their ids are never used again.
DISCARDED_KEY = "discarded_episodes"


class RecordError(DatasetError):
    """The recorder cannot open the output, or an episode could not be written."""


class EpisodeDiscarded(RecordError):
    """:meth:`Episode.save` of an episode that was discarded (stale camera, write failure); the
    message is the reason."""


class RecorderLockError(RecordError):
    """Another process records into (or generates) this dataset."""


class _Lock(OutputLock):
    error = RecorderLockError


# ----------------------------------------------------------------------------------- rates
class _RateMeter:
    """Median sample interval of a stream, in bounded memory: medians of blocks of 1024 intervals,
    and the median of those (exact for shorter streams)."""

    BLOCK = 1024

    def __init__(self) -> None:
        self.last: int | None = None
        self.buf: list[np.ndarray] = []
        self.n = 0
        self.medians: list[float] = []

    def add(self, ts: np.ndarray) -> None:
        if self.last is not None:
            ts = np.concatenate(([self.last], ts))
        if len(ts):
            self.last = int(ts[-1])
        d = np.diff(ts)
        if not len(d):
            return
        self.buf.append(d)
        self.n += len(d)
        if self.n >= self.BLOCK:
            self.medians.append(float(np.median(np.concatenate(self.buf))))
            self.buf, self.n = [], 0

    def hz(self) -> float | None:
        meds = list(self.medians)
        if self.n and (not meds or self.n >= self.BLOCK // 4):
            meds.append(float(np.median(np.concatenate(self.buf))))
        if not meds:
            return None
        med = float(np.median(meds))
        return 1e9 / med if med > 0 else None


# -------------------------------------------------------------------------- control side
class _Block:
    """Preallocated rows of one stream filled by the control loop; handed to the writer when full."""

    __slots__ = ("ts", "values", "n")

    def __init__(self, rows: int, widths: Mapping[str, int]):
        self.ts = np.empty(rows, dtype=np.int64)
        self.values = {k: np.empty((rows, w), dtype=np.float32) for k, w in widths.items()}
        self.n = 0


class _Stream:
    """Control-side state of one obs/action component."""

    __slots__ = ("kind", "embodiment", "component", "name", "width", "attrs", "block", "last")

    def __init__(self, kind: str, embodiment: str, component: str | None, name: str, width: int):
        self.kind, self.embodiment, self.component, self.name, self.width = kind, embodiment, component, name, width
        self.attrs: tuple[str, ...] | None = None
        self.block: _Block | None = None
        self.last = -(1 << 63)


@dataclass
class EpisodeResult:
    """What :meth:`Episode.save` committed: the metadata entry and the figures behind it."""

    id: str
    entry: dict
    rows: dict[str, int] = field(default_factory=dict)  # "obs/arms/right" -> rows stored
    frames: dict[str, int] = field(default_factory=dict)  # camera -> frames
    dropped: dict[str, int] = field(default_factory=dict)  # stream or camera -> samples not stored
    seconds: float = 0.0  # time save() took (queue drained, files closed, committed)


class Episode:
    """One episode being recorded; made by :meth:`Recorder.start_episode`. ``add_obs``/``add_action``
    are called by one thread (the control loop), ``add_frame`` by that thread or one thread per camera
    (a driver's callback); see the module doc for what they cost and when they drop. Once the episode
    is saved or discarded they store nothing and return False (a camera thread may race the end)."""

    def __init__(self, rec: "Recorder", episode_id: str, task_index: int):
        self.recorder = rec
        self.id = episode_id
        self.task_index = task_index
        self.reason: str | None = None  # why it was discarded (None while alive or once saved)
        self.saved = False
        self.dropped: dict[str, int] = {}
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._cam_last = {c: -(1 << 63) for c in rec.meta.cameras}  # last frame stamp per camera
        self._cams = dict(self._cam_last)  # stale clock per camera: its newest frame, or the episode start
        self._cam_frames = {c: 0 for c in rec.meta.cameras}
        self._stale_ns = int(round(rec.stale_after_s * 1e9)) if rec.stale_after_s else None
        self._start: int | None = None
        self._now = -(1 << 63)
        self._deadline = 1 << 63  # earliest stamp at which some camera could be stale
        self._finished = False
        self._warned: set[str] = set()
        # writer-thread state (touched only by the writer thread)
        self._w_tmp: Path | None = None
        self._w_streams: dict[tuple[str, str], StreamWriter] = {}
        self._w_frames: dict[str, FrameWriter] = {}
        self._w_rates: dict[str, _RateMeter] = {}
        self._w_prev: dict[str, tuple[bytes, int]] = {}  # camera -> (last JPEG, stamp its identical run began)
        self._w_known: dict[str, tuple] = {}  # camera -> (stamps, sizes, sha256 digests) of frames written
        self._w_gone = False  # files removed (discarded)

    # ------------------------------------------------------------------ properties
    @property
    def discarded(self) -> bool:
        """True once the episode is discarded (by :meth:`discard`, a stale camera or a write failure)."""
        return self.reason is not None

    def __repr__(self) -> str:
        state = "saved" if self.saved else (f"discarded: {self.reason}" if self.reason else "recording")
        return f"Episode({self.id!r}, {state})"

    # ------------------------------------------------------------------ adding
    def add_obs(self, component: str, timestamp_ns: int, **values) -> bool:
        """One observation of ``component`` (``"arms/right"``, ``"arms/left"``, ``"lifter"``) at
        ``timestamp_ns`` (int ns): ``qpos``/``qvel``/``qtorque``/``pose`` (8 values each for an arm)
        or ``elevation`` for the lifter. The attributes given first are the stream's columns; every
        later call gives the same ones. Returns False if the sample was not stored (discarded
        episode, or dropped: see :attr:`dropped`)."""
        return self._add("obs", component, timestamp_ns, values)

    def add_action(self, component: str, timestamp_ns: int, **values) -> bool:
        """One command sent to ``component`` (usually ``qpos``); as :meth:`add_obs`."""
        return self._add("action", component, timestamp_ns, values)

    def _add(self, kind: str, component: str, ts, values: dict) -> bool:
        if self._finished or self.reason is not None:
            return False
        st = self._streams.get((kind, component))
        if st is None:
            st = self._new_stream(kind, component)
        ts = _as_ns(ts, st.name)
        if ts <= st.last:
            raise ValueError(f"{st.name}: timestamp {ts} is not after the previous one ({st.last})")
        blk = st.block
        if blk is None:
            if st.attrs is None:
                st.attrs = self._check_attrs(st, values)
            blk = st.block = _Block(self.recorder.rows_per_group, {a: st.width for a in st.attrs})
        if len(values) != len(st.attrs):
            raise ValueError(f"{st.name}: got attributes {sorted(values)}, the stream has {list(st.attrs)}")
        i = blk.n
        try:
            for name, v in values.items():
                blk.values[name][i] = v
        except KeyError:
            raise ValueError(f"{st.name}: got attributes {sorted(values)}, the stream has {list(st.attrs)}") from None
        except (ValueError, TypeError) as e:
            raise ValueError(f"{st.name}: {name} must be {st.width} numbers ({e})") from None
        blk.ts[i] = ts
        blk.n = i + 1
        st.last = ts
        if blk.n == len(blk.ts):
            self._hand_over(st)
        if ts > self._now:
            self._tick(ts)
        return True

    def add_frame(self, camera: str, timestamp_ns: int, image) -> bool:
        """One camera frame at ``timestamp_ns`` (int ns): JPEG bytes (stored as given) or an HxWx3
        uint8 RGB array (copied here, JPEG-encoded in the recorder's encoder threads at
        ``jpeg_quality``). Returns False if it was not stored (discarded episode, or dropped)."""
        if self._finished or self.reason is not None:
            return False
        last = self._cam_last.get(camera)
        if last is None:
            raise ValueError(f"camera {camera!r} is not declared in equipment.perceptions.cameras "
                             f"({', '.join(self._cam_last) or 'none'})")
        ts = _as_ns(timestamp_ns, f"camera {camera}")
        if ts <= last:
            raise ValueError(f"camera {camera}: timestamp {ts} is not after the previous one ({last})")
        rec = self.recorder
        if isinstance(image, (bytes, bytearray, memoryview)):
            payload, nbytes = bytes(image), len(image)
        else:
            arr = np.asarray(image)
            if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
                raise ValueError(f"camera {camera}: expected JPEG bytes or an HxWx3 uint8 array, "
                                 f"got {arr.dtype} {arr.shape}")
            nbytes = arr.nbytes
            payload = None
        self._cam_last[camera] = ts
        if ts > self._cams[camera]:
            self._cams[camera] = ts  # a dropped frame still shows the camera is alive
        stored = rec._reserve(nbytes, rec.max_pending_bytes)
        if stored:
            if payload is None:
                payload = rec._encode(np.array(arr, copy=True))  # the caller may reuse its buffer
            self._cam_frames[camera] += 1
            rec._queue.put(("frame", self, camera, ts, payload, nbytes))
        else:
            self._drop(f"cameras/{camera}")
        if ts > self._now:
            self._tick(ts)
        return stored

    # ------------------------------------------------------------------ internals (control thread)
    def _new_stream(self, kind: str, component: str) -> _Stream:
        emb_name, _, comp = str(component).partition("/")
        emb = {e.name: e for e in self.recorder.meta.embodiments}.get(emb_name)
        if emb is None:
            raise ValueError(f"{kind} {component!r}: no embodiment {emb_name!r} in equipment.embodiments "
                             f"({', '.join(e.name for e in self.recorder.meta.embodiments)})")
        if emb.components:
            if comp not in emb.components:
                raise ValueError(f"{kind} {component!r}: {emb_name} has components {', '.join(emb.components)} "
                                 f"(write e.g. '{emb_name}/{emb.components[0]}')")
        elif comp:
            raise ValueError(f"{kind} {component!r}: {emb_name} has no components (write '{emb_name}')")
        st = _Stream(kind, emb_name, comp or None, f"{kind}/{emb_name}" + (f"/{comp}" if comp else ""), len(emb.joints))
        self._streams[(kind, component)] = st
        return st

    def _check_attrs(self, st: _Stream, values: dict) -> tuple[str, ...]:
        allowed = layout.STATE_ATTRIBUTES if st.component is not None else layout.LIFTER_JOINTS
        names = tuple(values)
        bad = [n for n in names if n not in allowed]
        if bad or not names or (st.component is None and len(names) != 1):
            raise ValueError(f"{st.name}: attributes {list(names)}; allowed: {', '.join(allowed)}"
                             + (" (exactly one)" if st.component is None else ""))
        return names

    def _hand_over(self, st: _Stream) -> None:
        blk, st.block = st.block, None
        if blk is None or blk.n == 0:
            return
        n = blk.n
        values = {k: v[:n] for k, v in blk.values.items()}
        nbytes = blk.ts[:n].nbytes + sum(v.nbytes for v in values.values())
        rec = self.recorder
        if not rec._reserve(nbytes, 2 * rec.max_pending_bytes):
            self._drop(st.name, n)
            return
        rec._queue.put(("rows", self, st, blk.ts[:n], values, nbytes))

    def _drop(self, name: str, n: int = 1) -> None:
        self.dropped[name] = self.dropped.get(name, 0) + n
        self.recorder.dropped_total += n
        if name not in self._warned:
            self._warned.add(name)
            warnings.warn(f"episode {self.id}: {name}: the writer is {self.recorder.pending_bytes >> 20} MiB behind "
                          f"(max_pending_bytes); samples dropped (counted in Episode.dropped)", RuntimeWarning,
                          stacklevel=4)

    def _tick(self, ts: int) -> None:
        """Advance the episode's clock to ``ts``; discard if a camera has been silent too long."""
        if self._start is None:
            self._start = ts
            for c in self._cams:
                self._cams[c] = max(self._cams[c], ts)
            self._deadline = ts + (self._stale_ns or (1 << 62))
        self._now = ts
        if self._stale_ns is None or ts <= self._deadline:
            return
        cam, last = min(self._cams.items(), key=lambda kv: kv[1]) if self._cams else (None, ts)
        if cam is not None and ts - last > self._stale_ns:
            since = "since the episode began" if self._cam_last[cam] < self._start else f"since its frame at {last} ns"
            self._discard_async(f"camera {cam!r} sent no frame for {(ts - last) / 1e9:.3f} s "
                                f"({since}; limit {self.recorder.stale_after_s:g} s)")
            return
        self._deadline = (min(self._cams.values()) if self._cams else ts) + self._stale_ns

    def _discard_async(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            self.recorder._queue.put(("discard", self, reason, None))

    # ------------------------------------------------------------------ ending
    def save(self, success: bool = True, **extra) -> EpisodeResult:
        """Commit the episode (blocks until its files are on disk and it is listed): ``success``
        and any ``extra`` keys go into its metadata entry. Raises :class:`EpisodeDiscarded` (with the
        reason) if it was discarded, :class:`RecordError` if it cannot be written."""
        if self._finished:
            if self.reason is None:
                raise RecordError(None, f"episode {self.id} is already saved")
            raise EpisodeDiscarded(None, f"episode {self.id} was discarded: {self.reason}")
        t0 = time.perf_counter()
        if self.reason is None and self._stale_ns is not None and self._start is not None:
            self._deadline = -(1 << 63)
            self._tick(self._now)  # a camera silent at the end counts too
        self._finished = True
        if self.reason is not None:
            self.recorder._wait(("discard", self, self.reason, Future()))
            raise EpisodeDiscarded(None, f"episode {self.id} was discarded: {self.reason}")
        for st in self._streams.values():
            self._hand_over(st)
        entry = {"id": self.id, "success": bool(success), "task_index": int(self.task_index), **extra}
        result = self.recorder._wait(("commit", self, entry, Future()))
        if result is None:  # discarded by the writer meanwhile (identical frames, write failure)
            raise EpisodeDiscarded(None, f"episode {self.id} was discarded: {self.reason}")
        self.saved = True
        result.seconds = time.perf_counter() - t0
        return result

    def discard(self, reason: str = "discarded by the caller") -> None:
        """Drop the episode: its files are removed, its id stays used (a gap in the ids), and
        ``reason`` is recorded under ``discarded_episodes:`` in metadata.yaml. Blocks until done."""
        if self._finished:
            if self.reason is None:
                raise RecordError(None, f"episode {self.id} is already saved")
            return
        self._finished = True
        if self.reason is None:
            self.reason = reason
        self.recorder._wait(("discard", self, self.reason, Future()))


def _as_ns(ts, what: str) -> int:
    if isinstance(ts, (int, np.integer)) and not isinstance(ts, bool):
        return int(ts)
    raise TypeError(f"{what}: timestamp must be integer nanoseconds, not {type(ts).__name__} {ts!r}")


# ------------------------------------------------------------------------------ recorder
class Recorder:
    """Records episodes into the 0.4.0 dataset ``out`` (created, or resumed: see the module doc).

    ``metadata``: a mapping or the path of a YAML file with ``tasks``, ``equipment`` (embodiments and
    cameras) and optionally ``location``/``operator``/``operation_type`` (default ``teleop``) and
    nominal ``frequencies`` (replaced by measured ones as episodes are saved). Required to create a
    dataset; on an existing one its ``equipment`` must equal the stored one, and tasks it adds are
    appended. ``camera_format`` (``dir``: one JPEG file per frame; ``tar``: one archive per camera,
    the better choice for long episodes) must match the episodes already stored. One recorder (or
    generator) per folder at a time: a second one is refused.
    """

    def __init__(self, out: str | os.PathLike, metadata: Mapping | str | os.PathLike | None = None, *,
                 camera_format: str = "dir", stale_after_s: float | None = 1.0,
                 max_pending_bytes: int = 256 << 20, rows_per_group: int = 1000, encoder_threads: int = 2,
                 jpeg_quality: int = 90):
        if camera_format not in CAMERA_FORMATS:
            raise ValueError(f"camera_format must be one of {CAMERA_FORMATS}, not {camera_format!r}")
        if rows_per_group < 1 or max_pending_bytes < 1:
            raise ValueError("rows_per_group and max_pending_bytes must be positive")
        self.root = Path(out)
        self.camera_format = camera_format
        self.stale_after_s = stale_after_s
        self.max_pending_bytes = int(max_pending_bytes)
        self.rows_per_group = int(rows_per_group)
        self.encoder_threads = max(1, int(encoder_threads))
        self.jpeg_quality = int(jpeg_quality)
        self.pending_bytes = 0
        self.peak_pending_bytes = 0
        self.dropped_total = 0
        self.removed: list[Path] = []  # leftovers of a killed recorder removed on open
        self._pending_lock = threading.Lock()
        self._encoder: ThreadPoolExecutor | None = None
        self._episode: Episode | None = None
        self._closed = False
        self._lock = _Lock(self.root)
        try:
            self.meta = self._open(metadata)
            self.removed = remove_uncommitted(self.root, self.meta)
        except BaseException:
            self._lock.release()
            raise
        ids = [*self.meta.episode_ids, *(str(d.get("id")) for d in self.meta.data.get(DISCARDED_KEY) or [])]
        self._next_id = max((int(i) + 1 for i in ids if i.isdigit()), default=0)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._writer, name="openarm-recorder-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ opening
    def _open(self, metadata) -> Metadata:
        meta_path = self.root / layout.METADATA_FILE
        given = _given_metadata(metadata)
        if meta_path.exists():
            meta = Metadata.load(self.root)
            if meta.version != layout.FORMAT_VERSION:
                raise RecordError(meta_path, f"is a {meta.version} dataset; the recorder appends to "
                                             f"{layout.FORMAT_VERSION} only (dataset-convert it first)")
            if meta.simulation is not None:
                raise RecordError(meta_path, "is a simulated dataset (simulation: block); record into another folder")
            stored = _camera_format_on_disk(self.root, meta)
            if stored is not None and stored != self.camera_format:
                raise RecordError(meta_path, f"its episodes store cameras as {stored!r}, not {self.camera_format!r} "
                                             f"(one format per dataset: pass camera_format={stored!r})")
            if given is not None:
                if given.get("equipment") != meta.data.get("equipment"):
                    raise RecordError(meta_path, "equipment differs from the metadata given to the recorder "
                                                 "(cameras and embodiments of a dataset are fixed)")
                prompts = {t.get("prompt") for t in meta.tasks}
                new = [t for t in given.get("tasks") or [] if t.get("prompt") not in prompts]
                if new:
                    meta.data.setdefault("tasks", []).extend(copy.deepcopy(new))
                    meta.write(self.root)
            return meta
        if given is None:
            raise RecordError(meta_path, "not found, and no metadata was given to create the dataset")
        if self.root.exists() and any(not p.name.startswith(".tmp-") for p in self.root.iterdir()):
            raise RecordError(self.root, "exists, is not empty and has no metadata.yaml")
        data = copy.deepcopy(dict(given))
        data["version"] = layout.FORMAT_VERSION
        data.setdefault("operation_type", "teleop")
        data["episodes"] = []
        data.setdefault("frequencies", {})
        meta = Metadata(data, meta_path)
        if not meta.tasks:
            raise RecordError(meta_path, "the metadata given has no tasks (start_episode needs a task_index)")
        if not (meta.data.get("equipment") or {}).get("embodiments"):
            raise RecordError(meta_path, "the metadata given has no equipment.embodiments")
        self.root.mkdir(parents=True, exist_ok=True)
        meta.write(self.root)
        return meta

    # ------------------------------------------------------------------ episodes
    def start_episode(self, task_index: int = 0) -> Episode:
        """Begin the next episode (id: one more than any listed or discarded id)."""
        if self._closed:
            raise RecordError(self.root, "the recorder is closed")
        if self._episode is not None and not self._episode._finished:
            raise RecordError(self.root, f"episode {self._episode.id} is still open: save() or discard() it first")
        if not isinstance(task_index, (int, np.integer)) or not 0 <= task_index < len(self.meta.tasks):
            raise ValueError(f"task_index {task_index!r} out of range (the dataset has {len(self.meta.tasks)} tasks)")
        ep = Episode(self, str(self._next_id), int(task_index))
        self._next_id += 1
        self._episode = ep
        self._queue.put(("open", ep))
        return ep

    def close(self) -> None:
        """Discard an episode still open (reason ``recorder closed``), stop the writer, release the lock."""
        if self._closed:
            return
        try:
            if self._episode is not None and not self._episode._finished:
                self._episode.discard("recorder closed before save()")
            self._queue.put(("stop",))
            self._thread.join()
            if self._encoder is not None:
                self._encoder.shutdown()
        finally:
            self._closed = True
            self._lock.release()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def _reserve(self, nbytes: int, limit: int) -> bool:
        with self._pending_lock:
            if self.pending_bytes + nbytes > limit:
                return False
            self.pending_bytes += nbytes
            if self.pending_bytes > self.peak_pending_bytes:
                self.peak_pending_bytes = self.pending_bytes
            return True

    def _release(self, nbytes: int) -> None:
        with self._pending_lock:
            self.pending_bytes -= nbytes

    def _encode(self, rgb: np.ndarray) -> Future:
        if self._encoder is None:
            self._encoder = ThreadPoolExecutor(self.encoder_threads, thread_name_prefix="openarm-recorder-jpeg")
        return self._encoder.submit(_encode_jpeg, rgb, self.jpeg_quality)

    def _wait(self, item: tuple):
        fut: Future = item[-1]
        self._queue.put(item)
        return fut.result()

    # ------------------------------------------------------------------ writer thread
    def _writer(self) -> None:
        while True:
            item = self._queue.get()
            op, ep = item[0], (item[1] if len(item) > 1 else None)
            try:
                if op == "stop":
                    return
                if op == "open":
                    ep._w_tmp = begin_episode(self.root, ep.id)
                elif op == "rows":
                    self._w_rows(ep, *item[2:5])
                elif op == "frame":
                    self._w_frame(ep, *item[2:5])
                elif op == "commit":
                    item[3].set_result(self._w_commit(ep, item[2]))
                elif op == "discard":
                    self._w_discard(ep, item[2])
                    if item[3] is not None:
                        item[3].set_result(None)
            except BaseException as e:  # noqa: BLE001 - any failure ends the episode, never the thread
                reason = f"write failed: {e}" if isinstance(e, DatasetError) else \
                    f"write failed: {type(e).__name__}: {e}"
                if ep is not None and op != "stop":
                    if ep.reason is None:
                        ep.reason = reason
                    try:
                        self._w_discard(ep, ep.reason)
                    except BaseException as e2:  # noqa: BLE001
                        ep.reason += f"; removing it failed too: {e2}"
                if op in ("commit", "discard") and item[-1] is not None and not item[-1].done():
                    if op == "commit":
                        item[-1].set_exception(RecordError(self.root, f"episode {ep.id}: {reason}"))
                    else:
                        item[-1].set_result(None)
            finally:
                if op in ("rows", "frame"):
                    self._release(item[5])

    def _w_rows(self, ep: Episode, st: _Stream, ts: np.ndarray, values: dict) -> None:
        if ep._w_gone:
            return
        key = (st.kind, st.name)
        w = ep._w_streams.get(key)
        if w is None:
            w = ep._w_streams[key] = StreamWriter(ep._w_tmp, st.kind, st.embodiment, st.component, st.attrs)
            ep._w_rates[st.name] = _RateMeter()
        w.write(ts, values)
        ep._w_rates[st.name].add(ts)

    def _w_frame(self, ep: Episode, camera: str, ts: int, payload) -> None:
        if isinstance(payload, Future):
            payload = payload.result()
        if ep._w_gone:
            return
        prev = ep._w_prev.get(camera)
        if prev is not None and prev[0] == payload:
            run_start = prev[1]
            stale_ns = ep._stale_ns
            if stale_ns is not None and ts - run_start > stale_ns:
                if ep.reason is None:
                    ep.reason = (f"camera {camera!r} sent identical frames for {(ts - run_start) / 1e9:.3f} s "
                                 f"(from {run_start} to {ts} ns; limit {self.stale_after_s:g} s)")
                self._w_discard(ep, ep.reason)
                return
        else:
            run_start = ts
        ep._w_prev[camera] = (payload, run_start)
        w = ep._w_frames.get(camera)
        if w is None:
            name = layout.check_name(camera, "camera name")
            path = ep._w_tmp / layout.CAMERAS_DIR / (name + (layout.TAR_SUFFIX if self.camera_format == "tar" else ""))
            w = ep._w_frames[camera] = FrameWriter(path, self.camera_format)
            ep._w_rates["cameras/" + camera] = _RateMeter()
        w.write(ts, payload)
        if w.format == "dir":  # hashed now, while in memory: the manifest need not read it back
            stamps, sizes, digests = ep._w_known.setdefault(camera, (array("q"), array("q"), bytearray()))
            stamps.append(ts)
            sizes.append(len(payload))
            digests += hashlib.sha256(payload).digest()  # 48 bytes per frame kept until save
        ep._w_rates["cameras/" + camera].add(np.array([ts], dtype=np.int64))

    def _w_close_files(self, ep: Episode) -> None:
        for w in [*ep._w_streams.values(), *ep._w_frames.values()]:
            w.close()
        ep._w_streams, ep._w_frames = {}, {}

    def _w_discard(self, ep: Episode, reason: str) -> None:
        if ep._w_gone:
            return
        ep._w_gone = True
        ep._w_prev, ep._w_known = {}, {}
        try:
            self._w_close_files(ep)
        finally:
            if ep._w_tmp is not None:
                remove_tree(ep._w_tmp)
            self.meta.data.setdefault(DISCARDED_KEY, []).append({"id": ep.id, "reason": reason})
            self.meta.write(self.root)

    def _w_commit(self, ep: Episode, entry: dict) -> EpisodeResult | None:
        if ep._w_gone:
            return None
        rows = {name: w.rows for (_kind, name), w in ep._w_streams.items()}  # stored (dropped blocks excluded)
        self._w_close_files(ep)
        measured = _nest({k: m.hz() for k, m in ep._w_rates.items()}, digits=3)
        entry = dict(entry)
        if measured:
            entry["measured_hz"] = measured
        if ep.dropped:
            entry["dropped"] = dict(ep.dropped)
        old = copy.deepcopy(self.meta.data.get("frequencies"))
        self.meta.data["frequencies"] = _dataset_frequencies(old or {}, [*self.meta.episodes, entry])
        try:
            finish_episode(self.root, self.meta, entry, ep._w_tmp, known=_manifest_entries(ep._w_known))
        except BaseException:
            self.meta.data["frequencies"] = old
            raise
        ep._w_gone = True
        return EpisodeResult(ep.id, entry, rows, {c: n for c, n in ep._cam_frames.items()}, dict(ep.dropped))


# ------------------------------------------------------------------------------ helpers
def _given_metadata(metadata) -> dict | None:
    if metadata is None:
        return None
    if isinstance(metadata, Metadata):
        return metadata.to_dict()
    if isinstance(metadata, Mapping):
        return copy.deepcopy(dict(metadata))
    path = Path(metadata)
    doc = load_yaml_document(path)
    if not isinstance(doc, dict):
        raise MetadataError(path, f"must be a mapping at the top level, not {type(doc).__name__}")
    return doc


def _manifest_entries(known: dict[str, tuple]) -> dict[str, tuple[str, int]]:
    """Manifest entries (relative path -> (sha256 hex, size)) of the frames hashed as written."""
    out = {}
    for camera, (stamps, sizes, digests) in known.items():
        for i, (ts, size) in enumerate(zip(stamps, sizes)):
            out[f"{layout.CAMERAS_DIR}/{camera}/{layout.frame_name(ts)}"] = (digests[32 * i:32 * i + 32].hex(), size)
    return out


def _camera_format_on_disk(root: Path, meta: Metadata) -> str | None:
    """``dir`` or ``tar``: how the last listed episode stores its cameras (None: no camera stored)."""
    for ep_id in reversed(meta.episode_ids):
        cams = layout.episode_dir(root, ep_id) / layout.CAMERAS_DIR
        if cams.is_dir():
            for entry in os.scandir(cams):
                return "tar" if entry.name.endswith(layout.TAR_SUFFIX) else "dir"
    return None


def _encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _nest(flat: dict[str, float | None], digits: int) -> dict:
    """``{"obs/arms/right": 250.0, "cameras/head": 30.0, "obs/lifter": 10.0}`` in the shape of
    ``frequencies:`` (None values left out)."""
    out: dict = {}
    for key, hz in flat.items():
        if hz is None:
            continue
        parts = key.split("/")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = round(float(hz), digits)
    return out


def _flatten(nested: Mapping, prefix: str = "") -> dict[str, float]:
    out = {}
    for k, v in nested.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


def _dataset_frequencies(declared: Mapping, episodes: list[dict]) -> dict:
    """``frequencies:`` from the episodes' ``measured_hz`` (median per stream, 0.1 Hz), streams no
    episode measured keeping their ``declared`` value."""
    per: dict[str, list[float]] = {}
    for ep in episodes:
        for k, v in _flatten(ep.get("measured_hz") or {}).items():
            per.setdefault(k, []).append(v)
    flat = _flatten(declared)
    flat.update({k: float(np.median(v)) for k, v in per.items()})
    return _nest(flat, digits=1)
