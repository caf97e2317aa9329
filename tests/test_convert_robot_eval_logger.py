"""dataset-convert --format robot_eval_logger: robot-eval-logger 0.0.1's LocalStorage
(``<eval_id>/metadata.json`` + ``traj_<i>.pkl``), read back by the logger's own loader (``TrajData.load``,
``MetaData.load``) with values equal to the source's: a rollout made here by dataset-evaluate, a generated
dataset and a recorded-like synthetic one."""

from __future__ import annotations

import bisect
import importlib.util
import json
import os
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, fixture_path, run_cli, tree_hashes

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.synthetic import write_synthetic

if importlib.util.find_spec("robot_eval_logger") is None:
    pytest.skip("robot-eval-logger is not installed (pip install --no-deps robot-eval-logger==0.0.1)",
                allow_module_level=True)

from openarm_sim_dataset.convert.robot_eval_logger import (  # noqa: E402
    default_step_hz,
    load_trajectory,
    logger_types,
    package_importable,
)

#: the tiny evaluation of tests/test_evaluate.py: one 32x24 camera at 2.5 Hz, 1 s episodes
TINY_EVAL = ["--size", "32x24", "--cameras", "head", "--camera-hz", "2.5", "--max-time", "1", "--quiet", "--seed", "10"]
#: what a pickle we write may name: the logger's class and numpy's array machinery, nothing of ours
ALLOWED_GLOBALS = {("robot_eval_logger.typing.traj_data", "TrajData"), ("numpy", "ndarray"), ("numpy", "dtype"),
                   ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
                   ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar")}


def convert(src, out, *args, check=0):
    return run_cli("convert", src, out, "--format", "robot_eval_logger", "-q", *args, check=check)


def read_export(out: Path) -> tuple[object, list, set]:
    """(MetaData, [TrajData by index], globals the pickles name) through the logger's own loaders."""
    types = logger_types()
    (run_dir,) = [p for p in out.iterdir()]
    assert sorted(p.name for p in run_dir.iterdir()) == ["metadata.json"] + sorted(
        f"traj_{i}.pkl" for i in range(len(list(run_dir.glob("traj_*.pkl")))))
    meta = types["MetaData"].load(str(run_dir / "metadata.json"))
    assert str(meta.eval_id.id) == run_dir.name
    n = len(list(run_dir.glob("traj_*.pkl")))
    trajs = [load_trajectory(types, run_dir / f"traj_{i}.pkl") for i in range(n)]
    seen: set = set()

    class Recording(pickle.Unpickler):
        def find_class(self, module, name):
            seen.add((module, name))
            return super().find_class(module, name)

    with package_importable(types["root"]):
        for i in range(n):
            with open(run_dir / f"traj_{i}.pkl", "rb") as f:
                assert type(Recording(f).load()) is types["TrajData"]
    return meta, trajs, seen


def latest_at_or_before(stamps: np.ndarray, t: int) -> int:
    """Index of the last stamp <= t (the first when none is)."""
    return max(bisect.bisect_right(stamps.tolist(), t) - 1, 0)


def expected_steps(ds: Dataset, entry: dict, grid: list[int]) -> dict:
    """What each step should hold, computed here from the stored files one step at a time."""
    out = {}
    for kind, attr, field in (("action", "qpos", "action"), ("obs", "qpos", "proprio"), ("obs", "qvel", "velocity"),
                              ("obs", "qtorque", "effort")):
        streams = ds.streams(entry, kind)
        rows = []
        for t in grid:
            rows.append(np.concatenate([streams[f"arms/{side}/{attr}"].values[
                latest_at_or_before(streams[f"arms/{side}/{attr}"].timestamps, t)] for side in ("right", "left")]))
        out[field] = rows
    out["obs"] = {}
    for name, cam in ds.load_cameras(entry).items():
        out["obs"][name] = np.stack([cam.get_frame(latest_at_or_before(cam.timestamps, t)).load() for t in grid])
    return out


def assert_steps_equal(traj, want: dict) -> None:
    for field in ("action", "proprio", "velocity", "effort"):
        got = getattr(traj, field)
        assert isinstance(got, list) and len(got) == len(want[field])
        for g, w in zip(got, want[field]):
            assert g.dtype == np.float32 and g.shape == (16,)
            np.testing.assert_array_equal(g, w)
    assert set(traj.obs) == set(want["obs"])
    for name, frames in want["obs"].items():
        assert traj.obs[name].dtype == np.uint8
        np.testing.assert_array_equal(traj.obs[name], frames)


# --------------------------------------------------------------------- a rollout
@pytest.fixture(scope="module")
def rollouts(tmp_path_factory):
    """dataset-evaluate --policy zero, one episode of two tasks (TINY_EVAL), and its export."""
    work = tmp_path_factory.mktemp("rel")
    src = work / "zero"
    run_cli("evaluate", "--policy", "zero", "--out", src, "--episodes", "1", "--tasks", "pick_place", "tray_green",
            *TINY_EVAL)
    before = tree_hashes(src)
    convert(src, work / "out")
    assert tree_hashes(src) == before  # the source is never modified
    return src, work / "out"


@pytest.mark.slow
def test_rollout_reads_back_with_the_loggers_loader_equal_to_the_source(rollouts):
    """One step per policy step (evaluation.control_hz 2.5 Hz over 1 s: 3 steps, each showing the frame
    the policy saw, once); action = the commanded targets of both arms at that step, proprio/velocity/effort
    = the obs; prompt, success, outcome and the episode's duration from the source; pickles that name
    only the logger's class and numpy."""
    src, out = rollouts
    ds = Dataset(src)
    meta, trajs, seen = read_export(out)
    assert seen <= ALLOWED_GLOBALS and ("robot_eval_logger.typing.traj_data", "TrajData") in seen
    assert meta.robot_type.value == "franka" and meta.location == "simulation"
    assert meta.robot_name.startswith("OpenArm-MuJoCo (OpenArm") and meta.evaluator_name == ds.meta.operator
    assert len(trajs) == ds.num_episodes == 2
    for entry, traj in zip(ds.episodes, trajs):
        cam = ds.load_cameras(entry)["head"]
        assert cam.num_frames == 3 and traj.episode_length == 3 and traj.step_hz == 2.5
        grid = cam.timestamps.tolist()  # the policy's steps are the camera's frames
        np.testing.assert_array_equal(traj.timestamps_ns, grid)
        np.testing.assert_array_equal(traj.frame_timestamps_ns["head"], grid)
        want = expected_steps(ds, entry, grid)
        np.testing.assert_array_equal(want["obs"]["head"], np.stack([f.load() for f in cam.frames()]))
        assert_steps_equal(traj, want)
        assert traj.language_command == ds.meta.tasks[entry["task_index"]]["prompt"]
        assert traj.success is entry["success"] is False and traj.outcome == entry["outcome"] == "not_done"
        assert traj.success_any is False and traj.task == entry["task"] and traj.episode_id == entry["id"]
        assert traj.eval_duration == 1.0  # 250 Hz streams from 0 to 1 s
        assert traj.policy["name"] == "zero" and traj.policy["sha256"] == ds.meta.data["model"]["sha256"]
        assert traj.action_names[:8] == [f"right_joint{j}" for j in range(1, 8)] + ["right_gripper"]
        assert traj.partial_success is None and traj.language_feedback is None


@pytest.mark.slow
def test_rollout_export_refuses_an_output_inside_the_source(rollouts, tmp_path):
    src, _ = rollouts
    before = tree_hashes(src)
    r = convert(src, src / "export", check=2)
    assert "inside the input" in r.stderr and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
    assert tree_hashes(src) == before and not (src / "export").exists()


# ------------------------------------------------------------ a generated dataset
def test_generated_dataset_reads_back_equal(generated, tmp_path, monkeypatch):
    """dataset-generate output (no evaluation: steps at the camera rate), every camera, SOURCE_DATE_EPOCH
    as the evaluation time (a simulated clock is not a date)."""
    ds = Dataset(generated)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01T00:00:00Z
    convert(generated, tmp_path / "out")
    meta, trajs, seen = read_export(tmp_path / "out")
    assert seen <= ALLOWED_GLOBALS
    assert meta.time.timestamp.isoformat() == "2026-01-01T00:00:00+00:00"
    hz = max(ds.meta.frequencies.cameras.values())
    for entry, traj in zip(ds.episodes, trajs):
        cams = ds.load_cameras(entry)
        stamps = [s.timestamps for k in ("obs", "action") for s in ds.streams(entry, k).values()]
        stamps += [c.timestamps for c in cams.values()]
        start, end = max(int(a[0]) for a in stamps), min(int(a[-1]) for a in stamps)
        grid = [start + k * round(1e9 / hz) for k in range(int((end - start) // round(1e9 / hz)) + 1)]
        assert traj.timestamps_ns.tolist() == grid and traj.episode_length == len(grid) > 1
        assert_steps_equal(traj, expected_steps(ds, entry, grid))
        assert set(traj.obs) == set(ds.camera_names) and traj.success is entry["success"]
        assert traj.eval_duration == (max(int(a[-1]) for a in stamps) - min(int(a[0]) for a in stamps)) / 1e9
        assert not hasattr(traj, "policy")  # a generation has no model


# ------------------------------------------ a recorded-like dataset (jittered clocks)
def test_recorded_streams_are_sampled_causally_and_the_time_is_the_first_stamp(tmp_path):
    src = write_synthetic(tmp_path / "src", episodes=2, seconds=1.0, camera_hz=10, size=(32, 24), jitter_ns=2_000_000)
    before = tree_hashes(src)
    convert(src, tmp_path / "a")
    convert(src, tmp_path / "b", "--step-hz", "25")
    assert tree_hashes(src) == before
    ds = Dataset(src)
    for out, hz in ((tmp_path / "a", 10.0), (tmp_path / "b", 25.0)):
        meta, trajs, seen = read_export(out)
        assert seen <= ALLOWED_GLOBALS
        first = min(int(s.timestamps[0]) for k in ("obs", "action") for s in ds.streams(ds.episodes[0], k).values())
        when = meta.time.timestamp  # the first stamp, to the microsecond, UTC
        assert when.utcoffset().total_seconds() == 0 and int(when.timestamp()) == first // 10**9
        assert when.microsecond == first % 10**9 // 1000
        assert meta.location == "synthetic" and meta.robot_name == "synthetic (OpenArm 2.0: right, left)"
        for entry, traj in zip(ds.episodes, trajs):
            assert traj.step_hz == hz
            grid = traj.timestamps_ns.tolist()
            assert np.all(np.diff(grid) == round(1e9 / hz))
            assert_steps_equal(traj, expected_steps(ds, entry, grid))
            assert traj.language_command == "Wave both arms." and traj.success is True
    # the same conversion names the same folder and writes the same bytes
    convert(src, tmp_path / "a2")
    assert tree_hashes(tmp_path / "a") == tree_hashes(tmp_path / "a2")
    # the filters apply as for every format
    yaml_path = src / "metadata.yaml"
    import yaml

    doc = yaml.safe_load(yaml_path.read_text())
    doc["episodes"][0]["success"] = False
    yaml_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    convert(src, tmp_path / "s", "--success-only")
    _, trajs, _ = read_export(tmp_path / "s")
    assert [t.episode_id for t in trajs] == ["1"]


def test_a_rollouts_steps_are_its_policy_steps_at_most_one_per_frame(tmp_path):
    """The default step rate: a rollout's evaluation.control_hz, capped at the fastest camera's rate (the
    scripted policy acts at every physics step, 500 Hz); the camera rate for any other dataset."""
    import yaml

    src = write_synthetic(tmp_path / "src", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24))
    assert default_step_hz(Dataset(src)) == 10.0
    doc = yaml.safe_load((src / "metadata.yaml").read_text())
    doc["operation_type"] = "rollout"
    for control_hz, want in ((5.0, 5.0), (500.0, 10.0)):
        doc["evaluation"] = {"policy": "p", "control_hz": control_hz}
        (src / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        assert default_step_hz(Dataset(src)) == want
    convert(src, tmp_path / "out")
    _, (traj,), _ = read_export(tmp_path / "out")
    assert traj.step_hz == 10.0 and traj.episode_length == 5  # 10 Hz frames at 0..0.4 s, one step each


def test_an_old_layout_with_the_lifter(tmp_path):
    """A 0.3.0 recording with the OpenArmCellLifter: its elevation follows the arms in action and proprio
    (17 values, named), and is in neither velocity nor effort (it has none)."""
    src = fixture_path("own", "dataset_0.3.0")
    convert(src, tmp_path / "out")
    ds = Dataset(src)
    _, trajs, seen = read_export(tmp_path / "out")
    assert seen <= ALLOWED_GLOBALS and len(trajs) == ds.num_episodes
    for entry, traj in zip(ds.episodes, trajs):
        assert traj.action_names[-1] == traj.proprio_names[-1] == "lifter_elevation"
        assert traj.action[0].shape == traj.proprio[0].shape == (17,) and traj.velocity[0].shape == (16,)
        for kind, field in (("obs", "proprio"), ("action", "action")):
            lifter = ds.streams(entry, kind)["lifter/elevation"]
            got = [row[-1] for row in getattr(traj, field)]
            want = [lifter.values[latest_at_or_before(lifter.timestamps, t), 0] for t in traj.timestamps_ns.tolist()]
            np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ bad input
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, monkeypatch):
    src = write_synthetic(tmp_path / "src", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24))
    before = tree_hashes(src)

    def refused(out, *args, what):
        r = convert(src, out, *args, check=2)
        assert what in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r
        assert not Path(out).exists() and not list(Path(out).parent.glob(f".tmp-{Path(out).name}*"))

    refused(src / "inside", what="inside the input")
    r = convert(src, src, check=2)
    assert "is the input" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "exists").mkdir()
    r = convert(src, tmp_path / "exists", check=2)
    assert "already exists" in r.stderr
    refused(tmp_path / "o1", "--step-hz", "0", what="--step-hz must be a positive number")
    refused(tmp_path / "o2", "--state", "pose", what="LeRobot formats only")
    r = run_cli("convert", src, tmp_path / "o3", "--step-hz", "5", check=2)
    assert "--step-hz applies to --format robot_eval_logger only" in r.stderr
    # a missing extra: one line naming the pip install, before anything is written
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "robot_eval_logger" else real(name, *a))
    refused(tmp_path / "o4", what="pip install 'openarm-sim-dataset[robot_eval_logger]'")
    monkeypatch.undo()
    # a broken stream: one line naming the file, the output never appears
    bad = tmp_path / "bad"
    import shutil

    shutil.copytree(src, bad)
    (bad / "episodes/0/action/arms/left/state.parquet").write_bytes(b"not parquet")
    r = convert(bad, tmp_path / "o5", check=2)
    assert "episodes/0/action/arms/left/state.parquet" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o5").exists() and not list(tmp_path.glob(".tmp-o5*"))
    assert tree_hashes(src) == before


