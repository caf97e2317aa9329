"""``camera_placement``: each camera hangs where its name says.

A wrist camera rides on its arm: when that arm moves, the camera's whole view changes at once (every
part of the picture shifts). The head camera is fixed: an arm moving through its view changes a part of
the picture, never all of it. So, per episode and camera, over windows of at least
:data:`WINDOW_S` (so that the figures do not depend on the camera rate):

* a window where the camera's **whole view changes** is one where at least :data:`WHOLE_FRACTION` of its
  16x12 grey thumbnail's cells change by more than :data:`CELL_GREY` grey levels beyond a change of the
  whole picture's brightness and contrast (an exposure that follows an arm into view moves no cell);
* an arm **moves** in a window when its joints (1-7 and the gripper, whose fingers move in front of its
  wrist camera) move faster than :data:`ARM_MOVING` rad/s (summed).

A wrist camera ``wrist_<side>`` whose whole view changes mostly while its own arm rests and the other arm
moves hangs on the other arm; a head (or any fixed) camera whose whole view changes in a good part of
the windows where an arm moves rides on that arm. The check cannot tell (``skip``, said so) where no arm
moves, and judges nothing about a camera whose view never changes as a whole (an idle wrist, a fixed
camera): such a camera is consistent with either name.
"""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import layout

from .camera_scan import THUMB_H, THUMB_W, joint_motion, scan
from .check import CheckFn, Context, Outcome, finding

#: cameras fixed to the robot's body, which no arm carries (OpenArm's head camera)
FIXED_CAMERAS = ("head",)
#: s: shortest window the motion of a camera's view is judged over (a camera period when longer)
WINDOW_S = 0.2
#: grey levels: a thumbnail cell (a block mean) that changes by more than this has changed
CELL_GREY = 4.0
#: fraction of a thumbnail's cells that change when the camera's whole view moves
WHOLE_FRACTION = 0.3
#: median correlation of consecutive thumbnails below which a camera's pictures are unrelated (noise)
MIN_RELATED = 0.5
#: rad/s: joints 1-7 of an arm moving faster than this (summed |dq/dt|) move it
ARM_MOVING = 0.5
#: windows of an arm's motion needed to judge a camera against it
MIN_WINDOWS = 5
#: windows of whole-view change with an arm needed to say the camera moves with it
MIN_HITS = 3
#: a wrist camera hangs on another arm when its whole view changes in at least this share of the windows
#: where that arm moves alone, and at least twice (plus MARGIN) its share where its own arm moves alone
#: (clean bimanual episodes: own 33-56%, the other arm 0-7%)
OTHER_SHARE_MIN = 0.25
MARGIN = 0.1
#: a fixed camera rides on an arm when its whole view changes in at least this share of that arm's moving
#: windows (clean generated data: 0)
FIXED_SHARE = 0.2


def _windows(ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) of frames at least WINDOW_S apart, j the first such frame after i (non-overlapping
    steps)."""
    t = ts.astype(np.float64) / 1e9
    i, out_i, out_j = 0, [], []
    ends = np.searchsorted(t, t + WINDOW_S - 1e-9)
    while i < len(t):
        j = int(max(ends[i], i + 1))
        if j >= len(t):
            break
        out_i.append(i)
        out_j.append(j)
        i = j
    return np.asarray(out_i, dtype=int), np.asarray(out_j, dtype=int)


def view_changes(thumbs: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Fraction of thumbnail cells that change by more than CELL_GREY between frames i and j beyond a change
    of brightness and contrast of the whole picture (frame j fitted as gain x frame i + offset, least
    squares: a camera's exposure or white balance following an arm into view moves no cell), NaN where a
    frame did not decode."""
    a = thumbs[i].reshape(len(i), THUMB_H * THUMB_W).astype(np.float64)
    b = thumbs[j].reshape(len(j), THUMB_H * THUMB_W).astype(np.float64)
    ok = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    a, b = np.where(np.isfinite(a), a, 0.0), np.where(np.isfinite(b), b, 0.0)
    w = np.ones_like(a)
    for _ in range(3):  # refitted on the better half of the cells: a part of the view that changed is no inlier
        n = w.sum(axis=1, keepdims=True)
        am, bm = (w * a).sum(axis=1, keepdims=True) / n, (w * b).sum(axis=1, keepdims=True) / n
        var = (w * (a - am) ** 2).sum(axis=1, keepdims=True)
        cov = (w * (a - am) * (b - bm)).sum(axis=1, keepdims=True)
        gain = np.where(var > 1e-6, cov / np.where(var > 1e-6, var, 1), 1.0)
        residual = np.abs(b - (bm + gain * (a - am)))
        w = (residual <= np.median(residual, axis=1, keepdims=True)).astype(np.float64)
    frac = (residual > CELL_GREY).mean(axis=1)
    frac[~ok] = np.nan
    return frac


