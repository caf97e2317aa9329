"""Timing of every stream and camera (``timestamps``, ``camera_rate``): strictly increasing stamps, the
recorded rate against the declared one, and dropped samples judged against a budget.

A real recording drops samples (a late control tick, a camera driver that skips a frame): the finding
is kept with its counts, and the verdict depends on whether the episode is usable. Per episode and
stream (or camera):

- *dropped samples*: an interval longer than ``gap_periods`` periods is a gap; it stands for
  ``round(interval / period) - 1`` missing samples. The *dropped fraction* is missing / (stored +
  missing); the *longest gap* is the longest interval, in seconds.
- recorded data (an episode without a simulation sidecar): gaps within the budget (dropped fraction
  <= ``max_dropped_fraction`` and longest gap <= ``max_gap_seconds``) are a ``warn``; beyond it the
  episode fails. The period gaps are measured against is the declared one, or the recorded median
  interval when the stream was recorded at a steady slower rate (90 % of its intervals within
  0.5..1.5 medians: a slow rate is reported once, as a rate finding, not as every sample dropped;
  holes in a stream at the declared rate spread over multiples of the period and stay counted).
  A median interval more than ``rate_tolerance`` from the declared period is a ``warn`` (every sample
  carries its stamp, so the data stays usable; the declared frequency is wrong).
- simulated data (the episode has ``sim/sidecar.npz``): timing is exact by construction, so any gap
  or any rate mismatch fails; except for a dataset recorded live from a simulation node in a dataflow
  (``simulation.source: dataflow``), judged as recorded data.

Stamps that are not strictly increasing fail everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import layout, sidecar
from .core import Context, Outcome

OK, WARN, FAIL = 0, 1, 2


@dataclass
class Timing:
    """The timing figures of one stream of one episode (intervals in ns)."""

    level: int  # OK, WARN or FAIL
    problem: str | None  # what is wrong (None: nothing)
    gaps: int  # intervals longer than gap_periods periods
    dropped: int  # samples those gaps stand for
    fraction: float  # dropped / (stored + dropped)
    longest_s: float  # longest interval, s


def is_simulated(ctx: Context, ep: str) -> bool:
    """The episode carries a simulation sidecar: its timing is exact by construction (cached)."""
    key = ("simulated", ep)
    if key not in ctx.cache:
        ctx.cache[key] = (layout.sim_dir(ctx.ds.root, ep) / sidecar.SIDECAR_FILE).is_file()
    return ctx.cache[key]


def exact_timing(ctx: Context, ep: str) -> bool:
    """The episode's timing is exact by construction: generated (a sidecar), not recorded live from a
    simulation node in a dataflow (``simulation.source: dataflow``), whose samples the dataflow can
    lose as any recording's."""
    return is_simulated(ctx, ep) and not sidecar.recorded_live(ctx.ds.meta.simulation)


def _regular(d: np.ndarray, med: float) -> bool:
    """At least 90 % of the intervals within 0.5..1.5 times their median: a stream recorded at its own
    steady rate (intervals that are multiples of the declared period, i.e. holes, spread wider)."""
    return float(np.mean((d >= 0.5 * med) & (d <= 1.5 * med))) >= 0.9


def judge(stamps: np.ndarray, hz: float | None, ctx: Context, simulated: bool, unit: str = "samples") -> Timing:
    """The timing verdict of one stream's stamps (int64 ns) against its declared rate ``hz`` (None:
    undeclared, gaps against the median interval)."""
    d = np.diff(stamps)
    if not len(d):
        return Timing(OK, None, 0, 0, 0.0, 0.0)
    if not np.all(d > 0):
        return Timing(FAIL, "stamps not strictly increasing", 0, 0, 0.0, 0.0)
    t = ctx.t
    med = float(np.median(d))
    level, problems = OK, []
    period = med if hz is None else 1e9 / hz
    if hz is not None and abs(med - period) > t.rate_tolerance * period:
        level = FAIL if simulated else WARN
        problems.append(f"median interval {med / 1e6:.3f} ms vs declared {period / 1e6:.3f} ms "
                        f"({1e9 / med:.1f} Hz vs {hz:.1f} Hz)")
    if not simulated and hz is not None and med > (1 + t.rate_tolerance) * period and _regular(d, med):
        # recorded regularly at a slower rate than declared (the rate finding above): gaps against the
        # median; holes in a stream at the declared rate stay counted against the declared period
        period = med
    long = d > t.gap_periods * period
    gaps = int(long.sum())
    dropped = int(np.maximum(np.rint(d[long] / period) - 1, 1).sum())
    fraction = dropped / (len(stamps) + dropped)
    longest = float(d.max()) / 1e9
    if gaps:
        over = fraction > t.max_dropped_fraction or longest > t.max_gap_seconds
        level = max(level, FAIL if simulated or over else WARN)
        why = ("simulated: exact timing" if simulated else
               f"{'beyond' if over else 'within'} the budget of {t.max_dropped_fraction:g} dropped, "
               f"{t.max_gap_seconds:g} s longest")
        problems.append(f"{gaps} gap(s) > {t.gap_periods:g} periods (dropped {unit}: {dropped}, fraction "
                        f"{fraction:.3f}, longest {longest * 1e3:.1f} ms; {why})")
    return Timing(level, "; ".join(problems) or None, gaps, dropped, fraction, longest)


