"""What the camera checks measure (:mod:`.cameras`, :mod:`.camera_placement`, and ``jpeg_frames``):
every frame of every camera read and decoded once per run (:func:`scan`: its size or decoding error,
whether its bytes equal the previous frame's, the mean absolute difference to the previous frame in grey
levels, its texture, and a 16x12 grey thumbnail), and the joint motion a camera's pictures are compared
with (:func:`joint_motion`, the joints a camera sees, rank helpers)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.camera import Camera, decode_jpeg
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.kinematics import arm_kinematics
from openarm_sim_dataset.core.video_camera import DecodedCamera

from .check import Context

#: frames decoded per job (one extra, the previous frame, is decoded at each chunk's start)
CHUNK = 32


@dataclass
class CameraScan:
    """Per frame of one camera of one episode (n frames)."""

    timestamps: np.ndarray  # int64 ns (n,)
    shapes: list  # (H, W, 3) or None when undecodable
    errors: list  # None or the decoding error (naming the file)
    identical: np.ndarray  # bool (n,): bytes (decoded cameras: pixels) equal to the previous frame's (False for frame 0)
    diff: np.ndarray  # float64 (n,): mean |difference| to the previous frame, grey levels; NaN: frame 0 or undecodable
    thumbs: np.ndarray  # float32 (n, THUMB_H, THUMB_W): grey thumbnail of each frame (block means); NaN: undecodable
    #: float64 (n,): mean |gradient| of each frame's grey levels (rows and columns, every other pixel), grey
    #: levels per step; NaN: undecodable (what a displacement changes: a plain view changes little)
    texture: np.ndarray | None = None


#: size of the grey thumbnails the content checks compare frames on (block means: size- and noise-robust)
THUMB_W, THUMB_H = 16, 12


def thumbnail(img: np.ndarray) -> np.ndarray:
    """(THUMB_H, THUMB_W) float32 grey thumbnail of an HxWx3 uint8 image: the luma's mean over equal
    blocks (the image cropped to a multiple of the block size; an image smaller than the thumbnail
    gives one pixel per block)."""
    grey = img.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    h, w = grey.shape
    bh, bw = max(h // THUMB_H, 1), max(w // THUMB_W, 1)
    th, tw = min(THUMB_H, h // bh), min(THUMB_W, w // bw)
    small = grey[: th * bh, : tw * bw].reshape(th, bh, tw, bw).mean(axis=(1, 3))
    out = np.full((THUMB_H, THUMB_W), np.nan, dtype=np.float32)
    out[:th, :tw] = small
    return out


def _scan_chunk(cam: Camera, i0: int, i1: int):
    shapes, errors = [], []
    identical = np.zeros(i1 - i0, dtype=bool)
    diff = np.full(i1 - i0, np.nan)
    thumbs = np.full((i1 - i0, THUMB_H, THUMB_W), np.nan, dtype=np.float32)
    texture = np.full(i1 - i0, np.nan)
    prev_bytes = prev_img = None
    decoded = isinstance(cam, DecodedCamera)  # video or images: its frames are decoded, no JPEG to read
    for i in range(max(i0 - 1, 0), i1):
        frame = cam.get_frame(i)
        try:
            if decoded:
                img, err = cam.load_frame(i), None
                data = img
            else:
                data = frame.read_bytes()
                img, err = decode_jpeg(data, frame.path), None
        except (DatasetError, OSError) as e:
            data, img, err = None, None, str(e)
        if i >= i0:
            shapes.append(None if img is None else img.shape)
            errors.append(err)
            if img is not None and img.ndim == 3 and img.size:
                thumbs[i - i0] = thumbnail(img)
                grey = img[::2, ::2].astype(np.float32).mean(axis=2)
                dy, dx = np.abs(np.diff(grey, axis=0)), np.abs(np.diff(grey, axis=1))
                texture[i - i0] = (float(dy.mean()) if dy.size else 0.0) + (float(dx.mean()) if dx.size else 0.0)
            if data is not None and prev_bytes is not None:
                identical[i - i0] = np.array_equal(data, prev_bytes) if decoded else data == prev_bytes
            if img is not None and prev_img is not None and img.shape == prev_img.shape:
                diff[i - i0] = float(np.abs(img[::2, ::2].astype(np.int16) - prev_img[::2, ::2]).mean())
        prev_bytes, prev_img = data, img
    return shapes, errors, identical, diff, thumbs, texture


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
    grouped: dict[tuple[str, str], list] = {}
    for (ep, name, _cam, _i0, _i1), part in zip(jobs, parts):
        grouped.setdefault((ep, name), []).append(part)
    out: dict[tuple[str, str], CameraScan] = {}
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        if isinstance(cams, dict):
            for name, cam in cams.items():
                chunks = grouped.get((ep, name), [])  # in frame order; concatenated once (long episodes)
                out[(ep, name)] = CameraScan(
                    cam.timestamps, [x for c in chunks for x in c[0]], [x for c in chunks for x in c[1]],
                    np.concatenate([c[2] for c in chunks]) if chunks else np.zeros(0, bool),
                    np.concatenate([c[3] for c in chunks]) if chunks else np.zeros(0),
                    np.concatenate([c[4] for c in chunks]) if chunks else np.zeros((0, THUMB_H, THUMB_W), np.float32),
                    np.concatenate([c[5] for c in chunks]) if chunks else np.zeros(0))
    ctx.cache["camera_scan"] = out
    return out


def visible_qpos(ctx: Context, ep: str, camera: str) -> list:
    """obs qpos streams of the joints a camera sees move: its own arm for ``wrist_<side>``, every arm
    for any other camera."""
    obs = ctx.streams(ep, "obs")
    if not isinstance(obs, dict):
        return []
    side = layout.wrist_side(camera)
    keys = [f"arms/{side}/qpos"] if side else sorted(k for k in obs if k.startswith("arms/") and k.endswith("/qpos"))
    return [obs[k] for k in keys if k in obs and len(obs[k]) > 1]


def joint_motion(streams: list, t0: np.ndarray, t1: np.ndarray, joints: int | None = 7) -> np.ndarray:
    """Joint motion over each interval [t0[i], t1[i]] (ns, arrays of any one shape): the sum over the
    first ``joints`` joints of the streams (None: every column, the gripper too) of |q(t1) - q(t0)| (rad,
    linear interpolation of the stamps; clamped at the stream's ends)."""
    total = np.zeros(np.shape(t0))
    for s in streams:
        ts = s.timestamps.astype(np.float64)
        v = s.values[:, :joints].astype(np.float64)
        for j in range(v.shape[1]):
            total += np.abs(np.interp(t1, ts, v[:, j]) - np.interp(t0, ts, v[:, j]))
    return total


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 along the last axis (ties in order)."""
    r = np.empty(x.shape)
    np.put_along_axis(r, np.argsort(x, axis=-1, kind="stable"), np.arange(x.shape[-1], dtype=np.float64)
                      * np.ones(x.shape), axis=-1)
    return r


def displacement(s: CameraScan) -> np.ndarray:
    """Image motion between consecutive frames (n-1,) in steps of displacement: the mean |difference| over
    the frames' mean |gradient| (brightness constancy: a picture moved by d pixels changes by about d times
    its gradient), so that a plain view (the sky, a dark floor) and a textured one (the table) moved alike
    count alike; the mean |difference| where the texture is unknown or none."""
    d = s.diff[1:]
    if s.texture is None or len(d) == 0:
        return d
    tex = (s.texture[1:] + s.texture[:-1]) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(tex) & (tex > 0), d / tex, d)


def mean_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 along the last axis, tied values sharing their mean rank (a gripper at rest: all
    ties, no order of time)."""
    out = np.empty(x.shape)
    for i, row in enumerate(x.reshape(-1, x.shape[-1])):
        _, inv, counts = np.unique(row, return_inverse=True, return_counts=True)
        first = np.r_[0, np.cumsum(counts)[:-1]]
        out.reshape(-1, x.shape[-1])[i] = (first + (counts - 1) / 2)[inv]
    return out


