"""Camera streams of any dataset (recorded or simulated): frozen (stale) cameras, frames that do not
belong between their neighbours, and pictures that do not move with the joints in time (their timing
against the state streams, ``camera_rate`` and ``camera_coverage``, is in :mod:`.timing`).

Every frame is read and decoded once per run by :func:`scan` (shared with the ``jpeg_frames`` form
check): its size or decoding error, whether its bytes equal the previous frame's, the mean absolute
difference to the previous frame in grey levels (on every other row and column: a frozen image differs
by ~0, a live one by the sensor noise or the motion it sees), its texture (mean |gradient| of the grey
levels on the same pixels) and a 16x12 grey thumbnail (block means of the luma: what the continuity
check compares, the same for any image size, little JPEG noise).

A camera is *frozen* when consecutive frames stay the same image (byte-identical, or differing by
less than ``frozen_noise_floor``) for at least ``frozen_seconds`` while something it could see moved.
What it could see:

* simulated data (the episode has a sidecar with this camera's depth and label frames): its view
  itself. The run is frozen when, against the run's first frame, the labels or the depth (by more
  than ``frozen_depth_m``) changed in more than ``frozen_view_fraction`` of the pixels at some frame
  of the run: the scene in front of the lens changed, the JPEGs did not. A still view (a wrist camera
  on an arm that rests while the other arm works) is not frozen.
* recorded data (no sidecar frames): arm motion, some joint moving more than ``frozen_motion`` rad;
  for a wrist camera ``wrist_<side>`` only the joints of its own arm (obs ``arms/<side>/qpos``: the
  other arm's motion moves nothing in front of it), for a fixed camera (``head``) any arm.

With nothing moving in view, an unchanging image is what a working camera shows. A run whose last frame
(and, simulated, the frame whose view changed most) differs from its first by more than the noise floor
is not one image: a view that moves slowly (the resting arm's wrist camera drifting by a millimetre while
1.7 % of its view changes over a second) changes each step by less than the floor, and its pictures follow.
The default of one second follows a teleop recorder that discards an episode whose camera stays stale
that long.

``camera_continuity`` (no sidecar needed): each inner frame's thumbnail against its two neighbours'.
A frame more than ``continuity_min_grey`` grey levels from both neighbours, and farther from each than
``continuity_ratio`` times what it may be, does not belong between them: another camera's picture, an
image a tool transformed (mirrored, recoloured), a frame out of place. What it may be: the neighbours'
distance to each other (at least ``continuity_floor``; motion adds up, so a frame of a moving scene is
at most about as far from each neighbour as they are from each other), or, if more, what the joints
the camera sees moved between the frame and that neighbour times the picture change per radian around
it (:func:`local_gain`): at a camera rate low against the motion, the motion turns back between two
frames (a wrist camera reaching the cube and leaving it at 5 Hz: ratio 3.13 to neighbours alone, 1.18
with the joints). The first and last frames have one neighbour and are not judged.

``camera_joint_timing`` (no sidecar needed), the visual twin of ``action_follows_obs``: per camera,
the image motion between consecutive frames (the scan's mean |difference| over the two frames' mean
|gradient|, a displacement: a plain view and a textured one moved alike count alike; per second) against the
motion of the joints it sees over the same interval (sum of |dq| of joints 1-7 of its own arm for
``wrist_<side>``, of every arm for a fixed camera, per second; a wrist camera's own gripper, whose fingers
move in front of its lens, ranked apart and added), moved back by lags up to
``camera_max_lag_seconds``; rank (Spearman) correlation, as image motion saturates where the arm moves
fast. The best lag is reported per camera (a positive lag: the pictures show the motion that much
later, a latency). A camera fails when a lag outside the allowed ones correlates better than every
allowed lag by more than ``max(timing_margin, 1/sqrt(frames))`` (the standard error of a correlation
of that many samples) and at least ``timing_min_corr``: allowed are +- ``camera_lag_tolerance_periods``
camera periods in simulated data (rendered at the stored state: exact) and, in recorded data, from
that lead up to ``camera_max_latency_seconds`` of latency (a later clear lag is a ``warn``: a slow
camera, usable; a lead, pictures before the motion, fails). Cameras with fewer than
``timing_min_frames`` frames, spans shorter than twice the lag range plus a second, joints that did
not move (``follow_motion``), or a best correlation below ``timing_min_corr`` (e.g. a camera whose
pictures are noise) are counted and not judged.
"""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import layout, sidecar as sidecar_schema
from openarm_sim_dataset.core.camera import decode_jpeg
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.video_camera import DecodedCamera

