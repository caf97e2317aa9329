"""Checks of meaning for simulated datasets (run when metadata has a ``simulation:`` block).

Geometry checks use the stored depth, intrinsics K and per-frame camera poses, so a depth written in
millimetres or a camera pose that stopped updating fails them even though every array has the right
shape and dtype.

Every check that simulates, renders or measures runs on the model the episode ran on: the nominal
scene's, or for a randomised episode the scene rebuilt with its recorded variation
(:func:`episode_model`; its hash must be the episode's recorded ``model_sha256``). K is the dataset's
(the nominal model's) for a nominal episode and the episode model's for a randomised one; camera poses
come from the sidecar.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from .. import layout, sidecar
from ..errors import DatasetError
from ..gl import import_mujoco
from .core import CheckFn, Context, EpisodeCheck, Outcome


#: Half the space diagonal of a 40 mm cube (m): no cube surface is nearer than centre depth minus this.
#: (A randomised episode's cube: its own model's size, see :func:`_wrist_episode`.)
CUBE_HALF_DIAGONAL = 0.02 * 3**0.5

# ----------------------------------------------------------------------------- model access
def scene_config(ctx: Context):
    """The SceneConfig stored in metadata (lists turned back into tuples)."""
    from ..sim.scene import SceneConfig

    stored = dict(ctx.ds.meta.simulation.get("scene") or {})
    names = {f.name for f in dataclasses.fields(SceneConfig)}
    unknown = sorted(set(stored) - names)
    if unknown:
        raise ValueError(f"scene keys unknown to this version: {', '.join(unknown)}")
    return SceneConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})


def built_model(ctx: Context):
    """The model compiled from the stored scene configuration, with its hash (per-process cache; shared:
    never modify it). Used to diagnose provenance, whatever the hash."""
    from ..sim.models import cached_model

    return cached_model(scene_config(ctx))


def model(ctx: Context):
    """A copy of the model rebuilt from the stored scene configuration (compiled once per process),
    refused (:class:`~openarm_sim_dataset.sim.models.ModelMismatchError`) unless its hash is the
    recorded ``model_sha256``: no check replays or projects on a model other than the recorded one."""
    if "model" not in ctx.cache:
        from ..sim.models import load_model

        ctx.cache["model"] = load_model(scene_config(ctx), _sim(ctx).get("model_sha256"),
                                        ctx.ds.root / layout.METADATA_FILE)
    return ctx.cache["model"]


#: One SimRenderer per process (a GL context costs 0.2-0.9 s): ``{"entry": (key, renderer)}``, the key
#: being the stored scene configuration and model hash; a dataset with another scene replaces it.
_RENDERER: dict = {}


def episode_variation(ctx: Context, ep: str):
    """The :class:`~openarm_sim_dataset.sim.variation.Variation` recorded in episode ``ep``'s metadata
    entry, or None (nominal scene). A malformed one raises :class:`DatasetError` naming the file."""
    from ..sim.variation import Variation

    entry = ctx.ds.episode(ep)
    if sidecar.VARIATION_KEY not in entry:
        return None
    try:
        return Variation.from_dict(entry[sidecar.VARIATION_KEY])
    except ValueError as e:
        raise DatasetError(ctx.ds.root / layout.METADATA_FILE, f"episode {ep}: {e}") from None


def episode_model(ctx: Context, ep: str):
    """The model episode ``ep`` ran on (a private copy): :func:`model` for a nominal episode, else the
    scene rebuilt with its recorded variation, refused (:class:`ModelMismatchError`, a DatasetError)
    unless it hashes to the episode's recorded ``model_sha256``."""
    variation = episode_variation(ctx, ep)
    if variation is None:
        return model(ctx)
    from ..sim.models import load_model

    where = f"{ctx.ds.root / layout.METADATA_FILE}: episode {ep}"
    recorded = ctx.ds.episode(ep).get(sidecar.MODEL_SHA256_KEY)
    if not isinstance(recorded, str):
        raise DatasetError(where, "has a variation but no model_sha256")
    return load_model(scene_config(ctx), recorded, where, variation=variation)


@dataclasses.dataclass(frozen=True)
class ModelProblem:
    """What an episode function returns instead of its figures when the episode's model cannot be
    rebuilt as recorded (``text`` names the file and the episode): the reduce makes the episode fail
    with it. Small and picklable, as every partial of an :class:`EpisodeCheck` (Ray tasks return it)."""

    text: str


