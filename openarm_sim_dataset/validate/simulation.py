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
from .core import CheckFn, Context, Outcome


#: Half the space diagonal of a 40 mm cube (m): no cube surface is nearer than centre depth minus this.
#: (A randomised episode's cube: its own model's size, see :func:`check_sim_wrist`.)
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


def _models(ctx: Context, bad: list[str], problems: list[str]):
    """``(episode, sidecar, its model)`` for every episode with a usable sidecar; an episode whose model
    cannot be rebuilt as recorded is appended to ``bad`` with a line in ``problems`` instead."""
    for ep, side in ctx.good_sidecars().items():
        try:
            m = episode_model(ctx, ep)
        except DatasetError as e:
            bad.append(ep)
            problems.append(str(e))
            continue
        yield ep, side, m


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


def _missing(ctx: Context) -> list[str]:
    return [ep for ep in ctx.episodes if not isinstance(ctx.sidecar(ep), dict)]


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
def check_sim_episodes(ctx: Context) -> Outcome:
    missing = _missing(ctx)
    root = ctx.ds.root / layout.EPISODES_DIR
    orphans = sorted(p.parent.name for p in root.glob(f"*/{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}")
                     if p.parent.parent.name not in set(ctx.ds.episode_ids)) if root.is_dir() else []
    n = len(ctx.episodes) - len(missing)
    detail = f"{n} sidecars for {len(ctx.episodes)} episodes"
    if missing:
        detail += f"; missing/unreadable: {ctx.sidecar(missing[0])}"
    if orphans:
        detail += f"; {len(orphans)} sidecar(s) of unlisted episodes"
    return Outcome(not missing and not orphans, detail, missing)


def check_sim_provenance(ctx: Context) -> Outcome:
    mujoco = import_mujoco()

    from ..sim.replay import provenance_differences

    try:
        built = built_model(ctx)
        diffs = provenance_differences(_sim(ctx), built.model, built.sha256)
    except (ValueError, TypeError) as e:
        return Outcome(False, f"model cannot be rebuilt from the stored scene: {e}", list(ctx.episodes))
    detail = "; ".join(diffs) if diffs else f"MuJoCo {mujoco.__version__}, model {_sim(ctx)['model_sha256'][:12]} as recorded"
    if diffs:
        return Outcome(False, detail, list(ctx.episodes))
    bad, problems, varied = _episode_provenance(ctx)
    if varied or problems:
        detail += (f"; {varied - len(bad)}/{varied} randomised episode models rebuilt from their variation as recorded"
                   + (f"; {len(bad)} episode(s) differ, first: {problems[0]}" if problems else ""))
    return Outcome(not bad, detail, bad)


def _episode_provenance(ctx: Context) -> tuple[list[str], list[str], int]:
    """Per episode: the variation and model hash in its metadata entry and in its sidecar agree, the
    variation is the one its seed draws under the dataset's ``randomization`` mode, and the model rebuilt
    from it hashes as recorded. Returns (failing episodes, what differs, randomised episodes)."""
    from ..sim.variation import draw_variation

    sim = _sim(ctx)
    bad, problems, varied = [], [], 0

    def fail(ep: str, what: str) -> None:
        bad.append(ep)
        problems.append(f"episode {ep}: {what}")

    for ep in ctx.episodes:
        entry = ctx.ds.episode(ep)
        side = ctx.sidecar(ep)
        # a merge with --allow-mixed-provenance keeps each input's scalar simulation keys in the entry
        prov = entry["provenance"] if isinstance(entry.get("provenance"), dict) else sim
        mode = prov.get("randomization", "none")
        try:
            stored, stored_sha = sidecar.episode_variation(side, ctx.sim_dir(ep) / sidecar.SIDECAR_FILE) \
                if isinstance(side, dict) else (None, None)
            variation = episode_variation(ctx, ep)
        except DatasetError as e:  # names its file and the episode
            bad.append(ep)
            problems.append(str(e))
            continue
        if variation is None and stored is None:
            if mode != "none":
                fail(ep, f"no variation recorded in a dataset randomised with {mode!r}")
            continue
        varied += 1
        recorded = entry.get(sidecar.MODEL_SHA256_KEY)
        if variation is None or stored is None:
            fail(ep, "variation recorded in " + ("the sidecar" if variation is None else "metadata.yaml") + " only")
            continue
        what = []  # everything that differs, each naming where
        if (d := _first_difference(variation.to_dict(), stored)) is not None:
            what.append(f"variation in metadata.yaml differs from the sidecar's at {d}")
        if stored_sha != recorded:
            what.append(f"model_sha256 in metadata.yaml {str(recorded)[:12]} differs from the sidecar's {stored_sha[:12]}")
        drawn = draw_variation(int(prov["seed"]), int(entry["seed_inputs"]["index"]), mode, scene_config(ctx))
        if (d := _first_difference(variation.to_dict(), drawn.to_dict() if drawn else None)) is not None:
            what.append(f"variation is not the one seed {prov['seed']} draws under randomization {mode!r} (at {d})")
        try:
            episode_model(ctx, ep)
        except DatasetError as e:
            what.append(f"model rebuilt from its variation: {e.message}")
        if what:
            fail(ep, "; ".join(what))
    return bad, problems, varied


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


