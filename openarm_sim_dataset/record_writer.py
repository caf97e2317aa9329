"""The live recorder's writer process (the disk side of :mod:`.record`).

:class:`.record.Recorder` starts one such process per recorder. The control process only copies a
sample into a shared-memory ring (:class:`Ring`, filled through a :class:`Producer`): a frame (JPEG
bytes or an RGB array) with a descriptor in the shared memory, a block of state rows or an episode
file with a short message (a few dozen bytes: op, episode id, where in the ring) written into a
non-blocking pipe. This process reads the messages and the descriptors in the order they were sent
(each message carries the count of descriptors published before it), encodes array frames (a thread
pool), writes parquet row groups and frame files, applies the identical-frames rule, commits or
discards episodes with the protocol of :mod:`.writer`, and advances the ring's tail past every item
it has finished with. Replies (a commit's result, an episode it discarded by itself) go back on a
second pipe, read by a thread of the control process.

It holds a duplicate of the recorder's lock (same open file description), so the dataset stays
locked while it runs even if the control process died; a control process that dies (end of file on
the message pipe) makes it exit at once **without** touching metadata.yaml: the episode it had open
stays a temporary folder that the next recorder removes, its id reused (it was never listed).

Message framing: 4-byte little-endian length (+ to this process, the int64 count of frame
descriptors published before it) + pickle, every message at most ``PIPE_BUF`` bytes so
that a non-blocking write is all or nothing (POSIX), which is what makes the pipe itself the bounded
queue: a full pipe refuses the message and the sample is counted as dropped.
"""

from __future__ import annotations

import copy
import hashlib
import io
import math
import mmap
import os
import pickle
import platform
import queue
import struct
import threading
import time
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from threading import get_ident

import numpy as np

from . import layout
from .atomic import remove_tree
from .camera import FrameWriter
from .errors import DatasetError
from .metadata import Metadata
from .writer import StreamWriter, begin_episode, close_log, finish_episode, remove_uncommitted

#: metadata.yaml key listing discarded episodes (id and reason): their ids are never used again.
DISCARDED_KEY = "discarded_episodes"
#: Bytes at the start of the shared memory, int64 words: the tail (bytes released by the writer,
#: monotonic), frames published by the control process, frames taken by the writer (both counts).
HEADER = 64
TAIL, PUBLISHED, TAKEN = 0, 1, 2
#: A frame's descriptor after the header, int64 words: stamp, ring position, bytes, key (episode << 16 |
#: camera) and shape (height << 32 | width of an RGB array the writer encodes; 0 for encoded bytes).
DESCRIPTOR_WORDS = 5
#: How frame descriptors are published. On x86 by storing their count in the shared memory (no system
#: call in ``add_frame``): the writer polls it and reads a descriptor once the count covers it, which
#: needs the stores (frame bytes, descriptor, count) to become visible in program order, as x86's
#: memory model guarantees. Elsewhere (ARM's stores may be seen out of order, and Python has no memory
#: barrier) the count goes in a pipe message, whose write and read order them.
SHARED_DESCRIPTORS = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
try:  # the compiled frame put (built with the package where a C compiler is found; optional)
    from . import _ringput
except ImportError:  # pragma: no cover - the Python put() is the same steps
    _ringput = None