def _sidecar_and_model(ctx: Context, ep: str):
    """``(sidecar, episode model)`` of ``ep`` for an episode check: None without a usable sidecar (nothing
    to check), or a :class:`ModelProblem` saying why its model cannot be rebuilt as recorded."""
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return None
    try:
        return side, episode_model(ctx, ep)
    except DatasetError as e:
        return ModelProblem(str(e))


def _model_problems(parts: dict) -> tuple[dict, list[str], list[str]]:
    """``(parts without ModelProblem markers, their episodes, their texts)``, in episode order."""
    problems = {ep: p.text for ep, p in parts.items() if isinstance(p, ModelProblem)}
    return {ep: p for ep, p in parts.items() if ep not in problems}, list(problems), list(problems.values())


def _episode_K(ctx: Context, ep: str, cam: str, m) -> np.ndarray:
    """K of ``cam`` for episode ``ep``: the dataset's for a nominal episode, the episode model's otherwise."""
    if sidecar.VARIATION_KEY not in ctx.ds.episode(ep):
        return _K(ctx, cam)
    from ..sim.render import intrinsics

    scene = _sim(ctx)["scene"]
    return intrinsics(m, cam, int(scene["width"]), int(scene["height"]))


def renderer(ctx: Context):
    """The process's SimRenderer for the stored scene (created on first use, then reused; its own
    ``.model`` is the model it renders)."""
    from ..sim.render import SimRenderer

    cfg = scene_config(ctx)
    key = (repr(cfg), _sim(ctx).get("model_sha256"), os.environ.get("MUJOCO_GL"))
    entry = _RENDERER.get("entry")
    if entry is not None and entry[0] == key:
        return entry[1]
    if entry is not None:
        entry[1].close()
        _RENDERER.clear()
    r = SimRenderer(model(ctx), cfg)
    _RENDERER["entry"] = (key, r)
    return r


def same_renderer(ctx: Context, r) -> bool:
    """Whether this process renders with the GL implementation the dataset was recorded with."""
    return r.gl_renderer == _sim(ctx).get("gl_renderer")


def _sim(ctx: Context) -> dict:
    return ctx.ds.meta.simulation


def _cameras(ctx: Context) -> list[str]:
    return list((_sim(ctx).get("cameras") or {}).keys())


def _K(ctx: Context, cam: str) -> np.ndarray:
    return np.asarray(_sim(ctx)["cameras"][cam]["K"], dtype=np.float64)


