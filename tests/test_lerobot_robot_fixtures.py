"""Datasets written by LeRobot 0.4.4 with other robots' names and units (tests/fixture/lerobot/v30_so101,
v30_so101_m100, v30_aloha, v30_openarm_ros, v30_state_actions; made by tools/make_lerobot_fixtures.py,
issue 46): each opens with this package's reader and its vectors carry the names LeRobot wrote.

Only that they load is checked here; what is planted in them (SOURCE.json's ``content``) is for the
validator's tests. A fixture whose folder is absent is skipped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openarm_sim_dataset import Dataset

FIX = Path(__file__).resolve().parent / "fixture" / "lerobot"

SO = [f"{m}.pos" for m in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")]
ALOHA = [f"{s}_{j}" for s in ("left", "right")
         for j in ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper")]
OPENARM_ROS = [f"{s}_rev{k}" for s in ("left", "right") for k in range(1, 9)]
STATE_ACTIONS = [f"{s}.{j}.pos" for s in ("left", "right")
                 for j in ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "gripper")]

# name: (robot_type, names of both vectors, obs feature, action feature, cameras)
FIXTURES = {
    "v30_so101": ("so101_follower", SO, "observation.state", "action", ["front"]),
    "v30_so101_m100": ("so100_follower", SO, "observation.state", "action", []),
    "v30_aloha": ("aloha", ALOHA, "observation.state", "action", []),
    "v30_openarm_ros": ("openarm_static_bimanual", OPENARM_ROS, "observation.state", "action", []),
    "v30_state_actions": ("bimanual_custom", STATE_ACTIONS, "state", "actions", []),
}
LENGTHS = {name: [32, 36, 40] for name in FIXTURES} | {"v30_state_actions": [40, 40, 40]}


def present(name: str) -> Path:
    root = FIX / name
    if not (root / "meta" / "info.json").is_file():
        pytest.skip(f"{root} is absent")
    return root


def source(name: str) -> dict:
    path = FIX / "SOURCE.json"
    entry = json.loads(path.read_text())["datasets"].get(name) if path.is_file() else None
    if entry is None:
        pytest.skip(f"SOURCE.json has no entry for {name}")
    return entry


def parquet_rows(root: Path) -> pa.Table:
    files = sorted((root / "data").glob("chunk-*/*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_files_are_what_lerobot_wrote(name):
    root = present(name)
    entry = source(name)
    on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert on_disk == sorted(entry["files"])
    for rel, want in entry["files"].items():
        data = (root / rel).read_bytes()
        assert len(data) == want["size"] and hashlib.sha256(data).hexdigest() == want["sha256"], rel
    assert entry["lerobot"] == "0.4.4" and entry["codebase_version"] == "v3.0"
    assert entry["total_size"] < 1_000_000  # tiny on purpose
    assert "content" in entry and "planted" in entry["content"]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_opens_with_the_names_lerobot_wrote(name):
    root = present(name)
    robot_type, names, obs_key, act_key, cameras = FIXTURES[name]
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["robot_type"] == robot_type and info["fps"] == 30
    declared = {k: f["names"] for k, f in info["features"].items() if k in (obs_key, act_key)}
    if name == "v30_aloha":
        assert declared == {obs_key: {"motors": names}, act_key: {"motors": names}}
    else:
        assert declared == {obs_key: names, act_key: names}

    ds = Dataset(root)
    assert ds.version == "lerobot_v3.0"
    assert ds.num_episodes == 3
    assert sorted(ds.camera_names) == cameras
    assert ds.lerobot.vector_names(obs_key) == names
    assert ds.lerobot.vector_names(act_key) == names

    table = parquet_rows(root)
    episodes = np.asarray(table.column("episode_index").to_pylist())
    for episode, length in enumerate(LENGTHS[name]):
        stored = np.asarray(table.column(obs_key).to_pylist(), np.float32)[episodes == episode]
        stored_act = np.asarray(table.column(act_key).to_pylist(), np.float32)[episodes == episode]
        for kind, key, values in (("obs", obs_key, stored), ("action", act_key, stored_act)):
            streams = ds.streams(episode, kind)
            assert streams, (name, kind)
            # every dimension is in one stream: the generic one under the feature's own name keeps
            # LeRobot's names and values as stored; any dimensions mapped to an arm leave it
            assert sum(len(s.columns) for s in streams.values()) == len(names), (name, kind, list(streams))
            for s in streams.values():
                assert np.asarray(s.values).shape == (length, len(s.columns)), (name, kind, s.key)
                assert np.all(np.isfinite(s.values)), (name, kind, s.key)
            generic = streams.get(f"lerobot/{key}")
            if generic is None:
                assert all(k.startswith("arms/") for k in streams), (name, kind, list(streams))
                continue
            assert [c for c in names if c in generic.columns] == list(generic.columns)
            dims = [names.index(c) for c in generic.columns]
            np.testing.assert_array_equal(np.asarray(generic.values), values[:, dims])
            if len(streams) == 1:
                assert list(generic.columns) == names


def test_so101_camera_is_read():
    root = present("v30_so101")
    ds = Dataset(root)
    cam = ds.load_camera("front", 2)
    assert cam.num_frames == LENGTHS["v30_so101"][2]
