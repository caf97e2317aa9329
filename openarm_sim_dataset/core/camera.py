"""Camera frames: a folder of ``<ns>.jpeg`` files or one uncompressed tar of the same files.

A tar archive is indexed once (member name, data offset, size) and frames are read with ``pread``
at their offset — never extracted. Members that are not regular files, whose names are not
``<integer>.jpeg``/``.jpg``, or that repeat a timestamp make the archive unusable.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from . import layout
from .atomic import atomic_write_bytes, commit_dir, remove_tree, tmp_name
from .errors import CameraError

# the writers live in their own module; their documented path is this one too
from .frame_writer import FrameWriter, write_camera_dir, write_camera_tar  # noqa: F401

#: Frames declaring more pixels than this are refused before decoding (decompression bombs).
MAX_FRAME_PIXELS = 64_000_000


class Frame:
    """One JPEG frame of a :class:`Camera`; nothing is read until asked.

    ``timestamp_ns`` is the exact stamp in integer nanoseconds (Unix epoch for recorded data);
    ``timestamp`` is the same instant in float seconds, as openarm_dataset's ``Frame.timestamp``
    (a float cannot hold a ~1.7e18 ns stamp exactly: compute with ``timestamp_ns``).
    """

    __slots__ = ("camera", "index", "timestamp_ns")

    def __init__(self, camera: Camera, index: int, timestamp_ns: int):
        self.camera = camera
        self.index = index
        self.timestamp_ns = timestamp_ns

    @property
    def timestamp(self) -> float:
        """Unix time in float seconds (openarm_dataset's meaning); ``timestamp_ns`` is exact."""
        return self.timestamp_ns / 1e9

    #: Former name of :attr:`timestamp` (float seconds).
    unixtime = timestamp

    @property
    def path(self) -> Path:
        """The JPEG file, or for tar frames the synthetic ``<archive>/<member>`` path."""
        return self.camera.frame_path(self.index)

    @property
    def size(self) -> int:
        """Size of the JPEG in bytes."""
        return self.camera.frame_size(self.index)

    def read_bytes(self) -> bytes:
        """The JPEG bytes exactly as stored."""
        return self.camera.read_bytes(self.index)

    def load(self) -> np.ndarray:
        """Decode to an HxWx3 uint8 RGB array."""
        return self.camera.load_frame(self.index)

    def open_image(self) -> Image.Image:
        """The frame as a PIL image (decoded on first pixel access; the JPEG bytes are in memory)."""
        data = self.read_bytes()
        decode_jpeg(data, self.path, header_only=True)  # the pixel limit, before PIL allocates anything
        return Image.open(io.BytesIO(data), formats=["JPEG"])

    def show(self):
        """Show the frame with PIL's default viewer."""
        with self.open_image() as image:
            return image.show()

    def materialize(self, temp_dir: str | os.PathLike) -> Path:
        """A real JPEG file of this frame: its own path for a folder camera; for a tar camera the
        bytes written (atomically) to ``temp_dir/<ns>.jpeg``, which is returned."""
        if self.camera.format == "dir":
            return self.path
        out = Path(temp_dir) / layout.frame_name(self.timestamp_ns)
        atomic_write_bytes(out, self.read_bytes())
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frame) and self.camera is other.camera and self.index == other.index

    def __hash__(self) -> int:
        return hash((id(self.camera), self.index))

    def __repr__(self) -> str:
        return f"Frame({self.camera.name!r}, index={self.index}, timestamp_ns={self.timestamp_ns})"


def decode_jpeg(data: bytes, path: str | os.PathLike = "<bytes>", header_only: bool = False) -> np.ndarray | None:
    """Decode JPEG bytes to HxWx3 uint8; any failure is a CameraError naming ``path``.
    ``header_only``: check the header (format, pixel limit) and decode nothing."""
    try:
        with Image.open(io.BytesIO(data), formats=["JPEG"]) as im:
            w, h = im.size
            if w * h > MAX_FRAME_PIXELS:
                raise CameraError(path, f"declares {w}x{h} pixels, more than the {MAX_FRAME_PIXELS} allowed")
            if header_only:
                return None
            if im.mode != "RGB":
                im = im.convert("RGB")
            im.load()
            return np.asarray(im)
    except CameraError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise CameraError(path, f"declares more than the {MAX_FRAME_PIXELS} pixels allowed (decompression bomb)") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise CameraError(path, f"not a decodable JPEG ({str(e).splitlines()[0][:120]})") from None


