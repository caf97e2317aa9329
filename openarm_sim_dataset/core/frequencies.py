"""Measured sample rates: a stream's median rate in bounded memory (:class:`RateMeter`, kept by the
writer process for each stream and camera of an episode), and the dataset's ``frequencies:``
computed from the listed episodes' ``measured_hz`` (also used by :mod:`openarm_sim_dataset.merge`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


class RateMeter:
    """Median sample interval of a stream, in bounded memory: medians of blocks of 1024 intervals,
    and the median of those (exact for shorter streams)."""

    BLOCK = 1024

    def __init__(self) -> None:
        self.last: int | None = None
        self.buf: list[np.ndarray] = []
        self.n = 0
        self.medians: list[float] = []

    def add(self, ts: np.ndarray) -> None:
        if self.last is not None:
            ts = np.concatenate(([self.last], ts))
        if len(ts):
            self.last = int(ts[-1])
        d = np.diff(ts)
        if not len(d):
            return
        self.buf.append(d)
        self.n += len(d)
        if self.n >= self.BLOCK:
            self.medians.append(float(np.median(np.concatenate(self.buf))))
            self.buf, self.n = [], 0

    def hz(self) -> float | None:
        meds = list(self.medians)
        if self.n and (not meds or self.n >= self.BLOCK // 4):
            meds.append(float(np.median(np.concatenate(self.buf))))
        if not meds:
            return None
        med = float(np.median(meds))
        return 1e9 / med if med > 0 else None


def nest(flat: dict[str, float | None], digits: int) -> dict:
    """``{"obs/arms/right": 250.0, "cameras/head": 30.0, "obs/lifter": 10.0}`` in the shape of
    ``frequencies:`` (None values left out)."""
    out: dict = {}
    for key, hz in flat.items():
        if hz is None:
            continue
        parts = key.split("/")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = round(float(hz), digits)
    return out


def flatten(nested: Mapping, prefix: str = "") -> dict[str, float]:
    out = {}
    for k, v in nested.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


def measured_rates(episodes: list[dict]) -> dict[str, list[float]]:
    """The episodes' ``measured_hz``, per flattened stream key."""
    per: dict[str, list[float]] = {}
    for ep in episodes:
        for k, v in flatten(ep.get("measured_hz") or {}).items():
            per.setdefault(k, []).append(v)
    return per


def dataset_frequencies(declared: Mapping, episodes: list[dict] | dict[str, list[float]],
                        extra: Mapping[str, float] | None = None) -> dict:
    """``frequencies:`` from the episodes' ``measured_hz`` (median per stream, 0.1 Hz), streams no
    episode measured keeping their ``declared`` value. ``episodes``: the entries, or their rates as
    :func:`measured_rates` gives them (a writer keeps those, so a commit does not re-read every entry),
    with ``extra`` (one more episode's flattened rates)."""
    per = measured_rates(episodes) if isinstance(episodes, list) else episodes
    if extra:
        per = {**per, **{k: [*per.get(k, []), v] for k, v in extra.items()}}
    flat = flatten(declared)
    flat.update({k: float(np.median(v)) for k, v in per.items()})
    return nest(flat, digits=1)
