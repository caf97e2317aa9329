"""Which dimension of a LeRobot vector feature is which joint of which OpenArm arm, and in what unit.

LeRobot stores an episode's state and action as vectors (``observation.state``, ``action``) whose
dimensions are named in ``info.json``. The joint names come from the ``openarm`` robot profile
(``core/robots/data/openarm.yaml``), one naming per recorder:

======================================  ==================  =======================  ===============
names                                   written by          maps to                  unit stored
======================================  ==================  =======================  ===============
``{right,left}_joint{1..7}.pos``,       this package's      ``arms/<side>/qpos``     rad (as stored)
``{side}_gripper.pos``                  LeRobot export
``{side}_{x,y,z,qw,qx,qy,qz}.pos``      same, ``--state``   ``arms/<side>/pose``     m, unit quaternion
+ ``{side}_gripper.pos``                pose
``{side}_joint{N}.vel`` / ``.effort``   same,               ``qvel`` / ``qtorque``   rad/s, N m
                                        ``--arm-dynamics``
``[left_|right_]joint_{1..7}.pos``,     LeRobot's           ``arms/<side>/qpos``     **degrees** ->
``[left_|right_]gripper.pos``           ``openarm_follower``                         rad
                                        (bimanual: prefixed)
same with ``.vel`` / ``.torque``        same                ``qvel`` / ``qtorque``   deg/s -> rad/s;
                                                                                     N m as stored
``{left,right}_rev{1..8}[.pos]``        ROS 2 v0.3          ``arms/<side>/qpos``     rad (as stored;
                                        workcells                                    rev8: gripper)
``openarm_{side}_joint{1..7}[.pos]``,   ROS 2, v1.0         ``arms/<side>/qpos``     rad; the finger
``openarm_{side}_finger_joint1[.pos]``  description                                  in **metres**,
                                                                                     as stored
======================================  ==================  =======================  ===============

Names map one at a time, never by position (LeRobot's bimanual robot stores the left arm first and
interleaves ``.pos``/``.vel``/``.torque`` per motor). An unprefixed LeRobot name is the right arm. A
group maps only when all eight columns of its attribute are there (seven joints and the gripper) in one
naming; every other dimension (``finger_joint2``, which mimics ``finger_joint1``, among them) stays in a
generic stream under the feature's own name, values as stored.

The v1.0 finger joint is prismatic (0..0.044 m in the description); the layout's gripper column of this
package's own data is the MJCF's finger hinge in radians. No published relation turns one into the other,
so the finger's metres are carried unchanged and :attr:`ArmColumns.gripper_unit` says ``m``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from . import layout
from .robots import Naming, get_profile

_OURS_POSE = re.compile(r"^(right|left)_(x|y|z|qw|qx|qy|qz|gripper)\.pos$")
#: the profile whose namings map to OpenArm arms
PROFILE = "openarm"
#: the naming of this package's own names (the pose columns belong to it too)
OWN_NAMING = "openarm_sim_dataset"
#: attributes whose values are converted to radians when the naming stores degrees (positions, speeds)
DEGREE_ATTRIBUTES = ("qpos", "qvel")


@dataclass(frozen=True)
class ArmColumns:
    """One arm attribute found in a vector feature: ``dims[j]`` is the feature's dimension holding
    column j of ``columns`` (``layout.ARM_JOINTS`` or ``layout.POSE_JOINTS``); ``degrees`` when
    the stored values are degrees (or deg/s) to be converted to radians. ``naming``: the openarm
    profile's naming the names follow (``openarm_sim_dataset``, ``lerobot``, ``ros2_v0.3``,
    ``ros2_v1.0``); ``gripper_unit``: the unit of the gripper column after conversion (``rad``, or ``m``
    for the v1.0 description's prismatic finger)."""

    side: str
    attribute: str
    columns: tuple[str, ...]
    dims: tuple[int, ...]
    degrees: bool
    naming: str
    gripper_unit: str = "rad"

    @property
    def key(self) -> str:
        return f"arms/{self.side}/{self.attribute}"

    def profile_naming(self) -> Naming:
        """The openarm profile's naming these names follow: its limits are the ones the values keep
        (``robots.detect(..., mapped={arm.key: arm.profile_naming()})``)."""
        return get_profile(PROFILE).naming(self.naming)

    def values(self, vectors: np.ndarray) -> np.ndarray:
        """This attribute's (N, 8) float32 values, in radians, from the feature's (N, D) vectors."""
        out = vectors[:, list(self.dims)]
        if self.degrees:
            return np.deg2rad(out.astype(np.float64)).astype(np.float32)
        return np.ascontiguousarray(out, dtype=np.float32)


@dataclass(frozen=True)
class _Unit:
    degrees: bool  # positions (and speeds) stored in degrees
    gripper_unit: str  # the gripper position's unit after conversion


@functools.cache
def _names() -> tuple[dict[str, list[tuple[str, str, str, str]]], dict[str, _Unit]]:
    """Every name of the openarm profile's namings -> [(naming, side, attribute, column)], and each
    naming's units (its first unit variant: every OpenArm naming has one)."""
    profile = get_profile(PROFILE)
    table: dict[str, list[tuple[str, str, str, str]]] = {}
    units = {}
    for naming in profile.namings:
        variant = naming.variants[0]
        side = profile.sides[0]
        joint_unit = variant.limit(side, layout.ARM_JOINTS[0]).unit
        gripper_unit = variant.limit(side, "gripper").unit
        degrees = joint_unit == "deg"
        units[naming.name] = _Unit(degrees, "rad" if degrees and gripper_unit == "deg" else gripper_unit)
        for name, (side_, joint, attribute, mimic) in naming.table().items():
            if not mimic:  # a mimicking finger repeats the gripper: left generic
                table.setdefault(name, []).append((naming.name, side_, attribute, joint))
    return table, units


def map_arms(names: list[str]) -> tuple[list[ArmColumns], list[int]]:
    """The arm attributes a vector feature holds, and the dimensions left over (generic)."""
    table, units = _names()
    found: dict[tuple[str, str, str], dict[str, int]] = {}
    sides_with_pose = {m[1] for n in names if (m := _OURS_POSE.match(n)) and m[2] != "gripper"}
    for d, name in enumerate(names):
        pose = _OURS_POSE.match(name)
        if pose and pose[1] in sides_with_pose:
            parsed = [(OWN_NAMING, pose[1], "pose", pose[2])]
        else:
            parsed = table.get(name, [])
        for naming, side, attr, column in parsed:
            cols = found.setdefault((naming, side, attr), {})
            cols[column] = -1 if column in cols else d  # a repeated name: the attribute is ambiguous
    complete: dict[tuple[str, str], list[tuple[str, dict[str, int]]]] = {}
    for (naming, side, attr), cols in found.items():
        columns = layout.POSE_JOINTS if attr == "pose" else layout.ARM_JOINTS
        if set(cols) == set(columns) and -1 not in cols.values():
            complete.setdefault((side, attr), []).append((naming, cols))
    arms, used = [], set()
    for (side, attr), groups in complete.items():
        if len(groups) != 1:  # two namings claim the same arm: which one is meant is unknown
            continue
        (naming, cols), = groups
        columns = layout.POSE_JOINTS if attr == "pose" else layout.ARM_JOINTS
        dims = tuple(cols[c] for c in columns)
        unit = units[naming]
        arms.append(ArmColumns(side, attr, columns, dims, unit.degrees and attr in DEGREE_ATTRIBUTES, naming,
                               unit.gripper_unit if attr == "qpos" else "rad"))
        used.update(dims)
    return arms, [d for d in range(len(names)) if d not in used]
