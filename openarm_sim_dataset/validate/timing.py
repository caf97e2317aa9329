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

from dataclasses import dataclass, field

import numpy as np

from openarm_sim_dataset.core import layout, sidecar

from .check import MAX_FINDINGS_PER_EPISODE, Context, Outcome, finding, no_camera_reason, nothing_to_judge

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
    #: where it happens: (start ns, end ns or None, what) of each gap or stamp out of order (the first ones)
    marks: list = field(default_factory=list)


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
        back = np.flatnonzero(d <= 0)[:MAX_FINDINGS_PER_EPISODE]
        return Timing(FAIL, "stamps not strictly increasing", 0, 0, 0.0, 0.0,
                      [(int(stamps[i + 1]), None, f"stamp {(-int(d[i])) / 1e6:.3f} ms before the previous one"
                        if d[i] < 0 else "stamp equal to the previous one") for i in back])
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
    marks = [(int(stamps[i]), int(stamps[i + 1]), f"gap of {d[i] / 1e6:.1f} ms ({d[i] / period:.1f} periods)")
             for i in np.flatnonzero(long)[:MAX_FINDINGS_PER_EPISODE]]
    return Timing(level, "; ".join(problems) or None, gaps, dropped, fraction, longest, marks)


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
        self.findings: list[dict] = []
        self.episodes: set[str] = set()
        self.samples = 0

    def add(self, ep: str, where: str, tm: Timing, samples: int = 0) -> None:
        self.n += 1
        self.episodes.add(ep)
        self.samples += samples
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
        if tm.level != OK:
            level, place = "fail" if tm.level == FAIL else "warn", where.removeprefix(f"episode {ep} ")
            self.findings += [finding(ep, t0, what, place, t1, level) for t0, t1, what in tm.marks]

    def judged(self, unit: str, samples: str) -> dict[str, int]:
        """What the tally judged: episodes, ``unit`` (streams, cameras) and ``samples`` (rows, frames)."""
        return {"episodes": len(self.episodes), unit: self.n, samples: self.samples}

    def outcome(self, head: str) -> Outcome:
        detail = (f"{head}, {self.gaps} dropped-sample gaps ({self.dropped} samples; worst fraction "
                  f"{self.worst_fraction:.3f}, longest gap {self.worst_gap * 1e3:.1f} ms)")
        if self.n_fail:
            detail += f"; {self.n_fail} failed, first: {self.fail_first}"
        if self.n_warn:
            detail += f"; {self.n_warn} warned (usable), first: {self.warn_first}"
        return Outcome(not self.failed, detail, sorted(self.failed), warned=sorted(self.warned - self.failed),
                       findings=self.findings, judged=self.judged("streams", "rows"))


def _streams(ctx: Context):
    for ep in ctx.episodes:
        for kind in layout.KINDS:
            s = ctx.streams(ep, kind)
            if isinstance(s, dict):
                for key, stream in s.items():
                    yield ep, kind, key, stream


