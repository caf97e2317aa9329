"""Fuzzing state.parquet schemas (hypothesis, bounded): any column types, widths, units, nulls, orders and
row counts either read correctly (int64 ns, float32 (N, 8)) or raise StreamError naming the file."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import FUZZ_EXAMPLES, OWN_FIXTURES
from hypothesis import HealthCheck, given, settings, strategies as st

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.errors import DatasetError, StreamError

STATE = "episodes/0/obs/arms/right/state.parquet"
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
BASE_NS = 1_772_000_000_000_000_000

TS_TYPES = [pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("us"), pa.timestamp("ns"), pa.timestamp("ns", tz="UTC"),
            pa.int64(), pa.float64(), pa.string(), pa.date32()]
VALUE_TYPES = [pa.float32(), pa.float64(), pa.float16(), pa.int32(), pa.string(), pa.bool_()]
LIST_KINDS = ["list", "large_list", "fixed", "scalar"]


#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_fuzz_parquet")

@st.composite
def tables(draw):
    n = draw(st.integers(0, 12))
    ts_type = draw(st.sampled_from(TS_TYPES))
    order = draw(st.sampled_from(["sorted", "shuffled", "duplicated"]))
    step = draw(st.sampled_from([1, 1_000, 4_000_000, 10**9]))
    ts = BASE_NS + np.arange(n, dtype=np.int64) * step
    if order == "shuffled" and n > 1:
        ts = ts[np.array(draw(st.permutations(list(range(n)))))]
    elif order == "duplicated" and n > 1:
        ts[1] = ts[0]
    cols, names = [], []
    cols.append(_ts_array(ts, ts_type, draw(st.booleans()) and n > 0 and draw(st.booleans())))
    names.append("timestamp")
    for name in draw(st.lists(st.sampled_from(["qpos", "qvel", "qtorque", "pose", "value", "secret"]), max_size=3,
                              unique=True)):
        kind = draw(st.sampled_from(LIST_KINDS))
        vtype = draw(st.sampled_from(VALUE_TYPES))
        # (pyarrow 26 aborts the process when *writing* a fixed_size_list of width 0: not generated)
        width = draw(st.sampled_from([8, 8, 8, 1, 7, 9] + ([] if kind == "fixed" else [0])))
        ragged = draw(st.booleans()) and n > 1 and kind != "fixed"
        nulls = draw(st.sampled_from(["none", "row", "item"]))
        cols.append(_values(n, kind, vtype, width, ragged, nulls))
        names.append(name)
    if draw(st.booleans()) and names and names[0] == "timestamp":
        names.pop(0), cols.pop(0)  # no timestamp column at all
    return pa.Table.from_arrays(cols, names=names) if names else pa.table({"x": pa.array([], pa.int8())})


def _ts_array(ts, typ, with_null):
    vals = [int(v) for v in ts]
    if pa.types.is_timestamp(typ):
        factor = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[typ.unit]
        vals = [v // factor for v in vals]
    elif typ == pa.float64():
        vals = [v / 1e9 for v in vals]
    elif typ == pa.string():
        vals = [str(v) for v in vals]
    elif typ == pa.date32():
        vals = [19000 + i for i in range(len(vals))]
    if with_null:
        vals[0] = None
    return pa.array(vals, type=typ)


def _values(n, kind, vtype, width, ragged, nulls):
    rows = []
    for i in range(n):
        w = width + (1 if ragged and i == n - 1 else 0)
        row = [_one(vtype, i + j) for j in range(w)]
        if nulls == "item" and row and i == 0:
            row[0] = None
        rows.append(None if nulls == "row" and i == 0 else row)
    if kind == "scalar":
        return pa.array([r[0] if r else None for r in rows], type=vtype)
    if kind == "fixed":
        return pa.array(rows, type=pa.list_(vtype, width))
    if kind == "large_list":
        return pa.array(rows, type=pa.large_list(vtype))
    return pa.array(rows, type=pa.list_(vtype))


def _one(vtype, k):
    if vtype == pa.string():
        return str(k)
    if vtype == pa.bool_():
        return bool(k % 2)
    if vtype == pa.int32():
        return k
    return float(k) / 10


@pytest.fixture(scope="module")
def root():
    with tempfile.TemporaryDirectory() as d:
        dst = Path(d) / "ds"
        shutil.copytree(OWN_FIXTURES / "dataset_0.4.0", dst)
        yield dst


@FUZZ
@given(table=tables())
def test_state_parquet_schemas(root, table):
    path = root / STATE
    try:
        pq.write_table(table, path)
    except (pa.ArrowException, ValueError):
        return  # parquet cannot store it: nothing to read
    ds = Dataset(root)
    try:
        streams = ds.streams(0, "obs")
    except StreamError as e:
        assert str(path) in str(e) and "\n" not in str(e), str(e)
        return
    for key, s in streams.items():
        if s.path != path:
            continue
        assert s.timestamps.dtype == np.int64 and s.timestamps.ndim == 1
        assert s.values.dtype == np.float32 and s.values.shape == (len(s.timestamps), 8), (key, s.values.shape)
    try:
        for _ in ds.sample(5, episode=0):
            pass
    except DatasetError as e:
        assert "\n" not in str(e)
        assert isinstance(e, StreamError) and str(path) in str(e), str(e)
