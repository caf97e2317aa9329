"""The task library: scripted tasks on the bimanual OpenArm scene, registered by name.

=================  =======  ===============================================================
name               arms     prompt
=================  =======  ===============================================================
pick_place         right    Put the red cube in the tray.  (the default; every older dataset)
tray_green         either   Put the green cube in the tray.
tray_blue          either   Put the blue cube in the tray.
stack_red_on_blue  either   Stack the red cube on the blue cube.
bimanual_tray      both     Put the red cube and the green cube in the tray.
unload_blue        either   Take the blue cube out of the tray and put it on the table.
=================  =======  ===============================================================

Each task is a module (:mod:`.pick_place`, :mod:`.stack`, :mod:`.bimanual`, :mod:`.unload`) built on
the shared controller machinery of :mod:`.planner`; none adds a body to the scene, so every task
runs on the same compiled model (one model hash).

Which task episode ``index`` of seed ``seed`` runs (:func:`choose_task`): one uniform draw ``u`` of
``numpy.random.default_rng([seed, index, TASK_STREAM])`` against the cumulative normalised weights of
the chosen tasks; the task's own discrete draws (e.g. which arm) continue from that generator. The
pose stream ``default_rng([seed, index])`` is untouched by it: shards of a mixed run merge into the
files of one run, and a run without ``--tasks`` is the default task alone, file for file as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mujoco
import numpy as np

from ..scene import SceneConfig, cube_qpos_adr
from .base import TASK_STREAM, Task
from .bimanual import BimanualTrayTask
from .pick_place import PickPlace, PickPlaceTask, TrayTask
from .planner import EpisodeParams, EpisodeResult, ScriptedController, up_vector
from .stack import StackTask
from .unload import UnloadTask

__all__ = ["TASKS", "DEFAULT_TASK", "PickPlace", "TASK_STREAM", "Task", "register", "get_task", "task_names",
           "resolve_tasks", "choose_task", "episode_params_for", "set_initial_state", "make_controller", "run_episode",
           "rejudge"]

#: Registry: name -> task, in listing order.
TASKS: dict[str, Task] = {}
#: The task of a generation without ``--tasks``.
DEFAULT_TASK = "pick_place"


def register(task: Task) -> Task:
    """Add ``task`` to :data:`TASKS` (names and prompts must be unique)."""
    if task.name in TASKS:
        raise ValueError(f"task {task.name!r} registered twice")
    if any(t.prompt == task.prompt for t in TASKS.values()):
        raise ValueError(f"task {task.name!r}: prompt {task.prompt!r} already used")
    TASKS[task.name] = task
    return task


for _t in (PickPlaceTask(), TrayTask("green"), TrayTask("blue"), StackTask("red", "blue"), BimanualTrayTask(),
           UnloadTask("blue")):
    register(_t)


def task_names() -> list[str]:
    return list(TASKS)


def get_task(name: str) -> Task:
    """The registered task ``name`` (KeyError naming the known ones otherwise)."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r} (known: {', '.join(TASKS)})") from None


def resolve_tasks(names: Sequence[str], weights: Sequence[float] = ()) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Check and normalise a task selection: ``["all"]`` expands to every task; weights default to
    equal, must be as many as the tasks, finite and >= 0 with a positive sum. Raises ValueError."""
    names = list(names)
    if names == ["all"]:
        names = task_names()
    if not names:
        raise ValueError("no task given")
    for n in names:
        if n not in TASKS:
            raise ValueError(f"unknown task {n!r} (known: {', '.join(TASKS)}, or all)")
    if len(set(names)) != len(names):
        raise ValueError(f"a task is named twice: {' '.join(names)}")
    w = [1.0] * len(names) if not weights else [float(v) for v in weights]
    if len(w) != len(names):
        raise ValueError(f"{len(w)} task weight(s) for {len(names)} task(s)")
    if not all(np.isfinite(v) and v >= 0 for v in w) or sum(w) <= 0:
        raise ValueError("task weights must be finite, >= 0 and not all 0")
    return tuple(names), tuple(w)


def choose_task(seed: int, index: int, names: Sequence[str], weights: Sequence[float] = ()
                ) -> tuple[int, np.random.Generator]:
    """Index into ``names`` of episode ``index``'s task and the task stream after that draw."""
    rng = np.random.default_rng([int(seed), int(index), TASK_STREAM])
    u = rng.random()
    w = np.asarray(weights if len(weights) else [1.0] * len(names), float)
    cum = np.cumsum(w / w.sum())
    k = int(np.searchsorted(cum, u, side="right"))
    return min(k, len(names) - 1), rng


def episode_params_for(seed: int, index: int, tasks: Sequence[str] = (), weights: Sequence[float] = (),
                       sigma: float = 0.0, retry: bool = False, cfg: SceneConfig = SceneConfig()
                       ) -> tuple[EpisodeParams, int]:
    """``(params, task_index)`` of episode ``index``: with no ``tasks``, the default task (task index 0)
    drawn exactly as before the task library; otherwise the task chosen by :func:`choose_task`."""
    if not tasks:
        return TASKS[DEFAULT_TASK].params(seed, index, sigma, retry, cfg), 0
    k, rng = choose_task(seed, index, tasks, weights)
    return get_task(tasks[k]).params(seed, index, sigma, retry, cfg, rng), k