def check_timestamps(ctx: Context) -> Outcome:
    """Every obs and action stream of every episode has strictly increasing timestamps, a median interval
    within `rate_tolerance` (0.05 by default: 5 %) of the period its declared rate gives, and no interval
    longer than `gap_periods` (1.5 by default) periods.

    Simulated data (an episode with `sim/sidecar.npz`) is timed exactly by construction: any gap or rate
    mismatch fails. Recorded data (no sidecar, or a simulation recorded live in a dataflow,
    `simulation.source: dataflow`) may drop samples: a gap stands for `round(interval / period) - 1`
    dropped samples (at least one), and gaps within the budget are a `warn`: a dropped fraction (dropped
    over stored plus dropped, per stream and episode) of at most `max_dropped_fraction` (0.5 by default)
    and no interval longer than `max_gap_seconds` (1 s by default). Beyond the budget the episode fails.
    A recorded median interval off the declared period is a `warn` too (every sample carries its stamp,
    the declared rate is wrong), and a stream recorded at a steady slower rate has its gaps measured
    against its own median interval.

    Stamps that are not strictly increasing fail everywhere. A stream without a declared rate
    (unversioned layout) is judged against its median interval. Each gap (from the last sample before it
    to the first after it) and each stamp out of order is a timed finding."""
    meta = ctx.ds.meta
    tally = Tally()
    # every feature of a LeRobot dataset is stamped at its fps, the mapped arms and the other vectors alike
    fps = float(ctx.ds.lerobot.fps) if ctx.ds.lerobot is not None else None
    for ep, kind, key, s in _streams(ctx):
        emb, _, comp = key.rsplit("/", 1)[0].partition("/")
        hz = meta.frequency(kind, emb, comp or None) or fps
        tm = judge(s.timestamps, hz, ctx, exact_timing(ctx, ep))
        tally.add(ep, f"episode {ep} {kind} {key}", tm, len(s.timestamps))
    if tally.samples == 0:
        return nothing_to_judge("no obs or action stream with samples" if tally.n else "no obs or action stream",
                                applicable=True)
    return tally.outcome(f"{tally.n} streams, {tally.samples:,} stamps")


def check_camera_rate(ctx: Context) -> Outcome:
    """Every camera of every episode has strictly increasing frame stamps, a median frame interval within
    `rate_tolerance` (0.05 by default: 5 %) of the period its declared rate gives, and no interval longer
    than `gap_periods` (1.5 by default) periods.

    Judged as `timestamps` judges a stream: in simulated data (a sidecar, not recorded live in a
    dataflow) any gap or rate mismatch fails; in recorded data a rate off the declared one is a `warn`,
    and so are dropped frames within the budget (a dropped fraction of at most `max_dropped_fraction`,
    0.5 by default, and no interval longer than `max_gap_seconds`, 1 s by default); beyond the budget the
    episode fails. A camera without a declared rate (unversioned layout) is judged against its median
    interval. A `skip` (not applicable) when no camera has two frames or more. Each gap and each stamp
    out of order is a timed finding."""
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
            tally.add(ep, f"episode {ep} camera {name}", judge(cam.timestamps, hz, ctx, exact_timing(ctx, ep), "frames"),
                      len(cam.timestamps))
    if tally.n == 0:
        return nothing_to_judge(no_camera_reason(ctx, "with two or more frames"))
    head = f"{tally.n} episode-cameras" + (f" ({undeclared} without a declared rate: gaps against the median)"
                                           if undeclared else "")
    out = tally.outcome(head)
    out.judged = tally.judged("episode_cameras", "frames")
    return out



