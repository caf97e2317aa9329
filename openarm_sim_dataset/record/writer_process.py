"""The live recorder's writer process (the disk side of :mod:`openarm_sim_dataset.record`).

:class:`.recorder.Recorder` starts one such process per recorder (forked by the :mod:`.zygote`). The
control process only copies a sample into a shared-memory ring (:class:`.ring.Ring`, filled through a
:class:`.ring.Producer`): a frame (JPEG bytes or an RGB array) with a descriptor in the shared memory,
a block of state rows or an episode file with a short message (a few dozen bytes: op, episode id,
where in the ring; framed by :mod:`.messages`) written into a non-blocking pipe. This process reads
the messages and the descriptors in the order they were sent (each message carries the count of
descriptors published before it), encodes array frames (a thread pool), writes parquet row groups
and frame files, applies the identical-frames rule, commits or discards episodes with the protocol
of :mod:`openarm_sim_dataset.writer`, and advances the ring's tail past every item it has finished
with. Replies (a commit's result, an episode it discarded by itself) go back on a second pipe, read
by a thread of the control process.

It holds a duplicate of the recorder's lock (same open file description), so the dataset stays
locked while it runs even if the control process died; a control process that dies (end of file on
the message pipe) makes it exit at once **without** touching metadata.yaml: the episode it had open
stays a temporary folder that the next recorder removes, its id reused (it was never listed).
"""

from __future__ import annotations

import copy
import hashlib
import io
import math
import os
import queue
import threading
import time
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.atomic import remove_tree
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.frame_writer import FrameWriter
from openarm_sim_dataset.core.frequencies import RateMeter, dataset_frequencies, flatten, measured_rates, nest
from openarm_sim_dataset.core.metadata import Metadata
from openarm_sim_dataset.core.writer import StreamWriter, begin_episode, close_log, finish_episode, remove_uncommitted

from .messages import PollingReader, pack
from .ring import DESCRIPTOR_WORDS, HEADER, PUBLISHED, TAIL, TAKEN, Ring

#: metadata.yaml key listing discarded episodes (id and reason): their ids are never used again.
DISCARDED_KEY = "discarded_episodes"


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
                encoder_threads: int, jpeg_quality: int, cwd: str, lock_fd: int, ring_fd: int, msg_fd: int,
                reply_fd: int) -> None:
    """Body of the writer process. ``cwd``: the recorder's working directory when it opened ``root``
    (the zygote it forks from keeps the one it started in: a relative ``root`` means the caller's)."""
    os.chdir(cwd)
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


class _Writer:
    """The writer process's state: its main thread reads the messages and frame descriptors, a disk
    thread (:meth:`write_loop`) does what they ask for, in order."""

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

    def mirror(self) -> tuple:
        """What the control process needs to mirror metadata.yaml: the document without its entries and
        the entries listed since the last reply (constant size per commit, whatever the dataset's)."""
        eps = self.meta.episodes
        new = copy.deepcopy(eps[self._sent:])
        self._sent = len(eps)
        return ("delta", copy.deepcopy({k: v for k, v in self.meta.data.items() if k != "episodes"}), new)

    def reply(self, msg: tuple) -> None:
        data = pack(msg)
        with self.reply_lock:
            _write_all(self.reply_fd, data)

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
            w = ep.streams[key] = StreamWriter(ep.tmp, kind, embodiment, component, attrs)
            ep.rates[name] = RateMeter()
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
            name = layout.check_name(camera, "camera name")
            path = ep.tmp / layout.CAMERAS_DIR / (name + (layout.TAR_SUFFIX if self.camera_format == "tar" else ""))
            w = ep.frames[camera] = FrameWriter(path, self.camera_format)
            ep.rates["cameras/" + camera] = RateMeter()
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
            # a discard finishes its bookkeeping whatever closing the files raised (the return is deliberate)
            if reason is None:  # cancelled: the id is free again, nothing recorded
                return  # noqa: B012
            if episode_id in self.meta.episode_ids or \
                    any(str(d.get("id")) == episode_id for d in self.meta.data.get(DISCARDED_KEY) or []):
                return  # noqa: B012 - listed (its commit completed before a crash) or recorded already
            self.meta.data.setdefault(DISCARDED_KEY, []).append({"id": episode_id, "reason": reason})
            self.meta.write(self.root)

    def commit(self, ep: _WEpisode | None, entry: dict) -> tuple | None:
        if ep is None or ep.gone:
            return None
        rows = {name: w.rows for (_kind, name), w in ep.streams.items()}  # stored (dropped blocks excluded)
        trimmed = self.trim_frames(ep)
        frames = {camera: w.frames for camera, w in ep.frames.items()}
        self.close_files(ep)
        measured = nest({k: m.hz() for k, m in ep.rates.items()}, digits=3)
        entry = dict(entry)
        if trimmed:
            entry["trimmed_frames"] = trimmed
        if measured:
            entry["measured_hz"] = measured
        old = copy.deepcopy(self.meta.data.get("frequencies"))
        if self._rates is None:  # every listed episode's measured rates, kept per stream (once)
            self._rates = measured_rates(self.meta.episodes)
        mine = flatten(measured or {})
        self.meta.data["frequencies"] = dataset_frequencies(old or {}, self._rates, mine)
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


def _manifest_entries(known: dict[str, tuple]) -> dict[str, tuple[str, int]]:
    """Manifest entries (relative path -> (sha256 hex, size)) of the frames hashed as written."""
    out = {}
    for camera, (stamps, sizes, digests) in known.items():
        for i, (ts, size) in enumerate(zip(stamps, sizes)):
            out[f"{layout.CAMERAS_DIR}/{camera}/{layout.frame_name(ts)}"] = (digests[32 * i:32 * i + 32].hex(), size)
    return out
