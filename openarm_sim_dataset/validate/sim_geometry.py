"""Geometry checks of simulated frames: stored depth, intrinsics K and per-frame camera poses against
the scene (``sim_geometry``: floor/table planes; ``sim_reprojection``: cube centres in the fixed camera;
``sim_wrist_projection``: the red cube on its label in the wrist camera).

They use the stored depth, K and camera poses, so a depth written in millimetres or a camera pose that
stopped updating fails them even though every array has the right shape and dtype.
"""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import sidecar
from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.sim.scene import cube_half_size

from .check import Context, EpisodeCheck, Outcome
from .sim_model import (
    ModelProblem,
    back_project,
    camera_episodes,
    episode_K,
    physics_only,
    project,
    recorded_cameras,
    sidecar_and_model,
    sim_block,
    split_model_problems,
)


def _plane_heights(m) -> dict[int, float]:
    """World z (m) of the floor plane (label 1) and the table top (label 2) in model ``m``."""
    mujoco = import_mujoco()

    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    top = m.geom("table_top").id
    return {1: float(d.geom_xpos[m.geom("floor").id][2]), 2: float(d.geom_xpos[top][2] + m.geom_size[top][2])}


def _geometry_episode(ctx: Context, ep: str, prep=None) -> list[float] | ModelProblem | None:
    """Median plane error (m) of each camera of episode ``ep`` with floor/table pixels, measured against
    the planes and K of the episode's own model."""
    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    fr = ctx.frames(ep)
    if not isinstance(fr, dict):
        return None
    planes = _plane_heights(m)
    medians = []
    for cam in recorded_cameras(ctx):
        K = episode_K(ctx, ep, cam, m)
        depth, labels = fr.get(f"depth_{cam}"), fr.get(f"labels_{cam}")
        pos, mat = side.get(f"cam_pos_{cam}"), side.get(f"cam_mat_{cam}")
        if depth is None or labels is None or pos is None or mat is None:
            continue
        errs = []
        h, w = depth.shape[1:]
        vv, uu = np.mgrid[0:h, 0:w]
        for k in range(len(depth)):
            for label, z in planes.items():
                mask = labels[k] == label
                if not mask.any():
                    continue
                uv = np.stack([uu[mask], vv[mask]], 1).astype(np.float64)
                p = back_project(K, pos[k], mat[k], uv, depth[k][mask].astype(np.float64))
                errs.append(np.abs(p[:, 2] - z))
        if errs:
            medians.append(float(np.median(np.concatenate(errs))))
    return medians


def _geometry_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """The stored depth, K and camera poses put the floor and the table top where the model has them: for
    every camera of every episode, the floor and table pixels back-projected with their depth, the
    declared K (`simulation.cameras.<camera>.K`) and the frame's camera pose from the sidecar lie at a
    median distance of at most `plane_error` (1 mm by default) from their planes.

    The planes' heights come from the episode's own model (a randomised episode's included). A `skip`
    (not applicable) for a physics-only dataset (no cameras recorded). A dataset in which no floor or
    table pixel is seen at all fails. An episode whose model cannot be rebuilt as recorded fails;
    episodes without a usable sidecar are `sim_episodes`' concern."""
    if not recorded_cameras(ctx):
        return physics_only(ctx)
    parts, bad, problems = split_model_problems(parts)
    figures = []
    for ep, medians in parts.items():
        for med in medians or []:
            figures.append(med)
            if med > ctx.t.plane_error:
                bad.append(ep)
    detail = (f"{len(figures)} episode-cameras, median floor/table plane error: mean {np.mean(figures) * 1e6:.1f} um, "
              f"max {np.max(figures) * 1e6:.1f} um (limit {ctx.t.plane_error * 1e3:g} mm)") if figures else "no floor/table pixels"
    return Outcome(not bad and bool(figures), detail + (f"; {problems[0]}" if problems else ""), bad,
                   judged={"episode_cameras": len(figures)})


check_sim_geometry = EpisodeCheck(_geometry_episode, _geometry_reduce, select=camera_episodes)


def _fixed_camera(ctx: Context) -> str | None:
    cams = recorded_cameras(ctx)
    return "head" if "head" in cams else next((c for c in cams if not c.startswith("wrist")), None)


