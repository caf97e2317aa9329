"""The signal checks (every dimension of every state and action vector, whatever the robot): a clean
recording passes every row, a dataset that gives a row nothing skips it, and each planted fault is
caught by its row naming the dimension by its name, the episode and the time; LeRobot datasets written by
LeRobot itself (vectors named `state`/`actions`, a ROS 2 recording of OpenArm) are judged alike."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import OWN_FIXTURES
from corrupt_recorded import edit_columns

from openarm_sim_dataset import Dataset, layout
from openarm_sim_dataset.core.feature_roles import feature_roles, is_cartesian, state_action_pairs
from openarm_sim_dataset.record import Recorder
from openarm_sim_dataset.validate.signals import SIGNAL_CHECKS

ROWS = [name for name, _ in SIGNAL_CHECKS]
EPISODES, N, HZ = 8, 300, 100
T0 = 1_772_000_000_000_000_000
LEROBOT = OWN_FIXTURES / "lerobot"


def _motion(ep: int, side: int) -> tuple[np.ndarray, np.ndarray]:
    """(obs, action) qpos rows (N, 8) of one arm: smooth waves, the state following the command 5 samples
    late with 1 mrad of noise, the gripper opening and closing inside its range."""
    rng = np.random.default_rng(100 * ep + side)
    t = np.arange(N + 5) / HZ
    phase = rng.uniform(0, 2 * np.pi, 8)
    cmd = 0.4 * np.sin(2 * np.pi * 0.4 * t[:, None] + phase) + np.linspace(-0.5, 0.5, 8)
    cmd[:, 7] = 0.022 + 0.015 * np.sin(2 * np.pi * 0.3 * t + phase[7])
    obs = cmd[:-5] + rng.normal(0, 1e-3, (N, 8))
    return obs.astype(np.float32), cmd[5:].astype(np.float32)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """Eight episodes of two OpenArm arms recorded with the live recorder (100 Hz, 3 s)."""
    out = tmp_path_factory.mktemp("signals") / "ds"
    meta = {"operation_type": "teleop", "tasks": [{"prompt": "p"}],
            "equipment": {"embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM}}}}
    with Recorder(out, meta) as rec:
        saving = []
        for e in range(EPISODES):
            ep = rec.start_episode(0)
            arms = {side: _motion(e, i) for i, side in enumerate(("right", "left"))}
            for k in range(N):
                t = T0 + e * 10**10 + k * (10**9 // HZ)
                for side, (obs, cmd) in arms.items():
                    ep.add_obs(f"arms/{side}", t, qpos=obs[k])
                    ep.add_action(f"arms/{side}", t, qpos=cmd[k])
            saving.append(ep.save_nowait())
        for f in saving:
            f.result()
    return out


def _rows(root: Path, **kw) -> dict:
    return {r.check: r for r in Dataset(root).validate(checks=ROWS, **kw)}


def _stream(root: Path, ep: int, kind: str, side: str) -> Path:
    return root / "episodes" / str(ep) / kind / "arms" / side / "state.parquet"


def _edit(root: Path, episodes, kind: str, side: str, fn) -> None:
    for ep in episodes:
        edit_columns(_stream(root, ep, kind, side), {"qpos": fn})


def _set(joint: int, value: float):
    def fn(v):
        v[:, joint] = value
        return v
    return fn


def _stamps(root: Path, ep: int, kind: str, side: str) -> np.ndarray:
    return pq.read_table(_stream(root, ep, kind, side), columns=["timestamp"]).column(0).cast("int64").to_numpy()


def test_feature_roles_follow_lerobots_conventions_and_their_variants():
    vec = {"dtype": "float32", "shape": [6]}
    features = {"observation.state": vec, "state": vec, "observation.joint_positions": vec, "action": vec,
                "actions": vec, "action.joint_positions": vec, "observation.velocity": vec, "observation.effort": vec,
                "observation.images.top": {"dtype": "video", "shape": [48, 64, 3]}, "cam": {"dtype": "image", "shape": [3]},
                "observation.environment_state": vec, "next.reward": {"dtype": "float32", "shape": [1]},
                "next.done": {"dtype": "bool", "shape": [1]}, "timestamp": {"dtype": "float32", "shape": [1]},
                "language": {"dtype": "string", "shape": [1]}, "weird": vec}
    roles = {k: (r.role, r.quantity) for k, r in feature_roles(features).items()}
    assert roles == {
        "observation.state": ("state", "position"), "state": ("state", "position"),
        "observation.joint_positions": ("state", "position"), "action": ("action", "position"),
        "actions": ("action", "position"), "action.joint_positions": ("action", "position"),
        "observation.velocity": ("state", "velocity"), "observation.effort": ("state", "effort"),
        "observation.images.top": ("camera", None), "cam": ("camera", None),
        "observation.environment_state": ("other", None), "next.reward": ("other", None), "next.done": ("other", None),
        "timestamp": ("other", None), "language": ("other", None), "weird": ("other", None)}
    names = {"state": ["a.pos", "b.pos"], "actions": ["b.pos", "a.pos"]}
    assert state_action_pairs({"state": vec, "actions": vec}, names) == [("state", "actions")]
    assert is_cartesian("right_qz.pos") and is_cartesian("x") and not is_cartesian("right_joint3.pos")


def test_a_clean_recording_passes_every_signal_row(recorded):
    rows = _rows(recorded)
    assert {n: r.status for n, r in rows.items()} == dict.fromkeys(ROWS, "pass"), \
        {n: r.detail for n, r in rows.items() if r.status != "pass"}
    assert all(rows[n].judged and rows[n].judged["episodes"] == EPISODES for n in ROWS)
    assert rows["constant_dimensions"].judged["dimensions"] == 32
    assert "a command" in rows["action_convention"].detail


def test_a_row_with_nothing_to_judge_skips(recorded):
    rows = _rows(recorded, episodes=[])
    assert {n: r.status for n, r in rows.items()} == dict.fromkeys(ROWS, "skip")
    drift = _rows(recorded, episodes=["0", "1", "2", "3"])["drift"]
    assert drift.status == "skip" and "needs 8 episodes in which a vector moves" in drift.detail
    assert "the most is 4" in drift.detail


def _frozen(v):
    v[50:260] = v[50]
    return v


def _spike(v):
    v[120, 1] += 3.0
    return v


def _gripper_at_max(v):
    v[:, 7] = np.where(np.arange(len(v)) < 0.95 * len(v), 0.04, np.linspace(0.01, 0.039, len(v)))
    return v


def _shift(v):
    v[:, 0] += 1.0
    return v


def _nonfinite(v):
    v[100, 2], v[150, 2] = np.inf, np.nan
    return v


def _plant_next_state(root: Path) -> None:
    for ep in range(EPISODES):
        for side in ("right", "left"):
            obs = np.array(pq.read_table(_stream(root, ep, "obs", side)).column("qpos").to_pylist())
            edit_columns(_stream(root, ep, "action", side), {"qpos": lambda v, o=obs: np.r_[o[1:], o[-1:]]})


def _plant_same_frame(root: Path) -> None:
    for ep in range(EPISODES):
        for side in ("right", "left"):
            obs = np.array(pq.read_table(_stream(root, ep, "obs", side)).column("qpos").to_pylist())
            edit_columns(_stream(root, ep, "action", side), {"qpos": lambda v, o=obs: o})


def _plant_rows(root: Path, ep: int, side: str, edit) -> None:
    path = _stream(root, ep, "obs", side)
    pq.write_table(edit(pq.read_table(path)), path)


def _duplicate_row(t: pa.Table) -> pa.Table:
    return t.take(pa.array(np.r_[0:101, 100, 101:t.num_rows]))


def _repeat_stamp(t: pa.Table) -> pa.Table:
    ts = t.column("timestamp").cast("int64").to_numpy().copy()
    ts[101] = ts[100]
    i = t.schema.get_field_index("timestamp")
    return t.set_column(i, t.schema.field(i), pa.array(ts).cast(t.schema.field(i).type))


#: fault -> (the row, its status, words of its detail, plant(root), (episode, where, sample) of a finding or None)
FAULTS = {
    "nonfinite": ("nonfinite_values", "fail", "obs arms/right/qpos[2] joint3: 1 NaN, 1 +Inf",  # +Inf and NaN in the right arm's joint3
                  lambda r: _edit(r, [2], "obs", "right", _nonfinite), ("2", "obs arms/right/qpos", 100)),
    "constant": ("constant_dimensions", "warn",  # the left arm's joint5 at 0.25 in every sample (obs and action)
                 "obs arms/left/qpos[4] joint5 = 0.25; action arms/left/qpos[4] joint5 = 0.25",
                 lambda r: [_edit(r, range(EPISODES), k, "left", _set(4, 0.25)) for k in ("obs", "action")], None),
    "frozen_action": ("frozen_action", "warn", "episode 3 70% (longest 2.10 s from 0.50 s)",  # both arms' commands held 2.1 s
                      lambda r: [_edit(r, [3], "action", s, _frozen) for s in ("right", "left")], ("3", "action", 50)),
    "gripper_at_max": ("pinned_at_bound", "warn",  # the right gripper at its maximum 95 % of every episode
                       "obs arms/right/qpos[7] gripper at its maximum 0.04 for 95.",
                       lambda r: _edit(r, range(EPISODES), "obs", "right", _gripper_at_max), ("0", "obs arms/right/qpos", 0)),
    "outlier": ("outliers", "warn", "obs arms/left/qpos[1] joint2: 1 outlier(s), 2 jump(s)",  # one sample of joint2 + 3 rad
                lambda r: _edit(r, [5], "obs", "left", _spike), ("5", "obs arms/left/qpos", 120)),
    "drift": ("drift", "warn", "obs arms/right/qpos[0] joint1",  # the last quarter's right joint1 + 1 rad (obs and action)
              lambda r: [_edit(r, [6, 7], k, "right", _shift) for k in ("obs", "action")], None),
    "stuck_zero": ("stuck_zero_joint", "fail", "obs arms/right/qpos[2] joint3 (8 of 8 episodes)",  # joint3 0.0 throughout
                   lambda r: [_edit(r, range(EPISODES), k, "right", _set(2, 0.0)) for k in ("obs", "action")],
                   ("0", "obs arms/right/qpos", 0)),
    "stuck_zero_once": ("stuck_zero_joint", "warn",  # joint3 0.0 over episode 4 alone
                        "0.0 over some episodes while the rest of its vector moves: obs arms/right/qpos[2] joint3 (1 of 8",
                        lambda r: _edit(r, [4], "obs", "right", _set(2, 0.0)), ("4", "obs arms/right/qpos", 0)),
    "action_same_frame": ("action_convention", "warn", "the state of the same frame",  # action[t] = state[t]
                          _plant_same_frame, ("0", "action arms/left/qpos", 0)),
    "duplicate_row": ("duplicate_rows", "warn", "1 duplicate row(s), 0 repeated stamp(s)",  # row 100 written twice
                      lambda r: _plant_rows(r, 1, "right", _duplicate_row), ("1", "obs arms/right/qpos", 101)),
    "repeated_stamp": ("duplicate_rows", "fail",  # row 101 stamped as row 100, its values its own
                       "0 duplicate row(s), 1 repeated stamp(s) with different values",
                       lambda r: _plant_rows(r, 1, "left", _repeat_stamp), ("1", "obs arms/left/qpos", 101)),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_planted_fault_is_caught_naming_the_dimension(fault, recorded, tmp_path):
    row, status, words, plant, where = FAULTS[fault]
    root = tmp_path / fault
    shutil.copytree(recorded, root)
    plant(root)
    rows = _rows(root)
    r = rows[row]
    assert r.status == status, r.detail
    assert words in r.detail, r.detail
    if where is not None:
        ep, stream, sample = where
        kind, _, key = stream.partition(" ")
        side = key.split("/")[1] if key else "right"
        t = _stamps(root, int(ep), kind if kind != "action" or key else "action", side)[sample]
        assert any(f["episode"] == ep and f["where"].startswith(stream) and f["t_ns"] == t for f in r.findings), r.findings
    # every other row stays quiet, but for what the fault makes true of them too: a frozen action jumps where
    # it resumes, a joint at 0.0 in every episode is constant
    also = {"frozen_action": {"outliers"}, "stuck_zero": {"constant_dimensions"}}
    loud = {n for n, x in rows.items() if x.status in ("warn", "fail") and n != row} - also.get(fault, set())
    assert not loud, {n: rows[n].detail for n in loud}


def test_an_action_equal_to_the_next_state_is_reported_as_the_convention(recorded, tmp_path):
    """action[t] = state[t + 1] (a ROS 2 recorder's convention, the last frame its own): a pass naming it."""
    root = tmp_path / "next_state"
    shutil.copytree(recorded, root)
    _plant_next_state(root)
    r = _rows(root)["action_convention"]
    assert r.status == "pass" and r.detail == "action = the next state (lag +1 frame, +10.0 ms) in 16 episode-vector(s)"


def test_validated_in_groups_the_dataset_wide_rows_give_the_same_verdicts(recorded, tmp_path, monkeypatch):
    """Groups of 3 episodes: the rows that compare a dimension over the dataset (EpisodeCheck rows) still
    see every episode (the same detail), the others the same verdicts."""
    from openarm_sim_dataset.validate import groups
    from openarm_sim_dataset.validate.check import EpisodeCheck

    root = tmp_path / "grouped"
    shutil.copytree(recorded, root)
    _edit(root, [6, 7], "obs", "right", _shift)
    _edit(root, range(EPISODES), "obs", "left", _gripper_at_max)
    whole = _rows(root)
    monkeypatch.setattr(groups, "GROUP_SIZE", 3)
    grouped = _rows(root)
    assert {n: r.status for n, r in grouped.items()} == {n: r.status for n, r in whole.items()}
    assert whole["drift"].status == whole["pinned_at_bound"].status == "warn"
    for name, fn in SIGNAL_CHECKS:
        if isinstance(fn, EpisodeCheck):
            assert grouped[name].detail == whole[name].detail and grouped[name].judged == whole[name].judged


def test_a_dimension_nan_throughout_fails_nonfinite_alone_and_warns_nothing(recorded, tmp_path):
    """Episode 2's right joint3 NaN in every sample: `nonfinite_values` fails naming it; the other rows judge
    the finite values (no numpy warning, no crash, no alarm of their own)."""
    import warnings

    root = tmp_path / "nan"
    shutil.copytree(recorded, root)
    _edit(root, [2], "obs", "right", _set(2, np.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rows = _rows(root)
    assert rows["nonfinite_values"].status == "fail" and "obs arms/right/qpos[2] joint3: 300 NaN" in rows["nonfinite_values"].detail
    assert {n for n, r in rows.items() if r.status != "pass"} == {"nonfinite_values"}


def test_drift_is_compared_across_tasks_when_no_task_has_enough_episodes(recorded, tmp_path):
    """A prompt per episode (eight tasks of one episode each): the quarters are compared across tasks."""
    import yaml

    root = tmp_path / "prompts"
    shutil.copytree(recorded, root)
    _edit(root, [6, 7], "obs", "right", _shift)
    doc = yaml.safe_load((root / "metadata.yaml").read_text())
    doc["tasks"] = [{"prompt": f"p{i}"} for i in range(EPISODES)]
    for i, e in enumerate(doc["episodes"]):
        e["task_index"] = i
    (root / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = _rows(root)["drift"]
    assert r.status == "warn" and "obs arms/right/qpos[0] joint1 (all tasks together)" in r.detail, r.detail


def _lerobot(name: str) -> Path:
    src = LEROBOT / name
    if not src.is_dir():
        pytest.skip(f"{src} is absent")
    return src


def test_state_and_actions_vectors_with_constant_dimensions_a_gripper_at_max_and_a_frozen_action():
    """LeRobot 0.4.4's own files: vectors named `state` and `actions`, 4 of 12 dimensions constant, the right
    gripper 95 % at its maximum, episode 0's action frozen for frames 5-35, action = the next state."""
    rows = _rows(_lerobot("v30_state_actions"))
    assert rows["constant_dimensions"].status == "warn"
    for name in ("state[3] left.joint_4.pos = 0.3", "state[4] left.joint_5.pos = -0.2", "actions[3] left.joint_4.pos = 0.3"):
        assert name in rows["constant_dimensions"].detail
    assert rows["pinned_at_bound"].status == "warn"
    assert "state[11] right.gripper.pos at its maximum 1 for 95.0% of 120 samples" in rows["pinned_at_bound"].detail
    frozen = rows["frozen_action"]
    assert frozen.status == "warn" and frozen.warned == ["0"]
    longest = [f for f in frozen.findings if "longest" in f["what"]]
    assert abs(longest[0]["t_ns"] - 5e9 / 30) < 1e6 and abs(longest[0]["end_ns"] - 36e9 / 30) < 1e6  # frames 5..35
    assert "the next state (lag +1 frame, +33.3 ms)" in rows["action_convention"].detail
    assert rows["nonfinite_values"].status == rows["duplicate_rows"].status == rows["stuck_zero_joint"].status == "pass"


def test_a_joint_missing_from_joint_states_is_zero_while_its_arm_moves():
    """A ROS 2 recording of OpenArm (`left_rev1`.. names) whose `right_rev3` is 0.0 in every frame: the row
    fails naming it by its LeRobot name, in the state and in the action."""
    rows = _rows(_lerobot("v30_openarm_ros"))
    r = rows["stuck_zero_joint"]
    assert r.status == "fail" and r.episodes == ["0", "1", "2"]
    assert "observation.state[10] right_rev3 (3 of 3 episodes)" in r.detail and "action[10] right_rev3" in r.detail
    assert "the next state (lag +1 frame" in rows["action_convention"].detail


@pytest.mark.parametrize("name", ["v30_so101", "v30_so101_m100", "v30_aloha", "v30_bi_openarm_av1", "v21_bi_openarm",
                                  "v30_other_robot"])
def test_clean_datasets_written_by_lerobot_raise_no_signal_alarm(name):
    rows = _rows(_lerobot(name))
    loud = {n: r.detail for n, r in rows.items() if r.status in ("warn", "fail")}
    assert not loud
    assert {n for n, r in rows.items() if r.status == "skip"} == {"drift"}  # 3 episodes


def test_a_dataset_without_state_or_action_skips_the_rows_of_roles(tmp_path):
    """`observation.state` and `action` renamed to the environment's state and a reward: no state or action
    vector to judge (only the rows of every stream judge them)."""
    root = tmp_path / "roles"
    shutil.copytree(_lerobot("v30_so101_m100"), root)
    renames = {"observation.state": "observation.environment_state", "action": "next.reward"}
    info = json.loads((root / "meta/info.json").read_text())
    info["features"] = {renames.get(k, k): v for k, v in info["features"].items()}
    (root / "meta/info.json").write_text(json.dumps(info))
    for path in (root / "data").rglob("*.parquet"):
        t = pq.read_table(path)
        pq.write_table(t.rename_columns([renames.get(n, n) for n in t.column_names]), path)
    rows = _rows(root)
    assert {n for n, r in rows.items() if r.status == "skip"} == set(ROWS) - {"nonfinite_values", "duplicate_rows"}
    assert rows["nonfinite_values"].status == rows["duplicate_rows"].status == "pass"
