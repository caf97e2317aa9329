"""Framing of the messages between a recorder, its writer process and the zygote (pipes and a socket).

Message framing: 4-byte little-endian length (+ to the writer process, the int64 count of frame
descriptors published before it) + pickle, every message at most ``PIPE_BUF`` bytes so
that a non-blocking write is all or nothing (POSIX), which is what makes the pipe itself the bounded
queue: a full pipe refuses the message and the sample is counted as dropped.
"""

from __future__ import annotations

import os
import pickle
import struct

#: Largest message (length prefix included): a pipe write of at most PIPE_BUF bytes is atomic.
MAX_MESSAGE = 4096
#: A message's prefix: its length.
LENGTH = struct.Struct("<I")
#: A request's prefix (control process -> writer): length, then the frames published when it was sent.
_REQUEST = struct.Struct("<Iq")


def pack(msg: tuple) -> bytes:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(data)) + data


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
    (n,) = LENGTH.unpack(head)
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

