"""What a robot is, as data: a :class:`RobotProfile` read from one YAML file.

A profile names the robot's joints (each a ``joint`` or the ``gripper``) and its **namings**: how each
recorder writes the same joints (LeRobot's ``<motor>.pos``, ROS 2 ``/joint_states`` names, this package's
``right_joint1.pos``). A name is ``<prefix><joint name><suffix>``: the prefix says the side, the suffix the
attribute (``.pos`` -> ``qpos``). A naming has one or more **unit variants** (the same names written in
different units by different versions of the recorder, e.g. LeRobot's SO arms: -100..100 up to 0.4.3,
degrees from 0.4.4); each variant gives, per joint, the unit as stored, the position limits and the velocity
limit in that unit (per second), and the source of every number. A number no source gives is null.

Units (:data:`UNITS`): ``rad``, ``deg``, ``m``, ``range_m100_100`` (LeRobot's -100..100 of the calibrated
range), ``range_0_100`` (0..100 of it), ``normalized_0_1``. Limits flagged ``hard`` cannot be left by the
recorder (LeRobot clamps its normalisations); the others are the joint's mechanical range, which noise or a
calibration can leave by a little.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MetadataError

#: unit as stored -> what it is
UNITS: dict[str, str] = {
    "rad": "radians",
    "deg": "degrees",
    "m": "metres",
    "range_m100_100": "-100..100 of the calibrated range (LeRobot MotorNormMode.RANGE_M100_100)",
    "range_0_100": "0..100 of the calibrated range (LeRobot MotorNormMode.RANGE_0_100)",
    "normalized_0_1": "0..1 (closed..open)",
}
ROLES = ("joint", "gripper")
#: attributes a naming's suffix can name (this package's arm stream attributes)
ATTRIBUTES = ("qpos", "qvel", "qtorque")


@dataclass(frozen=True)
class JointLimit:
    """One joint as one naming and unit variant store it. ``lower``/``upper``: position limits in
    ``unit``; ``velocity``: the speed limit in ``unit`` per second; None where no source gives the
    number (``note`` says why). ``hard``: values can never leave [lower, upper] (a clamping
    normalisation). ``source``: where each number comes from."""

    side: str
    name: str
    role: str
    unit: str
    lower: float | None
    upper: float | None
    velocity: float | None
    source: str
    hard: bool = False
    note: str = ""


@dataclass(frozen=True)
class UnitVariant:
    """The units and limits one version of a recorder writes under a naming's names."""

    name: str
    description: str
    limits: dict[tuple[str, str], JointLimit]  # (side, joint) -> limit

    def limit(self, side: str, joint: str) -> JointLimit | None:
        return self.limits.get((side, joint))


@dataclass(frozen=True)
class Naming:
    """How one recorder names the joints: ``<prefix><names[joint]><suffix>``; ``prefixes`` maps a prefix
    to its side, ``suffixes`` a suffix to its attribute (``qpos``, ``qvel``, ``qtorque``); ``mimic`` maps
    extra names (a second finger that mimics the first) to the joint they follow."""

    name: str
    written_by: str
    robot_types: tuple[str, ...]
    prefixes: tuple[tuple[str, str], ...]
    names: tuple[tuple[str, str], ...]  # (joint, name as written without prefix and suffix)
    suffixes: tuple[tuple[str, str], ...]
    mimic: tuple[tuple[str, str], ...]
    variants: tuple[UnitVariant, ...]

    def table(self) -> dict[str, tuple[str, str, str, bool]]:
        """Every full name -> (side, joint, attribute, mimic)."""
        out: dict[str, tuple[str, str, str, bool]] = {}
        written = [(j, n, False) for j, n in self.names] + [(j, n, True) for n, j in self.mimic]
        for prefix, side in self.prefixes:
            for joint, name, mimic in written:
                for suffix, attribute in self.suffixes:
                    out.setdefault(prefix + name + suffix, (side, joint, attribute, mimic))
        return out

    def example(self, side: str | None = None) -> list[str]:
        """The position names of one side (the first prefix of ``side``, else the first prefix), in
        joint order: what a reference page shows."""
        prefix = next((p for p, s in self.prefixes if side is None or s == side), "")
        suffix = next((s for s, a in self.suffixes if a == "qpos"), "")
        return [prefix + n + suffix for _, n in self.names]


@dataclass(frozen=True)
class RobotProfile:
    """A robot: its joints, the ``robot_type`` strings that name it, and its namings. ``path`` is the
    YAML file it was read from."""

    name: str
    description: str
    robot_types: tuple[str, ...]
    sides: tuple[str, ...]
    joints: tuple[tuple[str, str], ...]  # (joint, role) in order
    namings: tuple[Naming, ...]
    precedence: int
    sources: dict[str, str]
    path: str

    def naming(self, name: str) -> Naming:
        for n in self.namings:
            if n.name == name:
                return n
        raise KeyError(f"robot {self.name} has no naming {name!r} (known: {', '.join(n.name for n in self.namings)})")

    def role(self, joint: str) -> str:
        return dict(self.joints)[joint]


