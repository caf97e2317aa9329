"""Both arms at once: each arm puts the cube on its side in the tray (``bimanual_tray``).

The red cube starts in one arm's area and the green cube in the other's (which way round is drawn
from the task stream); the blue cube on either side. Both arms start at their ready poses and pick
at the same time (their areas are 0.26 m apart at the closest). The right arm then carries its cube
to the near half of the tray (centre 3 cm nearer the robot than the tray's), releases it with the
fingers closing along world y (so they stay clear of the other half; split along y with the fingers
along x, the hand touched the near wall and 3 of 3 cubes ended tilted), rises, and moves back over
its own area; only then does the left arm, holding its cube lifted, carry it to the far half. The arms are
never above the tray at the same time, and every physics step in which a geom of one arm touches a
geom of the other is counted (``arm_contacts`` in the episode entry; planned to stay 0).

Both arms use the episode's perception draws (one estimate error per attempt, shared). Without a retry
an episode lasts 11.1 s of the 12 s limit (``max_time``); with ``--retry`` a second grasp attempt of
the right arm pushes the left arm's placing past it (outcome ``timeout``): raise the limit for such
runs.

Measured (``tools/sim_success_rate.py --tasks bimanual_tray``, seed 10, 100 episodes, sigma 0):
96/100 [90.2 %, 98.4 %]: 2 ``ik_failed`` (no plan for the right arm), 2 ``missed_tray``; 5 of
the successes lucky (a cube on another face: the half-tray leaves 1-2 cm to the wall and the other
cube, and a cube that tips against them still counts); arm-arm contacts in 1 of 100 episodes (30
steps, 0.06 s).

Success rule (final state): both cubes rest inside the tray. Failure categories: those of the first
arm (right, then left) whose cube is not in the tray (``ik_failed``, ``grasp_missed``,
``never_picked``, ``dropped_lifting``, ``dropped_carrying``, ``missed_tray``). Lucky success
(``knocked_over``): a cube in the tray on another face than it started on.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from ..scene import SceneConfig, cube_half_size
from ..trajectory import MinJerkPath
from .base import Task, draw_cubes, draw_pose, set_arms, set_cubes
from .planner import (
    GRASP_DEPTH,
    PLACE_YAW_OFFSETS,
    T_RETURN,
    EpisodeParams,
    Lane,
    Phase,
    PlaceTarget,
    ScriptedController,
)

__all__ = ["Bimanual", "BimanualTrayTask", "HALF_OFFSET"]

#: Offset (m) of each arm's place point from the tray centre along :data:`SPLIT_AXIS`: right -, left +.
HALF_OFFSET = 0.03
#: Axis (0 = world x, 1 = world y) along which the two place points are split.
SPLIT_AXIS = 0


class Bimanual(ScriptedController):
    """Two lanes: the right arm places first and moves back; the left arm waits with its cube lifted."""

    def __init__(self, model, params, cubes: tuple[str, str], count_arm_contacts: bool = True) -> None:
        self.cubes = cubes  # (right arm's cube, left arm's cube)
        super().__init__(model, params, count_arm_contacts)

    def make_lanes(self) -> list[Lane]:
        # per cube: episodes may vary the sizes (read, never assumed)
        zc = [self.table_z + cube_half_size(self.model, c) for c in self.cubes]
        z_place = [self.table_z + 0.004 + 0.008 + cube_half_size(self.model, c) + GRASP_DEPTH for c in self.cubes]

        def place_for(sign: float, z_place: float):
            def place(lane: Lane, est) -> PlaceTarget:
                # fingers close across the split axis (gripper y along the other axis): they stay out of
                # the other half and off the near wall
                xy = [float(self.tray_xy[0]), float(self.tray_xy[1])]
                xy[SPLIT_AXIS] += sign * HALF_OFFSET
                yaws = (0.0, math.pi) if SPLIT_AXIS == 0 else (math.pi / 2, -math.pi / 2)
                return PlaceTarget((xy[0], xy[1]), z_place, PLACE_YAW_OFFSETS, yaws=yaws)
            return place

        def go_back(lane: Lane, end: np.ndarray) -> list[Phase]:
            back = np.concatenate([lane.q_pre, [lane.go]])
            return [Phase("return", MinJerkPath(np.vstack([end, back]), T_RETURN), lane.steps(T_RETURN))]

        right = Lane(self, "right", self.cubes[0], zc[0], place_for(-1.0, z_place[0]), after_retreat=go_back, log_prefix="right:")

        def wait_for_right(lane: Lane, held: np.ndarray) -> list[Phase]:
            return [Phase("wait", MinJerkPath(np.vstack([held, held]), 0.1), 1, until=lambda: right.finished)]

        left = Lane(self, "left", self.cubes[1], zc[1], place_for(+1.0, z_place[1]), before_carry=wait_for_right, log_prefix="left:")
        return [right, left]

    def judge(self, data: mujoco.MjData) -> tuple[str, bool]:
        knocked = False
        for lane, cube in zip(self.lanes, self.cubes):
            if lane.outcome is not None:
                return lane.outcome, False
            if not self.in_tray(data, cube):
                return lane.failure(), False
            knocked = knocked or self.turned(data, lane)
        return "success", knocked

    def goal_reached(self, data: mujoco.MjData) -> bool:
        return all(self.in_tray(data, cube) for cube in self.cubes)


class BimanualTrayTask(Task):
    """Put the red and the green cube in the tray, one with each arm."""

    name = "bimanual_tray"
    prompt = "Put the red cube and the green cube in the tray."
    description = ("The red and the green 40 mm cubes start on opposite sides of the table; each arm picks the cube "
                   "on its side, the right arm puts its cube in the tray and moves away, then the left arm puts its "
                   "cube in. Success: both cubes rest inside the tray at the end. Arm-arm contacts are counted.")
    arms = "both"

    def params(self, seed: int, index: int, sigma: float, retry: bool, cfg: SceneConfig,
               task_rng: np.random.Generator | None = None) -> EpisodeParams:
        red_side = self.draw_side(task_rng)
        green_side = "left" if red_side == "right" else "right"
        rng = np.random.default_rng([seed, index])
        red = draw_pose(rng, cfg, red_side)
        draws, ik_seed = self.base_draws(rng)
        placed = draw_cubes(rng, cfg, [green_side], [red], grasped=1)
        blue_side = "right" if rng.random() < 0.5 else "left"
        placed = draw_cubes(rng, cfg, [blue_side], placed, grasped=2)
        return EpisodeParams(cube_poses=tuple(placed), perception_draws=draws, sigma=float(sigma), retry=bool(retry),
                             ik_seed=ik_seed, task=self.name, side="both", goal=(1.0 if red_side == "right" else -1.0,),
                             meta=self.meta(seed, index, sigma, retry, task=self.name, red_side=red_side))

    def initial_state(self, model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams) -> None:
        mujoco.mj_resetData(model, data)
        set_arms(model, data, self.start_arms(model, ["right", "left"]))
        set_cubes(model, data, params.cube_poses)
        mujoco.mj_forward(model, data)

    def controller(self, model: mujoco.MjModel, params: EpisodeParams) -> ScriptedController:
        red_right = params.goal[0] > 0
        cubes = ("cube_red", "cube_green") if red_right else ("cube_green", "cube_red")
        return Bimanual(model, params, cubes, self.count_arm_contacts)
