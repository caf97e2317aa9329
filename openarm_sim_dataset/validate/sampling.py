"""Sampled validation (``dataset-validate --sample N``): a verdict for a big dataset with its bound.

Every episode gets the checks that are cheap per episode (form, integrity, streams, JPEG headers,
physical consistency, the simulation block and sidecars); a seeded random sample of the episodes,
stratified by task and acting arm, gets every check (:data:`~.registry.SAMPLED_CHECKS`: camera content,
the physics replay, the re-render). For each family of sampled checks the report states how many of the
sampled episodes fail it and the one-sided 95% Clopper-Pearson upper bound on the fraction of all
episodes that would (and, when some fail, the lower bound: a rate that excludes 0).

The sample is a pure function of (the episode ids and their entries, N, seed): the same command draws the
same episodes. Proportional allocation over the strata is at least as precise as a simple random sample,
so the binomial bound (itself conservative for sampling without replacement) holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.stats import clopper_pearson

from .check import CheckResult, Report
from .registry import SAMPLED_CHECKS, check_table, family_of
from .runner import episode_order, validate

#: Confidence of the stated bounds.
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Sample:
    """What to sample: ``size`` episodes, or ``fraction`` of them (rounded up), drawn from ``seed``."""

    size: int | None = None
    fraction: float | None = None
    seed: int = 0

    def count(self, population: int) -> int:
        """How many of ``population`` episodes the sample holds (all of them at most)."""
        if self.size is not None:
            if self.size < 1:
                raise ValueError(f"--sample must be at least 1, not {self.size}")
            return min(population, self.size)
        if self.fraction is None or not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"--sample-fraction must be in (0, 1], not {self.fraction}")
        return min(population, int(np.ceil(self.fraction * population)))


def stratum(entry: dict) -> tuple[str, str]:
    """An episode's stratum: its task (``task`` name, else ``task_index``) and its acting arm(s) (``arms``),
    as the generator records them; an entry without them is in the stratum ``("", "")``."""
    task = entry.get("task", entry.get("task_index", ""))
    return (str(task), str(entry.get("arms", "")))


def draw_sample(ds: Dataset, ids: list[str], n: int, seed: int) -> list[str]:
    """``n`` of ``ids`` drawn without replacement from ``numpy.random.default_rng(seed)``, allocated to the
    strata (:func:`stratum`) in proportion to their sizes (largest remainders; every stratum gets one when
    ``n`` reaches their number), sorted as episode ids."""
    if n >= len(ids):
        return sorted(ids, key=episode_order)
    entries = {str(e["id"]): e for e in ds.meta.episodes}
    strata: dict[tuple[str, str], list[str]] = {}
    for ep in ids:
        strata.setdefault(stratum(entries.get(ep, {})), []).append(ep)
    keys = sorted(strata)
    sizes = np.array([len(strata[k]) for k in keys], dtype=int)
    share = n * sizes / sizes.sum()
    take = np.floor(share).astype(int)
    if n >= len(keys):
        take = np.maximum(take, 1)  # a rare stratum is never left out
    for i in np.argsort(-(share - np.floor(share)), kind="stable"):  # largest remainders first
        if take.sum() >= n:
            break
        if take[i] < sizes[i] and take[i] < np.ceil(share[i]):
            take[i] += 1
    while take.sum() > n:  # the ones given to rare strata come from the largest shares
        take[int(np.argmax(np.where(take > 1, take, -1)))] -= 1
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for key, k in zip(keys, take):
        members = sorted(strata[key], key=episode_order)
        out += [members[i] for i in sorted(rng.choice(len(members), size=int(k), replace=False))]
    return sorted(out, key=episode_order)


@dataclass
class FamilyBound:
    """One family of sampled checks over the sample: ``failed`` of ``sampled`` episodes fail one of its
    ``checks``; ``lower``/``upper`` the one-sided :data:`CONFIDENCE` bounds on the fraction of the
    ``population`` that would."""

    family: str
    checks: list[str]
    sampled: int
    population: int
    failed: list[str]
    lower: float
    upper: float

    def line(self) -> str:
        """E.g. ``simulation: 0 of 300 sampled episodes fail (sim_replay, ...): at most 1.0% of the 10,000
        would (95%)``."""
        k, n = len(self.failed), self.sampled
        conf = f"{CONFIDENCE:.0%}"
        head = f"{self.family}: {k} of {n} sampled episodes fail ({', '.join(self.checks)})"
        if not k:
            return f"{head}: at most {_pct(self.upper)} of the {self.population:,} would ({conf})"
        named = ", ".join(self.failed[:10]) + (" ..." if k > 10 else "")
        return (f"{head} [episodes: {named}]: {_pct(k / n)} of the sample; of the {self.population:,}, at least "
                f"{_pct(self.lower)} and at most {_pct(self.upper)} would ({conf} each)")

    def to_dict(self) -> dict:
        return {"family": self.family, "checks": list(self.checks), "sampled": self.sampled,
                "population": self.population, "failed": list(self.failed), "lower": round(self.lower, 6),
                "upper": round(self.upper, 6), "confidence": CONFIDENCE}


def _pct(x: float) -> str:
    return f"{100 * x:.2g}%" if x < 0.001 else f"{100 * x:.1f}%"


@dataclass
class SampleReport:
    """What was sampled and the bounds of a sampled run (``Report.sample``)."""

    seed: int
    population: int
    sampled: list[str]
    bounds: list[FamilyBound]

    def lines(self) -> list[str]:
        head = (f"sampled: {len(self.sampled)} of {self.population:,} episodes fully checked (seed {self.seed}, "
                f"stratified by task and arm); the rest form-checked")
        return [head] + [b.line() for b in self.bounds]

    def to_dict(self) -> dict:
        return {"seed": self.seed, "population": self.population, "sampled": list(self.sampled),
                "bounds": [b.to_dict() for b in self.bounds]}


def sampled_validate(ds: Dataset, sample: Sample, episodes: list[str] | None = None, checks: list[str] | None = None,
                     regenerate: list[str] | None = None, quick: bool = False, **kwargs) -> Report:
    """Validate ``ds`` with every cheap check on every episode and every check on a sample (module doc).
    The rows are those of :func:`~.runner.validate`, in its order; a sampled row's detail says how many
    episodes it checked. ``Report.sample`` is the :class:`SampleReport`. Other keyword arguments go to
    :func:`~.runner.validate` (thresholds, simulation, strict, ray, workers)."""
    ids = ds.episode_ids if episodes is None else [ds.episode_id(e) for e in episodes]
    drawn = draw_sample(ds, ids, sample.count(len(ids)), sample.seed) if ids else []
    table = check_table(ds.meta.simulation, quick, kwargs.get("simulation", True), lerobot=ds.lerobot is not None)
    names = [n for n, _ in table if checks is None or n in checks]
    cheap = [n for n in names if n not in SAMPLED_CHECKS]
    costly = [n for n in names if n in SAMPLED_CHECKS]
    regenerate = list(regenerate or [])
    rows: dict[str, CheckResult] = {}
    out = Report()
    if cheap or not costly:
        every = validate(ds, episodes=ids, checks=cheap, quick=quick, **kwargs)
        rows.update((r.check, r) for r in every)
        out.file_lines = every.file_lines
    if costly and drawn:
        full_ids = sorted(set(drawn) | {ds.episode_id(e) for e in regenerate}, key=episode_order)
        some = validate(ds, episodes=full_ids, checks=costly, regenerate=regenerate, quick=quick, **kwargs)
        for r in some:
            if r.check in rows:  # the no-episodes verdict: once
                continue
            r.detail = f"{r.detail} [on the {len(full_ids)} sampled episodes]"
            rows[r.check] = r
        out.file_lines += [line for line in some.file_lines if line not in out.file_lines]
    out.extend(rows[n] for n in [*names, *(k for k in rows if k not in names)] if n in rows)
    bounds = []
    by_family: dict[str, list[CheckResult]] = {}
    for name in costly:
        if name in rows and not rows[name].skipped:
            by_family.setdefault(family_of(name), []).append(rows[name])
    drawn_set = set(drawn)
    for family, fam_rows in by_family.items():
        failed = sorted({ep for r in fam_rows if r.failed for ep in (r.episodes or drawn) if ep in drawn_set},
                        key=episode_order)
        lo, hi = clopper_pearson(len(failed), len(drawn), CONFIDENCE)
        bounds.append(FamilyBound(family, [r.check for r in fam_rows], len(drawn), len(ids), failed, lo, hi))
    out.sample = SampleReport(sample.seed, len(ids), drawn, bounds)
    return out


def checked_levels(report: Report, ids: list[str]) -> dict[str, str]:
    """``full`` for each sampled episode, ``form`` for the rest (written beside the verdicts)."""
    drawn = set(report.sample.sampled) if getattr(report, "sample", None) else set(ids)
    return {ep: "full" if ep in drawn else "form" for ep in ids}