def _unrelated(thumbs: np.ndarray) -> bool:
    """Whether a camera's consecutive thumbnails are mostly unrelated (median correlation below
    :data:`MIN_RELATED`): synthetic noise, not a view; a real camera's next picture resembles the last."""
    a, b = thumbs[:-1].reshape(len(thumbs) - 1, -1), thumbs[1:].reshape(len(thumbs) - 1, -1)
    ok = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    if not ok.any():
        return True
    a, b = a[ok] - a[ok].mean(axis=1, keepdims=True), b[ok] - b[ok].mean(axis=1, keepdims=True)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    r = np.where(den > 0, (a * b).sum(axis=1) / np.where(den > 0, den, 1), 1.0)  # a flat picture: itself again
    return float(np.median(r)) < MIN_RELATED


def _arm_moving(ctx: Context, ep: str, ts: np.ndarray, i: np.ndarray, j: np.ndarray) -> dict[str, np.ndarray]:
    obs = ctx.streams(ep, "obs")
    if not isinstance(obs, dict):
        return {}
    out = {}
    a, b = ts[i].astype(np.float64), ts[j].astype(np.float64)
    for key, s in sorted(obs.items()):
        if key.startswith("arms/") and key.endswith("/qpos") and len(s) > 1:
            rate = joint_motion([s], a, b, joints=None) / ((b - a) / 1e9)  # the gripper too: it moves in front of its camera
            out[key.split("/")[1]] = rate > ARM_MOVING
    return out


def check_camera_placement(ctx: Context) -> Outcome:
    """Each camera hangs where its name says: a wrist camera `wrist_<side>` (or `<side>_wrist`) moves with
    arm `<side>`, and the head camera `head` moves with no arm.

    A camera's whole view changes (at least 30% of its 16x12 grey thumbnail's cells by more than 4 grey
    levels beyond a change of the whole picture's brightness and contrast, over windows of at least 0.2 s)
    when the camera itself moves; an arm moving through a fixed
    camera's view changes only a part of it. A wrist camera whose whole view changes mostly (60%) while
    its own arm rests and the other arm moves hangs on the other arm; a fixed camera whose whole view
    changes in at least 20% of the windows where an arm moves (more than 0.5 rad/s summed over its joints and gripper),
    and more often than where it rests, rides on that arm. Each is a failure naming the cameras and the figures, and, when a wrist camera of
    the same episode does not move with its arm, the likely exchange. A camera whose view never changes as
    a whole is consistent with either name and is not judged, nor is a camera named neither for a wrist
    nor `head`, nor one whose consecutive pictures are unrelated (median correlation of the thumbnails
    below 0.5: noise, not a view). A `skip` (not applicable) when no arm moves
    under any camera, or no camera has two arms' streams to compare."""
    bad, found, problems, judged, still, unknown, noise = set(), [], [], 0, 0, 0, 0
    per_ep: dict[str, dict[str, dict]] = {}
    for (ep, name), sc in scan(ctx).items():
        if len(sc.timestamps) < 3:
            continue
        i, j = _windows(sc.timestamps)
        if len(i) < MIN_WINDOWS:
            continue
        moving = _arm_moving(ctx, ep, sc.timestamps, i, j)
        if not moving:
            continue
        if _unrelated(sc.thumbs):
            noise += 1  # consecutive pictures that do not resemble each other tell no motion
            continue
        whole = view_changes(sc.thumbs, i, j) >= WHOLE_FRACTION
        per_ep.setdefault(ep, {})[name] = {"whole": whole, "moving": moving, "i": i, "ts": sc.timestamps}
    for ep, cams in per_ep.items():
        for name, c in cams.items():
            whole, moving = c["whole"], c["moving"]
            if not any(m.any() for m in moving.values()):
                still += 1
                continue
            side = layout.wrist_side(name)
            if side is None and name not in FIXED_CAMERAS:
                unknown += 1  # where a camera of another name hangs, its name does not say
                continue
            judged += 1
            verdict = (_wrist_verdict(whole, moving, side) if side is not None and side in moving
                       else _fixed_verdict(whole, moving) if side is None else None)
            if verdict is None:
                continue
            arm, text, hit = verdict
            bad.add(ep)
            problems.append(f"episode {ep} camera {name}: {text}" + _exchange(cams, name, arm))
            found.append(finding(ep, c["ts"][c["i"][hit]], f"its whole view moves with arm {arm}", f"camera {name}"))
    if not judged:
        return Outcome(True, "no camera over an arm that moves (nothing to tell the cameras apart)", skipped=True,
                       applicable=False)
    detail = (f"{judged} episode-camera(s) judged: wrist cameras move with their own arm, fixed cameras with none "
              f"(whole view: >= {WHOLE_FRACTION:.0%} of the thumbnail changes over >= {WINDOW_S:g} s)")
    if still:
        detail += f"; {still} with no arm moving (cannot tell)"
    if noise:
        detail += f"; {noise} whose consecutive pictures are unrelated (noise, not judged)"
    if unknown:
        detail += f"; {unknown} named neither for a wrist nor the head (not judged)"
    if problems:
        detail += f"; {len(problems)} misplaced, first: {problems[0]}"
    return Outcome(not bad, detail, sorted(bad), findings=found, judged={"episode_cameras": judged})