def set_initial_state(model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams,
                      cfg: SceneConfig | None = None) -> None:
    """Reset ``data`` and set the initial state of ``params``'s task (arms, cubes), then ``mj_forward``."""
    get_task(params.task).initial_state(model, data, params)


def make_controller(model: mujoco.MjModel, params: EpisodeParams) -> ScriptedController:
    """The controller of ``params``'s task (call ``reset(data)`` on the initial state first)."""
    return get_task(params.task).controller(model, params)


def run_episode(
    model: mujoco.MjModel,
    params: EpisodeParams,
    on_step: Callable[[mujoco.MjData, int, np.ndarray], None] | None = None,
    max_time: float = 12.0,
    data: mujoco.MjData | None = None,
) -> EpisodeResult:
    """Run one episode of ``params.task`` to completion (or ``max_time`` s of simulated time).

    ``on_step(data, step_index, ctrl)`` is called after the controller computed
    ``ctrl`` and before ``mj_step`` (so ``data`` is the state the control is
    applied to; ``data.ctrl`` already equals ``ctrl``); ``step_index`` counts from 0
    and ``data.time == step_index * timestep``.  It is also called once more after
    the final step with ``ctrl`` = the last control (step_index = number of steps).
    """
    data = mujoco.MjData(model) if data is None else data
    set_initial_state(model, data, params)
    state = np.zeros(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    ctl = make_controller(model, params)
    ctl.reset(data)
    max_steps = int(round(max_time / model.opt.timestep))
    step = 0
    ctrl = data.ctrl.copy()
    while not ctl.done and step < max_steps:
        ctrl = ctl.command(data)
        data.ctrl[:] = ctrl
        if on_step is not None:
            on_step(data, step, ctrl)
        mujoco.mj_step(model, data)
        step += 1
    if on_step is not None:
        on_step(data, step, ctrl)
    outcome = ctl.outcome if ctl.outcome is not None else "timeout"
    a = ctl.lanes[0].qadr
    return EpisodeResult(
        outcome=outcome,
        knocked_over=bool(ctl.knocked_over),
        success=outcome == "success",
        attempts=ctl.attempts,
        steps=step,
        sim_time=float(data.time),
        cube_final=data.qpos[a:a + 7].copy(),
        initial_state=state,
        final_qpos=data.qpos.copy(),
        final_qvel=data.qvel.copy(),
        estimates=list(ctl.estimates),
        phase_log=list(ctl.phase_log),
        arm_contacts=int(ctl.arm_contacts),
        judge_facts=ctl.judge_facts(),
    )


def rejudge(model: mujoco.MjModel, params: EpisodeParams, initial_state: np.ndarray, judged_state: np.ndarray,
            facts: dict, controller: ScriptedController | None = None) -> tuple[str, bool]:
    """``(outcome, knocked_over)`` of an episode judged again by its own task's rule: the task's
    controller (:func:`make_controller`, never a copy of its rule) put back in its judging position
    (:meth:`~.planner.ScriptedController.restore`: lanes reset on ``initial_state``, their history from
    ``facts``) judges ``judged_state`` (mjSTATE_INTEGRATION vectors). ``facts["step"] is None``: the
    controller never finished, the outcome is ``"timeout"`` as :func:`run_episode` records it.
    ``controller``: a fresh :func:`make_controller` of ``params`` to use (e.g. to read its lanes after).
    Raises ValueError when ``facts`` do not fit the task."""
    if facts.get("step") is None:
        return "timeout", False
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    ctl = make_controller(model, params) if controller is None else controller
    initial, final = mujoco.MjData(model), mujoco.MjData(model)
    for d, state in ((initial, initial_state), (final, judged_state)):
        mujoco.mj_setState(model, d, np.asarray(state, np.float64), spec)
        mujoco.mj_forward(model, d)
    ctl.restore(initial, facts)
    outcome, knocked = ctl.judge(final)
    return str(outcome), bool(knocked)


def object_up_vectors(model: mujoco.MjModel, rule: ScriptedController, data: mujoco.MjData) -> dict[str, np.ndarray]:
    """Up axis (world) of each of ``rule``'s task objects in ``data``: taken at the initial state, what
    :func:`rollout_outcome` tells a turned (knocked over) object by."""
    return {o: up_vector(data.qpos[cube_qpos_adr(model, o)[0] + 3:][:4]) for o in rule.objects}


def rollout_outcome(rule: ScriptedController, data: mujoco.MjData, start_up: dict[str, np.ndarray],
                    success_any: bool, success: bool | None = None) -> tuple[str, bool]:
    """``(outcome, knocked_over)`` of a policy's episode (no scripted lanes to judge) in ``data``, the
    state after its last physics step: ``success`` when the task's state-only rule
    (:meth:`ScriptedController.success`) holds, else ``undone`` if it held at some step boundary
    (``success_any``), else ``not_done``; ``knocked_over`` (a lucky success) when a task object rests on
    another face than in ``start_up``. The environment labels rollouts with it and the validator's
    ``sim_labels`` judges them again with it: one rule, no copy."""
    success = rule.success(data) if success is None else success
    outcome = "success" if success else ("undone" if success_any else "not_done")
    return outcome, bool(success and objects_turned(rule, data, start_up))


def objects_turned(rule: ScriptedController, data: mujoco.MjData, start_up: dict[str, np.ndarray]) -> bool:
    """A task object of ``rule`` rests in ``data`` on another face than its up axis in ``start_up``."""
    return any(rule.turned(data, o, up) for o, up in start_up.items())
