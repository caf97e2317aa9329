"""One writer per dataset folder: an ``flock`` on a hidden file *beside* the output.

Used by every producer that extends a dataset in place (``dataset-generate``, the live recorder of
:mod:`.record`), so that two of them never interleave commits or remove each other's temporary
episodes. The kernel releases an ``flock`` when its holder dies (SIGKILL included), so the lock is
never stuck, and the dataset folder itself holds only data.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import DatasetError


class LockHeldError(DatasetError):
    """Another process is writing this dataset."""


def lock_path(out: str | os.PathLike) -> Path:
    """The lock file of output ``out``: a hidden sibling ``.<name>.lock`` (symbolic links resolved, so
    two spellings of one folder share one lock)."""
    out = Path(out).resolve()
    return out.with_name(f".{out.name}.lock")


class OutputLock:
    """Exclusive right to write one output folder, held as an ``flock`` on :func:`lock_path`.

    The kernel releases an ``flock`` when its holder dies (SIGKILL included), so the lock is never
    stuck; a file left by a killed holder is reused. On :meth:`release` the holder unlinks the file
    *while still holding the lock*; a process that opened the old file and acquires the flock on it
    after that sees that the path no longer names the inode it locked, and retries on a fresh file
    (the usual check that makes removing a lock file safe). The file holds the holder's pid (for
    people; the lock itself is the flock). A refusal raises :attr:`error` (a subclass may name its own).
    """

    error: type[DatasetError] = LockHeldError

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        self.path = lock_path(out)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self.error(self.out, "another process is writing this dataset (lock held); "
                                           "try again when it ends") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # its holder removed it after we opened it: lock the current file instead
        self.fd = fd
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        """Remove the lock file, then release the lock (in that order: see the class doc)."""
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