def _labelled(ctx: Context, ep: str, cam: str | None):
    """``(sidecar, model, frames)`` of episode ``ep`` when ``cam``'s label frames are stored; None when
    there is nothing to check (no camera, no sidecar, no labels), or the :class:`ModelProblem`."""
    if cam is None:
        return None
    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    fr = ctx.frames(ep)
    if not isinstance(fr, dict) or f"labels_{cam}" not in fr:
        return None
    return (*got, fr)


#: image diagonal (px) at which ``Thresholds.reprojection_px`` holds as given: 160x120, the default size
REPROJECTION_REFERENCE_DIAGONAL = 200.0


def reprojection_limit(limit_px: float, width: int, height: int) -> float:
    """The ``sim_reprojection`` limit (px) for a ``width`` x ``height`` image: ``limit_px`` at 160x120,
    in proportion to the image diagonal above it (the centroid of a cube's visible faces lies off its
    projected centre by a fixed angle, so by pixels in proportion to the image: measured max 1.53-1.57 px
    per 200 px of diagonal at 160x120, 320x240 and 640x480 on the same episodes), and never below
    ``limit_px`` (the mask's pixel quantisation does not shrink with the image)."""
    return float(limit_px) * max(1.0, float(np.hypot(width, height)) / REPROJECTION_REFERENCE_DIAGONAL)


#: least pixels of a cube mask whose centroid ``sim_reprojection`` measures, at 160x120; in proportion to the
#: image's area at other sizes (a cube covers a fixed solid angle), never below MIN_MASK_FLOOR_PX
MIN_MASK_PX = 20
#: the fewest pixels of a mask measured at any size (a 2x2 block: its centroid is defined to half a pixel)
MIN_MASK_FLOOR_PX = 4


def min_mask_pixels(width: int, height: int) -> float:
    """Least pixels of a measured cube mask in a ``width`` x ``height`` image: :data:`MIN_MASK_PX` at 160x120,
    in proportion to the area (5 at 80x60, 80 at 320x240), at least :data:`MIN_MASK_FLOOR_PX`."""
    return max(float(MIN_MASK_FLOOR_PX), MIN_MASK_PX * width * height / (160 * 120))


def _reprojection_episode(ctx: Context, ep: str, cam: str | None) -> tuple[list[float], float] | ModelProblem | None:
    """Pixel distances between projected cube centres and their mask centroids in ``cam`` (K of the
    episode's own model), and the limit for the episode's image size."""
    got = _labelled(ctx, ep, cam)
    if not isinstance(got, tuple):
        return got
    side, m, fr = got
    K = episode_K(ctx, ep, cam, m)
    labels = fr[f"labels_{cam}"]
    h, w = labels.shape[1:]
    pose, pos, mat = side["object_pose"], side[f"cam_pos_{cam}"], side[f"cam_mat_{cam}"]
    ep_err, least = [], min_mask_pixels(w, h)
    for c in range(pose.shape[1]):
        counts = (labels == 4 + c).sum(axis=(1, 2))
        typical = np.median(counts[counts > 0]) if (counts > 0).any() else 0
        for k in range(len(labels)):
            mask = labels[k] == 4 + c
            # skip occluded or cut masks: their centroid is not the object's
            if counts[k] < max(least, 0.8 * typical) or mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any():
                continue
            vs, us = np.nonzero(mask)
            uv, _ = project(K, pos[k], mat[k], pose[k, c, :3][None])
            ep_err.append(float(np.hypot(uv[0, 0] - us.mean(), uv[0, 1] - vs.mean())))
    return ep_err, reprojection_limit(ctx.t.reprojection_px, w, h)


