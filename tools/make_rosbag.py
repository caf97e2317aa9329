"""Synthetic OpenArm ROS bags (rosbag2 MCAP / SQLite3, ROS 1 .bag) written by rosbags, with injected faults.

    .venv/bin/python tools/make_rosbag.py /tmp/bag --storage mcap --seconds 2 --cameras head,wrist_left
    .venv/bin/python tools/make_rosbag.py /tmp/bag.bag --storage ros1 --fault late:/camera/head/image_raw/compressed:100

The bags look like the OpenArm's ROS 2 stack recorded them with ``ros2 bag record`` (no ROS installed:
rosbags' own writers and typestores, ``Stores.ROS2_HUMBLE`` for rosbag2, ``Stores.ROS1_NOETIC`` for ROS 1):

- ``/joint_states`` ``sensor_msgs/msg/JointState`` at ``joint_hz``: ``openarm_left_joint1..7``,
  ``openarm_left_finger_joint1/2``, the same for ``openarm_right_`` (18 names; finger_joint2 mimics
  finger_joint1). Positions are smooth sines inside the OpenArm's joint limits (radians; the fingers in
  metres, 0..0.044), velocities their analytic derivative, efforts small seeded noise.
- ``/{left,right}_forward_position_controller/commands`` ``std_msgs/msg/Float64MultiArray`` (7 values: the
  joints' sine led by 20 ms) and ``/{left,right}_gripper_controller/commands`` (1 value, metres) at
  ``command_hz``; no header, only the bag's log time.
- with ``trajectory``: ``/{left,right}_joint_trajectory_controller/joint_trajectory``
  ``trajectory_msgs/msg/JointTrajectory`` at 10 Hz, one point 0.1 s ahead.
- each camera: ``/camera/<name>/image_raw/compressed`` ``sensor_msgs/msg/CompressedImage`` (a real JPEG; eight
  distinct frames per camera, shown in turn) or, with ``image`` rgb8/bgr8/mono8, ``/camera/<name>/image_raw``
  ``sensor_msgs/msg/Image``.
- ``markers``: one ``std_msgs/msg/String`` "start" on ``/episode_marker`` at each time (seconds from the start).

Sample k of a topic is captured at ``start_ns + round(k * 1e9 / hz)`` (its header stamp) and logged at capture +
``latency_ms``; the topics' timelines are merged so the log times never decrease, and every message is built
and serialised as it is written (memory stays flat in the bag's length).

Faults (``--fault SPEC``, repeatable; a topic name never holds a colon):

- ``stop:<topic>:<at_s>:<duration_s>``: the topic publishes nothing in [at, at + duration).
- ``late:<topic>:<ms>``: its log time is capture + ms (header stamps stay the capture time).
- ``backwards:<topic>:<at_s>:<ms>``: the first message at or after ``at_s`` carries a header stamp ``ms``
  earlier than the previous message's (log time unchanged); only topics with a header.
- ``sag:<topic>:<at_s>:<duration_s>:<factor>``: in that window the topic publishes at ``hz * factor``.

The command line prints one line: the path, the message count, the size in MB and the seconds it took.
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SIDES = ("left", "right")
ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
JOINT_NAMES = tuple(
    f"openarm_{side}_{j}" for side in SIDES for j in (*ARM_JOINTS, "finger_joint1", "finger_joint2")
)
# the joints' centre and swing (radians), inside the OpenArm v10 limits: left joint2 is in [-3.32, 0.17], right
# joint2 in [-0.17, 3.32], joint4 in [0, 2.44], joint6 in [-0.79, 0.79], the others wider than +-1.4
ARM_OFFSET = {"left": np.array([0.0, -0.5, 0.0, 1.2, 0.0, 0.0, 0.0]),
              "right": np.array([0.0, 0.5, 0.0, 1.2, 0.0, 0.0, 0.0])}
ARM_AMPLITUDE = 0.3
ARM_FREQ = 0.5
FINGER_MID, FINGER_AMPLITUDE, FINGER_FREQ = 0.022, 0.02, 0.25  # metres: 0.002 .. 0.042
COMMAND_LEAD_S = 0.02
TRAJECTORY_HZ = 10.0
MARKER_TOPIC = "/episode_marker"
STORAGES = ("mcap", "sqlite3", "ros1")
IMAGES = {"compressed": 3, "rgb8": 3, "bgr8": 3, "mono8": 1}
DISTINCT_FRAMES = 8
FAULT_KINDS = {"stop": 2, "late": 1, "backwards": 2, "sag": 3}

# per joint phase (18 values: left 7 arm + 2 fingers, right 7 + 2); finger_joint2 shares finger_joint1's phase
_ARM_PHASE = {s: np.linspace(0.0, 2.0, 7) + (0.0 if s == "left" else 0.7) for s in SIDES}
_FINGER_PHASE = {"left": 0.0, "right": 1.3}


def arm_position(side: str, t: float | np.ndarray) -> np.ndarray:
    """Joint1..7 of ``side`` at ``t`` seconds from the start (radians; shape (7,) or (len(t), 7))."""
    t = np.asarray(t, dtype=np.float64)[..., None]
    return ARM_OFFSET[side] + ARM_AMPLITUDE * np.sin(2 * np.pi * ARM_FREQ * t + _ARM_PHASE[side])


def arm_velocity(side: str, t: float | np.ndarray) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)[..., None]
    w = 2 * np.pi * ARM_FREQ
    return ARM_AMPLITUDE * w * np.cos(w * t + _ARM_PHASE[side])


def finger_position(side: str, t: float | np.ndarray) -> np.ndarray:
    """finger_joint1 (= finger_joint2) of ``side`` at ``t`` seconds, metres."""
    return FINGER_MID + FINGER_AMPLITUDE * np.sin(2 * np.pi * FINGER_FREQ * np.asarray(t) + _FINGER_PHASE[side])


def finger_velocity(side: str, t: float | np.ndarray) -> np.ndarray:
    w = 2 * np.pi * FINGER_FREQ
    return FINGER_AMPLITUDE * w * np.cos(w * np.asarray(t) + _FINGER_PHASE[side])


def joint_state_arrays(t: float) -> tuple[np.ndarray, np.ndarray]:
    """The 18 positions and velocities of ``/joint_states`` at ``t`` seconds (order of :data:`JOINT_NAMES`)."""
    pos, vel = [], []
    for side in SIDES:
        f, fv = float(finger_position(side, t)), float(finger_velocity(side, t))
        pos += [arm_position(side, t), [f, f]]
        vel += [arm_velocity(side, t), [fv, fv]]
    return np.concatenate(pos), np.concatenate(vel)


# ------------------------------------------------------------------------------------------------ faults


@dataclass
class _Faults:
    """The faults of one topic (times in ns from the start)."""

    stops: list[tuple[int, int]] = field(default_factory=list)
    late_ns: int | None = None
    backwards: list[tuple[int, int]] = field(default_factory=list)  # (at, ms in ns)
    sags: list[tuple[int, int, float]] = field(default_factory=list)


def _ns(seconds: float) -> int:
    return int(round(float(seconds) * 1e9))


def parse_faults(faults: Sequence[str], topics: dict[str, bool]) -> dict[str, _Faults]:
    """``topics``: name -> has a header. Raises ValueError naming an unknown fault, topic or malformed spec."""
    out: dict[str, _Faults] = {}
    for spec in faults:
        parts = str(spec).split(":")
        kind = parts[0]
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r} in {spec!r} (known: {', '.join(FAULT_KINDS)})")
        if len(parts) != 2 + FAULT_KINDS[kind]:
            raise ValueError(f"fault {spec!r}: expected {kind}:<topic>:" + ":".join(
                {"stop": ["<at_s>", "<duration_s>"], "late": ["<ms>"], "backwards": ["<at_s>", "<ms>"],
                 "sag": ["<at_s>", "<duration_s>", "<factor>"]}[kind]))
        topic = parts[1]
        if topic not in topics:
            raise ValueError(f"fault {spec!r}: the bag has no topic {topic!r} (topics: {', '.join(topics)})")
        try:
            args = [float(x) for x in parts[2:]]
        except ValueError:
            raise ValueError(f"fault {spec!r}: its arguments must be numbers") from None
        f = out.setdefault(topic, _Faults())
        if kind == "stop":
            if args[1] < 0:
                raise ValueError(f"fault {spec!r}: negative duration")
            f.stops.append((_ns(args[0]), _ns(args[0] + args[1])))
        elif kind == "late":
            f.late_ns = _ns(args[0] / 1000.0)
        elif kind == "backwards":
            if not topics[topic]:
                raise ValueError(f"fault {spec!r}: {topic} has no header stamp to step backwards")
            f.backwards.append((_ns(args[0]), _ns(args[1] / 1000.0)))
        else:
            if not 0.0 < args[2] <= 1.0:
                raise ValueError(f"fault {spec!r}: the factor must be in (0, 1]")
            f.sags.append((_ns(args[0]), _ns(args[0] + args[1]), args[2]))
    return out


# ------------------------------------------------------------------------------------------------ topics


@dataclass
class _Topic:
    name: str
    msgtype: str
    header: bool
    captures: Callable[[], Iterator[int]]  # capture times, ns from the start, increasing
    build: Callable[[int, int, int, int], object]  # (k, capture_ns abs, stamp_ns abs, seq) -> message


def _rate(hz: float, end_ns: int) -> Callable[[], Iterator[int]]:
    if hz <= 0:
        raise ValueError(f"a rate must be positive, not {hz}")

    def gen() -> Iterator[int]:
        k = 0
        while (t := int(round(k * 1e9 / hz))) < end_ns:
            yield t
            k += 1
    return gen


def _timeline(index: int, topic: _Topic, start_ns: int, latency_ns: int, faults: _Faults | None
              ) -> Iterator[tuple[int, int, int, int, int]]:
    """(log_ns, topic index, k, capture_ns, stamp_ns) of every message the topic publishes."""
    f = faults or _Faults()
    late = latency_ns if f.late_ns is None else f.late_ns
    acc = [1.0 - s[2] for s in f.sags]
    backwards_done = [False] * len(f.backwards)
    prev_stamp: int | None = None
    for k, rel in enumerate(topic.captures()):
        if any(a <= rel < b for a, b in f.stops):
            continue
        keep = True
        for i, (a, b, factor) in enumerate(f.sags):
            if a <= rel < b:
                acc[i] += factor
                if acc[i] >= 1.0 - 1e-9:
                    acc[i] -= 1.0
                else:
                    keep = False
        if not keep:
            continue
        capture = start_ns + rel
        stamp = capture
        for i, (at, back) in enumerate(f.backwards):
            if not backwards_done[i] and rel >= at:
                backwards_done[i] = True
                stamp = (capture if prev_stamp is None else prev_stamp) - back
        yield capture + late, index, k, capture, stamp
        prev_stamp = stamp


def _frames(name: str, size: tuple[int, int], image: str) -> list[bytes | np.ndarray]:
    """DISTINCT_FRAMES pictures of camera ``name``: a gradient whose bright bar moves with the frame number, a
    per-camera tint; JPEG bytes (``compressed``) or the raw uint8 pixels in the topic's encoding."""
    w, h = size
    code = sum(map(ord, name))  # a stable tint per camera name (str hash is salted per process)
    tint = np.array([code % 97 + 60, (code * 7) % 97 + 60, (code * 13) % 97 + 60], dtype=np.float64) / 255.0
    x = np.arange(w, dtype=np.float64)[None, :, None]
    y = np.arange(h, dtype=np.float64)[:, None, None]
    out: list[bytes | np.ndarray] = []
    for i in range(DISTINCT_FRAMES):
        centre = (i + 0.5) * w / DISTINCT_FRAMES
        bar = np.exp(-(((x - centre) / max(w / 16, 1.0)) ** 2))
        rgb = 255.0 * np.clip(tint * (0.3 + 0.5 * y / max(h - 1, 1)) + 0.6 * bar, 0.0, 1.0)
        rgb = np.broadcast_to(rgb, (h, w, 3)).astype(np.uint8)
        block = max(min(w, h) // 8, 1)  # the frame number as a block in the top-left corner
        rgb[:block, i * block:(i + 1) * block] = 255
        if image == "compressed":
            from openarm_sim_dataset.core.video_camera import encode_jpeg
            out.append(encode_jpeg(rgb))
        elif image == "rgb8":
            out.append(np.ascontiguousarray(rgb).reshape(-1))
        elif image == "bgr8":
            out.append(np.ascontiguousarray(rgb[..., ::-1]).reshape(-1))
        else:
            grey = (0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]).astype(np.uint8)
            out.append(np.ascontiguousarray(grey).reshape(-1))
    return out


