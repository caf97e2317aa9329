"""Camera frames: a folder of ``<ns>.jpeg`` files or one uncompressed tar of the same files.

A tar archive is indexed once (member name, data offset, size) and frames are read with ``pread``
at their offset — never extracted. Members that are not regular files, whose names are not
``<integer>.jpeg``/``.jpg``, or that repeat a timestamp make the archive unusable.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from . import layout
from .atomic import atomic_write_with
from .errors import CameraError

#: Frames declaring more pixels than this are refused before decoding (decompression bombs).
MAX_FRAME_PIXELS = 64_000_000


class Frame:
    """One JPEG frame; ``timestamp`` in integer nanoseconds. ``load()`` decodes to HxWx3 uint8."""

    __slots__ = ("camera", "index", "timestamp")

    def __init__(self, camera: "Camera", index: int, timestamp: int):
        self.camera = camera
        self.index = index
        self.timestamp = timestamp

    @property
    def unixtime(self) -> float:
        """Timestamp in float seconds."""
        return self.timestamp / 1e9

    @property
    def path(self) -> Path:
        """The JPEG file, or for tar frames the synthetic ``<archive>/<member>`` path."""
        return self.camera.frame_path(self.index)

    def read_bytes(self) -> bytes:
        """The JPEG bytes exactly as stored."""
        return self.camera.read_bytes(self.index)

    def load(self) -> np.ndarray:
        """Decode to an HxWx3 uint8 RGB array."""
        return decode_jpeg(self.read_bytes(), self.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frame) and self.camera is other.camera and self.index == other.index

    def __hash__(self) -> int:
        return hash((id(self.camera), self.index))

    def __repr__(self) -> str:
        return f"Frame({self.camera.name!r}, index={self.index}, timestamp={self.timestamp})"


def decode_jpeg(data: bytes, path: str | os.PathLike = "<bytes>") -> np.ndarray:
    """Decode JPEG bytes to HxWx3 uint8; any failure is a CameraError naming ``path``."""
    try:
        with Image.open(io.BytesIO(data), formats=["JPEG"]) as im:
            w, h = im.size
            if w * h > MAX_FRAME_PIXELS:
                raise CameraError(path, f"declares {w}x{h} pixels, more than the {MAX_FRAME_PIXELS} allowed")
            if im.mode != "RGB":
                im = im.convert("RGB")
            im.load()
            return np.asarray(im)
    except CameraError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise CameraError(path, f"declares more than the {MAX_FRAME_PIXELS} pixels allowed (decompression bomb)") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise CameraError(path, f"not a decodable JPEG ({str(e).splitlines()[0][:120]})") from None


def decode_jpeg_chw(data: bytes, path: str | os.PathLike = "<bytes>") -> np.ndarray:
    """Decode JPEG bytes to a contiguous 3xHxW uint8 array (planar RGB, as torch models take images), with
    the checks and errors of :func:`decode_jpeg`. (Transposing costs ~5% of a 320x240 decode here; having
    Pillow split the planes instead measured slower.)"""
    return np.ascontiguousarray(decode_jpeg(data, path).transpose(2, 0, 1))


@lru_cache(maxsize=256)
def _tar_index(path: str, _mtime_ns: int, _size: int, _ino: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timestamps, offsets, sizes) of a camera tar, sorted by timestamp. Cached per file version."""
    stamps, offsets, sizes = [], [], []
    try:
        with tarfile.open(path, mode="r:") as tf:
            for m in tf:
                ts = layout.parse_frame_name(m.name)
                if not m.isreg():
                    raise CameraError(path, f"member {m.name!r} is not a regular file")
                if ts is None:
                    raise CameraError(path, f"member {m.name!r} is not named <integer>.jpeg")
                stamps.append(ts)
                offsets.append(m.offset_data)
                sizes.append(m.size)
    except tarfile.TarError as e:
        raise CameraError(path, f"unreadable tar archive ({e})") from None
    except OSError as e:
        raise CameraError(path, f"cannot read ({e.strerror})") from None
    return _sorted_unique(path, np.array(stamps, dtype=np.int64), np.array(offsets, dtype=np.int64), np.array(sizes, dtype=np.int64))


def _sorted_unique(path, stamps: np.ndarray, *others: np.ndarray):
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    dup = np.flatnonzero(np.diff(stamps) == 0)
    if dup.size:
        raise CameraError(path, f"timestamp {stamps[dup[0]]} appears twice")
    return (stamps, *(o[order] for o in others))


