"""The signal checks of the action as a whole: how much of each episode it stays frozen, and how it relates
to the state (the next state, a lagging copy, the same frame's state, or a true command)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openarm_sim_dataset.core.feature_roles import state_action_pairs

from .check import MAX_FINDINGS_PER_EPISODE, Context, EpisodeCheck, Outcome, finding, nothing_to_judge
from .signal_streams import JudgedStream, judged_streams, rest_floor

#: runs shorter than this many sample periods are never kept in a partial (no threshold goes below 2)
_KEPT_RUN_PERIODS = 2
#: an episode keeps at most this many of its longest runs in its partial
_KEPT_RUNS = 2000
#: the detail gives every episode's frozen share up to this many episodes (the largest three beyond)
EVERY_SHARE_UP_TO = 20


@dataclass
class FrozenPart:
    """One episode's action for `frozen_action`: its span (ns), its median sample period and the median
    interval between changes of the action vector (ns), how many changes, and its longest unchanged runs
    as ``(start, end)`` stamps (ns), each at least two sample periods long."""

    t_start: int
    t_end: int
    period: float
    change_interval: float
    changes: int
    runs: np.ndarray
    streams: int
    dimensions: int
    rows: int


def _frozen_episode(ctx: Context, ep: str, _prep) -> FrozenPart | None:
    streams = judged_streams(ctx, ep)
    if isinstance(streams, str):
        return None
    actions = [js.stream for js in streams if js.role == "action" and len(js.stream)]
    if not actions:
        return None
    change_times, periods = [], []
    for s in actions:
        ts = np.asarray(s.timestamps, dtype=np.int64)
        x = s.values
        # a change: any dimension differs from the sample before (NaN counts as a change); the first sample sets it
        changed = np.r_[True, ((x[1:] != x[:-1]) & ~(np.isnan(x[1:]) & np.isnan(x[:-1]))).any(axis=1)]
        change_times.append(ts[changed])
        if len(ts) > 1:
            periods.append(float(np.median(np.diff(ts))))
    t_start = int(min(int(s.timestamps[0]) for s in actions))
    t_end = int(max(int(s.timestamps[-1]) for s in actions))
    period = float(np.median(periods)) if periods else 0.0
    changes = np.unique(np.concatenate(change_times))
    bounds = np.r_[changes, t_end]
    held = np.diff(bounds)
    keep = np.flatnonzero(held >= _KEPT_RUN_PERIODS * period) if period > 0 else np.arange(0)
    keep = keep[np.argsort(held[keep])[::-1][:_KEPT_RUNS]]
    runs = np.stack([bounds[keep], bounds[keep + 1]], axis=1) if len(keep) else np.zeros((0, 2), dtype=np.int64)
    interval = float(np.median(np.diff(changes))) if len(changes) > 2 else 0.0
    return FrozenPart(t_start, t_end, period, interval, len(changes), runs, len(actions),
                      sum(s.values.shape[1] for s in actions), sum(len(s) for s in actions))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.0f} ms" if ns < 1e9 else f"{ns / 1e9:.2f} s"


def _frozen_reduce(ctx: Context, _prep, parts: dict) -> Outcome:
    """The action vector (every dimension of every action stream) does not stay unchanged for more than
    `frozen_action_share` (30 %) of an episode, counting runs of at least `frozen_action_min_samples`
    (10) command periods: a teleoperator idle before starting, a leader arm that stopped sending, a
    policy that stalled. The command period is the median interval between changes of the action over the
    dataset (a 10 Hz policy stored at 250 Hz changes every 25 samples: one period, not 25), so 10
    periods are 0.33 s of a 30 Hz recording; fewer frames repeat when a servo's reading is quantised.

    Our planner's deliberate settles hold the action for 11 % of an episode; lerobot-doctor measured 7-36 %
    on a public SO-101 recording. The detail gives every episode's share (the range and the largest); a
    warning for an episode above the share, with its frozen runs as findings (the longest named: start
    and duration)."""
    eps = {ep: p for ep, p in parts.items() if p is not None}
    if not eps:
        return nothing_to_judge("no action vector")
    intervals = [p.change_interval for p in eps.values() if p.changes > 2 and p.change_interval > 0]
    periods = [p.period for p in eps.values() if p.period > 0]
    command = float(np.median(intervals)) if intervals else float(np.median(periods)) if periods else 0.0
    least = ctx.t.frozen_action_min_samples * command
    limit = ctx.t.frozen_action_share
    shares, longest, found, warned = {}, {}, [], []
    for ep, p in eps.items():
        span = max(p.t_end - p.t_start + p.period, 1.0)
        runs = p.runs[(p.runs[:, 1] - p.runs[:, 0]) >= least] if command > 0 else p.runs[:0]
        shares[ep] = float((runs[:, 1] - runs[:, 0]).sum() / span)
        if len(runs):
            i = int(np.argmax(runs[:, 1] - runs[:, 0]))
            longest[ep] = (int(runs[i, 0]), int(runs[i, 1]))
        if shares[ep] > limit:
            warned.append(ep)
            for a, b in sorted(map(tuple, runs.tolist()))[:MAX_FINDINGS_PER_EPISODE]:
                found.append(finding(ep, a, f"action unchanged for {_ms(b - a)}"
                                     f"{' (the longest)' if (a, b) == longest[ep] else ''}", "action", end_ns=b, level="warn"))
    judged = {"episodes": len(eps), "streams": max(p.streams for p in eps.values()),
              "dimensions": max(p.dimensions for p in eps.values()), "rows": sum(p.rows for p in eps.values())}
    values = np.array(list(shares.values()))
    worst = sorted(shares, key=lambda e: -shares[e])[:3]
    figures = (f"frozen share {values.min():.0%}-{values.max():.0%} of the episodes (median {np.median(values):.0%}; "
               f"command period {_ms(command)}, runs of at least {_ms(least)})")
    top = ", ".join(f"episode {e} {shares[e]:.0%}" + (f" (longest {_ms(longest[e][1] - longest[e][0])} from "
                                                       f"{(longest[e][0] - eps[e].t_start) / 1e9:.2f} s)" if e in longest else "")
                    for e in worst if shares[e] > 0)
    if len(shares) <= EVERY_SHARE_UP_TO:
        figures += f"; by episode: {', '.join(f'{e} {v:.0%}' for e, v in shares.items())}"
    if warned:
        return Outcome(True, f"{len(warned)} episode(s) with the action frozen more than {limit:.0%} of the time: {top}; "
                             f"{figures}", warned=warned, findings=found, judged=judged)
    return Outcome(True, f"{figures}" + (f"; largest: {top}" if top else ""), judged=judged)


check_frozen_action = EpisodeCheck(_frozen_episode, _frozen_reduce)


def _pairs(ctx: Context, streams: list[JudgedStream]) -> list[tuple[JudgedStream, JudgedStream, np.ndarray]]:
    """``(state, action, order)`` pairs: the action's columns ``order`` line up with the state's. Arms:
    the same key in obs and action (positions only); LeRobot vectors: the state and action features whose
    dimension names agree (:func:`~openarm_sim_dataset.core.feature_roles.state_action_pairs`)."""
    states = {js.key: js for js in streams if js.role == "state" and set(js.quantities) == {"position"}}
    actions = {js.key: js for js in streams if js.role == "action"}
    out = []
    for key, a in actions.items():
        s = states.get(key)
        if s is not None and s.stream.columns == a.stream.columns:
            out.append((s, a, np.arange(len(a.stream.columns))))
    if ctx.ds.lerobot is not None:
        src = ctx.ds.lerobot
        names = {k: src.vector_names(k) for k in src.features}
        for sk, ak in state_action_pairs(src.features, names):
            s, a = states.get(f"lerobot/{sk}"), actions.get(f"lerobot/{ak}")
            if s is None or a is None or len(s.stream.columns) != len(a.stream.columns):
                continue
            cols = list(a.stream.columns)
            order = (np.array([cols.index(c) for c in s.stream.columns]) if set(cols) == set(s.stream.columns)
                     else np.arange(len(cols)))
            out.append((s, a, order))
    return out


def _best_lag(state: np.ndarray, action: np.ndarray, max_lag: int, tol: np.ndarray) -> tuple[int, float]:
    """The lag L (frames) at which ``action[t] == state[t + L]`` holds for the most frames (the smallest |L|
    among equals: a slow, quantised state repeats), and that share."""
    best, share = 0, -1.0
    n = len(action)
    for lag in sorted(range(-max_lag, max_lag + 1), key=lambda k: (abs(k), -k)):
        a = action[max(0, -lag): n - max(0, lag)]
        s = state[max(0, lag): n + min(0, lag)]
        if not len(a):
            continue
        eq = float((np.abs(a - s) <= tol).all(axis=1).mean())
        if eq > share + 1e-12:
            best, share = lag, eq
    return best, share


#: an action equal to the state at one lag for at least this share of frames has that convention
EQUAL_SHARE = 0.9


def check_action_convention(ctx: Context) -> Outcome:
    """How the action relates to the state, per pair of a state and an action vector with the same
    dimension names (an arm's obs and action `qpos`; LeRobot's `observation.state` and `action`, or
    `state` and `actions`): the lag L (frames, within `convention_max_lag`) at which `action[t] ==
    state[t + L]` for at least 90 % of the frames, exactly (float32 noise aside). L = +1 is "the action
    is the next state" (a common ROS 2 recorder convention, the last frame its own), L < 0 an action
    that copies an older state, and no such lag a true command (the state follows it through the
    robot). Reported in the detail (a pass).

    A warning when the whole action (every vector paired) equals the state of the same frame (L = 0): it
    carries no information a policy could learn; one component's alone (a lifter whose reported elevation
    is its command) is reported, not warned. The state is sampled at the action's stamps when the two have their own; a pair
    whose state rests over the episode is not judged (every lag would fit)."""
    max_lag = ctx.t.convention_max_lag
    found, warned, tally, pairs, rows, episodes = [], set(), {}, set(), 0, set()
    same: dict[str, list[dict]] = {}
    dims = 0
    for ep in ctx.episodes:
        streams = judged_streams(ctx, ep)
        if isinstance(streams, str):
            continue
        judged_here = 0
        for s, a, order in _pairs(ctx, streams):
            sv = s.stream.values.astype(np.float64)
            av = a.stream.values.astype(np.float64)[:, order]
            if len(av) < 3 or len(sv) < 3:
                continue
            finite = np.isfinite(sv)
            mag = np.abs(np.where(finite, sv, 0.0)).max(axis=0)
            span = np.where(finite, sv, -np.inf).max(axis=0) - np.where(finite, sv, np.inf).min(axis=0)
            if not (span > rest_floor(mag, ctx.t.signal_rest_range)).any():  # resting: every lag would fit
                continue
            sts, ats = np.asarray(s.stream.timestamps), np.asarray(a.stream.timestamps)
            if not np.array_equal(sts, ats):
                idx = np.searchsorted(sts, ats, side="right") - 1
                keep = idx >= 0
                av, ats, sv = av[keep], ats[keep], sv[idx[keep]]
            tol = 1e-6 * np.maximum(1.0, mag)
            lag, share = _best_lag(sv, av, max_lag, tol)
            period = float(np.median(np.diff(ats))) if len(ats) > 1 else 0.0
            episodes.add(ep)
            if s.key not in pairs:
                pairs.add(s.key)
                dims += av.shape[1]
            judged_here += 1
            rows += len(av)
            if share < EQUAL_SHARE:
                what = "a command (equal to the state at no lag)"
            elif lag == 0:
                what = "the state of the same frame (no information)"
                same.setdefault(ep, []).append(finding(ep, int(ats[0]), f"{a.key} equals {s.key} at the same frame in "
                                                       f"{share:.0%} of the frames", f"action {a.key}",
                                                       end_ns=int(ats[-1]), level="warn"))
            elif lag == 1:
                what = f"the next state (lag +1 frame, +{period / 1e6:.1f} ms)"
            elif lag > 1:
                what = f"the state {lag} frames later (+{lag * period / 1e6:.1f} ms)"
            else:
                what = f"a lagging copy of the state ({lag} frames, {lag * period / 1e6:.1f} ms)"
            tally.setdefault(what, []).append(f"{ep}:{s.key.removeprefix('lerobot/')}")
        # the whole action a copy of the state: nothing to learn; one component's (a lifter reporting its
        # command as its elevation) is how that component works
        if judged_here and len(same.get(ep, ())) == judged_here:
            warned.add(ep)
            found += same[ep]
    if not pairs:
        return nothing_to_judge("no state and action vector with the same dimensions (or no state that moves)")
    judged = {"episodes": len(episodes), "streams": len(pairs), "dimensions": dims, "rows": rows}
    shown = "; ".join(f"action = {what} in {len(where)} episode-vector(s)" for what, where in
                      sorted(tally.items(), key=lambda kv: -len(kv[1])))
    if warned:
        return Outcome(True, f"the action equals the state of the same frame in {len(warned)} episode(s): {shown}",
                       warned=sorted(warned), findings=found, judged=judged)
    return Outcome(True, shown, judged=judged)
