"""dataset-convert --format openarm: every layout to 0.4.0 read back equal, dir<->tar, filters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ALL_FIXTURES, assert_reads_like_reference, fixture_path, run_cli, tree_hashes

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.synthetic import write_synthetic


def cli(*args, check: int | None = 0):
    return run_cli("convert", *args, check=check)


def assert_same_content(a: Path, b: Path, episodes: list[str] | None = None) -> int:
    """Every stream value, timestamp and JPEG byte of ``b`` equals ``a``'s (read by us)."""
    da, db = Dataset(a), Dataset(b)
    ids = episodes or da.episode_ids
    assert db.episode_ids == ids
    n = 0
    for ep in ids:
        for kind in ("obs", "action"):
            sa, sb = da.streams(ep, kind), db.streams(ep, kind)
            assert list(sa) == list(sb)
            for k in sa:
                np.testing.assert_array_equal(sa[k].timestamps, sb[k].timestamps)
                np.testing.assert_array_equal(sa[k].values, sb[k].values)
                n += sa[k].values.size
        ca, cb = da.load_cameras(ep), db.load_cameras(ep)
        assert list(ca) == list(cb)
        for name in ca:
            np.testing.assert_array_equal(ca[name].timestamps, cb[name].timestamps)
            assert all(fa.read_bytes() == fb.read_bytes() for fa, fb in zip(ca[name].frames(), cb[name].frames()))
            n += ca[name].num_frames
    return n


def form_checks_no_worse(src: Path, out: Path) -> int:
    """dataset-validate's form checks: every check the input passes, the output passes too."""
    validate = pytest.importorskip("openarm_sim_dataset.validate")

    def failed(path):
        return {r.check: r.detail for r in validate.validate(Dataset(path), simulation=False) if not r.passed and not r.skipped}

    before, after = failed(src), failed(out)
    if not Dataset(src).meta.frequencies.get("obs"):
        # the input declares no rates; the output declares the measured ones, so dropped samples
        # that were there all along become visible to the timestamp check
        after.pop("timestamps", None)
    assert set(after) <= set(before), {k: after[k] for k in set(after) - set(before)}
    return len(after)


@pytest.mark.slow
@pytest.mark.parametrize("kind,name", ALL_FIXTURES)
@pytest.mark.parametrize("camera_format", ["dir", "tar"])
def test_every_layout_converts_to_0_4_0_and_reads_back_equal(kind, name, camera_format, tmp_path):
    src = fixture_path(kind, name)
    before = tree_hashes(src)
    out = tmp_path / "out"
    r = cli(src, out, "--camera-format", camera_format, "-q")
    assert "episode(s)" in r.stdout and "frame(s)" in r.stdout
    ds = Dataset(out)
    assert ds.version == "0.4.0"
    assert yaml.safe_load((out / "metadata.yaml").read_text())["version"] == "0.4.0"
    cams = list((out / "episodes" / ds.episode_ids[0] / "cameras").iterdir())
    assert cams and all(p.is_dir() == (camera_format == "dir") for p in cams)
    assert all(p.suffix == ".tar" for p in cams if camera_format == "tar")
    assert assert_same_content(src, out) > 0
    # openarm_dataset reads the output as it reads the input
    renamed = Dataset(src).version in ("unversioned", "0.1.0")
    assert assert_reads_like_reference(out) > 0
    assert assert_reads_like_reference(out, src, renamed=renamed) > 0
    form_checks_no_worse(src, out)
    assert tree_hashes(src) == before


def test_dir_tar_round_trip_is_byte_exact(tmp_path):
    src = fixture_path("own", "dataset_0.4.0")
    cli(src, tmp_path / "tar", "--camera-format", "tar", "-q")
    cli(tmp_path / "tar", tmp_path / "dir", "--camera-format", "dir", "-q")
    a, b = tree_hashes(src), tree_hashes(tmp_path / "dir")
    frames = {k for k in a if k.endswith(".jpeg")}
    assert frames and {k: a[k] for k in frames} == {k: b[k] for k in frames}
    assert {k for k in b if k.endswith(".jpeg")} == frames
    assert_same_content(src, tmp_path / "dir")


