"""Pick a cube named by colour and put it in the tray.

Two registrations of one controller (:class:`PickPlace`, one lane):

* ``pick_place`` -- the default task, the one every dataset generated before the task library holds:
  the right arm puts the red cube in the tray; all three cubes start in the right arm's cube area.
  Its draws are :func:`openarm_sim_dataset.sim.randomize.episode_params` unchanged, so a generation
  without ``--tasks`` reproduces those datasets file for file.
* ``tray_green`` / ``tray_blue`` -- the named cube starts in either arm's cube area (the side drawn
  from the task stream, 1/2 each) and the arm on that side puts it in the tray; the other cubes
  start on either side (drawn from the pose stream). The acting arm starts at its ready pose over
  its own area, the other one idles beside the body.

Reachable band (``tools/sim_reach.py --side right|left --n 11``: every IK knot of approach, descent,
lift, carry to the tray and lowering, 1 mm / 0.01 rad, fingers straight down, over an 11 x 11 grid of
the arm's 20 x 20 cm cube area x 3 cube yaws):

* right arm, area centred at (0.13, -0.23) m: 363/363 plans;
* left arm, the mirror image, area centred at (0.13, +0.23) m: 363/363 plans.

Both areas span 0.03-0.23 m in front of the shoulders (x) and 0.0-0.2 m outboard of the shoulder
(|y| 0.13-0.33 m; shoulders at y = -/+0.1535 m, 0.49 m above the table); the tray (0.18, 0.01) lies
between them and both arms reach it.

Success rule (final state, after the arm has retreated): the cube's centre lies inside the tray's
inner footprint and less than 6 cm above the table. Failure categories: ``ik_failed`` (no plan),
``grasp_missed`` (retry mode, second grasp check failed), ``never_picked`` (the cube never rose),
``dropped_lifting`` / ``dropped_carrying`` (not held at the end of the lift / carry),
``missed_tray`` (carried but not in the tray). Lucky success (``knocked_over``): in the tray but on
another face than it started on.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..scene import CUBE_NAMES, SceneConfig, cube_half_size
from .base import Task, draw_cubes, draw_pose, set_arms, set_cubes
from .pick_place_draws import episode_params
from .planner import GRASP_DEPTH, LEFT_HOME, EpisodeParams, Lane, PlaceTarget, ScriptedController, ready_qpos

__all__ = ["PickPlace", "PickPlaceTask", "TrayTask", "LEGACY_PROMPT", "LEGACY_DESCRIPTION"]

#: Prompt and description of the default task (unchanged since the first generator).
LEGACY_PROMPT = "Put the red cube in the tray."
LEGACY_DESCRIPTION = "Scripted top-down pick-and-place of the red 40 mm cube into the tray with the right arm."


class PickPlace(ScriptedController):
    """Pick-and-place of one cube into the tray with one arm (see module docstring).

    ``params.task`` selects the cube (``pick_place``: red; ``tray_<colour>``); ``params.side`` the arm.
    """

    def make_lanes(self) -> list[Lane]:
        name = self.params.task
        colour = "red" if name == "pick_place" else name.split("_", 1)[1]
        self.cube = f"cube_{colour}"
        side = self.params.side
        half = cube_half_size(self.model, self.cube)  # episodes may vary the size: read, never assumed
        zc = self.table_z + half
        tray_xy = self.tray_xy

        def place(lane: Lane, est) -> PlaceTarget:
            # the ee height at release: cube resting on the tray floor (4 mm) plus 8 mm of drop
            z = self.table_z + 0.004 + 0.008 + half + GRASP_DEPTH
            return PlaceTarget((float(tray_xy[0]), float(tray_xy[1])), z)

        return [Lane(self, side, self.cube, zc, place)]

    @property
    def lane(self) -> Lane:
        return self.lanes[0]

    @property
    def grasp_yaw(self) -> float:
        return self.lane.grasp_yaw

    def grasp_ok(self, data: mujoco.MjData) -> bool:
        return self.lane.grasp_ok(data)

    def cube_held(self, data: mujoco.MjData) -> bool:
        return self.lane.object_held(data)

    def judge(self, data: mujoco.MjData) -> tuple[str, bool]:
        lane = self.lane
        if lane.outcome is not None:
            return lane.outcome, False
        if self.goal_reached(data):
            return "success", self.turned(data, lane)
        return lane.failure(), False

    def goal_reached(self, data: mujoco.MjData) -> bool:
        return self.in_tray(data, self.cube)


class PickPlaceTask(Task):
    """The default task: right arm, red cube, every cube in the right arm's area."""

    name = "pick_place"
    prompt = LEGACY_PROMPT
    description = LEGACY_DESCRIPTION
    arms = "right"
    count_arm_contacts = False  # the default keeps the episode entry of the single-task generator

    def params(self, seed: int, index: int, sigma: float, retry: bool, cfg: SceneConfig,
               task_rng: np.random.Generator | None = None) -> EpisodeParams:
        return episode_params(seed, index, sigma=sigma, retry=retry, cfg=cfg)

    def initial_state(self, model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams) -> None:
        mujoco.mj_resetData(model, data)
        set_arms(model, data, {"right": ready_qpos(model), "left": LEFT_HOME})
        set_cubes(model, data, params.cube_poses)
        mujoco.mj_forward(model, data)

    def controller(self, model: mujoco.MjModel, params: EpisodeParams) -> ScriptedController:
        return PickPlace(model, params)


class TrayTask(Task):
    """Put the ``colour`` cube in the tray with the arm on its side (either side)."""

    arms = "either"

    def __init__(self, colour: str) -> None:
        self.colour = colour
        self.name = f"tray_{colour}"
        self.prompt = f"Put the {colour} cube in the tray."
        self.description = (f"The {colour} 40 mm cube starts on the left or the right of the table; the arm on its "
                            f"side picks it top-down and puts it in the tray. Success: the {colour} cube rests "
                            f"inside the tray at the end.")

    def params(self, seed: int, index: int, sigma: float, retry: bool, cfg: SceneConfig,
               task_rng: np.random.Generator | None = None) -> EpisodeParams:
        side = self.draw_side(task_rng)
        rng = np.random.default_rng([seed, index])
        target = draw_pose(rng, cfg, side)
        draws, ik_seed = self.base_draws(rng)
        k = CUBE_NAMES.index(f"cube_{self.colour}")
        others = [c for c in range(3) if c != k]
        other_sides = ["right" if rng.random() < 0.5 else "left" for _ in others]
        placed = draw_cubes(rng, cfg, other_sides, [target], grasped=1)
        poses: list = [None, None, None]
        poses[k] = placed[0]
        for c, p in zip(others, placed[1:]):
            poses[c] = p
        return EpisodeParams(cube_poses=tuple(poses), perception_draws=draws, sigma=float(sigma), retry=bool(retry),
                             ik_seed=ik_seed, task=self.name, side=side,
                             meta=self.meta(seed, index, sigma, retry, task=self.name, side=side))

    def initial_state(self, model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams) -> None:
        mujoco.mj_resetData(model, data)
        set_arms(model, data, self.start_arms(model, [params.side]))
        set_cubes(model, data, params.cube_poses)
        mujoco.mj_forward(model, data)

    def controller(self, model: mujoco.MjModel, params: EpisodeParams) -> ScriptedController:
        return PickPlace(model, params, count_arm_contacts=self.count_arm_contacts)
