"""Small replicas of what public LeRobot recordings made by other people taught (docs/results/lerobot-doctor.md):
each built from a LeRobot-written fixture by changing what those recordings had, and the verdict asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import edit_info as _info, lerobot_copy, run_cli

POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
           b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")


def _copy(name: str, tmp_path: Path) -> Path:
    return lerobot_copy(name, tmp_path / name)


def _validate(root: Path, *args: str) -> dict:
    return json.loads(run_cli("validate", root, "--json", "--no-update-metadata", *args, check=None).stdout)


@pytest.mark.parametrize("where", ["meta/tasks.parquet", "data/chunk-000/file-000.parquet"])
def test_git_lfs_pointers_are_named_as_such(where, tmp_path):
    """A clone without `git lfs pull`: every file a pointer (three public recordings); one line, exit 2."""
    root = _copy("v30_so101_m100", tmp_path)
    (root / where).write_bytes(POINTER)
    if where.startswith("meta/"):  # the dataset cannot be opened: one line, exit 2
        for tool in ("validate", "info"):
            r = run_cli(tool, root, check=2)
            assert r.stderr.count("\n") == 1 and "Git LFS pointer" in r.stderr and where in r.stderr, r.stderr
    else:  # a data file: the dataset opens, the file is named
        rows = {r["check"]: r for r in _validate(root)["rows"]}
        assert rows["lerobot_files"]["status"] == "fail" and "Git LFS pointer" in rows["lerobot_files"]["detail"]


def test_names_nested_in_a_list_are_read(tmp_path):
    """`names: [[...]]` (a Unitree G1 recording): read as the list it holds, no lerobot_info failure."""
    root = _copy("v30_so101_m100", tmp_path)
    _info(root, lambda i: [i["features"][k].__setitem__("names", [i["features"][k]["names"]])
                           for k in ("observation.state", "action")])
    rows = {r["check"]: r for r in _validate(root)["rows"]}
    assert rows["lerobot_info"]["status"] == "pass", rows["lerobot_info"]
    assert rows["joint_limits"]["status"] == "pass" and rows["joint_limits"]["judged"]["joints"] == 12


def test_names_under_another_key_are_read(tmp_path):
    """`names: {"axes": [...]}` (an Isaac Lab export), like LeRobot's old `{"motors": [...]}`."""
    root = _copy("v30_so101_m100", tmp_path)
    _info(root, lambda i: [i["features"][k].__setitem__("names", {"axes": i["features"][k]["names"]})
                           for k in ("observation.state", "action")])
    doc = _validate(root)
    assert doc["robot"]["profile"] == "so100" and doc["valid"], doc["robot"]


def test_another_robot_with_so_names_is_not_judged_by_the_so101s_limits(tmp_path):
    """A Piper follower (state joint_1.pos..joint_6.pos, gripper.pos) driven by an SO-101 leader (action
    SO-101 names): robot_type piper, known to no profile. The SO-101's limits failed this clean dataset."""
    root = _copy("v30_so101_m100", tmp_path)

    def piper(info):
        info["robot_type"] = "piper"
        info["features"]["observation.state"]["names"] = [f"joint_{i}.pos" for i in range(1, 6)] + ["gripper.pos"]
    _info(root, piper)
    doc = _validate(root)
    rows = {r["check"]: r for r in doc["rows"]}
    assert doc["robot"]["profile"] == "generic" and "partly so101's" in doc["robot"]["why"], doc["robot"]
    assert rows["joint_limits"]["status"] == "skip" and "robot piper has no profile" in rows["joint_limits"]["detail"]
    # and the user who knows better says which robot it is
    forced = _validate(root, "--robot", "so100")
    assert forced["robot"]["profile"] == "so100"
    assert {r["check"]: r["status"] for r in forced["rows"]}["joint_limits"] != "skip"


def test_a_seven_joint_arm_with_so_names_plus_one_is_generic(tmp_path):
    """A Seeed B601 writes `shoulder_pan.pos` .. `wrist_flex.pos`, `wrist_yaw.pos`, `wrist_roll.pos`,
    `gripper.pos`; here (six dimensions) `wrist_yaw.pos` in place of `wrist_flex.pos`: not the SO-101's."""
    root = _copy("v30_so101_m100", tmp_path)

    def b601(info):
        info["robot_type"] = "seeed_b601_dm_follower"
        for k in ("observation.state", "action"):
            names = info["features"][k]["names"]
            info["features"][k]["names"] = names[:3] + ["wrist_yaw.pos"] + names[4:]
    _info(root, b601)
    doc = _validate(root)
    assert doc["robot"]["profile"] == "generic", doc["robot"]
    assert doc["valid"]


def test_the_b601s_own_seven_names_are_generic_and_say_why():
    from openarm_sim_dataset.core.robots import detect

    names = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_yaw.pos",
             "wrist_roll.pos", "gripper.pos"]
    m = detect("seeed_b601_dm_follower", {"lerobot/observation.state": names, "lerobot/action": names})
    assert m.profile.name == "generic" and "wrist_yaw.pos" in m.why and "partly" in m.why, m.why
    # the same names under the SO-101's robot_type: the profile that robot_type names
    assert detect("so101_follower", {"lerobot/observation.state": names[:4] + names[5:]}).profile.name == "so101"
