"""Physical consistency of recorded data (any dataset, no sidecar needed): the streams must agree with
each other the way a robot's streams do.

- ``qvel_consistency``: obs ``qvel`` against the motion of obs ``qpos``. Over windows of
  ``qvel_window_seconds``, the displacement of each joint (q(t+W) - q(t)) is compared with the
  integral of its qvel over the same window (trapezoid rule on the real stamps), on the windows where
  the joint moves more than ``qvel_motion`` rad. Integrating (rather than differentiating qpos) keeps
  the comparison robust to jitter, dropped samples and a qpos that is held between updates. Per
  stream: the correlation of the two over the moving windows and the median ratio integral /
  displacement. A correlation of at least ``qvel_min_corr`` whose ratio is negative or off by more
  than a factor ``qvel_scale_tolerance`` fails (qvel in deg/s: ratio 57.3; sign flipped: -1); a
  correlation below it is a ``warn`` (the qvel stream does not follow qpos at all: a finding, e.g.
  the reference fixtures' test values, where qvel is qpos / 10).
- ``action_follows_obs``: each obs joint following its own commanded joint in the action stream.
  Both arms' obs and action qpos are resampled onto one 50 Hz grid over their common span; their
  increments are cross-correlated for lags up to ``follow_max_lag_seconds`` (obs lagging the command
  is a positive lag). For every column whose command or obs moves more than ``follow_motion`` rad:
  the range ratio obs / action must be within a factor ``follow_scale_tolerance`` (a unit change
  between streams, a still arm under a moving command), the best-lag correlation with its own
  command must be positive (sign), and no other commanded column of either arm may match it better
  by more than ``follow_margin`` (swapped columns, swapped arms). A joint whose command is held
  (moves at most ``follow_motion``) has no command motion to compare a range with: an arm that is
  knocked (by the other arm or a cube) moves under a held command and springs back (seed 3's
  episode 19: left joint 1 swings 0.057 rad for ~0.3 s while the right arm works). Such a joint fails
  only if its obs stays more than ``follow_motion`` away from its own median for
  ``follow_held_seconds`` or longer (another arm's stream: it moves on its own for seconds).
  Episodes whose common span is shorter than four lag windows (2 s by default) are not compared.
- ``duplicate_episodes``: two episodes whose streams (values of every obs and action stream) are
  byte-identical under different ids (SHA-256 of the arrays): every copy after the first in id order
  fails.
"""

from __future__ import annotations

import hashlib

import numpy as np

from openarm_sim_dataset.core import layout

from .check import CheckFn, Context, EpisodeCheck, Outcome, nothing_to_judge
from .timing import is_simulated

#: rate of the common grid of action_follows_obs (Hz): fast enough for a 0.1 s lag, cheap
FOLLOW_HZ = 50.0


def _arm_streams(ctx: Context, ep: str, kind: str, attr: str) -> dict[str, object]:
    """``{side: Stream}`` of ``arms/<side>/<attr>`` in ``kind`` (empty when unreadable)."""
    s = ctx.streams(ep, kind)
    if not isinstance(s, dict):
        return {}
    out = {}
    for key, stream in s.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[0] == "arms" and parts[2] == attr and len(stream) > 2:
            out[parts[1]] = stream
    return out


# ------------------------------------------------------------------ qvel against qpos
def qvel_figures(t_ns: np.ndarray, q: np.ndarray, v: np.ndarray, window_s: float, motion: float):
    """(correlation, median ratio, moving windows) of qvel's integral against qpos's displacement over
    windows of ``window_s`` seconds (all joints pooled; None when no window moves)."""
    t = (t_ns - t_ns[0]).astype(np.float64) / 1e9
    q = q.astype(np.float64)
    v = v.astype(np.float64)
    # cumulative trapezoid integral of qvel: I[k] = integral from t[0] to t[k]
    integral = np.vstack([np.zeros((1, v.shape[1])), np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(t)[:, None], axis=0)])
    end = np.searchsorted(t, t + window_s)
    ok = end < len(t)
    a, b = np.flatnonzero(ok), end[ok]
    if not len(a):
        return None, None, 0
    disp = q[b] - q[a]
    integ = integral[b] - integral[a]
    moving = np.abs(disp) > motion
    n = int(moving.sum())
    if n < 3:
        return None, None, n
    x, y = disp[moving], integ[moving]
    corr = float(np.corrcoef(x, y)[0, 1]) if np.std(x) > 0 and np.std(y) > 0 else 0.0
    ratio = float(np.median(y / x))
    return corr, ratio, n