def _reprojection_reduce(ctx: Context, cam: str | None, parts: dict) -> Outcome:
    """Each cube's centre, projected into the fixed camera with the declared K and the sidecar's camera and
    object poses, lands within `reprojection_px` of the centroid of the cube's label mask in every frame
    where that mask can be measured: 2 px by default at 160x120, in proportion to the image diagonal
    above that size (4 px at 320x240).

    The fixed camera is `head`, else the first camera that is not a wrist camera. A mask is measured when
    it is unoccluded (at least 80 % of the cube's median mask size in the episode, and at least 20 px at
    160x120, in proportion to the image area, never fewer than 4) and clear of the image border. A
    `skip` (not applicable) without a fixed camera, so also for a physics-only dataset; when no mask of
    any episode can be measured, a `skip` of a check that applies (a failure under `--strict`). An
    episode whose model cannot be rebuilt as recorded fails."""
    if cam is None:
        return Outcome(True, "no fixed camera", skipped=True, applicable=False)
    parts, bad, problems = split_model_problems(parts)
    errors, limits = [], set()
    for ep, part in parts.items():
        ep_err, limit = part if part else ([], None)
        errors += ep_err
        if ep_err:
            limits.add(limit)
            if max(ep_err) > limit:
                bad.append(ep)
    if problems:
        return Outcome(False, f"{len(problems)} episode model(s) not as recorded, first: {problems[0]}", bad)
    if not errors:
        # nothing measurable (every cube occluded, cut by the border or too small): no verdict
        return Outcome(True, f"no unoccluded cube mask clear of the border to measure (at least {MIN_MASK_PX} px at "
                             f"160x120, in proportion to the image area, >= {MIN_MASK_FLOOR_PX} px)", skipped=True)
    e = np.array(errors)
    limit = "/".join(f"{x:.3g}" for x in sorted(limits))
    return Outcome(not bad, f"{len(e)} cube-frames, mean {e.mean():.2f} px, max {e.max():.2f} px (limit {limit} px: "
                            f"{ctx.t.reprojection_px:g} px at 160x120, in proportion to the image diagonal above it)", bad,
                   judged={"cube_frames": len(e)})


check_sim_reprojection = EpisodeCheck(_reprojection_episode, _reprojection_reduce, _fixed_camera)


#: m: a pixel's stored depth this much nearer than the cube's surface along its ray is something in front
#: of the cube (depth buffer precision and the half pixel of rounding at a wrist camera's few centimetres)
OCCLUSION_TOLERANCE_M = 0.003


def cube_entry_fraction(eye: np.ndarray, centre: np.ndarray, quat: np.ndarray, half: float) -> float:
    """Where the ray from ``eye`` to a cube's ``centre`` (world, m) enters the cube (orientation ``quat``
    wxyz, half edge ``half`` m), as a fraction of the distance eye-centre: 1 - half/distance when a face
    looks at the eye, less when an edge or a corner does (down to 1 - half*sqrt(3)/distance)."""
    q = np.asarray(quat, np.float64)
    R = np.empty(9)
    import_mujoco().mju_quat2Mat(R, q / np.linalg.norm(q))
    R = R.reshape(3, 3)
    ray = np.asarray(centre, np.float64) - np.asarray(eye, np.float64)
    local = R.T @ ray  # the ray in the cube's frame; it starts at -local and reaches the centre at 1
    with np.errstate(divide="ignore"):
        t = np.where(local != 0, 1 - half / np.abs(local), -np.inf)  # each slab's entry along the ray
    return float(max(t.max(), 0.0))


def _wrist_cameras(ctx: Context) -> list[str]:
    """Every wrist camera of the dataset (each arm's: an episode's acting arm may be either)."""
    return [c for c in recorded_cameras(ctx) if c.startswith("wrist")]


