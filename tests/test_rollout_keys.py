"""Every key of a rollout's entries, and of its ``evaluation:`` / ``model:`` blocks, is re-derived from the
replay or the stored inputs, or declared unverifiable (docs/guarantees/keys.md; issue 38 item 5).

Each fault of ``corrupt.ROLLOUT_KEY_FAULTS`` writes one key of a ``dataset-evaluate`` rollout wrong, with the
manifests re-sealed (only a check of meaning can see it), and must fail the check that re-derives the key,
naming the episode; the clean rollouts pass the same checks. The rollouts: the scripted policy and the
random policy on pick_place and tray_green (tray_green's entries count arm-arm contacts), and the scripted
policy with ``--stop-on-success`` on pick_place, physics only.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from conftest import REPO, run_cli
from corrupt import plant

from openarm_sim_dataset.dataset import Dataset
from openarm_sim_dataset.validate import validate

#: fault -> the check that re-derives the key it writes wrong (planted on the rollouts of ROLLOUTS_OF)
ROLLOUT_FAULTS = {
    "success_any_flipped": "sim_labels",      # the rule at every control step of the replay
    "arm_contacts_changed": "sim_labels",     # arm-arm contact steps counted during the replay
    "policy_attempts_changed": "sim_labels",  # a policy's rollout: no scripted attempt (0)
    "stop_on_success_set": "sim_labels",      # the episode runs on past the first step the rule held
    "stop_on_success_cleared": "sim_labels",  # it ended at the first success, neither judged nor timed out
    "control_hz_doubled": "sim_identity",     # the commands' step pattern (each held 1/control_hz)
    "model_sha256_changed": "sim_identity",   # the built-in policy's source file (here, or at the commit)
    "policy_renamed": "sim_identity",         # the zero policy's commands: the initial joint positions
}
#: fault -> the rollouts it is planted on (a scripted policy makes attempts: only sim_regenerate shows them;
#: a rollout that never succeeds runs to its limit with or without stop_on_success)
ROLLOUTS_OF = {"policy_attempts_changed": ("random",), "stop_on_success_set": ("scripted",),
               "stop_on_success_cleared": ("stopped",)}
CHECKS = ["sim_identity", "sim_replay", "sim_labels"]
PHYSICS = ["--cameras", "none", "--quiet", "--tasks", "pick_place", "tray_green", "--episodes", "1"]


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("rollout_keys")
    run_cli("evaluate", "--policy", "scripted", "--out", root / "scripted", "--seed", "7001", *PHYSICS)
    run_cli("evaluate", "--policy", "random", "--out", root / "random", "--seed", "10", "--max-time", "1", *PHYSICS)
    run_cli("evaluate", "--policy", "scripted", "--out", root / "stopped", "--seed", "7001", "--stop-on-success",
            "--cameras", "none", "--quiet", "--episodes", "1")
    return {"scripted": root / "scripted", "random": root / "random", "stopped": root / "stopped"}


def _rows(path, checks=CHECKS) -> dict:
    return {r.check: r for r in validate(Dataset(path), checks=checks)}


@pytest.mark.parametrize("which", ["scripted", "random", "stopped"])
def test_clean_rollouts_pass(rollouts, which):
    rows = _rows(rollouts[which])
    assert all(r.status == "pass" for r in rows.values()), {n: r.detail for n, r in rows.items() if r.status != "pass"}
    assert "commands held 1/control_hz" in rows["sim_identity"].detail
    assert f"policy {'scripted' if which == 'stopped' else which}'s source" in rows["sim_identity"].detail


@pytest.mark.parametrize("fault", list(ROLLOUT_FAULTS))
def test_a_wrong_rollout_key_fails_the_check_that_rederives_it(rollouts, tmp_path, fault):
    for which in ROLLOUTS_OF.get(fault, ("scripted", "random")):
        ep = plant(rollouts[which], tmp_path / which, fault, reseal=True)
        rows = _rows(tmp_path / which)
        row = rows[ROLLOUT_FAULTS[fault]]
        assert row.status == "fail" and ep in row.episodes, (fault, which, row.detail)
        assert rows["sim_replay"].status == "pass"  # the physics is as recorded: only the key is wrong


def test_success_any_contradicting_success_names_both(rollouts, tmp_path):
    """The scripted rollout succeeds at the end: ``success_any: false`` there contradicts ``success`` and the
    replay (the rule held from some control step on); sim_labels says where it held."""
    plant(rollouts["scripted"], tmp_path / "bad", "success_any_flipped", reseal=True)
    row = _rows(tmp_path / "bad", ["sim_labels"])["sim_labels"]
    assert row.status == "fail" and "success_any False" in row.detail and "held at control steps" in row.detail


@pytest.mark.slow
def test_checkpoint_identity(tmp_path):
    """A checkpoint rollout: the named checkpoint (here a shipped baseline) hashes to ``model.sha256``; a
    changed hash fails sim_identity; the checkpoint's commands are held 1/control_hz (10 Hz)."""
    out = tmp_path / "ckpt"
    run_cli("evaluate", "--policy", str(REPO / "baselines/pick_place_cameras.pt"), "--out", out, "--episodes", "1",
            "--max-time", "0.4", "--quiet", "--seed", "7001")
    row = _rows(out, ["sim_identity", "sim_labels"])
    assert all(r.status == "pass" for r in row.values()), {n: r.detail for n, r in row.items()}
    assert "hashes to model.sha256" in row["sim_identity"].detail
    for fault in ("model_sha256_changed", "control_hz_doubled"):
        ep = plant(out, tmp_path / fault, fault, reseal=True)
        bad = _rows(tmp_path / fault, ["sim_identity"])["sim_identity"]
        assert bad.status == "fail" and ep in bad.episodes, (fault, bad.detail)


