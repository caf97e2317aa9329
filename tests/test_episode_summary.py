"""The per-episode summary (``episodes/<id>/summary.json``, issue 27): written by every writer, listed in
the manifest, equal to what the files say; ``dataset-info`` reads it instead of the files and reports
exactly what the files give; an episode without a usable summary is read from its files; hard-linked
copies of one episode count their bytes once; the ``episode_summary`` check fails a summary that
disagrees with its files (planted faults from tests/corrupt.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from corrupt import SUMMARY_FAULTS, plant_summary
from test_record import T0, metadata, record

from openarm_sim_dataset import Dataset, episode_summary, layout, manifest
from openarm_sim_dataset.info import dataset_info, disk_bytes
from openarm_sim_dataset.validate.core import validate


def info_without_summaries(root: Path, tmp: Path) -> dict:
    """dataset_info of a copy of ``root`` without summaries (read from the files), its disk bytes as if
    the summaries were there."""
    copy = tmp / (root.name + "-no-summaries")
    shutil.copytree(root, copy)
    removed = 0
    for p in copy.glob("episodes/*/" + layout.SUMMARY_FILE):
        removed += p.stat().st_size
        p.unlink()
    info = dataset_info(copy, workers=1)
    info["disk_bytes"]["metadata"] += removed
    info["disk_bytes"]["total"] += removed
    return info


def assert_summaries_written_and_read(root: Path, tmp: Path) -> dict:
    ds = Dataset(root)
    for ep in ds.episode_ids:
        ep_dir = layout.episode_dir(root, ep)
        stored = episode_summary.read(ep_dir)
        assert stored is not None, f"{ep_dir}: no summary"
        assert episode_summary.differences(stored[0], episode_summary.compute(ep_dir)) == []
        assert layout.SUMMARY_FILE in manifest.read(ep_dir)
    row = {r.check: r for r in validate(ds, checks=["integrity", "episode_summary"])}
    assert row["episode_summary"].passed and f"{ds.num_episodes} summaries equal" in row["episode_summary"].detail
    assert row["integrity"].passed
    info = dataset_info(root, workers=1)
    want = info_without_summaries(root, tmp)
    info.pop("path"), want.pop("path")
    assert info == want
    assert info["disk_bytes"] == disk_bytes(root)
    return info


def test_recorders_write_a_summary_that_info_reads_as_the_files(tmp_path):
    out = tmp_path / "rec"
    from openarm_sim_dataset.record import Recorder

    for fmt in ("dir", "tar"):
        out = tmp_path / f"rec-{fmt}"
        with Recorder(out, metadata(lifter=True), rows_per_group=64, camera_format=fmt) as rec:
            for k in range(2):
                ep = rec.start_episode(0)
                record(ep, T0 + k * 10**10, 120, lifter=True)
                ep.save(success=bool(k))
        info = assert_summaries_written_and_read(out, tmp_path)
        assert {c["format"] for c in info["cameras"]} == {fmt}
        assert {s["prefix"] for s in info["streams"]} == {"arms/right", "arms/left", "lifter"}


def test_generate_merge_edit_convert_write_summaries(generated, tmp_path):
    info = assert_summaries_written_and_read(generated, tmp_path)
    assert info["disk_bytes"]["metadata"] > 0
    # merge --link: the summaries are carried (the source's manifest vouches for them), hard links kept
    other = tmp_path / "other"
    shutil.copytree(generated, other)
    merged = tmp_path / "merged"
    run_cli("merge", generated, other, "-o", merged, "--link", "--allow-duplicates", "-q")
    for ep in ("0", "1"):
        a = os.stat(layout.episode_dir(merged, ep) / layout.SUMMARY_FILE)
        b = os.stat(layout.episode_dir(generated, ep) / layout.SUMMARY_FILE)
        assert (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    assert_summaries_written_and_read(merged, tmp_path)
    # an edit that trims (new files) and a conversion to tar cameras (other files): summaries derived anew
    trimmed, tar = tmp_path / "trimmed", tmp_path / "tar"
    run_cli("edit", generated, trimmed, "--trim", "0", "0.6s", "5s", "-q")
    run_cli("convert", generated, tar, "--format", "openarm", "--camera-format", "tar", "-q")
    t = assert_summaries_written_and_read(trimmed, tmp_path)
    assert t["episodes"]["per_episode"][0]["duration_s"] < info["episodes"]["per_episode"][0]["duration_s"]
    assert {c["format"] for c in assert_summaries_written_and_read(tar, tmp_path)["cameras"]} == {"tar"}


def test_hard_linked_episodes_are_counted_once_and_a_bad_summary_is_not_used(generated, tmp_path):
    """Episodes made of hard links of one episode (tools/bench_scale.py builds them so) count its bytes
    once, as the files' inodes would; a damaged, foreign or missing summary is read from the files."""
    root = tmp_path / "linked"
    shutil.copytree(generated, root, copy_function=os.link)
    for k in (2, 3):  # two more listed episodes, hard links of episode 0
        shutil.copytree(layout.episode_dir(root, "0"), layout.episode_dir(root, str(k)), copy_function=os.link)
    doc = Dataset(root).meta
    doc.data["episodes"] += [dict(doc.episodes[0], id=str(k)) for k in (2, 3)]
    doc.write(root)
    info = dataset_info(root, workers=1)
    assert info["disk_bytes"] == disk_bytes(root)  # walking every file, each inode once
    assert info["episodes"]["count"] == 4
    # a summary that is not JSON, one of another version, none: the files are read (same figures)
    (layout.episode_dir(root, "1") / layout.SUMMARY_FILE).unlink()
    for name, text in (("2", "{not json"), ("3", json.dumps({"summary": 99}))):
        p = layout.episode_dir(root, name) / layout.SUMMARY_FILE
        p.unlink()  # not through the link
        p.write_text(text)
    again = dataset_info(root, workers=1)
    assert again["episodes"] == info["episodes"] and again["streams"] == info["streams"]
    assert again["cameras"] == info["cameras"]
    row = {r.check: r for r in validate(Dataset(root), checks=["episode_summary"])}["episode_summary"]
    assert row.failed and row.episodes == ["2"] and "1 episode(s) without summary.json" in row.detail
    assert "1 of another summary version" in row.detail


@pytest.mark.parametrize("fault", SUMMARY_FAULTS)
def test_episode_summary_fails_on_a_summary_that_disagrees_with_its_files(generated, tmp_path, fault):
    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    ep = plant_summary(copy, fault)
    rows = {r.check: r for r in validate(Dataset(copy), checks=["integrity", "episode_summary"])}
    assert rows["integrity"].passed  # re-sealed: only the summary's meaning shows the fault
    row = rows["episode_summary"]
    assert row.failed and row.episodes == [ep], row.detail
    assert ("rows: " if fault == "summary_rows_off" else "cameras.head.frames: ") in row.detail and " in the files" in row.detail
