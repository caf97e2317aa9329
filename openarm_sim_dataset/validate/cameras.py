"""Camera streams of any dataset (recorded or simulated): frozen (stale) cameras (their timing,
``camera_rate``, is in :mod:`.timing`).

Every frame is read and decoded once per run by :func:`scan` (shared with the ``jpeg_frames`` form
check): its size or decoding error, whether its bytes equal the previous frame's, and the mean
absolute difference to the previous frame in grey levels (on every other row and column: a frozen
image differs by ~0, a live one by the sensor noise or the motion it sees).

A camera is *frozen* when consecutive frames stay the same image (byte-identical, or differing by
less than ``frozen_noise_floor``) for at least ``frozen_seconds`` while the arm streams show motion
(some joint moves more than ``frozen_motion`` rad): with the arms still, an unchanging image is what
a working camera shows. The default of one second follows a teleop recorder that discards an
episode whose camera stays stale that long.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

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


def _arm_motion(ctx: Context, ep: str, t0: int, t1: int) -> float | None:
    """Largest range (rad) of any arm joint over [t0, t1] in the obs qpos streams (None: no arm stream)."""
    obs = ctx.streams(ep, "obs")
    if not isinstance(obs, dict):
        return None
    moves = []
    for key, s in obs.items():
        if key.endswith("/qpos") and len(s):
            a = np.searchsorted(s.timestamps, t0, side="left")
            b = np.searchsorted(s.timestamps, t1, side="right")
            window = s.values[a:b]
            if len(window):
                moves.append(float(np.nanmax(np.ptp(window, axis=0))))
    return max(moves) if moves else None


def check_camera_frozen(ctx: Context) -> Outcome:
    """No camera shows one unchanging image for ``frozen_seconds`` or more while the arms move."""
    scans = scan(ctx)
    if not scans:
        return Outcome(True, "no cameras", skipped=True, applicable=False)
    limit_ns = ctx.t.frozen_seconds * 1e9
    bad, findings, longest, still_runs, pairs = set(), [], 0.0, 0, 0
    for (ep, name), s in scans.items():
        if len(s.timestamps) < 2:
            continue
        pairs += len(s.timestamps) - 1
        with np.errstate(invalid="ignore"):
            same = s.identical | (s.diff <= ctx.t.frozen_noise_floor)
        same[0] = False
        for a, b in _runs(same):
            t0, t1 = int(s.timestamps[a]), int(s.timestamps[b])
            dur = (t1 - t0) / 1e9
            longest = max(longest, dur)
            if t1 - t0 < limit_ns:
                continue
            motion = _arm_motion(ctx, ep, t0, t1)
            if motion is None or motion <= ctx.t.frozen_motion:
                still_runs += 1
                continue
            bad.add(ep)
            kind = "byte-identical" if s.identical[a + 1 : b + 1].all() else "unchanged"
            findings.append(f"episode {ep} camera {name}: frames {a}..{b} {kind} for {dur:.2f} s from t={t0} ns "
                            f"while the arms moved {motion:.3f} rad")
    detail = (f"{pairs} consecutive frame pairs; longest unchanged run {longest:.2f} s (limit {ctx.t.frozen_seconds:g} s "
              f"while an arm joint moves > {ctx.t.frozen_motion:g} rad; same image: mean |diff| <= "
              f"{ctx.t.frozen_noise_floor:g} grey levels)"
              + (f"; {still_runs} longer run(s) while the arms rest (not flagged)" if still_runs else "")
              + (f"; {len(findings)} frozen, first: {findings[0]}" if findings else ""))
    return Outcome(not bad, detail, sorted(bad))


#: Checks of camera content for every dataset (not run by ``--quick``).
CAMERA_CHECKS: list[tuple[str, CheckFn]] = [
    ("camera_frozen", check_camera_frozen),
]
