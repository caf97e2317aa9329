"""One topic's values in one episode, kept on disk as they come, so that a bag's length costs disk, not memory.

A topic's times stay in memory (8 bytes a message: what the merge searches); its values go to one file of
float32 rows per attribute (``qpos``, ``qvel``, ``qtorque``) in a scratch folder of the output's temporary
root, appended a block at a time, and are read back only the rows a chunk of the merge needs
(:meth:`TopicValues.take`, through a memory map that is dropped after each read).
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np

#: bytes of one attribute's values held before they are appended to its file
BLOCK_BYTES = 1 << 20


class TopicValues:
    """The kept messages of one topic in one episode. :meth:`add` keeps a message only if its time is
    after the last kept one's (a header stamp that went back or repeated is dropped and counted in
    :attr:`dropped`), so :attr:`times` strictly increase. An attribute is kept only if every kept message
    gave it, always with the same number of values (:attr:`attributes`). ``folder``: where the value files
    go (created on the first block; removed by the caller with the episode's scratch)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._times = array("q")
        self._blocks: dict[str, array] = {}
        self._counts: dict[str, int] = {}
        self.width: dict[str, int] = {}
        self.names: tuple[str, ...] | None = None
        self.dropped = 0

    def add(self, t: int, values: dict[str, np.ndarray]) -> None:
        """One message at int ns ``t`` with its values per attribute (1-D, any float dtype; stored float32)."""
        if self._times and t <= self._times[-1]:
            self.dropped += 1
            return
        self._times.append(t)
        for attribute, v in values.items():
            v = np.asarray(v, np.float32)
            if self.width.setdefault(attribute, v.size) != v.size:
                continue  # then it has fewer rows than times: not kept
            block = self._blocks.setdefault(attribute, array("f"))
            block.frombytes(v.tobytes())
            self._counts[attribute] = self._counts.get(attribute, 0) + 1
            if len(block) * 4 >= BLOCK_BYTES:
                self._write(attribute)

    def _path(self, attribute: str) -> Path:
        return self.folder / f"{attribute}.f32"

    def _write(self, attribute: str) -> None:
        block = self._blocks[attribute]
        if not block:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self._path(attribute), "ab") as f:
            block.tofile(f)
        self._blocks[attribute] = array("f")

    def finish(self) -> None:
        """Append what is still held to the files (then every value is on disk)."""
        for attribute in list(self._blocks):
            self._write(attribute)

    @property
    def times(self) -> np.ndarray:
        """int64 ns of the kept messages, strictly increasing (a view of the buffer)."""
        return np.frombuffer(self._times, np.int64) if self._times else np.zeros(0, np.int64)

    @property
    def attributes(self) -> tuple[str, ...]:
        n = len(self._times)
        return tuple(a for a, c in self._counts.items() if c == n)

    def take(self, attribute: str, rows: np.ndarray) -> np.ndarray:
        """(len(rows), width) float32: the values of the kept messages ``rows`` (after :meth:`finish`)."""
        width = self.width[attribute]
        if not len(rows):
            return np.zeros((0, width), np.float32)
        # every value given is on disk by now: a row per message that gave the attribute
        mapped = np.memmap(self._path(attribute), np.float32, "r", shape=(self._counts[attribute], width))
        try:
            return mapped[rows]
        finally:
            del mapped
