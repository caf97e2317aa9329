"""What defines a generated dataset besides its episode range (:class:`GenerateConfig`), and the rules that
turn it into episode ``i``'s task and parameters (the seed rule, the task rule)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from openarm_sim_dataset.core.errors import DatasetError

from .episode_recorder import RecordConfig
from .scene import SceneConfig
from .tasks import episode_params_for, get_task

SEED_RULE = "episode i draws only from numpy.random.default_rng([seed, i])"


class GenerateError(DatasetError):
    """Generation refused: contradicting arguments, or another writer holds the output."""


@dataclass(frozen=True)
class GenerateConfig:
    """Everything that defines a generated dataset besides the episode range."""

    seed: int = 0
    sigma: float = 0.0
    retry: bool = False
    scene: SceneConfig = field(default_factory=SceneConfig)
    record: RecordConfig = field(default_factory=RecordConfig)
    camera_format: str = "dir"
    max_time: float = 12.0
    #: task names (registry of :mod:`.tasks`); empty: the default task alone, exactly as before tasks existed
    tasks: tuple[str, ...] = ()
    #: relative weights of ``tasks`` (empty: equal)
    task_weights: tuple[float, ...] = ()
    #: scene randomisation (:mod:`~openarm_sim_dataset.sim.variation`): none, visual, physics or all
    randomize: str = "none"


TASK_RULE = ("the task of episode i: one uniform draw of numpy.random.default_rng([seed, i, stream]) against the "
             "cumulative normalised weights; the task's own discrete draws (which arm) continue from it; object "
             "poses still draw only from numpy.random.default_rng([seed, i])")


def params_for(cfg: GenerateConfig, index: int):
    """``(EpisodeParams, task_index)`` of episode ``index`` under ``cfg`` (its task, poses and draws)."""
    return episode_params_for(cfg.seed, index, cfg.tasks, cfg.task_weights, sigma=cfg.sigma, retry=cfg.retry,
                              cfg=cfg.scene)


def config_for_task(task: str, config: GenerateConfig | None = None) -> GenerateConfig:
    """The generation config whose episode ``i`` the environment of ``task`` starts from: ``config``
    (default: the generator's defaults) with ``tasks=(task,)``; the default task alone keeps
    ``tasks=()`` (its episodes draw identically either way, and its datasets record no task list)."""
    get_task(task)  # KeyError naming the known tasks
    cfg = config or GenerateConfig()
    if cfg.tasks and tuple(cfg.tasks) != (task,):
        raise ValueError(f"config has tasks {list(cfg.tasks)}; the environment of {task!r} runs that task alone")
    return cfg if task == "pick_place" and not cfg.tasks else dataclasses.replace(cfg, tasks=(task,))


def config_from_simulation(sim: dict, scene: SceneConfig) -> GenerateConfig:
    """The GenerateConfig a dataset's ``simulation:`` block records (to regenerate its episodes)."""
    tasks = sim.get("tasks") or {}
    return GenerateConfig(seed=int(sim["seed"]), sigma=float(sim["sigma_m"]), retry=bool(sim["retry"]), scene=scene,
                          record=RecordConfig(float(sim["state_hz"]), float(sim["camera_hz"]), int(sim["jpeg_quality"])),
                          max_time=float(sim["max_time_s"]), tasks=tuple(tasks.get("names") or ()),
                          task_weights=tuple(float(w) for w in tasks.get("weights") or ()),
                          randomize=str(sim.get("randomization", "none")))
