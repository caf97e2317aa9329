"""The shared preamble of the simulation checks: the model an episode ran on, the renderer, projection.

Every check that simulates, renders or measures runs on the model the episode ran on: the nominal
scene's, or for a randomised episode the scene rebuilt with its recorded variation
(:func:`episode_model`; its hash must be the episode's recorded ``model_sha256``). K is the one
metadata.yaml declares (``simulation.cameras.<c>.K``, which ``sim_provenance`` holds to every episode
model's field of view); camera poses come from the sidecar (per frame: a randomised episode's moved head
camera, which ``sim_sidecar_agrees`` holds to the kinematics of the stored state on the episode's model). An episode check starts with :func:`sidecar_and_model` (sidecar, else nothing
to check; model rebuilt as recorded, else a :class:`ModelProblem`).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.sim.config import config_for_task, config_from_simulation, params_for
from openarm_sim_dataset.sim.models import cached_model, load_model
from openarm_sim_dataset.sim.render import SimRenderer
from openarm_sim_dataset.sim.scene import SceneConfig
from openarm_sim_dataset.sim.variation import Variation

from .check import Context, Outcome

#: Half the space diagonal of a 40 mm cube (m): no cube surface is nearer than centre depth minus this.
#: (A randomised episode's cube: its own model's size, see :func:`_wrist_episode`.)
CUBE_HALF_DIAGONAL = 0.02 * 3**0.5

# ----------------------------------------------------------------------------- model access
def scene_config(ctx: Context):
    """The SceneConfig stored in metadata (lists turned back into tuples)."""
    stored = dict(ctx.ds.meta.simulation.get("scene") or {})
    names = {f.name for f in dataclasses.fields(SceneConfig)}
    unknown = sorted(set(stored) - names)
    if unknown:
        raise ValueError(f"scene keys unknown to this version: {', '.join(unknown)}")
    return SceneConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})


def built_model(ctx: Context):
    """The model compiled from the stored scene configuration, with its hash (per-process cache; shared:
    never modify it). Used to diagnose provenance, whatever the hash."""
    return cached_model(scene_config(ctx))


def model(ctx: Context):
    """A copy of the model rebuilt from the stored scene configuration (compiled once per process),
    refused (:class:`~openarm_sim_dataset.sim.models.ModelMismatchError`) unless its hash is the
    recorded ``model_sha256``: no check replays or projects on a model other than the recorded one."""
    if "model" not in ctx.cache:
        ctx.cache["model"] = load_model(scene_config(ctx), sim_block(ctx).get("model_sha256"),
                                        ctx.ds.root / layout.METADATA_FILE)
    return ctx.cache["model"]


#: One SimRenderer per process (a GL context costs 0.2-0.9 s): ``{"entry": (key, renderer)}``, the key
#: being the stored scene configuration and model hash; a dataset with another scene replaces it.
_RENDERER: dict = {}


def episode_variation(ctx: Context, ep: str):
    """The :class:`~openarm_sim_dataset.sim.variation.Variation` recorded in episode ``ep``'s metadata
    entry, or None (nominal scene). A malformed one raises :class:`DatasetError` naming the file."""
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


def sidecar_and_model(ctx: Context, ep: str):
    """``(sidecar, episode model)`` of ``ep`` for an episode check: None without a usable sidecar (nothing
    to check), or a :class:`ModelProblem` saying why its model cannot be rebuilt as recorded."""
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return None
    try:
        return side, episode_model(ctx, ep)
    except DatasetError as e:
        return ModelProblem(str(e))


def split_model_problems(parts: dict) -> tuple[dict, list[str], list[str]]:
    """``(parts without ModelProblem markers, their episodes, their texts)``, in episode order."""
    problems = {ep: p.text for ep, p in parts.items() if isinstance(p, ModelProblem)}
    return {ep: p for ep, p in parts.items() if ep not in problems}, list(problems), list(problems.values())


def listed(ep: str, what: list[str], most: int = 3) -> str:
    """``episode <ep>: a; b; c (and n more)``: what differs in one episode, the first ``most`` of it."""
    return f"episode {ep}: " + "; ".join(what[:most]) + (f" (and {len(what) - most} more)" if len(what) > most else "")


def episode_K(ctx: Context, ep: str, cam: str, m) -> np.ndarray:
    """K of ``cam`` for episode ``ep``: the one metadata.yaml declares (``simulation.cameras.<cam>.K``),
    the K a user projects with, for a randomised episode too (its variation moves the head camera, not
    its field of view). ``sim_provenance`` holds it to the K of the episode's own model; the geometric
    checks measure the stored pixels with it, so a wrong K fails them where it shows."""
    return _K(ctx, cam)


def renderer(ctx: Context):
    """The process's SimRenderer for the stored scene (created on first use, then reused; its own
    ``.model`` is the model it renders)."""
    cfg = scene_config(ctx)
    key = (repr(cfg), sim_block(ctx).get("model_sha256"), os.environ.get("MUJOCO_GL"))
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
    return r.gl_renderer == sim_block(ctx).get("gl_renderer")


def sim_block(ctx: Context) -> dict:
    """The dataset's ``simulation:`` block (untrusted input: a check reading it may meet any shape)."""
    return ctx.ds.meta.simulation


def recorded_cameras(ctx: Context) -> list[str]:
    """The cameras the simulation block declares (none in a physics-only dataset)."""
    return list((sim_block(ctx).get("cameras") or {}).keys())


def camera_episodes(ctx: Context) -> list[str]:
    """The episodes a check of drawn pixels looks at: every one, or none in a physics-only dataset
    (``dataset-generate --cameras none``: nothing was drawn, so there is nothing to check)."""
    return list(ctx.episodes) if recorded_cameras(ctx) else []


#: The row of a check of drawn pixels on a physics-only dataset: not applicable, never a failure.
def physics_only(ctx: Context):
    return Outcome(True, "physics-only dataset (no cameras recorded): nothing drawn to check", skipped=True,
                   applicable=False)


def _K(ctx: Context, cam: str) -> np.ndarray:
    return np.asarray(sim_block(ctx)["cameras"][cam]["K"], dtype=np.float64)


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


def episode_config(ctx: Context, ep: str):
    """The GenerateConfig episode ``ep`` was drawn with: its own provenance after a mixed merge, and the
    seed of its own ``seed_inputs`` (a merge of two seeds' runs keeps the first's simulation block)."""
    entry = ctx.ds.episode(ep)
    prov = entry["provenance"] if isinstance(entry.get("provenance"), dict) else {}
    cfg = config_from_simulation({**sim_block(ctx), **prov}, scene_config(ctx))
    cfg = dataclasses.replace(cfg, seed=int(entry["seed_inputs"]["seed"]))
    if ctx.ds.meta.operation_type == "rollout":  # dataset-evaluate runs each task's environment on its own

        cfg = config_for_task(str(entry.get("task", "pick_place")), dataclasses.replace(cfg, tasks=(), task_weights=()))
    return cfg


def drawn_params(ctx: Context, ep: str):
    """``(params, task_index, cfg)`` that the dataset's seed draws for episode ``ep``'s recorded index."""
    cfg = episode_config(ctx, ep)
    index = int(ctx.ds.episode(ep)["seed_inputs"]["index"])
    params, task_index = params_for(cfg, index)
    if ctx.ds.meta.operation_type == "rollout":  # indexes the rollout dataset's own task list
        names = list((sim_block(ctx).get("tasks") or {}).get("names") or [params.task])
        task_index = names.index(params.task) if params.task in names else -1
    return params, task_index, cfg