class _ArmsMeeting:
    """Turns both shoulders towards the middle (joint1 -1.2 rad right, +1.2 left; joint2 -0.8, +0.8): the
    arms meet and press on each other for most of the episode."""

    name = "arms_meeting"
    cameras = False
    control_hz = 10.0

    def reset(self) -> None:
        pass

    def act(self, obs):
        t = np.concatenate([np.asarray(obs["arms"][s]["qpos"], np.float64) for s in ("right", "left")])
        t[[0, 1, 8, 9]] += (-1.2, -0.8, 1.2, 0.8)
        return t


def arms_meeting() -> _ArmsMeeting:
    return _ArmsMeeting()


def test_arm_contacts_of_a_policy_are_counted_alike_by_the_environment_and_the_replay(tmp_path):
    """A policy's rollout whose arms touch: the environment's count (every physics step, before it, as the
    task controller counts) is the replay's, step for step; one more fails sim_labels."""
    out = tmp_path / "meet"
    run_cli("evaluate", "--policy", "test_rollout_keys:arms_meeting", "--out", out, "--tasks", "bimanual_tray",
            "--episodes", "1", "--cameras", "none", "--max-time", "3", "--seed", "3", "--quiet")
    assert yaml.safe_load((out / "metadata.yaml").read_text())["episodes"][0]["arm_contacts"] > 100
    rows = _rows(out)
    assert all(r.status == "pass" for r in rows.values()), {n: r.detail for n, r in rows.items()}
    assert "module:factory" in rows["sim_identity"].detail  # its identity: not verifiable, said so
    ep = plant(out, tmp_path / "bad", "arm_contacts_changed", reseal=True)
    row = _rows(tmp_path / "bad", ["sim_labels"])["sim_labels"]
    assert row.status == "fail" and ep in row.episodes and "arm_contacts" in row.detail, row.detail


def test_a_scripted_rollouts_attempts_by_regeneration(rollouts, tmp_path):
    """The scripted policy's attempts (its controller's count) are shown by regenerating the episode (tray_green,
    with its task's own configuration, on its id's clock); the random policy's rollout is not regenerable."""
    ep = plant(rollouts["scripted"], tmp_path / "bad", "attempts_changed", reseal=True)
    row = {r.check: r for r in validate(Dataset(tmp_path / "bad"), checks=["sim_regenerate"], regenerate=[ep])}
    assert row["sim_regenerate"].status == "fail" and "attempts" in row["sim_regenerate"].detail
    clean = {r.check: r for r in validate(Dataset(rollouts["scripted"]), checks=["sim_regenerate"], regenerate=[ep])}
    assert clean["sim_regenerate"].status == "pass", clean["sim_regenerate"].detail
    other = {r.check: r for r in validate(Dataset(rollouts["random"]), checks=["sim_regenerate"], regenerate=["1"])}
    assert other["sim_regenerate"].status == "skip" and "scripted controller" in other["sim_regenerate"].detail


def test_a_scripted_rollout_stopped_at_its_first_success_is_a_success(rollouts, tmp_path):
    """``--stop-on-success`` ends the scripted controller's episode where the rule first holds, before the
    controller judges it: the entry is the rule's (success), not the unfinished controller's "timeout"
    (written before), and that former label now fails sim_labels."""
    import shutil

    doc = yaml.safe_load((rollouts["stopped"] / "metadata.yaml").read_text())
    entry = doc["episodes"][0]
    assert entry["success"] is True and entry["outcome"] == "success" and entry["success_any"] is True, entry
    shutil.copytree(rollouts["stopped"], tmp_path / "old")
    entry.update(success=False, outcome="timeout")
    (tmp_path / "old" / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    row = _rows(tmp_path / "old", ["sim_labels"])["sim_labels"]
    assert row.status == "fail" and "says outcome 'timeout'" in row.detail, row.detail
