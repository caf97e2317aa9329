"""Camera streams of any dataset (recorded or simulated): frozen (stale) cameras (their timing,
``camera_rate``, is in :mod:`.timing`).

Every frame is read and decoded once per run by :func:`scan` (shared with the ``jpeg_frames`` form
check): its size or decoding error, whether its bytes equal the previous frame's, and the mean
absolute difference to the previous frame in grey levels (on every other row and column: a frozen
image differs by ~0, a live one by the sensor noise or the motion it sees).

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

With nothing moving in view, an unchanging image is what a working camera shows. The default of one
second follows a teleop recorder that discards an episode whose camera stays stale that long.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import sidecar as sidecar_schema
from ..camera import Camera, decode_jpeg
from ..errors import DatasetError
from .core import CheckFn, Context, Outcome

#: frames decoded per job (one extra, the previous frame, is decoded at each chunk's start)
CHUNK = 32


@dataclass
class CameraScan:
    """Per frame of one camera of one episode (n frames)."""

    timestamps: np.ndarray  # int64 ns (n,)
    shapes: list  # (H, W, 3) or None when undecodable
    errors: list  # None or the decoding error (naming the file)
    identical: np.ndarray  # bool (n,): bytes equal to the previous frame's (False for frame 0)
    diff: np.ndarray  # float64 (n,): mean |difference| to the previous frame, grey levels; NaN: frame 0 or undecodable


def _scan_chunk(cam: Camera, i0: int, i1: int):
    shapes, errors = [], []
    identical = np.zeros(i1 - i0, dtype=bool)
    diff = np.full(i1 - i0, np.nan)
    prev_bytes = prev_img = None
    for i in range(max(i0 - 1, 0), i1):
        frame = cam.get_frame(i)
        try:
            data = frame.read_bytes()
            img, err = decode_jpeg(data, frame.path), None
        except (DatasetError, OSError) as e:
            data, img, err = None, None, str(e)
        if i >= i0:
            shapes.append(None if img is None else img.shape)
            errors.append(err)
            if data is not None and prev_bytes is not None:
                identical[i - i0] = data == prev_bytes
            if img is not None and prev_img is not None and img.shape == prev_img.shape:
                diff[i - i0] = float(np.abs(img[::2, ::2].astype(np.int16) - prev_img[::2, ::2]).mean())
        prev_bytes, prev_img = data, img
    return shapes, errors, identical, diff


def scan(ctx: Context) -> dict[tuple[str, str], CameraScan]:
    """Every camera of every checked episode, each frame read and decoded once (threads; cached)."""
    if "camera_scan" in ctx.cache:
        return ctx.cache["camera_scan"]
    jobs = []
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        if isinstance(cams, dict):
            for name, cam in cams.items():
                jobs += [(ep, name, cam, i, min(i + CHUNK, cam.num_frames)) for i in range(0, cam.num_frames, CHUNK)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        parts = list(pool.map(lambda j: _scan_chunk(j[2], j[3], j[4]), jobs))
    out: dict[tuple[str, str], CameraScan] = {}
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        if isinstance(cams, dict):
            for name, cam in cams.items():
                out[(ep, name)] = CameraScan(cam.timestamps, [], [], np.zeros(0, bool), np.zeros(0))
    for (ep, name, _cam, _i0, _i1), (shapes, errors, identical, diff) in zip(jobs, parts):
        s = out[(ep, name)]
        s.shapes += shapes
        s.errors += errors
        s.identical = np.concatenate([s.identical, identical])
        s.diff = np.concatenate([s.diff, diff])
    ctx.cache["camera_scan"] = out
    return out


def _runs(same: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) frame index of every run of frames showing one image: ``same[k]`` says frame k
    equals frame k-1, so a run of True from a to b spans frames a-1..b."""
    edges = np.diff(np.r_[0, same.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(int(a) - 1, int(b)) for a, b in zip(starts, ends)]


def _arm_motion(ctx: Context, ep: str, camera: str, t0: int, t1: int) -> tuple[float, str] | None:
    """Largest range (rad) of a joint the camera could see move over [t0, t1] (ns) in the obs qpos
    streams, and what was looked at: a wrist camera ``wrist_<side>`` rides on arm ``<side>`` and sees
    only that arm's motion move its view; any other camera sees every arm. None: no such arm stream."""
    obs = ctx.streams(ep, "obs")
    if not isinstance(obs, dict):
        return None
    side = camera[len("wrist_"):] if camera in ("wrist_right", "wrist_left") else None
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


def _view_change(view, a: int, b: int, depth_m: float) -> float:
    """Largest fraction of pixels whose label changed, or depth changed by more than ``depth_m``, at a
    frame of the run a..b against frame a (the sidecar's lossless view of what the camera saw)."""
    depth, labels, rows = view
    r = rows[a : b + 1]
    d0, l0 = depth[r[0]], labels[r[0]]
    worst = 0.0
    for k in range(1, len(r), CHUNK):  # a chunk of frames at a time: a long run of large frames stays small in memory
        rk = r[k : k + CHUNK]
        with np.errstate(invalid="ignore"):
            moved = (np.abs(depth[rk] - d0) > depth_m) | (labels[rk] != l0)
        worst = max(worst, float(moved.mean(axis=(1, 2)).max(initial=0.0)))
    return worst


def check_camera_frozen(ctx: Context) -> Outcome:
    """No camera shows one unchanging image for ``frozen_seconds`` or more while something it could
    see moved (its view in the sidecar, else its own arm for a wrist camera, any arm for the others)."""
    scans = scan(ctx)
    if not scans:
        return Outcome(True, "no cameras", skipped=True, applicable=False)
    t = ctx.t
    limit_ns = t.frozen_seconds * 1e9
    bad, findings, longest, still_runs, pairs, by_view, still_view = set(), [], 0.0, 0, 0, 0, 0.0
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
                change = _view_change(view, a, b, t.frozen_depth_m)
                moved = change > t.frozen_view_fraction
                why = f"while {change:.1%} of its view changed (sidecar depth/labels)"
            else:
                motion = _arm_motion(ctx, ep, name, t0, t1)
                moved = motion is not None and motion[0] > t.frozen_motion
                why = f"while {motion[1]} {motion[0]:.3f} rad" if motion else ""
            if not moved:
                still_runs += 1
                if view:
                    still_view = max(still_view, change)
                continue
            bad.add(ep)
            kind = "byte-identical" if s.identical[a + 1 : b + 1].all() else "unchanged"
            findings.append(f"episode {ep} camera {name}: frames {a}..{b} {kind} for {dur:.2f} s from t={t0} ns {why}")
    detail = (f"{pairs} consecutive frame pairs; longest unchanged run {longest:.2f} s (limit {t.frozen_seconds:g} s "
              f"while its view changes in > {t.frozen_view_fraction:.1%} of the pixels (simulated: sidecar depth "
              f"> {t.frozen_depth_m:g} m or labels), else its own arm / for a fixed camera any arm moves "
              f"> {t.frozen_motion:g} rad; same image: mean |diff| <= {t.frozen_noise_floor:g} grey levels)"
              + (f"; {by_view} long run(s) judged on the sidecar's view (largest change of a still one "
                 f"{still_view:.2%})" if by_view else "")
              + (f"; {still_runs} longer run(s) while nothing in view moved (not flagged)" if still_runs else "")
              + (f"; {len(findings)} frozen, first: {findings[0]}" if findings else ""))
    return Outcome(not bad, detail, sorted(bad))


#: Checks of camera content for every dataset (not run by ``--quick``).
CAMERA_CHECKS: list[tuple[str, CheckFn]] = [
    ("camera_frozen", check_camera_frozen),
]