#: ``put_frame(producer, data, nbytes, ts, key)``: :meth:`Producer.put` of one frame of encoded bytes
#: in one compiled call (True / False as put()), or NotImplemented where put() must do it (a turn held,
#: descriptors not shared, not a simple buffer); None without the compiled module or with
#: ``OPENARM_RECORD_PURE_PYTHON=1`` (the reference path, which tests compare it with)
put_frame = None
if _ringput is not None and os.environ.get("OPENARM_RECORD_PURE_PYTHON", "") != "1":
    _ringput.configure(HEADER // 8, TAIL, PUBLISHED, TAKEN, DESCRIPTOR_WORDS)
    put_frame = _ringput.put_frame
#: Largest message (length prefix included): a pipe write of at most PIPE_BUF bytes is atomic.
MAX_MESSAGE = 4096
_LEN = struct.Struct("<I")
#: A request's prefix (control process -> writer): length, then the frames published when it was sent.
_REQUEST = struct.Struct("<Iq")


class Ring:
    """Bytes waiting for the writer: ``capacity`` bytes of shared memory after a :data:`HEADER` and
    ``slots`` frame descriptors.

    Positions are monotonic byte counts (``pos % capacity`` is the offset). The control process's
    :class:`Producer` owns ``head``; the writer stores ``tail`` (everything before it is free) in the
    header after each item, in order. An item never wraps: one that does not fit before
    the end starts at the next lap (the skipped bytes count as pending until the tail passes them).
    ``words`` (the header and the descriptors as int64) is a memoryview: reading or storing one of
    its items is a few C instructions where numpy's indexing is a long path (cold after the control
    loop's sleep, ~10 us).
    """

    def __init__(self, fd: int, capacity: int, slots: int):
        self.capacity, self.slots = capacity, slots
        self.offset = HEADER + DESCRIPTOR_WORDS * 8 * slots  # of the data, in the shared memory
        # populated at once: a first touch of a shared-memory page costs ~5 us (allocation, zeroing),
        # i.e. ~150 us for a 640x480 JPEG in add_frame; mapped in advance it is a plain copy
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        self.mm = mmap.mmap(fd, self.offset + capacity, flags=flags)
        self._whole = memoryview(self.mm)
        self.words = self._whole[:self.offset].cast("q")
        self.data = np.frombuffer(self.mm, dtype=np.uint8, offset=self.offset)

    @property
    def tail(self) -> int:
        return self.words[TAIL]

    def view(self, pos: int, nbytes: int) -> np.ndarray:
        off = pos % self.capacity
        return self.data[off:off + nbytes]

    def close(self) -> None:
        self.words.release()
        self._whole.release()
        self.words = self.data = None  # type: ignore[assignment]
        try:
            self.mm.close()
        except BufferError:  # a view still exported (a frame being encoded): freed with the process
            pass


class Producer:
    """The control process's side of a :class:`Ring`: it puts every item (frames from the control
    thread or camera threads, rows from the control thread, episode files) with :meth:`put`, and
    knows where the next one goes (``head``), the frame descriptors published and what is pending.

    One thread at a time puts: a thread appends its id to ``turns`` and waits until it is the first
    (a list's append and indexing are atomic, and a few C instructions, where ``threading.Lock`` spends
    ~5 us more on a cold CPU; an exception at any instruction leaves no stale id). Messages to the
    writer are ordered by the recorder's ``send_lock``, taken before a turn, never while holding one.

    The first ``put`` after the control loop's sleep runs with its code and data out of the CPU's
    caches, where every Python call, object or C function it touches costs microseconds: hence slots,
    one method with everything inline, and a frame published by stores into the shared memory, with
    no message and no system call (:data:`SHARED_DESCRIPTORS`)."""

    __slots__ = ("ring", "mm", "words", "capacity", "data", "slots", "desc_end", "send_lock", "msg_fd", "shared",
                 "turns", "head", "floor", "published", "desc", "frame_limit", "peak", "open")

    def __init__(self, ring: Ring, send_lock: threading.Lock, msg_fd: int, max_pending_bytes: int, peak: int = 0):
        self.ring, self.mm, self.words = ring, ring.mm, ring.words
        self.capacity, self.data, self.slots = ring.capacity, ring.offset, ring.slots
        self.desc_end = HEADER // 8 + DESCRIPTOR_WORDS * ring.slots
        self.send_lock, self.msg_fd, self.shared = send_lock, msg_fd, SHARED_DESCRIPTORS
        self.turns: list[int] = []  # ids of the threads putting an item: the first one's turn
        self.head = self.floor = self.published = 0
        self.desc = HEADER // 8  # the next descriptor's first word
        self.frame_limit = min(max_pending_bytes, ring.capacity)
        self.peak = peak  # most bytes pending after an item was put (kept across writers)
        self.open = True  # False once the writer is stopped or died: nothing is put then

    def put(self, data, nbytes: int, limit: int, head: tuple | None, ts: int = 0, key: int = 0,
            shape: int = 0) -> bool:
        """Copy ``nbytes`` of ``data`` (a contiguous buffer; with ``shape``, height << 32 | width, an RGB
        array, any strides) into the ring, and announce it: with ``head`` None a frame (stamp ``ts``,
        ``key``: episode id << 16 | camera) by a descriptor in the shared memory, else by the message
        ``head + (position, nbytes)`` (the caller holds ``send_lock``). False, nothing kept, if that would
        make more than ``limit`` bytes pending (at most ``capacity``), the frame descriptors or the pipe
        are full, or the writer is gone.

        An item never wraps: one that does not fit before the end starts the next lap. And when the
        writer has released everything (tail == head) the next item starts the next lap too: the
        items then reuse the ring's first bytes, which are still in the CPU's caches and TLB (the
        writer read them a moment ago), instead of walking through ``capacity`` bytes of cold memory
        (a 116 KiB frame into cold memory: p50 10.6 / p99 61 us; into the ring's start: 7.4 / 32 us).
        The bytes skipped then are free: ``floor`` keeps them out of the pending count."""
        me = get_ident()
        turns = self.turns
        stored = False
        try:
            turns.append(me)
            if turns[0] != me:
                self._wait(me)
            words = self.words
            if self.open and (head is not None or self.published - words[TAKEN] < self.slots):
                size = (nbytes + 7) & ~7  # items start 8-byte aligned (the writer views int64 stamps in place)
                cap, tail, floor = self.capacity, words[TAIL], self.floor
                start = self.head
                off = start % cap
                if off and (off + size > cap or start == tail):
                    if start == tail:
                        floor = start + cap - off
                    start += cap - off
                    off = 0
                base = tail if tail > floor else floor
                if start + size - base <= limit:
                    if shape:
                        self.ring.data[off:off + nbytes].reshape(data.shape)[...] = data
                    else:
                        off += self.data
                        self.mm[off:off + nbytes] = data  # the mmap's own slice assignment: a memcpy
                    # the head moves before the item is announced: an exception in between (an async one
                    # after any call) then loses its bytes, never lets the next item overwrite them
                    end = start + size
                    if head is None:
                        self.head, self.floor = end, floor
                        d = self.desc
                        words[d] = ts
                        words[d + 1] = start
                        words[d + 2] = nbytes
                        words[d + 3] = key
                        words[d + 4] = shape
                        self.desc = d + DESCRIPTOR_WORDS if d + DESCRIPTOR_WORDS < self.desc_end else HEADER // 8
                        self.published += 1
                        if self.shared:
                            words[PUBLISHED] = self.published  # after the descriptor (stores stay in order: x86)
                        stored = True
                        if not self.shared:
                            self._announce()
                    else:
                        prev = self.head, self.floor
                        self.head, self.floor = end, floor
                        try:  # all or nothing (at most PIPE_BUF bytes)
                            os.write(self.msg_fd, pack_request((*head, start, nbytes), self.published))
                            stored = True
                        except (BlockingIOError, BrokenPipeError):  # full; or died: the reply thread reports it
                            self.head, self.floor = prev  # not sent, not kept
                    if stored and end - base > self.peak:
                        self.peak = end - base
            elif self.open and not self.shared:
                self._announce()  # descriptors full: the writer may not know yet of the frames in them
        except BaseException:
            if me in turns:
                turns.remove(me)
            raise
        del turns[0]  # (no call between the try and this: nothing can interrupt it)
        return stored

    def _wait(self, me: int) -> None:
        """Until it is the turn of thread ``me`` (another one is copying an item: microseconds)."""
        while self.turns[0] != me:
            time.sleep(20e-6)

    def __enter__(self) -> "Producer":
        """The turn, for the control process's other uses of the ring (not :meth:`put`'s hot path)."""
        me = get_ident()
        try:
            self.turns.append(me)
            self._wait(me)
        except BaseException:
            if me in self.turns:
                self.turns.remove(me)
            raise
        return self

    def __exit__(self, *exc) -> None:
        del self.turns[0]

    def _announce(self) -> None:
        """Tell the writer how many descriptors are published, by a message (where the count is not
        shared: :data:`SHARED_DESCRIPTORS`). If another thread holds ``send_lock`` (never wait for it
        during a turn: it is taken before one), or the pipe is full, a later message says it."""
        if self.send_lock.acquire(False):
            try:
                os.write(self.msg_fd, pack_request(("published",), self.published))
            except (BlockingIOError, BrokenPipeError):
                pass
            finally:
                self.send_lock.release()

    def pending(self) -> int:
        """Bytes put that the writer has not released (those skipped to start a lap excluded)."""
        with self:
            return 0 if self.ring.words is None else self.head - max(self.words[TAIL], self.floor)

    def close(self) -> None:
        """Nothing is put from now on; the ring is unmapped once the item being copied (if any) is."""
        with self:
            self.open = False
            self.ring.close()


def ring_size(capacity: int, slots: int) -> int:
    return HEADER + DESCRIPTOR_WORDS * 8 * slots + capacity


def make_ring_fd(capacity: int, slots: int) -> int:
    """An anonymous shared-memory file of the ring's size (memfd: nothing to clean up after a kill)."""
    fd = os.memfd_create("openarm-recorder-ring", os.MFD_CLOEXEC)
    os.ftruncate(fd, ring_size(capacity, slots))
    return fd


def pack(msg: tuple) -> bytes:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


def pack_request(msg: tuple, published: int) -> bytes:
    """A message to the writer process, with the count of frame descriptors published before it: the
    writer takes those frames first, so frames and messages keep the order they were sent in."""
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return _REQUEST.pack(len(data), published) + data


def read_message(f) -> tuple | None:
    """Next framed message of binary file ``f``; None at end of file."""
    head = f.read(4)
    if len(head) < 4:
        return None
    (n,) = _LEN.unpack(head)
    data = f.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


class PollingReader:
    """Reads the message pipe without waiting in ``read``: :meth:`fill` takes what the pipe holds, the
    writer sleeps ``POLL_S`` when there was nothing (up to ``POLL_MAX_S`` while idle), so that the
    control loop's write never has to wake this process. Waking a reader blocked on a pipe costs the
    writing side the most: on a 2-core
    VM the first write after a 4 ms sleep took p50 16 / p99 65 us with a blocked reader and 8.7 / 23 us
    with a polling one. ``tools/bench_record.py``, three runs, the two readers in the same run: late
    ticks of the 250 Hz loop 0.71x / 0.96x / 3.23x of the loop without a recorder (blocking: 1.86x /
    2.16x / 3.46x), ``add_frame`` p99 173 / 186 / 189 us (blocking: 191 / 280 / 265 us)."""

    POLL_S = 0.002
    POLL_MAX_S = 0.02

    def __init__(self, fd: int):
        import select

        self.fd, self.buf, self._select = fd, bytearray(), select.select

    def fill(self) -> bool:
        """Take what the pipe holds now, without waiting; False once the other side closed it."""
        while self._select([self.fd], [], [], 0)[0]:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def request(self) -> tuple[int, tuple] | None:
        """The next whole request taken (:func:`pack_request`: frames published before it, message),
        or None."""
        if len(self.buf) < _REQUEST.size:
            return None
        n, published = _REQUEST.unpack_from(self.buf)
        if len(self.buf) < _REQUEST.size + n:
            return None
        msg = pickle.loads(self.buf[_REQUEST.size:_REQUEST.size + n])
        del self.buf[:_REQUEST.size + n]
        return published, msg


class _WEpisode:
    """Writer-side state of one episode."""

    def __init__(self, episode_id: str, stale_ns: int | None):
        self.id = episode_id
        self.stale_ns = stale_ns
        self.reason: str | None = None
        self.tmp: Path | None = None
        self.streams: dict[tuple[str, str], StreamWriter] = {}
        self.frames: dict[str, FrameWriter] = {}
        self.rates: dict = {}
        self.prev: dict[str, tuple[bytes, int]] = {}  # camera -> (last JPEG, stamp its identical run began)
        self.known: dict[str, tuple] = {}  # camera -> (stamps, sizes, sha256 digests) of frames written
        self.spans: dict[str, list[int]] = {}  # state stream -> [first, last] stamp stored
        self.gone = False


def writer_main(root: str, camera_format: str, capacity: int, slots: int, stale_after_s: float | None,
                encoder_threads: int, jpeg_quality: int, lock_fd: int, ring_fd: int, msg_fd: int,
                reply_fd: int) -> None:
    """Body of the writer process."""
    _yield_to_the_caller()
    _Writer(Path(root), camera_format, capacity, slots, stale_after_s, encoder_threads, jpeg_quality,
            lock_fd, ring_fd, msg_fd, reply_fd).run()


def _yield_to_the_caller() -> None:
    """The writer is woken by every message of the control loop; at the same priority the kernel
    would often run it at once, preempting the loop that just woke it (the tail of ``add_frame``
    latency on a busy machine). SCHED_BATCH (no wake-up preemption) and nice :data:`WRITER_NICE`
    leave the CPU to the loop; the writer catches up in the loop's sleeps (the ring absorbs it)."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        os.nice(int(os.environ.get("OPENARM_RECORDER_WRITER_NICE", WRITER_NICE)))
    except (OSError, ValueError):
        pass


#: niceness added to the writer process (OPENARM_RECORDER_WRITER_NICE overrides)
WRITER_NICE = 5


# ------------------------------------------------------------------------------ zygote
# Why not multiprocessing: its spawn and forkserver methods re-import the caller's __main__ script
# in the child (an unguarded script would run again), and fork copies the caller's threads' state
# (GL contexts, locks held by camera threads). The zygote is a clean interpreter started once per
# control process (~1 s: numpy, pyarrow imported), forking a writer in a few ms per recorder.

class Zygote:
    """Control-process handle of the zygote (``python -m openarm_sim_dataset.record_writer``)."""

    def __init__(self):
        import socket
        import subprocess
        import sys

        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pkg_root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (pkg_root, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen([sys.executable, "-m", "openarm_sim_dataset.record_writer", str(child.fileno())],
                                     pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
        child.close()
        self.sock = parent
        self.pid = os.getpid()  # a forked caller starts its own zygote
        self.lock = threading.Lock()
        self.file = parent.makefile("rb")
        import atexit

        atexit.register(self.close)

    def close(self) -> None:
        """End the zygote (end of file on its socket); writers still running end on their own."""
        self.file.close()
        self.sock.close()
        try:
            self.proc.wait(5)
        except Exception:  # noqa: BLE001 - at exit: never hang
            self.proc.kill()

    def alive(self) -> bool:
        return self.pid == os.getpid() and self.proc.poll() is None

    def _ask(self, msg: tuple, fds: list[int] = ()) -> tuple:
        import socket

        data = pack(msg)
        with self.lock:
            socket.send_fds(self.sock, [data], list(fds)) if fds else self.sock.sendall(data)
            reply = read_message(self.file)
        if reply is None:
            raise OSError(f"the recorder's zygote process exited (code {self.proc.poll()})")
        return reply

    def fork_writer(self, args: tuple, fds: list[int]) -> int:
        """Fork a writer running ``writer_main(*args, *fds)``; its pid."""
        return self._ask(("fork", args), fds)[1]

    def wait(self, pid: int) -> int:
        """Exit status of writer ``pid`` once it ended (waits): a negative signal number if killed."""
        return self._ask(("wait", pid))[1]


_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def zygote() -> Zygote:
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            _ZYGOTE = Zygote()
        return _ZYGOTE


def _zygote_main(fd: int) -> None:
    import socket

    import pyarrow.parquet  # noqa: F401 - imported once here, not in every writer
    from PIL import Image  # noqa: F401

    from . import record  # noqa: F401

    sock = socket.socket(fileno=fd)
    status: dict[int, int] = {}
    buf = b""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
        except OSError:
            data = b""
        if not data:
            os._exit(0)  # the control process is gone; the writers end on their own pipes
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + _LEN.unpack(buf[:4])[0]:
            n = _LEN.unpack(buf[:4])[0]
            msg, buf = pickle.loads(buf[4:4 + n]), buf[4 + n:]
            if msg[0] == "fork":
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    try:
                        writer_main(*msg[1], *fds)
                    except BaseException:  # noqa: BLE001 - a bug: shown on stderr, the caller sees the exit
                        import traceback

                        traceback.print_exc()
                    finally:
                        os._exit(1)
                for f in fds:
                    os.close(f)
                fds = []
                sock.sendall(pack(("pid", pid)))
            elif msg[0] == "wait":
                pid = msg[1]
                if pid not in status:
                    _, st = os.waitpid(pid, 0)
                    status[pid] = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
                sock.sendall(pack(("status", status.pop(pid))))


class _Writer:
    def __init__(self, root: Path, camera_format: str, capacity: int, slots: int, stale_after_s,
                 encoder_threads: int, jpeg_quality: int, lock_fd: int, ring_fd: int, msg_fd: int, reply_fd: int):
        self.root = root
        self.camera_format = camera_format
        self.stale_after_s = stale_after_s
        self.jpeg_quality = jpeg_quality
        self.lock_fd = lock_fd  # kept open: the dataset stays locked while this process lives
        self.ring = Ring(ring_fd, capacity, slots)
        os.close(ring_fd)
        self.taken = 0  # frame descriptors taken (the count the control process reads back)
        self.cameras: dict[int, tuple[str, ...]] = {}  # episode id -> its cameras (a descriptor's key)
        self.msgs = PollingReader(msg_fd)
        self.reply_fd = reply_fd
        self.reply_lock = threading.Lock()
        self.encoder = ThreadPoolExecutor(max(1, encoder_threads), thread_name_prefix="openarm-recorder-jpeg")
        self.episodes: dict[str, _WEpisode] = {}
        self.work: queue.SimpleQueue = queue.SimpleQueue()
        self.meta: Metadata | None = None
        self._sent = 0  # entries the control process has (see mirror)
        self._rates: dict[str, list[float]] | None = None  # measured Hz of the listed episodes, per stream

    # ------------------------------------------------------------------ plumbing
    def mirror(self) -> tuple:
        """What the control process needs to mirror metadata.yaml: the document without its entries and
        the entries listed since the last reply (constant size per commit, whatever the dataset's)."""
        eps = self.meta.episodes
        new = copy.deepcopy(eps[self._sent:])
        self._sent = len(eps)
        return ("delta", copy.deepcopy({k: v for k, v in self.meta.data.items() if k != "episodes"}), new)

    def reply(self, msg: tuple) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        with self.reply_lock:
            _write_all(self.reply_fd, _LEN.pack(len(data)) + data)

    def release(self, pos: int, nbytes: int) -> None:
        self.ring.words[TAIL] = pos + ((nbytes + 7) & ~7)  # items finish in ring order (8-byte aligned)

    def run(self) -> None:
        try:
            self.meta = Metadata.load(self.root)
            removed = remove_uncommitted(self.root, self.meta)
            self._sent = len(self.meta.episodes)
            self.reply(("ready", copy.deepcopy(self.meta.data), [str(p) for p in removed]))
        except BaseException as e:  # noqa: BLE001 - reported to the control process, which raises it
            self.reply(("ready", None, f"{type(e).__name__}: {e}"))
            return
        writer = threading.Thread(target=self.write_loop, name="openarm-recorder-disk", daemon=True)
        writer.start()
        pause = PollingReader.POLL_S
        while True:
            # the published count first: every request sent before those frames is in the pipe then
            published = self.ring.words[PUBLISHED]
            alive = self.msgs.fill()
            busy = False
            while True:
                try:
                    req = self.msgs.request()
                except Exception:  # noqa: BLE001 - a torn message: the control process died mid-write
                    os._exit(0)
                if req is None:
                    break
                busy = True
                self.take_frames(req[0])
                self.take(req[1], writer)
            busy = self.take_frames(published) or busy
            if not alive:  # the control process is gone: leave the open episode for the next recorder
                os._exit(0)
            if busy:
                pause = PollingReader.POLL_S
            else:
                time.sleep(pause)
                pause = min(2 * pause, PollingReader.POLL_MAX_S)

    def take(self, msg: tuple, writer: threading.Thread) -> None:
        """Queue a request for the disk thread."""
        op = msg[0]
        if op == "published":  # only its count of frame descriptors (Producer._announce)
            return
        if op == "open":
            self.cameras[int(msg[1])] = msg[3]
        self.work.put(msg)
        if op == "stop":
            writer.join()
            self.encoder.shutdown()
            os._exit(0)

    def take_frames(self, upto: int) -> bool:
        """Queue the frames of the descriptors published before count ``upto`` (an RGB array's encoding
        starts in the pool: written in order); whether there were any."""
        words, slots = self.ring.words, self.ring.slots
        i = self.taken
        if i >= upto:
            return False
        while i < upto:
            at = HEADER // 8 + DESCRIPTOR_WORDS * (i % slots)
            ts, pos, nbytes, key, shape = words[at:at + DESCRIPTOR_WORDS].tolist()
            i += 1
            words[TAKEN] = i  # its slot is free again
            episode = key >> 16
            cameras = self.cameras.get(episode, ())
            camera = cameras[key & 0xFFFF] if (key & 0xFFFF) < len(cameras) else None
            payload = None
            if shape:
                rgb = self.ring.view(pos, nbytes).reshape(shape >> 32, shape & 0xFFFFFFFF, 3)
                payload = self.encoder.submit(_encode_jpeg, rgb, self.jpeg_quality)
            self.work.put(("frame", str(episode), camera, ts, payload, pos, nbytes))
        self.taken = i
        return True

    # ------------------------------------------------------------------ disk thread
    def write_loop(self) -> None:
        while True:
            item = self.work.get()
            op = item[0]
            if op == "stop":
                try:
                    close_log(self.root, self.meta)  # the journal folded into metadata.yaml
                except BaseException:  # noqa: BLE001 - the journal stays, and the next recorder folds it
                    pass
                return
            ep = self.episodes.get(item[1])
            try:
                if op == "open":
                    ep = self.episodes[item[1]] = _WEpisode(item[1], item[2])  # item[3]: its cameras (run)
                    ep.tmp = begin_episode(self.root, ep.id)
                elif op == "rows":
                    self.rows(ep, item)
                elif op == "frame":
                    self.frame(ep, item)
                elif op == "file":
                    self.file(ep, item)
                elif op == "commit":
                    res = self.commit(ep, item[2])
                    self.episodes.pop(item[1], None)
                    self.reply(("done", item[3], res, None, self.mirror()))
                elif op == "set":
                    d = self.meta.data
                    for k in item[2][:-1]:
                        if not isinstance(d.get(k), dict):
                            d[k] = {}
                        d = d[k]
                    d[item[2][-1]] = item[3]
                    self.meta.write(self.root)
                    self.reply(("done", item[4], None, None, self.mirror()))
                elif op == "discard":
                    self.discard(ep, item[1], item[2])
                    self.episodes.pop(item[1], None)
                    if item[3] is not None:
                        self.reply(("done", item[3], None, None, self.mirror()))
            except BaseException as e:  # noqa: BLE001 - any failure ends the episode, never the process
                reason = f"write failed: {e}" if isinstance(e, DatasetError) else f"write failed: {type(e).__name__}: {e}"
                if ep is not None and ep.reason is None:
                    ep.reason = reason
                if ep is not None:
                    try:
                        self.discard(ep, ep.id, ep.reason)
                    except BaseException as e2:  # noqa: BLE001
                        ep.reason += f"; removing it failed too: {e2}"
                if op in ("commit", "discard", "set") and item[-1] is not None:
                    self.reply(("done", item[-1], None, reason if op != "discard" else None,
                                self.mirror()))
                elif ep is not None:
                    self.reply(("discarded", ep.id, ep.reason, self.mirror()))
            finally:
                if op in ("rows", "frame", "file"):  # (..., ring position, bytes)
                    self.release(item[-2], item[-1])

    def rows(self, ep: _WEpisode | None, item: tuple) -> None:
        _, _, kind, embodiment, component, name, attrs, n, width, pos, nbytes = item
        if ep is None or ep.gone:
            return
        buf = self.ring.view(pos, nbytes)
        ts = buf[:8 * n].view(np.int64)
        values = {}
        off = 8 * n
        for a in attrs:
            values[a] = buf[off:off + 4 * n * width].view(np.float32).reshape(n, width)
            off += 4 * n * width
        key = (kind, name)
        w = ep.streams.get(key)
        if w is None:
            from .record import _RateMeter

            w = ep.streams[key] = StreamWriter(ep.tmp, kind, embodiment, component, attrs)
            ep.rates[name] = _RateMeter()
        w.write(ts, values)
        ep.rates[name].add(ts.copy())
        if n:
            span = ep.spans.setdefault(name, [int(ts[0]), int(ts[-1])])
            span[1] = int(ts[-1])

    def frame(self, ep: _WEpisode | None, item: tuple) -> None:
        _, _, camera, ts, payload, pos, nbytes = item
        if isinstance(payload, Future):
            payload = payload.result()
        else:
            payload = self.ring.view(pos, nbytes).tobytes()
        if ep is None or ep.gone:
            return
        prev = ep.prev.get(camera)
        if prev is not None and prev[0] == payload:
            run_start = prev[1]
            if ep.stale_ns is not None and ts - run_start > ep.stale_ns:
                if ep.reason is None:
                    ep.reason = (f"camera {camera!r} sent identical frames for {(ts - run_start) / 1e9:.3f} s "
                                 f"(from {run_start} to {ts} ns; limit {self.stale_after_s:g} s)")
                self.discard(ep, ep.id, ep.reason)
                self.reply(("discarded", ep.id, ep.reason, self.mirror()))
                return
        else:
            run_start = ts
        ep.prev[camera] = (payload, run_start)
        w = ep.frames.get(camera)
        if w is None:
            from .record import _RateMeter

            name = layout.check_name(camera, "camera name")
            path = ep.tmp / layout.CAMERAS_DIR / (name + (layout.TAR_SUFFIX if self.camera_format == "tar" else ""))
            w = ep.frames[camera] = FrameWriter(path, self.camera_format)
            ep.rates["cameras/" + camera] = _RateMeter()
        w.write(ts, payload)
        if w.format == "dir":  # hashed now, while in memory: the manifest need not read it back
            stamps, sizes, digests = ep.known.setdefault(camera, (array("q"), array("q"), bytearray()))
            stamps.append(ts)
            sizes.append(len(payload))
            digests += hashlib.sha256(payload).digest()
        ep.rates["cameras/" + camera].add(np.array([ts], dtype=np.int64))

    def file(self, ep: _WEpisode | None, item: tuple) -> None:
        _, _, relpath, pos, nbytes = item
        if ep is None or ep.gone:
            return
        folder, name = relpath.split("/")  # checked by Episode.add_file
        path = ep.tmp / layout.check_name(folder, "episode folder") / layout.check_name(name, "episode file name")
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(self.ring.view(pos, nbytes))  # made durable with the episode at commit

    def close_files(self, ep: _WEpisode) -> None:
        for w in [*ep.streams.values(), *ep.frames.values()]:
            w.close()
        ep.streams, ep.frames = {}, {}

    def discard(self, ep: _WEpisode | None, episode_id: str, reason: str) -> None:
        """Remove the episode's files and record its id under ``discarded_episodes:`` (also for an
        episode this process never saw: one a killed writer left, removed on start)."""
        if ep is not None:
            if ep.gone:
                return
            ep.gone = True
            ep.prev, ep.known = {}, {}
        try:
            if ep is not None:
                self.close_files(ep)
        finally:
            if ep is not None and ep.tmp is not None:
                remove_tree(ep.tmp)
            if reason is None:  # cancelled: the id is free again, nothing recorded
                return
            if episode_id in self.meta.episode_ids or \
                    any(str(d.get("id")) == episode_id for d in self.meta.data.get(DISCARDED_KEY) or []):
                return  # listed (its commit completed before a crash) or recorded already
            self.meta.data.setdefault(DISCARDED_KEY, []).append({"id": episode_id, "reason": reason})
            self.meta.write(self.root)

    def commit(self, ep: _WEpisode | None, entry: dict) -> tuple | None:
        from .record import _dataset_frequencies, _flatten, _manifest_entries, _measured_rates, _nest

        if ep is None or ep.gone:
            return None
        rows = {name: w.rows for (_kind, name), w in ep.streams.items()}  # stored (dropped blocks excluded)
        trimmed = self.trim_frames(ep)
        frames = {camera: w.frames for camera, w in ep.frames.items()}
        self.close_files(ep)
        measured = _nest({k: m.hz() for k, m in ep.rates.items()}, digits=3)
        entry = dict(entry)
        if trimmed:
            entry["trimmed_frames"] = trimmed
        if measured:
            entry["measured_hz"] = measured
        old = copy.deepcopy(self.meta.data.get("frequencies"))
        if self._rates is None:  # every listed episode's measured rates, kept per stream (once)
            self._rates = _measured_rates(self.meta.episodes)
        mine = _flatten(measured or {})
        self.meta.data["frequencies"] = _dataset_frequencies(old or {}, self._rates, mine)
        try:
            finish_episode(self.root, self.meta, entry, ep.tmp, known=_manifest_entries(ep.known))
        except BaseException:
            self.meta.data["frequencies"] = old
            raise
        for k, v in mine.items():
            self._rates.setdefault(k, []).append(v)
        ep.gone = True
        return entry, rows, frames

    def trim_frames(self, ep: _WEpisode) -> dict[str, int]:
        """Remove the frames stamped outside the state streams' span (``layout.camera_window``), which
        the validator's ``camera_span`` check rejects: a camera's last frames arrive after the arms'
        last samples when an episode ends. Returns camera -> frames removed (cameras that lost some)."""
        spans = []
        for name, (first, last) in ep.spans.items():
            hz = ep.rates[name].hz()
            spans.append((first, last, 1e9 / hz if hz else 0.0))
        if not spans or not ep.frames:
            return {}
        lo, hi = layout.camera_window(spans)
        lo, hi = math.ceil(lo), math.floor(hi)
        trimmed = {}
        for camera, w in ep.frames.items():
            n = w.trim(lo, hi)
            if not n:
                continue
            trimmed[camera] = n
            if camera in ep.known:
                stamps, sizes, digests = ep.known[camera]
                ts = np.frombuffer(stamps, dtype=np.int64)
                a, b = int(np.searchsorted(ts, lo, side="left")), int(np.searchsorted(ts, hi, side="right"))
                ep.known[camera] = (stamps[a:b], sizes[a:b], digests[32 * a:32 * b])
        return trimmed


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


if __name__ == "__main__":  # the zygote: python -m openarm_sim_dataset.record_writer <socket fd>
    import sys

    from openarm_sim_dataset import record_writer as _module  # one copy of this module, not __main__'s

    _module._zygote_main(int(sys.argv[1]))