from .camera_scan import (  # the measures; CameraScan and thumbnail also importable from here, as before
    CHUNK,
    THUMB_H,
    THUMB_W,
    CameraScan,  # noqa: F401
    displacement,
    gripper_streams,
    hand_motion,
    joint_motion,
    mean_ranks,
    ranks,
    scan,
    thumbnail,  # noqa: F401
    visible_qpos,
    wrist_hand_poses,
)
from .check import MAX_FINDINGS_PER_EPISODE, CheckFn, Context, Outcome, finding, no_camera_reason, nothing_to_judge
from .timing import exact_timing


def _runs(same: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) frame index of every run of frames showing one image: ``same[k]`` says frame k
    equals frame k-1, so a run of True from a to b spans frames a-1..b."""
    edges = np.diff(np.r_[0, same.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(int(a) - 1, int(b)) for a, b in zip(starts, ends)]


def _arm_motion(ctx: Context, ep: str, camera: str, t0: int, t1: int) -> tuple[float, str] | None:
    """Largest range (rad) of a joint the camera could see move over [t0, t1] (ns) in the obs qpos
    streams, and what was looked at: a wrist camera ``wrist_<side>`` (or ``<side>_wrist``) rides on arm ``<side>`` and sees
    only that arm's motion move its view; any other camera sees every arm. None: no such arm stream."""
    obs = ctx.streams(ep, "obs")
    if not isinstance(obs, dict):
        return None
    side = layout.wrist_side(camera)
    keys = [f"arms/{side}/qpos"] if side else [k for k in obs if k.endswith("/qpos")]
    moves = []
    for key in keys:
        s = obs.get(key)
        if s is not None and len(s):
            a = np.searchsorted(s.timestamps, t0, side="left")
            b = np.searchsorted(s.timestamps, t1, side="right")
            window = s.values[a:b]
            if len(window):
                moves.append(float(np.nanmax(np.ptp(window, axis=0))))
    if not moves:
        return None
    return max(moves), (f"arm {side} (its own) moved" if side else "the arms moved")


#: a camera's run is judged against the state where no arm is mapped: some dimension moving more than this
#: share of its own range over the episode is motion the camera may see
STATE_MOTION_SHARE = 0.05


def _state_motion(ctx: Context, ep: str, t0: int, t1: int) -> float | None:
    """The largest share of its episode's range that any dimension of the obs streams moved over [t0, t1]
    (ns), for a dataset whose arms no profile maps (units unknown); None without obs streams."""
    obs = ctx.streams(ep, "obs")
    if not isinstance(obs, dict):
        return None
    best = None
    for s in obs.values():
        if len(s) < 2 or s.values.ndim != 2:
            continue
        a = np.searchsorted(s.timestamps, t0, side="left")
        b = np.searchsorted(s.timestamps, t1, side="right")
        if b - a < 1:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            span = np.nanmax(s.values, axis=0) - np.nanmin(s.values, axis=0)
            window = np.nanmax(s.values[a:b], axis=0) - np.nanmin(s.values[a:b], axis=0)
            share = np.where(span > 0, window / span, 0.0)
        if np.isfinite(share).any():
            best = max(best or 0.0, float(np.nanmax(share)))
    return best


def _view_frames(ctx: Context, ep: str, camera: str, timestamps: np.ndarray):
    """(depth (F, H, W) m, labels (F, H, W), rows (n,)) of the camera from the episode's sidecar
    (frames.npz), ``rows[k]`` the sidecar frame stamped ``timestamps[k]``; None when the episode has no sidecar
    (recorded data), lacks this camera's frames, or its stamps do not match the camera's (then the
    sidecar checks say what is wrong and this check falls back to arm motion)."""
    if not (ctx.sim_dir(ep) / sidecar_schema.SIDECAR_FILE).is_file():
        return None
    side, frames = ctx.sidecar(ep), ctx.frames(ep)
    if not isinstance(side, dict) or not isinstance(frames, dict):
        return None
    depth, labels = frames.get(f"depth_{camera}"), frames.get(f"labels_{camera}")
    if depth is None or labels is None or depth.shape != labels.shape:
        return None
    stamps = side["frame_timestamp"]
    rows = np.searchsorted(stamps, timestamps)
    if len(stamps) == 0 or rows.max(initial=0) >= len(stamps) or not np.array_equal(stamps[rows], timestamps):
        return None
    return depth, labels, rows


