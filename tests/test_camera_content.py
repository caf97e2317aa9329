"""Camera coverage, frame continuity and camera-to-joint timing (issue 26 items 1-3): each check fails on
its own fault, planted with the manifests re-sealed (tests/corrupt_recorded.py CAMERA_FAULTS), on the
generated dataset and on it stripped to what a robot records; and passes on the project's generated data,
the live recorder's output and our recorded fixtures. The reference fixtures keep three frames of each
camera over 3 s of streams: coverage finds that, continuity passes, timing has too little to measure."""

from __future__ import annotations

import io
from pathlib import Path

import corrupt_recorded
import numpy as np
import pytest
from conftest import OWN_FIXTURES, REF_FIXTURES, REF_LAYOUTS
from PIL import Image

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.validate import Thresholds

#: one worker: the module's stripped copy is built once, not once per worker
pytestmark = pytest.mark.xdist_group("test_camera_content")

CHECKS = ["camera_coverage", "camera_continuity", "camera_joint_timing"]


@pytest.fixture(scope="module")
def stripped(generated, tmp_path_factory) -> Path:
    """``generated`` as a real robot records it: no sim/ folders, no simulation block (never modify)."""
    return corrupt_recorded.strip_to_recorded(generated, tmp_path_factory.mktemp("stripped") / "ds")


def _rows(root: Path, checks=CHECKS, **kw) -> dict:
    return {r.check: r for r in Dataset(root).validate(checks=checks, **kw)}


@pytest.mark.parametrize("kind", ["generated", "stripped"])
def test_clean_data_passes(kind, request):
    rows = _rows(request.getfixturevalue(kind))
    for name in CHECKS:
        assert rows[name].status == "pass", (name, rows[name].detail)
    edge = float(rows["camera_coverage"].detail.split("widest edge ")[1].split()[0])
    assert edge < 1.0, rows["camera_coverage"].detail  # the last frame within a period of the end; limit 3
    ratio = float(rows["camera_continuity"].detail.split("largest ratio ")[1].split()[0])
    assert ratio < 1.5, rows["camera_continuity"].detail  # the limit is 3
    assert "head lag -0.0" in rows["camera_joint_timing"].detail or "head lag +0.0" in rows["camera_joint_timing"].detail


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["generated", "stripped"])
@pytest.mark.parametrize("fault", sorted(corrupt_recorded.CAMERA_FAULTS))
def test_camera_fault_fails_its_own_check(fault, kind, request, tmp_path):
    check = corrupt_recorded.CAMERA_FAULTS[fault]
    copy = tmp_path / "copy"
    ep = corrupt_recorded.plant(request.getfixturevalue(kind), copy, fault)
    rows = _rows(copy, checks=[check, "integrity", "camera_frozen"])
    assert rows["integrity"].passed and not rows["integrity"].skipped, rows["integrity"].detail  # re-sealed
    assert rows["camera_frozen"].passed, rows["camera_frozen"].detail  # no held frame: only the new check sees it
    row = rows[check]
    expect = "fail" if kind == "generated" else corrupt_recorded.CAMERA_FAULTS_RECORDED[fault]
    assert row.status == expect, (fault, row.detail)
    if expect == "pass":  # a recorded camera's latency, not told apart from the motion's own rhythm: reported
        assert "head lag -0.02..+1." in row.detail, row.detail
        return
    assert ep in (row.episodes if expect == "fail" else row.warned), (fault, row.detail)
    assert "episode 1" not in row.detail.split("first:")[-1], row.detail  # it names the faulty episode alone
    if expect == "warn":  # under --strict a warning is a failure
        assert _rows(copy, checks=[check], strict=True)[check].failed


def test_fault_details_name_what_is_wrong(stripped, tmp_path):
    expect = {"camera_stops_early": "camera head: stops ", "camera_starts_late": "within the budget",
              "foreign_frame": "camera head: frame 14 ", "mirrored_frame": "camera head: frame 14 ",
              "frame_out_of_place": "camera wrist_right: frame ", "pictures_early": "s early",
              "pictures_late": "head lag -0.02..+1."}
    for fault, words in expect.items():
        copy = tmp_path / fault
        corrupt_recorded.plant(stripped, copy, fault)
        check = corrupt_recorded.CAMERA_FAULTS[fault]
        assert words in _rows(copy, checks=[check])[check].detail, (fault, words)


def test_coverage_tolerance_is_in_camera_periods(stripped, tmp_path):
    """The same 4 missing first frames pass with a tolerance of 5 periods: the threshold decides."""
    copy = tmp_path / "late"
    corrupt_recorded.plant(stripped, copy, "camera_starts_late")
    assert _rows(copy, checks=["camera_coverage"], thresholds=Thresholds(coverage_periods=5))["camera_coverage"].status == "pass"


