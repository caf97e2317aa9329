"""Faults of real recorders, planted into datasets LeRobot itself wrote with other robots' names and units
(tests/fixture/lerobot/v30_so101, v30_aloha, v30_openarm_ros): each caught by its check, the dimension named
by the name ``info.json`` gives it. The parquet is rewritten as a buggy tool would (``meta/stats.json`` is
left stale: ``lerobot_stats`` fails too; only the planted check's row is asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import as_unknown_robot, edit_info, lerobot_copy, run_cli


def _edit(root: Path, key: str, edit) -> None:
    """Rewrite vector feature ``key`` of every data file: ``edit(x, episode_index)`` changes the (N, D) array."""
    for path in sorted(root.glob("data/**/*.parquet")):
        t = pq.read_table(path)
        x = np.stack(t.column(key).to_numpy(zero_copy_only=False)).astype(np.float32)
        edit(x, t.column("episode_index").to_numpy())
        i = t.column_names.index(key)
        t = t.set_column(i, t.schema.field(i), pa.array(list(x), type=t.schema.field(i).type))
        pq.write_table(t, path)


def _dim(root: Path, key: str, name: str) -> int:
    info = json.loads((root / "meta" / "info.json").read_text())
    names = info["features"][key]["names"]
    names = next(iter(names.values())) if isinstance(names, dict) else names
    return names.index(name)


def _stuck_zero(root):  # elbow_flex written as 0.0 throughout (a name missing from the recorder's input)
    for key in ("observation.state", "action"):
        d = _dim(root, key, "elbow_flex.pos")
        _edit(root, key, lambda x, ep, d=d: x.__setitem__((slice(None), d), 0.0))


def _pinned(root):  # the gripper held at 100 (its maximum) in 96 % of the frames
    for key in ("observation.state", "action"):
        d = _dim(root, key, "gripper.pos")
        _edit(root, key, lambda x, ep, d=d: x.__setitem__((slice(None), d), np.where(np.arange(len(x)) % 25 == 0, 40.0, 100.0)))


def _beyond(root):  # shoulder_pan 60 degrees further than the SO-101 can turn, in episode 1
    d = _dim(root, "observation.state", "shoulder_pan.pos")
    _edit(root, "observation.state", lambda x, ep: x.__setitem__((ep == 1, d), x[ep == 1, d] + 130.0))


def _jump(root):  # one sample of shoulder_lift 90 degrees off (a glitch of the bus)
    d = _dim(root, "observation.state", "shoulder_lift.pos")

    def edit(x, ep):
        k = np.flatnonzero(ep == 0)[10]
        x[k, d] += 90.0
    _edit(root, "observation.state", edit)


def _degrees(root):  # ALOHA's radians written in degrees
    for key in ("observation.state", "action"):
        _edit(root, key, lambda x, ep: x.__imul__(np.float32(57.29578)))


def _frozen(root):  # the action held for 1 s in episode 0 (a teleoperation link that stalled)
    def edit(x, ep):
        rows = np.flatnonzero(ep == 0)
        x[rows[2]:rows[2] + 30] = x[rows[2]]
    _edit(root, "action", edit)


def _black_camera_unknown_robot(root):  # a robot no profile knows; its camera black for a whole episode
    import io

    from PIL import Image

    edit_info(root, as_unknown_robot)
    buf = io.BytesIO()
    Image.new("RGB", (64, 48)).save(buf, format="PNG")
    for path in sorted(root.glob("data/**/*.parquet")):
        t = pq.read_table(path)
        key = "observation.images.front"
        col = t.column(key).to_pylist()
        ep = t.column("episode_index").to_numpy()
        longest = int(np.bincount(ep).argmax())  # over a second at 30 fps
        col = [dict(c, bytes=buf.getvalue()) if e == longest else c for c, e in zip(col, ep)]
        i = t.column_names.index(key)
        pq.write_table(t.set_column(i, t.schema.field(i), pa.array(col, type=t.schema.field(i).type)), path)


#: fault -> (the check that catches it, the fixture, the planting, words of the detail: the dimension named)
ROBOT_FAULTS = {
    "so101_joint_stuck_at_zero": ("stuck_zero_joint", "v30_so101", _stuck_zero, "elbow_flex.pos"),
    "so101_gripper_pinned_at_max": ("pinned_at_bound", "v30_so101", _pinned, "gripper.pos"),
    "so101_beyond_its_limits": ("joint_limits", "v30_so101", _beyond, "shoulder_pan.pos"),
    "so101_one_sample_jumps": ("qpos_jumps", "v30_so101", _jump, "shoulder_lift.pos"),
    "aloha_degrees_under_radians": ("joint_units", "v30_aloha", _degrees, "degrees?"),
    "aloha_action_frozen_1s": ("frozen_action", "v30_aloha", _frozen, "episode 0"),
    # no profile knows the names: the arms' motion is unknown, which is not no motion (the state moves)
    "unknown_robot_black_camera": ("camera_frozen", "v30_other_robot", _black_camera_unknown_robot, "no arm mapped"),
}


@pytest.mark.parametrize("fault", sorted(ROBOT_FAULTS))
def test_a_recorders_fault_is_caught_naming_its_dimension(fault, tmp_path):
    check, fixture, plant, words = ROBOT_FAULTS[fault]
    root = lerobot_copy(fixture, tmp_path / fixture)
    clean = json.loads(run_cli("validate", root, "--json", "--no-update-metadata", "--checks", check, check=None).stdout)
    assert clean["rows"][0]["status"] == "pass", clean["rows"][0]
    plant(root)
    doc = json.loads(run_cli("validate", root, "--json", "--no-update-metadata", "--checks", check, check=None).stdout)
    (row,) = doc["rows"]
    assert row["status"] in ("fail", "warn") and row["status"] != "pass", row
    assert words in row["detail"], row["detail"]
    if check in ("joint_limits", "qpos_jumps", "joint_units"):  # the rows that judge by the robot name it
        assert doc["robot"]["profile"] == ("aloha" if fixture == "v30_aloha" else "so101"), doc["robot"]
