"""camera_placement (validate/camera_placement.py): which camera hangs where. Camera folders exchanged in a
generated dataset stripped to what a robot records (manifests re-sealed, so integrity cannot tell) are
caught, naming both cameras; the same data without the exchange passes; what the data cannot tell (an
idle arm's wrist exchanged with the head) passes and says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import corrupt_recorded
import pytest

from openarm_sim_dataset import Dataset

#: one worker: the module's stripped copy is built once, not once per worker
pytestmark = pytest.mark.xdist_group("test_camera_placement")

#: fault -> the check that catches it (planted into every episode, manifests re-sealed)
FAULTS = {
    "head_wrist_right_exchanged": "camera_placement",  # the head and wrist_right folders exchanged
    "wrists_exchanged": "camera_placement",  # the wrist_left and wrist_right folders exchanged
}
PAIRS = {"head_wrist_right_exchanged": ("head", "wrist_right"), "wrists_exchanged": ("wrist_left", "wrist_right")}


@pytest.fixture(scope="module")
def stripped(generated, tmp_path_factory) -> Path:
    return corrupt_recorded.strip_to_recorded(generated, tmp_path_factory.mktemp("placement") / "ds")


def exchanged(src: Path, dst: Path, a: str, b: str) -> Path:
    """A copy of ``src`` with the camera folders ``a`` and ``b`` of every episode exchanged, re-sealed."""
    shutil.copytree(src, dst)
    for cams in sorted((dst / "episodes").glob("*/cameras")):
        if (cams / a).exists() and (cams / b).exists():
            (cams / a).rename(cams / "swap.tmp")
            (cams / b).rename(cams / a)
            (cams / "swap.tmp").rename(cams / b)
    corrupt_recorded.reseal(dst)
    return dst


def _row(root: Path):
    rows = {r.check: r for r in Dataset(root).validate(checks=["camera_placement", "integrity"])}
    assert rows["integrity"].passed and not rows["integrity"].skipped, rows["integrity"].detail
    return rows["camera_placement"]


def test_clean_recording_passes(stripped):
    row = _row(stripped)
    assert row.status == "pass" and "judged" in row.detail, row.detail


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_exchanged_cameras_are_named(stripped, tmp_path, fault):
    a, b = PAIRS[fault]
    row = _row(exchanged(stripped, tmp_path / "x", a, b))
    assert row.check == FAULTS[fault]
    assert row.failed and row.episodes == Dataset(stripped).episode_ids, row.detail
    assert f"{a} and {b} exchanged?" in row.detail or f"{b} and {a} exchanged?" in row.detail, row.detail
    assert row.findings and row.findings[0]["where"] in (f"camera {a}", f"camera {b}")


def test_what_the_data_cannot_tell_passes(stripped, tmp_path):
    """The left arm rests through a right-arm pick: its wrist camera and the head camera both keep a still
    whole view, so either name fits them."""
    row = _row(exchanged(stripped, tmp_path / "x", "head", "wrist_left"))
    assert row.status == "pass", row.detail


@pytest.mark.slow
@pytest.mark.parametrize("a", [None, ("head", "wrist_right"), ("wrist_left", "wrist_right"), ("head", "wrist_left")])
def test_bimanual_and_left_arm_episodes(mixed, tmp_path, a):
    """``mixed``: a left-arm tray_blue and a bimanual_tray episode, randomised scenes: clean, no alarm;
    exchanged, caught in the episodes whose arms tell the cameras apart."""
    src = corrupt_recorded.strip_to_recorded(mixed, tmp_path / "ds")
    if a is None:
        assert _row(src).status == "pass", _row(src).detail
        return
    row = _row(exchanged(src, tmp_path / "x", *a))
    assert row.failed and "exchanged?" in row.detail, row.detail
