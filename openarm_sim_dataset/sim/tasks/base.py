"""What a task is: a name, a prompt, the arms it uses, an initial-state sampler, a controller, a rule.

A :class:`Task` turns ``(seed, index)`` into :class:`~.planner.EpisodeParams` (:meth:`Task.params`),
sets the initial state (:meth:`Task.initial_state`) and builds its controller
(:meth:`Task.controller`), whose ``judge`` is the success rule applied to the final state.

Randomness of episode ``index`` of seed ``seed``:

* object poses, perception draws, IK restart seed: ``numpy.random.default_rng([seed, index])``
  (the *pose stream*; for the default task drawn in exactly the order of the single-task generator,
  see :mod:`openarm_sim_dataset.sim.randomize`);
* which task, and the task's discrete choices (which arm): ``default_rng([seed, index, TASK_STREAM])``
  (the *task stream*): first one uniform draw picks the task (cumulative weights), then the task's
  own draws. Changing the task list or weights never changes the pose stream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mujoco
import numpy as np

from ..scene import CUBE_NAMES, SceneConfig, arm_index, cube_half_size, cube_qpos_adr
from .planner import (
    GRIPPER_CLOSED,
    LEFT_HOME,
    RIGHT_HOME,
    EpisodeParams,
    ScriptedController,
    ready_qpos,
    table_height,
    topdown_quat,
)

__all__ = ["Task", "TASK_STREAM", "TRAY_FLOOR", "area_center", "draw_pose", "draw_cubes", "set_arms", "set_cubes"]

#: Third key of the task stream ``default_rng([seed, index, TASK_STREAM])`` (ASCII "task" as an int):
#: distinct from the pose stream ``default_rng([seed, index])``.
TASK_STREAM = 0x7461736B
#: Thickness (m) of the tray floor plate: a cube in the tray rests this much above the table.
TRAY_FLOOR = 0.004
#: Minimum centre distance (m) of another cube from a cube an arm grasps (fingers open to ~9 cm).
MIN_DIST_TARGET = 0.11
#: Minimum centre distance (m) between two cubes nobody grasps.
MIN_DIST_OTHER = 0.065


def area_center(cfg: SceneConfig, side: str) -> tuple[float, float]:
    """Centre (x, y) of arm ``side``'s cube area (world m): the configured one for the right arm, its
    mirror image in y for the left arm (the robot is symmetric about the x-z plane)."""
    cx, cy = cfg.cube_area_center
    return (cx, cy) if side == "right" else (cx, -cy)


def draw_pose(rng: np.random.Generator, cfg: SceneConfig, side: str) -> tuple[float, float, float]:
    """(x, y, yaw): uniform in ``side``'s cube area, yaw uniform in [-45, 45) deg."""
    cx, cy = area_center(cfg, side)
    h = cfg.cube_area_half
    return (float(rng.uniform(cx - h, cx + h)), float(rng.uniform(cy - h, cy + h)),
            float(rng.uniform(-math.pi / 4, math.pi / 4)))


def draw_cubes(rng: np.random.Generator, cfg: SceneConfig, sides: Sequence[str],
               placed: list[tuple[float, float, float]], grasped: int) -> list[tuple[float, float, float]]:
    """Rejection-sample one pose per entry of ``sides`` (that arm's area) after the already ``placed``
    poses, keeping :data:`MIN_DIST_TARGET` from the first ``grasped`` of them and
    :data:`MIN_DIST_OTHER` from the rest. Returns ``placed`` extended."""
    for side in sides:
        for _ in range(10000):
            x, y, yaw = draw_pose(rng, cfg, side)
            dmin = [MIN_DIST_TARGET if j < grasped else MIN_DIST_OTHER for j in range(len(placed))]
            if all(math.hypot(x - p[0], y - p[1]) >= d for p, d in zip(placed, dmin)):
                placed.append((x, y, yaw))
                break
        else:  # pragma: no cover - the areas are large enough
            raise RuntimeError("could not place the cubes")
    return placed


