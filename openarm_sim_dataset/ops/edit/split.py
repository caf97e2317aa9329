"""The split operation: each task's episodes shared out between named outputs and ``train``
(:func:`split_entries`), reproducibly from a seed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .request import TRAIN


def split_entries(entries: list[dict], split: Sequence[tuple[str, float]], seed: int) -> dict[str, list[dict]]:
    """``{name: entries}`` for every split name and ``train`` (the rest), each in source order: for each
    task (``task_index``; entries without one form one group), ``fraction * n`` episodes drawn with
    ``default_rng(seed)``, rounded so that each split's total is ``round(fraction * N)`` (largest
    remainders across tasks)."""
    rng = np.random.default_rng(int(seed))
    groups: dict[object, list[int]] = {}
    for i, e in enumerate(entries):
        groups.setdefault(e.get("task_index"), []).append(i)
    order = {g: list(rng.permutation(idx)) for g, idx in sorted(groups.items(), key=lambda kv: str(kv[0]))}
    taken: dict[str, list[int]] = {}
    for name, frac in split:
        total = int(round(frac * len(entries)))
        want = {g: frac * len(idx) for g, idx in groups.items()}
        n = {g: int(np.floor(w)) for g, w in want.items()}
        rest = sorted(groups, key=lambda g: (-(want[g] - n[g]), str(g)))
        for g in rest:
            if sum(n.values()) >= total:
                break
            if n[g] < len(order[g]):
                n[g] += 1
        taken[name] = []
        for g in order:
            taken[name] += order[g][:n[g]]
            order[g] = order[g][n[g]:]
    out = {name: [entries[i] for i in sorted(idx)] for name, idx in taken.items()}
    out[TRAIN] = [entries[i] for g in order for i in sorted(order[g])]
    out[TRAIN].sort(key=lambda e: entries.index(e))
    return out
