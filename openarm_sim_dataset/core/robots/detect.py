"""Which robot a dataset holds, under which naming and in which units: :func:`detect`.

The evidence, in order: the ``robot_type`` the dataset declares (LeRobot ``info.json``), the names of its
vectors' dimensions, then the values (per dimension minimum and maximum over the dataset). A naming
matches when its names cover one whole arm (every joint of one side, as positions). When a naming has
several unit variants the values decide: a variant whose ``hard`` limits a value leaves is ruled out
(LeRobot clamps its -100..100 and 0..100 normalisations, so a body joint at 150 is degrees); among the
others the first declared whose limits hold every value wins, and the reason says which others fit too
(a degree recording that stays within +-100 looks like the -100..100 normalisation: ambiguous).
Nothing matching, the ``generic`` profile matches: it knows no joint.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .profile import JointLimit, Naming, RobotProfile, UnitVariant
from .registry import GENERIC, profiles

#: joints declared in degrees that move more than this (as stored) but never leave +-pi are radians
RADIANS_UNDER_DEGREES_SPAN = 0.5
#: a hard limit is left when a value passes it by more than this share of its range (float32 rounding)
HARD_TOLERANCE = 1e-3
#: this package's arm streams (OpenArm layout): their columns are written as its LeRobot export names them
_LAYOUT_QPOS = re.compile(r"^arms/(right|left)/qpos$")

Ranges = Mapping[str, tuple[np.ndarray, np.ndarray]]


def written_names(key: str, names: list[str] | tuple[str, ...], naming: Naming | None = None) -> tuple[str, ...]:
    """The dimension names of a vector as a recorder writes them: an OpenArm layout stream
    ``arms/<side>/qpos`` (columns ``joint1`` .. ``gripper``) as ``<side>_joint1.pos`` .., or, when the reader
    mapped it from another ``naming``, as that naming writes its side's positions; others as given."""
    m = _LAYOUT_QPOS.match(key)
    if not m:
        return tuple(names)
    if naming is None:
        return tuple(f"{m[1]}_{n}.pos" for n in names)
    prefix = next((p for p, side in naming.prefixes if side == m[1]), None)
    suffix = next((s for s, attribute in naming.suffixes if attribute == "qpos"), "")
    written = dict(naming.names)
    if prefix is None:
        return tuple(names)
    return tuple(prefix + written[n] + suffix if n in written else n for n in names)


def reader_scale(naming: Naming) -> float:
    """The factor from a naming's stored position unit to the reader's stream (radians): pi/180 where it
    stores degrees (the reader converts them, as :mod:`..lerobot_names` does), else 1."""
    first = naming.variants[0].limits
    units = {lim.unit for lim in first.values() if lim.role == "joint"}
    return math.pi / 180 if units == {"deg"} else 1.0


def _parsed(naming: Naming, vectors: Mapping[str, tuple[str, ...]]) -> tuple[int, list[str], list[str]]:
    """(dimensions the naming knows, sides it covers whole as positions, the position names it knows)."""
    table = naming.table()
    joints = {j for j, _ in naming.names}
    count, seen, names = 0, {}, []
    for key_names in vectors.values():
        for n in key_names:
            entry = table.get(n)
            if entry is None:
                continue
            count += 1
            side, joint, attribute, mimic = entry
            if attribute == "qpos" and not mimic:
                seen.setdefault(side, set()).add(joint)
                names.append(n)
    return count, [s for s, js in seen.items() if js == joints], names


@dataclass(frozen=True)
class RobotMatch:
    """What :func:`detect` found: the profile, the naming its names follow (None: no name is known),
    the unit variant the values chose, and ``why`` (one line saying so)."""

    profile: RobotProfile
    naming: Naming | None
    unit_variant: UnitVariant | None
    why: str
    vectors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: per stream the reader converted (degrees to radians): the factor from the naming's unit to the stream's
    scales: Mapping[str, float] = field(default_factory=dict)

    def joints_for(self, key: str) -> list[JointLimit | None]:
        """Per dimension of vector ``key``: the joint it is (side, name, role, unit as stored, limits,
        velocity in stored units per second, source), or None for a dimension the profile does not know
        or one that is not a position (a ``.vel`` or ``.torque`` dimension)."""
        if key not in self.vectors:
            raise KeyError(f"no vector {key!r} (known: {', '.join(self.vectors)})")
        names = self.vectors[key]
        if self.naming is None or self.unit_variant is None:
            return [None] * len(names)
        table = self.naming.table()
        scale = self.scales.get(key, 1.0)
        out: list[JointLimit | None] = []
        for n in names:
            entry = table.get(n)
            lim = self.unit_variant.limit(entry[0], entry[1]) if entry and entry[2] == "qpos" else None
            out.append(_scaled(lim, scale) if lim is not None and scale != 1.0 and lim.unit == "deg" else lim)
        return out

    def unit_problems(self, ranges: Ranges) -> list[str]:
        """Vectors whose joint values do not fit the unit the profile declares for them: radians beyond
        2 pi (degrees?), degrees that move but never leave +-pi (radians?), LeRobot's -100..100 passed
        (degrees?). ``ranges``: per key the per-dimension minimum and maximum as stored."""
        problems = []
        for key in self.vectors:
            if key not in ranges:
                continue
            lo, hi = (np.asarray(a, dtype=np.float64).reshape(-1) for a in ranges[key])
            joints = self.joints_for(key)
            for unit in ("rad", "deg", "range_m100_100"):
                idx = [d for d, j in enumerate(joints) if j is not None and j.role == "joint" and j.unit == unit]
                if not idx:
                    continue
                with np.errstate(invalid="ignore"):
                    reach = float(np.nanmax(np.abs(np.r_[lo[idx], hi[idx]]), initial=0.0))
                    span = float(np.nanmax(hi[idx] - lo[idx], initial=0.0))
                if unit == "rad" and reach > 2 * math.pi:
                    problems.append(f"{key}: joints reach {reach:.1f} where the profile declares radians: degrees?")
                elif unit == "deg" and reach <= math.pi and span > RADIANS_UNDER_DEGREES_SPAN:
                    problems.append(f"{key}: joints span {span:.2f} within +-pi where the profile declares degrees: radians?")
                elif unit == "range_m100_100" and reach > 100 * (1 + HARD_TOLERANCE):
                    problems.append(f"{key}: joints reach {reach:.1f} beyond LeRobot's -100..100 normalisation: degrees?")
        return problems


