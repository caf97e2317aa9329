"""Every key the project writes into metadata.yaml is re-derived by a check, or declared unverifiable
(docs/guarantees/keys.md, "Every key we write"; issue 26 item 4).

Each fault of ``corrupt.KEY_FAULTS`` writes one key wrong, with the manifests re-sealed (only a check of
meaning can see it); it must fail the check that re-derives that key, naming the episode, and the clean
dataset must pass the same checks. The camera descriptions (K, sizes, per-episode poses) are planted on a
default dataset (default run) and on a randomised one and a re-render with visual variants at another
size (slow): the K a user projects with is the K the images were drawn with.
"""

from __future__ import annotations

import shutil

import pytest
import yaml
from corrupt import plant

from openarm_sim_dataset.dataset import Dataset
from openarm_sim_dataset.validate import validate

#: fault -> the checks it must fail (each re-derives the key from the model, the sidecar or the streams)
CAUGHT_BY = {
    "K_wrong": ("sim_provenance",),
    "perception_size_wrong": ("jpeg_frames", "sim_provenance"),
    "camera_size_wrong": ("sim_provenance",),
    "initial_cubes_moved": ("sim_identity",),
    "camera_hz_wrong": ("sim_ranges",),
    "state_hz_wrong": ("sim_ranges",),
    "head_pose_moved": ("sim_provenance",),
}

#: the checks these tests run (the rest of the table is not what they are about)
CHECKS = ["metadata", "jpeg_frames", "sim_provenance", "sim_identity", "sim_ranges", "sim_geometry"]


def _rows(path, checks=CHECKS, **kw) -> dict:
    return {r.check: r for r in validate(Dataset(path), checks=checks, **kw)}


def _assert_caught(rows: dict, fault: str, ep: str) -> None:
    for name in CAUGHT_BY[fault]:
        row = rows[name]
        assert row.status == "fail", f"{fault}: {name} did not fail: {row.detail}"
        assert ep in row.episodes, (fault, name, row.episodes)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["K_wrong", "perception_size_wrong", "camera_size_wrong", "initial_cubes_moved",
                                   "camera_hz_wrong", "state_hz_wrong"])
def test_a_wrong_key_fails_the_check_that_rederives_it(generated, tmp_path, fault):
    ep = plant(generated, tmp_path / "bad", fault, reseal=True)
    rows = _rows(tmp_path / "bad")
    _assert_caught(rows, fault, ep)
    assert rows["metadata"].status == "pass"  # the document is well formed: only its meaning is wrong
    # the failing rows name what differs
    words = {"K_wrong": "simulation.cameras.head.K", "perception_size_wrong": "equipment.perceptions.cameras.head",
             "camera_size_wrong": "simulation.cameras.head says", "initial_cubes_moved": "initial_cubes",
             "camera_hz_wrong": "camera_hz", "state_hz_wrong": "state_hz"}
    assert words[fault] in rows[CAUGHT_BY[fault][-1]].detail, rows[CAUGHT_BY[fault][-1]].detail


def test_clean_datasets_pass_the_key_checks(generated):
    rows = _rows(generated)
    assert all(r.status == "pass" for r in rows.values()), {n: r.detail for n, r in rows.items() if r.status != "pass"}
    assert "camera descriptions (K, sizes) as drawn" in rows["sim_provenance"].detail
    assert "initial cubes" in rows["sim_identity"].detail


def test_declared_size_checked_on_recorded_data(tmp_path):
    """A recorded dataset (no simulation block) that declares its cameras' size is held to its JPEGs;
    one that declares none (the reference fixtures: ``{}``) is not."""
    from conftest import fixture_path

    src = fixture_path("own", "dataset_0.4.0")
    assert _rows(src, ["jpeg_frames"])["jpeg_frames"].status == "pass"
    bad = tmp_path / "declared"
    shutil.copytree(src, bad)
    doc = yaml.safe_load((bad / "metadata.yaml").read_text())
    doc["equipment"]["perceptions"]["cameras"]["head"] = {"width": 641, "height": 480}
    (bad / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    row = _rows(bad, ["jpeg_frames"])["jpeg_frames"]
    assert row.status == "fail" and "declares 641x480" in row.detail, row.detail


@pytest.mark.slow
def test_attempts_are_rederived_by_regeneration(generated, tmp_path):
    ep = plant(generated, tmp_path / "bad", "attempts_changed", reseal=True)
    row = _rows(tmp_path / "bad", ["sim_regenerate"], regenerate=[ep])["sim_regenerate"]
    assert row.status == "fail" and ep in row.episodes and "attempts" in row.detail, row.detail
    clean = _rows(generated, ["sim_regenerate"], regenerate=[ep])["sim_regenerate"]
    assert clean.status == "pass", clean.detail


@pytest.fixture(scope="module")
def rerendered(randomized, tmp_path_factory):
    """``randomized`` rendered again at 96x72, 2.5 Hz, two visual variants per episode (head and wrist)."""
    from openarm_sim_dataset.sim.render_dataset import RenderConfig, render_dataset

    out = tmp_path_factory.mktemp("keys") / "rendered"
    render_dataset(randomized, out, RenderConfig(cameras=("head", "wrist_right"), width=96, height=72, camera_hz=2.5,
                                                 visual_variants=2))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("which", ["randomized", "rerendered"])
@pytest.mark.parametrize("fault", ["K_wrong", "perception_size_wrong", "head_pose_moved"])
def test_camera_descriptions_on_randomised_data_and_rerenders(request, which, fault, tmp_path):
    """On a randomised dataset (each episode's head camera moved by its variation) and on a re-render with
    visual variants at another size, a wrong K, a wrong declared size or a wrong per-episode camera pose
    fails; the clean datasets pass (a stored per-frame pose off its model is ``cam_pose_shifted``,
    tests/test_validate.py)."""
    src = request.getfixturevalue(which)
    clean = _rows(src, CHECKS + ["sim_reprojection", "sim_wrist_projection"])
    assert all(r.status in ("pass", "skip") for r in clean.values()), {n: r.detail for n, r in clean.items()}
    ep = plant(src, tmp_path / "bad", fault, reseal=True)
    _assert_caught(_rows(tmp_path / "bad"), fault, ep)