def gripper_streams(streams: list, min_range: float) -> list:
    """The streams whose gripper (columns after joints 1-7) moved more than ``min_range``, as streams of
    the gripper columns alone (for :func:`joint_motion`)."""
    out = []
    for s in streams:
        g = s.values[:, 7:]
        if g.shape[1] and len(g) and float(np.nanmax(np.ptp(g, axis=0))) > min_range:
            out.append(type("Gripper", (), {"timestamps": s.timestamps, "values": g})())
    return out


#: m: the distance at which a wrist camera's translation counts like its turn (a scene 0.1-0.5 m before the
#: lens: moving 2 cm sideways shifts it about as much as turning 0.1 rad)
WRIST_VIEW_DEPTH_M = 0.2


def wrist_hand_poses(ctx: Context, ep: str, camera: str, ts: np.ndarray) -> tuple | None:
    """(positions (n, 3) m, quaternions (n, 4), gripper (n,)) of the hand carrying a wrist camera
    ``wrist_<side>`` at stamps ``ts`` (ns), by forward kinematics of the OpenArm model at the obs qpos
    interpolated to the stamps. None for any other camera, without the arm's 8-column qpos, or without
    the model."""
    side = layout.wrist_side(camera)
    obs = ctx.streams(ep, "obs")
    if not side or not isinstance(obs, dict):
        return None
    s = obs.get(f"arms/{side}/qpos")
    if s is None or len(s) < 2 or s.values.shape[1] != 8:
        return None
    try:
        fk = arm_kinematics()
    except (ImportError, ValueError, OSError):
        return None
    t = s.timestamps.astype(np.float64)
    q = np.stack([np.interp(ts.astype(np.float64), t, s.values[:, j].astype(np.float64)) for j in range(8)], 1)
    pose = fk.qpos_to_pose(side, q).astype(np.float64)
    return pose[:, :3], pose[:, 3:7], q[:, 7]


def hand_motion(poses: tuple, step: int = 1) -> np.ndarray:
    """How far a wrist camera moved between stamp k and stamp k + ``step`` of its hand's ``poses``
    (:func:`wrist_hand_poses`): the turn of its hand (rad, the angle of the relative rotation: the same
    for the camera, rigid on the hand, whatever its mounting), plus the hand's translation over
    :data:`WRIST_VIEW_DEPTH_M`, plus the gripper's travel (its fingers in front of the lens). Joint angles
    summed say little of it: a shoulder turning out and back under a wrist that goes on is a picture out
    and back."""
    pos, quat, grip = poses
    dot = np.abs(np.sum(quat[step:] * quat[:-step], axis=1))
    turn = 2 * np.arccos(np.clip(dot, 0.0, 1.0))
    shift = np.linalg.norm(pos[step:] - pos[:-step], axis=1) / WRIST_VIEW_DEPTH_M
    return turn + shift + np.abs(grip[step:] - grip[:-step])