def decode_jpeg_chw(data: bytes, path: str | os.PathLike = "<bytes>") -> np.ndarray:
    """Decode JPEG bytes to a contiguous 3xHxW uint8 array (planar RGB, as torch models take images), with
    the checks and errors of :func:`decode_jpeg`. (Transposing costs ~5% of a 320x240 decode here; having
    Pillow split the planes instead measured slower.)"""
    return np.ascontiguousarray(decode_jpeg(data, path).transpose(2, 0, 1))


@lru_cache(maxsize=256)
def _tar_index(path: str, _mtime_ns: int, _size: int, _ino: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(timestamps, offsets, sizes) of a camera tar, sorted by timestamp, and whether every member is named
    ``layout.frame_name(timestamp)``. Cached per file version."""
    fast = _ustar_scan(path)
    if fast is not None:
        return (*_sorted_unique(path, *fast[:3]), fast[3])
    stamps, offsets, sizes, canonical = [], [], [], True
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
                canonical = canonical and m.name == layout.frame_name(ts)
    except tarfile.TarError as e:
        raise CameraError(path, f"unreadable tar archive ({e})") from None
    except OSError as e:
        raise CameraError(path, f"cannot read ({e.strerror})") from None
    return (*_sorted_unique(path, np.array(stamps, dtype=np.int64), np.array(offsets, dtype=np.int64),
                            np.array(sizes, dtype=np.int64)), canonical)


_ZERO_BLOCK = bytes(512)


def ustar_index(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The index of a plain USTAR/GNU tar of regular members named ``<integer>.jpeg`` (what every writer
    of the format makes), read from the 512-byte headers alone: ~25x cheaper than ``tarfile``, which
    dominated ``dataset-info`` on tar cameras. None for anything else (an extended header, a long name,
    another member type, a bad checksum, a truncated archive): :mod:`tarfile` then reads it, with its
    errors."""
    scan = _ustar_scan(path)
    return None if scan is None else scan[:3]


def _ustar_scan(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool] | None:
    """:func:`ustar_index` and whether every member is named ``layout.frame_name(timestamp)``."""
    stamps, offsets, sizes, canonical = [], [], [], True
    try:
        with open(path, "rb", buffering=0) as f:
            end = os.fstat(f.fileno()).st_size
            pos = 0
            pax: dict[bytes, bytes] = {}
            while pos + 512 <= end:
                f.seek(pos)
                hdr = f.read(512)
                if hdr == _ZERO_BLOCK:
                    break
                if len(hdr) < 512 or hdr[156:157] not in (b"0", b"\0", b"x") or hdr[124] & 0x80:
                    return None
                chk = hdr[148:156].split(b"\0", 1)[0].strip()
                if not chk or int(chk, 8) != sum(hdr[:148]) + 256 + sum(hdr[156:]):
                    return None
                size = int(hdr[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
                if hdr[156:157] == b"x":  # a PAX header for the next member (Python's tarfile writes mtime here)
                    if pax or size > 4096 or pos + 512 + size > end:
                        return None
                    pax = _pax_records(f.read(size))
                    if pax is None or set(pax) - {b"path", b"mtime", b"atime", b"ctime"}:
                        return None
                    pos += 512 + (size + 511) // 512 * 512
                    continue
                name = hdr[:100].split(b"\0", 1)[0]
                if hdr[257:263] == b"ustar\x00" and hdr[345] != 0:  # POSIX prefix (GNU puts times there)
                    name = hdr[345:500].split(b"\0", 1)[0] + b"/" + name
                name = pax.pop(b"path", name)
                pax = {}
                text = name.decode("utf-8", "surrogateescape")
                ts = layout.parse_frame_name(text)
                if ts is None or pos + 512 + size > end:
                    return None
                canonical = canonical and text == layout.frame_name(ts)
                stamps.append(ts)
                offsets.append(pos + 512)
                sizes.append(size)
                pos += 512 + (size + 511) // 512 * 512
            else:
                if pos != end:
                    return None
    except (OSError, ValueError):
        return None
    return (np.array(stamps, dtype=np.int64), np.array(offsets, dtype=np.int64), np.array(sizes, dtype=np.int64),
            canonical)


#: A folder camera's file names joined by '/', each followed by one: the rule of layout.parse_frame_name
_FRAME_NAMES = re.compile(r"(?:[0-9]{1,20}\.(?:jpeg|jpg)/)+")
_POWERS_OF_TEN = 10 ** np.arange(18, -1, -1, dtype=np.int64)


def _frame_stamps(names: list[str]) -> np.ndarray | None:
    """The stamps (int64 ns) of a folder's frame file names, or None when one breaks the rule of
    :func:`layout.parse_frame_name` (``<1-20 digits>.jpeg|.jpg``). Names all as long as the first and
    alike but for their digits (what a recorder writes) are checked and read as one array of bytes; any
    others by one regex over them all and one by one (a value beyond int64 then raises OverflowError,
    as it always did)."""
    joined = "/".join(names) + "/"  # '/' cannot occur in a file name
    first = names[0]
    digits, width = first.find("."), len(first) + 1
    if 0 < digits <= 19 and first[digits + 1:] in ("jpeg", "jpg") and len(joined) == width * len(names) \
            and joined.isascii():
        raw = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).reshape(len(names), width)
        value = raw[:, :digits] - np.uint8(0x30)  # a byte below '0' wraps above 9
        # every row one name: digits, then the first name's extension and the separator
        if (raw[:, digits:] == np.frombuffer(first[digits:].encode("ascii") + b"/", dtype=np.uint8)).all() and (
                value <= 9).all() and (digits < 19 or value[:, 0].max() <= 8):  # <= 8999999999999999999: no overflow
            return value.astype(np.int64) @ _POWERS_OF_TEN[-digits:]
    if not _FRAME_NAMES.fullmatch(joined):
        return None
    stems = joined.replace(".jpeg/", "/").replace(".jpg/", "/")[:-1]
    return np.array(list(map(int, stems.split("/"))), dtype=np.int64)


def _pax_records(data: bytes) -> dict[bytes, bytes] | None:
    """The ``LEN key=value`` records (newline-ended) of a PAX header, or None when malformed."""
    out, i = {}, 0
    while i < len(data) and data[i:i + 1] != b"\0":
        sp = data.find(b" ", i)
        if sp < 0 or not data[i:sp].isdigit():
            return None
        n = int(data[i:sp])
        rec = data[sp + 1:i + n]
        if n <= 0 or not rec.endswith(b"\n") or b"=" not in rec:
            return None
        k, _, v = rec[:-1].partition(b"=")
        out[k] = v
        i += n
    return out


def _sorted_unique(path, stamps: np.ndarray, *others: np.ndarray):
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    dup = np.flatnonzero(np.diff(stamps) == 0)
    if dup.size:
        raise CameraError(path, f"timestamp {stamps[dup[0]]} appears twice")
    return (stamps, *(o[order] for o in others))


class FrameSequence:
    """What every camera shares over its sorted int64 ns ``timestamps``: the frame count and lazy
    :class:`Frame` objects (nothing read or decoded). :class:`Camera` and the decoded cameras of
    :mod:`.video_camera` build on it; each defines ``name``, ``timestamps`` and how a frame is read."""

    name: str
    timestamps: np.ndarray

    @property
    def num_frames(self) -> int:
        return len(self.timestamps)

    def __len__(self) -> int:
        return len(self.timestamps)

    def load_timestamps(self) -> list[float]:
        """Frame timestamps as a list of float seconds (Unix seconds for recorded data, as openarm_dataset
        returns them; from the episode's start for LeRobot data); :attr:`timestamps` holds the exact int64
        nanoseconds."""
        return (self.timestamps / 1e9).tolist()

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


class Camera(FrameSequence):
    """The frames of one camera in one episode, from a folder or a tar archive.

    ``timestamps`` are int64 nanoseconds, sorted; ``get_frame(i)`` is lazy (nothing decoded).
    """

    def __init__(self, name: str, path: str | os.PathLike):
        """``path`` is the folder form (``.../cameras/head``); a sibling ``head.tar`` is used if the folder is absent."""
        self.name = name
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._open(Path(path))

    def _open(self, folder: Path, tar: Path | None = None) -> None:
        """Index the folder ``folder`` or, if it is absent (or ``tar`` is given), the archive."""
        name = self.name
        explicit = tar is not None
        tar = tar if explicit else folder.with_name(folder.name + layout.TAR_SUFFIX)
        if not explicit and folder.is_dir():
            self.format = "dir"
            self.path = folder
            self._names, self.timestamps = self._index_dir(folder)
            self._offsets = self._sizes = None
        elif tar.is_file():
            self.format = "tar"
            self.path = tar
            st = tar.stat()
            self.timestamps, self._offsets, self._sizes, self._canonical = _tar_index(str(tar), st.st_mtime_ns,
                                                                                      st.st_size, st.st_ino)
            self._names = None
        else:
            raise CameraError(folder, f"camera {name!r} has neither a folder nor {tar.name}")

    @staticmethod
    def _index_dir(folder: Path) -> tuple[list[str], np.ndarray]:
        with os.scandir(folder) as it:
            entries = list(it)
        names = [e.name for e in entries if e.is_file(follow_symlinks=False)]
        # every name checked and read at once; the per-name parse_frame_name below only runs to name
        # the first bad entry
        stamps_arr = _frame_stamps(names) if names and len(names) == len(entries) else None
        if stamps_arr is not None:
            order = np.argsort(stamps_arr, kind="stable")
            stamps_arr = stamps_arr[order]
            if len(stamps_arr) > 1 and not (stamps_arr[1:] != stamps_arr[:-1]).all():
                _sorted_unique(folder, stamps_arr)  # raises, naming the first repeated timestamp
            return list(map(names.__getitem__, order.tolist())), stamps_arr
        names, stamps = [], []
        for entry in entries:
            ts = layout.parse_frame_name(entry.name)
            if ts is None or not entry.is_file(follow_symlinks=False):
                raise CameraError(Path(folder) / entry.name, "is not a regular <integer>.jpeg frame file")
            names.append(entry.name)
            stamps.append(ts)
        stamps_arr, order = _sorted_unique(folder, np.array(stamps, dtype=np.int64), np.arange(len(names)))
        return [names[i] for i in order], stamps_arr

    @property
    def base_path(self) -> Path:
        """The folder form of the camera's path (``.../cameras/head``), as openarm_dataset names it."""
        return self.path.with_suffix("") if self.format == "tar" else self.path

    @property
    def tar_path(self) -> Path | None:
        """The tar archive of a tar camera, else None. Assignable as in openarm_dataset: a path makes
        the camera read that archive, None the folder form (:attr:`base_path`)."""
        return self.path if self.format == "tar" else None

    @tar_path.setter
    def tar_path(self, value: str | os.PathLike | None) -> None:
        base = self.base_path
        self.close()
        if value is None:
            if not base.is_dir():
                raise CameraError(base, f"camera {self.name!r}: no folder to read instead of its archive")
            self._open(base)
        else:
            tar = Path(value)
            if not tar.is_file():
                raise CameraError(tar, f"camera {self.name!r}: no such tar archive")
            self._open(base, tar)

    def frame_size(self, index: int) -> int:
        """Size in bytes of frame ``index``."""
        if self.format == "dir":
            return (self.path / self._names[index]).stat().st_size
        return int(self._sizes[index])

    def write(self, output: str | os.PathLike, format: str = "dir") -> Path:
        """Write this camera's frames (bytes unchanged) to ``output`` as a folder of ``<ns>.jpeg``
        (``format="dir"``; ``output`` must not exist) or one uncompressed tar ``output.tar``
        (``format="tar"``). Atomic either way: a temporary sibling renamed into place. Returns the path."""
        output = Path(output)
        frames = ((int(ts), self.read_bytes(i)) for i, ts in enumerate(self.timestamps))
        if format == "tar":
            dest = output if output.suffix == layout.TAR_SUFFIX else output.with_name(output.name + layout.TAR_SUFFIX)
            dest.parent.mkdir(parents=True, exist_ok=True)
            write_camera_tar(dest, frames)
            return dest
        if format != "dir":
            raise ValueError(f"Unsupported format: {format!r} (camera formats: dir, tar)")
        if output.exists():
            raise CameraError(output, "already exists (refusing to overwrite)")
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = tmp_name(output)
        try:
            write_camera_dir(tmp, frames)
            commit_dir(tmp, output)
        except BaseException:
            remove_tree(tmp)
            raise
        return output

    def member_spans(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(data offsets, sizes) in bytes of every frame of a tar camera, in frame order; None for a folder."""
        return None if self.format == "dir" else (self._offsets, self._sizes)

    def names_are_canonical(self) -> bool:
        """True when every frame file is named ``layout.frame_name(timestamp)`` (a folder camera's file
        can then be opened from its timestamp alone)."""
        if self.format != "dir":
            return False
        return all(name == layout.frame_name(ts) for name, ts in zip(self._names, self.timestamps.tolist()))

    def frame_names(self) -> list[str]:
        """The frame files' names (a tar's member names), in time order."""
        if self.format == "dir":
            return list(self._names)
        if self._canonical:  # known from the index: no second read of the headers
            return [layout.frame_name(ts) for ts in self.timestamps.tolist()]
        try:
            with tarfile.open(self.path, mode="r:") as tf:
                names = tf.getnames()
        except (tarfile.TarError, OSError) as e:
            raise CameraError(self.path, f"unreadable tar archive ({e})") from None
        stamps = [layout.parse_frame_name(n) for n in names]
        return [names[i] for i in sorted(range(len(names)), key=stamps.__getitem__)]

    def frame_path(self, index: int) -> Path:
        if self.format == "dir":
            return self.path / self._names[index]
        return self.path / layout.frame_name(self.timestamps[index])

    def load_frame(self, index: int) -> np.ndarray:
        """Frame ``index`` decoded to an HxWx3 uint8 RGB array."""
        return decode_jpeg(self.read_bytes(index), self.frame_path(index))

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