def _scaled(lim: JointLimit, scale: float) -> JointLimit:
    """A degree limit in the radians of the reader's stream."""
    def s(x: float | None) -> float | None:
        return None if x is None else x * scale
    return JointLimit(lim.side, lim.name, lim.role, "rad", s(lim.lower), s(lim.upper), s(lim.velocity),
                      f"{lim.source} (degrees, converted to radians as the reader converts the values)",
                      lim.hard, lim.note)


def _outside(variant: UnitVariant, naming: Naming, vectors: Mapping[str, tuple[str, ...]], ranges: Ranges,
             hard: bool) -> list[tuple[str, float, float]]:
    """(name, value, limit passed) of every dimension whose range leaves the variant's (hard or soft) limits."""
    table = naming.table()
    out = []
    for key, names in vectors.items():
        if key not in ranges:
            continue
        lo, hi = (np.asarray(a, dtype=np.float64).reshape(-1) for a in ranges[key])
        for d, n in enumerate(names):
            entry = table.get(n)
            if entry is None or entry[2] != "qpos" or d >= len(lo):
                continue
            lim = variant.limit(entry[0], entry[1])
            if lim is None or lim.hard != hard or lim.lower is None or lim.upper is None:
                continue
            tol = HARD_TOLERANCE * (lim.upper - lim.lower) if hard else 0.0
            if lo[d] < lim.lower - tol:
                out.append((n, float(lo[d]), lim.lower))
            elif hi[d] > lim.upper + tol:
                out.append((n, float(hi[d]), lim.upper))
    return out


def _choose_variant(naming: Naming, vectors: Mapping[str, tuple[str, ...]],
                    ranges: Ranges | None) -> tuple[UnitVariant, str]:
    variants = naming.variants
    if len(variants) == 1:
        return variants[0], variants[0].description
    if not ranges:
        return variants[0], f"no values to decide between {', '.join(v.name for v in variants)}: {variants[0].description}"
    hard = {v.name: _outside(v, naming, vectors, ranges, hard=True) for v in variants}
    open_ = [v for v in variants if not hard[v.name]]
    if not open_:
        best = min(variants, key=lambda v: len(hard[v.name]))
        n, value, limit = hard[best.name][0]
        return best, f"values leave every variant's hard limits ({n} {value:g} past {limit:g}): {best.description}"
    fitting = [v for v in open_ if not _outside(v, naming, vectors, ranges, hard=False)]
    chosen = (fitting or open_)[0]
    reasons = []
    for v in variants:
        if hard[v.name]:
            n, value, limit = hard[v.name][0]
            reasons.append(f"{n} reaches {value:g}, past {limit:g}: not {v.name}")
    if not fitting:  # every variant's (soft) limits are left somewhere: the first one judges, and says so
        n, value, limit = _outside(chosen, naming, vectors, ranges, hard=False)[0]
        reasons.append(f"no variant holds every value ({n} reaches {value:g}, past {limit:g} in {chosen.name})")
    elif not reasons:
        reasons.append(f"values within the limits of {chosen.name}")
    others = [v.name for v in (fitting or open_) if v is not chosen]
    tail = f"; ambiguous: {', '.join(others)} fits too" if others and fitting else ""
    return chosen, f"{'; '.join(reasons)}: {chosen.description}{tail}"