class Camera:
    """The frames of one camera in one episode, from a folder or a tar archive.

    ``timestamps`` are int64 nanoseconds, sorted; ``get_frame(i)`` is lazy (nothing decoded).
    """

    def __init__(self, name: str, path: str | os.PathLike):
        """``path`` is the folder form (``.../cameras/head``); a sibling ``head.tar`` is used if the folder is absent."""
        self.name = name
        folder = Path(path)
        tar = folder.with_name(folder.name + layout.TAR_SUFFIX)
        self._fd: int | None = None
        self._lock = threading.Lock()
        if folder.is_dir():
            self.format = "dir"
            self.path = folder
            self._names, self.timestamps = self._index_dir(folder)
            self._offsets = self._sizes = None
        elif tar.is_file():
            self.format = "tar"
            self.path = tar
            st = tar.stat()
            self.timestamps, self._offsets, self._sizes = _tar_index(str(tar), st.st_mtime_ns, st.st_size, st.st_ino)
            self._names = None
        else:
            raise CameraError(folder, f"camera {name!r} has neither a folder nor {tar.name}")

    @staticmethod
    def _index_dir(folder: Path) -> tuple[list[str], np.ndarray]:
        names, stamps = [], []
        with os.scandir(folder) as it:
            for entry in it:
                ts = layout.parse_frame_name(entry.name)
                if ts is None or not entry.is_file(follow_symlinks=False):
                    raise CameraError(Path(folder) / entry.name, "is not a regular <integer>.jpeg frame file")
                names.append(entry.name)
                stamps.append(ts)
        stamps_arr, order = _sorted_unique(folder, np.array(stamps, dtype=np.int64), np.arange(len(names)))
        return [names[i] for i in order], stamps_arr

    @property
    def num_frames(self) -> int:
        return len(self.timestamps)

    def __len__(self) -> int:
        return len(self.timestamps)

    def load_timestamps(self) -> np.ndarray:
        """Frame timestamps, int64 nanoseconds (openarm_dataset returns float seconds here)."""
        return self.timestamps

    def get_frame(self, index: int) -> Frame:
        n = len(self.timestamps)
        if not -n <= index < n:
            raise IndexError(f"camera {self.name!r} has {n} frames, no index {index}")
        index = index % n
        return Frame(self, index, int(self.timestamps[index]))

    def frames(self) -> Iterator[Frame]:
        for i in range(len(self.timestamps)):
            yield Frame(self, i, int(self.timestamps[i]))

    __iter__ = frames

    def member_spans(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(data offsets, sizes) in bytes of every frame of a tar camera, in frame order; None for a folder."""
        return None if self.format == "dir" else (self._offsets, self._sizes)

    def names_are_canonical(self) -> bool:
        """True when every frame file is named ``layout.frame_name(timestamp)`` (a folder camera's file
        can then be opened from its timestamp alone)."""
        if self.format != "dir":
            return False
        return all(name == layout.frame_name(ts) for name, ts in zip(self._names, self.timestamps.tolist()))

    def frame_path(self, index: int) -> Path:
        if self.format == "dir":
            return self.path / self._names[index]
        return self.path / layout.frame_name(self.timestamps[index])

    def read_bytes(self, index: int) -> bytes:
        if self.format == "dir":
            return (self.path / self._names[index]).read_bytes()
        if self._fd is None:
            with self._lock:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDONLY)
        size = int(self._sizes[index])
        data = os.pread(self._fd, size, int(self._offsets[index]))
        if len(data) != size:
            raise CameraError(self.path, f"member {layout.frame_name(self.timestamps[index])} is truncated")
        return data

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"Camera({self.name!r}, {self.format}, {self.num_frames} frames)"


def write_camera_dir(out: Path, frames: Iterator[tuple[int, bytes]]) -> None:
    """Write frames ``(timestamp_ns, jpeg_bytes)`` as ``out/<ns>.jpeg`` files (out must not exist)."""
    out.mkdir(parents=True)
    for ts, data in frames:
        (out / layout.frame_name(ts)).write_bytes(data)


def write_camera_tar(out: Path, frames: Iterator[tuple[int, bytes]]) -> None:
    """Write frames as one uncompressed tar ``out`` with reproducible headers (mtime 0, mode 0644)."""

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            for ts, data in frames:
                info = tarfile.TarInfo(layout.frame_name(ts))
                info.size = len(data)
                info.mode = 0o644
                info.mtime = 0
                tf.addfile(info, io.BytesIO(data))

    atomic_write_with(out, write)
