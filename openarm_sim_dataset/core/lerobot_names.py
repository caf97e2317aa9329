"""Which dimension of a LeRobot vector feature is which joint of which OpenArm arm, and in what unit.

LeRobot stores an episode's state and action as vectors (``observation.state``, ``action``) whose
dimensions are named in ``info.json``. Two namings describe an OpenArm arm:

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
======================================  ==================  =======================  ===============

Names map one at a time, never by position (LeRobot's bimanual robot stores the left arm first and
interleaves ``.pos``/``.vel``/``.torque`` per motor). An unprefixed LeRobot name is the right arm. A
group maps only when all eight columns of its attribute are there (seven joints and the gripper);
every other dimension stays in a generic stream under the feature's own name, values as stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from . import layout

_OURS = re.compile(r"^(right|left)_(joint[1-7]|gripper)\.(pos|vel|effort)$")
_OURS_POSE = re.compile(r"^(right|left)_(x|y|z|qw|qx|qy|qz|gripper)\.pos$")
_LEROBOT = re.compile(r"^(?:(right|left)_)?(joint_[1-7]|gripper)\.(pos|vel|torque)$")

_ATTRIBUTE = {"pos": "qpos", "vel": "qvel", "effort": "qtorque", "torque": "qtorque"}
#: attributes whose LeRobot (Damiao bus) values are degrees, converted to radians on reading
DEGREE_ATTRIBUTES = ("qpos", "qvel")


@dataclass(frozen=True)
class ArmColumns:
    """One arm attribute found in a vector feature: ``dims[j]`` is the feature's dimension holding
    column j of ``columns`` (``layout.ARM_JOINTS`` or ``layout.POSE_JOINTS``); ``degrees`` when
    the stored values are degrees (or deg/s) to be converted to radians."""

    side: str
    attribute: str
    columns: tuple[str, ...]
    dims: tuple[int, ...]
    degrees: bool
    naming: str  # "openarm_sim_dataset" or "lerobot"

    @property
    def key(self) -> str:
        return f"arms/{self.side}/{self.attribute}"

    def values(self, vectors: np.ndarray) -> np.ndarray:
        """This attribute's (N, 8) float32 values, in radians, from the feature's (N, D) vectors."""
        out = vectors[:, list(self.dims)]
        if self.degrees:
            return np.deg2rad(out.astype(np.float64)).astype(np.float32)
        return np.ascontiguousarray(out, dtype=np.float32)


def _parse(name: str) -> tuple[str, str, str, str | None] | None:
    """(side, attribute, column, naming) of one dimension's name, or None. A gripper name such as
    ``right_gripper.pos`` is spelled alike by both namings (naming None): its arm's joints decide."""
    m = _OURS.match(name)
    if m:
        naming = None if m[2] == "gripper" else "openarm_sim_dataset"
        return m[1], _ATTRIBUTE[m[3]], m[2], naming
    m = _LEROBOT.match(name)
    if m:
        return m[1] or "right", _ATTRIBUTE[m[3]], m[2].replace("joint_", "joint"), "lerobot"
    return None


def map_arms(names: list[str]) -> tuple[list[ArmColumns], list[int]]:
    """The arm attributes a vector feature holds, and the dimensions left over (generic)."""
    found: dict[tuple[str, str], dict[str, int]] = {}
    namings: dict[tuple[str, str], set[str]] = {}
    sides_with_pose = {m[1] for n in names if (m := _OURS_POSE.match(n)) and m[2] != "gripper"}
    for d, name in enumerate(names):
        pose = _OURS_POSE.match(name)
        if pose and pose[1] in sides_with_pose:
            parsed = (pose[1], "pose", pose[2], "openarm_sim_dataset")
        else:
            parsed = _parse(name)
        if parsed is None:
            continue
        side, attr, column, naming = parsed
        cols = found.setdefault((side, attr), {})
        if column in cols:
            cols[column] = -1  # a repeated name: the attribute is ambiguous
            continue
        cols[column] = d
        if naming is not None:
            namings.setdefault((side, attr), set()).add(naming)
    arms, used = [], set()
    for (side, attr), cols in found.items():
        columns = layout.POSE_JOINTS if attr == "pose" else layout.ARM_JOINTS
        naming = namings.get((side, attr), set())
        if set(cols) != set(columns) or -1 in cols.values() or len(naming) != 1:
            continue
        dims = tuple(cols[c] for c in columns)
        (which,) = naming
        arms.append(ArmColumns(side, attr, columns, dims, which == "lerobot" and attr in DEGREE_ATTRIBUTES, which))
        used.update(dims)
    return arms, [d for d in range(len(names)) if d not in used]