def project(K: np.ndarray, pos: np.ndarray, mat: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (N, 2) and depth along the optical axis (N,) of world points (N, 3)."""
    R = mat.reshape(3, 3)
    c = (points - pos) @ R  # MuJoCo camera coordinates: x right, y up, looking along -z
    x, y, z = c[:, 0], -c[:, 1], -c[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = K[0, 0] * x / z + K[0, 2]
        v = K[1, 1] * y / z + K[1, 2]
    return np.stack([u, v], 1), z


def back_project(K: np.ndarray, pos: np.ndarray, mat: np.ndarray, uv: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """World points (N, 3) of pixels ``uv`` (N, 2) at ``depth`` (N,) metres along the optical axis."""
    x = (uv[:, 0] - K[0, 2]) / K[0, 0] * depth
    y = (uv[:, 1] - K[1, 2]) / K[1, 1] * depth
    c = np.stack([x, -y, -depth], 1)
    return pos + c @ mat.reshape(3, 3).T


# ----------------------------------------------------------------------------------- checks
def _sidecar_problem(ctx: Context, ep: str, prep=None) -> str | None:
    """Why episode ``ep`` has no usable sidecar, or None."""
    side = ctx.sidecar(ep)
    return None if isinstance(side, dict) else side


def _episodes_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    missing = [ep for ep, problem in parts.items() if problem is not None]
    root = ctx.ds.root / layout.EPISODES_DIR
    orphans = sorted(p.parent.name for p in root.glob(f"*/{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}")
                     if p.parent.parent.name not in set(ctx.ds.episode_ids)) if root.is_dir() else []
    n = len(ctx.episodes) - len(missing)
    detail = f"{n} sidecars for {len(ctx.episodes)} episodes"
    if missing:
        detail += f"; missing/unreadable: {parts[missing[0]]}"
    if orphans:
        detail += f"; {len(orphans)} sidecar(s) of unlisted episodes"
    return Outcome(not missing and not orphans, detail, missing)


check_sim_episodes = EpisodeCheck(_sidecar_problem, _episodes_reduce)


def _provenance_prepare(ctx: Context) -> tuple[bool, str]:
    """``(passed, detail)`` of the dataset's model: the nominal model rebuilt from the stored scene
    against the recorded versions, assets and hash (once, whatever the episodes)."""
    mujoco = import_mujoco()

    from ..sim.replay import provenance_differences

    try:
        built = built_model(ctx)
        diffs = provenance_differences(_sim(ctx), built.model, built.sha256)
    except (ValueError, TypeError) as e:
        return False, f"model cannot be rebuilt from the stored scene: {e}"
    if diffs:
        return False, "; ".join(diffs)
    return True, f"MuJoCo {mujoco.__version__}, model {_sim(ctx)['model_sha256'][:12]} as recorded"


def _provenance_episode(ctx: Context, ep: str, prep: tuple[bool, str]) -> tuple[bool, str | None] | None:
    """``(randomised, what differs or None)`` of episode ``ep``: the variation and model hash in its
    metadata entry and in its sidecar agree, the variation is the one its seed draws under the dataset's
    ``randomization`` mode, and the model rebuilt from it hashes as recorded. None when the dataset's
    model already fails (the row says so)."""
    from ..sim.variation import draw_variation

    if not prep[0]:
        return None
    entry = ctx.ds.episode(ep)
    side = ctx.sidecar(ep)
    # a merge with --allow-mixed-provenance keeps each input's scalar simulation keys in the entry
    prov = entry["provenance"] if isinstance(entry.get("provenance"), dict) else _sim(ctx)
    mode = prov.get("randomization", "none")
    try:
        stored, stored_sha = sidecar.episode_variation(side, ctx.sim_dir(ep) / sidecar.SIDECAR_FILE) \
            if isinstance(side, dict) else (None, None)
        variation = episode_variation(ctx, ep)
    except DatasetError as e:  # names its file and the episode
        return False, str(e)
    if variation is None and stored is None:
        return False, (f"episode {ep}: no variation recorded in a dataset randomised with {mode!r}" if mode != "none" else None)
    recorded = entry.get(sidecar.MODEL_SHA256_KEY)
    if variation is None or stored is None:
        return True, f"episode {ep}: variation recorded in " + ("the sidecar" if variation is None else "metadata.yaml") + " only"
    what = []  # everything that differs, each naming where
    if (d := _first_difference(variation.to_dict(), stored)) is not None:
        what.append(f"variation in metadata.yaml differs from the sidecar's at {d}")
    if stored_sha != recorded:
        what.append(f"model_sha256 in metadata.yaml {str(recorded)[:12]} differs from the sidecar's {stored_sha[:12]}")
    variant = entry.get("render_source")
    if isinstance(variant, dict) and "variant" in variant:  # a visual variant of dataset-render: its own draw
        from ..sim.variation import visual_variant

        try:
            drawn = visual_variant(int(variant["seed"]), int(variant["index"]), int(variant["variant"]), variation,
                                   scene_config(ctx))
        except (KeyError, TypeError, ValueError):
            return True, f"episode {ep}: render_source {variant!r} is not a visual variant's seed, index and number"
    else:
        drawn = draw_variation(int(prov["seed"]), int(entry["seed_inputs"]["index"]), mode, scene_config(ctx))
    if (d := _first_difference(variation.to_dict(), drawn.to_dict() if drawn else None)) is not None:
        what.append(f"variation is not the one seed {prov['seed']} draws under randomization {mode!r} (at {d})")
    try:
        episode_model(ctx, ep)
    except DatasetError as e:
        what.append(f"model rebuilt from its variation: {e.message}")
    return True, (f"episode {ep}: " + "; ".join(what) if what else None)


def _provenance_reduce(ctx: Context, prep: tuple[bool, str], parts: dict) -> Outcome:
    ok, detail = prep
    if not ok:
        return Outcome(False, detail, list(ctx.episodes))
    bad, problems, varied = [], [], 0
    for ep, part in parts.items():
        if part is None:
            continue
        varied += part[0]
        if part[1] is not None:
            bad.append(ep)
            problems.append(part[1])
    if varied or problems:
        detail += (f"; {varied - len(bad)}/{varied} randomised episode models rebuilt from their variation as recorded"
                   + (f"; {len(bad)} episode(s) differ, first: {problems[0]}" if problems else ""))
    return Outcome(not bad, detail, bad)


check_sim_provenance = EpisodeCheck(_provenance_episode, _provenance_reduce, _provenance_prepare)


def _first_difference(a: object, b: object, where: str = "variation") -> str | None:
    """Dotted path of the first place two plain values differ, with both values (None if equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            d = _first_difference(a.get(key), b.get(key), f"{where}.{key}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := _first_difference(x, y, f"{where}[{i}]"))), None)
    return None if a == b else f"{where} ({a!r} vs {b!r})"


def _schema_prepare(ctx: Context) -> tuple:
    mujoco = import_mujoco()

    m = model(ctx)
    cams = _cameras(ctx)
    size = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION)
    shapes = sidecar.expected_shapes(cams, m.nq, m.nv, m.nu, size)
    w, h = int(_sim(ctx)["scene"]["width"]), int(_sim(ctx)["scene"]["height"])
    return cams, shapes, w, h


def _schema_episode(ctx: Context, ep: str, prep: tuple) -> tuple[str, str | None]:
    """``("missing", why)`` without a usable sidecar, else ``("ok", first problem or None)``."""
    cams, shapes, w, h = prep
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return "missing", side
    problems = sidecar.check_arrays(side, shapes, ctx.sim_dir(ep))
    frames = ctx.frames(ep)
    if isinstance(frames, str):
        problems.append(frames)
    else:
        nf = len(side.get("step", []))
        for cam in cams:
            for key, dtype in ((f"depth_{cam}", np.float32), (f"labels_{cam}", np.uint8)):
                a = frames.get(key)
                if a is None:
                    problems.append(f"missing {key}")
                elif a.dtype != dtype or a.shape != (nf, h, w):
                    problems.append(f"{key} is {a.dtype}{a.shape}, expected {np.dtype(dtype)}{(nf, h, w)}")
    return "ok", (problems[0] if problems else None)


def _schema_reduce(ctx: Context, prep: tuple, parts: dict) -> Outcome:
    shapes = prep[1]
    bad, first = [], None
    for ep, (kind, problem) in parts.items():
        if kind == "ok" and problem is not None:
            bad.append(ep)
            first = first or f"episode {ep}: {problem}"
    n = sum(kind == "ok" for kind, _ in parts.values())
    missing = [ep for ep, (kind, _) in parts.items() if kind == "missing"]
    if missing and not first:
        first = f"episode {missing[0]}: {parts[missing[0]][1]}"
    return Outcome(not bad and not missing and n > 0, f"{n} sidecars, {len(shapes)} arrays each" + (f"; {first}" if first else ""),
                   bad + missing)


check_sim_schema = EpisodeCheck(_schema_episode, _schema_reduce, _schema_prepare)


def _ranges_episode(ctx: Context, ep: str, prep=None) -> tuple[int, str | None] | None:
    """(frames with object poses, first problem or None); None without a usable sidecar."""
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return None
    known = np.array(sorted(sidecar.LABELS), dtype=np.uint8)
    problems, frames = [], 0
    steps = side.get("step")
    if steps is not None and len(steps) > 1 and len(np.unique(np.diff(steps))) != 1:
        problems.append("frame interval not constant")
    pose = side.get("object_pose")
    if pose is not None and pose.size:
        frames += len(pose)
        err = np.abs(np.linalg.norm(pose[..., 3:7], axis=-1) - 1)
        if np.max(err) > 1e-6:
            problems.append(f"object quaternions off unit norm by {np.max(err):.2g}")
    fr = ctx.frames(ep)
    if isinstance(fr, dict):
        for key, a in fr.items():
            if key.startswith("depth_") and not (np.all(np.isfinite(a)) and np.all(a > 0)):
                problems.append(f"{key}: non-finite or non-positive depth")
            if key.startswith("labels_") and not np.all(np.isin(np.unique(a), known)):
                problems.append(f"{key}: unknown labels {sorted(set(np.unique(a)) - set(known))}")
    return frames, (problems[0] if problems else None)


def _ranges_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    bad, first, frames = [], None, 0
    for ep, part in parts.items():
        if part is None:
            continue
        frames += part[0]
        if part[1] is not None:
            bad.append(ep)
            first = first or f"episode {ep}: {part[1]}"
    return Outcome(not bad, f"{frames} frames: constant interval, unit quaternions, finite positive depth, known labels"
                   + (f"; {first}" if first else ""), bad)


check_sim_ranges = EpisodeCheck(_ranges_episode, _ranges_reduce)


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
    got = _sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    fr = ctx.frames(ep)
    if not isinstance(fr, dict):
        return None
    planes = _plane_heights(m)
    medians = []
    for cam in _cameras(ctx):
        K = _episode_K(ctx, ep, cam, m)
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
    parts, bad, problems = _model_problems(parts)
    figures = []
    for ep, medians in parts.items():
        for med in medians or []:
            figures.append(med)
            if med > ctx.t.plane_error:
                bad.append(ep)
    detail = (f"{len(figures)} episode-cameras, median floor/table plane error: mean {np.mean(figures) * 1e6:.1f} um, "
              f"max {np.max(figures) * 1e6:.1f} um (limit {ctx.t.plane_error * 1e3:g} mm)") if figures else "no floor/table pixels"
    return Outcome(not bad and bool(figures), detail + (f"; {problems[0]}" if problems else ""), bad)


check_sim_geometry = EpisodeCheck(_geometry_episode, _geometry_reduce)


def _fixed_camera(ctx: Context) -> str | None:
    cams = _cameras(ctx)
    return "head" if "head" in cams else next((c for c in cams if not c.startswith("wrist")), None)


def _reprojection_episode(ctx: Context, ep: str, cam: str | None) -> list[float] | ModelProblem | None:
    """Pixel distances between projected cube centres and their mask centroids in ``cam`` (K of the
    episode's own model)."""
    if cam is None:
        return None
    got = _sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    fr = ctx.frames(ep)
    if not isinstance(fr, dict) or f"labels_{cam}" not in fr:
        return None
    K = _episode_K(ctx, ep, cam, m)
    labels = fr[f"labels_{cam}"]
    h, w = labels.shape[1:]
    pose, pos, mat = side["object_pose"], side[f"cam_pos_{cam}"], side[f"cam_mat_{cam}"]
    ep_err = []
    for c in range(pose.shape[1]):
        counts = (labels == 4 + c).sum(axis=(1, 2))
        typical = np.median(counts[counts > 0]) if (counts > 0).any() else 0
        for k in range(len(labels)):
            mask = labels[k] == 4 + c
            # skip occluded or cut masks: their centroid is not the object's
            if counts[k] < max(20, 0.8 * typical) or mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any():
                continue
            vs, us = np.nonzero(mask)
            uv, _ = project(K, pos[k], mat[k], pose[k, c, :3][None])
            ep_err.append(float(np.hypot(uv[0, 0] - us.mean(), uv[0, 1] - vs.mean())))
    return ep_err


def _reprojection_reduce(ctx: Context, cam: str | None, parts: dict) -> Outcome:
    if cam is None:
        return Outcome(True, "no fixed camera", skipped=True, applicable=False)
    parts, bad, problems = _model_problems(parts)
    errors = []
    for ep, ep_err in parts.items():
        ep_err = ep_err or []
        errors += ep_err
        if ep_err and max(ep_err) > ctx.t.reprojection_px:
            bad.append(ep)
    if problems:
        return Outcome(False, f"{len(problems)} episode model(s) not as recorded, first: {problems[0]}", bad)
    if not errors:
        # nothing measurable (images too small for >= 20-pixel masks, or every cube occluded): no verdict
        return Outcome(True, "no unoccluded cube mask of >= 20 pixels clear of the border to measure", skipped=True)
    e = np.array(errors)
    return Outcome(not bad, f"{len(e)} cube-frames, mean {e.mean():.2f} px, max {e.max():.2f} px (limit {ctx.t.reprojection_px} px)", bad)


check_sim_reprojection = EpisodeCheck(_reprojection_episode, _reprojection_reduce, _fixed_camera)


def _wrist_camera(ctx: Context) -> str | None:
    cams = [c for c in _cameras(ctx) if c.startswith("wrist")]
    return ("wrist_right" if "wrist_right" in cams else cams[0]) if cams else None


def _wrist_episode(ctx: Context, ep: str, cam: str | None) -> tuple[int, int] | ModelProblem | None:
    """(frames with the red cube centre in view of ``cam``, of them on its own label), with K and the
    cube size of the episode's own model."""
    if cam is None:
        return None
    got = _sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    fr = ctx.frames(ep)
    if not isinstance(fr, dict) or f"labels_{cam}" not in fr:
        return None
    from ..sim.scene import cube_half_size

    K = _episode_K(ctx, ep, cam, m)
    half_diagonal = cube_half_size(m) * 3**0.5 if sidecar.VARIATION_KEY in ctx.ds.episode(ep) else CUBE_HALF_DIAGONAL
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
        # hidden behind something nearer than the cube's nearest surface (e.g. a finger): not in view
        if depth is not None and depth[k, v, u] < z[0] - half_diagonal:
            continue
        ep_in += 1
        ep_hit += int(labels[k, v, u] == 4)
    return ep_in, ep_hit


def _wrist_reduce(ctx: Context, cam: str | None, parts: dict) -> Outcome:
    if cam is None:
        return Outcome(True, "no wrist camera", skipped=True, applicable=False)
    parts, bad, problems = _model_problems(parts)
    in_view, hits = 0, 0
    for ep, part in parts.items():
        if part is None:
            continue
        ep_in, ep_hit = part
        in_view += ep_in
        hits += ep_hit
        if ep_in and ep_hit / ep_in <= ctx.t.wrist_hit_fraction:
            bad.append(ep)
    if problems:
        return Outcome(False, f"{len(problems)} episode model(s) not as recorded, first: {problems[0]}", bad)
    if in_view == 0:
        return Outcome(False, f"red cube never in view of {cam}", list(ctx.episodes))
    return Outcome(not bad, f"{cam}: red cube centre on its label in {hits}/{in_view} in-view frames "
                   f"({hits / in_view:.1%}; per episode > {ctx.t.wrist_hit_fraction:.0%} required)", bad)


check_sim_wrist = EpisodeCheck(_wrist_episode, _wrist_reduce, _wrist_camera)


def _replay_episode(ctx: Context, ep: str, middle: bool) -> tuple | ModelProblem | None:
    """(frames, bit-exact frames, largest difference, ok) of replaying episode ``ep`` on its own model;
    ``("bad",)`` if its sidecar cannot be replayed; None without a usable sidecar."""
    from ..sim.replay import replay

    got = _sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    try:
        start = len(side["step"]) // 2 if middle else None
        r = replay(m, side, from_frame=start)
    except (KeyError, ValueError, IndexError):
        return ("bad",)
    return (r.frames, r.exact, max(r.max_qpos_diff, r.max_qvel_diff), bool(r.ok))


def _replay_reduce(ctx: Context, parts: dict, middle: bool) -> Outcome:
    parts, bad, problems = _model_problems(parts)
    frames, exact, worst = 0, 0, 0.0
    for ep, part in parts.items():
        if part is None:
            continue
        if part[0] == "bad":
            bad.append(ep)
            continue
        frames += part[0]
        exact += part[1]
        worst = max(worst, part[2])
        if not part[3]:
            bad.append(ep)
    what = "from each episode's middle frame state" if middle else "from the initial state"
    missing = [ep for ep, part in parts.items() if part is None]  # no sidecar: nothing shows the episode replays
    return Outcome(not bad and not missing and frames > 0,
                   f"replayed {what}: {exact}/{frames} frames bit-exact, largest difference {worst:.3g}"
                   + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else "")
                   + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else ""),
                   bad + missing)


