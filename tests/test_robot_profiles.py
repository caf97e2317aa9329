"""Robot profiles as data: every shipped file loads and every number names its source; detection from
robot_type, from names and from values; a user's profile file that is wrong is one line naming the file and
the field; the ROS 2 OpenArm names map to arms, and a LeRobot recording written under them converts to
0.4.0, validates and is read by openarm_dataset."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import assert_reads_like_reference, run_cli

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import MetadataError
from openarm_sim_dataset.core.lerobot_names import map_arms
from openarm_sim_dataset.core.robots import (
    DATA_DIR,
    UNITS,
    detect,
    get_profile,
    load_profile_file,
    parse_profile,
    profiles,
)

SHIPPED = ("openarm", "aloha", "so101", "so100", "koch", "generic")
SO = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]
ALOHA = [f"{s}_{j}" for s in ("left", "right")
         for j in ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper")]
ROS_V03 = [f"{s}_rev{i}" for s in ("left", "right") for i in range(1, 9)]
ROS_V10 = [f"openarm_{s}_{j}" for s in ("left", "right") for j in [f"joint{i}" for i in range(1, 8)] + ["finger_joint1"]]
OURS = [f"{s}_{j}.pos" for s in ("right", "left") for j in layout.ARM_JOINTS]
LEROBOT_BI = [f"{s}_{m}.pos" for s in ("left", "right") for m in [f"joint_{i}" for i in range(1, 8)] + ["gripper"]]


def _ranges(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)


# ------------------------------------------------------------------------------------- the shipped files
def test_every_shipped_profile_loads_with_one_file_each():
    assert set(profiles()) == set(SHIPPED)
    assert sorted(p.stem for p in DATA_DIR.glob("*.yaml")) == sorted(SHIPPED)
    assert list(profiles())[-1] == "generic"  # matched last
    for name, p in profiles().items():
        assert load_profile_file(p.path) == p and get_profile(name) is p
        assert p.description and "\n" not in p.description
    with pytest.raises(KeyError, match="known: openarm, aloha"):
        get_profile("ur5")


def test_every_number_names_its_source_and_every_null_says_why():
    limits = 0
    for p in profiles().values():
        for naming in p.namings:
            for variant in naming.variants:
                assert {j for _, j in variant.limits} == {j for j, _ in p.joints}
                for lim in variant.limits.values():
                    assert lim.unit in UNITS and lim.role in ("joint", "gripper")
                    if lim.lower is not None or lim.upper is not None:
                        assert "position: " in lim.source and len(lim.source) > 30
                        limits += 1
                    if lim.velocity is not None:
                        assert "velocity: " in lim.source
                    if None in (lim.lower, lim.upper, lim.velocity):
                        assert lim.note, (p.name, naming.name, variant.name, lim.name)
    assert limits > 100
    assert profiles()["generic"].namings == ()


def test_openarm_limits_are_the_models_and_lerobots():
    ours = get_profile("openarm").naming("openarm_sim_dataset").variants[0]
    j1 = ours.limit("left", "joint1")
    assert (j1.unit, j1.lower, j1.upper, j1.velocity) == ("rad", -3.4907, 1.3963, 16.754666)
    assert "openarm_bimanual.xml" in j1.source and "joint_limits.yaml" in j1.source
    # the layout's gripper column holds what its recorder stores (a finger hinge, a motor angle): no range
    assert ours.limit("right", "gripper").upper is None and ours.limit("left", "joint4").velocity == 5.445426
    lr = get_profile("openarm").naming("lerobot").variants[0].limit("right", "joint2")
    assert (lr.unit, lr.lower, lr.upper) == ("deg", -9.0, 90.0)
    assert lr.velocity == pytest.approx(math.degrees(16.754666))
    v10 = get_profile("openarm").naming("ros2_v1.0").variants[0]
    assert v10.limit("left", "gripper").unit == "m" and v10.limit("left", "gripper").upper == 0.044
    # the description's per-side offsets give the MJCF's ranges
    for side in ("right", "left"):
        for j in layout.ARM_JOINTS[:7]:
            a, b = ours.limit(side, j), v10.limit(side, j)
            assert abs(a.lower - b.lower) < 1e-3 and abs(a.upper - b.upper) < 1e-3, (side, j)
    so = get_profile("so101").naming("lerobot")
    deg = so.variants[1].limit("arm", "shoulder_pan")
    assert deg.unit == "deg" and deg.upper == pytest.approx(110.0, abs=1e-3) and "converted" in deg.source


# ---------------------------------------------------------------------------------------------- detection
@pytest.mark.parametrize("robot_type, names, profile, naming", [
    ("openarm_bimanual", OURS, "openarm", "openarm_sim_dataset"),
    ("bi_openarm_follower", LEROBOT_BI, "openarm", "lerobot"),
    ("openarm_static_bimanual", ROS_V03, "openarm", "ros2_v0.3"),
    ("openarm_static_bimanual", ROS_V10, "openarm", "ros2_v1.0"),
    ("so101_follower", SO, "so101", "lerobot"),
    ("so_follower", SO, "so101", "lerobot"),
    ("so100_follower", SO, "so100", "lerobot"),
    ("bi_so100_follower", [f"{s}_{n}" for s in ("left", "right") for n in SO], "so100", "lerobot"),
    ("koch_follower", SO, "koch", "lerobot"),
    ("so100", ["main_" + n.removesuffix(".pos") for n in SO], "so100", "lerobot_legacy"),
    ("koch", ["main_" + n.removesuffix(".pos") for n in SO], "koch", "lerobot_legacy"),
    ("aloha", ALOHA, "aloha", "aloha"),
])
def test_each_robot_is_detected_from_its_robot_type_and_from_its_names(robot_type, names, profile, naming):
    m = detect(robot_type, {"observation.state": names})
    assert (m.profile.name, m.naming.name) == (profile, naming)
    assert m.why.startswith(f"robot_type {robot_type}; names ") and "\n" not in m.why
    joints = m.joints_for("observation.state")
    assert all(j is not None for j in joints) and {j.role for j in joints} == {"joint", "gripper"}
    by_names = detect(None, {"observation.state": names})
    # the SO-100, SO-101 and Koch followers share LeRobot's names: names alone say "so101", and say why
    expected = "so101" if profile in ("so100", "koch") else profile
    assert by_names.profile.name == expected and by_names.naming.name == naming
    if expected == "so101":
        assert "also koch, so100's: so101 assumed" in by_names.why


def test_openarm_layout_streams_are_detected_by_their_columns():
    m = detect(None, {f"arms/{s}/qpos": list(layout.ARM_JOINTS) for s in ("right", "left")})
    assert (m.profile.name, m.naming.name) == ("openarm", "openarm_sim_dataset")
    j = m.joints_for("arms/left/qpos")
    assert [x.name for x in j] == list(layout.ARM_JOINTS) and j[0].side == "left" and j[0].lower == -3.4907


def test_no_profile_matches_is_generic_and_knows_no_joint():
    names = [f"motor_{i}" for i in range(6)]
    m = detect("ur5e", {"observation.state": names})
    assert m.profile.name == "generic" and m.naming is None
    assert m.joints_for("observation.state") == [None] * 6
    assert "generic" in m.why and "ur5e" in m.why
    # a known robot_type under unknown names keeps its robot, with no joint known
    m = detect("so100_follower", {"observation.state": names})
    assert m.profile.name == "so100" and m.naming is None and "no joint known" in m.why
    # names of another robot than robot_type says: the names win, and the line says so
    m = detect("koch_follower", {"observation.state": ALOHA})
    assert m.profile.name == "aloha" and "but the names are aloha's" in m.why
    # a whole arm is needed: a lone gripper name is no robot
    assert detect(None, {"action": ["gripper.pos"]}).profile.name == "generic"


def test_so101_unit_variant_is_chosen_by_the_values():
    body_lo, body_hi = [-60, -90, -95, -70, -40], [60, 95, 90, 80, 40]
    normalised = detect("so101_follower", {"action": SO}, {"action": _ranges(body_lo + [0], body_hi + [98])})
    assert normalised.unit_variant.name == "range_m100_100"
    # within +-100 a degree recording looks the same: the line says so
    assert "-100..100" in normalised.why and "ambiguous: deg fits too" in normalised.why
    assert normalised.joints_for("action")[0].unit == "range_m100_100"
    assert normalised.joints_for("action")[5].unit == "range_0_100"
    degrees = detect("so101_follower", {"action": SO}, {"action": _ranges([-150] + body_lo[1:] + [0], body_hi + [98])})
    assert degrees.unit_variant.name == "deg" and "shoulder_pan.pos reaches -150, past -100: not range_m100_100" in degrees.why
    assert degrees.joints_for("action")[0].unit == "deg" and degrees.joints_for("action")[5].unit == "range_0_100"
    nothing = detect("so101_follower", {"action": SO})
    assert nothing.unit_variant.name == "range_m100_100" and "no values to decide" in nothing.why


def test_unit_problems_name_degrees_under_radians_and_radians_under_degrees():
    names = {"observation.state": OURS}
    lo = np.zeros(16)
    hi = np.full(16, 0.5)
    hi[2] = 95.3
    m = detect("openarm_bimanual", names, {"observation.state": _ranges(lo, hi)})
    assert m.unit_problems({"observation.state": _ranges(lo, hi)}) == [
        "observation.state: joints reach 95.3 where the profile declares radians: degrees?"]
    assert m.unit_problems({"observation.state": _ranges(lo, np.full(16, 0.5))}) == []
    lr = detect("bi_openarm_follower", {"action": LEROBOT_BI})
    radians = _ranges(np.full(16, -1.2), np.full(16, 1.1))
    assert lr.unit_problems({"action": radians}) == [
        "action: joints span 2.30 within +-pi where the profile declares degrees: radians?"]
    assert lr.unit_problems({"action": _ranges(np.full(16, -60.0), np.full(16, 70.0))}) == []


# ----------------------------------------------------------------------------------------- --robot-file
def _profile_doc() -> dict:
    return yaml.safe_load((DATA_DIR / "koch.yaml").read_text())


@pytest.mark.parametrize("edit, says", [
    (lambda d: d.pop("name"), "name: missing"),
    (lambda d: d.pop("namings"), "namings: missing"),
    (lambda d: d["joints"][0].update(role="wrist"), "joints[0].role: 'wrist' is not a role"),
    (lambda d: d["namings"][0]["variants"][0]["joints"].pop("elbow_flex"),
     "namings.lerobot.variants.range_m100_100.joints.elbow_flex: missing"),
    (lambda d: d["namings"][0]["variants"][0]["joints"]["gripper"].update(unit="furlong"),
     "namings.lerobot.variants.range_m100_100.joints.gripper.unit: 'furlong' is not a unit"),
    (lambda d: d["namings"][0]["variants"][0]["joints"]["gripper"].update(source="nowhere"),
     "joints.gripper.source: 'nowhere' is not a key of sources"),
    (lambda d: d["namings"][0]["variants"][0]["joints"]["gripper"].pop("note"),
     "joints.gripper.note: missing: a number left null says why"),
    (lambda d: d["namings"][0]["variants"][0]["joints"]["gripper"].update(lower=200),
     "joints.gripper: lower 200.0 is above upper 100.0"),
    (lambda d: d["namings"][0]["prefixes"].update({"top_": "top"}), "prefixes: side 'top' is not one of sides"),
])
def test_a_wrong_robot_file_is_one_line_naming_the_file_and_the_field(edit, says, tmp_path):
    doc = _profile_doc()
    edit(doc)
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(MetadataError) as e:
        load_profile_file(path)
    assert says in str(e.value) and str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)


def test_a_robot_file_that_does_not_parse_is_one_line(tmp_path):
    path = tmp_path / "robot.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(MetadataError, match=r"robot\.yaml: not valid YAML \(line 2"):
        load_profile_file(path)
    path.write_text("- a list\n")
    with pytest.raises(MetadataError, match="must be a YAML mapping"):
        load_profile_file(path)
    with pytest.raises(MetadataError, match="missing"):
        load_profile_file(tmp_path / "absent.yaml")


def test_a_users_profile_overrides_robot_type(tmp_path):
    doc = _profile_doc()
    doc.update(name="my_koch", robot_types=[])
    path = tmp_path / "my_koch.yaml"
    path.write_text(yaml.safe_dump(doc))
    mine = load_profile_file(path)
    m = detect("so101_follower", {"action": SO}, override=mine)
    assert m.profile is mine and m.naming.name == "lerobot" and m.why.startswith(f"robot file {path}; names ")
    assert parse_profile(doc, path) == mine


# ------------------------------------------------------------------------------------- OpenArm namings
def test_ros2_names_map_to_arms_in_radians():
    arms, rest = map_arms(ROS_V03)
    assert rest == [] and {a.key for a in arms} == {"arms/left/qpos", "arms/right/qpos"}
    by = {a.key: a for a in arms}
    assert by["arms/right/qpos"].dims == tuple(range(8, 16)) and not by["arms/right/qpos"].degrees
    assert by["arms/left/qpos"].naming == "ros2_v0.3" and by["arms/left/qpos"].gripper_unit == "rad"
    names = [n + ".pos" for n in ROS_V03]  # recorders that keep LeRobot's ".pos" habit
    assert {a.key for a in map_arms(names)[0]} == {"arms/left/qpos", "arms/right/qpos"}
    v10 = ROS_V10 + ["openarm_left_finger_joint2", "openarm_right_finger_joint2"]
    arms, rest = map_arms(v10)
    assert {a.key for a in arms} == {"arms/left/qpos", "arms/right/qpos"} and rest == [16, 17]  # mimics: generic
    left = next(a for a in arms if a.side == "left")
    assert left.naming == "ros2_v1.0" and left.gripper_unit == "m" and left.dims[7] == 7
    values = np.arange(18, dtype=np.float32)[None, :] / 100
    np.testing.assert_array_equal(left.values(values)[0], values[0, :8])  # radians and metres as stored
    assert map_arms(ROS_V03[:7]) == ([], list(range(7)))  # no gripper: not an arm


def test_streams_the_reader_mapped_are_judged_by_the_naming_they_came_from():
    """A LeRobot openarm_follower recording read as arms/<side>/qpos (radians, converted by the reader) keeps
    LeRobot's limits (the gripper motor's -65..0 degrees), in radians; a ROS 2 v0.3 one its own frames."""
    columns = {f"arms/{s}/qpos": list(layout.ARM_JOINTS) for s in ("left", "right")}
    arms, _ = map_arms(LEROBOT_BI)
    mapped = {a.key: a.profile_naming() for a in arms}
    gripper_closed = _ranges([-0.2] * 7 + [-0.61], [0.3] * 7 + [0.0])
    m = detect("bi_openarm_follower", columns, {k: gripper_closed for k in columns}, mapped=mapped)
    assert (m.profile.name, m.naming.name) == ("openarm", "lerobot") and "converted to radians by the reader" in m.why
    grip = m.joints_for("arms/left/qpos")[7]
    assert grip.unit == "rad" and grip.lower == pytest.approx(math.radians(-65)) and grip.upper == 0.0
    assert "converted to radians" in grip.source
    assert m.joints_for("arms/right/qpos")[0].velocity == pytest.approx(16.754666)
    assert m.unit_problems({k: gripper_closed for k in columns}) == []
    # without the hint the streams are this package's own: the MJCF's finger hinge, which -0.61 leaves
    own = detect("bi_openarm_follower", columns)
    assert own.naming.name == "openarm_sim_dataset" and own.joints_for("arms/left/qpos")[7].lower is None
    ros = {a.key: a.profile_naming() for a in map_arms(ROS_V03)[0]}
    m = detect("openarm_static_bimanual", columns, mapped=ros)
    assert m.naming.name == "ros2_v0.3" and m.scales == {}
    assert (m.joints_for("arms/left/qpos")[1].lower, m.joints_for("arms/left/qpos")[1].upper) == (0.0, 3.1415927)


# ------------------------------------------------------------------ a ROS 2 recording written into LeRobot
FIXTURE = Path(__file__).parent / "fixture" / "lerobot" / "v30_radians"


def _ros2_lerobot(root: Path) -> tuple[Path, np.ndarray]:
    """A LeRobot v3.0 dataset as a ROS 2 workcell writes it: robot_type openarm_static_bimanual, 16
    dimensions left_rev1..8 then right_rev1..8 in radians, the action the next frame's state (the
    last frame's its own), right_rev5 0.0 throughout (a name /joint_states did not carry). Made from
    LeRobot's own v30_radians fixture (its episodes, tasks and timestamps), with the vectors replaced."""
    shutil.copytree(FIXTURE, root)
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    info["robot_type"] = "openarm_static_bimanual"
    for key in ("observation.state", "action"):
        info["features"][key].update(names=ROS_V03, shape=[16])
    info_path.write_text(json.dumps(info, indent=4))
    data = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(data)
    ep = table.column("episode_index").to_numpy()
    frame = table.column("frame_index").to_numpy().astype(np.float64)
    # inside both the v0.3 description's limits and the MJCF's (the layout's checks judge the latter)
    mid = np.array([0.0, 0.08, -0.5, 1.0, 0.2, 0.1, 0.0, 0.4] + [0.3, 1.2, -0.5, 1.0, 0.2, 0.1, 0.0, -0.4])
    amplitude = np.where(np.arange(16) == 1, 0.05, 0.3)
    state = (mid + amplitude * np.sin(frame[:, None] / 9.0 + np.arange(16))).astype(np.float32)
    state[:, ROS_V03.index("right_rev5")] = 0.0
    action = state.copy()
    same_next = ep[:-1] == ep[1:]
    action[:-1][same_next] = state[1:][same_next]
    kept = [n for n in table.column_names if n not in ("observation.state", "action")]
    vec = pa.list_(pa.float32(), 16)
    out = table.select(kept).append_column("action", pa.FixedSizeListArray.from_arrays(pa.array(action.reshape(-1)), 16))
    out = out.append_column("observation.state", pa.FixedSizeListArray.from_arrays(pa.array(state.reshape(-1)), 16))
    out = out.select(["action", "observation.state", *kept]).replace_schema_metadata(None)
    assert out.schema.field("action").type == vec
    pq.write_table(out, data)
    stats_path = root / "meta/stats.json"
    stats = json.loads(stats_path.read_text())
    for key, x in (("observation.state", state), ("action", action)):
        stats[key] = {"min": x.min(0).tolist(), "max": x.max(0).tolist(), "mean": x.mean(0).tolist(),
                      "std": x.std(0).tolist(), "count": [len(x)]}
    stats_path.write_text(json.dumps(stats, indent=4))
    episodes = next((root / "meta/episodes").rglob("*.parquet"))
    meta = pq.read_table(episodes)
    meta = meta.select([n for n in meta.column_names
                        if not n.startswith(("stats/observation.state/", "stats/action/"))])
    pq.write_table(meta.replace_schema_metadata(None), episodes)
    return root, state