def _view_change(view, a: int, b: int, depth_m: float) -> tuple[float, int]:
    """(fraction, frame): largest fraction of pixels whose label changed, or depth changed by more than
    ``depth_m``, at a frame of the run a..b against frame a (the sidecar's lossless view of what the camera
    saw), and that frame."""
    depth, labels, rows = view
    r = rows[a : b + 1]
    d0, l0 = depth[r[0]], labels[r[0]]
    worst, at = 0.0, a
    for k in range(1, len(r), CHUNK):  # a chunk of frames at a time: a long run of large frames stays small in memory
        rk = r[k : k + CHUNK]
        with np.errstate(invalid="ignore"):
            moved = (np.abs(depth[rk] - d0) > depth_m) | (labels[rk] != l0)
        frac = moved.mean(axis=(1, 2))
        if len(frac) and float(frac.max()) > worst:
            worst, at = float(frac.max()), a + k + int(np.argmax(frac))
    return worst, at


def _frame_image(cam, i: int):
    """Frame i of a camera decoded (None when it does not decode)."""
    try:
        if isinstance(cam, DecodedCamera):
            return cam.load_frame(i)
        frame = cam.get_frame(i)
        return decode_jpeg(frame.read_bytes(), frame.path)
    except (DatasetError, OSError):
        return None


def _drift(ctx: Context, ep: str, camera: str, a: int, others: list[int]) -> float:
    """Largest mean |difference| (grey levels, every other row and column, as the scan) of frame ``a``
    against the frames ``others``: how far the pictures of a run strayed from its first one, each step
    below the noise floor (0: not decodable)."""
    cams = ctx.cameras(ep)
    cam = cams.get(camera) if isinstance(cams, dict) else None
    first = None if cam is None else _frame_image(cam, a)
    worst = 0.0
    for k in others:
        img = _frame_image(cam, k) if first is not None else None
        if img is not None and img.shape == first.shape:
            worst = max(worst, float(np.abs(img[::2, ::2].astype(np.int16) - first[::2, ::2]).mean()))
    return worst


