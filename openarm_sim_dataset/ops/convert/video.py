"""H.264 MP4 encoding and decoding with PyAV (``av`` from PyPI bundles FFmpeg and libx264).

Frame ``i`` of a file is stamped exactly ``i / fps`` seconds (time base ``1/fps``, pts = i, no
B-frames, so decode order is presentation order); a keyframe every ``gop`` frames bounds the work of
a random access (LeRobot seeks to the keyframe before the requested time and decodes forward).
Pixels: RGB24 in, yuv420p in the file (odd widths/heights are padded by repeating the last
row/column, since 4:2:0 needs even sizes).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core.video import psnr  # noqa: F401 - re-exported: moved down to the reader

CODEC = "libx264"
CODEC_NAME = "h264"  # as LeRobot's info.json names it
PIX_FMT = "yuv420p"


def _av():
    try:
        import av
    except ImportError:  # pragma: no cover - optional extra
        raise ImportError("video export needs PyAV: pip install 'openarm-sim-dataset[lerobot]' (or pip install av)") from None
    return av


def even_size(width: int, height: int) -> tuple[int, int]:
    """Size of the encoded picture (4:2:0 needs even sizes)."""
    return width + (width & 1), height + (height & 1)


def _pad_even(img: np.ndarray) -> np.ndarray:
    h, w = img.shape[:2]
    if not (h & 1 or w & 1):
        return img
    return np.pad(img, ((0, h & 1), (0, w & 1), (0, 0)), mode="edge")


class Mp4Writer:
    """Append RGB frames (HxWx3 uint8) to an H.264 MP4; frame i has pts i in time base 1/fps."""

    def __init__(self, path: str | os.PathLike, fps: int, width: int, height: int, gop: int | None = None,
                 crf: int = 18, preset: str = "veryfast", threads: int = 0):
        av = _av()
        self.path = Path(path)
        self.fps = int(fps)
        self.width, self.height = even_size(width, height)
        self.count = 0
        self.bytes = 0  # encoded bytes muxed so far
        self._container = av.open(str(self.path), mode="w", format="mp4")
        stream = self._container.add_stream(CODEC, rate=Fraction(self.fps, 1))
        stream.width, stream.height = self.width, self.height
        stream.pix_fmt = PIX_FMT
        stream.time_base = Fraction(1, self.fps)
        gop = int(gop) if gop else max(1, self.fps // 2)
        stream.codec_context.gop_size = gop
        stream.codec_context.max_b_frames = 0
        stream.options = {"crf": str(int(crf)), "preset": preset, "bf": "0", "keyint_min": str(gop),
                          "sc_threshold": "0", "threads": str(threads)}
        self._stream = stream
        self._frame_cls = av.VideoFrame

    def write(self, rgb: np.ndarray) -> None:
        rgb = _pad_even(np.ascontiguousarray(rgb, dtype=np.uint8))
        if rgb.shape[:2] != (self.height, self.width):
            raise ValueError(f"{self.path}: frame {self.count} is {rgb.shape[1]}x{rgb.shape[0]}, "
                             f"the video is {self.width}x{self.height}")
        frame = self._frame_cls.from_ndarray(rgb, format="rgb24")
        frame.pts = self.count
        frame.time_base = Fraction(1, self.fps)
        for packet in self._stream.encode(frame):
            self.bytes += packet.size
            self._container.mux(packet)
        self.count += 1

    def close(self) -> None:
        if self._container is None:
            return
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        self._container = None

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def encode_mp4(path: str | os.PathLike, frames: Iterable[np.ndarray], fps: int, gop: int | None = None,
               crf: int = 18, preset: str = "veryfast") -> int:
    """Encode RGB frames into a new MP4; returns the number of frames written."""
    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError(f"{path}: no frames to encode")
    h, w = first.shape[:2]
    with Mp4Writer(path, fps, w, h, gop=gop, crf=crf, preset=preset) as wr:
        wr.write(first)
        for f in it:
            wr.write(f)
        return wr.count


def decode_mp4(path: str | os.PathLike) -> Iterator[tuple[float, np.ndarray, bool]]:
    """(presentation time in seconds, HxWx3 uint8 RGB, is keyframe) of every frame, in order."""
    av = _av()
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            yield float(frame.pts * frame.time_base), frame.to_ndarray(format="rgb24"), bool(frame.key_frame)