# no prepare: each episode replays on its own model (the nominal one is compiled once per process)
check_sim_replay = EpisodeCheck(lambda ctx, ep, prep: _replay_episode(ctx, ep, middle=False),
                                lambda ctx, prep, parts: _replay_reduce(ctx, parts, middle=False))
check_sim_resume = EpisodeCheck(lambda ctx, ep, prep: _replay_episode(ctx, ep, middle=True),
                                lambda ctx, prep, parts: _replay_reduce(ctx, parts, middle=True))


def _streams_prepare(ctx: Context) -> tuple:
    from ..sim.scene import arm_index

    # the arms' joint and actuator indices: a variation changes no joint or actuator, only cubes and looks
    m = model(ctx)
    dt_ns = int(round(float(_sim(ctx)["timestep_s"]) * 1e9))
    return dt_ns, {s: arm_index(m, s) for s in layout.ARM_SIDES}


def _streams_episode(ctx: Context, ep: str, prep: tuple) -> tuple[int, bool] | None:
    """(values compared, all equal) of episode ``ep``'s parquet streams against its sidecar."""
    dt_ns, arms = prep
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return None
    compared = 0
    obs, act = ctx.streams(ep, "obs"), ctx.streams(ep, "action")
    if not isinstance(obs, dict) or not isinstance(act, dict):
        return 0, False
    ft = side["frame_timestamp"]
    base = int(ft[0]) - int(side["step"][0]) * dt_ns
    ok = True
    for s, a in arms.items():
        o = obs.get(f"arms/{s}/qpos")
        ac = act.get(f"arms/{s}/qpos")
        if o is None or ac is None:
            ok = False
            continue
        idx = np.searchsorted(o.timestamps, ft)
        found = (idx < len(o)) & (o.timestamps[np.minimum(idx, len(o) - 1)] == ft)
        expected = side["qpos"][found][:, a.qpos].astype(np.float32)
        ok &= bool(found.all()) and np.array_equal(o.values[idx[found]], expected)
        steps = (ac.timestamps - base) // dt_ns
        inside = (steps >= 0) & (steps < len(side["physics_ctrl"]))
        tracked = side["physics_ctrl"][steps[inside]][:, a.actuators].astype(np.float32)
        ok &= bool(inside.sum() >= len(ac) - 1) and np.array_equal(ac.values[inside], tracked)
        compared += len(expected) + int(inside.sum())
    return compared, bool(ok)