def check_qvel_consistency(ctx: Context) -> Outcome:
    """Each arm's obs `qvel` agrees with the motion of its obs `qpos`: over windows of
    `qvel_window_seconds` (0.1 s by default) in which a joint moves more than `qvel_motion` (0.01 rad by
    default), the integral of qvel correlates at least `qvel_min_corr` (0.9 by default) with the qpos
    displacement, and their median ratio lies within a factor `qvel_scale_tolerance` (1.5 by default)
    of 1.

    Integrating qvel (trapezoid rule on the real stamps) rather than differentiating qpos keeps the
    comparison robust to jitter, dropped samples and a qpos held between updates; the windows of all
    joints of a stream are pooled. A correlation that strong with a ratio beyond the factor or of the
    opposite sign fails, and so does a correlation of minus `qvel_min_corr` or below; a weaker
    correlation is a `warn` (qvel does not follow qpos at all: kept as a finding, the episode stays
    usable). Only qpos and qvel with the same stamps are compared. A `skip` (not applicable) when no
    obs arm stream has both and moves. Recorded and simulated data are judged alike."""
    t = ctx.t
    bad, warned, findings, warn_first, streams, corrs, ratios = set(), set(), [], None, 0, [], []
    for ep in ctx.episodes:
        qpos, qvel = _arm_streams(ctx, ep, "obs", "qpos"), _arm_streams(ctx, ep, "obs", "qvel")
        for side in sorted(set(qpos) & set(qvel)):
            q, v = qpos[side], qvel[side]
            if len(q) != len(v) or not np.array_equal(q.timestamps, v.timestamps):
                continue  # one state.parquet holds both; other layouts pair them by stamps only
            width = min(q.values.shape[1], v.values.shape[1])
            corr, ratio, n = qvel_figures(q.timestamps, q.values[:, :width], v.values[:, :width],
                                          t.qvel_window_seconds, t.qvel_motion)
            if corr is None:
                continue
            streams += 1
            corrs.append(corr)
            ratios.append(ratio)
            where = f"episode {ep} obs arms/{side}/qvel"
            figures = f"correlation {corr:.3f}, median ratio {ratio:.3g} over {n} moving windows"
            if corr >= t.qvel_min_corr:
                if not (1 / t.qvel_scale_tolerance <= ratio <= t.qvel_scale_tolerance):
                    bad.add(ep)
                    what = "the opposite sign" if ratio < 0 else f"a scale of {ratio:.3g} (deg/s: 57.3)"
                    findings.append(f"{where}: its integral follows the motion of qpos with {what} ({figures})")
            elif corr <= -t.qvel_min_corr:
                bad.add(ep)
                findings.append(f"{where}: its integral follows the motion of qpos with the opposite sign ({figures})")
            else:
                warned.add(ep)
                warn_first = warn_first or f"{where}: does not follow the motion of qpos ({figures})"
    if streams == 0:
        return nothing_to_judge("no obs arm stream with both qpos and qvel that moves")
    detail = (f"{streams} streams: integral of qvel vs qpos displacement over {t.qvel_window_seconds:g} s windows "
              f"moving > {t.qvel_motion:g} rad: correlation min {min(corrs):.3f}, ratio {min(ratios):.3g}..{max(ratios):.3g} "
              f"(fail: correlation >= {t.qvel_min_corr:g} with a ratio outside 1/{t.qvel_scale_tolerance:g}.."
              f"{t.qvel_scale_tolerance:g})")
    if findings:
        detail += f"; {len(findings)} failed, first: {findings[0]}"
    if warned - bad:
        detail += f"; {len(warned - bad)} episode(s) warned, first: {warn_first}"
    return Outcome(not bad, detail, sorted(bad), warned=sorted(warned - bad), judged={"streams": streams})


# ------------------------------------------------------------------ obs following the action
def _resample(stream, grid: np.ndarray, width: int) -> np.ndarray:
    """(len(grid), width) linear interpolation of a stream's first ``width`` columns (float64)."""
    t = stream.timestamps
    v = stream.values[:, :width].astype(np.float64)
    k = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 2)
    w = ((grid - t[k]) / np.maximum(t[k + 1] - t[k], 1))[:, None]
    return v[k] + np.clip(w, 0, 1) * (v[k + 1] - v[k])


