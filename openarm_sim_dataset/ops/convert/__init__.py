"""Converters: take a :class:`~openarm_sim_dataset.dataset.Dataset`, write a new dataset elsewhere.

``openarm`` (any layout -> 0.4.0), ``lerobot_v21`` / ``lerobot_v30`` / gr00t (LeRobot layouts with
H.264 video from :mod:`.video`), ``rrd`` (one Rerun recording, :mod:`.rerun`), ``robot_eval_logger``
(robot-eval-logger 0.0.1's LocalStorage, :mod:`.robot_eval_logger`). The Dataset does not import them:
this package registers :func:`write_format` in :mod:`openarm_sim_dataset.formats`, where
``Dataset.write`` finds it. Episode selection by the validator's ``valid`` flags and by ``success`` is
shared (:mod:`.source`).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from openarm_sim_dataset.core import formats
from openarm_sim_dataset.core.dataset import Dataset

from .lerobot import LeRobotOptions, to_lerobot
from .openarm import to_openarm
from .rerun import to_rrd
from .robot_eval_logger import to_robot_eval_logger
from .source import metadata_0_4_0, remap_tasks, select_episodes

FORMATS = ("openarm", "lerobot_v2.1", "lerobot_v3.0", "gr00t", "rrd", "robot_eval_logger")

__all__ = ["FORMATS", "metadata_0_4_0", "remap_tasks", "select_episodes", "write_format"]


def write_format(ds: Dataset, out, format: str, camera_format: str = "dir", **options):
    """``Dataset.write(out, format=...)`` of openarm_dataset: ``lerobot_v2.1``, ``lerobot_v3.0``, ``gr00t``
    (``options``: :class:`~.lerobot.LeRobotOptions` fields, plus openarm_dataset's ``smoothing_cutoff``,
    ``train_split``, ``success_only``, ``state``), ``rrd`` or ``robot_eval_logger`` (``options``: ``step_hz``,
    ``valid_only``, ``success_only``, ``exclude_knocked``). Returns the output path."""
    if format in ("lerobot_v2.1", "lerobot_v3.0", "gr00t"):
        known = {f.name for f in fields(LeRobotOptions)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unexpected options for {format}: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        to_lerobot(ds, out, format, LeRobotOptions(**options))
    elif format == "rrd":
        to_rrd(ds, out, quiet=True, **options)
    elif format == "robot_eval_logger":
        to_robot_eval_logger(ds, out, **options)
    elif format == "openarm":
        to_openarm(ds, out, camera_format=camera_format, **options)
    else:
        raise ValueError(f"Unsupported format: {format!r} (formats: {', '.join(FORMATS)})")
    return Path(out)


formats.register(FORMATS, write_format)