def _streams_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    bad, compared, first = [], 0, None
    for ep, part in parts.items():
        if part is None:
            continue
        compared += part[0]
        if not part[1]:
            bad.append(ep)
            first = first or f"episode {ep}: parquet streams differ from the sidecar"
    return Outcome(not bad and compared > 0, f"{compared} obs frames and action samples equal the sidecar's float32"
                   + (f"; {first}" if first else ""), bad)


check_sim_streams_agree = EpisodeCheck(_streams_episode, _streams_reduce, _streams_prepare)


class _StoredJpegs:
    """``[k]`` -> the stored JPEG bytes of frame k of one camera, read when asked (stride skips)."""

    def __init__(self, cam):
        self.cam = cam

    def __getitem__(self, k: int) -> bytes:
        return self.cam.get_frame(k).read_bytes()


# sim_render: every (``sim_render_stride``-th) camera frame rendered again from its stored integration
# state, on the episode's own model, and re-encoded at the recorded JPEG quality: on the recording's GL
# renderer the bytes must equal the stored JPEG; elsewhere the decoded pixels must reach
# ``render_psnr_db`` (approximate).
def _render_episode(ctx: Context, ep: str, r) -> tuple | ModelProblem | None:
    """(frames re-rendered, JPEG-identical, lowest PSNR, problem or None) of episode ``ep``; None without
    a usable sidecar."""
    from ..sim.replay import rerender

    got = _sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    same = same_renderer(ctx, r)
    floor = ctx.t.render_psnr_db
    cams = ctx.cameras(ep)
    if not isinstance(cams, dict) or any(c not in cams for c in r.cameras):
        return 0, 0, float("inf"), f"episode {ep}: cameras {list(r.cameras)} not all readable"
    odd = [c for c in r.cameras if not np.array_equal(cams[c].timestamps, side["frame_timestamp"])]
    if odd:
        return 0, 0, float("inf"), f"episode {ep} camera {odd[0]}: frame stamps differ from the sidecar's frame_timestamp"
    rr = rerender(m, side, None, {c: _StoredJpegs(cams[c]) for c in r.cameras}, int(_sim(ctx)["jpeg_quality"]), r,
                  stride=max(1, int(ctx.t.sim_render_stride)), depth_labels=False, psnr_always=not same)
    problem = None
    if rr.differences(same, floor):
        cam, k, ts = rr.first_jpeg_mismatch if same else rr.worst_psnr_at
        what = (f"re-encoded render differs from the stored JPEG (PSNR {rr.min_psnr_db:.1f} dB)" if same
                else f"PSNR {rr.min_psnr_db:.1f} dB below {floor:g} dB")
        problem = f"episode {ep} camera {cam} frame {k} (t={ts} ns): {what}"
    return rr.frames, rr.jpeg_exact, rr.min_psnr_db, problem


