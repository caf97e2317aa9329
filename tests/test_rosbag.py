"""ROS bags in, without ROS: bags written by rosbags' own writers (tools/make_rosbag.py: rosbag2 MCAP and
SQLite3, ROS 1) with the OpenArm's topics, joint names and message types, converted by the subprocess
CLI, validated, and read by openarm_dataset; the recording's faults named by topic and time; bad input one
line, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")
pq = pytest.importorskip("pyarrow.parquet")

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
import make_rosbag  # noqa: E402
from conftest import assert_reads_like_reference  # noqa: E402

from openarm_sim_dataset import Dataset  # noqa: E402

BIN = Path(sys.executable).parent
CAMERA = "/camera/head/image_raw/compressed"


def convert(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dataset-convert"), *map(str, args)], capture_output=True, text=True, timeout=300)


def read_bag(path: Path) -> dict[str, list[tuple[int, object]]]:
    """Every message of the bag, by topic, as rosbags alone reads it (the test's own reading)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC if path.suffix == ".bag" else Stores.ROS2_HUMBLE)
    out: dict[str, list] = {}
    with AnyReader([path], default_typestore=store) as r:
        for c, t, raw in r.messages():
            out.setdefault(c.topic, []).append((t, r.deserialize(raw, c.msgtype)))
    return out


def stamp(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp("bags")
    return {s: make_rosbag.write_openarm_bag(root / ("b.bag" if s == "ros1" else f"b_{s}"), storage=s, seconds=2.0,
                                             cameras=("head", "wrist_left"))
            for s in make_rosbag.STORAGES}


@pytest.mark.parametrize("storage", ["mcap", "sqlite3", "ros1"])
def test_bag_converts_with_no_map_to_values_equal_to_the_bag_that_validate_and_openarm_dataset_reads(bags, storage,
                                                                                                        tmp_path):
    bag = bags[storage]
    out = tmp_path / "out"
    p = convert(bag, out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{out}: valid" in p.stdout, p.stdout
    ds = Dataset(out)
    assert ds.episode_ids == ["0"] and sorted(ds.camera_names) == ["head", "wrist_left"]
    msgs = read_bag(bag)
    js = msgs["/joint_states"]
    names = list(js[0][1].name)
    # obs: every JointState message a row at its header stamp, joint1..7 + finger_joint1 per side, as float32
    for side in ("left", "right"):
        cols = [names.index(f"openarm_{side}_joint{i}") for i in range(1, 8)] + [names.index(f"openarm_{side}_finger_joint1")]
        want = np.array([np.asarray(m.position)[cols] for _, m in js], np.float32)
        s = ds.streams(ds.episodes[0], "obs")[f"arms/{side}/qpos"]
        np.testing.assert_array_equal(s.timestamps, [stamp(m) for _, m in js])
        np.testing.assert_array_equal(s.values, want)
        v = ds.streams(ds.episodes[0], "obs")[f"arms/{side}/qvel"]
        np.testing.assert_array_equal(v.values, np.array([np.asarray(m.velocity)[cols] for _, m in js], np.float32))
        # action: the forward controller's 7 joints at its receive times, the gripper command as of each
        arm = msgs[f"/{side}_forward_position_controller/commands"]
        grip = msgs[f"/{side}_gripper_controller/commands"]
        a = ds.streams(ds.episodes[0], "action")[f"arms/{side}/qpos"]
        gt = np.array([t for t, _ in grip])
        keep = [i for i, (t, _) in enumerate(arm) if t >= gt[0]]
        np.testing.assert_array_equal(a.timestamps, [arm[i][0] for i in keep])
        np.testing.assert_array_equal(a.values[:, :7], np.array([arm[i][1].data for i in keep], np.float32))
        g = np.searchsorted(gt, a.timestamps, side="right") - 1
        np.testing.assert_array_equal(a.values[:, 7], np.array([grip[i][1].data[0] for i in g], np.float32))
    # cameras: the JPEG bytes as the bag holds them, at their header stamps, inside the arms' span
    cam = ds.load_cameras(ds.episodes[0])["head"]
    frames = {stamp(m): bytes(m.data) for _, m in msgs[CAMERA]}
    assert cam.num_frames >= len(frames) - 2
    for i in range(cam.num_frames):
        f = cam.get_frame(i)
        assert frames[int(f.timestamp_ns)] == f.read_bytes()
    assert assert_reads_like_reference(out) > 1000
    assert "header stamps: /camera/head/image_raw/compressed" in p.stdout


def test_a_lone_mcap_file_converts_as_its_rosbag2_folder_does(bags, tmp_path):
    lone = next(bags["mcap"].glob("*.mcap"))
    a, b = convert(bags["mcap"], tmp_path / "folder"), convert(lone, tmp_path / "lone")
    assert a.returncode == b.returncode == 0, a.stdout + b.stdout + b.stderr
    for rel in ("obs/arms/left/state.parquet", "action/arms/right/state.parquet", "manifest.sha256"):
        assert (tmp_path / "folder/episodes/0" / rel).read_bytes() == (tmp_path / "lone/episodes/0" / rel).read_bytes()


def test_raw_images_in_every_encoding_become_jpeg_of_the_same_picture(tmp_path):
    from openarm_sim_dataset.core.camera import decode_jpeg

    for enc in ("rgb8", "bgr8", "mono8"):
        bag = make_rosbag.write_openarm_bag(tmp_path / f"b_{enc}", seconds=0.5, image=enc)
        out = tmp_path / f"o_{enc}"
        p = convert(bag, out)
        assert p.returncode == 0, p.stdout + p.stderr
        msgs = read_bag(bag)["/camera/head/image_raw"]
        ds = Dataset(out)
        cam = ds.load_cameras(ds.episodes[0])["head"]
        f = cam.get_frame(0)
        msg = next(m for _, m in msgs if stamp(m) == f.timestamp_ns)
        ch = 1 if enc == "mono8" else 3
        raw = np.asarray(msg.data).reshape(msg.height, msg.width, ch).astype(float)
        rgb = raw[..., ::-1] if enc == "bgr8" else np.repeat(raw, 3, axis=2) if ch == 1 else raw
        got = decode_jpeg(f.read_bytes()).astype(float)
        assert got.shape == rgb.shape
        assert np.abs(got - rgb).mean() < 3.0, enc  # JPEG quality 95 of the same picture


def test_a_folder_of_bags_is_one_episode_per_bag_and_split_on_cuts_at_each_marker(tmp_path):
    folder = tmp_path / "bags"
    folder.mkdir()
    for i, s in enumerate(("mcap", "sqlite3")):
        make_rosbag.write_openarm_bag(folder / f"take_{i}", storage=s, seconds=1.0, start_ns=1_760_000_000_000_000_000 + i * 10**10)
    p = convert(folder, tmp_path / "many")
    assert p.returncode == 0, p.stdout + p.stderr
    assert Dataset(tmp_path / "many").episode_ids == ["0", "1"]
    # two markers at once (a button read twice) begin an episode with no message: it takes no id
    bag = make_rosbag.write_openarm_bag(tmp_path / "marked", seconds=3.0, markers=(0.5, 0.5, 1.5))
    p = convert(bag, tmp_path / "split", "--split-on", "/episode_marker")
    assert p.returncode == 0, p.stdout + p.stderr
    ds = Dataset(tmp_path / "split")
    assert ds.episode_ids == ["0", "1"]
    t0 = 1_760_000_000_000_000_000
    for ep, (lo, hi) in zip(ds.episodes, ((0.5, 1.5), (1.5, 3.0))):
        ts = ds.streams(ep, "obs")["arms/left/qpos"].timestamps
        assert lo * 1e9 <= ts[0] - t0 < lo * 1e9 + 10**7 and ts[-1] - t0 < hi * 1e9
    assert "messages before the first /episode_marker message: not in an episode" in p.stdout
    assert "1 /episode_marker messages began an episode with no message: none made" in p.stdout


def test_the_recordings_faults_are_named_by_topic_and_time(tmp_path):
    bag = make_rosbag.write_openarm_bag(
        tmp_path / "faulty", seconds=6.0,
        faults=("stop:/joint_states:2.0:2.0", f"late:{CAMERA}:100", "backwards:/joint_states:1.0:50",
                "sag:/left_forward_position_controller/commands:4.5:1.2:0.5"))
    p = convert(bag, tmp_path / "out")
    assert p.returncode == 1, p.stdout + p.stderr  # converted, but the recording has faults
    out = p.stdout
    assert "FAIL topic_stops: /joint_states stops for 2.00" in out and "s at 1.99" in out, out
    assert (f"FAIL camera_lags: {CAMERA} lags /joint_states by 99 ms" in out
            or f"FAIL camera_lags: {CAMERA} lags /joint_states by 100 ms" in out), out
    assert "FAIL stamps_backwards: /joint_states header stamp goes back 50.0 ms at 1.00" in out, out
    assert "FAIL rate_sags: /left_forward_position_controller/commands sags to" in out, out
    assert "INVALID" in out  # the 2 s hole fails the timestamps check of the converted dataset too
    # the same bag without faults: every check passes (they can pass)
    clean = make_rosbag.write_openarm_bag(tmp_path / "clean", seconds=6.0)
    p = convert(clean, tmp_path / "clean_out")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "FAIL" not in p.stdout


def test_inspect_prints_topics_and_a_map_that_converts_the_same(tmp_path):
    bag = make_rosbag.write_openarm_bag(tmp_path / "b", seconds=1.0, trajectory=True)
    p = subprocess.run([str(BIN / "dataset-convert"), "--inspect", str(bag)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "/joint_states" in p.stdout and "sensor_msgs/msg/JointState" in p.stdout and "250.0" in p.stdout
    (tmp_path / "map.yaml").write_text(p.stdout)
    a = convert(bag, tmp_path / "auto")
    b = convert(bag, tmp_path / "mapped", "--map", tmp_path / "map.yaml")
    assert a.returncode == b.returncode == 0, a.stdout + b.stdout + b.stderr
    for rel in ("obs/arms/left/state.parquet", "action/arms/right/state.parquet"):
        ta = pq.read_table(tmp_path / "auto/episodes/0" / rel)
        tb = pq.read_table(tmp_path / "mapped/episodes/0" / rel)
        assert ta.equals(tb), rel


def _bad(tmp_path, args, expect):
    out = tmp_path / "never"
    p = convert(*args, out) if "--inspect" not in args else convert(*args)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0] and "Traceback" not in p.stderr, p.stderr
    assert not out.exists()
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".tmp")]
    return lines[0]


def test_bad_bags_and_maps_are_one_line_exit_2_and_nothing_written(tmp_path):
    import shutil

    bag = make_rosbag.write_openarm_bag(tmp_path / "b", seconds=1.0)
    # an unknown storage plugin
    odd = tmp_path / "odd"
    shutil.copytree(bag, odd)
    meta = odd / "metadata.yaml"
    meta.write_text(meta.read_text().replace("storage_identifier: mcap", "storage_identifier: foo"))
    _bad(tmp_path, [odd], "foo")
    # a truncated MCAP
    cut = tmp_path / "cut"
    shutil.copytree(bag, cut)
    f = next(cut.glob("*.mcap"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    _bad(tmp_path, [cut], str(cut))
    # a topic in the map that the bag lacks
    (tmp_path / "m.yaml").write_text("topics:\n  /nope: {to: obs}\n")
    line = _bad(tmp_path, [bag, "--map", tmp_path / "m.yaml"], "topic /nope: not in the bag")
    assert str(tmp_path / "m.yaml") in line
    # a joint name the profile does not know
    other = make_rosbag.write_openarm_bag(tmp_path / "other", seconds=0.5)
    import rosbags.rosbag2  # noqa: F401 - the writer that renames is the test's own below
    renamed = _rename_joint(other, tmp_path / "renamed", "openarm_left_joint3", "head_pan")
    _bad(tmp_path, [renamed], "joint name 'head_pan' is not one the OpenArm profile knows")
    # a file named like a bag that is none
    (tmp_path / "x.mcap").write_text("hello")
    _bad(tmp_path, [tmp_path / "x.mcap"], "cannot be read as a bag")


def _rename_joint(src: Path, dst: Path, old: str, new: str) -> Path:
    """A copy of the bag with one JointState name replaced (rosbags' reader and writer)."""
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([src], default_typestore=store) as r, Writer(dst, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, typestore=store) for c in r.connections}
        for c, t, raw in r.messages():
            if c.msgtype == "sensor_msgs/msg/JointState":
                msg = r.deserialize(raw, c.msgtype)
                msg.name = [new if n == old else n for n in msg.name]
                raw = store.serialize_cdr(msg, c.msgtype)
            w.write(conns[c.id], t, raw)
    return dst


#: a conversion in a fresh interpreter that prints its own peak RSS (VmHWM, MiB): a child's ru_maxrss
#: can carry its parent's resident set from before the exec
_CONVERT_PEAK = ("import sys\n"
                 "from openarm_sim_dataset.ops.convert.rosbag.convert import bag_to_openarm\n"
                 "bag_to_openarm(sys.argv[1], sys.argv[2], camera_format='tar')\n"
                 "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) / 1024)\n")


def _conversion_peak_mib(bag: Path, out: Path) -> float:
    r = subprocess.run([sys.executable, "-c", _CONVERT_PEAK, str(bag), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return float(r.stdout.split()[-1])


@pytest.mark.slow  # 3.5 minutes of a 250 Hz arm and three 30 Hz cameras: ~155,000 messages, ~105 MB
def test_a_long_bag_converts_with_memory_flat_in_its_length_and_validates(tmp_path):
    """Three times the bag, not more memory: frames stream to their tar, values to scratch files, and an
    arm's rows are merged and written a chunk at a time (16,384 rows, 65 s at 250 Hz: both bags are longer,
    so the Parquet writer's buffers are full-sized in both); only the messages' times are held (8-24 bytes
    each: ~2.5 MiB for the 140 s more). Each arm merged and written whole, as before, gave +22 MiB."""
    cams = ("head", "wrist_left", "wrist_right")
    short = make_rosbag.write_openarm_bag(tmp_path / "short", seconds=70.0, cameras=cams, size=(160, 120))
    long = make_rosbag.write_openarm_bag(tmp_path / "long", seconds=210.0, cameras=cams, size=(160, 120))
    rss_s = _conversion_peak_mib(short, tmp_path / "o_short")
    rss_l = _conversion_peak_mib(long, tmp_path / "o_long")
    assert rss_l < rss_s + 15, (rss_s, rss_l)
    out = subprocess.run([str(BIN / "dataset-validate"), str(tmp_path / "o_long")], capture_output=True, text=True)
    assert out.returncode == 0 and "valid (" in out.stdout and "FAIL" not in out.stdout, out.stdout + out.stderr
    ds = Dataset(tmp_path / "o_long")
    ep = ds.episodes[0]
    assert len(ds.streams(ep, "obs")["arms/left/qpos"].timestamps) == 210 * 250
    assert all(c.num_frames >= 210 * 30 - 2 for c in ds.load_cameras(ep).values())


def test_values_through_scratch_files_and_chunks_equal_the_whole_merge(tmp_path, monkeypatch):
    """An arm merged 7 rows at a time from value files appended 100 bytes at a time (a JointState topic at
    1 kHz with a stamp that goes back, forward-controller and gripper commands at their own rates) stores
    the very rows one whole merge stores, a row group per chunk."""
    import pyarrow.parquet as pq

    from openarm_sim_dataset.ops.convert.rosbag import merge, values
    from openarm_sim_dataset.ops.convert.rosbag.convert import bag_to_openarm

    bag = make_rosbag.write_openarm_bag(tmp_path / "bag", seconds=1.5, joint_hz=1000.0, cameras=(),
                                        faults=("backwards:/joint_states:0.7:3", "stop:/left_gripper_controller/commands:0:0.2"))
    bag_to_openarm(bag, tmp_path / "whole")
    monkeypatch.setattr(merge, "CHUNK_ROWS", 7)
    monkeypatch.setattr(values, "BLOCK_BYTES", 100)
    bag_to_openarm(bag, tmp_path / "chunked")
    files = sorted(p.relative_to(tmp_path / "whole") for p in (tmp_path / "whole").rglob("*.parquet"))
    assert len(files) == 4 and files == sorted(p.relative_to(tmp_path / "chunked")
                                               for p in (tmp_path / "chunked").rglob("*.parquet"))
    for f in files:
        whole, chunked = pq.read_table(tmp_path / "whole" / f), pq.read_table(tmp_path / "chunked" / f)
        assert chunked.equals(whole), f
        assert pq.ParquetFile(tmp_path / "whole" / f).metadata.num_row_groups == 1
        assert pq.ParquetFile(tmp_path / "chunked" / f).metadata.num_row_groups == -(-len(whole) // 7)
    assert not list((tmp_path / "chunked").glob(".*")), "scratch left in the output"
    # and they are the bag's: the left arm's command rows are its forward controller's messages, the
    # gripper (whose first 0.2 s are missing: those rows left out) as of each
    from openarm_sim_dataset.ops.convert.rosbag.bag import Bag

    with Bag(bag) as b:
        arm = {t: np.asarray(m.data, np.float32) for _, t, m in b.messages(["/left_forward_position_controller/commands"])}
        grip = sorted((t, np.float32(m.data[0])) for _, t, m in b.messages(["/left_gripper_controller/commands"]))
    rows = pq.read_table(tmp_path / "chunked" / "episodes" / "0" / "action" / "arms" / "left" / "state.parquet")
    times = rows.column("timestamp").cast("int64").to_numpy()
    qpos = np.stack(rows.column("qpos").to_numpy(zero_copy_only=False))
    grip_t = np.array([t for t, _ in grip])
    assert len(times) == len(arm) - int((np.array(sorted(arm)) < grip_t[0]).sum()) > 0
    assert all(np.array_equal(qpos[i, :7], arm[int(t)]) for i, t in enumerate(times))
    assert np.array_equal(qpos[:, 7], np.array([v for _, v in grip])[np.searchsorted(grip_t, times, "right") - 1])


def test_lerobot_output_is_driven_by_the_reference_camera_and_loads(tmp_path):
    """LeRobot v3.0 from a bag with a 0.5 s hole in /joint_states: one frame per head-camera message, the
    frames whose joints are stale dropped and counted; with OPENARM_LEROBOT_PYTHON (a python where lerobot
    0.4.x imports), LeRobot's own LeRobotDataset loads every frame equal to the files."""
    import json
    import os

    bag = make_rosbag.write_openarm_bag(tmp_path / "b", seconds=3.0, cameras=("head", "wrist_left"),
                                        faults=("stop:/joint_states:1.5:0.5",))
    out = tmp_path / "lr"
    p = convert(bag, out, "--format", "lerobot")
    assert p.returncode == 1, p.stdout + p.stderr  # the stop is a fault of the recording; the output is kept
    assert "FAIL topic_stops: /joint_states stops for 0.50" in p.stdout
    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 30
    m = __import__("re").search(r"episode 0: (\d+) of (\d+) frames dropped: \1 obs/arms/(left|right) stale", p.stdout)
    assert m, p.stdout
    dropped, total = int(m[1]), int(m[2])
    # the camera frames within the arms' span; those more than max age (two 30 Hz periods) into the hole go
    assert 85 <= total <= 90 and 10 <= dropped <= 14 and info["total_frames"] == total - dropped
    assert f"{out}: valid" in p.stdout
    lerobot = os.environ.get("OPENARM_LEROBOT_PYTHON")
    if not lerobot:
        pytest.skip("LeRobot's own reading needs OPENARM_LEROBOT_PYTHON (a python with lerobot 0.4.x)")
    r = subprocess.run([lerobot, str(Path(__file__).parents[1] / "tools/check_lerobot_load.py"), str(out)],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert r.returncode == 0 and "|difference| to the parquet 0\n" in r.stdout, r.stdout + r.stderr


def test_control_msgs_gripper_commands_map_to_the_gripper_action(tmp_path):
    """A bag whose left gripper is commanded by control_msgs/msg/GripperCommand (a type rosbags' stores lack:
    registered from its definition) instead of a forward controller's Float64MultiArray."""
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    src = make_rosbag.write_openarm_bag(tmp_path / "src", seconds=1.0)
    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg("float64 position\nfloat64 max_effort\n", "control_msgs/msg/GripperCommand"))
    grip = store.types["control_msgs/msg/GripperCommand"]
    dst, sent = tmp_path / "gripper_cmd", []
    with AnyReader([src], default_typestore=store) as r, Writer(dst, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, typestore=store) for c in r.connections
                 if c.topic != "/left_gripper_controller/commands"}
        cmd = w.add_connection("/left_gripper_controller/gripper_cmd", grip.__msgtype__, typestore=store)
        for c, t, raw in r.messages():
            if c.topic == "/left_gripper_controller/commands":
                position = float(r.deserialize(raw, c.msgtype).data[0])
                w.write(cmd, t, store.serialize_cdr(grip(position=position, max_effort=10.0), grip.__msgtype__))
                sent.append((t, position))
            else:
                w.write(conns[c.id], t, raw)
    p = convert(dst, tmp_path / "out")
    assert p.returncode == 0, p.stdout + p.stderr
    ds = Dataset(tmp_path / "out")
    a = ds.streams(ds.episodes[0], "action")["arms/left/qpos"]
    times = np.array([t for t, _ in sent])
    i = np.searchsorted(times, a.timestamps, side="right") - 1
    np.testing.assert_array_equal(a.values[:, 7], np.array([sent[k][1] for k in i], np.float32))


def test_without_the_extra_the_error_names_the_pip_install(tmp_path, monkeypatch):
    from openarm_sim_dataset.ops.convert.rosbag import bag as bag_module

    monkeypatch.setattr(bag_module, "_MISSING", ImportError("No module named 'rosbags'"))
    with pytest.raises(ImportError, match=r"pip install 'openarm-sim-dataset\[rosbag\]'"):
        bag_module.Bag(tmp_path)
    # the package, the converter's modules and bag detection import without it
    p = subprocess.run([sys.executable, "-c", "import sys; sys.modules['rosbags'] = None\n"
                        "import openarm_sim_dataset.ops.convert.rosbag as r, openarm_sim_dataset.cli.convert\n"
                        f"print(r.is_bag({str(tmp_path)!r}))"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stderr
