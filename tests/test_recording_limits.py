"""What a recording cannot show (issue 26 item 5), slow: the smallest fault of each class that
docs/guarantees/recordings.md ("What a recording cannot show") states the validator finds in recorded data (no
sidecar), planted by tools/measure_recording_limits.py into the tests' generated dataset stripped of its
sidecars (the data the table was measured on), is found by the check the table names; the classes the
table calls invisible leave every check passing at the largest size tried."""

from __future__ import annotations

import sys
from pathlib import Path

import corrupt_recorded
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
import measure_recording_limits as limits  # noqa: E402

pytestmark = pytest.mark.slow

#: class -> (the smallest size the table states is found, the check that finds it there, its status)
STATED = {
    "joint_offset_up": (0.0625, "joint_limits", "fail"),
    "joint_spike": (0.125, "qpos_jumps", "fail"),
    "frame_brightness": (12, "camera_continuity", "fail"),
    "frames_exchanged": (5, "camera_continuity", "fail"),
    "camera_starts_late": (4, "camera_coverage", "warn"),
}
#: classes no check finds without a sidecar, at the size tried
INVISIBLE = {"camera_brightness": 128, "camera_mirrored": 1, "success_flipped": 1}


@pytest.fixture(scope="module")
def recorded(generated, tmp_path_factory) -> Path:
    return corrupt_recorded.strip_to_recorded(generated, tmp_path_factory.mktemp("limits") / "ds")


def test_the_recorded_copy_is_clean(recorded):
    assert limits.findings(recorded) == {}


@pytest.mark.parametrize("fault", sorted(STATED))
def test_the_stated_smallest_fault_is_found(recorded, tmp_path, fault):
    size, check, status = STATED[fault]
    limits.plant(recorded, tmp_path / "ds", fault, size)
    found = limits.findings(tmp_path / "ds")
    assert found.get(check) == status, (fault, size, found)
    assert "integrity" not in found  # re-sealed: a check of meaning found it


@pytest.mark.parametrize("fault", sorted(INVISIBLE))
def test_what_a_recording_cannot_show_passes_every_check(recorded, tmp_path, fault):
    limits.plant(recorded, tmp_path / "ds", fault, INVISIBLE[fault])
    assert limits.findings(tmp_path / "ds") == {}
