"""The live recorder's client API: :class:`Recorder` opens (or resumes) a dataset, starts its writer
process and the episodes (:class:`.episode.Episode`), and is the control side of the pipes to that
process (messages, replies, a writer that died)."""

from __future__ import annotations

import copy
import fcntl
import os
import select
import signal
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core.writer import CAMERA_FORMATS

from .episode import Episode
from .errors import RecordError
from .messages import pack_request, read_message
from .open_dataset import acquire_lock, open_metadata
from .ring import DESCRIPTOR_WORDS, Producer, Ring, make_ring_fd
from .writer_process import DISCARDED_KEY
from .zygote import WriterProcess, zygote

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class Recorder:
    """Records episodes into the 0.4.0 dataset ``out`` (created, or resumed: see the package doc,
    :mod:`openarm_sim_dataset.record`).

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
        self._producer = None  # the ring's control side (ring.Producer) while a writer runs
        self._episode: Episode | None = None
        self._saving: dict[str, Episode] = {}  # episodes stopped and not listed yet (waiting, or committing)
        self._closed = False
        self._proc = None
        self._lock = acquire_lock(self.root)
        try:
            self.meta = open_metadata(self.root, metadata, self.camera_format)
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

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start_writer(self) -> None:
        """Start a writer process (also after one died): it reloads metadata.yaml, removes what is not
        listed, and replies with the metadata it found."""
        capacity = 2 * self.max_pending_bytes
        slots = max(1, self.pipe_bytes // (DESCRIPTOR_WORDS * 8))  # frame descriptors: the pipe's bound, in shared memory
        ring_fd = make_ring_fd(capacity, slots)
        msg_r, msg_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            try:
                fcntl.fcntl(msg_w, F_SETPIPE_SZ, self.pipe_bytes)  # 1 MiB: ~10k messages before drops
            except OSError:
                pass
            os.set_blocking(msg_w, False)
            zyg = zygote()
            args = (str(self.root), self.camera_format, capacity, slots, self.stale_after_s, self.encoder_threads,
                    self.jpeg_quality, os.getcwd())
            proc = WriterProcess(zyg, zyg.fork_writer(args, [self._lock.fd, ring_fd, msg_r, rep_w]))
            ring = Ring(ring_fd, capacity, slots)
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
        self._producer = Producer(ring, self._send_lock, msg_w, self.max_pending_bytes, peak=self._peak)
        self._replies = os.fdopen(rep_r, "rb")
        self._futures: dict[int, Future] = {}
        self._req = 0
        ready = read_message(self._replies)
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
        return pack_request(msg, self._producer.published)

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
