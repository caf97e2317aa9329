"""Camera frames written as they come: ``<ns>.jpeg`` files in a folder or members appended to one
uncompressed tar with reproducible headers (what :class:`.camera.Camera` reads)."""

from __future__ import annotations

import os
import shutil
import tarfile
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from . import layout
from .atomic import atomic_write_with


class FrameWriter:
    """Frames of one camera written as they come: ``<ns>.jpeg`` files in a folder (``camera_format``
    ``dir``) or members appended to one uncompressed tar (``tar``, reproducible headers: mtime 0, mode
    0644; the bytes :mod:`tarfile` writes for the same members). Nothing here is atomic: the target lies
    in an episode's temporary folder, or the caller renames it (:func:`write_camera_tar`). The caller
    gives increasing, unique timestamps."""

    def __init__(self, path: Path, camera_format: str = "dir"):
        self.path = Path(path)
        self.format = camera_format
        self.frames = 0
        self.bytes = 0
        self._stamps = array("q")
        self._sizes = array("q")
        self._offsets = array("q")  # tar: where each member's header begins
        self._tar = None
        if camera_format == "dir":
            self.path.mkdir(parents=True)
        elif camera_format == "tar":
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tar = open(self.path, "x+b")
        else:
            raise ValueError(f"camera_format must be 'dir' or 'tar', not {camera_format!r}")

    def write(self, timestamp_ns: int, data: bytes) -> Path:
        """Store one JPEG frame stamped ``timestamp_ns`` (int ns); returns the file (or the archive)."""
        name = layout.frame_name(timestamp_ns)
        if self._tar is None:
            out = self.path / name
            out.write_bytes(data)
        else:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            self._offsets.append(self._tar.tell())
            pad = -len(data) % tarfile.BLOCKSIZE
            self._tar.write(info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape"))
            self._tar.write(data)
            if pad:
                self._tar.write(bytes(pad))
            out = self.path
        self._stamps.append(int(timestamp_ns))
        self._sizes.append(len(data))
        self.frames += 1
        self.bytes += len(data)
        return out

    @property
    def stamps(self) -> np.ndarray:
        """The stamps (int64 ns) of the frames written and kept, in order (a copy)."""
        return np.array(self._stamps, dtype=np.int64)

    def trim(self, lo_ns: int, hi_ns: int) -> int:
        """Remove the frames stamped before ``lo_ns`` or after ``hi_ns`` (before :meth:`close`); returns
        how many. Trailing tar members are cut off in place; leading ones make the archive be copied
        without them (its frames after the first kept one, once)."""
        stamps = np.frombuffer(self._stamps, dtype=np.int64) if len(self._stamps) else np.empty(0, np.int64)
        first = int(np.searchsorted(stamps, lo_ns, side="left"))
        end = max(first, int(np.searchsorted(stamps, hi_ns, side="right")))
        if first == 0 and end == len(stamps):
            return 0
        if self._tar is None:
            for ts in [*stamps[:first].tolist(), *stamps[end:].tolist()]:
                (self.path / layout.frame_name(ts)).unlink()
        else:
            if end < len(stamps):
                self._tar.truncate(self._offsets[end])
                self._tar.seek(self._offsets[end])
            if first:
                start = self._offsets[first] if first < end else self._tar.tell()
                tmp = self.path.with_name(self.path.name + ".trim")
                with open(tmp, "xb") as out:
                    self._tar.flush()
                    self._tar.seek(start)
                    shutil.copyfileobj(self._tar, out, 1 << 20)
                self._tar.close()
                os.replace(tmp, self.path)
                self._tar = open(self.path, "r+b")
                self._tar.seek(0, os.SEEK_END)
                self._offsets = array("q", [o - start for o in self._offsets[first:end]])
            else:
                self._offsets = self._offsets[:end]
        dropped = len(stamps) - (end - first)
        self.bytes = sum(self._sizes[first:end])
        self._stamps, self._sizes = self._stamps[first:end], self._sizes[first:end]
        self.frames -= dropped
        return dropped

    def close(self) -> None:
        """Finish the archive as :mod:`tarfile` does (two zero blocks, padded to a record); a folder
        needs nothing."""
        if self._tar is not None:
            end = self._tar.tell() + 2 * tarfile.BLOCKSIZE
            self._tar.write(bytes(2 * tarfile.BLOCKSIZE + (-end % tarfile.RECORDSIZE)))
            self._tar.close()
            self._tar = None


def write_camera_dir(out: Path, frames: Iterator[tuple[int, bytes]]) -> None:
    """Write frames ``(timestamp_ns, jpeg_bytes)`` as ``out/<ns>.jpeg`` files (out must not exist)."""
    w = FrameWriter(out, "dir")
    for ts, data in frames:
        w.write(ts, data)


def write_camera_tar(out: Path, frames: Iterator[tuple[int, bytes]]) -> None:
    """Write frames as one uncompressed tar ``out`` with reproducible headers (mtime 0, mode 0644)."""

    def write(tmp: Path) -> None:
        w = FrameWriter(tmp, "tar")
        try:
            for ts, data in frames:
                w.write(ts, data)
        finally:
            w.close()

    atomic_write_with(out, write)
