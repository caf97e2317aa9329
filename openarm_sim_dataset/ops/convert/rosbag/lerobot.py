"""A bag to a LeRobot dataset: the bag becomes a 0.4.0 dataset first (:mod:`.convert`, in a temporary
folder beside the output, removed after), whose frames LeRobot's export then drives by a reference topic.

Frame i is the reference topic's i-th message (its stamp); every other stream and camera is taken as of
that time (its latest sample at or before it, never a later one), and a frame whose inputs are older than
``max_age`` seconds is dropped; the summary says per episode how many and why
(:mod:`..lerobot_common`). The reference defaults to the first camera (by name), else the right arm's
observation; ``fps`` to the reference's median rate, rounded; ``max_age`` to two periods of the slowest
stream.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import OutputExistsError
from openarm_sim_dataset.core.writer import check_output

from ..lerobot import LeRobotOptions, to_lerobot
from .bag import BagError
from .convert import BagConversion, bag_to_openarm


def _reference(ds: Dataset, conv: BagConversion, topic: str | None) -> str:
    """The export's reference stream (``cameras/<name>``, ``obs/arms/<side>``) for a bag topic."""
    m = conv.map
    if topic is None:
        if ds.camera_names:
            return f"cameras/{sorted(ds.camera_names)[0]}"
        sides = [e for e in ("right", "left") if ds.meta.frequency("obs", "arms", e) is not None]
        if not sides:
            raise BagError(conv.reports[0].bag, "no camera and no arm observation to drive the LeRobot frames")
        return f"obs/arms/{sides[0]}"
    tm = m.topics.get(topic)
    if tm is None:
        raise BagError(conv.reports[0].bag, f"reference: topic {topic} is not mapped to a stream")
    if tm.to == "camera":
        return f"cameras/{tm.name}"
    if tm.arm is not None:
        return f"{tm.to}/arms/{tm.arm}"
    sides = [e for e in ("right", "left") if ds.meta.frequency(tm.to, "arms", e) is not None]
    if not sides:
        raise BagError(conv.reports[0].bag, f"reference: topic {topic} gave no arm rows")
    return f"{tm.to}/arms/{sides[0]}"


def _rate(ds: Dataset, reference: str) -> float | None:
    parts = reference.split("/")
    if parts[0] == "cameras":
        return (ds.meta.frequencies.get("cameras") or {}).get(parts[1])
    return ds.meta.frequency(parts[0], parts[1], parts[2])


def _slowest_period(ds: Dataset) -> float | None:
    rates = list((ds.meta.frequencies.get("cameras") or {}).values())
    for kind in ("obs", "action"):
        for sides in (ds.meta.frequencies.get(kind) or {}).values():
            rates += list(sides.values()) if isinstance(sides, dict) else [sides]
    rates = [float(r) for r in rates if r]
    return 1.0 / min(rates) if rates else None


def bag_to_lerobot(source: str | os.PathLike, out: str | os.PathLike, fmt: str = "lerobot_v3.0",
                   map_file: str | os.PathLike | None = None, split_on: str | None = None,
                   reference: str | None = None, max_age: float | None = None, fps: int | None = None,
                   task: str = "", quiet: bool = True, **options) -> tuple[BagConversion, object]:
    """Convert the bag(s) at ``source`` into a new LeRobot dataset ``out`` (``fmt``: lerobot_v2.1,
    lerobot_v3.0, gr00t). ``reference``/``max_age``/``split_on`` override the map's. Returns (the bag
    conversion: reports per bag, the map; the export's Summary)."""
    out = Path(out)
    check_output(out, [source])
    if out.exists() or out.is_symlink():
        raise OutputExistsError(out, "already exists (the output must be a new folder)")
    work = Path(tempfile.mkdtemp(prefix=".tmp-bag-", dir=out.parent))
    try:
        conv = bag_to_openarm(source, work / "openarm", map_file=map_file, split_on=split_on, task=task)
        ds = Dataset(work / "openarm")
        ref = _reference(ds, conv, reference or conv.map.reference)
        rate = _rate(ds, ref)
        if fps is None:
            if not rate:
                raise BagError(conv.reports[0].bag, f"reference {ref}: too few messages for a rate; give --fps")
            fps = max(1, round(rate))
        age = max_age if max_age is not None else conv.map.max_age
        if age is None:
            slow = _slowest_period(ds)
            age = round(2 * slow, 3) if slow else None
        opts = LeRobotOptions(fps=fps, reference=ref, max_age_s=age, **options)
        summary = to_lerobot(ds, out, fmt, opts, quiet=quiet)
        summary.notes.insert(0, f"frames: {ref} at {fps} fps, inputs at most {age:g} s old" if age else
                                f"frames: {ref} at {fps} fps")
        return conv, summary
    finally:
        shutil.rmtree(work, ignore_errors=True)