def _flagged(tmp_path: Path) -> Path:
    src = write_synthetic(tmp_path / "src", episodes=5, seconds=0.5, camera_hz=10, size=(32, 24))
    path = src / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["tasks"] = [{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}]
    flags = [(True, True, 0), (False, True, 1), (True, False, 2), (None, True, 2), (True, True, 2)]
    for ep, (valid, success, task) in zip(doc["episodes"], flags):
        ep["success"], ep["task_index"] = success, task
        if valid is not None:
            ep["valid"] = valid
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return src


def test_valid_only_and_success_only_filter_and_remap_tasks(tmp_path):
    src = _flagged(tmp_path)
    cli(src, tmp_path / "valid", "--valid-only", "-q")
    ds = Dataset(tmp_path / "valid")
    assert ds.episode_ids == ["0", "2", "4"]  # "3" has no flag: not validated, excluded
    assert [t["prompt"] for t in ds.meta.tasks] == ["a", "c"]
    assert [ep["task_index"] for ep in ds.episodes] == [0, 1, 1]
    assert assert_same_content(src, tmp_path / "valid", ["0", "2", "4"]) > 0

    cli(src, tmp_path / "success", "--success-only", "-q")
    ds = Dataset(tmp_path / "success")
    assert ds.episode_ids == ["0", "1", "3", "4"]
    assert [t["prompt"] for t in ds.meta.tasks] == ["a", "b", "c"]
    assert [ep["task_index"] for ep in ds.episodes] == [0, 1, 2, 2]

    cli(src, tmp_path / "both", "--success-only", "--valid-only", "-q")
    ds = Dataset(tmp_path / "both")
    assert ds.episode_ids == ["0", "4"] and [t["prompt"] for t in ds.meta.tasks] == ["a", "c"]
    od = pytest.importorskip("openarm_dataset")
    ref = od.Dataset(tmp_path / "both")
    assert [ref.meta.data["tasks"][e["task_index"]]["prompt"] for e in ref.meta.episodes] == ["a", "c"]


def test_refusals_are_one_line(tmp_path):
    src = write_synthetic(tmp_path / "src", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24))
    r = cli(src, tmp_path / "o", "--valid-only", check=2)
    assert "no valid episode" in r.stderr and "metadata.yaml" in r.stderr and len(r.stderr.splitlines()) == 1
    (tmp_path / "exists").mkdir()
    r = cli(src, tmp_path / "exists", check=2)
    assert "already exists" in r.stderr
    r = cli(tmp_path / "missing", tmp_path / "o2", check=2)
    assert "missing" in r.stderr
    (src / "episodes/0/obs/arms/right/state.parquet").write_bytes(b"not parquet")
    r = cli(src, tmp_path / "o3", check=2)
    assert "state.parquet" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o3").exists() and not list(tmp_path.glob(".tmp-o3*"))
    r = cli(src, tmp_path / "o4", "--state", "pose", check=2)
    assert "LeRobot formats only" in r.stderr


def test_simulation_sidecars_are_kept(generated, tmp_path):
    src = generated
    cli(src, tmp_path / "out", "--camera-format", "tar", "-q")
    a, b = tree_hashes(src), tree_hashes(tmp_path / "out")
    sims = [k for k in a if "/sim/" in k]
    assert len(sims) == 4 and all(a[k] == b[k] for k in sims)
    assert Dataset(tmp_path / "out").meta.simulation == Dataset(src).meta.simulation
    s1, s2 = next(Dataset(src).sample(5)), next(Dataset(tmp_path / "out").sample(5))
    np.testing.assert_array_equal(s1.sim["object_pose"], s2.sim["object_pose"])


def test_exclude_knocked_drops_lucky_successes(tmp_path):
    src = _flagged(tmp_path)
    path = src / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["episodes"][4]["knocked_over"] = True  # a success on another face
    doc["episodes"][1]["knocked_over"] = False
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cli(src, tmp_path / "clean", "--success-only", "--exclude-knocked", "-q")
    ds = Dataset(tmp_path / "clean")
    assert ds.episode_ids == ["0", "1", "3"]
    assert [t["prompt"] for t in ds.meta.tasks] == ["a", "b", "c"]
    cli(src, tmp_path / "all", "--success-only", "-q")
    assert Dataset(tmp_path / "all").episode_ids == ["0", "1", "3", "4"]  # the flag alone decides