def _render_reduce(ctx: Context, r, parts: dict) -> Outcome:
    sim = _sim(ctx)
    same = same_renderer(ctx, r)
    stride = max(1, int(ctx.t.sim_render_stride))
    floor = ctx.t.render_psnr_db
    bad, problems, n, exact, min_psnr = [], [], 0, 0, float("inf")
    for ep, part in parts.items():
        if part is None:
            continue
        if isinstance(part, ModelProblem):  # counted among the episodes that differ, in episode order
            bad.append(ep)
            problems.append(part.text)
            continue
        n += part[0]
        exact += part[1]
        min_psnr = min(min_psnr, part[2])
        if part[3] is not None:
            bad.append(ep)
            problems.append(part[3])
    missing = [ep for ep, part in parts.items() if part is None]  # no sidecar: no state to render from
    mode = (f"exact JPEG bytes required (GL renderer as recorded: {r.gl_renderer})" if same else
            f"approximate, the renderer differs (here {r.gl_renderer!r}, recorded {sim.get('gl_renderer')!r}): "
            f"decoded pixels must reach PSNR >= {floor:g} dB")
    psnr = "" if min_psnr == float("inf") else f", lowest PSNR {min_psnr:.1f} dB"
    detail = (f"{n} camera frames re-rendered (every {stride}{'st' if stride == 1 else 'th'}): {exact}/{n} JPEG bytes "
              f"identical{psnr}; {mode}"
              + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else "")
              + (f"; {len(problems)} episode(s) differ, first: {problems[0]}" if problems else ""))
    return Outcome(not bad and not missing and n > 0, detail, bad + missing)


