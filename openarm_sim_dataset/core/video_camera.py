"""Cameras whose frames are decoded from another encoding: a time window of an MP4 (LeRobot's video
features, :class:`VideoCamera`) or images stored in a table (LeRobot's image features, :class:`ImageCamera`),
with the surface of :class:`~.camera.Camera`: int64 ns ``timestamps`` from the episode's start, lazy
frames, JPEG bytes.

LeRobot v2.1 stores one MP4 per episode and camera; v3.0 concatenates episodes, each episode's frames
lying in ``[from_timestamp, to_timestamp)`` seconds of its file. A frame at exact time ``p``
(``pts * time_base``) is in the window when ``from - tol <= p < to - tol`` (``tol`` is LeRobot's
``tolerance_s``), and is stamped ``p - from`` snapped to the ``fps`` grid when within ``tol`` of a grid
point (:func:`.sampler.snap_seconds`), so that ``sample(hz=fps)`` pairs row k with frame k as LeRobot
does. Frames decode through a shared :class:`~.video.VideoDecoder` of the file; :meth:`read_bytes`
encodes a decoded frame as JPEG (quality :data:`JPEG_QUALITY`) for consumers that want bytes.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

from . import sampler
from .camera import MAX_FRAME_PIXELS, Camera, FrameSequence
from .errors import CameraError
from .video import decoder, video_index

#: Quality of the JPEG bytes :meth:`VideoCamera.read_bytes` encodes (PIL's scale).
JPEG_QUALITY = 95


def encode_jpeg(rgb: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    """HxWx3 uint8 RGB as baseline JPEG bytes at ``quality`` (PIL, 4:2:0)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


class DecodedCamera(FrameSequence):
    """What every camera whose frames are decoded from another encoding shares (:class:`VideoCamera`,
    :class:`ImageCamera`): on :class:`~.camera.FrameSequence`'s ``timestamps`` (int64 ns) and lazy frames,
    JPEG bytes encoded from the decoded frame. Subclasses set ``name``, ``path``, ``timestamps``,
    ``jpeg_quality`` and define :meth:`load_frame` and :meth:`frame_size`."""

    format = "decoded"
    tar_path = None
    path: Path
    jpeg_quality: int = JPEG_QUALITY

    @property
    def base_path(self) -> Path:
        return self.path

    def load_frame(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def frame_size(self, index: int) -> int:
        raise NotImplementedError

    def read_bytes(self, index: int) -> bytes:
        """Frame ``index`` as JPEG bytes (decoded, then encoded at :attr:`jpeg_quality`)."""
        return encode_jpeg(self.load_frame(index), self.jpeg_quality)

    def member_spans(self) -> None:
        return None

    def names_are_canonical(self) -> bool:
        return False

    def write(self, output: str | os.PathLike, format: str = "dir") -> Path:
        """Write the frames as JPEG (:meth:`read_bytes`) to a ``<ns>.jpeg`` folder or tar, as
        :meth:`.camera.Camera.write` does."""
        return Camera.write(_Bytes(self), output, format)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.path.name}, {self.num_frames} frames)"


class VideoCamera(DecodedCamera):
    """The frames of one camera in one episode: a window of an MP4 file.

    ``path`` is the MP4; ``window`` ``(from_s, to_s)`` in seconds of the file (None: the whole file,
    LeRobot v2.1); ``fps`` the dataset's frame rate; ``tolerance_s`` how far a frame may sit from the
    grid and still be stamped on it."""

    format = "video"

    def __init__(self, name: str, path: str | os.PathLike, fps: float, window: tuple[float, float] | None = None,
                 tolerance_s: float = 1e-4, jpeg_quality: int = JPEG_QUALITY):
        self.name = name
        self.path = Path(path)
        self.fps = fps
        self.window = window
        self.jpeg_quality = jpeg_quality
        index = video_index(self.path)
        times = index.seconds()
        if window is None:
            start, keep = (float(times[0]) if len(times) else 0.0), np.ones(len(times), dtype=bool)
        else:
            start = float(window[0])
            keep = (times >= start - tolerance_s) & (times < float(window[1]) - tolerance_s)
        #: positions in the file's :class:`~.video.VideoIndex` of this camera's frames
        self.positions = np.flatnonzero(keep)
        self.pts = index.pts[self.positions]
        #: each frame's time in seconds from the episode's start (float64, exact to the file's time base)
        self.seconds = times[self.positions] - start
        self.timestamps = sampler.snap_seconds(self.seconds, fps, tolerance_s)
        if len(self.timestamps) > 1 and not (np.diff(self.timestamps) > 0).all():
            raise CameraError(self.path, f"camera {name!r}: two frames fall on one timestamp")

    @property
    def index(self):
        """The file's :class:`~.video.VideoIndex`."""
        return video_index(self.path)

    def load_frame(self, index: int) -> np.ndarray:
        """Frame ``index`` decoded: HxWx3 uint8 RGB (read-only)."""
        return decoder(self.path).frame(int(self.pts[index]))

    def frame_size(self, index: int) -> int:
        """Size in bytes of the frame's compressed packet in the MP4."""
        return int(self.index.size[self.positions[index]])

    def frame_path(self, index: int) -> Path:
        """``<mp4>#pts=<pts>``: where the frame is, for messages."""
        return Path(f"{self.path}#pts={int(self.pts[index])}")


class ImageCamera(DecodedCamera):
    """The frames of one camera in one episode stored as encoded images (PNG, as LeRobot's ``image``
    features store them) in ``images``, one per row stamped ``timestamps``; ``path`` is the file they
    were read from (for messages)."""

    format = "image"

    def __init__(self, name: str, path: str | os.PathLike, timestamps: np.ndarray, images: list[bytes | None],
                 jpeg_quality: int = JPEG_QUALITY):
        self.name = name
        self.path = Path(path)
        self.timestamps = np.asarray(timestamps, dtype=np.int64)
        self.jpeg_quality = jpeg_quality
        if len(images) != len(self.timestamps):
            raise CameraError(self.path, f"camera {name!r}: {len(images)} images for {len(self.timestamps)} rows")
        self._images = images

    def frame_path(self, index: int) -> Path:
        return Path(f"{self.path}#{self.name}[{index}]")

    def frame_size(self, index: int) -> int:
        return len(self._images[index] or b"")

    def load_frame(self, index: int) -> np.ndarray:
        """Frame ``index`` decoded to HxWx3 uint8 RGB; a missing or undecodable image is a CameraError."""
        data = self._images[index]
        where = self.frame_path(index)
        if not data:
            raise CameraError(where, "no image bytes")
        try:
            with Image.open(io.BytesIO(data)) as im:
                if im.width * im.height > MAX_FRAME_PIXELS:
                    raise CameraError(where, f"declares {im.width}x{im.height} pixels, more than the {MAX_FRAME_PIXELS} allowed")
                arr = np.asarray(im.convert("RGB"))
        except CameraError:
            raise
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
            raise CameraError(where, f"not a decodable image ({str(e).splitlines()[0][:120]})") from None
        arr.flags.writeable = False
        return arr


class _Bytes:
    """What :meth:`Camera.write` reads of a camera: timestamps and read_bytes."""

    def __init__(self, cam: DecodedCamera):
        self.timestamps = cam.timestamps
        self.read_bytes = cam.read_bytes
