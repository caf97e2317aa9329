"""Joint values from several topics into one arm's rows: as of each time, the latest value of every
joint (never a later one).

An arm's row holds joint1..7 and the gripper. They can come from one message (a ``JointState`` of every
joint) or from several topics at their own rates (a forward controller's seven joints at 100 Hz, the
gripper's command at 30 Hz): the rows are then the times of the topic that gives most of the joints, each
other joint as of that time. Rows before every column has its first value are left out (counted). The rows
are made a chunk at a time (:meth:`Merged.chunks`), reading from each topic only the values the chunk needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from openarm_sim_dataset.core import layout

#: rows of an arm made (and written) at once
CHUNK_ROWS = 1 << 14
ATTRIBUTES = ("qpos", "qvel", "qtorque")


class Source(Protocol):
    """A topic's kept messages (:class:`.values.TopicValues`): ``times`` int64 ns strictly increasing,
    ``attributes`` every message gave, ``take(attribute, rows)`` -> (len(rows), width) float32."""

    times: np.ndarray
    attributes: tuple[str, ...]

    def take(self, attribute: str, rows: np.ndarray) -> np.ndarray: ...


@dataclass
class Column:
    """One joint: value ``index`` of each of ``source``'s messages."""

    source: Source
    index: int


@dataclass
class Merged:
    """One arm's rows: ``times`` int64 ns, the ``attributes`` stored (of ``qpos``, ``qvel``, ``qtorque``),
    ``before`` rows left out because a column had no value yet; :meth:`chunks` makes the values."""

    times: np.ndarray
    attributes: tuple[str, ...]
    before: int
    columns: list[Column]
    primary: Source

    def chunks(self, rows: int | None = None) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """(times, {attribute: (k, 8) float32 in :data:`layout.ARM_JOINTS` order}) of ``rows`` rows at a time
        (default :data:`CHUNK_ROWS`)."""
        rows = rows or CHUNK_ROWS
        sources: list[Source] = []
        for c in self.columns:
            if all(s is not c.source for s in sources):
                sources.append(c.source)
        for lo in range(0, len(self.times), rows):
            t = self.times[lo : lo + rows]
            first = self.before + lo
            # each row's message of every topic: the latest at or before it (every topic has one by then)
            picks = [np.arange(first, first + len(t)) if s is self.primary else
                     np.searchsorted(s.times, t, side="right") - 1 for s in sources]
            out = {}
            for a in self.attributes:
                values = np.empty((len(t), len(self.columns)), np.float32)
                for s, rows_of in zip(sources, picks):
                    taken = s.take(a, rows_of)
                    for j, c in enumerate(self.columns):
                        if c.source is s:
                            values[:, j] = taken[:, c.index]
                out[a] = values
            yield t, out


def merge_arm(columns: dict[str, Column], primary: str | None = None) -> Merged | None:
    """The rows of one arm from its joints' columns (``joint1`` .. ``gripper``; every joint of
    :data:`layout.ARM_JOINTS` needed, else None). The rows are the times of ``primary`` (a joint of the
    topic that gives most of the arm's joints; default joint1); every other column is taken as of each
    row (its latest value at or before it). ``qvel``/``qtorque`` are kept only where every joint has them."""
    if any(j not in columns for j in layout.ARM_JOINTS):
        return None
    cols = [columns[j] for j in layout.ARM_JOINTS]
    source = columns[primary or layout.ARM_JOINTS[0]].source
    times = source.times
    attrs = tuple(a for a in ATTRIBUTES if all(a in c.source.attributes for c in cols))
    start = int(max(np.searchsorted(times, c.source.times[0]) for c in cols)) if len(times) else 0
    return Merged(times[start:].astype(np.int64), attrs, start, cols, source)
