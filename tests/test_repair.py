"""dataset-repair: isolated gaps filled with the neighbours' mean, the rest reported (exit 1), -o copies."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fixture_path, run_cli, tree_hashes

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.repair import fill_isolated
from openarm_sim_dataset.synthetic import write_synthetic


def cli(*args, check: int | None = 0):
    return run_cli("repair", *args, check=check)


def punch(path: Path, column: str, holes: list[tuple[int, int | None]]) -> np.ndarray:
    """Set elements (row, element) to null (element None: the whole row). Returns the original values."""
    t = pq.read_table(path)
    col = t.column(column).combine_chunks()
    w = len(col[0])
    vals = np.asarray(col.to_pylist(), dtype=np.float32)
    rows = [list(map(float, r)) for r in vals]
    rows = [[x for x in r] for r in rows]
    null_rows = set()
    for r, e in holes:
        if e is None:
            null_rows.add(r)
        else:
            rows[r][e] = None
    data = [None if i in null_rows else r for i, r in enumerate(rows)]
    new = pa.array(data, type=col.type)
    assert len(new[0]) == w or 0 in null_rows
    pq.write_table(t.set_column(t.schema.get_field_index(column), t.schema.field(column), new), path)
    return vals


def test_fill_isolated_rules():
    v = np.array([[np.nan, 1], [2, np.nan], [4, 3], [np.nan, 5], [np.nan, np.nan], [8, 7], [9, np.nan]], float)
    filled, fill, still = fill_isolated(v)
    assert filled[1, 1] == 2.0 and fill[1, 1]  # (1 + 3) / 2
    assert still[0, 0] and still[3, 0] and still[4, 0] and still[6, 1]  # boundary, run of two
    assert filled[4, 1] == 6.0 and fill[4, 1]  # (5 + 7) / 2
    assert fill.sum() == 2 and still.sum() == 4


@pytest.fixture()
def damaged(tmp_path) -> tuple[Path, np.ndarray]:
    src = write_synthetic(tmp_path / "src", episodes=2, seconds=0.5, camera_hz=10, size=(32, 24))
    path = src / "episodes/1/obs/arms/right/state.parquet"
    original = punch(path, "qpos", [(10, 3), (20, None), (40, 0)])
    return src, original


def test_repair_copy_fills_isolated_and_leaves_input_unchanged(damaged, tmp_path):
    src, original = damaged
    before = tree_hashes(src)
    out = tmp_path / "fixed"
    r = cli(src, "-o", out, "-q")
    assert "repaired 10 value(s)" in r.stdout and "state.parquet" in r.stdout
    assert "10 value(s) repaired, 0 unrepairable" in r.stdout
    assert tree_hashes(src) == before
    fixed = Dataset(out).streams(1, "obs")["arms/right/qpos"].values
    assert np.isfinite(fixed).all()
    np.testing.assert_allclose(fixed[10, 3], (original[9, 3] + original[11, 3]) / 2, rtol=1e-6)
    np.testing.assert_allclose(fixed[20], (original[19] + original[21]) / 2, rtol=1e-6)
    mask = np.ones(len(original), bool)
    mask[[10, 20, 40]] = False
    np.testing.assert_array_equal(fixed[mask], original[mask])
    # schema kept; untouched files are hard links of the input's
    repaired = out / "episodes/1/obs/arms/right/state.parquet"
    assert pq.read_schema(repaired) == pq.read_schema(src / "episodes/0/obs/arms/right/state.parquet")
    untouched = "episodes/0/obs/arms/right/state.parquet"
    assert os.stat(out / untouched).st_ino == os.stat(src / untouched).st_ino
    assert os.stat(repaired).st_ino != os.stat(src / "episodes/1/obs/arms/right/state.parquet").st_ino
    od = pytest.importorskip("openarm_dataset")
    assert od.Dataset(out).validate() and not od.Dataset(src).validate()


def test_unrepairable_gaps_are_reported_with_exit_1(tmp_path):
    src = write_synthetic(tmp_path / "src", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24))
    path = src / "episodes/0/action/arms/left/state.parquet"
    punch(path, "qpos", [(0, 1), (30, 2), (31, 2), (50, 5)])
    r = cli(src, "-q", check=1)  # in place
    assert "repaired 1 value(s)" in r.stdout
    assert "3 value(s) could not be repaired (consecutive or boundary gap)" in r.stderr and "rows 0, 30, 31" in r.stderr
    vals = Dataset(src).streams(0, "action")["arms/left/qpos"].values
    assert np.isnan(vals[0, 1]) and np.isnan(vals[30:32, 2]).all() and np.isfinite(vals[50]).all()
    t = pq.read_table(path).column("qpos").combine_chunks()
    assert t.flatten().null_count == 3  # the gaps left are still nulls, not NaN
    assert not [p for p in src.rglob(".tmp-*")]
    r = cli(src, "-q", check=1)  # idempotent: nothing more to repair
    assert "repaired 1 value(s)" not in r.stdout and "0 value(s) repaired, 3 unrepairable" in r.stdout


@pytest.mark.parametrize("name", ["dataset_0.1.0", "dataset_0.3.0"])
def test_older_layouts_are_repaired_in_their_own_format(name, tmp_path):
    src = fixture_path("own", name)
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    ds = Dataset(copy)
    path = ds.streams(0, "obs")["arms/right/qpos"].path
    column = [c for c in pq.read_table(path).column_names if c != "timestamp"][0]
    original = punch(path, column, [(5, 2)])
    cli(copy, "-q")
    assert pq.read_schema(path).field(column).type == pq.read_schema(src / path.relative_to(copy)).field(column).type
    vals = Dataset(copy).streams(0, "obs")["arms/right/qpos"].values
    np.testing.assert_allclose(vals[5, 2], (original[4, 2] + original[6, 2]) / 2, rtol=1e-6)


def test_clean_dataset_and_bad_input(tmp_path):
    src = write_synthetic(tmp_path / "src", episodes=1, seconds=0.5, camera_hz=10, size=(32, 24))
    before = tree_hashes(src)
    r = cli(src, "-q")
    assert "0 value(s) repaired, 0 unrepairable" in r.stdout and tree_hashes(src) == before
    r = cli(src, "-o", src / "inside", check=2)
    assert "inside the input" in r.stderr
    (src / "episodes/0/obs/arms/left/state.parquet").write_bytes(b"garbage")
    r = cli(src, check=2)
    assert "state.parquet" in r.stderr and len(r.stderr.strip().splitlines()) == 1