def test_a_ros2_recording_in_lerobot_converts_validates_and_is_read_by_openarm_dataset(tmp_path):
    src, state = _ros2_lerobot(tmp_path / "ros2")
    ds = Dataset(src)
    assert {a.key: a.naming for a in ds.lerobot.arms["obs"]} == {"arms/left/qpos": "ros2_v0.3",
                                                                 "arms/right/qpos": "ros2_v0.3"}
    obs = ds.streams(0, "obs")
    assert set(obs) == {"arms/left/qpos", "arms/right/qpos"}  # every dimension mapped: nothing generic
    n0 = len(obs["arms/left/qpos"])
    np.testing.assert_array_equal(obs["arms/left/qpos"].values, state[:n0, :8])  # radians as stored
    np.testing.assert_array_equal(obs["arms/right/qpos"].values[:, 4], 0.0)
    out = tmp_path / "openarm"
    run_cli("convert", src, out, "--format", "openarm")
    converted = Dataset(out)
    assert converted.version == "0.4.0" and converted.num_episodes == ds.num_episodes
    np.testing.assert_array_equal(converted.streams(0, "obs")["arms/left/qpos"].values, state[:n0, :8])
    act = converted.streams(0, "action")["arms/right/qpos"].values
    np.testing.assert_array_equal(act[:-1], state[1:n0, 8:])  # the action is the next frame's state
    report = json.loads(run_cli("validate", out, "--json", check=None).stdout)
    failed = {r["check"]: r for r in report["rows"] if r["status"] == "fail"}
    # the one fault is the recording's own: right_rev5 0.0 throughout (a name /joint_states did not carry)
    assert set(failed) <= {"stuck_zero_joint"}, failed
    assert all("arms/right/qpos[4] joint5" in r["detail"] for r in failed.values())
    assert assert_reads_like_reference(out) > 0
    m = detect(ds.lerobot.info["robot_type"], {k: ds.lerobot.vector_names(k) for k in ("observation.state", "action")})
    assert (m.profile.name, m.naming.name) == ("openarm", "ros2_v0.3")


# ------------------------------------------------------------------------------------- the reference page
def test_the_robot_reference_page_shows_every_profile_naming_and_source():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import docs_reference as ref

    page = ref.robots_page()
    for p in profiles().values():
        assert f"\n## `{p.name}`\n" in page
        for naming in p.namings:
            assert f"naming `{naming.name}`" in page
            assert all(f"`{n}`" in page for n in naming.example())
        for key in p.sources:
            assert f"- `[{key}]` " in page
    assert "| right | `joint1` | joint | `rad` | -1.3963 | 3.4907 | 16.7547 |" in page
