"""The compiled frame put (``openarm_sim_dataset/_ringput.c``) against the Python ``Producer.put`` it
replaces on the hot path: the same sequence of frames, with the writer's releases simulated, leaves
both rings in the same state byte for byte (head, floor, descriptors, counts, data) and returns the same
verdicts; where it cannot do what put() does it says NotImplemented and put() runs."""

from __future__ import annotations

import os
import shutil
import sysconfig
import threading
from pathlib import Path

import numpy as np
import pytest

from openarm_sim_dataset.record import ring as rw

CAPACITY, SLOTS = 4096, 6


def _producer(limit: int = CAPACITY) -> rw.Producer:
    fd = rw.make_ring_fd(CAPACITY, SLOTS)
    ring = rw.Ring(fd, CAPACITY, SLOTS)
    os.close(fd)
    r, w = os.pipe()
    os.close(r)
    return rw.Producer(ring, threading.Lock(), w, limit)


def _state(p: rw.Producer) -> tuple:
    return (p.head, p.floor, p.desc, p.published, p.peak, bytes(p.ring.words.cast("B")), bytes(p.ring.data))


def test_a_compiler_here_means_the_compiled_put_was_built():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the package runs the Python put()")
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        pytest.skip("no Python headers for this interpreter (Debian: python3-dev): the package runs the Python put()")
    assert rw.compiled_put_frame is not None, ("a C compiler is installed but openarm_sim_dataset._ringput was not built: "
                                     "reinstall the package (pip install -e .) to build it")


@pytest.mark.skipif(rw.compiled_put_frame is None, reason="openarm_sim_dataset._ringput not built (no C compiler)")
def test_the_compiled_put_leaves_the_ring_as_the_python_put_does():
    rw.compiled_configure(rw.HEADER // 8, rw.TAIL, rw.PUBLISHED, rw.TAKEN, rw.DESCRIPTOR_WORDS)
    rng = np.random.default_rng(7)
    a, b = _producer(limit=3000), _producer(limit=3000)
    verdicts = []
    # sizes that wrap the lap, small ones (under the streaming threshold), odd lengths, and a frame over
    # the limit; every few frames the "writer" releases what it took, sometimes all (the next frame then
    # starts the next lap at the ring's first bytes)
    sizes = [700, 1001, 255, 1300, 3100, 900, 64, 1500, 2047, 333, 1800, 1800, 1800, 5, 2999, 1024]
    taken = 0
    for k, n in enumerate(sizes):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        va = a.put(data, n, a.frame_limit, None, 1000 + k, (3 << 16) | k, 0)
        vb = rw.compiled_put_frame(b, data, n, 1000 + k, (3 << 16) | k)
        verdicts.append((va, vb))
        assert vb is va, f"frame {k} ({n} bytes): python {va}, compiled {vb}"
        assert _state(a) == _state(b), f"frame {k} ({n} bytes): the rings differ"
        if k % 3 == 2:  # the writer takes every published descriptor and releases all but the last item
            taken = a.published
            for p in (a, b):
                p.words[rw.TAKEN] = taken
                p.words[rw.TAIL] = p.head if k % 2 else max(p.floor, p.head - 1400)
    assert {v for v, _ in verdicts} == {True, False}  # both verdicts were compared
    assert a.head > CAPACITY  # and at least one lap was started


@pytest.mark.skipif(rw.compiled_put_frame is None, reason="openarm_sim_dataset._ringput not built (no C compiler)")
def test_the_compiled_put_refuses_what_put_must_do_and_what_put_would_refuse():
    p = _producer()
    frame = bytes(range(200)) * 5
    assert rw.compiled_put_frame(p, frame, len(frame), 1, 1) is True
    p.turns.append(12345)  # another thread is in the middle of a put(): wait for its turn there
    assert rw.compiled_put_frame(p, frame, len(frame), 2, 1) is NotImplemented
    p.turns.clear()
    assert rw.compiled_put_frame(p, memoryview(frame)[::2], 500, 2, 1) is NotImplemented  # strided
    p.shared = False  # descriptors announced by pipe messages (off x86): put() sends them
    assert rw.compiled_put_frame(p, frame, len(frame), 2, 1) is NotImplemented
    p.shared = True
    for k in range(SLOTS - 1):  # the writer takes nothing: the descriptors fill
        assert rw.compiled_put_frame(p, frame[:8], 8, 3 + k, 1) is True
    state = _state(p)
    assert rw.compiled_put_frame(p, frame[:8], 8, 99, 1) is False and _state(p) == state
    p.words[rw.TAKEN] = p.published
    assert rw.compiled_put_frame(p, b"x" * (CAPACITY + 8), CAPACITY + 8, 100, 1) is False  # over the limit
    p.close()
    assert rw.compiled_put_frame(p, frame, len(frame), 101, 1) is False  # closed: nothing is put
