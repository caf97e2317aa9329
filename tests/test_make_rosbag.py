"""tools/make_rosbag.py: the synthetic OpenArm bags read back with rosbags' AnyReader (rosbag2 MCAP and SQLite3,
ROS 1), their topics, types, rates, times and contents, and every injected fault."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from rosbags.highlevel import AnyReader  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import make_rosbag  # noqa: E402

START = 1_760_000_000_000_000_000
SIDE_TOPICS = ("/{}_forward_position_controller/commands", "/{}_gripper_controller/commands")


def read(path: Path) -> dict[str, list[tuple[int, int | None, object]]]:
    """topic -> [(log_ns, header stamp ns or None, message)] in the bag's order; also checks the log order."""
    out: dict[str, list] = {}
    last = -1
    with AnyReader([path], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        for conn, log_ns, raw in reader.messages():
            assert log_ns >= last, f"log time went back on {conn.topic}"
            last = log_ns
            msg = reader.deserialize(raw, conn.msgtype)
            header = getattr(msg, "header", None)
            stamp = None if header is None else header.stamp.sec * 1_000_000_000 + header.stamp.nanosec
            out.setdefault(conn.topic, []).append((log_ns, stamp, msg))
    read.types = types  # type: ignore[attr-defined]
    return out


def near(count: int, expected: float) -> bool:
    return abs(count - expected) <= 1


@pytest.mark.parametrize("storage", ["mcap", "sqlite3", "ros1"])
def test_bag_reads_back(tmp_path, storage):
    path = tmp_path / ("bag.bag" if storage == "ros1" else "bag")
    seconds = 1.0
    got = make_rosbag.write_openarm_bag(path, storage=storage, seconds=seconds, cameras=("head", "wrist_left"),
                                        markers=(0.25, 0.75), trajectory=True)
    assert got == path and (path.is_file() if storage == "ros1" else (path / "metadata.yaml").is_file())
    msgs = read(path)
    expected = {
        "/joint_states": ("sensor_msgs/msg/JointState", 250.0),
        "/camera/head/image_raw/compressed": ("sensor_msgs/msg/CompressedImage", 30.0),
        "/camera/wrist_left/image_raw/compressed": ("sensor_msgs/msg/CompressedImage", 30.0),
        "/left_joint_trajectory_controller/joint_trajectory": ("trajectory_msgs/msg/JointTrajectory", 10.0),
        "/right_joint_trajectory_controller/joint_trajectory": ("trajectory_msgs/msg/JointTrajectory", 10.0),
        "/episode_marker": ("std_msgs/msg/String", 2.0),
    }
    for side in ("left", "right"):
        for t in SIDE_TOPICS:
            expected[t.format(side)] = ("std_msgs/msg/Float64MultiArray", 100.0)
    assert read.types == {t: v[0] for t, v in expected.items()}  # type: ignore[attr-defined]
    for topic, (_, hz) in expected.items():
        assert near(len(msgs[topic]), seconds * hz), (topic, len(msgs[topic]))

    js = msgs["/joint_states"]
    assert js[0][1] == START and js[0][0] == START + 1_000_000  # stamp = capture, log = capture + 1 ms
    assert js[1][1] == START + 4_000_000
    msg = js[0][2]
    assert list(msg.name) == list(make_rosbag.JOINT_NAMES) and len(msg.name) == 18
    assert msg.name[3] == "openarm_left_joint4" and msg.name[16] == "openarm_right_finger_joint1"
    assert msg.header.frame_id == ""
    k = 100  # t = 0.4 s
    pos = np.asarray(js[k][2].position)
    assert pos[3] == pytest.approx(1.2 + 0.3 * np.sin(2 * np.pi * 0.5 * 0.4 + make_rosbag._ARM_PHASE["left"][3]))
    assert pos[7] == pos[8] and 0.0 <= pos[7] <= 0.044  # finger_joint2 mimics finger_joint1, metres
    all_pos = np.array([m.position for _, _, m in js])
    assert (all_pos[:, [3, 12]] >= 0).all() and (all_pos[:, [3, 12]] <= 2.4).all()
    assert np.asarray(js[k][2].velocity).shape == (18,)

    cmd = msgs["/left_forward_position_controller/commands"]
    assert len(cmd[0][2].data) == 7 and len(msgs["/right_gripper_controller/commands"][0][2].data) == 1
    assert cmd[0][1] is None and cmd[0][0] == START + 1_000_000
    np.testing.assert_allclose(cmd[40][2].data, make_rosbag.arm_position("left", 0.42))  # led by 20 ms

    img = msgs["/camera/head/image_raw/compressed"]
    assert img[0][2].format == "jpeg" and bytes(img[0][2].data[:2]) == b"\xff\xd8"
    assert bytes(img[0][2].data) != bytes(img[1][2].data)  # the picture changes per frame
    assert img[3][1] == START + round(3 * 1e9 / 30)

    traj = msgs["/right_joint_trajectory_controller/joint_trajectory"][2][2]
    assert list(traj.joint_names) == [f"openarm_right_joint{i}" for i in range(1, 8)]
    assert len(traj.points) == 1 and len(traj.points[0].positions) == 7
    assert traj.points[0].time_from_start.nanosec == 100_000_000

    markers = msgs["/episode_marker"]
    assert [m.data for _, _, m in markers] == ["start", "start"]
    assert [log for log, _, _ in markers] == [START + 250_000_000 + 1_000_000, START + 750_000_000 + 1_000_000]


@pytest.mark.parametrize(("image", "channels"), [("rgb8", 3), ("bgr8", 3), ("mono8", 1)])
def test_raw_images(tmp_path, image, channels):
    path = make_rosbag.write_openarm_bag(tmp_path / "bag", seconds=0.2, image=image, size=(40, 30),
                                         cameras=("wrist_right",))
    msgs = read(path)
    assert read.types["/camera/wrist_right/image_raw"] == "sensor_msgs/msg/Image"  # type: ignore[attr-defined]
    frame = msgs["/camera/wrist_right/image_raw"][0][2]
    assert (frame.width, frame.height, frame.encoding, frame.step) == (40, 30, image, 40 * channels)
    assert len(frame.data) == 40 * 30 * channels


def test_faults(tmp_path):
    cam = "/camera/head/image_raw/compressed"
    left = "/left_forward_position_controller/commands"
    path = make_rosbag.write_openarm_bag(tmp_path / "bag", seconds=1.0, faults=(
        f"stop:{cam}:0.2:0.3", f"late:{cam}:100", "backwards:/joint_states:0.5:30", f"sag:{left}:0.2:0.4:0.5"))
    msgs = read(path)

    captured = [(stamp - START) / 1e9 for _, stamp, _ in msgs[cam]]
    assert not [t for t in captured if 0.2 <= t < 0.5] and near(len(captured), 30 - 9)
    assert {log - stamp for log, stamp, _ in msgs[cam]} == {100_000_000}  # late: log = capture + 100 ms

    stamps = np.array([s for _, s, _ in msgs["/joint_states"]])
    back = np.flatnonzero(np.diff(stamps) < 0)
    assert len(back) == 1 and stamps[back[0] + 1] == stamps[back[0]] - 30_000_000
    assert (stamps[back[0] + 1] - START) != 500_000_000 and len(stamps) == 250
    logs = np.array([log for log, _, _ in msgs["/joint_states"]])
    assert logs[back[0] + 1] - START == 500_000_000 + 1_000_000  # the log time is unchanged

    logs = np.array([log - 1_000_000 - START for log, _, _ in msgs[left]])
    in_window = ((logs >= 200_000_000) & (logs < 600_000_000)).sum()
    assert in_window == 20 and len(logs) == 100 - 20  # 40 at 100 Hz, halved
    assert len(msgs["/right_forward_position_controller/commands"]) == 100  # the other side untouched


@pytest.mark.parametrize(("fault", "words"), [
    ("jitter:/joint_states:5", "unknown fault 'jitter'"),
    ("stop:/no_such_topic:0:1", "/no_such_topic"),
    ("backwards:/left_gripper_controller/commands:0.5:10", "no header"),
    ("late:/joint_states", "expected late:<topic>:<ms>"),
])
def test_bad_fault(tmp_path, fault, words):
    with pytest.raises(ValueError, match=words):
        make_rosbag.write_openarm_bag(tmp_path / "bag", seconds=0.1, faults=(fault,))
    assert not (tmp_path / "bag").exists()


def test_cli(tmp_path, capsys):
    out = tmp_path / "bag.bag"
    assert make_rosbag.main([str(out), "--storage", "ros1", "--seconds", "0.2", "--cameras", "head,wrist_left",
                             "--size", "32x24", "--image", "mono8", "--marker", "0.1"]) == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and line.startswith(str(out)) and " MB " in line
    count = int(line.split()[1])
    assert count == 50 + 4 * 20 + 2 * 6 + 1
    assert make_rosbag.main([str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "exists" in err