# ------------------------------------------- the logger's own environment (optional)
@pytest.mark.slow
def test_the_loggers_own_environment_reads_it(rollouts, tmp_path):
    """In an interpreter where ``import robot_eval_logger`` works as its users run it (numpy 1.26 as it
    pins, huggingface_hub < 1.0, opencv, ml_collections: ROBOT_EVAL_LOGGER_PYTHON), the package's
    TrajData.load/MetaData.load read the export; tools/check_robot_eval_logger_load.py dumps what they
    read and it equals what this environment's loader reads."""
    python = os.environ.get("ROBOT_EVAL_LOGGER_PYTHON")
    if not python:
        pytest.skip("ROBOT_EVAL_LOGGER_PYTHON (a python with robot-eval-logger 0.0.1 importable) is not set")
    _src, out = rollouts
    dump = tmp_path / "dump.npz"
    r = subprocess.run([python, str(REPO / "tools/check_robot_eval_logger_load.py"), str(out), str(dump)],
                       capture_output=True, text=True, timeout=300, env={k: v for k, v in os.environ.items()
                                                                          if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = np.load(dump, allow_pickle=False)
    info = json.loads(str(got["info"]))
    _meta, trajs, _ = read_export(out)
    assert info["robot_type"] == "franka" and info["import"] == "robot_eval_logger"
    for i, traj in enumerate(trajs):
        np.testing.assert_array_equal(got[f"{i}/obs/head"], traj.obs["head"])
        np.testing.assert_array_equal(got[f"{i}/action"], np.stack(traj.action))
        np.testing.assert_array_equal(got[f"{i}/proprio"], np.stack(traj.proprio))
        t = info["trajectories"][i]
        assert (t["language_command"], t["success"], t["eval_duration"]) == (traj.language_command, traj.success,
                                                                             traj.eval_duration)