check_sim_render = EpisodeCheck(_render_episode, _render_reduce, renderer)


def check_sim_regenerate(ctx: Context) -> Outcome:
    if not ctx.regenerate:
        return Outcome(True, "not requested (--regenerate N)", skipped=True, applicable=False)
    from ..sim.generate import config_from_simulation, record_index

    sim = _sim(ctx)
    # the recorded task list and randomisation mode too: the right task on the right model is rebuilt
    cfg = config_from_simulation(sim, scene_config(ctx))
    r = renderer(ctx)  # the process's renderer of this scene, shared with sim_render
    bad, arrays, first = [], 0, None
    for ep in ctx.regenerate:
        index = int(ctx.ds.episode(ep)["seed_inputs"]["index"])
        rec = record_index(cfg, index, model(ctx), r)
        side, fr = ctx.sidecar(ep), ctx.frames(ep)
        diffs = []
        if not isinstance(side, dict) or not isinstance(fr, dict):
            diffs.append("stored sidecar unreadable")
        else:
            for k, v in rec.sidecar.items():
                arrays += 1
                if k not in side or not np.array_equal(side[k], v):
                    diffs.append(k)
            for k, v in rec.frames.items():
                arrays += 1
                if k not in fr or not np.array_equal(fr[k], v):
                    diffs.append(k)
        for kind, groups in (("obs", rec.data.obs), ("action", rec.data.action)):
            stored = ctx.streams(ep, kind)
            for (emb, comp), g in groups.items():
                for attr, values in g.attributes.items():
                    arrays += 1
                    s = stored.get(f"{emb}/{comp}/{attr}") if isinstance(stored, dict) else None
                    if s is None or not np.array_equal(s.values, values) or not np.array_equal(s.timestamps, g.timestamps):
                        diffs.append(f"{kind} {comp} {attr}")
        cams = ctx.cameras(ep)
        for name, frames in rec.data.cameras.items():
            arrays += 1
            if not isinstance(cams, dict) or [f.read_bytes() for f in cams[name]] != [b for _, b in frames]:
                diffs.append(f"camera {name} images")
        if diffs:
            bad.append(ep)
            first = first or f"episode {ep}: differs in {', '.join(diffs[:4])}"
    return Outcome(not bad, f"{len(ctx.regenerate)} episode(s) regenerated from their seed, {arrays} arrays compared"
                   + (f"; {first}" if first else ""), bad)


SIM_CHECKS: list[tuple[str, CheckFn]] = [
    ("sim_episodes", check_sim_episodes),
    ("sim_provenance", check_sim_provenance),
    ("sim_schema", check_sim_schema),
    ("sim_ranges", check_sim_ranges),
    ("sim_geometry", check_sim_geometry),
    ("sim_reprojection", check_sim_reprojection),
    ("sim_wrist_projection", check_sim_wrist),
    ("sim_replay", check_sim_replay),
    ("sim_resume", check_sim_resume),
    ("sim_streams_agree", check_sim_streams_agree),
    ("sim_render", check_sim_render),
    ("sim_regenerate", check_sim_regenerate),
]