def check_sim_schema(ctx: Context) -> Outcome:
    mujoco = import_mujoco()

    m = model(ctx)
    cams = _cameras(ctx)
    size = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION)
    shapes = sidecar.expected_shapes(cams, m.nq, m.nv, m.nu, size)
    w, h = int(_sim(ctx)["scene"]["width"]), int(_sim(ctx)["scene"]["height"])
    bad, first = [], None
    for ep, side in ctx.good_sidecars().items():
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
        if problems:
            bad.append(ep)
            first = first or f"episode {ep}: {problems[0]}"
    n = len(ctx.good_sidecars())
    missing = _missing(ctx)
    if missing and not first:
        first = f"episode {missing[0]}: {ctx.sidecar(missing[0])}"
    return Outcome(not bad and not missing and n > 0, f"{n} sidecars, {len(shapes)} arrays each" + (f"; {first}" if first else ""),
                   bad + missing)


def check_sim_ranges(ctx: Context) -> Outcome:
    bad, first, frames = [], None, 0
    known = np.array(sorted(sidecar.LABELS), dtype=np.uint8)
    for ep, side in ctx.good_sidecars().items():
        problems = []
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
        if problems:
            bad.append(ep)
            first = first or f"episode {ep}: {problems[0]}"
    return Outcome(not bad, f"{frames} frames: constant interval, unit quaternions, finite positive depth, known labels"
                   + (f"; {first}" if first else ""), bad)


def _plane_heights(m) -> dict[int, float]:
    """World z (m) of the floor plane (label 1) and the table top (label 2) in model ``m``."""
    mujoco = import_mujoco()

    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    top = m.geom("table_top").id
    return {1: float(d.geom_xpos[m.geom("floor").id][2]), 2: float(d.geom_xpos[top][2] + m.geom_size[top][2])}


def check_sim_geometry(ctx: Context) -> Outcome:
    bad, figures, problems = [], [], []
    for ep, side, m in _models(ctx, bad, problems):
        fr = ctx.frames(ep)
        if not isinstance(fr, dict):
            continue
        planes = _plane_heights(m)
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
            if not errs:
                continue
            med = float(np.median(np.concatenate(errs)))
            figures.append(med)
            if med > ctx.t.plane_error:
                bad.append(ep)
    detail = (f"{len(figures)} episode-cameras, median floor/table plane error: mean {np.mean(figures) * 1e6:.1f} um, "
              f"max {np.max(figures) * 1e6:.1f} um (limit {ctx.t.plane_error * 1e3:g} mm)") if figures else "no floor/table pixels"
    return Outcome(not bad and bool(figures), detail + (f"; {problems[0]}" if problems else ""), bad)


def _fixed_camera(ctx: Context) -> str | None:
    cams = _cameras(ctx)
    return "head" if "head" in cams else next((c for c in cams if not c.startswith("wrist")), None)


def check_sim_reprojection(ctx: Context) -> Outcome:
    cam = _fixed_camera(ctx)
    if cam is None:
        return Outcome(True, "no fixed camera", skipped=True, applicable=False)
    bad, errors, problems = [], [], []
    for ep, side, m in _models(ctx, bad, problems):
        fr = ctx.frames(ep)
        if not isinstance(fr, dict) or f"labels_{cam}" not in fr:
            continue
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


def check_sim_wrist(ctx: Context) -> Outcome:
    cams = [c for c in _cameras(ctx) if c.startswith("wrist")]
    if not cams:
        return Outcome(True, "no wrist camera", skipped=True, applicable=False)
    cam = "wrist_right" if "wrist_right" in cams else cams[0]
    from ..sim.scene import cube_half_size

    bad, in_view, hits, problems = [], 0, 0, []
    for ep, side, m in _models(ctx, bad, problems):
        fr = ctx.frames(ep)
        if not isinstance(fr, dict) or f"labels_{cam}" not in fr:
            continue
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


def _replay(ctx: Context, middle: bool) -> Outcome:
    from ..sim.replay import replay

    bad, frames, exact, worst, problems = [], 0, 0, 0.0, []
    for ep, side, m in _models(ctx, bad, problems):
        try:
            start = len(side["step"]) // 2 if middle else None
            r = replay(m, side, from_frame=start)
        except (KeyError, ValueError, IndexError):
            bad.append(ep)
            continue
        frames += r.frames
        exact += r.exact
        worst = max(worst, r.max_qpos_diff, r.max_qvel_diff)
        if not r.ok:
            bad.append(ep)
    what = "from each episode's middle frame state" if middle else "from the initial state"
    missing = _missing(ctx)  # no sidecar: nothing shows the episode replays
    return Outcome(not bad and not missing and frames > 0,
                   f"replayed {what}: {exact}/{frames} frames bit-exact, largest difference {worst:.3g}"
                   + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else "")
                   + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else ""),
                   bad + missing)


