"""The robot a validation judges: the profile, naming and unit variant of the dataset's streams, matched once
per run (:func:`robot_of`), and what the robot-aware checks share (the margin of a limit in a joint's unit,
why nothing was judged).

The evidence is every obs and action stream of the episodes under check: its key and column names
(``arms/right/qpos`` with ``joint1``..``gripper``; ``lerobot/observation.state`` with the feature's names),
and per dimension its minimum and maximum as stored, which choose a unit variant (SO-100/SO-101: LeRobot's
-100..100 normalisation or degrees). A LeRobot dataset's ``robot_type`` comes first; ``validate(robot=...)``
(``--robot NAME``, ``--robot-file FILE.yaml``) overrides the detection.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.robots import GENERIC, JointLimit, RobotMatch, detect

from .check import Context


def robot_type(ctx: Context) -> str | None:
    """The ``robot_type`` a LeRobot dataset declares (None for the OpenArm layout, whose streams name it)."""
    src = ctx.ds.lerobot
    value = src.info.get("robot_type") if src is not None else None
    return value if isinstance(value, str) and value else None


#: the rows that judge by the robot's profile: a report that runs one of them names the robot it judged
ROBOT_ROWS = ("qpos_jumps", "joint_limits", "joint_units")

#: the episodes whose streams are the evidence of the detection: the first of those under check (a group of a
#: big dataset and the driver then see the same ones: one robot per run)
EVIDENCE_EPISODES = 50


def _uncached_streams(ctx: Context, ep: str, kind: str) -> dict | str:
    try:
        return ctx.ds.streams(ep, kind)
    except DatasetError as e:
        return str(e)


def vector_ranges(ctx: Context, cache_streams: bool = True
                  ) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per stream key of the dataset's first :data:`EVIDENCE_EPISODES` episodes: its column names, and per
    column the minimum and maximum as stored (NaN ignored), obs and action pooled (cached).
    ``cache_streams``: read through the context's cache (the checks then read them once); false for the
    driver of a grouped run, whose context must not hold episodes' streams."""
    if "robot_vectors" in ctx.cache:
        return ctx.cache["robot_vectors"]
    read = ctx.streams if cache_streams else lambda ep, kind: _uncached_streams(ctx, ep, kind)
    vectors: dict[str, tuple[str, ...]] = {}
    ranges: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for ep in ctx.ds.episode_ids[:EVIDENCE_EPISODES]:
        for kind in layout.KINDS:
            streams = read(ep, kind)
            if not isinstance(streams, dict):
                continue  # the form checks name it
            for key, s in streams.items():
                if not len(s) or s.values.ndim != 2 or s.values.shape[1] != len(s.columns):
                    continue
                if key in vectors and vectors[key] != tuple(s.columns):
                    continue  # another width in another episode: the form checks name it
                vectors[key] = tuple(s.columns)
                with warnings.catch_warnings():  # a dimension NaN throughout: NaN (nonfinite_values names it)
                    warnings.simplefilter("ignore", RuntimeWarning)
                    lo, hi = np.nanmin(s.values, axis=0), np.nanmax(s.values, axis=0)
                if key in ranges:
                    lo, hi = np.fmin(lo, ranges[key][0]), np.fmax(hi, ranges[key][1])
                ranges[key] = (lo, hi)
    ctx.cache["robot_vectors"] = (vectors, ranges)
    return vectors, ranges


def robot_of(ctx: Context, cache_streams: bool = True) -> RobotMatch:
    """The robot of the episodes under check (cached in the context; ``ctx.robot_profile`` overrides;
    ``cache_streams`` as for :func:`vector_ranges`)."""
    if "robot" not in ctx.cache:
        vectors, ranges = vector_ranges(ctx, cache_streams)
        src = ctx.ds.lerobot
        # an arm the LeRobot reader mapped keeps the limits of the naming it was recorded under
        mapped = {arm.key: arm.profile_naming() for arms in (src.arms.values() if src is not None else ())
                  for arm in arms if arm.attribute == "qpos"}
        ctx.cache["robot"] = detect(robot_type(ctx), vectors, ranges, getattr(ctx, "robot_profile", None), mapped)
    return ctx.cache["robot"]


def robot_label(match: RobotMatch, ctx: Context) -> str:
    """``robot so101_follower`` / ``robot openarm`` for a reason: the declared robot_type where there is one."""
    return f"robot {robot_type(ctx) or match.profile.name}"


def no_profile_reason(match: RobotMatch, ctx: Context, what: str) -> str:
    """Why a robot-aware check judged nothing: no profile, or a profile that knows none of the names, or
    (``what``) none of the joints it knows has the number the check needs."""
    if not match.vectors:
        return f"no obs or action stream: no {what} to judge"
    if match.profile.name == GENERIC:
        return f"{robot_label(match, ctx)} has no profile (--robot / --robot-file give one): no {what} known"
    if match.naming is None:
        return f"{robot_label(match, ctx)}: no dimension name is one of its profile's namings: no {what} known"
    return f"{robot_label(match, ctx)} has no {what} in its profile ({match.profile.name}, {match.naming.name})"


def margin_in(unit: str, margin_rad: float) -> float:
    """A margin given in radians, in a joint's stored ``unit``: degrees converted, any other unit none
    (a normalisation is clamped to its range by its recorder; a prismatic finger has no angle)."""
    if unit == "rad":
        return margin_rad
    if unit == "deg":
        return math.degrees(margin_rad)
    return 0.0


def speed_in(unit: str, speed_rad: float) -> float | None:
    """A speed given in rad/s in a joint's stored ``unit`` per second; None for a unit with no angle
    (LeRobot's -100..100 normalisation maps each motor's own calibrated range: no common speed)."""
    if unit == "rad":
        return speed_rad
    if unit == "deg":
        return math.degrees(speed_rad)
    return None


def joints_of(match: RobotMatch, key: str) -> list[JointLimit | None]:
    """Per column of stream ``key``: the joint the profile says it is, or None (unknown, or not a position)."""
    return match.joints_for(key) if key in match.vectors else []