def _foreign(naming: Naming, vectors: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The names a naming does not know in the vectors where it knows some: a robot whose names are only
    partly this naming's is another robot."""
    table = naming.table()
    out = []
    for names in vectors.values():
        if any(n in table for n in names):
            out += [n for n in names if n not in table]
    return out


def _span(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"


def detect(robot_type: str | None, vectors: Mapping[str, list[str] | tuple[str, ...]],
           ranges: Ranges | None = None, override: RobotProfile | None = None,
           mapped: Mapping[str, Naming] | None = None) -> RobotMatch:
    """The robot, naming and unit variant of a dataset.

    ``vectors``: per stream or feature key (``observation.state``, ``action``, ``arms/right/qpos``) the
    names of its dimensions; ``ranges``: per key the per-dimension minimum and maximum over the dataset, as
    stored (to choose a unit variant); ``override``: a profile the user gave (``--robot-file``), used
    whatever the robot_type says. ``robot_type`` first, then the names, then the values decide.

    ``mapped``: per ``arms/<side>/qpos`` stream that the reader mapped from a LeRobot feature, the naming
    it came from (``ArmColumns.profile_naming()``): the stream is judged by that naming's limits (LeRobot's
    gripper motor angle, a ROS 2 v0.3 joint frame), given in the stream's radians where the naming stores
    degrees; ``ranges`` of such a stream are in the stream's units, as for any other."""
    mapped = {k: n for k, n in (mapped or {}).items() if k in vectors}
    written = {k: written_names(k, list(v), mapped.get(k)) for k, v in vectors.items()}
    scales = {k: reader_scale(n) for k, n in mapped.items()}
    scales = {k: f for k, f in scales.items() if f != 1.0}
    if ranges and scales:  # the variant is chosen in the naming's own units
        ranges = {k: ((np.asarray(r[0]) / scales[k], np.asarray(r[1]) / scales[k]) if k in scales else r)
                  for k, r in ranges.items()}
    known = profiles()
    candidates = [override] if override is not None else [p for p in known.values() if p.namings]
    scored = []
    for rank, p in enumerate(candidates):
        for order, naming in enumerate(p.namings):
            count, sides, names = _parsed(naming, written)
            if sides:
                typed = bool(robot_type) and robot_type in naming.robot_types
                scored.append((-count, not typed, rank, order, p, naming, names))
    scored.sort(key=lambda s: s[:4])
    typed_profiles = [p for p in candidates if robot_type and robot_type in p.robot_types]
    said = f"robot_type {robot_type}" if robot_type else "no robot_type"
    if override is not None:
        said = f"robot file {override.path}"

    def match(p: RobotProfile, naming: Naming, names: list[str], lead: str) -> RobotMatch:
        variant, reason = _choose_variant(naming, written, ranges)
        converted = "; degrees converted to radians by the reader" if scales else ""
        return RobotMatch(p, naming, variant, f"{lead}; names {_span(names)} ({naming.name}); {reason}{converted}",
                          written, scales)

    if override is not None:
        if scored:
            return match(override, scored[0][5], scored[0][6], said)
        return RobotMatch(override, None, None, f"{said}; no dimension name is one of its namings': no joint known", written)
    if typed_profiles:
        mine = [s for s in scored if s[4] in typed_profiles]
        if mine:
            return match(mine[0][4], mine[0][5], mine[0][6], said)
        if scored:
            p, naming, names = scored[0][4], scored[0][5], scored[0][6]
            return match(p, naming, names, f"{said} names {typed_profiles[0].name}, but the names are {p.name}'s")
        p = typed_profiles[0]
        return RobotMatch(p, None, None, f"{said}; no dimension name is one of {p.name}'s namings': no joint known",
                          written)
    if scored:
        # without a robot_type that names it, a profile is taken from the names only if they are wholly its
        # own: other robots reuse LeRobot's SO-style names (a Piper driven by an SO-101 leader, a 7-joint arm
        # with one more wrist joint), and another robot's limits would fail a clean dataset
        whole = [s for s in scored if not _foreign(s[5], written)]
        if not whole:
            p, naming = scored[0][4], scored[0][5]
            foreign = _foreign(naming, written)
            return RobotMatch(known[GENERIC], None, None,
                              f"{said}{' (not a known one)' if robot_type else ''}; names partly {p.name}'s "
                              f"({naming.name}), partly not ({', '.join(foreign[:3])}"
                              f"{' ...' if len(foreign) > 3 else ''}): generic, no unit or limit known "
                              f"(--robot {p.name} judges by it)", written)
        scored = whole
        best = scored[0]
        alike = sorted({s[4].name for s in scored if s[0] == best[0] and s[4] is not best[4]})
        lead = said + (" (not a known one)" if robot_type else "")
        m = match(best[4], best[5], best[6], lead)
        if alike:
            m = RobotMatch(m.profile, m.naming, m.unit_variant,
                           m.why + f"; the names are also {', '.join(alike)}'s: {best[4].name} assumed "
                                   "(a robot_type would decide)", written, scales)
        return m
    return RobotMatch(known[GENERIC], None, None,
                      f"{said}; no profile knows these names: generic (no unit or limit known)", written)