# ------------------------------------------------------------------------------------------------- parsing
class _Reader:
    """Reads one profile document, raising MetadataError(path, "<field>: what is wrong") on the first fault."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def fail(self, where: str, what: str) -> MetadataError:
        return MetadataError(self.path, f"{where}: {what}")

    def field(self, doc: dict, key: str, where: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        name = f"{where}.{key}" if where else key
        if key not in doc:
            if default is ...:
                raise self.fail(name, "missing")
            return default
        value = doc[key]
        if kind is float:
            kind = (int, float)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(name, f"must be {expected}, not {value!r}")
        return value

    def number(self, value: Any, where: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(where, f"must be a finite number or null, not {value!r}")
        return float(value)

    def pair(self, value: Any, where: str) -> tuple[float | None, float | None]:
        if not isinstance(value, list) or len(value) != 2:
            raise self.fail(where, f"must be [lower, upper], not {value!r}")
        lo, hi = self.number(value[0], f"{where}[0]"), self.number(value[1], f"{where}[1]")
        if lo is not None and hi is not None and lo > hi:
            raise self.fail(where, f"lower {lo} is above upper {hi}")
        return lo, hi

    def strings(self, doc: dict, key: str, where: str) -> tuple[str, ...]:
        value = self.field(doc, key, where, list)
        name = f"{where}.{key}" if where else key
        if not all(isinstance(v, str) and v for v in value):
            raise self.fail(name, "must be a list of non-empty strings")
        return tuple(value)

    def mapping(self, doc: dict, key: str, where: str, default: Any = ...) -> dict[str, str]:
        value = self.field(doc, key, where, dict, default)
        name = f"{where}.{key}" if where else key
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise self.fail(name, "must map strings to strings")
        return value

    def source(self, key: Any, sources: dict[str, str], where: str) -> str:
        if not isinstance(key, str) or key not in sources:
            raise self.fail(where, f"{key!r} is not a key of sources (known: {', '.join(sources) or 'none'})")
        return sources[key]

    def limits(self, spec: Any, where: str, joint: str, role: str, sides: tuple[str, ...],
               sources: dict[str, str]) -> dict[tuple[str, str], JointLimit]:
        if not isinstance(spec, dict):
            raise self.fail(where, "must be a mapping (unit, lower/upper or per side, velocity, source)")
        unit = self.field(spec, "unit", where, str)
        if unit not in UNITS:
            raise self.fail(f"{where}.unit", f"{unit!r} is not a unit (known: {', '.join(UNITS)})")
        converted = "rad" in spec or any(f"{s}_rad" in spec for s in sides)
        if converted and unit != "deg":
            raise self.fail(where, "limits given in radians (rad:) convert only to unit deg")
        per_side: dict[str, tuple[float | None, float | None]] = {}
        for side in sides:
            for key, scale in ((side, 1.0), (f"{side}_rad", math.degrees(1.0))):
                if key in spec:
                    lo, hi = self.pair(spec[key], f"{where}.{key}")
                    per_side[side] = (None if lo is None else lo * scale, None if hi is None else hi * scale)
        if per_side and set(per_side) != set(sides):
            missing = [s for s in sides if s not in per_side]
            raise self.fail(f"{where}.{missing[0]}", "missing (limits given per side need every side)")
        if "rad" in spec:
            lo, hi = self.pair(spec["rad"], f"{where}.rad")
            shared = (None if lo is None else math.degrees(lo), None if hi is None else math.degrees(hi))
        else:
            lo, hi = self.number(spec.get("lower"), f"{where}.lower"), self.number(spec.get("upper"), f"{where}.upper")
            if lo is not None and hi is not None and lo > hi:
                raise self.fail(where, f"lower {lo} is above upper {hi}")
            shared = (lo, hi)
        if not per_side and ("lower" not in spec or "upper" not in spec) and "rad" not in spec:
            raise self.fail(where, "needs lower and upper (null where unknown), rad: [lower, upper], or one pair per side")
        if "velocity" in spec and "velocity_rad" in spec:
            raise self.fail(where, "give velocity or velocity_rad, not both")
        if "velocity_rad" in spec:
            if unit != "deg":
                raise self.fail(f"{where}.velocity_rad", "converts only to unit deg")
            v = self.number(spec["velocity_rad"], f"{where}.velocity_rad")
            velocity = None if v is None else math.degrees(v)
        else:
            velocity = self.number(self.field(spec, "velocity", where, (int, float, type(None))), f"{where}.velocity")
        has_position = any(x is not None for pair in [shared, *per_side.values()] for x in pair)
        parts = []
        if has_position:
            text = self.source(spec.get("source"), sources, f"{where}.source")
            parts.append(f"position: {text}" + (" (radians, converted to degrees)" if converted else ""))
        if velocity is not None:
            text = self.source(spec.get("velocity_source", spec.get("source")), sources, f"{where}.velocity_source")
            parts.append(f"velocity: {text}" + (" (rad/s, converted to deg/s)" if "velocity_rad" in spec else ""))
        note = self.field(spec, "note", where, str, "")
        if (not has_position or velocity is None) and not note:
            raise self.fail(f"{where}.note", "missing: a number left null says why")
        hard = self.field(spec, "hard", where, bool, False)
        return {(side, joint): JointLimit(side, joint, role, unit, *per_side.get(side, shared), velocity,
                                          "; ".join(parts), hard, note) for side in sides}


def parse_profile(doc: Any, path: str | os.PathLike) -> RobotProfile:
    """A profile from a parsed YAML document; MetadataError(path, "<field>: ...") on the first fault."""
    r = _Reader(path)
    if not isinstance(doc, dict):
        raise MetadataError(path, "a robot profile must be a YAML mapping")
    name = r.field(doc, "name", "", str)
    description = r.field(doc, "description", "", str)
    robot_types = r.strings(doc, "robot_types", "")
    sides = r.strings(doc, "sides", "")
    precedence = r.field(doc, "precedence", "", int, 100)
    sources = r.mapping(doc, "sources", "", {})
    joints = []
    for i, j in enumerate(r.field(doc, "joints", "", list)):
        where = f"joints[{i}]"
        if not isinstance(j, dict):
            raise r.fail(where, "must be a mapping with name and role")
        jname, role = r.field(j, "name", where, str), r.field(j, "role", where, str)
        if role not in ROLES:
            raise r.fail(f"{where}.role", f"{role!r} is not a role (known: {', '.join(ROLES)})")
        joints.append((jname, role))
    known = dict(joints)
    namings = []
    for i, n in enumerate(r.field(doc, "namings", "", list)):
        where = f"namings[{i}]"
        if not isinstance(n, dict):
            raise r.fail(where, "must be a mapping")
        nname = r.field(n, "name", where, str)
        where = f"namings.{nname}"
        prefixes = r.mapping(n, "prefixes", where)
        bad = [s for s in prefixes.values() if s not in sides]
        if bad:
            raise r.fail(f"{where}.prefixes", f"side {bad[0]!r} is not one of sides ({', '.join(sides)})")
        names = r.mapping(n, "names", where)
        if set(names) != set(known):
            missing = sorted(set(known) - set(names)) or sorted(set(names) - set(known))
            raise r.fail(f"{where}.names", f"must name every joint once (not {missing[0]!r})")
        suffixes = r.mapping(n, "suffixes", where)
        bad = [a for a in suffixes.values() if a not in ATTRIBUTES]
        if bad:
            raise r.fail(f"{where}.suffixes", f"{bad[0]!r} is not an attribute (known: {', '.join(ATTRIBUTES)})")
        if "qpos" not in suffixes.values():
            raise r.fail(f"{where}.suffixes", "none names positions (qpos)")
        mimic = r.mapping(n, "mimic", where, {})
        bad = [j for j in mimic.values() if j not in known]
        if bad:
            raise r.fail(f"{where}.mimic", f"{bad[0]!r} is not a joint")
        variants = []
        for k, v in enumerate(r.field(n, "variants", where, list)):
            vwhere = f"{where}.variants[{k}]"
            if not isinstance(v, dict):
                raise r.fail(vwhere, "must be a mapping")
            vname = r.field(v, "name", vwhere, str)
            vwhere = f"{where}.variants.{vname}"
            specs = r.field(v, "joints", vwhere, dict)
            missing = [j for j in known if j not in specs]
            if missing:
                raise r.fail(f"{vwhere}.joints.{missing[0]}", "missing")
            limits: dict[tuple[str, str], JointLimit] = {}
            for jname, role in joints:
                limits.update(r.limits(specs[jname], f"{vwhere}.joints.{jname}", jname, role, sides, sources))
            variants.append(UnitVariant(vname, r.field(v, "description", vwhere, str), limits))
        if not variants:
            raise r.fail(f"{where}.variants", "must hold at least one unit variant")
        # order-free: a mapping written in any key order is the same naming (per side, the longest prefix first)
        ordered = tuple(sorted(prefixes.items(), key=lambda kv: (sides.index(kv[1]), -len(kv[0]), kv[0])))
        types = r.strings(n, "robot_types", where) if "robot_types" in n else ()
        namings.append(Naming(nname, r.field(n, "written_by", where, str), types, ordered,
                              tuple((j, names[j]) for j, _ in joints), tuple(sorted(suffixes.items())),
                              tuple(sorted(mimic.items())), tuple(variants)))
    return RobotProfile(name, description, robot_types, sides, tuple(joints), tuple(namings), precedence,
                        dict(sources), os.fspath(path))
