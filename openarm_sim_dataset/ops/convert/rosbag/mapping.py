"""Which topic of a bag is which stream of the dataset: the map (a YAML file, or made from the bag).

Without a map, :func:`auto_map` maps by what the bag holds: a ``JointState`` or ``JointTrajectory`` topic by
its joint names through the OpenArm profile's namings (``openarm_left_joint1`` .. to the left arm's
``joint1``, ``openarm_left_finger_joint1`` to its gripper; ``finger_joint2`` mimics it and is dropped), a
command topic of unnamed values (``Float64MultiArray``, ``GripperCommand``) by the OpenArm controllers'
topic names (``/left_forward_position_controller/commands``: the left arm's joint1..7;
``/left_gripper_controller/commands``: its gripper), and every image topic to a camera named after its
topic (``/camera/head/image_raw/compressed`` -> ``head``). :func:`map_yaml` writes the map as a file to
edit (``dataset-convert --inspect BAG``); :func:`load_map` reads one back and checks it against the bag.

A map's fields: ``topics`` (topic -> ``{to: obs|action|camera, arm, joints, name, stamp}``),
``ignore_joints`` (names a joint topic may carry that no stream takes), ``reference`` (the topic whose
messages are the LeRobot frames), ``max_age`` (seconds: a LeRobot frame whose inputs are older is dropped),
``split_on`` (a topic each message of which begins an episode).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.robots import get_profile
from openarm_sim_dataset.core.yaml_codec import dump_yaml, load_yaml_document

from .bag import Bag, BagError
from .messages import Joints, message_type

ROLES = ("obs", "action", "camera")
STAMPS = ("header", "receive")
ARM_JOINTS = layout.ARM_JOINTS[:-1]  # joint1..joint7
#: path components that name the kind of picture, not the camera
_IMAGE_WORDS = {"camera", "cameras", "image", "image_raw", "image_rect", "image_rect_raw", "image_color",
                "image_rect_color", "compressed", "color", "rgb", "raw", "sensor_msgs", "usb_cam", "theora"}


@dataclass(frozen=True)
class TopicMap:
    """One mapped topic. ``to``: obs | action | camera. Joint topics (named values) resolve their names
    through the profile; a vector topic (unnamed values) gives its ``arm`` and ``joints`` (joint1..7,
    gripper) in order; a camera its ``name``. ``stamp``: header (the message's header stamp) or receive
    (the bag's receive time)."""

    topic: str
    to: str
    stamp: str
    arm: str | None = None
    joints: tuple[str, ...] = ()
    name: str | None = None


@dataclass
class BagMap:
    topics: dict[str, TopicMap]
    ignore_joints: tuple[str, ...] = ()
    reference: str | None = None
    max_age: float | None = None
    split_on: str | None = None
    source: str = "made from the bag"
    unmapped: dict[str, str] = field(default_factory=dict)  # topic -> why not

    def cameras(self) -> dict[str, str]:
        """camera name -> topic"""
        return {m.name: t for t, m in self.topics.items() if m.to == "camera"}


def openarm_names() -> dict[str, tuple[str, str, bool]]:
    """Every joint name an OpenArm naming writes (positions) -> (side, joint, mimic)."""
    out: dict[str, tuple[str, str, bool]] = {}
    for naming in get_profile("openarm").namings:
        for full, (side, joint, attribute, mimic) in naming.table().items():
            if attribute == "qpos":
                out.setdefault(full, (side, joint, mimic))
    return out


def resolve_joints(names: tuple[str, ...], ignore: tuple[str, ...], where: str, path) -> list[tuple[int, str, str]]:
    """(index in the message, side, joint) of every name; mimic joints and ``ignore`` dropped. A name no
    OpenArm naming knows is a BagError naming it."""
    table = openarm_names()
    out = []
    for i, n in enumerate(names):
        if n in ignore:
            continue
        if n not in table:
            raise BagError(path, f"topic {where}: joint name {n!r} is not one the OpenArm profile knows "
                                 f"(e.g. openarm_left_joint1, openarm_left_finger_joint1); name it under ignore_joints "
                                 f"in a map (dataset-convert --inspect prints one) to leave it out")
        side, joint, mimic = table[n]
        if not mimic:
            out.append((i, side, joint))
    return out


def camera_name(topic: str) -> str:
    """``/camera/head/image_raw/compressed`` -> ``head``; ``/wrist_left/color/image_raw`` -> ``wrist_left``."""
    parts = [p for p in topic.split("/") if p and p.lower() not in _IMAGE_WORDS]
    name = parts[-1] if parts else "camera"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".-") or "camera"
    return name[:128]


def _side(topic: str) -> str | None:
    sides = [s for s in layout.ARM_SIDES if re.search(rf"(^|[/_]){s}([/_]|$)", topic)]
    return sides[0] if len(sides) == 1 else None


def _first(bag: Bag, topic: str):
    for _t, _ns, msg in bag.messages([topic]):
        return msg
    return None


def _vector_guess(topic: str, msgtype: str, length: int | None) -> tuple[str | None, tuple[str, ...], str]:
    """(arm, joints, why not) of an unnamed command topic, from the OpenArm controllers' topic names."""
    side = _side(topic)
    if side is None:
        return None, (), "no arm side (left/right) in its name: give arm and joints in a map"
    low = topic.lower()
    if "velocity" in low or "effort" in low:
        return None, (), "a velocity or effort command, not a position: map it by hand if it is one"
    if "gripper" in low or "finger" in low or "hand" in low:
        if msgtype.endswith("GripperCommand") or length == 1:
            return side, ("gripper",), ""
        return None, (), f"a gripper topic of {length} values: give its joints in a map"
    if length == 7:
        return side, ARM_JOINTS, ""
    if length == 8:
        return side, (*ARM_JOINTS, "gripper"), ""
    return None, (), f"{length} values: give its joints in a map"


def auto_map(bag: Bag) -> BagMap:
    """The map a bag of the OpenArm's own topics needs no file for (see the module's docstring)."""
    topics: dict[str, TopicMap] = {}
    unmapped: dict[str, str] = {}
    cams: dict[str, str] = {}
    for name, t in sorted(bag.topics.items()):
        row = message_type(t.msgtype)
        if row is None:
            unmapped[name] = f"{t.msgtype}: not a type the converter reads"
            continue
        if t.count == 0:
            unmapped[name] = "no message"
            continue
        if row.role == "camera":
            cam = camera_name(name)
            if cam in cams:
                cam = re.sub(r"[^A-Za-z0-9._-]", "_", name.strip("/"))[:128]
            cams[cam] = name
            topics[name] = TopicMap(name, "camera", "header", name=cam)
        elif row.role == "joints":
            msg = _first(bag, name)
            joints = row.decode(msg) if msg is not None else Joints((), {})
            known = openarm_names()
            if not joints.names or not any(n in known for n in joints.names):
                unmapped[name] = "no joint name the OpenArm profile knows"
                continue
            command = t.msgtype.endswith("JointTrajectory") or re.search(r"command|target|desired|goal", name.lower())
            topics[name] = TopicMap(name, "action" if command else "obs", "header")
        else:
            msg = _first(bag, name)
            length = len(row.decode(msg)) if msg is not None else None
            arm, joints, why = _vector_guess(name, t.msgtype, length)
            if arm is None:
                unmapped[name] = why
                continue
            topics[name] = TopicMap(name, "action", "receive", arm=arm, joints=joints)
    _one_source_per_joint(bag, topics, unmapped)
    return BagMap(topics, unmapped=unmapped)


def _covers(bag: Bag, tm: TopicMap) -> set[tuple[str, str, str]]:
    if tm.to == "camera":
        return set()
    if tm.arm is not None:
        return {(tm.to, tm.arm, j) for j in tm.joints}
    msg = _first(bag, tm.topic)
    names = message_type(bag.topics[tm.topic].msgtype).decode(msg).names if msg is not None else ()
    table = openarm_names()
    return {(tm.to, table[n][0], table[n][1]) for n in names if n in table and not table[n][2]}


def _one_source_per_joint(bag: Bag, topics: dict[str, TopicMap], unmapped: dict[str, str]) -> None:
    """Where two topics give the same joints (a forward controller and a trajectory controller, of which
    one was active), keep the one with more messages; the other is listed as not mapped, with why."""
    taken: dict[tuple[str, str, str], str] = {}
    for name in sorted(topics, key=lambda t: -bag.topics[t].count):
        cover = _covers(bag, topics[name])
        clash = sorted({taken[k] for k in cover if k in taken})
        if clash:
            unmapped[name] = (f"gives the same joints as {', '.join(clash)}, which has more messages "
                              "(map it instead by hand)")
            del topics[name]
            continue
        taken.update(dict.fromkeys(cover, name))


def map_yaml(m: BagMap, bag: Bag | None = None) -> bytes:
    """The map as a YAML file to edit; unmapped topics listed in comments with the reason."""
    doc = {"topics": {}}
    for t, tm in m.topics.items():
        entry = {"to": tm.to}
        if tm.to == "camera":
            entry["name"] = tm.name
        if tm.arm is not None:
            entry["arm"] = tm.arm
            entry["joints"] = list(tm.joints)
        entry["stamp"] = tm.stamp
        doc["topics"][t] = entry
    doc["ignore_joints"] = list(m.ignore_joints)
    doc["reference"] = m.reference
    doc["max_age"] = m.max_age
    doc["split_on"] = m.split_on
    head = ["# dataset-convert map: which topic is which stream (edit, then dataset-convert BAG OUT --map FILE)",
            "# to: obs | action | camera; stamp: header (the message's header stamp) | receive (the bag's receive time)",
            "# reference: the topic whose messages are the LeRobot frames; max_age: seconds a frame's inputs may be old",
            "# split_on: a topic each message of which begins an episode (null: one bag, one episode)"]
    for t, why in m.unmapped.items():
        head.append(f"# not mapped: {t}: {why}")
    return ("\n".join(head) + "\n").encode() + dump_yaml(doc)


def _fail(path, what: str) -> BagError:
    return BagError(path, what)


def load_map(path: str | os.PathLike, bag: Bag) -> BagMap:
    """A map file, checked against ``bag``: every topic it names exists with a type the converter reads,
    each field has a value it knows. A fault is a BagError naming the map file and the topic."""
    path = Path(path)
    doc = load_yaml_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), dict) or not doc["topics"]:
        raise _fail(path, "a map needs a 'topics' mapping of topic -> {to: obs|action|camera, ...}")
    known = {"topics", "ignore_joints", "reference", "max_age", "split_on"}
    extra = sorted(set(doc) - known)
    if extra:
        raise _fail(path, f"unknown key {extra[0]!r} (known: {', '.join(sorted(known))})")
    topics: dict[str, TopicMap] = {}
    for t, spec in doc["topics"].items():
        if not isinstance(spec, dict):
            raise _fail(path, f"topic {t}: expected a mapping like {{to: obs}}, got {spec!r:.60}")
        if t not in bag.topics:
            raise _fail(path, f"topic {t}: not in the bag {bag.path} (its topics: {', '.join(sorted(bag.topics))})")
        row = message_type(bag.topics[t].msgtype)
        if row is None:
            raise _fail(path, f"topic {t}: {bag.topics[t].msgtype} is not a type the converter reads")
        unknown = sorted(set(spec) - {"to", "arm", "joints", "name", "stamp"})
        if unknown:
            raise _fail(path, f"topic {t}: unknown key {unknown[0]!r} (known: to, arm, joints, name, stamp)")
        to = spec.get("to")
        if to not in ROLES:
            raise _fail(path, f"topic {t}: to must be one of {', '.join(ROLES)}, not {to!r}")
        if (to == "camera") != (row.role == "camera"):
            raise _fail(path, f"topic {t}: a {bag.topics[t].msgtype} cannot be mapped to {to}")
        stamp = spec.get("stamp", "header" if row.header else "receive")
        if stamp not in STAMPS:
            raise _fail(path, f"topic {t}: stamp must be header or receive, not {stamp!r}")
        if stamp == "header" and not row.header:
            raise _fail(path, f"topic {t}: a {bag.topics[t].msgtype} has no header: stamp must be receive")
        tm = TopicMap(t, to, stamp)
        if to == "camera":
            tm = replace(tm, name=layout.check_name(spec.get("name") or camera_name(t), "camera name", path))
        elif row.role == "vector":
            arm, joints = spec.get("arm"), spec.get("joints")
            if arm not in layout.ARM_SIDES:
                raise _fail(path, f"topic {t}: arm must be one of {', '.join(layout.ARM_SIDES)}, not {arm!r}")
            if not isinstance(joints, list) or not joints or any(j not in layout.ARM_JOINTS for j in joints):
                raise _fail(path, f"topic {t}: joints must list some of {', '.join(layout.ARM_JOINTS)}, not {joints!r}")
            if len(set(joints)) != len(joints):
                raise _fail(path, f"topic {t}: a joint is named twice in {joints}")
            tm = replace(tm, arm=arm, joints=tuple(joints))
        elif spec.get("arm") is not None or spec.get("joints") is not None:
            raise _fail(path, f"topic {t}: a {bag.topics[t].msgtype} names its joints itself (no arm or joints)")
        topics[t] = tm
    ignore = doc.get("ignore_joints") or []
    if not isinstance(ignore, list) or not all(isinstance(n, str) for n in ignore):
        raise _fail(path, f"ignore_joints must be a list of joint names, not {ignore!r:.60}")
    m = BagMap(topics, tuple(ignore), source=str(path))
    m.reference = _topic_field(doc, "reference", path, bag)
    m.split_on = _topic_field(doc, "split_on", path, bag)
    age = doc.get("max_age")
    if age is not None and (isinstance(age, bool) or not isinstance(age, (int, float)) or not age > 0):
        raise _fail(path, f"max_age must be a positive number of seconds, not {age!r}")
    m.max_age = None if age is None else float(age)
    return m


def _topic_field(doc: dict, key: str, path, bag: Bag) -> str | None:
    t = doc.get(key)
    if t is None:
        return None
    if not isinstance(t, str) or t not in bag.topics:
        raise _fail(path, f"{key}: topic {t!r} is not in the bag {bag.path}")
    return t
