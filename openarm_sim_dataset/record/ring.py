"""The shared-memory ring between a recorder's control process and its writer process.

The control process only copies a sample into the ring (:class:`Ring`, filled through a
:class:`Producer`): a frame (JPEG bytes or an RGB array) with a descriptor in the shared memory, a
block of state rows or an episode file with a short message (:mod:`.messages`: op, episode id, where
in the ring) written into a non-blocking pipe. The writer process (:mod:`.writer_process`) advances
the ring's tail past every item it has finished with. One frame of encoded bytes is put by one
compiled call where the package was built with a C compiler (:data:`put_frame`,
``openarm_sim_dataset/_ringput.c``); :meth:`Producer.put` is the reference it follows step for step.
"""

from __future__ import annotations

import mmap
import os
import platform
import threading
import time
from threading import get_ident

import numpy as np

from .messages import pack_request

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
    from openarm_sim_dataset._ringput import configure as compiled_configure, put_frame as compiled_put_frame
except ImportError:  # pragma: no cover - the Python put() is the same steps
    compiled_configure = compiled_put_frame = None
#: ``put_frame(producer, data, nbytes, ts, key)``: :meth:`Producer.put` of one frame of encoded bytes
#: in one compiled call (True / False as put()), or NotImplemented where put() must do it (a turn held,
#: descriptors not shared, not a simple buffer); None without the compiled module or with
#: ``OPENARM_RECORD_PURE_PYTHON=1`` (the reference path, which tests compare it with)
put_frame = None
if compiled_put_frame is not None and os.environ.get("OPENARM_RECORD_PURE_PYTHON", "") != "1":
    compiled_configure(HEADER // 8, TAIL, PUBLISHED, TAKEN, DESCRIPTOR_WORDS)
    put_frame = compiled_put_frame


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

    def __enter__(self) -> Producer:
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
