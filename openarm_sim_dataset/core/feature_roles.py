"""What each feature of a LeRobot ``info.json`` is, whatever the robot: the robot's ``state``, its
``action``, a ``camera``, or ``other`` (the frame table's indices, rewards, done flags, language, the
environment's state), and for state and action features the quantity of each dimension (``position``,
``velocity``, ``effort``).

LeRobot's conventions name the state ``observation.state`` and the action ``action``, cameras
``observation.images.<name>`` (dtype ``video`` or ``image``); datasets in the wild also use ``state``,
``actions``, ``observation.joint_positions``, ``observation.qpos``, ``action.joint_positions``, and keep
velocities and efforts beside the positions (``observation.velocity``, ``observation.effort``,
``observation.joint_velocities``, ``.vel``/``.torque`` dimension names): those are state-side extras
(role ``state``, quantity ``velocity`` or ``effort``). Roles are read from the key and dtype alone,
never from the values; a key this module does not know is ``other``, never guessed a state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lerobot_layout import DEFAULT_FEATURES, IMAGE_PREFIX, VISUAL_DTYPES

ROLES = ("state", "action", "camera", "other")
QUANTITIES = ("position", "velocity", "effort")

#: dtypes of numeric vectors (anything else, e.g. ``string``, is ``other``)
NUMERIC_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                  "uint32", "uint64")

# the last segment of an ``observation.`` key (or the whole key) that names the robot's own state
_STATE_NAMES = re.compile(r"^(state|states|robot_state|proprio|proprioception|qpos|joint_pos|joint_position|"
                          r"joint_positions|joints|joint_states|positions?|eef|eef_pose|ee_pose|eef_pos|ee_pos|"
                          r"cartesian_position|pose|gripper|gripper_position|gripper_state|tool_state)$")
_VELOCITY_NAMES = re.compile(r"^(velocity|velocities|vel|qvel|joint_vel|joint_velocity|joint_velocities|"
                             r"eef_vel|ee_vel)$")
_EFFORT_NAMES = re.compile(r"^(effort|efforts|torque|torques|qtorque|joint_effort|joint_efforts|joint_torque|"
                           r"joint_torques|current|currents|force|forces|wrench)$")
_ACTION_KEY = re.compile(r"^actions?($|[._/])")
# a dimension's name ending in one of these is a velocity or an effort (``left_joint_1.vel``, ``wrist_torque``)
_VELOCITY_SUFFIX = re.compile(r"[._](vel|velocity|qvel|dq)$", re.IGNORECASE)
_EFFORT_SUFFIX = re.compile(r"[._](effort|torque|tau|current|force)$", re.IGNORECASE)
# a Cartesian coordinate or a rotation component (``x``, ``right_qz.pos``, ``eef.yaw``, ``r11``): 0.0 is a
# legal value of these for a whole episode (a rotation about one axis), never of a joint reading
_CARTESIAN = re.compile(r"(^|[._])(x|y|z|qw|qx|qy|qz|quat_[wxyz]|w|roll|pitch|yaw|rx|ry|rz|r[1-3][1-3])(\.pos)?$",
                        re.IGNORECASE)


@dataclass(frozen=True)
class FeatureRole:
    """One feature's ``role`` (one of :data:`ROLES`) and, for state and action features, its
    ``quantity`` (one of :data:`QUANTITIES`; a vector mixing them says so per dimension, see
    :func:`dimension_quantities`); ``why`` says which convention decided."""

    key: str
    role: str
    quantity: str | None
    why: str


def feature_role(key: str, feature: dict) -> FeatureRole:
    """The role of one feature from its key and dtype (see the module doc)."""
    dtype = str(feature.get("dtype", ""))
    if dtype in VISUAL_DTYPES or key.startswith(IMAGE_PREFIX):
        return FeatureRole(key, "camera", None, f"dtype {dtype}" if dtype in VISUAL_DTYPES else IMAGE_PREFIX)
    if key in DEFAULT_FEATURES:
        return FeatureRole(key, "other", None, "a column of every frame table")
    if dtype not in NUMERIC_DTYPES and dtype != "bool":
        return FeatureRole(key, "other", None, f"dtype {dtype}: not a numeric vector")
    if dtype == "bool":
        return FeatureRole(key, "other", None, "a flag")
    if _ACTION_KEY.match(key):
        return FeatureRole(key, "action", _quantity(key.split(".", 1)[1] if "." in key else "") or "position",
                           "action key")
    if key.startswith("next.") or key.startswith("complementary_info."):
        return FeatureRole(key, "other", None, "reward, done or episode information")
    last = key.split(".")[-1]
    if key == "state" or key.startswith("observation.") or key.startswith("state."):
        if "environment" in key or "object" in key:
            return FeatureRole(key, "other", None, "the environment's state, not the robot's")
        quantity = _quantity(last)
        if quantity or _STATE_NAMES.match(last) or key == "observation.state" or key.startswith("observation.state."):
            return FeatureRole(key, "state", quantity or "position", "state key")
    return FeatureRole(key, "other", None, "no state or action convention")


def _quantity(segment: str) -> str | None:
    if _VELOCITY_NAMES.match(segment):
        return "velocity"
    if _EFFORT_NAMES.match(segment):
        return "effort"
    return None


def feature_roles(features: dict[str, dict]) -> dict[str, FeatureRole]:
    """Every feature's role, in the order of ``features``."""
    return {key: feature_role(key, feat) for key, feat in features.items() if isinstance(feat, dict)}


def dimension_quantities(role: FeatureRole, names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The quantity of each dimension of a state or action feature: a dimension named as a velocity or
    an effort (``joint_1.vel``, ``left_wrist.torque``) is one whatever its feature, the others take the
    feature's quantity (``observation.velocity``: every dimension a velocity)."""
    base = role.quantity or "position"
    return tuple("velocity" if _VELOCITY_SUFFIX.search(n) else "effort" if _EFFORT_SUFFIX.search(n) else base
                 for n in names)


def is_cartesian(name: str) -> bool:
    """Whether a dimension's name is a Cartesian coordinate or a rotation component, not a joint."""
    return bool(_CARTESIAN.search(name))


def state_action_pairs(features: dict[str, dict], names: dict[str, list[str]]) -> list[tuple[str, str]]:
    """``(state feature, action feature)`` pairs whose dimensions correspond: the same names (as a set, in
    any order), or else the same width with the action the only one of that width. ``names``: each
    feature's dimension names (LeRobot's ``names``, ``d0``.. when it gives none)."""
    roles = feature_roles(features)
    states = [k for k, r in roles.items() if r.role == "state" and r.quantity == "position"]
    actions = [k for k, r in roles.items() if r.role == "action"]
    pairs, used = [], set()
    for s in states:
        same = [a for a in actions if a not in used and set(names.get(a, ())) == set(names.get(s, ()))]
        if not same:
            width = [a for a in actions if a not in used and len(names.get(a, ())) == len(names.get(s, ()))]
            same = width if len(width) == 1 else []
        if same:
            pairs.append((s, same[0]))
            used.add(same[0])
    return pairs