def _topics(ts, ros1: bool, start_ns: int, seconds: float, joint_hz: float, command_hz: float, camera_hz: float,
            cameras: Sequence[str], size: tuple[int, int], image: str, markers: Sequence[float],
            trajectory: bool, seed: int) -> list[_Topic]:
    T = ts.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]
    Duration = T["builtin_interfaces/msg/Duration"]
    end_ns = _ns(seconds)
    rng = np.random.default_rng(seed)

    def header(stamp_ns: int, seq: int, frame_id: str = ""):
        t = Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
        return Header(seq=seq, stamp=t, frame_id=frame_id) if ros1 else Header(stamp=t, frame_id=frame_id)

    def secs(capture_ns: int) -> float:
        return (capture_ns - start_ns) * 1e-9

    topics: list[_Topic] = []
    JointState = T["sensor_msgs/msg/JointState"]
    names = list(JOINT_NAMES)

    def joint_state(k, capture, stamp, seq):
        pos, vel = joint_state_arrays(secs(capture))
        effort = rng.normal(0.0, 0.05, len(names))
        return JointState(header=header(stamp, seq), name=names, position=pos, velocity=vel, effort=effort)

    topics.append(_Topic("/joint_states", "sensor_msgs/msg/JointState", True, _rate(joint_hz, end_ns),
                         joint_state))

    F64 = T["std_msgs/msg/Float64MultiArray"]
    layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    for side in SIDES:
        def arm_cmd(k, capture, stamp, seq, side=side):
            return F64(layout=layout, data=arm_position(side, secs(capture) + COMMAND_LEAD_S))

        topics.append(_Topic(f"/{side}_forward_position_controller/commands", "std_msgs/msg/Float64MultiArray",
                             False, _rate(command_hz, end_ns), arm_cmd))
    for side in SIDES:
        def grip_cmd(k, capture, stamp, seq, side=side):
            return F64(layout=layout, data=np.array([finger_position(side, secs(capture) + COMMAND_LEAD_S)]))

        topics.append(_Topic(f"/{side}_gripper_controller/commands", "std_msgs/msg/Float64MultiArray",
                             False, _rate(command_hz, end_ns), grip_cmd))
    if trajectory:
        JT, JTP = T["trajectory_msgs/msg/JointTrajectory"], T["trajectory_msgs/msg/JointTrajectoryPoint"]
        empty = np.zeros(0)
        for side in SIDES:
            jn = [f"openarm_{side}_{j}" for j in ARM_JOINTS]

            def traj(k, capture, stamp, seq, side=side, jn=jn):
                point = JTP(positions=arm_position(side, secs(capture) + 0.1), velocities=empty,
                            accelerations=empty, effort=empty, time_from_start=Duration(sec=0, nanosec=100_000_000))
                return JT(header=header(stamp, seq), joint_names=jn, points=[point])

            topics.append(_Topic(f"/{side}_joint_trajectory_controller/joint_trajectory",
                                 "trajectory_msgs/msg/JointTrajectory", True, _rate(TRAJECTORY_HZ, end_ns), traj))
    w, h = size
    for cam in cameras:
        frames = _frames(cam, size, image)
        frame_id = f"{cam}_camera_optical_frame"
        if image == "compressed":
            CI = T["sensor_msgs/msg/CompressedImage"]
            data = [np.frombuffer(b, dtype=np.uint8) for b in frames]

            def jpeg(k, capture, stamp, seq, data=data, frame_id=frame_id):
                return CI(header=header(stamp, seq, frame_id), format="jpeg", data=data[k % DISTINCT_FRAMES])

            topics.append(_Topic(f"/camera/{cam}/image_raw/compressed", "sensor_msgs/msg/CompressedImage", True,
                                 _rate(camera_hz, end_ns), jpeg))
        else:
            Img = T["sensor_msgs/msg/Image"]
            step = w * IMAGES[image]

            def raw(k, capture, stamp, seq, frames=frames, frame_id=frame_id, step=step):
                return Img(header=header(stamp, seq, frame_id), height=h, width=w, encoding=image, is_bigendian=0,
                           step=step, data=frames[k % DISTINCT_FRAMES])

            topics.append(_Topic(f"/camera/{cam}/image_raw", "sensor_msgs/msg/Image", True,
                                 _rate(camera_hz, end_ns), raw))
    if markers:
        String = T["std_msgs/msg/String"]
        at = sorted(_ns(m) for m in markers)
        if at[0] < 0 or at[-1] > end_ns:
            raise ValueError(f"a marker must be within 0..{seconds} s, not {markers}")
        topics.append(_Topic(MARKER_TOPIC, "std_msgs/msg/String", False, lambda: iter(at),
                             lambda k, c, s, q: String(data="start")))
    return topics


