"""No pass without judging, walked over the whole check registry.

Every row of the registry is listed in :data:`NOTHING` with a dataset that gives it nothing to judge and
the words of its skip; a row added later without an entry fails :func:`test_every_row_has_a_dataset_that_gives_it_nothing`.
Each such row must then be a ``skip`` on that dataset (never a pass), and every row that passes or warns on
any dataset here must say what it judged (a count above 0). That every row fails on a planted fault is
shown by the tables of planted faults in the tests (``tools/docs_reference.planted_faults`` reads them;
the check reference prints them): :func:`test_every_row_has_a_planted_fault` walks the registry for it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import LEROBOT_FIXTURES as LEROBOT, as_unknown_robot, edit_info, lerobot_copy, run_cli

from openarm_sim_dataset import Dataset, layout
from openarm_sim_dataset.validate import validate
from openarm_sim_dataset.validate.registry import check_table, families

REPO = Path(__file__).resolve().parents[1]
OWN = REPO / "tests" / "fixture"

#: check -> "the dataset that gives it nothing: words of its skip" (a string, not a tuple: the check reference
#: reads tables of tuples keyed by check as planted faults). ``cameras_only``: one recorded episode of
#: one camera, no arm stream; ``unknown_robot``: a LeRobot dataset of a robot no profile knows (names
#: motor_0..5), no camera, three episodes; ``recording``: a row of simulated datasets only, which a
#: recording's table does not hold; ``empty``: a row that judges the dataset's container (metadata,
#: folders, files, indices): a dataset with no episode gets one INVALID verdict and no row at all
NOTHING = {
    "metadata": "empty",
    "episode_folders": "empty",
    "integrity": "unknown_robot: not an OpenArm layout",
    "episode_summary": "unknown_robot: not an OpenArm layout",
    "parquet_schema": "cameras_only: 0 parquet files",
    "nulls": "cameras_only: no obs or action values",
    "timestamps": "cameras_only: no obs or action stream",
    "qpos_jumps": "unknown_robot: has no profile",
    "joint_limits": "unknown_robot: has no profile",
    "joint_units": "unknown_robot: has no profile",
    "pose_quaternions": "unknown_robot: no pose streams",
    "episode_length": "empty",
    "cameras_present": "unknown_robot: no camera declared",
    "jpeg_frames": "unknown_robot: no camera declared",
    "camera_rate": "unknown_robot: no camera declared",
    "camera_span": "cameras_only: no camera frames and state streams",
    "frame_name_order": "unknown_robot: no camera of frame files",
    "camera_coverage": "cameras_only: no camera frames and state streams",
    "camera_frozen": "unknown_robot: no camera declared",
    "camera_continuity": "unknown_robot: no camera declared",
    "camera_joint_timing": "cameras_only: sees an arm stream",
    "camera_placement": "cameras_only: no camera over an arm that moves",
    "jpeg_encoding": "unknown_robot: not an OpenArm layout",
    "qvel_consistency": "unknown_robot: no obs arm stream",
    "action_follows_obs": "unknown_robot: no episode with obs and action arm qpos",
    "duplicate_episodes": "cameras_only: nothing to compare",
    "lerobot_info": "empty",
    "lerobot_files": "empty",
    "lerobot_indices": "empty",
    "lerobot_timestamps": "empty",
    "lerobot_video_frames": "unknown_robot: no",
    "lerobot_video_ranges": "unknown_robot: no video camera",
    "lerobot_stats": "empty",
    "lerobot_units": "unknown_robot: no OpenArm arm mapped",
    "nonfinite_values": "cameras_only: no obs or action stream",
    "constant_dimensions": "cameras_only: no state or action vector",
    "frozen_action": "cameras_only: no action vector",
    "pinned_at_bound": "cameras_only: no state or action vector",
    "outliers": "cameras_only: no state or action vector",
    "drift": "unknown_robot: drift needs 8 episodes",
    "stuck_zero_joint": "cameras_only: no state or action vector",
    "action_convention": "cameras_only: no state and action vector",
    "duplicate_rows": "cameras_only: no obs or action stream",
}


def _registry() -> dict[str, str]:
    """Every row of the registry -> its family."""
    return {name: family for family, rows, _ in families() for name, _ in rows}


def _sim_rows() -> set[str]:
    return {name for name, family in _registry().items() if family == "simulation"}


def test_every_row_has_a_dataset_that_gives_it_nothing():
    missing = set(_registry()) - set(NOTHING) - _sim_rows()
    assert not missing, f"rows without a dataset that gives them nothing (add them to NOTHING): {sorted(missing)}"
    assert not set(NOTHING) - set(_registry()), "NOTHING names rows the registry lacks"


def test_every_row_has_a_planted_fault():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        from docs_reference import planted_faults
    finally:
        sys.path.remove(str(REPO / "tools"))
    names = set(_registry())
    faults = planted_faults(names)
    assert names <= set(faults), f"rows no test plants a fault for: {sorted(names - set(faults))}"


@pytest.fixture(scope="module")
def nothing(tmp_path_factory) -> dict[str, Path]:
    """The datasets of :data:`NOTHING`, written once."""
    from openarm_sim_dataset.record import Recorder

    root = tmp_path_factory.mktemp("nothing")
    cams = root / "cameras_only"
    meta = {"operation_type": "teleop", "tasks": [{"prompt": "p"}],
            "equipment": {"embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM}},
                          "perceptions": {"cameras": {"head": {}}}}}
    rng = np.random.default_rng(0)
    with Recorder(cams, meta) as rec:
        ep = rec.start_episode(0)
        for k in range(20):
            ep.add_frame("head", 1_700_000_000_000_000_000 + k * 100_000_000,
                         rng.integers(0, 255, (48, 64, 3)).astype(np.uint8))
        ep.save()
    out = {"cameras_only": cams}
    if (LEROBOT / "v30_so101_m100").is_dir():
        out["unknown_robot"] = lerobot_copy("v30_so101_m100", root / "unknown_robot")
        edit_info(out["unknown_robot"], as_unknown_robot)
    return out


def _rows(path: Path) -> dict:
    return {r.check: r for r in validate(Dataset(path))}


@pytest.mark.parametrize("kind", ["cameras_only", "unknown_robot"])
def test_a_dataset_that_gives_a_row_nothing_gets_a_skip_saying_why(kind, nothing):
    if kind not in nothing:
        pytest.skip("tests/fixture/lerobot/v30_so101_m100 is absent")
    rows = _rows(nothing[kind])
    mine = {name: entry.partition(": ")[2] for name, entry in NOTHING.items() if entry.partition(": ")[0] == kind}
    for name, words in mine.items():
        if name not in rows:  # a row of the other layout: not in this dataset's table
            assert words == "not an OpenArm layout" or name.startswith("lerobot_"), (name, "missing")
            continue
        r = rows[name]
        assert r.status == "skip", (name, r.status, r.detail)
        assert words in r.detail, (name, r.detail)


def test_a_dataset_without_episodes_is_one_verdict_and_no_row(tmp_path):
    meta = {"version": layout.FORMAT_VERSION, "operation_type": "teleop", "tasks": [{"prompt": "p"}],
            "episodes": [], "equipment": {"embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM}}},
            "frequencies": {"obs": {}, "action": {}, "cameras": {}}}
    import yaml

    (tmp_path / "metadata.yaml").write_text(yaml.safe_dump(meta))
    report = validate(Dataset(tmp_path))
    assert [r.check for r in report] == ["episodes"] and report[0].status == "fail", report


def test_a_recording_holds_no_simulation_row():
    table = {name for name, _ in check_table(None)}
    assert not table & _sim_rows()


#: datasets written by others than this package (LeRobot itself) and by it: every row that passes or warns
#: there must say what it judged
JUDGED_ON = ["v30_so101", "v30_so101_m100", "v30_aloha", "v30_openarm_ros", "v30_state_actions", "v30_other_robot",
             "v21_bi_openarm", "v30_bi_openarm_av1"]


@pytest.mark.parametrize("name", JUDGED_ON + ["own:dataset_0.4.0", "own:dataset_0.2.0", "cameras_only", "unknown_robot"])
def test_no_row_passes_without_saying_what_it_judged(name, nothing, tmp_path):
    if name in nothing:
        path = nothing[name]
    elif name.startswith("own:"):
        path = OWN / name[4:]
    else:
        path = LEROBOT / name
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    report = validate(Dataset(copy))
    empty = [(r.check, r.detail) for r in report if r.status in ("pass", "warn")
             and not (r.judged and any(r.judged.values()))]
    assert not empty, empty
    assert "checks judged" in report.judged_summary()


def test_the_summary_says_what_was_judged_and_why_the_rest_was_not(nothing):
    if "unknown_robot" not in nothing:
        pytest.skip("tests/fixture/lerobot/v30_so101_m100 is absent")
    line = validate(Dataset(nothing["unknown_robot"])).judged_summary()
    assert "robot mystery_bot has no profile" in line and "no camera declared" in line, line


def test_markdown_report_and_fail_on_warn(tmp_path):
    root = lerobot_copy("v30_state_actions", tmp_path / "ds")
    out = tmp_path / "report.md"
    plain = run_cli("validate", root, check=0)  # warnings alone: valid, exit 0
    assert "judged: " in plain.stdout and "robot: generic" in plain.stdout
    strict = run_cli("validate", root, "--markdown", out, "--fail-on", "warn", check=1)
    assert "valid (" in strict.stdout  # the verdict is unchanged: only the exit code
    text = out.read_text()
    assert text.startswith(f"# Validation of `{root}`") and "**Judged:**" in text
    assert "| **warn** | `constant_dimensions` |" in text and "| skip | `joint_limits` |" in text
    assert "right.gripper.pos" in text  # the pinned gripper, named
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "report.md"]  # written atomically, nothing else
    assert "## Episodes, worst first" in text and "| 0 | valid |" in text
    doc = json.loads(run_cli("validate", root, "--json", "--by-episode", check=0).stdout)
    first = doc["by_episode"][0]  # episode 0: its action frozen for a second, its gripper pinned
    assert first["episode"] == "0" and {"frozen_action", "pinned_at_bound"} <= set(first["warned"]), doc["by_episode"]
    text_rows = run_cli("validate", root, "--by-episode", check=0).stdout
    assert "episode  verdict  findings" in text_rows
