"""Validation in groups of episodes (issue 27 item 4): the driver keeps no episode's data beyond its group.

Above GROUP_SIZE episodes (made 2 here) every Context holds the files of one group only, the rows'
verdicts and failing episodes are those of one Context over the whole dataset, with ``workers`` and
without; a fault in a later group is found and named. Time is not asserted (tools/bench_scale.py
``--only validate-memory`` measures seconds per episode and the driver's peak RSS at 1,000 and 10,000).
"""

from __future__ import annotations

import os
import shutil
import weakref
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import OWN_FIXTURES

from openarm_sim_dataset import Dataset, layout
from openarm_sim_dataset.validate import core, groups
from openarm_sim_dataset.validate.core import validate


def linked(src: Path, out: Path, n: int) -> Path:
    """``n`` episodes, hard links of ``src``'s episodes in turn (the way tools/bench_scale.py builds them)."""
    ds = Dataset(src)
    shutil.copy(src / layout.METADATA_FILE, out.mkdir(parents=True) or out / layout.METADATA_FILE)
    for i in range(n):
        shutil.copytree(ds.episode_path(ds.episodes[i % ds.num_episodes]), layout.episode_dir(out, str(i)),
                        copy_function=os.link)
    meta = Dataset(out).meta
    meta.data["episodes"] = [dict(ds.episodes[i % ds.num_episodes], id=str(i)) for i in range(n)]
    meta.write(out)
    return out


@pytest.fixture
def seven(tmp_path) -> Path:
    root = linked(OWN_FIXTURES / "dataset_0.4.0", tmp_path / "seven", 7)
    # a NaN in episode 5 (group 3 of 4): a copy of its state file, not the shared inode
    f = layout.episode_dir(root, "5") / "obs/arms/right/state.parquet"
    t = pq.read_table(f)
    f.unlink()
    v = np.array(t.column("qpos").to_pylist(), dtype=np.float32)
    v[3, 1] = np.nan
    pq.write_table(t.set_column(t.column_names.index("qpos"), "qpos", pa.array(list(v), type=pa.list_(pa.float32()))), f)
    return root


def test_groups_hold_one_group_and_give_the_verdicts_of_one_context(seven, monkeypatch):
    whole = validate(Dataset(seven), quick=True)
    live: weakref.WeakSet = weakref.WeakSet()
    held = []
    real = core.Context.streams

    def streams(self, ep, kind):
        live.add(self)
        out = real(self, ep, kind)
        held.append(sum(len({e for e, _ in c._streams}) for c in list(live)))
        return out

    monkeypatch.setattr(core.Context, "streams", streams)
    monkeypatch.setattr(groups, "GROUP_SIZE", 2)
    grouped = validate(Dataset(seven), quick=True)
    assert max(held) <= 2  # the episodes whose streams any Context holds at once: one group's
    assert [(r.check, r.status, r.episodes) for r in grouped] == [(r.check, r.status, r.episodes) for r in whole]
    nulls = {r.check: r for r in grouped}["nulls"]
    assert nulls.failed and nulls.episodes == ["5"] and "1 of 4 groups of 2 episodes fail" in nulls.detail
    assert grouped.file_lines == whole.file_lines == ["episodes/5/obs/arms/right/state.parquet: includes null values"]


def test_workers_give_the_rows_of_one_process(seven):
    one = validate(Dataset(seven), quick=True)
    two = validate(Dataset(seven), quick=True, workers=2)
    assert [(r.check, r.status, r.episodes) for r in two] == [(r.check, r.status, r.episodes) for r in one]


def test_the_folded_row_keeps_counts_and_failures_only():
    fold = groups.RowFold()
    for k in range(1000):  # a thousand passing groups leave nothing per group behind
        fold.add(core.Outcome(True, f"group {k}"))
    fold.add(core.Outcome(False, "bad group", ["7"], findings=[core.finding("7", 1, "x")]))
    out = fold.outcome(50)
    assert not out.passed and out.episodes == ["7"] and len(out.findings) == 1
    assert out.detail.startswith("bad group [1 of 1001 groups of 50 episodes fail")
    assert vars(fold).keys() == {"groups", "failing", "skipped_groups", "applicable", "first", "first_failing",
                                 "episodes", "warned", "findings", "error", "judged"}


def test_an_episode_re_encoded_whole_is_found_across_groups(seven, monkeypatch):
    """Every frame of one camera of episode 5 re-encoded at quality 60: within its own group the frames
    agree with each other, so only a comparison over the whole dataset can tell. With groups of one
    episode, in one process and in two, jpeg_encoding fails episode 5 as one Context would."""
    from PIL import Image

    cam = layout.episode_dir(seven, "5") / "cameras"
    cam = next(p for p in sorted(cam.iterdir()) if p.is_dir())
    for f in sorted(cam.iterdir()):
        with Image.open(f) as im:
            im = im.convert("RGB")
        f.unlink()  # a file of its own, not the shared inode
        im.save(f, "JPEG", quality=60)
    whole = {r.check: r for r in validate(Dataset(seven), checks=["jpeg_encoding"])}["jpeg_encoding"]
    assert whole.failed and whole.episodes == ["5"], whole
    monkeypatch.setattr(groups, "GROUP_SIZE", 1)
    for workers in (1, 2):
        row = {r.check: r for r in validate(Dataset(seven), checks=["jpeg_encoding"], workers=workers)}["jpeg_encoding"]
        assert row.failed and row.episodes == ["5"] and f"episode 5 camera {cam.name} frame 0" in row.detail, row


def test_an_episode_of_another_frame_size_is_found_across_groups(tmp_path, monkeypatch):
    """Where equipment.perceptions.cameras declares no size, the size most episodes have is the camera's:
    episode 5's camera downscaled whole is found with groups of one episode too."""
    from PIL import Image

    root = linked(OWN_FIXTURES / "dataset_0.4.0", tmp_path / "seven", 7)
    meta = Dataset(root).meta
    cams = meta.data["equipment"]["perceptions"]["cameras"]
    meta.data["equipment"]["perceptions"]["cameras"] = {name: {} for name in cams}  # named, no size declared
    meta.write(root)
    cam = layout.episode_dir(root, "5") / "cameras"
    cam = next(p for p in sorted(cam.iterdir()) if p.is_dir())
    for f in sorted(cam.iterdir()):
        with Image.open(f) as im:
            im = im.convert("RGB").resize((im.width // 2, im.height // 2))
        f.unlink()
        im.save(f, "JPEG", quality=95)
    whole = {r.check: r for r in validate(Dataset(root), checks=["jpeg_frames"])}["jpeg_frames"]
    assert whole.failed and whole.episodes == ["5"], whole
    monkeypatch.setattr(groups, "GROUP_SIZE", 1)
    row = {r.check: r for r in validate(Dataset(root), checks=["jpeg_frames"])}["jpeg_frames"]
    assert row.failed and row.episodes == ["5"] and f"camera {cam.name}: frames of" in row.detail, row