def check_sim_replay(ctx: Context) -> Outcome:
    return _replay(ctx, middle=False)


def check_sim_resume(ctx: Context) -> Outcome:
    return _replay(ctx, middle=True)


def check_sim_streams_agree(ctx: Context) -> Outcome:
    from ..sim.scene import arm_index

    m = model(ctx)
    dt_ns = int(round(float(_sim(ctx)["timestep_s"]) * 1e9))
    arms = {s: arm_index(m, s) for s in layout.ARM_SIDES}
    bad, compared, first = [], 0, None
    for ep, side in ctx.good_sidecars().items():
        obs, act = ctx.streams(ep, "obs"), ctx.streams(ep, "action")
        if not isinstance(obs, dict) or not isinstance(act, dict):
            bad.append(ep)
            continue
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
        if not ok:
            bad.append(ep)
            first = first or f"episode {ep}: parquet streams differ from the sidecar"
    return Outcome(not bad and compared > 0, f"{compared} obs frames and action samples equal the sidecar's float32"
                   + (f"; {first}" if first else ""), bad)


class _StoredJpegs:
    """``[k]`` -> the stored JPEG bytes of frame k of one camera, read when asked (stride skips)."""

    def __init__(self, cam):
        self.cam = cam

    def __getitem__(self, k: int) -> bytes:
        return self.cam.get_frame(k).read_bytes()


def check_sim_render(ctx: Context) -> Outcome:
    """Every (``sim_render_stride``-th) camera frame rendered again from its stored integration state
    and re-encoded at the recorded JPEG quality: on the recording's GL renderer the bytes must equal
    the stored JPEG; elsewhere the decoded pixels must reach ``render_psnr_db`` (approximate)."""
    from ..sim.replay import rerender

    sim = _sim(ctx)
    r = renderer(ctx)
    same = same_renderer(ctx, r)
    stride = max(1, int(ctx.t.sim_render_stride))
    floor = ctx.t.render_psnr_db
    bad, problems, n, exact, min_psnr = [], [], 0, 0, float("inf")
    for ep, side, m in _models(ctx, bad, problems):
        cams = ctx.cameras(ep)
        if not isinstance(cams, dict) or any(c not in cams for c in r.cameras):
            bad.append(ep)
            problems.append(f"episode {ep}: cameras {list(r.cameras)} not all readable")
            continue
        odd = [c for c in r.cameras if not np.array_equal(cams[c].timestamps, side["frame_timestamp"])]
        if odd:
            bad.append(ep)
            problems.append(f"episode {ep} camera {odd[0]}: frame stamps differ from the sidecar's frame_timestamp")
            continue
        rr = rerender(m, side, None, {c: _StoredJpegs(cams[c]) for c in r.cameras}, int(sim["jpeg_quality"]), r,
                      stride=stride, depth_labels=False, psnr_always=not same)
        n += rr.frames
        exact += rr.jpeg_exact
        min_psnr = min(min_psnr, rr.min_psnr_db)
        diffs = rr.differences(same, floor)
        if diffs:
            bad.append(ep)
            cam, k, ts = rr.first_jpeg_mismatch if same else rr.worst_psnr_at
            what = (f"re-encoded render differs from the stored JPEG (PSNR {rr.min_psnr_db:.1f} dB)" if same
                    else f"PSNR {rr.min_psnr_db:.1f} dB below {floor:g} dB")
            problems.append(f"episode {ep} camera {cam} frame {k} (t={ts} ns): {what}")
    missing = _missing(ctx)  # no sidecar: no state to render from
    mode = (f"exact JPEG bytes required (GL renderer as recorded: {r.gl_renderer})" if same else
            f"approximate, the renderer differs (here {r.gl_renderer!r}, recorded {sim.get('gl_renderer')!r}): "
            f"decoded pixels must reach PSNR >= {floor:g} dB")
    psnr = "" if min_psnr == float("inf") else f", lowest PSNR {min_psnr:.1f} dB"
    detail = (f"{n} camera frames re-rendered (every {stride}{'st' if stride == 1 else 'th'}): {exact}/{n} JPEG bytes "
              f"identical{psnr}; {mode}"
              + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else "")
              + (f"; {len(problems)} episode(s) differ, first: {problems[0]}" if problems else ""))
    return Outcome(not bad and not missing and n > 0, detail, bad + missing)


def check_sim_regenerate(ctx: Context) -> Outcome:
    if not ctx.regenerate:
        return Outcome(True, "not requested (--regenerate N)", skipped=True, applicable=False)
    from ..sim.generate import GenerateConfig, record_index
    from ..sim.recorder import RecordConfig

    sim = _sim(ctx)
    cfg = GenerateConfig(seed=int(sim["seed"]), sigma=float(sim["sigma_m"]), retry=bool(sim["retry"]), scene=scene_config(ctx),
                         record=RecordConfig(float(sim["state_hz"]), float(sim["camera_hz"]), int(sim["jpeg_quality"])),
                         max_time=float(sim["max_time_s"]), randomize=str(sim.get("randomization", "none")))
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
