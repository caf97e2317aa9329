"""Joint values from several topics into one arm's rows: as of each time, the latest value of every
joint (never a later one).

An arm's row holds joint1..7 and the gripper. They can come from one message (a ``JointState`` of every
joint) or from several topics at their own rates (a forward controller's seven joints at 100 Hz, the
gripper's command at 30 Hz): the rows are then the times of the topic that gives most of the joints, each
other joint as of that time. Rows before every column has its first value are left out (counted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openarm_sim_dataset.core import layout


@dataclass
class Column:
    """One joint's samples: int64 ns ``times`` (strictly increasing) and per attribute float64 values."""

    times: np.ndarray
    values: dict[str, np.ndarray]


@dataclass
class Merged:
    """One arm's rows: ``times`` int64 ns, per attribute (``qpos``, ``qvel``, ``qtorque``) (N, 8) float32 in
    :data:`layout.ARM_JOINTS` order; ``before`` rows left out because a column had no value yet."""

    times: np.ndarray
    attributes: dict[str, np.ndarray]
    before: int


def increasing(times: np.ndarray) -> np.ndarray:
    """Mask of the samples kept so that times strictly increase: a sample not after the last kept one
    (a header stamp that went back, or repeated) is dropped."""
    if len(times) == 0:
        return np.zeros(0, bool)
    running = np.maximum.accumulate(times)
    keep = np.ones(len(times), bool)
    keep[1:] = times[1:] > running[:-1]
    return keep


def merge_arm(columns: dict[str, Column], primary: str | None = None) -> Merged | None:
    """The rows of one arm from its joints' columns (``joint1`` .. ``gripper``; every joint of
    :data:`layout.ARM_JOINTS` needed, else None). The rows are the times of ``primary`` (a joint of the
    topic that gives most of the arm's joints; default joint1); every other column is taken as of each
    row (its latest value at or before it). ``qvel``/``qtorque`` are kept only where every joint has them."""
    if any(j not in columns for j in layout.ARM_JOINTS):
        return None
    cols = [columns[j] for j in layout.ARM_JOINTS]
    times = columns[primary or layout.ARM_JOINTS[0]].times
    attrs = [a for a in ("qpos", "qvel", "qtorque") if all(a in c.values for c in cols)]
    idx = [np.arange(len(times)) if c.times is times else np.searchsorted(c.times, times, side="right") - 1
           for c in cols]
    start = int(max(np.searchsorted(times, c.times[0]) for c in cols)) if len(times) else 0
    out = {a: np.stack([c.values[a][i[start:]] for c, i in zip(cols, idx)], axis=1).astype(np.float32, copy=False) for a in attrs}
    return Merged(times[start:].astype(np.int64), out, start)