# ------------------------------------------------------------------------------------------------ writing


def _bag_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def write_bag(path, storage="mcap", seconds=2.0, joint_hz=250.0, command_hz=100.0, camera_hz=30.0,
              cameras=("head",), size=(64, 48), image="compressed", start_ns=1_760_000_000_000_000_000,
              latency_ms=1.0, faults=(), markers=(), trajectory=False, seed=0) -> tuple[Path, int]:
    """:func:`write_openarm_bag`, returning the path and the number of messages written."""
    from rosbags.typesys import Stores, get_typestore

    path = Path(path)
    if storage not in STORAGES:
        raise ValueError(f"unknown storage {storage!r} (known: {', '.join(STORAGES)})")
    if image not in IMAGES:
        raise ValueError(f"unknown image {image!r} (known: {', '.join(IMAGES)})")
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, not {seconds}")
    if isinstance(cameras, str):
        cameras = [c for c in cameras.split(",") if c]
    if len(set(cameras)) != len(cameras):
        raise ValueError(f"a camera is named twice: {cameras}")
    size = (int(size[0]), int(size[1]))
    if min(size) < 1:
        raise ValueError(f"bad image size {size}")
    if path.exists():
        raise FileExistsError(f"{path} exists already")
    ros1 = storage == "ros1"
    ts = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_HUMBLE)
    topics = _topics(ts, ros1, int(start_ns), seconds, joint_hz, command_hz, camera_hz, list(cameras), size, image,
                     list(markers), trajectory, seed)
    by_topic = parse_faults(list(faults), {t.name: t.header for t in topics})
    latency_ns = _ns(latency_ms / 1000.0)
    serialize = ts.serialize_ros1 if ros1 else ts.serialize_cdr

    if ros1:
        from rosbags.rosbag1 import Writer as Writer1
        writer = Writer1(path)
    else:
        from rosbags.rosbag2 import StoragePlugin, Writer as Writer2
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        writer = Writer2(path, version=Writer2.VERSION_LATEST, storage_plugin=plugin)

    count = 0
    with writer:
        conns = [writer.add_connection(t.name, t.msgtype, typestore=ts) for t in topics]
        seqs = [0] * len(topics)
        timelines = [_timeline(i, t, int(start_ns), latency_ns, by_topic.get(t.name)) for i, t in enumerate(topics)]
        # ties in log time keep the topics' order (heapq.merge is stable over its iterables)
        for log_ns, i, k, capture, stamp in heapq.merge(*timelines, key=lambda e: e[0]):
            topic = topics[i]
            msg = topic.build(k, capture, stamp, seqs[i])
            writer.write(conns[i], log_ns, serialize(msg, topic.msgtype))
            seqs[i] += 1
            count += 1
    return path, count


