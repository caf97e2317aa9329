"""Reading MP4 video lazily and seekably with PyAV (the ``[lerobot]`` extra): an index of packets,
and a decoder that reaches any frame from the keyframe before it.

:func:`video_index` demuxes a file once, without decoding (cached per file version): every frame's
presentation timestamp ``pts`` (in the stream's ``time_base``, so the exact time is the
:class:`~fractions.Fraction` ``pts * time_base``), whether it is a keyframe, and its size, sorted by
pts (presentation order; B-frames decode out of it). :class:`VideoDecoder` returns the RGB frame of a
given pts: a frame it has just decoded comes from a small ring; a later frame with no keyframe in
between is reached by decoding on; anything else seeks to the keyframe at or before it and decodes
forward. A frame is never reached by decoding the whole file.

A file that cannot be opened or demuxed to its end (a truncated MP4 loses its index) is a
:class:`CameraError` naming the file, in one line.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from .errors import CameraError

#: Decoded frames kept per decoder, so that threads asking slightly out of order never seek back.
RING_FRAMES = 32


def require_av():
    """The ``av`` module, or an ImportError naming the install that provides it."""
    try:
        import av
    except ImportError:  # pragma: no cover - optional extra
        raise ImportError("reading or writing MP4 video needs PyAV: pip install 'openarm-sim-dataset[lerobot]'") from None
    return av


@dataclass(frozen=True)
class VideoIndex:
    """The frames of an MP4's first video stream in presentation order (nothing decoded).

    ``pts``: int64 presentation timestamps in ``time_base`` units, strictly increasing;
    ``keyframe``: bool per frame; ``size``: packet bytes per frame; ``codec``: the stream's codec
    name (``h264``, ``av1``); ``width``/``height`` in pixels; ``duration``: the stream's declared
    duration in ``time_base`` units (None if the file declares none)."""

    path: Path
    pts: np.ndarray
    keyframe: np.ndarray
    size: np.ndarray
    time_base: Fraction
    codec: str
    width: int
    height: int
    duration: int | None

    def __len__(self) -> int:
        return len(self.pts)

    def seconds(self) -> np.ndarray:
        """Each frame's presentation time in float64 seconds (exact times: ``pts * time_base``)."""
        return self.pts.astype(np.float64) * float(self.time_base)

    def keyframe_at_or_before(self, i: int) -> int:
        """Position of the last keyframe at or before frame ``i`` (0 if none: decoding starts there)."""
        keys = self.keyframe_positions
        k = int(np.searchsorted(keys, i, side="right")) - 1
        return int(keys[k]) if k >= 0 else 0

    @cached_property
    def keyframe_positions(self) -> np.ndarray:
        """Positions (presentation order) of the keyframes, increasing."""
        return np.flatnonzero(self.keyframe)


