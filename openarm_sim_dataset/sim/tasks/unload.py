"""Take a cube out of the tray and put it on the table (``unload_blue``): the reverse of ``tray_*``.

The blue cube starts in the tray (centre within 1 cm of the tray's, any yaw); which arm takes it is
drawn from the task stream (1/2 each). That arm picks it top-down from the tray floor and puts it
down at a goal point drawn in its own cube area (uniform, at least 11 cm from the other cubes, which
start on either side). Training on it teaches the motion out of a container, which the tray tasks
never show.

Success rule (final state): the blue cube rests on the table top (centre within 5 mm of the table
top + 20 mm) outside the tray's outer footprint (clear of the walls by the cube's half diagonal).
Failure categories: those of the pick (``ik_failed``, ``grasp_missed``, ``never_picked``,
``dropped_lifting``, ``dropped_carrying``) and ``missed_target`` (lifted but not resting on the table
clear of the tray, e.g. back in the tray or off the table). Lucky success (``knocked_over``): on the
table but on another face than it started on.

Measured (``tools/sim_success_rate.py --tasks unload_blue``, seed 10, 100 episodes, sigma 0):
97/100 [91.5 %, 99.0 %]; the 3 failures are ``ik_failed`` at planning: the right arm finds no
fingers-down grasp over the tray at cube yaws of 34-39 deg (the tray lies inboard of both arms,
where fewer gripper yaws are reachable than over the cube areas).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from ..scene import SceneConfig, cube_half_size, cube_qpos_adr
from .base import TRAY_FLOOR, Task, draw_cubes, draw_pose, set_arms, set_cubes
from .planner import GRASP_DEPTH, EpisodeParams, Lane, PlaceTarget, ScriptedController

__all__ = ["Unload", "UnloadTask"]

#: The cube starts within this distance (m, per axis) of the tray centre.
TRAY_SPREAD = 0.01
#: Drop height (m) above the table at release.
TABLE_CLEARANCE = 0.005
#: Outer half extent (m) of the tray (inner half 6 cm + 5 mm wall).
TRAY_OUTER_HALF = 0.065


class Unload(ScriptedController):
    def __init__(self, model, params, cube: str, count_arm_contacts: bool = True) -> None:
        self.cube = cube
        super().__init__(model, params, count_arm_contacts)

    def make_lanes(self) -> list[Lane]:
        gx, gy = self.params.goal
        half = cube_half_size(self.model, self.cube)  # episodes may vary the size

        def place(lane: Lane, est) -> PlaceTarget:
            return PlaceTarget((gx, gy), self.table_z + TABLE_CLEARANCE + half + GRASP_DEPTH)

        return [Lane(self, self.params.side, self.cube, self.table_z + TRAY_FLOOR + half, place)]

    def on_table(self, data: mujoco.MjData) -> bool:
        a, _ = cube_qpos_adr(self.model, self.cube)
        p = data.qpos[a:a + 3]
        half = cube_half_size(self.model, self.cube)
        clear = half * math.sqrt(2)
        d = np.abs(p[:2] - self.tray_xy)
        outside = bool(d[0] > TRAY_OUTER_HALF + clear or d[1] > TRAY_OUTER_HALF + clear)
        return outside and abs(float(p[2]) - (self.table_z + half)) < 0.005

    def judge(self, data: mujoco.MjData) -> tuple[str, bool]:
        lane = self.lanes[0]
        if lane.outcome is not None:
            return lane.outcome, False
        if lane.lifted and self.on_table(data):
            return "success", self.turned(data, lane)
        if lane.lost_phase is not None or not lane.lifted:
            return lane.failure(), False
        return "missed_target", False

    def goal_reached(self, data: mujoco.MjData) -> bool:
        # the judge also asks that the lane lifted the cube; from the state alone, the cube starts in
        # the tray, so resting on the table clear of it means it was taken out
        return self.on_table(data)


class UnloadTask(Task):
    arms = "either"

    def __init__(self, colour: str = "blue") -> None:
        self.colour = colour
        self.name = f"unload_{colour}"
        self.prompt = f"Take the {colour} cube out of the tray and put it on the table."
        self.description = (f"The {colour} 40 mm cube starts in the tray; the left or the right arm picks it out "
                            f"and puts it down on the table on its own side. Success: the {colour} cube rests on "
                            f"the table, clear of the tray, at the end.")

    def params(self, seed: int, index: int, sigma: float, retry: bool, cfg: SceneConfig,
               task_rng: np.random.Generator | None = None) -> EpisodeParams:
        side = self.draw_side(task_rng)
        rng = np.random.default_rng([seed, index])
        tx, ty = cfg.tray_center_xy
        cube = (float(tx + rng.uniform(-TRAY_SPREAD, TRAY_SPREAD)), float(ty + rng.uniform(-TRAY_SPREAD, TRAY_SPREAD)),
                float(rng.uniform(-math.pi / 4, math.pi / 4)))
        draws, ik_seed = self.base_draws(rng)
        goal = draw_pose(rng, cfg, side)
        sides = ["right" if rng.random() < 0.5 else "left" for _ in range(2)]
        placed = draw_cubes(rng, cfg, sides, [goal], grasped=1)
        k = ["red", "green", "blue"].index(self.colour)
        others = iter(placed[1:])
        poses = tuple(cube if c == k else next(others) for c in range(3))
        return EpisodeParams(cube_poses=poses, perception_draws=draws, sigma=float(sigma), retry=bool(retry),
                             ik_seed=ik_seed, task=self.name, side=side, goal=(goal[0], goal[1]),
                             meta=self.meta(seed, index, sigma, retry, task=self.name, side=side))

    def initial_state(self, model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams) -> None:
        mujoco.mj_resetData(model, data)
        set_arms(model, data, self.start_arms(model, [params.side]))
        k = ["red", "green", "blue"].index(self.colour)
        set_cubes(model, data, params.cube_poses, lift=tuple(TRAY_FLOOR if c == k else 0.0 for c in range(3)))
        mujoco.mj_forward(model, data)

    def controller(self, model: mujoco.MjModel, params: EpisodeParams) -> ScriptedController:
        return Unload(model, params, f"cube_{self.colour}", self.count_arm_contacts)