def check_camera_frozen(ctx: Context) -> Outcome:
    """No camera shows an unchanging image for `frozen_seconds` (1 s by default) or longer while something
    it could see moved. Unchanging: consecutive frames byte-identical, or differing by at most
    `frozen_noise_floor` (0.1 grey levels by default) in mean absolute difference, and the run's last
    frame no farther than that from its first (a slow drift below the floor at each step is a live camera).

    What the camera could see: in simulated data (the episode's sidecar holds this camera's depth and
    label frames) its view itself, which moved when, against the run's first frame, more than
    `frozen_view_fraction` (0.01 by default: 1 %) of its pixels changed their label, or their depth by
    more than `frozen_depth_m` (5 mm by default); in recorded data the arms, some joint moving more than
    `frozen_motion` (0.02 rad by default): for a wrist camera `wrist_<side>` a joint of its own arm (obs
    `arms/<side>/qpos`), for any other camera a joint of any arm; where no arm is mapped (a robot no profile
    knows), some state dimension moving more than 5 % of its range over the episode. A simulated episode whose sidecar frames
    do not match the camera's stamps is judged on the arms too.

    A still view (the wrist camera of an arm that rests while the other arm works) is not frozen: such
    long runs are counted in the detail, not failed. Nor is a run whose last frame (and, in simulated data,
    the frame whose view changed most) differs from its first by more than `frozen_noise_floor`: its
    pictures drift with a view that moves slowly, each step below the floor (counted). The difference is
    taken on every other pixel row and column. A `skip` (not applicable) when the dataset has no camera. Each frozen run is a timed finding
    (its first to its last frame)."""
    scans = scan(ctx)
    if not scans:
        return nothing_to_judge(no_camera_reason(ctx, "with frames"))
    t = ctx.t
    limit_ns = t.frozen_seconds * 1e9
    bad, findings, longest, still_runs, pairs, by_view, still_view, found = set(), [], 0.0, 0, 0, 0, 0.0, []
    drifting, largest_drift = 0, 0.0
    for (ep, name), s in scans.items():
        if len(s.timestamps) < 2:
            continue
        pairs += len(s.timestamps) - 1
        with np.errstate(invalid="ignore"):
            same = s.identical | (s.diff <= t.frozen_noise_floor)
        same[0] = False
        view = None
        for a, b in _runs(same):
            t0, t1 = int(s.timestamps[a]), int(s.timestamps[b])
            dur = (t1 - t0) / 1e9
            longest = max(longest, dur)
            if t1 - t0 < limit_ns:
                continue
            if view is None:
                view = _view_frames(ctx, ep, name, s.timestamps) or False
            if view:
                by_view += 1
                change, at = _view_change(view, a, b, t.frozen_depth_m)
                moved = change > t.frozen_view_fraction
                why = f"while {change:.1%} of its view changed (sidecar depth/labels)"
            else:
                motion = _arm_motion(ctx, ep, name, t0, t1)
                if motion is not None:
                    moved = motion[0] > t.frozen_motion
                    why = f"while {motion[1]} {motion[0]:.3f} rad"
                else:  # no arm mapped: unknown motion is not no motion, the state vectors in their own scale
                    share = _state_motion(ctx, ep, t0, t1)
                    moved = share is not None and share > STATE_MOTION_SHARE
                    why = f"while the state moved {share:.0%} of its episode's range (no arm mapped)" if share else ""
            if not moved:
                still_runs += 1
                if view:
                    still_view = max(still_view, change)
                continue
            if not s.identical[a + 1 : b + 1].all():
                # each step below the noise floor, but the pictures may drift with a slow view: a live camera
                drift = _drift(ctx, ep, name, a, sorted({b, at}) if view else [b])
                if drift > t.frozen_noise_floor:
                    drifting += 1
                    largest_drift = max(largest_drift, drift)
                    continue
            bad.add(ep)
            kind = "byte-identical" if s.identical[a + 1 : b + 1].all() else "unchanged"
            findings.append(f"episode {ep} camera {name}: frames {a}..{b} {kind} for {dur:.2f} s from t={t0} ns {why}")
            found.append(finding(ep, t0, f"frames {a}..{b} {kind} for {dur:.2f} s {why}", f"camera {name}", t1))
    detail = (f"{pairs} consecutive frame pairs; longest unchanged run {longest:.2f} s (limit {t.frozen_seconds:g} s "
              f"while its view changes in > {t.frozen_view_fraction:.1%} of the pixels (simulated: sidecar depth "
              f"> {t.frozen_depth_m:g} m or labels), else its own arm / for a fixed camera any arm moves "
              f"> {t.frozen_motion:g} rad; same image: mean |diff| <= {t.frozen_noise_floor:g} grey levels)"
              + (f"; {by_view} long run(s) judged on the sidecar's view (largest change of a still one "
                 f"{still_view:.2%})" if by_view else "")
              + (f"; {still_runs} longer run(s) while nothing in view moved (not flagged)" if still_runs else "")
              + (f"; {drifting} longer run(s) whose pictures drifted from their first by up to {largest_drift:.2f} "
                 f"grey levels, step by step below the floor, as their view did (not flagged)" if drifting else "")
              + (f"; {len(findings)} frozen, first: {findings[0]}" if findings else ""))
    judged = {"episode_cameras": sum(len(sc.timestamps) >= 2 for sc in scans.values()), "frame_pairs": pairs}
    return Outcome(not bad, detail, sorted(bad), findings=found, judged=judged)


# ------------------------------------------------------------------ continuity of the frames
def _mean_abs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise mean |a - b| over the cells both have (NaN: a frame that did not decode, no warning)."""
    d = np.abs(a - b)
    n = np.isfinite(d).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.nansum(d, axis=1) / np.maximum(n, 1), np.nan)


#: frames whose thumbnail distances are computed at once (:func:`thumb_distances`)
DISTANCE_BLOCK = 4096


def thumb_distances(thumbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(to the next frame (n-1,), to the frame after next (n-2,)): mean |difference| of consecutive
    thumbnails and of thumbnails two apart, grey levels (NaN where a frame did not decode)."""
    n = len(thumbs)
    flat = thumbs.reshape(n, -1)
    d1, d2 = np.empty(max(n - 1, 0)), np.empty(max(n - 2, 0))
    # in blocks of frames: the float64 temporaries stay a block's size however long the episode (each
    # row's figure is computed alone, so the blocks change no bit of it)
    for i in range(0, n, DISTANCE_BLOCK):
        block = flat[i : i + DISTANCE_BLOCK + 2].astype(np.float64)
        k1, k2 = min(DISTANCE_BLOCK, n - 1 - i), min(DISTANCE_BLOCK, n - 2 - i)
        if k1 > 0:
            d1[i : i + k1] = _mean_abs(block[1 : k1 + 1], block[:k1])
        if k2 > 0:
            d2[i : i + k2] = _mean_abs(block[2 : k2 + 2], block[:k2])
    return d1, d2