def lagged_correlations(obs: np.ndarray, act: np.ndarray, max_lag: int) -> np.ndarray:
    """(2*max_lag+1, n_obs, n_act): correlation of obs increments at t with action increments at t-lag
    for lag = -max_lag..max_lag (a column that does not move correlates 0)."""
    do, da = np.diff(obs, axis=0), np.diff(act, axis=0)
    n = len(do)
    out = np.zeros((2 * max_lag + 1, do.shape[1], da.shape[1]))
    for i, lag in enumerate(range(-max_lag, max_lag + 1)):  # 2*max_lag+1 matrix products, not per row
        o = do[max(lag, 0) : n + min(lag, 0)]
        a = da[max(-lag, 0) : n - max(lag, 0)]
        o = o - o.mean(axis=0)
        a = a - a.mean(axis=0)
        so, sa = np.linalg.norm(o, axis=0), np.linalg.norm(a, axis=0)
        denom = np.outer(so, sa)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[i] = np.where(denom > 0, (o.T @ a) / np.where(denom > 0, denom, 1), 0.0)
    return out


#: lobes of a joint's lagged correlation within this share of the strongest are equally strong (periodic motion)
LOBE_SHARE = 0.9


def judged_lag(own: np.ndarray, max_lag: int) -> int:
    """Index into ``own`` (a joint's correlation with its command at lags -max_lag..max_lag) of the lag it is
    judged at: the strongest correlation or, where motion repeats within the lag window (several lobes
    within :data:`LOBE_SHARE` of it, a sine's alternating with the half period), the peak of the lobe
    nearest lag 0 (of two as near, the positive one), since an obs follows its command with a short lag.
    For a pure sine an inverted joint and one half a period late are the same signal; this prior tells
    them apart. The strongest alone would judge a 2.5 Hz motion followed 0.1 s late at its -1.0 lobe of
    -0.5 s: "against its command"."""
    mag = np.abs(own)
    strong = np.flatnonzero(mag >= LOBE_SHARE * mag.max())
    k = int(strong[np.argmin(2 * np.abs(strong - max_lag) + (strong < max_lag))])  # a tie: the obs lags
    sign = 1.0 if own[k] >= 0 else -1.0
    while k > 0 and sign * own[k - 1] > sign * own[k]:  # up to the peak of the lobe
        k -= 1
    while k < len(own) - 1 and sign * own[k + 1] > sign * own[k]:
        k += 1
    return k


def follow_findings(ctx: Context, ep: str) -> tuple[list[str], dict] | None:
    """(failures, figures) of one episode (figures: range ratios, own-command correlations, margins over
    the best other column, lags in s), None when there is nothing to compare (no obs/action arm qpos
    pair, or a common span shorter than four lag windows)."""
    t = ctx.t
    obs, act = _arm_streams(ctx, ep, "obs", "qpos"), _arm_streams(ctx, ep, "action", "qpos")
    sides = sorted(set(obs) & set(act))
    if not sides:
        return None
    width = min(min(obs[s].values.shape[1], act[s].values.shape[1]) for s in sides)
    lo = max(max(int(obs[s].timestamps[0]), int(act[s].timestamps[0])) for s in sides)
    hi = min(min(int(obs[s].timestamps[-1]), int(act[s].timestamps[-1])) for s in sides)
    step = 1e9 / FOLLOW_HZ
    max_lag = int(round(t.follow_max_lag_seconds * FOLLOW_HZ))
    if hi - lo < step * (4 * max_lag + 4):
        return None
    grid = np.arange(lo, hi, step)
    o = np.hstack([_resample(obs[s], grid, width) for s in sides])
    a = np.hstack([_resample(act[s], grid, width) for s in sides])
    names = [f"{s} joint {j + 1}" for s in sides for j in range(width)]
    o_range, a_range = np.ptp(o, axis=0), np.ptp(a, axis=0)
    corr = lagged_correlations(o, a, max_lag)
    fails, figures = [], {"ratios": [], "own": [], "margin": [], "lags": [], "knocked": [], "unmeasured": []}
    for i, name in enumerate(names):
        if max(o_range[i], a_range[i]) <= t.follow_motion:
            continue
        if a_range[i] <= t.follow_motion:
            away = float(np.count_nonzero(np.abs(o[:, i] - np.median(o[:, i])) > t.follow_motion)) / FOLLOW_HZ
            if away < t.follow_held_seconds:
                figures["knocked"].append(float(o_range[i]))
                continue
            fails.append(f"obs {name} moves {o_range[i]:.3g} rad, {away:.2f} s away from its rest, while its command "
                         f"moves {a_range[i]:.3g} rad (ratio inf; another arm's stream, or a unit change)")
            continue
        ratio = o_range[i] / a_range[i] if a_range[i] > 0 else np.inf
        figures["ratios"].append(float(ratio))
        if not (1 / t.follow_scale_tolerance <= ratio <= t.follow_scale_tolerance):
            fails.append(f"obs {name} moves {o_range[i]:.3g} rad while its command moves {a_range[i]:.3g} rad "
                         f"(ratio {ratio:.3g}; a unit change, or another arm's stream)")
            continue
        own = corr[:, i, i]
        k = judged_lag(own, max_lag)
        figures["lags"].append((k - max_lag) / FOLLOW_HZ)
        figures["own"].append(float(own[k]))
        if own[k] <= -t.follow_min_corr:
            fails.append(f"obs {name} moves against its command (correlation {own[k]:.3f} at lag "
                         f"{(k - max_lag) / FOLLOW_HZ:+.2f} s)")
            continue
        if own[k] < 0:  # follows neither way measurably: held by contact (fingers blocked), not inverted
            figures["unmeasured"].append(name)
            continue
        best = corr[:, i, :].max(axis=0)
        best[i] = -np.inf
        j = int(np.argmax(best))
        figures["margin"].append(float(own[k] - best[j]))
        if best[j] - own[k] > t.follow_margin:
            fails.append(f"obs {name} follows the command of {names[j]} (correlation {best[j]:.3f}) better than "
                         f"its own ({own[k]:.3f}): columns or arms swapped")
    return fails, figures


