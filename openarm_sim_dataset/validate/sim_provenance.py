"""``sim_provenance``: the dataset's model and every episode's model rebuilt as recorded (versions,
assets, hash; a randomised episode's variation is the one its seed draws, in metadata and sidecar alike),
and the camera descriptions of metadata.yaml those of the cameras the images were drawn with (K from the
model's field of view at the scene's size, on the dataset's model and on every randomised episode's own;
the sizes in ``simulation.cameras`` and ``equipment.perceptions.cameras``).
"""

from __future__ import annotations

from openarm_sim_dataset.core import sidecar
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.sim.render import intrinsics
from openarm_sim_dataset.sim.replay import provenance_differences
from openarm_sim_dataset.sim.variation import draw_variation, visual_variant

from .check import Context, EpisodeCheck, Outcome
from .sim_model import built_model, episode_model, episode_variation, recorded_cameras, scene_config, sim_block


def _provenance_prepare(ctx: Context) -> tuple[bool, str]:
    """``(passed, detail)`` of the dataset's model: the nominal model rebuilt from the stored scene
    against the recorded versions, assets and hash (once, whatever the episodes)."""
    mujoco = import_mujoco()

    try:
        built = built_model(ctx)
        diffs = provenance_differences(sim_block(ctx), built.model, built.sha256)
    except (ValueError, TypeError) as e:
        return False, f"model cannot be rebuilt from the stored scene: {e}"
    if diffs:
        return False, "; ".join(diffs)
    cams = f", {len(recorded_cameras(ctx))} camera descriptions (K, sizes) as drawn" if recorded_cameras(ctx) else ""
    return True, f"MuJoCo {mujoco.__version__}, model {sim_block(ctx)['model_sha256'][:12]} as recorded{cams}"


#: A declared K may differ from the model's by this much (px): the writers round K to 12 decimals.
K_TOLERANCE_PX = 1e-9


def camera_description_problems(ctx: Context, m, only_K: bool = False) -> list[str]:
    """What differs between the camera descriptions of metadata.yaml (``simulation.cameras.<c>``: K,
    width, height; ``equipment.perceptions.cameras.<c>``: width, height) and the cameras model ``m``
    draws at the scene's image size (``simulation.scene.width``/``height``, the size the renderer was
    made with, which ``sim_schema`` and ``sim_render`` hold the stored frames to): K from the model's
    ``cam_fovy`` (:func:`openarm_sim_dataset.sim.render.intrinsics`), within :data:`K_TOLERANCE_PX`.
    ``only_K``: K alone (an episode's own model; the sizes are the dataset's)."""
    import numpy as np

    sim = sim_block(ctx)
    cams = sim.get("cameras") or {}
    if not cams:
        return []
    w, h = int(sim["scene"]["width"]), int(sim["scene"]["height"])
    declared = ctx.ds.meta.equipment.perceptions.cameras
    out = []
    for c, d in cams.items():
        want = intrinsics(m, c, w, h)
        K = np.asarray(d["K"], dtype=np.float64)
        if K.shape != (3, 3) or not np.all(np.abs(K - want) <= K_TOLERANCE_PX):
            out.append(f"simulation.cameras.{c}.K {K.tolist()} is not the model's "
                       f"{np.round(want, 6).tolist()} (cam_fovy at {w}x{h})")
        if only_K:
            continue
        if (d.get("width"), d.get("height")) != (w, h):
            out.append(f"simulation.cameras.{c} says {d.get('width')}x{d.get('height')}, the scene draws {w}x{h}")
        eq = declared[c] if c in declared else None
        if not isinstance(eq, dict) or (eq.get("width"), eq.get("height")) != (w, h):
            got = f"{eq.get('width')}x{eq.get('height')}" if isinstance(eq, dict) else "nothing"
            out.append(f"equipment.perceptions.cameras.{c} says {got}, the scene draws {w}x{h}")
    return out


def _provenance_episode(ctx: Context, ep: str, prep: tuple[bool, str]) -> tuple[bool, str | None] | None:
    """``(randomised, what differs or None)`` of episode ``ep``: the variation and model hash in its
    metadata entry and in its sidecar agree, the variation is the one its seed draws under the dataset's
    ``randomization`` mode, and the model rebuilt from it hashes as recorded. None when the dataset's
    model already fails (the row says so)."""
    if not prep[0]:
        return None
    entry = ctx.ds.episode(ep)
    side = ctx.sidecar(ep)
    # a merge with --allow-mixed-provenance keeps each input's scalar simulation keys in the entry
    prov = entry["provenance"] if isinstance(entry.get("provenance"), dict) else sim_block(ctx)
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

        try:
            seed = int(variant["seed"])
            drawn = visual_variant(seed, int(variant["index"]), int(variant["variant"]), variation,
                                   scene_config(ctx))
        except (KeyError, TypeError, ValueError):
            return True, f"episode {ep}: render_source {variant!r} is not a visual variant's seed, index and number"
    else:
        # the episode's own seed (a merge of two seeds' runs keeps the first input's simulation.seed)
        seed = int(entry["seed_inputs"].get("seed", prov["seed"]))
        drawn = draw_variation(seed, int(entry["seed_inputs"]["index"]), mode, scene_config(ctx))
    if (d := _first_difference(variation.to_dict(), drawn.to_dict() if drawn else None)) is not None:
        what.append(f"variation is not the one seed {seed} draws under randomization {mode!r} (at {d})")
    try:
        m = episode_model(ctx, ep)
    except DatasetError as e:
        what.append(f"model rebuilt from its variation: {e.message}")
    else:  # the K a user projects this episode with is the K of the model it was drawn on
        what += [f"camera of its model: {p}" for p in camera_description_problems(ctx, m, only_K=True)]
    return True, (f"episode {ep}: " + "; ".join(what) if what else None)


def _provenance_reduce(ctx: Context, prep: tuple[bool, str], parts: dict) -> Outcome:
    """The dataset's model and every episode's model are the ones recorded. The model rebuilt from the
    stored scene has the recorded `model_sha256`, simulator, MuJoCo version and timestep, and the camera
    descriptions of metadata.yaml (K and sizes in `simulation.cameras`, sizes in
    `equipment.perceptions.cameras`) are those of the cameras the images were drawn with. Each randomised
    episode's variation is recorded alike in its metadata entry and its sidecar, is the one its seed
    draws under the dataset's `randomization` mode, and rebuilds a model with the episode's recorded
    `model_sha256` and the declared K.

    K must equal, within 1e-9 px, the K the model's field of view gives at the scene's image size. When
    the model hash differs the detail names the asset files that changed. A visual variant of
    `dataset-render` is held to its own draw. In a randomised dataset an episode without a recorded
    variation fails. If the dataset's model cannot be rebuilt as recorded, or its camera descriptions
    differ, every episode fails."""
    ok, detail = prep
    if not ok:
        return Outcome(False, detail, list(ctx.episodes))
    cams = camera_description_problems(ctx, built_model(ctx).model)
    if cams:  # every episode is projected with these descriptions
        return Outcome(False, "camera descriptions in metadata.yaml are not the cameras the images were drawn "
                       f"with: {'; '.join(cams[:3])}" + (f" (and {len(cams) - 3} more)" if len(cams) > 3 else ""),
                       list(ctx.episodes))
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
    # the dataset's model rebuilt and compared, then each episode's (randomised ones rebuilt from their variation)
    return Outcome(not bad, detail, bad, judged={"models": 1 + varied, "episodes": len(parts)})


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
