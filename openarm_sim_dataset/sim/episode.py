"""Episode ``i`` of a generation config, recorded: its task and parameters, its scene variation, on its
model. What a local worker, a Ray task and ``--regenerate`` all run, so each gives the same bytes."""

from __future__ import annotations

import mujoco

from .config import GenerateConfig, params_for
from .episode_recorder import RecordedEpisode, record_episode
from .models import episode_model
from .render import SimRenderer
from .scene import SceneConfig
from .variation import draw_variation


def make_renderer(model: mujoco.MjModel, scene: SceneConfig) -> SimRenderer | None:
    """The renderer of ``scene``'s cameras, or None for a physics-only scene (no camera: no GL context
    is made at all)."""
    return SimRenderer(model, scene) if scene.cameras else None


def record_index(cfg: GenerateConfig, index: int, model, renderer: SimRenderer | None,
                 clock_index: int | None = None) -> RecordedEpisode:
    """Record episode ``index`` of ``cfg``: its task and parameters (:func:`params_for`), its scene
    variation (if ``cfg.randomize``) from its own stream, on the model built with that variation
    (``model``, the nominal one, otherwise). What generation and ``--regenerate`` both run.
    ``clock_index``: the episode's index on the dataset clock (its stamps), default ``index`` (a rollout
    of several tasks: its episode id)."""
    params, _ = params_for(cfg, index)
    clock = index if clock_index is None else int(clock_index)
    variation = draw_variation(cfg.seed, index, cfg.randomize, cfg.scene)
    if variation is None:
        return record_episode(model, renderer, params, clock, cfg.record, cfg.max_time)
    built = episode_model(cfg.scene, variation)
    return record_episode(built.model, renderer, params, clock, cfg.record, cfg.max_time, variation, built.sha256)