def check_action_follows_obs(ctx: Context) -> Outcome:
    """Each moving obs joint follows its own commanded joint in the action stream: for every joint whose
    obs or command moves more than `follow_motion` (0.05 rad by default), the obs range is within a
    factor `follow_scale_tolerance` (3 by default) of the command's, it does not correlate with its own
    command at `-follow_min_corr` (-0.3 by default) or below at its lag within
    `follow_max_lag_seconds` (0.5 s by default: an inverted joint), and no other commanded column of either
    arm matches it better by more than `follow_margin` (0.1 by default). A joint whose best correlation is
    weakly negative follows its command in neither direction measurably (fingers held closed by a contact
    while the command opens them): counted, not judged.

    Both arms' obs and action `qpos` are resampled onto one 50 Hz grid over their common span and their
    increments are cross-correlated (obs lagging its command is a positive lag). A joint is judged at
    its strongest lag or, for motion that repeats within the window (lobes within 90% of the strongest),
    at the lobe nearest lag 0, of two as near the positive one. A joint that moves under
    a held command (one moving at most `follow_motion`) was knocked by the other arm or a cube and
    springs back: it passes unless its obs stays more than `follow_motion` from its median for
    `follow_held_seconds` (1 s by default) or more in all; the detail counts such joints. Episodes whose
    common span is shorter than four lag windows (about 2 s by default) are not compared. A `skip` (not
    applicable) when no episode has obs and action arm qpos that move."""
    t = ctx.t
    bad, first, episodes = set(), None, 0
    ratios, owns, margins, lags, knocked, unmeasured = [], [], [], [], [], 0
    for ep in ctx.episodes:
        res = follow_findings(ctx, ep)
        if res is None:
            continue
        fails, fig = res
        knocked += fig["knocked"]
        unmeasured += len(fig["unmeasured"])
        if not fig["ratios"] and not fails:
            continue
        episodes += 1
        ratios += fig["ratios"]
        owns += fig["own"]
        margins += fig["margin"]
        lags += fig["lags"]
        if fails:
            bad.add(ep)
            first = first or f"episode {ep}: {fails[0]}" + (f" (+{len(fails) - 1} more)" if len(fails) > 1 else "")
    if episodes == 0:
        return nothing_to_judge("no episode with obs and action arm qpos that move")
    def fmt(v: list, f: str) -> str:
        return f"{min(v):{f}}..{max(v):{f}}" if v else "n/a"

    detail = (f"{episodes} episodes, {len(ratios)} moving joints: range ratio obs/action {fmt(ratios, '.3g')} "
              f"(limit x{t.follow_scale_tolerance:g}), own-command correlation {fmt(owns, '.3f')}, margin over the best "
              f"other column {fmt(margins, '.3f')} (limit -{t.follow_margin:g}), lag {fmt(lags, '+.2f')} s")
    if knocked:
        detail += (f"; {len(knocked)} joint(s) under a held command knocked and back (up to {max(knocked):.3g} rad, "
                   f"away < {t.follow_held_seconds:g} s)")
    if unmeasured:
        detail += (f"; {unmeasured} joint(s) following their command in neither direction measurably (best "
                   f"correlation between -{t.follow_min_corr:g} and 0: held by a contact)")
    if bad:
        detail += f"; {len(bad)} failed, first: {first}"
    return Outcome(not bad, detail, sorted(bad), judged={"episodes": episodes, "joints": len(ratios)})