def local_gain(d1: np.ndarray, d2: np.ndarray, motion: np.ndarray, motion2: np.ndarray) -> np.ndarray:
    """Per inner frame k = 1..n-2: grey levels of picture change per radian of joint motion around it, not
    counting the frame itself: the median of (distance / joint motion) over the pair before its neighbours
    (k-2, k-1), the pair after them (k+1, k+2) and its neighbours (k-1, k+1); pairs whose joints moved
    0.01 rad or less say nothing (0 when none is left). Where the motion turns back between the
    neighbours (they are less than half as far apart as the frame's two steps add up to), the largest
    of them: the frame shows an excursion its neighbours do not, and what a radian changes there (an
    edge entering the view) is seen only in the pairs beside them. ``d1``/``motion`` between consecutive
    frames (n-1,), ``d2``/``motion2`` between frames two apart (n-2,)."""
    import warnings

    n = len(d1) + 1
    with np.errstate(invalid="ignore", divide="ignore"):
        r1 = np.where(motion > 0.01, d1 / motion, np.nan)
        r2 = np.where(motion2 > 0.01, d2 / motion2, np.nan)
    pad = np.r_[np.nan, r1, np.nan]  # pad[i + 1] = pair (i, i + 1)
    k = np.arange(1, n - 1)
    cand = np.stack([pad[k - 1], pad[k + 2], r2])  # (k-2, k-1), (k+1, k+2), (k-1, k+1)
    turned = motion2 < 0.5 * (motion[:-1] + motion[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gain = np.where(turned, np.nanmax(cand, axis=0), np.nanmedian(cand, axis=0))
        return np.nan_to_num(gain, nan=0.0)


def continuity_scores(thumbs: np.ndarray, floor: float, motion: np.ndarray | None = None,
                      motion2: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per inner frame k = 1..n-2: (score, distance). ``distance`` is its thumbnail's distance to the
    nearer of its two neighbours; ``score`` the smaller over both neighbours of its distance to that
    neighbour over what it may be: the neighbours' distance to each other (at least ``floor`` grey
    levels) or, given the joints' motion between consecutive frames (``motion``, n-1) and frames two apart
    (``motion2``, n-2; rad), what the joints moved between the frame and that neighbour times the picture
    change per radian around it (:func:`local_gain`), the larger. A frame that belongs between its
    neighbours scores ~<= 1 (motion adds up: the neighbours are as far apart as the frame is from both;
    where the motion turns back between them, the frame strays as far as its joints moved), a frame that
    does not (another picture, a transformed image, a frame out of place) scores high while its
    neighbours agree."""
    import warnings

    d1, d2 = thumb_distances(thumbs)
    if len(d2) == 0:
        return np.zeros(0), np.zeros(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # undecodable frames: NaN, jpeg_frames' finding
        near = np.fmin(d1[:-1], d1[1:])
        apart = np.maximum(d2, floor)
        before, after = apart, apart
        if motion is not None and motion2 is not None:
            gain = local_gain(d1, d2, motion, motion2)
            before, after = np.maximum(apart, gain * motion[:-1]), np.maximum(apart, gain * motion[1:])
        score = np.fmin(d1[:-1] / before, d1[1:] / after)
    return score, near


def check_camera_continuity(ctx: Context) -> Outcome:
    """Every inner frame of every camera belongs between its two neighbours: no frame is more than
    `continuity_min_grey` (4 grey levels by default) from each neighbour and farther from each than
    `continuity_ratio` (3 by default) times what it may be: the neighbours' distance to each other (at
    least `continuity_floor`, 1 grey level by default) or, if larger, what the joints the camera sees moved
    between the frame and that neighbour, in grey levels (its motion in rad times the camera's median
    picture change per rad over the episode).

    Distances are mean absolute differences of 16x12 grey thumbnails (block means of the luma), so every
    image size compares alike and JPEG noise barely counts. Motion adds up: a frame of a moving scene is
    at most about as far from each neighbour as they are from each other, unless the motion turns back
    between them (a wrist camera closing on the cube and leaving at a low camera rate), and then no farther
    than its joints moved. The joints a camera sees: every joint and the gripper of its own arm for a
    wrist camera `wrist_<side>` (or `<side>_wrist`), of every arm for any other camera (obs
    `arms/<side>/qpos`; without them the neighbours alone judge). A wrist camera's motion is its hand's,
    by forward kinematics of the OpenArm model: the turn (rad) plus the translation over 0.2 m plus the
    gripper's travel (joint angles summed cannot tell a shoulder turning out and back under a wrist
    that goes on; the picture does). The first and last frames have one
    neighbour and are not judged; no sidecar is needed. A `skip` (not applicable) when no camera has three
    or more decodable frames. Each frame out of place is a timed finding."""
    scans = scan(ctx)
    t = ctx.t
    bad, findings, judged, worst, worst_where, found, with_motion = set(), [], 0, 0.0, "", [], 0
    excused = 0
    for (ep, name), s in scans.items():
        if len(s.thumbs) < 3:
            continue
        streams = visible_qpos(ctx, ep, name)
        ts = s.timestamps.astype(np.float64)
        motion = motion2 = None
        if streams:
            with_motion += 1
            hand = wrist_hand_poses(ctx, ep, name, s.timestamps)
            if hand is not None:
                motion, motion2 = hand_motion(hand), hand_motion(hand, step=2)
            else:
                motion = joint_motion(streams, ts[:-1], ts[1:], joints=None)
                motion2 = joint_motion(streams, ts[:-2], ts[2:], joints=None)
        score, near = continuity_scores(s.thumbs, t.continuity_floor, motion, motion2)
        plain, _ = continuity_scores(s.thumbs, t.continuity_floor)
        ok = np.isfinite(score)
        judged += int(ok.sum())
        with np.errstate(invalid="ignore"):
            apart = ok & (near > t.continuity_min_grey)  # frames far enough from both neighbours to be judged
            odd = np.flatnonzero(apart & (score > t.continuity_ratio)) + 1
            excused += int((apart & (score <= t.continuity_ratio) & (plain > t.continuity_ratio)).sum())
        if apart.any():
            k = int(np.flatnonzero(apart)[np.argmax(score[apart])])
            if score[k] > worst:
                worst, worst_where = float(score[k]), f"episode {ep} camera {name} frame {k + 1}"
        if len(odd):
            bad.add(ep)
            k = int(odd[0])
            d1, d2 = thumb_distances(s.thumbs)
            findings.append(f"episode {ep} camera {name}: frame {k} (t={int(s.timestamps[k])} ns) is "
                            f"{near[k - 1]:.1f} grey levels from its nearer neighbour while its neighbours are "
                            f"{d2[k - 1]:.1f} apart (x{score[k - 1]:.1f} what it may be)"
                            + (f" (+{len(odd) - 1} more frames)" if len(odd) > 1 else ""))
            found += [finding(ep, s.timestamps[k], f"frame {k} out of place: {near[k - 1]:.1f} grey levels from its "
                              f"nearer neighbour, x{score[k - 1]:.1f} what it may be", f"camera {name}")
                      for k in odd[:MAX_FINDINGS_PER_EPISODE].tolist()]
    if judged == 0:
        return nothing_to_judge(no_camera_reason(ctx, "with three or more decodable frames"))
    detail = (f"{judged} frames judged against both neighbours on {THUMB_W}x{THUMB_H} grey thumbnails: largest "
              f"ratio {worst:.2f}" + (f" ({worst_where})" if worst_where else "") + " of a frame more than "
              f"{t.continuity_min_grey:g} grey levels from both (fail: its distance to each neighbour > "
              f"{t.continuity_ratio:g} x what it may be: the neighbours' distance to each other, at least "
              f"{t.continuity_floor:g}, or what the joints it sees moved, in grey levels, if more; "
              f"{with_motion} episode-camera(s) with joints)"
              + (f"; {excused} frame(s) far from neighbours that are close, as far as their joints moved "
                 f"(not flagged)" if excused else ""))
    if findings:
        detail += f"; {len(findings)} camera(s) failed, first: {findings[0]}"
    return Outcome(not bad, detail, sorted(bad), findings=found, judged={"frames": judged})


def motion_lag(ts: np.ndarray, image_motion: np.ndarray, streams: list, max_lag_s: float, step_s: float,
               grip_min_range: float = float("inf")):
    """(lags (s), correlation per lag): rank (Spearman) correlation of the image motion between consecutive
    frames (``image_motion[k]`` between frames k and k+1) per second with the joints' motion over the same
    interval moved back by the lag, per second (a positive lag: the pictures show the joints' motion that
    much later, a camera's latency). Ranks: image motion saturates where the joints move fast. The motion
    of joints 1-7 and, where a gripper moved more than ``grip_min_range`` (a wrist camera's own gripper;
    inf: none), of the grippers are ranked apart and the ranks summed: a wrist camera sees its gripper's
    fingers open and close in front of the lens, a picture change out of all proportion to their travel.
    Every lag at once (one interpolation per joint)."""
    lags = np.arange(-max_lag_s, max_lag_s + step_s / 2, step_s)
    a, b = ts[:-1].astype(np.float64), ts[1:].astype(np.float64)
    dt = (b - a) / 1e9
    ok = np.isfinite(image_motion)
    if ok.sum() < 3 or np.ptp(image_motion[ok]) == 0:
        return lags, np.zeros(len(lags))
    x = ranks(image_motion[ok] / dt[ok])
    x -= x.mean()
    shift = lags[:, None] * 1e9
    t0, t1 = a[ok] - shift, b[ok] - shift
    y = ranks(joint_motion(streams, t0, t1) / dt[ok])  # (lags, intervals)
    grippers = gripper_streams(streams, grip_min_range)
    if grippers:
        y = ranks(mean_ranks(y) + mean_ranks(joint_motion(grippers, t0, t1, joints=None) / dt[ok]))
    y -= y.mean(axis=1, keepdims=True)
    denom = np.linalg.norm(x) * np.linalg.norm(y, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return lags, np.where(denom > 0, (y @ x) / np.where(denom > 0, denom, 1), 0.0)


def check_camera_joint_timing(ctx: Context) -> Outcome:
    """Each camera's pictures move when the joints it sees move, in time: no lag outside the allowed ones
    correlates with the image motion better than every allowed lag by more than `timing_margin` (0.1 by
    default; more for a camera with few frames). Allowed are lags within `camera_lag_tolerance_periods`
    (1 by default) camera periods either way in simulated data, and in recorded data from that lead up to
    `camera_max_latency_seconds` (0.3 s by default) of latency.

    Per camera and episode, the image motion between consecutive frames (mean absolute difference over the
    frames' mean absolute gradient, so that a plain view and a textured one moved alike count alike; per
    second) is rank-correlated with the motion of the joints the camera sees over the same interval
    (joints 1-7 of its own arm for a wrist camera `wrist_<side>` or `<side>_wrist`, with its own gripper,
    whose fingers move in front of the lens, ranked apart and added when it moves more than
    `timing_gripper_motion` (0.005 by default, in the gripper's own unit: a finger close to the lens
    moves the picture far more than an arm joint's radian does, so the joints' `follow_motion` is no
    measure for it); joints 1-7 of every arm for any other camera),
    shifted by lags up to `camera_max_lag_seconds` (1.5 s by default) in steps of
    `camera_lag_step_seconds` (0.02 s by default, at most half a camera period). The margin required is
    the larger of `timing_margin` and one over the square root of the number of frames (the standard
    error of such a correlation), and the better lag must reach `timing_min_corr` (0.5 by default). The
    detail reports each camera's best lags (positive: the pictures show the motion that much later).

    In recorded data a clearly better lag beyond the allowed latency is a `warn` (a slow camera, still
    usable); a clearly better lead (pictures before the motion) fails. Not judged: cameras with fewer than `timing_min_frames` (12 by
    default) frames or spanning less than twice the lag range plus one second, cameras whose joints move
    no more than `follow_motion` (0.05 rad by default), and cameras whose best correlation stays below
    `timing_min_corr`. No sidecar is needed. A `skip` (not applicable) when no camera has enough frames
    over a long enough span and sees an arm stream."""
    scans = scan(ctx)
    t = ctx.t
    meta = ctx.ds.meta
    bad, warned, findings, warn_first = set(), set(), [], None
    measured, unmeasured, still, lags_by_cam, margins = 0, 0, 0, {}, []
    for (ep, name), s in scans.items():
        ts = s.timestamps
        if len(ts) < t.timing_min_frames or (ts[-1] - ts[0]) / 1e9 < 2 * t.camera_max_lag_seconds + 1:
            continue
        streams = visible_qpos(ctx, ep, name)
        if not streams:
            continue
        if max(float(np.ptp(st.values[:, :7], axis=0).max()) for st in streams) <= t.follow_motion:
            still += 1
            continue
        hz = meta.frequency("cameras", meta.stored_camera_name(name))
        period = 1 / hz if hz else float(np.median(np.diff(ts))) / 1e9
        lags, corr = motion_lag(ts, displacement(s), streams, t.camera_max_lag_seconds,
                                min(t.camera_lag_step_seconds, period / 2),
                                t.timing_gripper_motion if layout.wrist_side(name) else float("inf"))
        k = int(np.argmax(corr))
        best, lag = float(corr[k]), float(lags[k])
        if best < t.timing_min_corr:
            unmeasured += 1
            continue
        measured += 1
        exact = exact_timing(ctx, ep)
        tol = t.camera_lag_tolerance_periods * period
        lo, hi = (-tol, tol) if exact else (-tol, t.camera_max_latency_seconds)
        inside = (lags >= lo - 1e-9) & (lags <= hi + 1e-9)
        best_in = float(corr[inside].max())
        j = int(np.argmax(np.where(inside, -np.inf, corr)))
        best_out, lag_out = float(corr[j]), float(lags[j])
        margins.append(best_in - best_out)
        lags_by_cam.setdefault(name, []).append((lag, best))
        # a correlation's standard error is ~1/sqrt(n): a short or slow camera needs a clearer lead
        need = max(t.timing_margin, 1 / np.sqrt(max(int(np.isfinite(s.diff[1:]).sum()), 1)))
        if best_out >= t.timing_min_corr and best_out - best_in > need:
            what = (f"episode {ep} camera {name}: its pictures move with the joints {lag_out:+.2f} s "
                    f"{'late' if lag_out > 0 else 'early'} (correlation {best_out:.2f} there, at most {best_in:.2f} "
                    f"within {lo:+.2f}..{hi:+.2f} s{', simulated: exact' if exact else ''})")
            if exact or lag_out < lo:
                bad.add(ep)
                findings.append(what)
            else:
                warned.add(ep)
                warn_first = warn_first or what + f": a latency beyond {t.camera_max_latency_seconds:g} s"
    if measured + unmeasured + still == 0:
        return Outcome(True, f"no camera with >= {t.timing_min_frames} frames over >= "
                             f"{2 * t.camera_max_lag_seconds + 1:g} s that sees an arm stream", skipped=True, applicable=False)
    per_cam = "; ".join(f"{n} lag {min(v)[0]:+.2f}..{max(v)[0]:+.2f} s (correlation >= {min(c for _, c in v):.2f})"
                        for n, v in sorted(lags_by_cam.items()))
    detail = (f"{measured} episode-camera(s) measured: rank correlation of image motion with the motion of the "
              f"joints it sees over lags +-{t.camera_max_lag_seconds:g} s: {per_cam or 'none'}"
              + (f"; margin of the allowed lags over the others >= {min(margins):+.2f} (fail: < -max({t.timing_margin:g}, "
                 f"1/sqrt(frames)))"
                 if margins else "")
              + (f"; {unmeasured} not measurable (best correlation < {t.timing_min_corr:g})" if unmeasured else "")
              + (f"; {still} whose joints did not move (> {t.follow_motion:g} rad)" if still else ""))
    if findings:
        detail += f"; {len(findings)} failed, first: {findings[0]}"
    if warned - bad:
        detail += f"; {len(warned - bad)} warned, first: {warn_first}"
    if not measured and not bad:
        # every camera too still or too uncorrelated to measure: no lag was judged, so no pass
        return nothing_to_judge(f"no camera's lag measurable: {detail}")
    return Outcome(not bad, detail, sorted(bad), warned=sorted(warned - bad), judged={"episode_cameras": measured})


#: Checks of camera content for every dataset (not run by ``--quick``).
CAMERA_CHECKS: list[tuple[str, CheckFn]] = [
    ("camera_frozen", check_camera_frozen),
    ("camera_continuity", check_camera_continuity),
    ("camera_joint_timing", check_camera_joint_timing),
]
