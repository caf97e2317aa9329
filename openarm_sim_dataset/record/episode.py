"""An episode being recorded (:class:`Episode`, made by :meth:`.recorder.Recorder.start_episode`):
the control side of ``add_obs``/``add_action``/``add_frame``, which only copy into the shared-memory
ring (:mod:`.ring`), the stale-camera rule, and the episode's end (stop, save, discard).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from openarm_sim_dataset.core import layout

from .errors import EpisodeDiscarded, RecordError
from .ring import put_frame

if TYPE_CHECKING:
    from .recorder import Recorder


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
    (a driver's callback); see :mod:`openarm_sim_dataset.record` for what they cost and when they drop.
    Once the episode is stopped, saved or discarded they store nothing and return False (a camera
    thread may race the end)."""

    def __init__(self, rec: Recorder, episode_id: str, task_index: int):
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

    @property
    def discarded(self) -> bool:
        """True once the episode is discarded (by :meth:`discard`, a stale camera or a write failure)."""
        return self.reason is not None

    def __repr__(self) -> str:
        state = "saved" if self.saved else (f"discarded: {self.reason}" if self.reason else "recording")
        return f"Episode({self.id!r}, {state})"

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
        stored = put_frame(p, image, nbytes, ts, cam.key) if put_frame is not None and not shape else NotImplemented
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