# ------------------------------------------------------------------ duplicate episodes
def content_hash(ctx: Context, ep: str) -> str | None:
    """SHA-256 of every obs and action stream's timestamps and values (keys in order, shapes and bytes),
    and of a simulated episode's initial state, None when unreadable or empty. A copied episode keeps all
    of them; two real recordings never share their stamps, and two simulated episodes whose arms do the
    same (e.g. a policy holding still) differ in where the scene started."""

    def initial_state():
        side = ctx.sidecar(ep) if is_simulated(ctx, ep) else None
        return side.get("initial_state") if isinstance(side, dict) else None

    return episode_digest(lambda kind: ctx.streams(ep, kind), ctx.ds.episode(ep), initial_state)


def episode_digest(streams, entry: dict, initial_state) -> str | None:
    """:func:`content_hash` from loaders: ``streams(kind)`` (the kind's streams, or an error string),
    the episode's metadata ``entry`` and ``initial_state()`` (the sidecar's array, or None); also what
    ``dataset-merge`` compares across its inputs (the same digest: merge refuses what this check fails)."""
    h, n = hashlib.sha256(), 0
    for kind in layout.KINDS:
        s = streams(kind)
        if not isinstance(s, dict):
            return None
        for key in sorted(s):
            v = np.ascontiguousarray(s[key].values)
            h.update(f"{kind}/{key}{v.shape}".encode())
            h.update(np.ascontiguousarray(s[key].timestamps, dtype=np.int64).tobytes())
            h.update(v.tobytes())
            n += v.size
    src = entry.get("render_source")
    if isinstance(src, dict) and "variant" in src:  # visual variants share their source's physics by design
        h.update(f"render_source {src.get('episode')!r} variant {src.get('variant')!r}".encode())
    init = initial_state()
    if init is not None:
        h.update(b"initial_state" + np.ascontiguousarray(init, dtype=np.float64).tobytes())
    return h.hexdigest() if n else None


def _duplicates_reduce(ctx: Context, _prep, digests: dict) -> Outcome:
    """Every episode's content is its own: no two episodes share the SHA-256 of their obs and action
    streams (keys, shapes, timestamps and values) and, for simulated episodes, of their initial state.

    Of identical episodes the first in id order passes and every later one fails. Digests are compared
    across the whole dataset, also when it is validated in groups of episodes. Two real recordings never
    share their stamps, and two simulated episodes whose arms do the same differ in where the scene
    started; a visual variant of `dataset-render`, which shares its source's physics by design, is told
    apart by its `render_source`. An episode whose streams cannot be read, or are empty, is not compared."""
    groups: dict[str, list[str]] = {}
    for ep, digest in digests.items():
        if digest is not None:
            groups.setdefault(digest, []).append(ep)
    dups = [g for g in groups.values() if len(g) > 1]
    bad = sorted({ep for g in dups for ep in g[1:]})
    detail = f"{sum(len(g) for g in groups.values())} episodes, {len(groups)} distinct stream contents (SHA-256)"
    if dups:
        detail += "; identical: " + "; ".join(" = ".join(g) for g in dups[:5])
    compared = sum(len(g) for g in groups.values())
    if compared < 2 and not bad:
        return nothing_to_judge(f"{compared} episode with readable streams: nothing to compare")
    return Outcome(not bad, detail, bad, judged={"episodes": compared})


#: one digest per episode, compared over the whole dataset (also when it is validated in groups)
check_duplicate_episodes = EpisodeCheck(lambda ctx, ep, _prep: content_hash(ctx, ep), _duplicates_reduce)


#: Checks of physical consistency for every dataset (not run by ``--quick``).
PHYSICS_CHECKS: list[tuple[str, CheckFn]] = [
    ("qvel_consistency", check_qvel_consistency),
    ("action_follows_obs", check_action_follows_obs),
    ("duplicate_episodes", check_duplicate_episodes),
]