def video_index(path: str | os.PathLike) -> VideoIndex:
    """The :class:`VideoIndex` of ``path``, cached per file version (path, mtime, size, inode)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise CameraError(p, f"video file unreadable ({e.strerror or e})") from None
    return _index(str(p), st.st_mtime_ns, st.st_size, st.st_ino)


def _ffmpeg_version(av) -> str:
    return str(getattr(av, "ffmpeg_version_info", "?"))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:160]


@lru_cache(maxsize=256)
def _index(path: str, _mtime_ns: int, size: int, _ino: int) -> VideoIndex:
    av = require_av()
    pts, keys, sizes = [], [], []
    end = 0
    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise CameraError(path, "holds no video stream")
            s = container.streams.video[0]
            if s.codec_context is None:  # a codec FFmpeg does not know (an unknown sample entry)
                raise CameraError(path, f"its video codec is unknown to FFmpeg {_ffmpeg_version(av)} (PyAV "
                                        f"{av.__version__}): no frame can be decoded")
            try:
                av.codec.Codec(s.codec_context.name, "r")
            except av.codec.codec.UnknownCodecError:
                raise CameraError(path, f"codec {s.codec_context.name!r}: this PyAV ({av.__version__}) has no decoder "
                                        "for it, no frame can be decoded") from None
            for pkt in container.demux(s):
                if pkt.pts is None:  # the flush packet at the end
                    continue
                pts.append(pkt.pts)
                keys.append(pkt.is_keyframe)
                sizes.append(pkt.size)
                end = max(end, pkt.pos + pkt.size if pkt.pos is not None and pkt.pos >= 0 else 0)
            info = (Fraction(s.time_base), s.codec_context.name, s.codec_context.width, s.codec_context.height,
                    None if s.duration is None else int(s.duration))
    except CameraError:
        raise
    except (av.FFmpegError, OSError, ValueError) as e:
        why = "not a readable MP4" if size else "an empty file"
        detail = _first_line(e).replace(f": '{path}'", "")  # FFmpeg quotes the path: it is named once
        raise CameraError(path, f"{why}, truncated or damaged: no frame can be located ({detail})") from None
    if end > size:
        raise CameraError(path, f"truncated: its index points {end - size} bytes past the end of the file")
    order = np.argsort(np.asarray(pts, dtype=np.int64), kind="stable")
    pts_arr = np.asarray(pts, dtype=np.int64)[order]
    if len(pts_arr) > 1 and not (np.diff(pts_arr) > 0).all():
        raise CameraError(path, "two frames share a presentation timestamp")
    return VideoIndex(Path(path), pts_arr, np.asarray(keys, dtype=bool)[order], np.asarray(sizes, dtype=np.int64)[order],
                      *info)


class VideoDecoder:
    """Decodes frames of one MP4 by presentation timestamp; thread-safe (one lock per file).

    Sequential access decodes each frame once (through keyframes too); a jump forward with no
    keyframe past the next frame decodes on; any other jump seeks to the keyframe at or before the
    frame. ``decoded`` counts the frames
    decoded so far (what a random access costs)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.index = video_index(self.path)
        self._lock = threading.Lock()
        self._container = None
        self._frames = None  # the live decode generator
        self._cursor = -1  # position (in the index) of the last frame decoded by the generator
        self._ring: OrderedDict[int, np.ndarray] = OrderedDict()
        self._position = {int(p): i for i, p in enumerate(self.index.pts.tolist())}
        self.decoded = 0
        self._pid = os.getpid()

    def frame(self, pts: int) -> np.ndarray:
        """The HxWx3 uint8 RGB frame whose presentation timestamp is ``pts`` (read-only array)."""
        pts = int(pts)
        with self._lock:
            hit = self._ring.get(pts)
            if hit is not None:
                self._ring.move_to_end(pts)
                return hit
            target = self._position.get(pts)
            if target is None:
                raise CameraError(self.path, f"no frame with pts {pts}")
            key = self.index.keyframe_at_or_before(target)
            # decode on from the cursor unless a keyframe lies past the next frame (a seek then skips
            # frames that decoding on would decode for nothing); a keyframe that is the next frame is
            # decoded on, so reading in order never seeks
            if self._frames is None or self._cursor >= target or key > self._cursor + 1:
                self._seek(key)
            return self._decode_to(target, pts)

    def _seek(self, key: int) -> None:
        av = require_av()
        try:
            if self._container is None:
                self._container = av.open(str(self.path))
            s = self._container.streams.video[0]
            # seeking flushes the decoder (PyAV's InputContainer.seek): no frame of before leaks in
            self._container.seek(int(self.index.pts[key]), stream=s, backward=True, any_frame=False)
            self._frames = self._container.decode(s)
        except (av.FFmpegError, OSError) as e:
            raise CameraError(self.path, f"cannot seek ({_first_line(e)})") from None
        self._cursor = key - 1

    def _decode_to(self, target: int, pts: int) -> np.ndarray:
        av = require_av()
        try:
            for frame in self._frames:
                if frame.pts is None:
                    continue
                self.decoded += 1
                arr = frame.to_ndarray(format="rgb24")
                arr.flags.writeable = False
                self._ring[int(frame.pts)] = arr
                if len(self._ring) > RING_FRAMES:
                    self._ring.popitem(last=False)
                self._cursor = self._position.get(int(frame.pts), self._cursor)
                if frame.pts == pts:
                    return arr
                if frame.pts > pts:
                    break
        except (av.FFmpegError, OSError) as e:
            self._frames = None
            raise CameraError(self.path, f"frame at pts {pts} does not decode ({_first_line(e)})") from None
        self._frames = None
        raise CameraError(self.path, f"frame at pts {pts} was not produced by the decoder")

    def close(self) -> None:
        if os.getpid() != self._pid:
            # a forked child holds a copy of its parent's decoder (garbage collected there, or closed by
            # mistake): freeing its codec context would wait forever for the parent's decoding threads,
            # which the child does not have, so the child keeps it, unused, until it exits
            _INHERITED.append((self._container, self._frames))
            self._container = self._frames = None
            return
        with self._lock:
            if self._container is not None:
                self._container.close()
            self._container = self._frames = None
            self._ring.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_DECODERS: OrderedDict[tuple[str, int], VideoDecoder] = OrderedDict()
_DECODERS_LOCK = threading.Lock()
#: Decoders a forked child inherited: kept referenced and never closed there (freeing a codec context
#: waits on the parent's decoding threads, which the child does not have).
_INHERITED: list = []


def _after_fork_in_child() -> None:
    global _DECODERS_LOCK
    _DECODERS_LOCK = threading.Lock()  # a parent thread may have held it at the fork
    _INHERITED.extend(_DECODERS.values())
    _DECODERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def decoder(path: str | os.PathLike, keep: int = 8) -> VideoDecoder:
    """A shared :class:`VideoDecoder` for ``path`` in this process (the ``keep`` most recent files stay
    open), so that cameras of one file share decoded frames and a forked worker opens its own."""
    key = (os.fspath(path), os.getpid())
    with _DECODERS_LOCK:
        dec = _DECODERS.get(key)
        if dec is not None and dec.index is not video_index(path):
            dec = None  # the file changed
        if dec is None:
            dec = _DECODERS[key] = VideoDecoder(path)
        _DECODERS.move_to_end(key)
        while len(_DECODERS) > keep:
            _DECODERS.popitem(last=False)[1].close()
        return dec


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB of two uint8 images (inf if equal)."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)
