"""The scripted tasks' parameters: outcome categories, grasp and approach heights, gripper commands,
hold poses, phase durations, yaw offsets, and the records of one episode (:class:`EpisodeParams` in,
:class:`EpisodeResult` out).

Frames: world metres, radians, wxyz.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...scene import CUBE_NAMES

#: Outcome categories shared by the tasks (a task may add its own, e.g. ``missed_target``).
OUTCOMES: tuple[str, ...] = (
    "success", "ik_failed", "grasp_missed", "dropped_lifting", "dropped_carrying", "missed_tray", "never_picked",
)

#: Height (m) of the ee control point above the cube centre when grasping (finger pads span 0.15-0.17 m below it).
GRASP_DEPTH = 0.152
#: Approach / carry height above the grasp pose (m).
APPROACH_HEIGHT = 0.15
#: Yaw perception error (rad) per metre of position sigma (10 mm sigma -> 0.05 rad = 2.9 deg).
YAW_NOISE_PER_M = 5.0
#: Gripper commands (finger_joint1, rad) per side: open and closed.
GRIPPER_OPEN: dict[str, float] = {"right": -0.5, "left": 0.5}
GRIPPER_CLOSED: dict[str, float] = {"right": 0.0, "left": 0.0}
#: Left-arm hold pose (joint1..7, rad): upper arm down (slightly abducted), elbow 90 deg, forearm forward.
LEFT_HOME = np.array([0.0, -0.3, 0.0, 1.5708, 0.0, 0.0, 0.0])
#: Right-arm hold pose: the mirror image of :data:`LEFT_HOME` (joint2's axis is mirrored).
RIGHT_HOME = np.array([0.0, 0.3, 0.0, 1.5708, 0.0, 0.0, 0.0])

# Phase durations (s).
T_APPROACH, T_DESCEND, T_CLOSE, T_LIFT, T_CARRY, T_LOWER, T_RELEASE, T_RETREAT, T_SETTLE = (
    1.2, 0.8, 0.5, 0.8, 1.2, 0.8, 0.4, 0.6, 0.4)
T_REOPEN, T_REASCEND = 0.3, 0.6
#: Duration (s) of the joint-space move back over the arm's own side (bimanual tasks).
T_RETURN = 1.0
N_KNOTS = 6
#: Largest joint change (rad) allowed between consecutive IK knots of a Cartesian segment.
MAX_KNOT_JUMP = 0.6
#: Largest dip (m) of the ee below the approach height allowed during the joint-space carry.
CARRY_DIP = 0.09
#: Place yaw offsets (rad, relative to the grasp yaw) tried in order (the tray accepts any yaw).
PLACE_YAW_OFFSETS: tuple[float, ...] = tuple(math.radians(a) for a in (0, 45, -45, 90, -90, 135, -135, 180))
#: Gripper yaw offsets (rad) tried in order on top of the wrapped cube yaw, per arm; all grasp the
#: cube equally (90 deg symmetry) but each arm reaches them differently (the left arm's are the
#: mirror image of the right arm's: a reflection in y maps yaw to -yaw).
YAW_OFFSETS: dict[str, tuple[float, ...]] = {
    "right": (math.pi / 2, math.pi, 0.0, -math.pi / 2),
    "left": (-math.pi / 2, -math.pi, 0.0, math.pi / 2),
}


@dataclass(frozen=True)
class EpisodeParams:
    """Everything that defines one episode (besides the model).

    Attributes:
        cube_poses: per cube (red, green, blue) ``(x, y, yaw)`` (world m, rad); a cube rests on the
            table unless its task places it elsewhere (e.g. in the tray).
        perception_draws: (2, 3) standard-normal draws (dx, dy, dyaw) for the first
            estimate and the retry estimate; scaled by ``sigma``.
        sigma: perception position error std (m).
        retry: act on checks, with one grasp retry (True) or run blind (False).
        ik_seed: seed of the IK restart generator.
        task: registry name of the task (:mod:`openarm_sim_dataset.sim.tasks`).
        side: the arm that acts (``"right"``/``"left"``; ``"both"`` for bimanual tasks).
        goal: task-specific values, or (): ``unload_*``: the put-down point (x, y), world m;
            ``stack_*``: the standard-normal draws (dx, dy, dyaw) of the base cube's estimate;
            ``bimanual_tray``: (+1,) when the red cube starts on the right, (-1,) on the left.
        meta: seed inputs and other JSON-able metadata (``{"seed":..,"index":..,..}``).
    """

    cube_poses: tuple[tuple[float, float, float], ...]
    perception_draws: tuple[tuple[float, float, float], ...] = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    sigma: float = 0.0
    retry: bool = False
    ik_seed: int = 0
    task: str = "pick_place"
    side: str = "right"
    goal: tuple[float, ...] = ()
    meta: dict[str, object] = field(default_factory=dict, hash=False, compare=False)


@dataclass
class EpisodeResult:
    """Result of :func:`~openarm_sim_dataset.sim.tasks.run_episode`.

    Attributes:
        outcome: ``"success"`` or a failure category of the task.
        knocked_over: success by luck: an object ended on another face than it started on (e.g. a
            cube knocked over, a toppled stack rebuilt by chance).
        success: ``outcome == "success"``.
        attempts: grasp attempts made (summed over the arms).
        steps: physics steps taken; ``sim_time``: final ``data.time`` (s).
        cube_final: final pose (7,) of the task's first object: position (m) + quaternion (wxyz).
        initial_state: ``mj_getState(mjSTATE_INTEGRATION)`` before the first step.
        final_qpos, final_qvel: state at the end.
        estimates: per attempt the estimated object ``(x, y, yaw)``.
        phase_log: (phase name, first step index) in order (``side:`` prefixed with two lanes).
        arm_contacts: physics steps in which a geom of one arm touched a geom of the other.
        judge_facts: what the judge read besides the judged state (:meth:`ScriptedController.judge_facts`).
    """

    outcome: str
    knocked_over: bool
    success: bool
    attempts: int
    steps: int
    sim_time: float
    cube_final: np.ndarray
    initial_state: np.ndarray
    final_qpos: np.ndarray
    final_qvel: np.ndarray
    estimates: list[tuple[float, float, float]]
    phase_log: list[tuple[str, int]]
    arm_contacts: int = 0
    judge_facts: dict[str, object] = field(default_factory=dict)


def cube_index(colour_or_name: str) -> int:
    """Index in :data:`CUBE_NAMES` of ``"red"``/``"cube_red"`` etc."""
    name = colour_or_name if colour_or_name.startswith("cube_") else f"cube_{colour_or_name}"
    return CUBE_NAMES.index(name)
