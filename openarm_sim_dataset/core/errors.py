"""Exceptions raised by openarm_sim_dataset.

Every exception about bad input names the file it concerns, so that a command-line tool can print
``str(error)`` as its one-line message.
"""

from __future__ import annotations

import os


class DatasetError(Exception):
    """Base class: the input cannot be used. ``path`` is the file or folder concerned."""

    #: Truthy on the class so that an error raised in a ``torch.utils.data.DataLoader`` worker is raised
    #: again in the main process as its own type, ``type(message=...)`` (torch's ``ExceptionWrapper``),
    #: and there made one line again (:func:`_from_worker`), not the worker's traceback.
    message = "the input cannot be used"

    def __init__(self, path: str | os.PathLike | None = None, message: str = ""):
        if path is None and _WORKER_TRACEBACK in message:
            path, message = _from_worker(message)
        self.path = None if path is None else os.fspath(path)
        # one line, always: a key or a value quoted from a file may hold a line break
        message = message.replace("\r", "\\r").replace("\n", "\\n")
        self.message = message
        super().__init__(f"{self.path}: {message}" if self.path else message)


_WORKER_TRACEBACK = "\nOriginal Traceback (most recent call last):"


def _from_worker(text: str) -> tuple[str | None, str]:
    """(path, message) of the error a DataLoader worker raised, from the text torch hands the main process:
    ``Caught <Type> in DataLoader worker process <n>.`` then the worker's traceback, whose last line is
    ``<module>.<Type>: <path>: <message>``. The path is what precedes the first ``": "`` when it names an
    existing file or folder (a frame inside one, ``<file>#...``, counts as its file)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else text
    head, sep, rest = last.partition(": ")
    if sep and "Error" in head.rsplit(".", 1)[-1]:
        last = rest
    where = lines[0].removeprefix("Caught ").split(" in ", 1)[-1].rstrip(".") if lines else ""
    path, sep, message = last.partition(": ")
    if sep and os.path.exists(path.split("#", 1)[0]):
        return path, f"{message} (in {where})" if where else message
    return None, f"{last} (in {where})" if where else last


# The bad-value errors below are also ``ValueError``s: openarm_dataset raises ValueError for an unknown
# state.parquet column, an unknown embodiment id or a camera format it does not know, and code ported
# from it catches that.


class MetadataError(DatasetError, ValueError):
    """metadata.yaml (or episodes.jsonl) is missing, unreadable or breaks the schema."""


class UnsafeNameError(DatasetError, ValueError):
    """An episode id, camera or embodiment name could escape the dataset folder."""


class StreamError(DatasetError, ValueError):
    """A parquet stream is unreadable, has the wrong schema, or is empty where data is needed."""


class CameraError(DatasetError, ValueError):
    """A camera folder or tar archive is missing, unsafe or holds frames that are not JPEG."""


class OutputExistsError(DatasetError):
    """A writer was asked to create an output that already exists."""


#: how a Git LFS pointer file begins (a clone without `git lfs pull` holds these in place of the content)
LFS_POINTER_START = b"version https://git-lfs.github.com/spec/v1"
#: what a file that is an LFS pointer is called in an error (the content was never fetched)
LFS_POINTER = "a Git LFS pointer, not the file: its content was never fetched (git lfs pull)"


def is_lfs_pointer(path) -> bool:
    """Whether the file at ``path`` is a Git LFS pointer (a small text file naming content kept elsewhere)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(LFS_POINTER_START)) == LFS_POINTER_START
    except OSError:
        return False
