"""Stack one named cube on another (``stack_red_on_blue``).

Both cubes start in one arm's cube area (the side drawn from the task stream, 1/2 each), the third
cube on either side; the arm on their side grasps the top cube and lowers it onto the *estimated*
base cube (true pose plus ``sigma`` times a standard-normal draw of its own, the pose stream's last
draws), turned so that their faces line up, and releases it 6 mm above contact.

Success rule (final state): the top cube's centre is within 15 mm (horizontally) of the base cube's
centre and 30-50 mm above it, and the base cube still rests on the table (centre within 5 mm of
the table top + 20 mm). Failure categories: those of the pick (``ik_failed``, ``grasp_missed``,
``never_picked``, ``dropped_lifting``, ``dropped_carrying``), ``base_moved`` (the base cube left
the table or lies on the top cube) and ``missed_target`` (carried, but not on the base). Lucky
success (``knocked_over``): a stack whose top or base cube ended on another face than it started
on (a toppled stack rebuilt by chance).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from ..scene import CUBE_NAMES, SceneConfig, cube_half_size, cube_qpos_adr
from .base import Task, draw_cubes, draw_pose, set_arms, set_cubes
from .planner import (
    GRASP_DEPTH,
    PLACE_YAW_OFFSETS,
    EpisodeParams,
    Lane,
    PlaceTarget,
    ScriptedController,
    wrap_yaw_90,
    yaw_of_quat,
)

__all__ = ["Stack", "StackTask"]

#: Drop height (m) above contact at release.
STACK_CLEARANCE = 0.006
#: Largest horizontal offset (m) of the top cube's centre from the base's for a stack.
STACK_XY_TOL = 0.015


class Stack(ScriptedController):
    """One lane: the arm on the cubes' side moves the top cube onto the base cube."""

    def __init__(self, model, params, top: str, base: str, count_arm_contacts: bool = True) -> None:
        self.top, self.base = top, base
        self.base_up = np.array([0.0, 0.0, 1.0])  # every cube starts resting on a face, its +z up
        super().__init__(model, params, count_arm_contacts)

    def make_lanes(self) -> list[Lane]:
        ba, _ = cube_qpos_adr(self.model, self.base)
        # episodes may vary the cube sizes: read, never assumed
        half_top, half_base = cube_half_size(self.model, self.top), cube_half_size(self.model, self.base)
        noise = self.params.goal  # (dx, dy, dyaw) standard-normal draws of the base estimate

        def place(lane: Lane, est) -> PlaceTarget:
            d = lane.ctl._data
            s = self.params.sigma
            bx = float(d.qpos[ba]) + s * noise[0]
            by = float(d.qpos[ba + 1]) + s * noise[1]
            byaw = yaw_of_quat(d.qpos[ba + 3:ba + 7]) + s * 5.0 * noise[2]
            rel = wrap_yaw_90(byaw - est[2])  # turn the held cube so that its faces line up with the base's
            offs = tuple(rel + k * math.pi / 2 for k in (0, 1, -1, 2)) + PLACE_YAW_OFFSETS
            z = self.table_z + 2 * half_base + STACK_CLEARANCE + half_top + GRASP_DEPTH
            return PlaceTarget((bx, by), z, offs)

        return [Lane(self, self.params.side, self.top, self.table_z + half_top, place)]

    def stacked(self, data: mujoco.MjData) -> tuple[bool, bool]:
        """(top on base, base resting on the table)."""
        ta, _ = cube_qpos_adr(self.model, self.top)
        ba, _ = cube_qpos_adr(self.model, self.base)
        t, b = data.qpos[ta:ta + 3], data.qpos[ba:ba + 3]
        on = bool(np.hypot(*(t[:2] - b[:2])) < STACK_XY_TOL and 0.03 < t[2] - b[2] < 0.05)
        base_ok = bool(abs(b[2] - (self.table_z + cube_half_size(self.model, self.base))) < 0.005)
        return on, base_ok

    def judge(self, data: mujoco.MjData) -> tuple[str, bool]:
        lane = self.lanes[0]
        if lane.outcome is not None:
            return lane.outcome, False
        on, base_ok = self.stacked(data)
        if on and base_ok:
            return "success", self.turned(data, lane) or self.turned(data, self.base, self.base_up)
        if lane.lost_phase is not None or not lane.lifted:
            return lane.failure(), False
        return ("missed_target" if base_ok else "base_moved"), False

    def goal_reached(self, data: mujoco.MjData) -> bool:
        on, base_ok = self.stacked(data)
        return on and base_ok


class StackTask(Task):
    """Stack the ``top`` cube on the ``base`` cube (colours)."""

    arms = "either"

    def __init__(self, top: str, base: str) -> None:
        self.top, self.base = top, base
        self.name = f"stack_{top}_on_{base}"
        self.prompt = f"Stack the {top} cube on the {base} cube."
        self.description = (f"The {top} and {base} 40 mm cubes start on the same side of the table (left or right); "
                            f"the arm on that side picks the {top} cube and puts it on the {base} cube. Success: the "
                            f"{top} cube rests on top of the {base} cube (centres within 15 mm horizontally) and the "
                            f"{base} cube stands on the table at the end.")

    def params(self, seed: int, index: int, sigma: float, retry: bool, cfg: SceneConfig,
               task_rng: np.random.Generator | None = None) -> EpisodeParams:
        side = self.draw_side(task_rng)
        rng = np.random.default_rng([seed, index])
        top = draw_pose(rng, cfg, side)
        draws, ik_seed = self.base_draws(rng)
        placed = draw_cubes(rng, cfg, [side], [top], grasped=1)  # the base: 11 cm from the top cube
        third = "right" if rng.random() < 0.5 else "left"
        placed = draw_cubes(rng, cfg, [third], placed, grasped=2)
        base_noise = tuple(float(v) for v in rng.standard_normal(3))
        ti, bi = CUBE_NAMES.index(f"cube_{self.top}"), CUBE_NAMES.index(f"cube_{self.base}")
        oi = ({0, 1, 2} - {ti, bi}).pop()
        poses: list = [None, None, None]
        poses[ti], poses[bi], poses[oi] = placed
        return EpisodeParams(cube_poses=tuple(poses), perception_draws=draws, sigma=float(sigma), retry=bool(retry),
                             ik_seed=ik_seed, task=self.name, side=side, goal=base_noise,
                             meta=self.meta(seed, index, sigma, retry, task=self.name, side=side))

    def initial_state(self, model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams) -> None:
        mujoco.mj_resetData(model, data)
        set_arms(model, data, self.start_arms(model, [params.side]))
        set_cubes(model, data, params.cube_poses)
        mujoco.mj_forward(model, data)

    def controller(self, model: mujoco.MjModel, params: EpisodeParams) -> ScriptedController:
        return Stack(model, params, f"cube_{self.top}", f"cube_{self.base}", self.count_arm_contacts)