def write_openarm_bag(path, storage="mcap", seconds=2.0, joint_hz=250.0, command_hz=100.0, camera_hz=30.0,
                      cameras=("head",), size=(64, 48), image="compressed", start_ns=1_760_000_000_000_000_000,
                      latency_ms=1.0, faults=(), markers=(), trajectory=False, seed=0) -> Path:
    """Write a synthetic OpenArm bag at ``path`` (a rosbag2 folder for ``mcap`` / ``sqlite3``, a ``.bag`` file
    for ``ros1``) and return the path. See the module's docstring for the topics and the fault syntax."""
    return write_bag(path, storage=storage, seconds=seconds, joint_hz=joint_hz, command_hz=command_hz,
                     camera_hz=camera_hz, cameras=cameras, size=size, image=image, start_ns=start_ns,
                     latency_ms=latency_ms, faults=faults, markers=markers, trajectory=trajectory, seed=seed)[0]


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be WxH (e.g. 64x48), not {text!r}") from None
    return w, h


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the bag to write (must not exist): a folder for rosbag2, a file for ros1")
    p.add_argument("--storage", choices=STORAGES, default="mcap")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--joint-hz", type=float, default=250.0)
    p.add_argument("--command-hz", type=float, default=100.0)
    p.add_argument("--camera-hz", type=float, default=30.0)
    p.add_argument("--cameras", default="head", help="comma separated camera names ('' for none)")
    p.add_argument("--size", type=_size, default=(64, 48), help="image WxH")
    p.add_argument("--image", choices=tuple(IMAGES), default="compressed")
    p.add_argument("--latency-ms", type=float, default=1.0)
    p.add_argument("--start-ns", type=int, default=1_760_000_000_000_000_000)
    p.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="stop:TOPIC:AT_S:DUR_S, late:TOPIC:MS, backwards:TOPIC:AT_S:MS, sag:TOPIC:AT_S:DUR_S:FACTOR")
    p.add_argument("--marker", action="append", type=float, default=[], metavar="S",
                   help="an /episode_marker 'start' message at S seconds from the start")
    p.add_argument("--trajectory", action="store_true", help="also the joint_trajectory_controller topics")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    prog = Path(sys.argv[0]).name if argv is None else "make_rosbag.py"
    if a.out.exists():
        print(f"{prog}: error: {a.out} exists already", file=sys.stderr)
        return 2
    began = time.perf_counter()
    try:
        path, count = write_bag(a.out, storage=a.storage, seconds=a.seconds, joint_hz=a.joint_hz,
                                command_hz=a.command_hz, camera_hz=a.camera_hz, cameras=a.cameras, size=a.size,
                                image=a.image, start_ns=a.start_ns, latency_ms=a.latency_ms, faults=a.fault,
                                markers=a.marker, trajectory=a.trajectory, seed=a.seed)
    except (ValueError, FileExistsError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    took = time.perf_counter() - began
    print(f"{path}  {count} messages  {_bag_size(path) / 1e6:.2f} MB  {took:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