def set_arms(model: mujoco.MjModel, data: mujoco.MjData, poses: dict[str, np.ndarray]) -> None:
    """Both arms at ``poses[side]`` (7,), commanded there, grippers commanded closed."""
    for side, q in poses.items():
        a = arm_index(model, side)
        data.qpos[a.qpos[:7]] = q
        data.ctrl[a.actuators[:7]] = q
    for side in poses:
        data.ctrl[arm_index(model, side).actuators[7]] = GRIPPER_CLOSED[side]


def set_cubes(model: mujoco.MjModel, data: mujoco.MjData, poses: Sequence[tuple[float, float, float]],
              lift: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
    """Cubes (red, green, blue) resting at (x, y, yaw), ``lift[k]`` m above the table top."""
    th = table_height(model)
    for name, (x, y, yaw), dz in zip(CUBE_NAMES, poses, lift):
        a, _ = cube_qpos_adr(model, name)
        data.qpos[a:a + 3] = (x, y, th + cube_half_size(model, name) + dz)  # episodes may vary the size
        data.qpos[a + 3:a + 7] = topdown_quat(yaw)


class Task:
    """A scripted task (subclasses set the attributes and implement the three methods).

    Attributes:
        name: registry name (``--tasks NAME``).
        prompt: the language instruction written into ``metadata.yaml`` ``tasks:``.
        description: what is done and the success rule, in words.
        arms: ``"right"``, ``"either"`` (the arm on the object's side) or ``"both"``.
        count_arm_contacts: count arm-arm contact steps (reported per episode).
    """

    name: str = ""
    prompt: str = ""
    description: str = ""
    arms: str = "right"
    count_arm_contacts: bool = True

    def params(self, seed: int, index: int, sigma: float, retry: bool, cfg: SceneConfig,
               task_rng: np.random.Generator | None = None) -> EpisodeParams:
        """Episode parameters of ``(seed, index)``; ``task_rng`` is the task stream after the task choice."""
        raise NotImplementedError

    def initial_state(self, model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams) -> None:
        """Reset ``data`` to the episode's initial state (then ``mj_forward``)."""
        raise NotImplementedError

    def controller(self, model: mujoco.MjModel, params: EpisodeParams) -> ScriptedController:
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def draw_side(task_rng: np.random.Generator | None) -> str:
        """The acting arm: right or left with probability 1/2 each, from the task stream."""
        if task_rng is None:
            task_rng = np.random.default_rng(0)
        return "right" if task_rng.random() < 0.5 else "left"

    @staticmethod
    def base_draws(rng: np.random.Generator) -> tuple[tuple[tuple[float, float, float], ...], int]:
        """Perception draws (2, 3) and the IK restart seed, in the pose stream's order."""
        draws = rng.standard_normal((2, 3))
        ik_seed = int(rng.integers(0, 2 ** 31 - 1))
        return tuple(tuple(float(v) for v in row) for row in draws), ik_seed

    @staticmethod
    def idle_pose(model: mujoco.MjModel, side: str) -> np.ndarray:
        """Hold pose of an arm that does not act: forearm forward, hand low beside the body."""
        return (LEFT_HOME if side == "left" else RIGHT_HOME).copy()

    @staticmethod
    def meta(seed: int, index: int, sigma: float, retry: bool, **extra) -> dict[str, object]:
        return {"seed": int(seed), "index": int(index), "sigma": float(sigma), "retry": bool(retry),
                "rng": "numpy.random.default_rng([seed, index])", **extra}

    def start_arms(self, model: mujoco.MjModel, acting: Sequence[str]) -> dict[str, np.ndarray]:
        """Start poses: acting arms at their ready pose over their own area, the others idle."""
        return {side: (ready_qpos(model, side=side) if side in acting else self.idle_pose(model, side))
                for side in ("right", "left")}