def coverage(cam_stamps: np.ndarray, lo: int, hi: int, period: float, ctx: Context, exact: bool) -> Timing:
    """The coverage verdict of one camera of one episode: its first frame late after ``lo`` and its last
    frame early before ``hi`` (the state streams' common span, ns), each against ``coverage_periods``
    camera periods (``period`` ns). An edge beyond it stands for ``floor(edge / period)`` frames the
    camera did not record, judged like dropped frames: recorded data within the dropped-sample budget
    a ``warn``, beyond it (or simulated data, exact by construction) a failure."""
    t = ctx.t
    head = max(float(cam_stamps[0]) - lo, 0.0)
    tail = max(hi - float(cam_stamps[-1]), 0.0)
    limit = t.coverage_periods * period
    late = [(w, e) for w, e in (("starts", head), ("stops", tail)) if e > limit]
    if not late:
        return Timing(OK, None, 0, 0, 0.0, max(head, tail) / 1e9)
    dropped = sum(max(int(e // period), 1) for _, e in late)
    fraction = dropped / (len(cam_stamps) + dropped)
    longest = max(e for _, e in late) / 1e9
    over = fraction > t.max_dropped_fraction or longest > t.max_gap_seconds
    why = ("simulated: exact timing" if exact else
           f"{'beyond' if over else 'within'} the budget of {t.max_dropped_fraction:g} dropped, "
           f"{t.max_gap_seconds:g} s longest")
    edges = ", ".join(f"{w} {e / 1e6:.1f} ms {'after the state streams start' if w == 'starts' else 'before they end'}"
                      f" ({e / period:.1f} periods)" for w, e in late)
    problem = f"{edges} (frames not recorded: {dropped}, fraction {fraction:.3f}; {why})"
    first, last = int(cam_stamps[0]), int(cam_stamps[-1])
    marks = [(int(lo), first, f"first frame {e / 1e6:.1f} ms after the state streams start") if w == "starts" else
             (last, int(hi), f"last frame {e / 1e6:.1f} ms before the state streams end") for w, e in late]
    return Timing(FAIL if exact or over else WARN, problem, len(late), dropped, fraction, longest, marks)


def check_camera_coverage(ctx: Context) -> Outcome:
    """Every camera of every episode covers the span its state streams share: its first frame comes within
    `coverage_periods` (3 by default) camera periods of the latest first state sample, and its last frame
    within as many periods of the earliest last one.

    An edge beyond that stands for the frames the camera did not record (the edge divided by the period),
    judged like dropped frames: in simulated data it fails; in recorded data it is a `warn` within the
    dropped-sample budget (`max_dropped_fraction`, 0.5 by default, and `max_gap_seconds`, 1 s by default)
    and fails beyond it. The period is the declared rate's, or the camera's median interval where no rate
    is declared or a recording ran steadily slower. A `skip` (not applicable) when no episode has both
    camera frames and state streams. Each late start or early stop is a timed finding (the edge the
    camera misses); frames outside the span are `camera_span`'s concern."""
    meta = ctx.ds.meta
    tally, worst, worst_where = Tally(), 0.0, ""
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        firsts, lasts = [], []
        for kind in layout.KINDS:
            s = ctx.streams(ep, kind)
            if isinstance(s, dict):
                for st in s.values():
                    if len(st):
                        firsts.append(int(st.timestamps[0]))
                        lasts.append(int(st.timestamps[-1]))
        if not isinstance(cams, dict) or not firsts:
            continue
        lo, hi = max(firsts), min(lasts)
        for name, cam in cams.items():
            ts = cam.timestamps
            if len(ts) == 0:
                continue
            hz = meta.frequency("cameras", meta.stored_camera_name(name))
            med = float(np.median(np.diff(ts))) if len(ts) > 1 else None
            period = 1e9 / hz if hz else med
            exact = exact_timing(ctx, ep)
            if med is not None and not exact and (period is None or med > period):
                period = med  # a recording that ran steadily slower: its own rate
            if not period:
                continue
            tm = coverage(ts, lo, hi, period, ctx, exact)
            edge = max(max(float(ts[0]) - lo, 0.0), max(hi - float(ts[-1]), 0.0)) / period
            if edge > worst:
                worst, worst_where = edge, f"episode {ep} camera {name}"
            tally.add(ep, f"episode {ep} camera {name}", tm, len(ts))
    if tally.n == 0:
        return nothing_to_judge(no_camera_reason(ctx, "frames and state streams to compare"))
    detail = (f"{tally.n} episode-cameras: first and last frame within {ctx.t.coverage_periods:g} camera periods of "
              f"the state streams' common span (widest edge {worst:.2f} periods"
              + (f", {worst_where}" if worst_where else "") + ")")
    if tally.n_fail:
        detail += f"; {tally.n_fail} failed, first: {tally.fail_first}"
    if tally.n_warn:
        detail += f"; {tally.n_warn} warned (usable), first: {tally.warn_first}"
    return Outcome(not tally.failed, detail, sorted(tally.failed), warned=sorted(tally.warned - tally.failed),
                   findings=tally.findings, judged=tally.judged("episode_cameras", "frames"))
