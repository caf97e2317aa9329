"""The signal checks that compare a dimension with itself over the whole dataset: constant dimensions,
values pinned at a bound, outliers and jumps, drift between the first and last episodes of a task, and a
joint stuck at exactly 0.0 while its arm moves.

Each is an :class:`~.check.EpisodeCheck`: an episode gives its per-dimension summary
(:mod:`.signal_streams`, one read shared by every row), the reduction compares them all, so the verdict is
the dataset's also when it is validated in groups of episodes or on Ray. Only the episodes in which a
stream moves are used for its levels (an arm at rest in the episodes of the other arm is not a value
pinned at its bound, nor its rest pose an outlier).
"""

from __future__ import annotations

import warnings

import numpy as np

from openarm_sim_dataset.core.feature_roles import is_cartesian

from .check import MAX_FINDINGS_PER_EPISODE, Context, EpisodeCheck, Outcome, finding, nothing_to_judge
from .robot import joints_of, robot_of
from .signal_streams import NOTHING, StreamSummary, by_stream, judged_counts, position_dims, rest_floor, view


def _span(items: list[tuple[str, StreamSummary]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dataset min, max and count of finite values per dimension over ``items``."""
    lo = np.min([s.lo for _, s in items], axis=0)
    hi = np.max([s.hi for _, s in items], axis=0)
    return lo, hi, np.sum([s.n for _, s in items], axis=0)


def _moments(items: list[tuple[str, StreamSummary]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, population std and count per dimension over ``items`` (float64 sums)."""
    n = np.sum([s.n for _, s in items], axis=0).astype(np.float64)
    safe = np.maximum(n, 1)
    mean = np.sum([s.s1 for _, s in items], axis=0) / safe
    var = np.sum([s.s2 for _, s in items], axis=0) / safe - mean**2
    return mean, np.sqrt(np.maximum(var, 0.0)), n


def _value(v: float) -> str:
    return f"{v:.6g}"


def _constant_reduce(ctx: Context, _prep, parts: dict) -> Outcome:
    """No dimension of a state or action vector is constant over the whole dataset (its minimum equals its
    maximum, exactly: float32 data has no other std 0): normalising by its standard deviation (0) makes
    it NaN or infinite in training. A warning (an unused joint is legal), naming each `feature[d] name =
    value`; every dimension of every vector, whatever its name, in either layout.

    An arm (every stream of it, obs and action) that rests in every episode while another part of the
    robot moves is a component no task uses: its dimensions are listed as unused, not warned (a
    one-arm task on a bimanual robot)."""
    streams = by_stream(parts)
    if not streams:
        return nothing_to_judge(NOTHING)
    moves = {}
    for (_kind, _key), items in streams.items():
        comp = items[0][1].component
        moves[comp] = moves.get(comp, False) or any(s.moving for _, s in items)
    flat, unused, eps = [], [], set()
    for (kind, key), items in streams.items():
        lo, hi, n = _span(items)
        constant = np.flatnonzero((n > 0) & (lo == hi))
        if not len(constant):
            continue
        comp = items[0][1].component
        names = [f"{items[0][1].labels[d]} = {_value(lo[d])}" for d in constant]
        if not moves[comp] and any(v for c, v in moves.items() if c != comp):
            unused.append(f"{kind} {key}")
            continue
        flat += names
        eps.update(ep for ep, _ in items)
    judged = judged_counts(parts)
    note = f"; unused (at rest in every episode while the robot moves): {', '.join(unused)}" if unused else ""
    if flat:
        return Outcome(True, f"{len(flat)} dimension(s) constant over the dataset (std 0: NaN after normalisation): "
                             f"{'; '.join(flat[:8])}{' ...' if len(flat) > 8 else ''}{note}",
                       warned=sorted(eps), judged=judged)
    return Outcome(True, f"every one of {judged['dimensions']} dimensions of {judged['streams']} state and action "
                         f"streams varies over the dataset{note}", judged=judged)


def _pinned_reduce(ctx: Context, _prep, parts: dict) -> Outcome:
    """No position dimension of a state or action vector sits at its own dataset minimum or maximum for
    more than `pinned_share` (90 %) of its samples, over the episodes in which its vector moves: a value
    clipped at a limit, a gripper that never opens, a sensor saturated. lerobot-doctor found one
    dimension 95 % at its maximum in a public bimanual recording; our simulated grippers spend at most
    58 % at one end, the clean LeRobot-written fixtures 1 %. Constant dimensions are `constant_dimensions`'s.
    A warning, naming the dimension, the bound and the share; a finding at the first time at the bound in
    each episode that spends more than the share there."""
    share_max = ctx.t.pinned_share
    streams = by_stream(parts)
    if not streams:
        return nothing_to_judge(NOTHING)
    pinned, found, eps, judged_dims = [], [], set(), 0
    for (kind, key), all_items in streams.items():
        items = [(ep, s) for ep, s in all_items if s.moving]
        if not items:
            continue
        lo, hi, n = _span(items)
        dims = np.flatnonzero(position_dims(items[0][1]) & (n > 0) & (lo < hi))
        judged_dims += len(dims)
        for bound, gv, cnt, first in (("minimum", lo, "n_lo", "t_lo"), ("maximum", hi, "n_hi", "t_hi")):
            ext = "lo" if bound == "minimum" else "hi"
            at = np.sum([np.where(getattr(s, ext) == gv, getattr(s, cnt), 0) for _, s in items], axis=0)
            share = at / np.maximum(n, 1)
            for d in dims[share[dims] > share_max]:
                name = items[0][1].labels[d]
                pinned.append(f"{name} at its {bound} {_value(gv[d])} for {share[d]:.1%} of {int(n[d])} samples")
                for ep, s in items:
                    own = getattr(s, cnt)[d] / max(int(s.n[d]), 1)
                    if getattr(s, ext)[d] == gv[d] and own > share_max:
                        eps.add(ep)
                        found.append(finding(ep, int(getattr(s, first)[d]), f"{name} at its {bound} {_value(gv[d])} "
                                             f"for {own:.0%} of the episode", f"{kind} {key}", end_ns=s.t1, level="warn"))
    judged = dict(judged_counts(parts), dimensions=judged_dims)
    if not judged_dims:
        return nothing_to_judge("no position dimension that moves")
    if pinned:
        return Outcome(True, f"{len(pinned)} dimension(s) pinned at a bound (more than {share_max:.0%} of their samples): "
                             f"{'; '.join(pinned[:6])}", warned=sorted(eps) or sorted(parts), findings=found, judged=judged)
    return Outcome(True, f"{judged_dims} position dimensions: none at its dataset minimum or maximum for more than "
                         f"{share_max:.0%} of its samples", judged=judged)


def _outliers_reduce(ctx: Context, _prep, parts: dict) -> Outcome:
    """No position value of a state or action vector lies more than `outlier_sigmas` (10) standard
    deviations from its dimension's dataset mean, and no single-sample step of a dimension exceeds
    `jump_factor` (10) times that dimension's own 99th-percentile step (the median over the episodes of
    each episode's 99th percentile of its nonzero steps: a command held for several samples does not
    shrink it). Clean data, simulated, recorded or written by LeRobot, stays within 4.5 std and 3.5 times.

    Where the std is tiny, the deviation must also exceed the dimension's rest floor (`signal_rest_range`
    x max(1, |value|)), so float noise of a still joint is never an outlier. Over the episodes in which the
    vector moves; velocities and efforts are left out (a contact spikes a torque). A warning, as
    lerobot-doctor's (a rare value can be real; `qpos_jumps` fails what no OpenArm joint can do): each
    outlier and jump is a finding at its time naming the dimension, the value and how far out it is."""
    k_sigma, k_jump = ctx.t.outlier_sigmas, ctx.t.jump_factor
    streams = by_stream(parts)
    if not streams:
        return nothing_to_judge(NOTHING)
    found, counts, eps, judged_dims = [], {}, set(), 0
    for (kind, key), all_items in streams.items():
        items = [(ep, s) for ep, s in all_items if s.moving]
        if not items:
            continue
        lo, hi, n = _span(items)
        mask = position_dims(items[0][1]) & (n > 0) & (lo < hi)
        if not mask.any():
            continue
        judged_dims += int(mask.sum())
        mean, std, _ = _moments(items)
        floor = rest_floor(np.maximum(np.abs(lo), np.abs(hi)), ctx.t.signal_rest_range)
        reach = k_sigma * np.maximum(std, floor)
        with warnings.catch_warnings():  # a dimension without a nonzero step in any episode: no scale (NaN)
            warnings.simplefilter("ignore", RuntimeWarning)
            scale = np.nanmedian(np.stack([s.step_p99 for _, s in items]), axis=0)
        jump = np.where(np.isfinite(scale), np.maximum(k_jump * np.nan_to_num(scale), floor), np.inf)
        for ep, s in items:
            out_dims = mask & ((s.hi > mean + reach) | (s.lo < mean - reach))
            jump_dims = mask & (s.step_max > jump)
            if not (out_dims.any() or jump_dims.any()):
                continue
            streams_ep = ctx.streams(ep, kind)
            if isinstance(streams_ep, str) or key not in streams_ep:
                continue
            st = streams_ep[key]
            x = st.values.astype(np.float64)
            ts = np.asarray(st.timestamps, dtype=np.int64)
            with np.errstate(invalid="ignore"):
                dev = np.abs(x - mean) / np.maximum(std, floor)
                far = (np.abs(x - mean) > reach) & out_dims & np.isfinite(x)
                step = np.abs(np.diff(x, axis=0))
                jumps = (step > jump) & jump_dims & np.isfinite(step)
            rows, dims = np.nonzero(far)
            for r, d in zip(rows[:MAX_FINDINGS_PER_EPISODE], dims[:MAX_FINDINGS_PER_EPISODE]):
                found.append(finding(ep, ts[r], f"{s.labels[d]} = {_value(x[r, d])}, {dev[r, d]:.1f} std "
                                     f"from its mean {_value(mean[d])}", f"{kind} {key}", level="warn"))
            rows_j, dims_j = np.nonzero(jumps)
            for r, d in zip(rows_j[:MAX_FINDINGS_PER_EPISODE], dims_j[:MAX_FINDINGS_PER_EPISODE]):
                found.append(finding(ep, ts[r + 1], f"{s.labels[d]} jumps {_value(step[r, d])} in one "
                                     f"sample, {step[r, d] / max(scale[d], 1e-300):.0f} x its 99th-percentile step "
                                     f"{_value(scale[d])}", f"{kind} {key}", level="warn"))
            for d in np.flatnonzero(far.any(axis=0) | jumps.any(axis=0)):
                tally = counts.setdefault(s.labels[d], [0, 0])
                tally[0] += int(far[:, d].sum())
                tally[1] += int(jumps[:, d].sum())
            if len(rows) or len(rows_j):
                eps.add(ep)
    judged = dict(judged_counts(parts), dimensions=judged_dims)
    if not judged_dims:
        return nothing_to_judge("no position dimension that moves")
    rule = f"beyond {k_sigma:g} std of the dataset mean or a step over {k_jump:g} x the 99th-percentile step"
    if counts:
        shown = "; ".join(f"{n}: {o} outlier(s), {j} jump(s)" for n, (o, j) in list(counts.items())[:6])
        return Outcome(True, f"{sum(o + j for o, j in counts.values())} value(s) {rule} in {len(eps)} episode(s): {shown}",
                       warned=sorted(eps), findings=found, judged=judged)
    return Outcome(True, f"{judged_dims} position dimensions: no value {rule}", judged=judged)


def _task_of(ctx: Context) -> dict[str, object]:
    return {str(e.get("id")): e.get("task_index", e.get("task")) for e in ctx.ds.meta.episodes}


#: the group of a drift compared over every episode, when no task has enough episodes of its own
ACROSS_TASKS = "all tasks together"


def _drift_reduce(ctx: Context, _prep, parts: dict) -> Outcome:
    """The mean of no position dimension of a state or action vector moves between the first and the last
    quarter of a task's episodes (in dataset order) by more than `drift_sigmas` (3) standard deviations
    (pooled within the two quarters: a shift of the whole distribution, not a wide motion): a sensor
    whose calibration drifted, an operator whose habit changed, a camera mount moved. Compared per task
    (different tasks differ by nature), over the episodes in which the vector moves; needs
    `drift_min_episodes` (8) such episodes of one task, else a skip saying how many there are.
    lerobot-doctor's figure is 3 std too. When no task has that many (a prompt per episode) but the
    dataset has, its episodes are compared across tasks, and the detail says so. A warning naming the
    dimension, both means and the shift."""
    streams = by_stream(parts)
    if not streams:
        return nothing_to_judge(NOTHING)
    need, k = ctx.t.drift_min_episodes, ctx.t.drift_sigmas
    task = _task_of(ctx)
    drifted, eps, judged_eps, judged_dims, most, across = [], set(), set(), 0, 0, False
    for all_items in streams.values():
        groups: dict[object, list] = {}
        for ep, s in all_items:
            if s.moving:
                groups.setdefault(task.get(ep), []).append((ep, s))
        if len(groups) > 1 and max(map(len, groups.values())) < need:
            # no task has enough episodes (a prompt per episode): the episodes are compared across tasks
            groups = {ACROSS_TASKS: [(ep, s) for ep, s in all_items if s.moving]}
            across = True
        for t, items in groups.items():
            most = max(most, len(items))
            if len(items) < need:
                continue
            q = len(items) // 4
            first, last = items[:q], items[-q:]
            lo, hi, n = _span(items)
            mask = position_dims(items[0][1]) & (n > 0) & (lo < hi)
            if not mask.any():
                continue
            judged_eps.update(ep for ep, _ in items)
            judged_dims += int(mask.sum())
            m1, s1, _ = _moments(first)
            m2, s2, _ = _moments(last)
            pooled = np.maximum(np.sqrt((s1**2 + s2**2) / 2),
                                rest_floor(np.maximum(np.abs(lo), np.abs(hi)), ctx.t.signal_rest_range))
            shift = np.abs(m2 - m1) / pooled
            for d in np.flatnonzero(mask & (shift > k)):
                where = "" if t is None else f" ({t})" if t == ACROSS_TASKS else f" (task {t})"
                drifted.append(f"{items[0][1].labels[d]}{where}: "
                               f"mean {_value(m1[d])} over episodes {first[0][0]}..{first[-1][0]}, {_value(m2[d])} over "
                               f"{last[0][0]}..{last[-1][0]} ({shift[d]:.1f} std)")
                eps.update(ep for ep, _ in last)
    if not judged_dims:
        return nothing_to_judge(f"drift needs {need} episodes in which a vector moves (of one task, or of all when no "
                                f"task has that many); the most is {most}")
    judged = dict(judged_counts({ep: parts[ep] for ep in judged_eps}), dimensions=judged_dims)
    if drifted:
        return Outcome(True, f"{len(drifted)} dimension(s) drift between the first and last quarter of their task's "
                             f"episodes (more than {k:g} std): {'; '.join(drifted[:6])}", warned=sorted(eps), judged=judged)
    return Outcome(True, f"{judged_dims} position dimensions: no mean moves more than {k:g} std between the first and "
                         f"last quarter of a task's episodes{' (of all, no task having ' + str(need) + ')' if across else ''}",
                   judged=judged)


def _stuck_zero_reduce(ctx: Context, _prep, parts: dict) -> Outcome:
    """No dimension of a state or action vector is exactly 0.0 over a whole episode while other dimensions
    of the same vector (the same arm) move in it: the signature of a joint whose name is missing from a
    ROS 2 `/joint_states` message, which recorders write as 0.0 (a real joint's reading is never exactly
    0.0 for a whole episode).

    A failure when the dimension is 0.0 in every episode in which its siblings move and the robot's profile
    knows it as a joint (the recording never had that joint: a policy trained on it commands 0.0 there); a
    warning when only in some episodes (the joint was lost in those), or when no profile knows the dimension
    (a joint never recorded, or a part this robot lacks: a hand not fitted). Each such
    episode is a finding over its whole span, naming the dimension. Joint positions only: a Cartesian
    coordinate or a quaternion component of a pose may be 0.0 throughout, and a driver that reports no
    velocity or effort writes 0.0 there."""
    streams = by_stream(parts)
    if not streams:
        return nothing_to_judge(NOTHING)
    failed, warned, found, always, sometimes, unknown = set(), set(), [], [], [], []
    match = robot_of(ctx)
    for (kind, key), items in streams.items():
        known = joints_of(match, key)
        width = len(items[0][1].columns)
        if width < 2:
            continue
        # joint positions only: a pose's coordinate or quaternion component may be 0.0 throughout (a rotation
        # about one axis), and a driver that reports no velocity or effort writes 0.0 there
        joint = position_dims(items[0][1]) & np.array([not key.endswith("/pose") and not is_cartesian(c)
                                                       for c in items[0][1].columns])
        zeros = np.stack([s.zero for _, s in items]) & joint
        moving = np.stack([s.dim_moving for _, s in items])
        # siblings move: some other dimension of the same episode moves
        siblings = (moving.sum(axis=1, keepdims=True) - moving) > 0
        stuck = zeros & siblings
        for d in np.flatnonzero(stuck.any(axis=0)):
            name = items[0][1].labels[d]
            where_eps = [items[i][0] for i in np.flatnonzero(stuck[:, d])]
            everywhere = bool(stuck[:, d].sum() == siblings[:, d].sum())
            whole = everywhere and d < len(known) and known[d] is not None and known[d].role == "joint"
            text = f"{name} ({len(where_eps)} of {int(siblings[:, d].sum())} episodes)"
            (always if whole else unknown if everywhere else sometimes).append(text)
            (failed if whole else warned).update(where_eps)
            for i in np.flatnonzero(stuck[:, d]):
                ep, s = items[i]
                found.append(finding(ep, s.t0, f"{name} is 0.0 over the whole episode while {int(moving[i].sum())} "
                                     f"other dimension(s) of the vector move", f"{kind} {key}", end_ns=s.t1,
                                     level="fail" if whole else "warn"))
    judged = judged_counts(parts)
    parts_text = []
    if always:
        parts_text.append(f"0.0 in every episode while the rest of its vector moves (a joint of {match.profile.name} "
                          f"never recorded): {'; '.join(always[:6])}")
    if unknown:
        parts_text.append(f"0.0 in every episode while the rest of its vector moves, a dimension no robot profile knows "
                          f"(never recorded, or a part the robot lacks): {'; '.join(unknown[:6])}")
    if sometimes:
        parts_text.append(f"0.0 over some episodes while the rest of its vector moves: {'; '.join(sometimes[:6])}")
    if parts_text:
        return Outcome(not failed, "; ".join(parts_text), sorted(failed), warned=sorted(warned - failed),
                       findings=found, judged=judged)
    return Outcome(True, f"{judged['dimensions']} dimensions of {judged['streams']} vectors: none exactly 0.0 over an "
                         f"episode while the rest of its vector moves", judged=judged)


def _episode(keep: tuple[str, ...]):
    def episode(ctx: Context, ep: str, _prep) -> list[StreamSummary] | None:
        return view(ctx, ep, keep)
    return episode


check_constant_dimensions = EpisodeCheck(_episode(("n", "lo", "hi")), _constant_reduce)
check_pinned_at_bound = EpisodeCheck(_episode(("n", "lo", "hi", "n_lo", "n_hi", "t_lo", "t_hi")), _pinned_reduce)
check_outliers = EpisodeCheck(_episode(("n", "lo", "hi", "s1", "s2", "step_p99", "step_max")), _outliers_reduce)
check_drift = EpisodeCheck(_episode(("n", "lo", "hi", "s1", "s2")), _drift_reduce)
check_stuck_zero_joint = EpisodeCheck(_episode(("zero",)), _stuck_zero_reduce)
