"""What each ROS message type gives a dataset: a registry, one row per type (:data:`MESSAGES`).

A row says what the type is for (``joints``: named joint values; ``vector``: unnamed values whose joints
the map names; ``camera``: a picture), whether it carries a header stamp, and how one message becomes
values. Adding a type is adding a row; the conversion table in the documentation is generated from it.
Type names are ROS 2's (``sensor_msgs/msg/JointState``); a ROS 1 bag's ``sensor_msgs/JointState`` is the
same row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from openarm_sim_dataset.core.video_camera import JPEG_QUALITY, encode_jpeg

#: attribute of a JointState field
JOINT_FIELDS = (("position", "qpos"), ("velocity", "qvel"), ("effort", "qtorque"))


@dataclass(frozen=True)
class Joints:
    """Named joint values of one message: ``names`` and per attribute (``qpos``, ``qvel``, ``qtorque``) one
    value per name (float64)."""

    names: tuple[str, ...]
    values: dict[str, np.ndarray]


@dataclass(frozen=True)
class MessageType:
    """One registry row. ``role``: ``joints`` | ``vector`` | ``camera``; ``header``: the message has a
    ``std_msgs/Header`` whose stamp is the time of its values; ``decode``: message -> :class:`Joints`
    (joints), float64 array (vector) or JPEG bytes (camera); ``note``: how it converts, for the docs."""

    msgtype: str
    role: str
    header: bool
    decode: Callable
    note: str


def _joint_state(msg) -> Joints:
    names = tuple(msg.name)
    values = {}
    for field, attribute in JOINT_FIELDS:
        v = np.asarray(getattr(msg, field), dtype=np.float64)
        if len(v) == len(names) and len(names):
            values[attribute] = v
    return Joints(names, values)


def _trajectory(msg) -> Joints:
    names = tuple(msg.joint_names)
    if not msg.points:
        return Joints(names, {})
    p = msg.points[0]
    values = {}
    for field, attribute in (("positions", "qpos"), ("velocities", "qvel"), ("effort", "qtorque")):
        v = np.asarray(getattr(p, field), dtype=np.float64)
        if len(v) == len(names) and len(names):
            values[attribute] = v
    return Joints(names, values)


def _multiarray(msg) -> np.ndarray:
    return np.asarray(msg.data, dtype=np.float64)


def _gripper_command(msg) -> np.ndarray:
    return np.array([msg.position], dtype=np.float64)


class ImageError(ValueError):
    """A picture that cannot be stored (an encoding not handled, a size that does not add up)."""


#: sensor_msgs/Image encodings read: name -> (channels, dtype, to RGB)
IMAGE_ENCODINGS = {
    "rgb8": (3, np.uint8, lambda a: a),
    "bgr8": (3, np.uint8, lambda a: a[..., ::-1]),
    "rgba8": (4, np.uint8, lambda a: a[..., :3]),
    "bgra8": (4, np.uint8, lambda a: a[..., 2::-1]),
    "mono8": (1, np.uint8, lambda a: np.repeat(a, 3, axis=2)),
    "8UC1": (1, np.uint8, lambda a: np.repeat(a, 3, axis=2)),
    "8UC3": (3, np.uint8, lambda a: a),
}


def image_to_jpeg(msg, quality: int = JPEG_QUALITY) -> bytes:
    """A ``sensor_msgs/Image`` as JPEG (RGB); rows of ``step`` bytes, padding dropped."""
    enc = str(msg.encoding)
    if enc not in IMAGE_ENCODINGS:
        raise ImageError(f"image encoding {enc!r} is not one of {', '.join(IMAGE_ENCODINGS)}")
    ch, dtype, to_rgb = IMAGE_ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    data = np.asarray(msg.data, dtype=np.uint8)
    if h <= 0 or w <= 0 or step < w * ch or data.size < h * step:
        raise ImageError(f"a {w}x{h} {enc} image with step {step} needs {h * step} bytes, has {data.size}")
    rows = data[: h * step].reshape(h, step)[:, : w * ch]
    return encode_jpeg(np.ascontiguousarray(to_rgb(rows.reshape(h, w, ch))), quality)


def _compressed(msg) -> bytes:
    fmt = str(msg.format).lower()
    data = bytes(msg.data)
    if "jpeg" not in fmt and "jpg" not in fmt and not data.startswith(b"\xff\xd8"):
        raise ImageError(f"compressed image format {msg.format!r}: only JPEG is stored as it is "
                         "(a PNG or compressedDepth stream is not converted)")
    if not data.startswith(b"\xff\xd8"):
        raise ImageError(f"compressed image format {msg.format!r}: the data is not JPEG (no SOI marker)")
    return data


MESSAGES: tuple[MessageType, ...] = (
    MessageType("sensor_msgs/msg/JointState", "joints", True, _joint_state,
                "position, velocity, effort by joint name (the robot profile's names) -> qpos, qvel, qtorque"),
    MessageType("trajectory_msgs/msg/JointTrajectory", "joints", True, _trajectory,
                "the first point's positions (velocities, effort) by joint_names: the command sent"),
    MessageType("std_msgs/msg/Float64MultiArray", "vector", False, _multiarray,
                "data in the joint order the map gives (a forward command controller's command)"),
    MessageType("control_msgs/msg/GripperCommand", "vector", False, _gripper_command,
                "position: the gripper's command"),
    MessageType("sensor_msgs/msg/Image", "camera", True, image_to_jpeg,
                f"{', '.join(IMAGE_ENCODINGS)}: encoded as JPEG (quality {JPEG_QUALITY})"),
    MessageType("sensor_msgs/msg/CompressedImage", "camera", True, _compressed,
                "JPEG: stored as it is, not re-encoded (PNG and depth are refused)"),
)

_BY_TYPE = {m.msgtype: m for m in MESSAGES}


def ros2_name(msgtype: str) -> str:
    """``sensor_msgs/JointState`` (ROS 1) -> ``sensor_msgs/msg/JointState``."""
    parts = msgtype.split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else msgtype


def message_type(msgtype: str) -> MessageType | None:
    """The registry row of a bag's type name (ROS 1 or ROS 2 spelling), or None."""
    return _BY_TYPE.get(ros2_name(msgtype))


def stamp_ns(msg) -> int:
    """A header's stamp in ns (0 when unset)."""
    s = msg.header.stamp
    return int(s.sec) * 1_000_000_000 + int(s.nanosec)
