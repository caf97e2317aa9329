"""LeRobot exports: ``lerobot_v2.1`` and ``gr00t`` (:mod:`.lerobot_v21`), ``lerobot_v3.0``
(:mod:`.lerobot_v30`). :func:`to_lerobot` picks the layout's writer; what the layouts share (causal
resampling, named vectors, stats, features) is :mod:`.lerobot_common`, whose options and per-episode
sampling are importable from here too.
"""

from __future__ import annotations

import os
from pathlib import Path

from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.report import Summary

from .lerobot_common import LeRobotOptions, sample_episode
from .lerobot_v21 import write_v21
from .lerobot_v30 import write_v30

__all__ = ["LeRobotOptions", "sample_episode", "to_lerobot"]


def to_lerobot(ds: Dataset, out: str | os.PathLike, fmt: str, opts: LeRobotOptions | None = None,
               quiet: bool = True) -> Summary:
    """Export ``ds`` as ``fmt`` (``lerobot_v2.1``, ``gr00t`` or ``lerobot_v3.0``) into a new folder ``out``."""
    opts = opts or LeRobotOptions()
    if fmt in ("lerobot_v2.1", "gr00t"):
        return write_v21(ds, Path(out), opts, gr00t=(fmt == "gr00t"), quiet=quiet)
    if fmt == "lerobot_v3.0":
        return write_v30(ds, Path(out), opts, quiet=quiet)
    raise ValueError(f"unknown LeRobot format {fmt!r} (lerobot_v2.1, lerobot_v3.0, gr00t)")
