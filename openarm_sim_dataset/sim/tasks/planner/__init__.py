"""Shared controller machinery of the scripted tasks: planning primitives, per-arm lanes, checks.

A task's controller is a :class:`ScriptedController` (:mod:`.controller`) with one :class:`Lane`
(:mod:`.lanes`) per arm it moves. A lane is a queue of :class:`Phase` objects (a joint-space
:class:`~...trajectory.MinJerkPath` of 7 joint targets + the gripper command, a duration in physics
steps, an optional check run when the phase ends, an optional condition that must hold before it
ends). Lanes step together, in a fixed order, once per physics step: two arms can pick at once, and
one can wait for the other (``until``). :mod:`.lanes` describes the primitives (pick-and-place,
retry, abort) and the checks; :mod:`.geometry` holds the top-down orientations and what is read from
the model; :mod:`.params` the heights, durations, gripper commands and the episode records.

The pick-and-place of the red cube with the right arm (:mod:`..pick_place`, the default task) is
this machinery with one lane; it reproduces the episodes of the former single-task controller
bit for bit (tested against stored digests).
"""

from .controller import ScriptedController
from .geometry import (
    arm_contact_pairs,
    ready_qpos,
    table_height,
    topdown_quat,
    tray_geometry,
    up_vector,
    wrap_yaw_90,
    yaw_of_quat,
)
from .lanes import Lane, Phase, PlaceTarget
from .params import (
    APPROACH_HEIGHT,
    GRASP_DEPTH,
    GRIPPER_CLOSED,
    GRIPPER_OPEN,
    LEFT_HOME,
    OUTCOMES,
    PLACE_YAW_OFFSETS,
    RIGHT_HOME,
    T_RETURN,
    YAW_NOISE_PER_M,
    YAW_OFFSETS,
    EpisodeParams,
    EpisodeResult,
    cube_index,
)

__all__ = [
    "OUTCOMES", "GRASP_DEPTH", "APPROACH_HEIGHT", "YAW_NOISE_PER_M", "GRIPPER_OPEN", "GRIPPER_CLOSED",
    "LEFT_HOME", "RIGHT_HOME", "YAW_OFFSETS", "PLACE_YAW_OFFSETS", "EpisodeParams", "EpisodeResult", "Phase",
    "Lane", "ScriptedController", "topdown_quat", "wrap_yaw_90", "yaw_of_quat", "up_vector", "ready_qpos",
    "table_height", "tray_geometry", "arm_contact_pairs",
    "T_RETURN", "PlaceTarget", "cube_index",
]