class Tally:
    """Collects per-stream verdicts into one row: failed and warned episodes, the first finding of each
    kind, the worst figures."""

    def __init__(self):
        self.failed: set[str] = set()
        self.warned: set[str] = set()
        self.fail_first: str | None = None
        self.warn_first: str | None = None
        self.n = self.gaps = self.dropped = self.n_fail = self.n_warn = 0
        self.worst_fraction = self.worst_gap = 0.0

    def add(self, ep: str, where: str, tm: Timing) -> None:
        self.n += 1
        self.gaps += tm.gaps
        self.dropped += tm.dropped
        self.worst_fraction = max(self.worst_fraction, tm.fraction)
        if tm.gaps:
            self.worst_gap = max(self.worst_gap, tm.longest_s)
        if tm.level == FAIL:
            self.n_fail += 1
            self.failed.add(ep)
            self.fail_first = self.fail_first or f"{where}: {tm.problem}"
        elif tm.level == WARN:
            self.n_warn += 1
            self.warned.add(ep)
            self.warn_first = self.warn_first or f"{where}: {tm.problem}"

    def outcome(self, head: str) -> Outcome:
        detail = (f"{head}, {self.gaps} dropped-sample gaps ({self.dropped} samples; worst fraction "
                  f"{self.worst_fraction:.3f}, longest gap {self.worst_gap * 1e3:.1f} ms)")
        if self.n_fail:
            detail += f"; {self.n_fail} failed, first: {self.fail_first}"
        if self.n_warn:
            detail += f"; {self.n_warn} warned (usable), first: {self.warn_first}"
        return Outcome(not self.failed, detail, sorted(self.failed), warned=sorted(self.warned - self.failed))


def _streams(ctx: Context):
    for ep in ctx.episodes:
        for kind in layout.KINDS:
            s = ctx.streams(ep, kind)
            if isinstance(s, dict):
                for key, stream in s.items():
                    yield ep, kind, key, stream


def check_timestamps(ctx: Context) -> Outcome:
    """Every obs/action stream: stamps strictly increasing, rate and dropped samples (module docstring)."""
    meta = ctx.ds.meta
    tally = Tally()
    for ep, kind, key, s in _streams(ctx):
        emb, _, comp = key.rsplit("/", 1)[0].partition("/")
        tm = judge(s.timestamps, meta.frequency(kind, emb, comp or None), ctx, exact_timing(ctx, ep))
        tally.add(ep, f"episode {ep} {kind} {key}", tm)
    return tally.outcome(f"{tally.n} streams")


def check_camera_rate(ctx: Context) -> Outcome:
    """Every camera of every episode: frame stamps strictly increasing, rate and dropped frames
    (module docstring); a camera without a declared rate (unversioned layout) is judged against its
    median interval."""
    meta = ctx.ds.meta
    tally, undeclared = Tally(), 0
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        if not isinstance(cams, dict):
            continue
        for name, cam in cams.items():
            if len(cam.timestamps) < 2:
                continue
            hz = meta.frequency("cameras", meta.stored_camera_name(name))
            undeclared += hz is None
            tally.add(ep, f"episode {ep} camera {name}", judge(cam.timestamps, hz, ctx, exact_timing(ctx, ep), "frames"))
    if tally.n == 0:
        return Outcome(True, "no camera with two or more frames", skipped=True, applicable=False)
    head = f"{tally.n} episode-cameras" + (f" ({undeclared} without a declared rate: gaps against the median)"
                                           if undeclared else "")
    return tally.outcome(head)
