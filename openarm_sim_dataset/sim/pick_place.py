"""Compatibility re-export: the single-task pick-and-place API, now in :mod:`openarm_sim_dataset.sim.tasks`.

Scripted pick-and-place of the red cube into the tray with the right arm (the default task). This module
is kept as the stable import path of the single-task API; the controller now lives in the task library
(:mod:`openarm_sim_dataset.sim.tasks`: the shared machinery in :mod:`~.tasks.planner`, this task in
:mod:`~.tasks.pick_place`) and reproduces that controller's episodes bit for bit. A recorder drives
any task's controller the same way::

    model = build_model(cfg)
    data = mujoco.MjData(model)
    set_initial_state(model, data, params)      # the task of params.task
    ctl = make_controller(model, params)        # PickPlace for the default task
    ctl.reset(data)
    while not ctl.done:
        data.ctrl[:] = ctl.command(data)        # full nu-vector for this physics step
        mujoco.mj_step(model, data)
    ctl.outcome, ctl.knocked_over

:func:`run_episode` does exactly this (with a time bound and an ``on_step`` hook).
"""

from __future__ import annotations

from .tasks import make_controller, run_episode, set_initial_state
from .tasks.pick_place import PickPlace
from .tasks.planner import (
    APPROACH_HEIGHT,
    GRASP_DEPTH,
    GRIPPER_CLOSED,
    GRIPPER_OPEN,
    LEFT_HOME,
    OUTCOMES,
    PLACE_YAW_OFFSETS,
    YAW_NOISE_PER_M,
    YAW_OFFSETS as _YAW_OFFSETS,
    EpisodeParams,
    EpisodeResult,
    ready_qpos,
    topdown_quat,
    wrap_yaw_90,
)

#: Gripper yaw offsets of the right arm (rad), tried in order (see :data:`.tasks.planner.YAW_OFFSETS`).
YAW_OFFSETS = _YAW_OFFSETS["right"]

__all__ = [
    "OUTCOMES", "GRASP_DEPTH", "APPROACH_HEIGHT", "YAW_NOISE_PER_M", "GRIPPER_OPEN", "GRIPPER_CLOSED", "LEFT_HOME",
    "PLACE_YAW_OFFSETS", "YAW_OFFSETS", "EpisodeParams", "EpisodeResult", "PickPlace", "topdown_quat", "wrap_yaw_90",
    "ready_qpos", "set_initial_state", "make_controller", "run_episode",
]
