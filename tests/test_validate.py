"""The validator on a clean simulated dataset and on corrupted copies (one planted fault each)."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import OWN_FIXTURES, REF_FIXTURES, run_cli, run_cli_process
from corrupt import FAULTS, plant
from openarm_sim_dataset import Dataset
from openarm_sim_dataset.validate import Thresholds, valid_flags

pytest.importorskip("mujoco")

#: fault -> the check that knows its meaning
EXPECTED = {
    "drop_frame": "timestamps",
    "depth_in_mm": "sim_geometry",
    "frozen_wrist_pose": "sim_geometry",
    "action_shift": "sim_streams_agree",
    "nan_qpos": "nulls",
    "null_qpos_no_statistics": "nulls",
    "model_changed": "sim_provenance",
    "truncated_jpeg": "jpeg_frames",
    "missing_episode": "episode_folders",
    "unlisted_half_written": "episode_folders",
}
#: faults that only a check of meaning can see: the schema checks must pass on them
SCHEMA_BLIND = {"depth_in_mm", "frozen_wrist_pose", "action_shift"}
SCHEMA_CHECKS = ("parquet_schema", "sim_schema", "sim_ranges")


def rows_by_name(path, **kw):
    return {r.check: r for r in Dataset(path).validate(**kw)}


def test_clean_dataset_passes_every_check(generated):
    rows = rows_by_name(generated)
    failed = {k: r.detail for k, r in rows.items() if not r.passed and not r.skipped}
    assert failed == {}
    assert set(EXPECTED.values()) <= set(rows)
    # figures are reported
    assert "cube-frames" in rows["sim_reprojection"].detail and "bit-exact" in rows["sim_replay"].detail


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_fails_the_check_that_knows_it(generated, tmp_path, fault):
    copy = tmp_path / "copy"
    episode = plant(generated, copy, fault)
    rows = rows_by_name(copy)
    row = rows[EXPECTED[fault]]
    assert not row.passed, (fault, row)
    if fault not in ("model_changed", "unlisted_half_written"):
        assert episode in row.episodes, (fault, row)
    if fault in SCHEMA_BLIND:
        for name in SCHEMA_CHECKS:
            assert rows[name].passed, (fault, name, rows[name].detail)
    if fault == "frozen_wrist_pose":
        assert not rows["sim_wrist_projection"].passed
    if fault == "model_changed":
        assert "model hash" in row.detail and not rows["sim_replay"].passed


def test_reference_validate_misses_null_without_statistics(generated, tmp_path):
    """openarm_dataset trusts parquet statistics: a null written without them passes its validate."""
    od = pytest.importorskip("openarm_dataset")
    copy = tmp_path / "copy"
    plant(generated, copy, "null_qpos_no_statistics")
    assert od.Dataset(copy).validate() is True
    assert not rows_by_name(copy, simulation=False)["nulls"].passed


def test_cli_table_json_flags_and_exit_codes(generated, tmp_path):
    copy = tmp_path / "copy"
    plant(generated, copy, "action_shift")
    before = (copy / "metadata.yaml").read_bytes()
    r = run_cli("validate", copy, "--no-update-metadata", check=1)
    assert "[FAIL] sim_streams_agree" in r.stdout and "[pass] sim_replay" in r.stdout
    assert (copy / "metadata.yaml").read_bytes() == before
    r = run_cli("validate", copy, "--json", "--checks", "nulls", "sim_streams_agree", check=None)
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["valid"] is False and doc["episodes"] == {"0": False, "1": True}
    meta = yaml.safe_load((copy / "metadata.yaml").read_text())
    assert [e["valid"] for e in meta["episodes"]] == [False, True]
    r = run_cli("validate", tmp_path / "nothing", check=2)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    r = run_cli("validate", generated, "--no-update-metadata", "--checks", "nulls", "--episodes", "1")
    assert "1/1 episodes valid" in r.stdout
    # the installed tool as a process: the same exit status
    assert run_cli_process("validate", copy, "--no-update-metadata", "--checks", "sim_streams_agree",
                           check=1).stdout.count("[FAIL] sim_streams_agree") == 1


def test_thresholds_are_overridable(generated):
    rows = rows_by_name(generated, thresholds=Thresholds(max_joint_step=1e-6), checks=["qpos_jumps"])
    assert not rows["qpos_jumps"].passed


@pytest.mark.parametrize("name", ["dataset_0.4.0", "dataset_0.3.0", "dataset_unversioned"])
def test_form_checks_on_recorded_fixtures(name):
    rows = Dataset(OWN_FIXTURES / name).validate()
    assert all(r.passed or r.skipped for r in rows), [(r.check, r.detail) for r in rows if not r.passed]
    assert not any(r.check.startswith("sim_") for r in rows)


def test_reference_fixture_findings():
    """The reference's 0.3.0 fixture has real jitter: our checks say so with figures."""
    if not REF_FIXTURES.is_dir():
        pytest.skip("../shared absent")
    ds = Dataset(REF_FIXTURES / "dataset_0.3.0")
    rows = {r.check: r for r in ds.validate()}
    assert not rows["timestamps"].passed and "dropped-sample gaps" in rows["timestamps"].detail
    assert valid_flags(ds, list(rows.values())) == {"0": False, "3": False}


@pytest.mark.slow
def test_regenerate_compares_every_array(generated, tmp_path):
    rows = rows_by_name(generated, regenerate=["1"], checks=["sim_regenerate"])
    assert rows["sim_regenerate"].passed, rows["sim_regenerate"].detail
    copy = tmp_path / "copy"
    plant(generated, copy, "depth_in_mm")
    rows = rows_by_name(copy, regenerate=["1"], checks=["sim_regenerate"])
    assert not rows["sim_regenerate"].passed and "depth_head" in rows["sim_regenerate"].detail