def _wrist_episode(ctx: Context, ep: str, cams: list[str]) -> dict[str, tuple[int, int]] | ModelProblem | None:
    """Per wrist camera: (frames with the red cube centre in view, of them on its own label), with K
    and the cube size of the episode's own model."""
    out = {}
    for cam in cams:
        got = _labelled(ctx, ep, cam)
        if not isinstance(got, tuple):
            if got is None:
                continue
            return got
        side, m, fr = got
        K = episode_K(ctx, ep, cam, m)
        half = cube_half_size(m)  # the episode's own model: a randomised cube's size
        near = float(m.vis.map.znear * m.stat.extent)  # m: MuJoCo's near clipping plane
        labels, depth = fr[f"labels_{cam}"], fr.get(f"depth_{cam}")
        h, w = labels.shape[1:]
        pos, mat, pose = side[f"cam_pos_{cam}"], side[f"cam_mat_{cam}"], side["object_pose"]
        ep_in = ep_hit = 0
        for k in range(len(labels)):
            uv, z = project(K, pos[k], mat[k], pose[k, 0, :3][None])
            if not np.isfinite(uv).all() or z[0] <= 0:
                continue
            u, v = int(round(uv[0, 0])), int(round(uv[0, 1]))
            if not (0 <= u < w and 0 <= v < h):
                continue
            entry = z[0] * cube_entry_fraction(pos[k], pose[k, 0, :3], pose[k, 0, 3:7], half)
            # the cube's near side cut away by the near clipping plane (the lens against the cube): the
            # picture shows what lies behind it
            if entry < near:
                continue
            # hidden behind something nearer than the cube's surface on this ray (e.g. a finger that
            # holds it): not in view
            if depth is not None and depth[k, v, u] < entry - OCCLUSION_TOLERANCE_M:
                continue
            ep_in += 1
            ep_hit += int(labels[k, v, u] == 4)
        out[cam] = (ep_in, ep_hit)
    return out or None


def _wrist_reduce(ctx: Context, cams: list[str], parts: dict) -> Outcome:
    """In each wrist camera, the red cube's centre, projected with the declared K and the sidecar's camera
    and object poses, lands on the red cube's own label in more than `wrist_hit_fraction` (0.9 by default:
    90 %) of the frames where it is in view, per episode and camera.

    In view: in front of the camera, inside the image, and not behind something nearer (by the stored
    depth, more than 3 mm) than where the ray to the cube's centre enters the cube, from the cube's
    stored pose and size (a randomised episode's from its own model): a finger holding the cube before
    the lens hides it. Nor where that entry lies nearer than the renderer's near clipping plane (the
    lens against the cube: the picture shows what lies behind it). A `skip`
    (not applicable) without a wrist camera (so also for a physics-only dataset), and when the cube is
    never in view in a dataset recorded live in a dataflow or in a policy's rollout (the operator or the
    policy decides where the wrist looks). In a generated dataset, a cube never in view of any wrist
    camera fails every episode. An episode whose model cannot be rebuilt as recorded fails."""
    if not cams:
        return Outcome(True, "no wrist camera", skipped=True, applicable=False)
    parts, bad, problems = split_model_problems(parts)
    seen = {c: [0, 0] for c in cams}  # camera: [in view, on its label]
    worst = []
    for ep, part in parts.items():
        if part is None:
            continue
        for cam, (ep_in, ep_hit) in part.items():
            seen[cam][0] += ep_in
            seen[cam][1] += ep_hit
            if ep_in and ep_hit / ep_in <= ctx.t.wrist_hit_fraction:
                if ep not in bad:
                    bad.append(ep)
                worst.append(f"episode {ep} {cam} {ep_hit}/{ep_in}")
    if problems:
        return Outcome(False, f"{len(problems)} episode model(s) not as recorded, first: {problems[0]}", bad)
    if not any(n for n, _ in seen.values()):
        if sidecar.recorded_live(sim_block(ctx)):  # a teleoperator's episode need not look at the cube at all
            return Outcome(True, f"red cube never in view of {', '.join(cams)} (recorded live in a dataflow: "
                           "nothing to check)", skipped=True, applicable=False)
        if ctx.ds.meta.operation_type == "rollout":  # nor a policy's (a zero policy's wrist never moves)
            return Outcome(True, f"red cube never in view of {', '.join(cams)} (a rollout: its policy decides where "
                           "the wrist looks; nothing to check)", skipped=True, applicable=False)
        return Outcome(False, f"red cube never in view of {', '.join(cams)}", list(ctx.episodes))
    shown = "; ".join(f"{c}: {h}/{n}" + (f" ({h / n:.1%})" if n else "") for c, (n, h) in seen.items())
    return Outcome(not bad, f"red cube centre on its label in the in-view frames of {shown} (per episode and "
                   f"camera > {ctx.t.wrist_hit_fraction:.0%} required)" + (f"; failing: {', '.join(worst[:3])}" if worst else ""),
                   bad, judged={"frames": sum(n for n, _ in seen.values())})


check_sim_wrist = EpisodeCheck(_wrist_episode, _wrist_reduce, _wrist_cameras)
