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

**A writer process.** ``add_*`` only copy: rows into preallocated per-stream blocks (a full block
of ``rows_per_group`` rows is copied into shared memory), frames (JPEG bytes, or an RGB array) into
a shared-memory ring. A frame's 40-byte descriptor in the shared memory tells the recorder's writer
process (:mod:`.record_writer`) where it is (on x86 nothing else: no system call in ``add_frame``;
elsewhere their count goes in a pipe message), a message of a few dozen bytes does for a block of
rows. That process does every disk write and the JPEG encoding of array frames, so the control loop
shares neither the GIL nor the allocator with the disk. What waits for the writer is bounded in
bytes (``max_pending_bytes``; the ring holds twice that) and in messages (the pipe's capacity,
``pipe_bytes``, and as many bytes of frame descriptors): a frame that does not fit is **dropped**,
and a block of state rows is dropped only above twice the bound (rows are ~100 kB/s, frames MB/s). Every drop is
counted per stream (:attr:`Episode.dropped`, ``dropped:`` in the episode's metadata entry) and
warned about once per episode; ``add_*`` return False for a sample not stored.

**Stopping before saving.** :meth:`Episode.stop` ends an episode's samples without committing it:
the next episode may start at once while the stopped one still takes its files (:meth:`Episode.add_file`,
e.g. a simulation node's, which arrive after the command that ended the episode); it is saved or
discarded later, and its id stays taken meanwhile.

**A killed writer** (SIGKILL, out of memory) never takes the caller down: the open episode is
discarded (its id recorded under ``discarded_episodes:`` with the reason), the next ``add_*`` call
returns False with a warning naming the exit status, :meth:`Episode.save` raises
:class:`EpisodeDiscarded` with it, and the next :meth:`Recorder.start_episode` starts a new writer.
A killed *caller* makes the writer exit at once without listing anything (the writer holds the
dataset's lock until then; a recorder opened meanwhile waits for it, at most 5 s).

**Stale cameras.** A declared camera that sends no frame, or only byte-identical frames, for longer
than ``stale_after_s`` (default 1 s, measured on the samples' own timestamps) discards the episode;
:attr:`Episode.reason` says which camera and for how long, and :meth:`Episode.save` raises
:class:`EpisodeDiscarded` with it.

**Frames outside the arms' span.** At save, the writer removes the frames stamped before the latest
first state sample or after the earliest last one, beyond one state period (``layout.camera_window``,
the validator's ``camera_span`` rule): a camera's last frames arrive after the arms' last samples
when an episode ends on a command. The entry's ``trimmed_frames:`` counts them per camera, and
:attr:`EpisodeResult.frames` counts the frames stored.

**Frequencies.** Each saved entry records ``measured_hz`` (1 / median interval of each stream and
camera, same shape as ``frequencies:``); the dataset's ``frequencies:`` are the median over the
listed episodes, rounded to 0.1 Hz. Declared streams never recorded keep the value the metadata
gave.
"""

from __future__ import annotations

import copy
import fcntl
import os
import select
import signal
import threading
import time
import warnings
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import layout
from .errors import DatasetError, MetadataError
from .lock import OutputLock, lock_path
from .metadata import Metadata, load_yaml_document
from .record_writer import DESCRIPTOR_WORDS, DISCARDED_KEY, pack_request as _pack_request, put_frame as _put_frame
from .writer import CAMERA_FORMATS

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
#: How long a new recorder waits for the writer process of a killed recorder to exit (its lock).
ORPHAN_WAIT_S = 5.0


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
    """Preallocated rows of one stream filled by the control loop; handed to the writer when full. One
    buffer, in the layout the writer reads: the stamps (int64), then each attribute's rows (float32)."""

    __slots__ = ("buf", "ts", "values", "n")

    def __init__(self, rows: int, widths: Mapping[str, int]):
        self.buf = np.empty(rows * (8 + 4 * sum(widths.values())), dtype=np.uint8)
        self.ts = self.buf[:8 * rows].view(np.int64)
        self.values = {}
        off = 8 * rows
        for k, w in widths.items():
            self.values[k] = self.buf[off:off + 4 * rows * w].view(np.float32).reshape(rows, w)
            off += 4 * rows * w
        self.n = 0

    def filled(self, attrs: tuple[str, ...]) -> np.ndarray:
        """The rows filled, in the writer's layout (the buffer itself when full)."""
        n = self.n
        if n == len(self.ts):
            return self.buf
        return np.concatenate([self.ts[:n].view(np.uint8),
                               *(self.values[a][:n].reshape(-1).view(np.uint8) for a in attrs)])


class _Stream:
    """Control-side state of one obs/action component."""

    __slots__ = ("kind", "embodiment", "component", "name", "width", "attrs", "block", "last")

    def __init__(self, kind: str, embodiment: str, component: str | None, name: str, width: int):
        self.kind, self.embodiment, self.component, self.name, self.width = kind, embodiment, component, name, width
        self.attrs: tuple[str, ...] | None = None
        self.block: _Block | None = None
        self.last = -(1 << 63)


class _Camera:
    """Control-side state of one camera: its newest frame's stamp (the stale rule's clock) and its
    descriptors' key (episode id << 16 | index: the writer knows the cameras from the "open" message)."""

    __slots__ = ("last", "key")

    def __init__(self, key: int):
        self.last, self.key = -(1 << 63), key


@dataclass
class EpisodeResult:
    """What :meth:`Episode.save` committed: the metadata entry and the figures behind it."""

    id: str
    entry: dict
    rows: dict[str, int] = field(default_factory=dict)  # "obs/arms/right" -> rows stored
    frames: dict[str, int] = field(default_factory=dict)  # camera -> frames stored (after trimming)
    dropped: dict[str, int] = field(default_factory=dict)  # stream or camera -> samples not stored
    seconds: float = 0.0  # time save() took (queue drained, files closed, committed)


class Episode:
    """One episode being recorded; made by :meth:`Recorder.start_episode`. ``add_obs``/``add_action``
    are called by one thread (the control loop), ``add_frame`` by that thread or one thread per camera
    (a driver's callback); see the module doc for what they cost and when they drop. Once the episode
    is stopped, saved or discarded they store nothing and return False (a camera thread may race the
    end)."""

    def __init__(self, rec: "Recorder", episode_id: str, task_index: int):
        self.recorder = rec
        self.id = episode_id
        self.task_index = task_index
        self.reason: str | None = None  # why it was discarded (None while alive or once saved)
        self.saved = False
        self.dropped: dict[str, int] = {}
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._cameras = {c: _Camera((int(episode_id) << 16) | i) for i, c in enumerate(rec.meta.cameras)}
        self._producer = rec._producer  # the writer's (a new writer after one died: a new episode)
        self._stale_ns = int(round(rec.stale_after_s * 1e9)) if rec.stale_after_s else None
        self._start: int | None = None  # the first sample's stamp
        # a stamp above it calls _tick: the first sample, then the earliest at which a camera could be stale
        self._deadline = -(1 << 63)
        self._finished = False  # saved or discarded
        self._stopped = False  # takes no more samples (stop(), or finished); add_file still stores
        self._warned: set[str] = set()

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
        if self._stopped or self.reason is not None:
            return self._refused()
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
        if ts > self._deadline:
            self._tick(ts)
        return True

    def add_frame(self, camera: str, timestamp_ns: int, image) -> bool:
        """One camera frame at ``timestamp_ns`` (int ns): JPEG bytes (any contiguous buffer: bytes,
        bytearray, memoryview; stored as given) or an HxWx3 uint8 RGB array (copied here, JPEG-encoded
        in the recorder's encoder threads at ``jpeg_quality``). Returns False if it was not stored
        (discarded episode, or dropped)."""
        # the hot path of a camera callback: few Python operations, since the first call after the
        # loop's sleep runs with its code and data out of the CPU's caches (tools/bench_record.py); the
        # copy and its descriptor are one compiled call where the package was built with a compiler
        if self._stopped or self.reason is not None:
            return self._refused()
        cam = self._cameras.get(camera)
        if cam is None:
            raise ValueError(f"camera {camera!r} is not declared in equipment.perceptions.cameras "
                             f"({', '.join(self._cameras) or 'none'})")
        ts = timestamp_ns if type(timestamp_ns) is int else _as_ns(timestamp_ns, f"camera {camera}")
        if ts <= cam.last:
            raise ValueError(f"camera {camera}: timestamp {ts} is not after the previous one ({cam.last})")
        if isinstance(image, (bytes, bytearray, memoryview)):
            nbytes, shape = image.nbytes if type(image) is memoryview else len(image), 0
        else:
            image = np.asarray(image)
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise ValueError(f"camera {camera}: expected JPEG bytes or an HxWx3 uint8 array, "
                                 f"got {image.dtype} {image.shape}")
            nbytes, shape = image.nbytes, (image.shape[0] << 32) | image.shape[1]
        cam.last = ts  # a dropped frame still shows the camera is alive
        p = self._producer
        stored = _put_frame(p, image, nbytes, ts, cam.key) if _put_frame is not None and not shape else NotImplemented
        if stored is NotImplemented:
            stored = p.put(image, nbytes, p.frame_limit, None, ts, cam.key, shape)
        if not stored:
            self._drop(f"cameras/{camera}")
        if ts > self._deadline:
            self._tick(ts)
        return stored

    def add_file(self, path: str, data: bytes, timeout_s: float = 5.0) -> None:
        """Store ``data`` as the episode's file ``path``, relative to its folder and under ``sim/``
        (``sim/sidecar.npz``: a simulation node's physics stream), committed and listed in its manifest
        with the rest. Not for a hot path: it waits up to ``timeout_s`` for room in the shared-memory
        ring (never dropped). Raises ValueError for another path or a file larger than the ring,
        :class:`RecordError` if the episode is finished or the writer cannot take it."""
        parts = str(path).split("/")
        if len(parts) != 2 or parts[0] != layout.SIM_DIR:
            raise ValueError(f"episode file {path!r}: must be {layout.SIM_DIR}/<name>")
        layout.check_name(parts[1], "episode file name")
        if self._finished or self.reason is not None:
            raise RecordError(None, f"episode {self.id} is finished or discarded: {path} not stored")
        rec = self.recorder
        arr = np.frombuffer(data, dtype=np.uint8)
        if arr.nbytes > rec.max_pending_bytes:
            raise ValueError(f"episode file {path}: {arr.nbytes} bytes, more than max_pending_bytes "
                             f"({rec.max_pending_bytes})")
        deadline = time.monotonic() + timeout_s
        while not rec._put(("file", self.id, "/".join(parts)), arr, rec.max_pending_bytes):
            if rec._lost_reason is not None or time.monotonic() > deadline:
                raise RecordError(rec.root, f"episode {self.id}: {path} not stored: "
                                            f"{rec._lost_reason or f'the writer took no data for {timeout_s:g} s'}")
            time.sleep(0.005)

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
        rec = self.recorder
        head = ("rows", self.id, st.kind, st.embodiment, st.component, st.name, st.attrs, blk.n, st.width)
        if not rec._put(head, blk.filled(st.attrs), 2 * rec.max_pending_bytes):
            self._drop(st.name, blk.n)

    def _refused(self) -> bool:
        """False (sample not stored); the first refusal after the writer process died warns."""
        lost = self.recorder._lost_reason
        if lost is not None and "writer" not in self._warned:
            self._warned.add("writer")
            warnings.warn(f"episode {self.id}: {self.reason}", RuntimeWarning, stacklevel=4)
        return False

    def _drop(self, name: str, n: int = 1) -> None:
        self.dropped[name] = self.dropped.get(name, 0) + n
        self.recorder.dropped_total += n
        if name not in self._warned:
            self._warned.add(name)
            warnings.warn(f"episode {self.id}: {name}: the writer is {self.recorder.pending_bytes >> 20} MiB behind "
                          f"(max_pending_bytes); samples dropped (counted in Episode.dropped)", RuntimeWarning,
                          stacklevel=4)

    def _tick(self, ts: int) -> None:
        """A stamp past ``_deadline``: the first one starts the episode's clock; then, if a camera has
        been silent too long (its newest frame, or the start if it sent none, more than ``stale_after_s``
        before ``ts``) the episode is discarded, else the deadline moves to the earliest stamp at which
        one could be. A sample stamped up to the deadline cannot make a camera stale: its clock only
        moves forward."""
        if self._start is None:
            self._start = ts
        if self._stale_ns is None or not self._cameras:
            self._deadline = 1 << 63
            return
        start = self._start
        cam, last = min(((name, max(c.last, start)) for name, c in self._cameras.items()), key=lambda kv: kv[1])
        if ts - last > self._stale_ns:
            since = "since the episode began" if self._cameras[cam].last < start else f"since its frame at {last} ns"
            self._discard_async(f"camera {cam!r} sent no frame for {(ts - last) / 1e9:.3f} s "
                                f"({since}; limit {self.recorder.stale_after_s:g} s)")
            return
        self._deadline = last + self._stale_ns

    def _discard_async(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            try:
                self.recorder._send(("discard", self.id, reason, None))
            except RecordError:
                pass  # the writer died: the episode is gone anyway (reported at the next call)

    # ------------------------------------------------------------------ ending
    def stop(self) -> None:
        """End the episode's samples without committing it: ``add_obs``/``add_action``/``add_frame``
        store nothing from now on, :meth:`add_file` still stores, and the recorder may start the next
        episode at once. :meth:`save` or :meth:`discard` it later: a dataflow's simulation files come
        after the command that ends the episode, and the next ``start`` must not wait for them (nor
        cut the wait short). Called by :meth:`save`; calling it again does nothing."""
        if self._stopped:
            return
        self._stopped = True
        if self.reason is None:
            for st in self._streams.values():
                self._hand_over(st)
        self.recorder._saving[self.id] = self  # its id is taken until it is listed or discarded

    def save(self, success: bool = True, **extra) -> EpisodeResult:
        """Commit the episode (blocks until its files are on disk and it is listed): ``success``
        and any ``extra`` keys go into its metadata entry. Raises :class:`EpisodeDiscarded` (with the
        reason) if it was discarded, :class:`RecordError` if it cannot be written."""
        return self.save_nowait(success, **extra).result()

    def save_nowait(self, success: bool = True, **extra) -> Future:
        """:meth:`save` without waiting for the commit: a ``concurrent.futures.Future`` of the
        :class:`EpisodeResult` (or of the exception :meth:`save` raises). The next episode may start
        at once; the writer commits this one first (its messages are in order). For an event loop
        that must not stall for the commit's fsyncs (the dora node: a stalled loop's inputs are
        dropped, the next ``start`` among them)."""
        if self._finished:
            if self.reason is None:
                raise RecordError(None, f"episode {self.id} is already saved")
            raise self._discarded()
        t0 = time.perf_counter()
        self.stop()
        self._finished = True
        rec = self.recorder
        out: Future = Future()
        if self.reason is not None:
            rec._saving.pop(self.id, None)
            try:
                rec._request(("discard", self.id, self.reason))
            except RecordError:
                pass  # the writer died: nothing left to remove in this process
            out.set_exception(self._discarded())
            return out
        entry = {"id": self.id, "success": bool(success), "task_index": int(self.task_index), **extra}
        if self.dropped:
            entry["dropped"] = dict(self.dropped)
        try:
            commit = rec._request_nowait(("commit", self.id, entry))
        except RecordError as e:
            rec._saving.pop(self.id, None)
            out.set_exception(self._discarded() if self.reason is not None else e)  # the writer died meanwhile
            return out

        def finished(f: Future) -> None:
            rec._saving.pop(self.id, None)
            error = f.exception()
            if error is not None:
                out.set_exception(self._discarded() if self.reason is not None else error)
                return
            done = f.result()
            if done is None:  # discarded by the writer meanwhile (identical frames, write failure)
                out.set_exception(self._discarded())
                return
            saved_entry, rows, frames = done
            self.saved = True
            stored = {c: frames.get(c, 0) for c in self._cameras}
            out.set_result(EpisodeResult(self.id, saved_entry, rows, stored, dict(self.dropped),
                                         seconds=time.perf_counter() - t0))

        commit.add_done_callback(finished)
        return out

    def _discarded(self) -> EpisodeDiscarded:
        return EpisodeDiscarded(None, f"episode {self.id} was discarded: {self.reason or 'by the writer'}")

    def discard(self, reason: str = "discarded by the caller", keep_id: bool = True) -> None:
        """Drop the episode: its files are removed, its id stays used (a gap in the ids), and
        ``reason`` is recorded under ``discarded_episodes:`` in metadata.yaml. With
        ``keep_id=False`` (a dataflow's ``cancel``: the UI numbers the next attempt the same) nothing
        is recorded and the id is free again. Blocks until done."""
        if self._finished:
            if self.reason is None:
                raise RecordError(None, f"episode {self.id} is already saved")
            return
        self._finished = self._stopped = True
        if self.reason is None:
            self.reason = reason
        rec = self.recorder
        rec._saving.pop(self.id, None)
        if not keep_id and rec._next_id == int(self.id) + 1:
            rec._next_id = int(self.id)
        try:
            self.recorder._request(("discard", self.id, self.reason if keep_id else None))
        except RecordError:
            if self.recorder._lost_reason is None:
                raise  # the writer died: the episode is gone anyway


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
                 max_pending_bytes: int = 64 << 20, rows_per_group: int = 1000, encoder_threads: int = 2,
                 jpeg_quality: int = 90, pipe_bytes: int = 1 << 20):
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
        self.pipe_bytes = int(pipe_bytes)
        self._peak = 0  # peak_pending_bytes of the writers stopped
        self.dropped_total = 0
        self.removed: list[Path] = []  # leftovers of a killed recorder removed on open
        self._lost_reason: str | None = None  # set when the writer process died
        self._send_lock = threading.Lock()  # message order (taken before a turn of the ring: Producer)
        self._producer = None  # the ring's control side (record_writer.Producer) while a writer runs
        self._episode: Episode | None = None
        self._saving: dict[str, Episode] = {}  # episodes stopped and not listed yet (waiting, or committing)
        self._closed = False
        self._proc = None
        self._lock = _acquire_lock(self.root)
        try:
            self.meta = self._open(metadata)
            self._start_writer()
        except BaseException:
            self._stop_writer()
            self._lock.release()
            raise
        ids = [*self.meta.episode_ids, *(str(d.get("id")) for d in self.meta.data.get(DISCARDED_KEY) or [])]
        self._next_id = max((int(i) + 1 for i in ids if i.isdigit()), default=0)

    @property
    def pending_bytes(self) -> int:
        """Bytes copied into the ring that the writer process has not finished with."""
        p = self._producer
        return 0 if p is None else p.pending()

    @property
    def peak_pending_bytes(self) -> int:
        """The most bytes that were pending (copied, the writer not finished with them) at once."""
        p = self._producer
        return self._peak if p is None else p.peak

    @property
    def writer_pid(self) -> int | None:
        """Process id of the writer process (None once closed)."""
        return self._proc.pid if self._proc is not None else None


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
                if _fixed_equipment(given.get("equipment")) != _fixed_equipment(meta.data.get("equipment")):
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
    def start_episode(self, task_index: int = 0, episode_id: int | None = None) -> Episode:
        """Begin an episode: ``episode_id`` (a non-negative integer no listed or discarded episode
        has; a dataflow's UI numbers its episodes) or, by default, one more than any id used."""
        if self._closed:
            raise RecordError(self.root, "the recorder is closed")
        if self._episode is not None and not self._episode._stopped:
            raise RecordError(self.root, f"episode {self._episode.id} is still open: stop(), save() or discard() it first")
        if not isinstance(task_index, (int, np.integer)) or not 0 <= task_index < len(self.meta.tasks):
            raise ValueError(f"task_index {task_index!r} out of range (the dataset has {len(self.meta.tasks)} tasks)")
        if episode_id is not None:
            if not isinstance(episode_id, (int, np.integer)) or isinstance(episode_id, bool) or episode_id < 0:
                raise ValueError(f"episode id {episode_id!r}: must be a non-negative integer")
            if self._id_used(str(int(episode_id))):
                raise RecordError(self.root, f"episode {int(episode_id)} exists already (listed or discarded); "
                                             f"the next free id is {self._next_id}")
        self._restart_if_dead()
        ep = Episode(self, str(self._next_id if episode_id is None else int(episode_id)), int(task_index))
        self._next_id = max(self._next_id, int(ep.id) + 1)
        self._episode = ep
        self._send(("open", ep.id, ep._stale_ns, tuple(self.meta.cameras)))
        return ep

    def _id_used(self, episode_id: str) -> bool:
        """Whether ``episode_id`` is listed, discarded or being committed (not listed yet)."""
        try:
            self.meta.index_of(episode_id)
            return True
        except KeyError:
            pass
        return episode_id in self._saving or any(str(d.get("id")) == episode_id
                                                 for d in self.meta.data.get(DISCARDED_KEY) or [])

    def set_metadata(self, keys: tuple[str, ...], value) -> None:
        """Set ``metadata.yaml``'s entry at ``keys`` (e.g. ``("equipment", "leader", "ker")``) and
        write it (atomically, by the writer process). Not for ``episodes``/``version``."""
        if not keys or keys[0] in ("episodes", "version", DISCARDED_KEY):
            raise ValueError(f"set_metadata: {keys!r} is managed by the recorder")
        self._restart_if_dead()
        self._request(("set", None, tuple(keys), copy.deepcopy(value)))

    def close(self) -> None:
        """Discard the episodes still open or stopped (reason ``recorder closed``), stop the writer,
        release the lock."""
        if self._closed:
            return
        try:
            for ep in self._unlisted():
                if not ep._finished:
                    ep.discard("recorder closed before save()")
            self._closed = True
            self._stop_writer()
        finally:
            self._closed = True
            self._lock.release()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ writer process
    def _start_writer(self) -> None:
        """Start a writer process (also after one died): it reloads metadata.yaml, removes what is not
        listed, and replies with the metadata it found."""
        from . import record_writer as rw

        capacity = 2 * self.max_pending_bytes
        slots = max(1, self.pipe_bytes // (DESCRIPTOR_WORDS * 8))  # frame descriptors: the pipe's bound, in shared memory
        ring_fd = rw.make_ring_fd(capacity, slots)
        msg_r, msg_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            try:
                fcntl.fcntl(msg_w, F_SETPIPE_SZ, self.pipe_bytes)  # 1 MiB: ~10k messages before drops
            except OSError:
                pass
            os.set_blocking(msg_w, False)
            zyg = rw.zygote()
            args = (str(self.root), self.camera_format, capacity, slots, self.stale_after_s, self.encoder_threads,
                    self.jpeg_quality)
            proc = _Writer(zyg, zyg.fork_writer(args, [self._lock.fd, ring_fd, msg_r, rep_w]))
            ring = rw.Ring(ring_fd, capacity, slots)
        except BaseException:
            os.close(msg_w)
            os.close(msg_r)
            os.close(rep_r)
            raise
        finally:
            os.close(ring_fd)
            os.close(rep_w)
        # the read end stays open here too: a write to a dead writer's pipe then fills it (EAGAIN, a
        # counted drop) instead of raising SIGPIPE, whatever the caller's SIGPIPE disposition
        self._msg_keep = msg_r
        self._proc, self._msg_fd = proc, msg_w
        self._producer = rw.Producer(ring, self._send_lock, msg_w, self.max_pending_bytes, peak=self._peak)
        self._replies = os.fdopen(rep_r, "rb")
        self._futures: dict[int, Future] = {}
        self._req = 0
        ready = rw.read_message(self._replies)
        if ready is None or ready[1] is None:
            proc.join()
            why = ready[2] if ready is not None else f"exit code {proc.exitcode}"
            self._proc = None
            raise RecordError(self.root, f"the recorder's writer process failed to start ({why})")
        self.meta.data = ready[1]
        self.removed = [Path(p) for p in ready[2]]
        self._lost_reason = None
        self._reader = threading.Thread(target=self._read_replies, args=(proc, self._replies),
                                        name="openarm-recorder-replies", daemon=True)
        self._reader.start()

    def _mirror(self, delta: tuple) -> None:
        """Apply the writer's ``("delta", document without entries, entries listed since)``."""
        _, head, new = delta
        episodes = self.meta.episodes
        episodes.extend(new)
        head["episodes"] = episodes
        self.meta.data = head

    def _read_replies(self, proc, replies) -> None:
        from .record_writer import read_message

        while True:
            try:
                msg = read_message(replies)
            except Exception:  # noqa: BLE001 - torn by a killed writer
                msg = None
            if msg is None:
                break
            if msg[0] == "done":
                _, req, result, error, data = msg
                self._mirror(data)
                fut = self._futures.pop(req, None)
                if fut is not None:
                    if error is not None:
                        fut.set_exception(RecordError(self.root, f"episode write failed: {error}"))
                    else:
                        fut.set_result(result)
            elif msg[0] == "discarded":
                _, ep_id, reason, data = msg
                self._mirror(data)
                ep = self._saving.get(ep_id) or self._episode
                if ep is not None and ep.id == ep_id and ep.reason is None:
                    ep.reason = reason
        # end of file: the writer exited (stopped by close(), or killed)
        proc.join()
        replies.close()
        if self._closed or proc is not self._proc:
            return
        code = proc.exitcode
        why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        self._lost_reason = f"the recorder's writer process died ({why})"
        self._producer.open = False
        for ep in self._unlisted():
            if ep.reason is None:
                ep.reason = f"{self._lost_reason}; the episode is discarded"
        for fut in list(self._futures.values()):
            if not fut.done():
                fut.set_exception(RecordError(self.root, self._lost_reason))
        self._futures.clear()

    def _restart_if_dead(self) -> None:
        if self._lost_reason is None:
            return
        lost = self._unlisted()
        self._stop_writer()
        self._start_writer()
        for ep in lost:  # recorded as discarded by the new writer (unless its commit had completed)
            self._request(("discard", ep.id, ep.reason or "the recorder's writer process died"))

    def _unlisted(self) -> list[Episode]:
        """The episode being recorded and those stopped or committing: not saved (yet)."""
        eps = dict.fromkeys((self._episode, *list(self._saving.values())))
        return [ep for ep in eps if ep is not None and not ep.saved]

    def _stop_writer(self) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            if self._lost_reason is None:
                self._send(("stop",))
        except RecordError:
            pass
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(60)  # the writer exits once it has done what was queued
            if reader.is_alive():  # stuck (stopped, disk hung): it must not write after the lock is released
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                reader.join()
        with self._send_lock:
            producer, self._producer = self._producer, None
            producer.close()  # once a camera thread's frame is copied
            self._peak = producer.peak
            os.close(self._msg_fd)
            os.close(self._msg_keep)
        self._proc = None

    # ------------------------------------------------------------------ plumbing
    def _put(self, head: tuple, data: np.ndarray, limit: int) -> bool:
        """Copy ``data`` (uint8) into the ring and send ``head + (position, nbytes)``; False (nothing sent,
        nothing kept) if that would exceed ``limit`` pending bytes or the pipe is full."""
        with self._send_lock:
            p = self._producer
            return p is not None and p.put(data, data.nbytes, min(limit, p.capacity), head)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._msg_fd, view):]
            except BlockingIOError:
                select.select([], [self._msg_fd], [], 0.1)
            except BrokenPipeError:
                raise RecordError(self.root, self._lost_reason or "the recorder's writer process died") from None
            if self._lost_reason is not None:
                raise RecordError(self.root, self._lost_reason)

    def _message(self, msg: tuple) -> bytes:
        """``msg`` framed for the writer, with the count of frame descriptors published before it. Under
        ``_send_lock``."""
        if self._producer is None:
            raise RecordError(self.root, "the recorder is closed")
        return _pack_request(msg, self._producer.published)

    def _send(self, msg: tuple) -> None:
        with self._send_lock:
            self._write_all(self._message(msg))

    def _request(self, msg: tuple):
        """Send ``msg + (request id,)`` and wait for the writer's answer."""
        return self._request_nowait(msg).result()

    def _request_nowait(self, msg: tuple) -> Future:
        """Send ``msg + (request id,)``; the Future of the writer's answer."""
        fut: Future = Future()
        with self._send_lock:
            self._req += 1
            self._futures[self._req] = fut
            if self._lost_reason is not None:
                self._futures.pop(self._req, None)
                raise RecordError(self.root, self._lost_reason)
            self._write_all(self._message((*msg, self._req)))
        return fut



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


def _fixed_equipment(equipment) -> dict:
    """The part of ``equipment`` a dataset keeps fixed: all but ``leader`` (a teleop leader's firmware
    versions, filled in while recording)."""
    return {k: v for k, v in (equipment or {}).items() if k != "leader"} if isinstance(equipment, Mapping) else equipment


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


class _Writer:
    """A writer process forked by the zygote: its pid and, once it ended, its exit status."""

    def __init__(self, zyg, pid: int):
        self.zygote, self.pid = zyg, pid
        self.exitcode: int | None = None

    def join(self) -> None:
        if self.exitcode is None:
            try:
                self.exitcode = self.zygote.wait(self.pid)
            except OSError:
                self.exitcode = -1


def _acquire_lock(root: Path) -> _Lock:
    """The dataset's lock; waits (at most :data:`ORPHAN_WAIT_S`) if the process that holds it is the
    writer of a recorder that was killed (the pid in the lock file is gone): it exits at once."""
    deadline = time.monotonic() + ORPHAN_WAIT_S
    while True:
        try:
            return _Lock(root)
        except RecorderLockError:
            if time.monotonic() > deadline or _holder_alive(root):
                raise
            time.sleep(0.01)


def _holder_alive(root: Path) -> bool:
    try:
        pid = int(lock_path(root).read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError) as e:
        return not isinstance(e, ProcessLookupError)
    return True


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


def _measured_rates(episodes: list[dict]) -> dict[str, list[float]]:
    """The episodes' ``measured_hz``, per flattened stream key."""
    per: dict[str, list[float]] = {}
    for ep in episodes:
        for k, v in _flatten(ep.get("measured_hz") or {}).items():
            per.setdefault(k, []).append(v)
    return per


def _dataset_frequencies(declared: Mapping, episodes: list[dict] | dict[str, list[float]],
                         extra: Mapping[str, float] | None = None) -> dict:
    """``frequencies:`` from the episodes' ``measured_hz`` (median per stream, 0.1 Hz), streams no
    episode measured keeping their ``declared`` value. ``episodes``: the entries, or their rates as
    :func:`_measured_rates` gives them (a writer keeps those, so a commit does not re-read every entry),
    with ``extra`` (one more episode's flattened rates)."""
    per = _measured_rates(episodes) if isinstance(episodes, list) else episodes
    if extra:
        per = {**per, **{k: [*per.get(k, []), v] for k, v in extra.items()}}
    flat = _flatten(declared)
    flat.update({k: float(np.median(v)) for k, v in per.items()})
    return _nest(flat, digits=1)