def test_tiny_generated_passes(tiny_generated):
    """A real dataset-generate process: one 32x24 camera at 2.5 Hz."""
    rows = _rows(tiny_generated["path"])
    for name in CHECKS:
        assert rows[name].passed, (name, rows[name].detail)


def _noise_jpeg(k: int) -> bytes:
    img = np.random.default_rng(k).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def _smooth_jpeg(x: float) -> bytes:
    """A bright square at x (0..1) on a grey background: a picture that moves as the arm does."""
    img = np.full((48, 64, 3), 90, dtype=np.uint8)
    c = int(round(4 + 44 * x))
    img[16:32, c : c + 12] = 230
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def test_recorder_output_passes(tmp_path):
    """The live Recorder: 6 s at 250 Hz, a noise camera (every frame another picture: nothing to judge
    against) and a camera whose picture moves with the arm (measured at lag ~0)."""
    from openarm_sim_dataset.record import Recorder
    from openarm_sim_dataset.synthetic import MID_QPOS

    out = tmp_path / "ds"
    meta = {"location": "lab", "operator": "test", "tasks": [{"prompt": "Wave.", "description": "wave"}],
            "equipment": {"id": "rig", "version": "1", "embodiments": {"arms": {"id": "OpenArm", "version": "2.0"}},
                          "perceptions": {"cameras": {"head": {}, "wrist_right": {}}}}}
    t0, n = 1_772_000_000_000_000_000, 1500
    x = 0.5 + 0.5 * np.sin(np.arange(n) * 2 * np.pi / 500) * np.sin(np.arange(n) * 2 * np.pi / 3100)  # swings
    with Recorder(out, meta) as rec:
        ep = rec.start_episode(0)
        for i in range(n):
            t = t0 + i * 4_000_000
            for side in ("right", "left"):
                q = (MID_QPOS[side] + (x[i] if side == "right" else 0.0)).astype(np.float32)
                ep.add_obs(f"arms/{side}", t, qpos=q, qvel=q * 0, qtorque=q * 0)
                ep.add_action(f"arms/{side}", t, qpos=q)
            if i % 10 == 0:
                ep.add_frame("head", t + 1000, _smooth_jpeg(x[i]))
                ep.add_frame("wrist_right", t + 2000, _noise_jpeg(i))
        ep.save(success=True)
    rows = _rows(out)
    for name in CHECKS:
        assert rows[name].status == "pass", (name, rows[name].detail)
    assert "head lag " in rows["camera_joint_timing"].detail


@pytest.mark.parametrize("name", ["dataset_0.4.0", "dataset_0.4.0_tar", "dataset_0.3.0", "dataset_unversioned"])
def test_own_recorded_fixtures_pass(name):
    rows = _rows(OWN_FIXTURES / name)
    assert rows["camera_coverage"].status == "pass" and rows["camera_continuity"].status == "pass"
    assert rows["camera_joint_timing"].skipped  # 12 frames over 0.37 s: too short to cross-correlate


@pytest.mark.parametrize("name", REF_LAYOUTS or ["dataset_0.3.0"])
def test_reference_fixtures(name):
    """The reference's real 30 Hz cameras: three frames each, 0.04-0.07 s of 0.8-3 s streams. Their middle
    frames belong between their neighbours; the cameras stop seconds before the streams end (the fixture
    kept three frames), which coverage reports with the figures; nothing to cross-correlate."""
    if not REF_FIXTURES.is_dir():
        pytest.skip("../shared absent")
    rows = _rows(REF_FIXTURES / name)
    assert rows["camera_continuity"].status == "pass", rows["camera_continuity"].detail
    assert rows["camera_joint_timing"].skipped
    cov = rows["camera_coverage"]
    assert cov.failed and cov.episodes == ["0", "3"] and "stops 2934.6 ms before they end" in cov.detail, cov.detail


def test_an_undecodable_frame_is_left_to_jpeg_frames(stripped, tmp_path):
    """A truncated JPEG: jpeg_frames fails it; the content checks judge the other frames, without a warning."""
    import shutil
    import warnings

    copy = tmp_path / "copy"
    shutil.copytree(stripped, copy)
    frame = sorted((copy / "episodes/0/cameras/head").iterdir(), key=lambda p: int(p.stem))[5]
    frame.write_bytes(frame.read_bytes()[:100])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = _rows(copy, checks=["jpeg_frames", *CHECKS])
    assert rows["jpeg_frames"].failed
    assert all(rows[n].status == "pass" for n in CHECKS), {n: rows[n].detail for n in CHECKS}
