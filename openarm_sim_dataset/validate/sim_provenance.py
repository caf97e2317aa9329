"""``sim_provenance``: the dataset's model and every episode's model rebuilt as recorded (versions,
assets, hash; a randomised episode's variation is the one its seed draws, in metadata and sidecar alike).
"""

from __future__ import annotations

from .. import sidecar
from ..errors import DatasetError
from ..gl import import_mujoco
from .core import Context, EpisodeCheck, Outcome
from .sim_model import _sim, built_model, episode_model, episode_variation, scene_config


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