def _alone(moving: dict[str, np.ndarray], arm: str) -> np.ndarray:
    """Windows where ``arm`` moves and every other arm rests."""
    out = moving[arm].copy()
    for other, m in moving.items():
        if other != arm:
            out &= ~m
    return out


def _wrist_verdict(whole: np.ndarray, moving: dict, side: str) -> tuple[str, str, int] | None:
    """(the arm it hangs on, why, a window) when the wrist camera of ``side`` moves with another arm: its
    whole view changes far more often in the windows where that arm moves alone than in those where its
    own arm moves alone (simultaneous motion of both tells nothing)."""
    own = _alone(moving, side)
    p_own = whole[own].mean() if own.any() else 0.0
    for arm in sorted(moving):
        if arm == side:
            continue
        other = _alone(moving, arm)
        hits = int((whole & other).sum())
        if hits < MIN_HITS:
            continue
        p_other = hits / int(other.sum())
        if p_other >= OTHER_SHARE_MIN and p_other >= 2 * p_own + MARGIN:
            text = (f"its whole view changes in {hits} of the {int(other.sum())} windows where arm {arm} moves alone "
                    f"({p_other:.0%}) and in {int((whole & own).sum())} of the {int(own.sum())} where arm {side} "
                    f"moves alone ({p_own:.0%}): it hangs on arm {arm}")
            return arm, text, int(np.flatnonzero(whole & other)[0])
    return None


def _fixed_verdict(whole: np.ndarray, moving: dict) -> tuple[str, str, int] | None:
    """(the arm it rides on, why, a window) when a camera not named for a wrist has its whole view change
    in a good part of the windows where an arm moves (alone, where the arms also moved apart)."""
    best = None
    for arm in sorted(moving):
        alone = _alone(moving, arm)
        windows = alone if alone.sum() >= MIN_WINDOWS else moving[arm]
        rest = ~moving[arm]
        n, hits = int(windows.sum()), int((whole & windows).sum())
        if n < MIN_WINDOWS or (rest.sum() < MIN_HITS and n < 2 * MIN_WINDOWS):
            continue  # too little motion, or too little of it against rest, to say what the camera follows
        p_rest = float(whole[rest].mean()) if rest.sum() >= MIN_HITS else 0.0
        if hits >= MIN_HITS and hits >= FIXED_SHARE * n and hits / n >= p_rest + MARGIN and \
                (best is None or hits / n > best[0]):
            text = (f"its whole view changes in {hits} of the {n} windows where arm {arm} moves "
                    f"({hits / n:.0%}; a fixed camera: 0) and in {p_rest:.0%} of those where it rests: it rides "
                    f"on arm {arm}")
            best = (hits / n, arm, text, int(np.flatnonzero(whole & windows)[0]))
    return None if best is None else best[1:]


def _exchange(cams: dict, name: str, arm: str) -> str:
    """`` (exchanged with wrist_<arm>?...)`` when the camera named for ``arm``'s wrist in the same episode
    does not move with it."""
    side = layout.wrist_side(name)
    for other, c in cams.items():
        if other != name and layout.wrist_side(other) == arm and arm in c["moving"]:
            m = c["moving"][arm]
            if m.sum() >= MIN_WINDOWS and (c["whole"] & m).sum() <= 0.1 * m.sum():
                return (f" (and camera {other}'s whole view changes in {int((c['whole'] & m).sum())} of the "
                        f"{int(m.sum())} windows where arm {arm} moves: {name} and {other} exchanged?)")
            if side is not None and side in c["moving"]:
                back = _wrist_verdict(c["whole"], c["moving"], arm)
                if back is not None and back[0] == side:
                    return f" (and camera {other} hangs on arm {side}: {name} and {other} exchanged?)"
    return ""


#: The placement check, in the camera family.
PLACEMENT_CHECKS: list[tuple[str, CheckFn]] = [
    ("camera_placement", check_camera_placement),
]
