"""Integrity manifests: written by every writer, verified by the ``integrity`` check, kept by copies,
refused when a carried file changed, rewritten by repair only for what it repaired."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
from conftest import OWN_FIXTURES, run_cli
from corrupt import flip_entropy_byte

from openarm_sim_dataset import Dataset, layout, manifest
from openarm_sim_dataset.merge import merge
from openarm_sim_dataset.repair import repair
from openarm_sim_dataset.synthetic import write_synthetic


def integrity(path, **kw):
    return {r.check: r for r in Dataset(path).validate(checks=["integrity"], **kw)}["integrity"]


def test_generated_episodes_have_manifests_that_sha256sum_accepts(generated, tmp_path):
    for ep in ("0", "1"):
        ep_dir = generated / "episodes" / ep
        entries = manifest.read(ep_dir)
        assert set(entries) == set(manifest.episode_files(ep_dir)) and len(entries) > 10
        assert any(k.startswith("sim/") for k in entries) and any(k.endswith(".jpeg") for k in entries)
    row = integrity(generated)
    assert row.status == "pass" and "MB/s" in row.detail
    # a copy with cp -r still passes (content, not inode or time, is what is recorded)
    copy = tmp_path / "cp"
    subprocess.run(["cp", "-r", str(generated), str(copy)], check=True)
    assert integrity(copy).status == "pass"
    if shutil.which("sha256sum"):  # the format is sha256sum's: verifiable without this package
        r = subprocess.run(["sha256sum", "-c", "--strict", "--quiet", layout.MANIFEST_FILE], cwd=copy / "episodes/1",
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_changed_missing_extra_files_fail_naming_the_file(generated, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    jpeg = sorted((copy / "episodes/0/cameras/head").iterdir())[3]
    jpeg.write_bytes(flip_entropy_byte(jpeg.read_bytes()))  # same size, still decodes
    (copy / "episodes/1/sim/frames.npz").unlink()
    (copy / "episodes/1/.hidden").write_text("x")
    row = integrity(copy)
    assert row.status == "fail" and row.episodes == ["0", "1"]
    assert f"episodes/0/cameras/head/{jpeg.name} changed" in row.detail
    rows = {r.check: r for r in Dataset(copy).validate(checks=["jpeg_frames"])}
    assert rows["jpeg_frames"].passed  # bit rot that still decodes: only the bytes tell
    v = manifest.verify_many([("1", copy / "episodes/1", manifest.read(copy / "episodes/1"))])["1"]
    assert v.missing == ["sim/frames.npz"] and v.extra == [".hidden"] and v.changed == []


def test_without_manifests_the_check_is_skipped_and_strict_fails(generated, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    (copy / "episodes/1" / layout.MANIFEST_FILE).unlink()
    row = integrity(copy)
    assert row.status == "fail" and row.episodes == ["1"] and "missing (other episodes have one)" in row.detail
    (copy / "episodes/0" / layout.MANIFEST_FILE).unlink()
    row = integrity(copy)
    assert row.status == "skip" and not row.passed and "written by another tool" in row.detail
    strict = integrity(copy, strict=True)
    assert strict.status == "fail" and "strict" in strict.detail
    # a malformed manifest fails naming it and the line
    (copy / "episodes/0" / layout.MANIFEST_FILE).write_text("not a manifest\n")
    row = integrity(copy)
    assert row.status == "fail" and "manifest.sha256: line 1" in row.detail


def test_every_writer_records_manifests(tmp_path):
    """Dataset.write, convert (dir and tar), synthetic and merge: every episode has a manifest that passes."""
    synth = write_synthetic(tmp_path / "synth", episodes=2, seconds=0.5, camera_hz=10, size=(32, 24))
    written = Dataset(OWN_FIXTURES / "dataset_0.3.0").write(tmp_path / "written")
    run_cli("convert", OWN_FIXTURES / "dataset_0.4.0", tmp_path / "tar", "--format", "openarm", "--camera-format", "tar", "-q")
    synth2 = write_synthetic(tmp_path / "synth2", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24), seed=3)
    merge([synth, synth2], tmp_path / "merged")  # 0.4.0 inputs: files carried, manifest checked and rewritten
    old = shutil.copytree(OWN_FIXTURES / "dataset_0.3.0", tmp_path / "old")
    merge([OWN_FIXTURES / "dataset_0.3.0", old], tmp_path / "merged_old", allow_duplicates=True)  # rewritten as 0.4.0
    for out in (synth, written, tmp_path / "tar", tmp_path / "merged", tmp_path / "merged_old"):
        ds = Dataset(out)
        assert all((layout.episode_dir(out, ep) / layout.MANIFEST_FILE).is_file() for ep in ds.episode_ids), out
        assert integrity(out).status == "pass", (out, integrity(out).detail)
    assert "cameras/head.tar" in manifest.read(tmp_path / "tar/episodes/0")


def test_merge_refuses_a_carried_file_that_differs_from_its_manifest(generated, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    f = copy / "episodes/1/sim/sidecar.npz"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 1
    f.write_bytes(bytes(data))
    r = run_cli("merge", generated, copy, "-o", tmp_path / "out", "--allow-duplicates", check=2)
    assert "episodes/1/sim/sidecar.npz" in r.stderr and "differs from its episode's manifest" in r.stderr
    assert not (tmp_path / "out").exists()


def test_repair_rewrites_only_the_repaired_entries(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = write_synthetic(tmp_path / "src", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24))
    ep = src / "episodes/0"
    state = ep / "obs/arms/right/state.parquet"
    t = pq.read_table(state)
    rows = t.column("qpos").to_pylist()
    rows[5][1] = None
    pq.write_table(t.set_column(1, "qpos", pa.array(rows, type=pa.list_(pa.float32()))), state)
    manifest.write(ep)  # as if the gap had been recorded so
    jpeg = sorted((ep / "cameras").rglob("*.jpeg"))[2]
    jpeg.write_bytes(jpeg.read_bytes() + b"\0")  # damage repair does not touch
    before = manifest.read(ep)
    out = tmp_path / "out"
    report = repair(src, out)
    assert report.repaired == 1
    after = manifest.read(out / "episodes/0")
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {"obs/arms/right/state.parquet", "summary.json"}  # the summary derived again (its rows, bytes)
    v = manifest.verify_many([("0", out / "episodes/0", after)])["0"]
    assert v.changed == [jpeg.relative_to(ep).as_posix()]  # still visible after the repair
    assert np.isfinite(Dataset(out).streams(0, "obs")["arms/right/qpos"].values).all()
