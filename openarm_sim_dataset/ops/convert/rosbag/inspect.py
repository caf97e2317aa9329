"""``dataset-convert --inspect BAG``: what a bag holds (topics, types, counts, rates, time span) and the map
the converter would use, as a file to edit."""

from __future__ import annotations

import os

import numpy as np

from .bag import Bag, bag_paths
from .mapping import auto_map, map_yaml
from .messages import message_type


def _rate(times: list[int]) -> str:
    if len(times) < 2:
        return "-"
    d = np.diff(np.asarray(times, np.int64))
    d = d[d > 0]
    return f"{1e9 / float(np.median(d)):.1f}" if d.size else "-"


def inspect_bag(source: str | os.PathLike) -> str:
    """The text ``--inspect`` prints for the first bag at ``source`` (a folder of bags: it says how many)."""
    bags = bag_paths(source)
    lines = []
    if len(bags) > 1:
        lines.append(f"# {len(bags)} bags in {source} (one episode each); the first:")
    with Bag(bags[0]) as bag:
        times: dict[str, list[int]] = {t: [] for t in bag.topics}
        for topic, t, _ in bag.raw():
            times[topic].append(t)
        t0 = bag.start_ns or 0
        span = ((bag.end_ns or t0) - t0) / 1e9
        lines.append(f"# bag {bag.path}: {sum(len(v) for v in times.values())} messages over {span:.3f} s, "
                     f"{len(bag.topics)} topics")
        w = max([len(t) for t in bag.topics] + [5])
        lines.append(f"# {'topic':<{w}}  {'type':<36} {'count':>8} {'rate Hz':>8}  {'first s':>8} {'last s':>8}  reads")
        for name in sorted(bag.topics):
            tt = times[name]
            row = message_type(bag.topics[name].msgtype)
            reads = "-" if row is None else f"{row.role}{' (header)' if row.header else ''}"
            first = f"{(tt[0] - t0) / 1e9:.3f}" if tt else "-"
            last = f"{(tt[-1] - t0) / 1e9:.3f}" if tt else "-"
            lines.append(f"# {name:<{w}}  {bag.topics[name].msgtype:<36} {len(tt):>8} {_rate(tt):>8}  {first:>8} {last:>8}  {reads}")
        m = auto_map(bag)
        cams = sorted(m.cameras())
        if cams:
            m.reference = m.cameras()[cams[0]]
    return "\n".join(lines) + "\n" + map_yaml(m).decode()
