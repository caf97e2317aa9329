"""Parquet streams: a timestamp column plus fixed-length float32 list columns.

Each file is read once with pyarrow and turned into numpy arrays without per-row Python work.
Timestamps are returned as int64 nanoseconds whatever unit the file declares (s, ms, us, ns);
a timestamp column that is not of an Arrow timestamp type is refused, never guessed.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import layout
from .atomic import atomic_write_with
from .errors import LFS_POINTER, StreamError, is_lfs_pointer

_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


@dataclass
class Stream:
    """One recorded signal: ``timestamps`` (int64 ns, Unix epoch for recorded data) and ``values``
    (float32, shape (N, len(columns))). Units: radians / rad/s / N·m for arms, metres + wxyz for pose."""

    key: str
    path: Path
    timestamps: np.ndarray
    values: np.ndarray
    columns: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.timestamps)


@contextmanager
def _parquet_errors(path: Path):
    """Turn any failure to read a parquet file into a StreamError naming the file."""
    try:
        yield
    except StreamError:  # already names the file (and is a ValueError, caught below otherwise)
        raise
    except FileNotFoundError:
        raise StreamError(path, "not found") from None
    except (pa.ArrowException, OSError, ValueError) as e:
        if is_lfs_pointer(path):
            raise StreamError(path, LFS_POINTER) from None
        raise StreamError(path, f"unreadable parquet ({str(e).splitlines()[0][:160]})") from None


def read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """Read a parquet file (or only ``columns``), turning any failure into a StreamError naming the file."""
    with _parquet_errors(path):
        # ParquetFile.read without threads: ~2.5x faster than read_table on small files; without
        # pre-buffering (coalesced reads on Arrow's I/O threads) ~10% faster again, and ~5% from opening
        # the file as an OSFile (no filesystem to resolve). A file that does not open so is opened again
        # as before, for the same error.
        try:
            source = pa.OSFile(os.fspath(path))
        except OSError:
            return pq.ParquetFile(path, pre_buffer=False).read(columns=columns, use_threads=False)
        with source:
            return pq.ParquetFile(source, pre_buffer=False).read(columns=columns, use_threads=False)


_NUMPY_TYPES = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float16(): np.float16, pa.float32(): np.float32,
                pa.float64(): np.float64}
_FLOAT_TYPES = {t for t, d in _NUMPY_TYPES.items() if np.dtype(d).kind == "f"}


def primitive_numpy(arr: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """Values of a primitive (int32/int64/float) Arrow array as a read-only numpy view, and its validity
    mask (None when it has no nulls; the values of null slots are undefined).

    Read from the Arrow buffers directly: ``Array.to_numpy`` imports pandas (~0.3 s) on first use, which
    a reader that never builds a DataFrame should not pay.
    """
    dtype = np.dtype(_NUMPY_TYPES[arr.type])
    n, off = len(arr), arr.offset
    if n == 0:
        return np.empty(0, dtype=dtype), None
    values = np.frombuffer(arr.buffers()[1], dtype=dtype, count=off + n)[off:]
    if not arr.null_count:
        return values, None
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
    return values, bits[off:off + n].astype(bool)


def read_timestamps(path: Path) -> tuple[np.ndarray, list[str]]:
    """The timestamp column of a parquet stream (int64 ns) and the file's column names; the value
    columns are not read."""
    with _parquet_errors(path):
        pf = pq.ParquetFile(path, pre_buffer=False)  # one small column: pre-buffering costs 2.5x here
        names = list(pf.schema_arrow.names)
        if layout.TIMESTAMP_COLUMN not in names:
            raise StreamError(path, f"has no {layout.TIMESTAMP_COLUMN!r} column (columns: {', '.join(names)})")
        table = pf.read(columns=[layout.TIMESTAMP_COLUMN], use_threads=False)
    return timestamps_ns(table, path), names


def timestamps_ns(table: pa.Table, path: Path) -> np.ndarray:
    """The ``timestamp`` column as int64 nanoseconds (converted from the declared unit)."""
    if layout.TIMESTAMP_COLUMN not in table.column_names:
        raise StreamError(path, f"has no {layout.TIMESTAMP_COLUMN!r} column (columns: {', '.join(table.column_names)})")
    col = table.column(layout.TIMESTAMP_COLUMN)
    if not pa.types.is_timestamp(col.type):
        raise StreamError(path, f"column 'timestamp' is {col.type}, expected timestamp[ns] (unit must be explicit)")
    if col.null_count:
        raise StreamError(path, f"column 'timestamp' has {col.null_count} null value(s)")
    if col.num_chunks == 1:  # the int64 storage read in place (what the cast gives, without the copy)
        chunk = col.chunk(0)
        raw = np.frombuffer(chunk.buffers()[1], dtype=np.int64, count=chunk.offset + len(chunk))[chunk.offset:]
    else:
        raw, _ = primitive_numpy(col.combine_chunks().cast(pa.int64()))  # no nulls (checked above)
    factor = _NS_PER_UNIT[col.type.unit]
    if factor != 1:
        limit = np.iinfo(np.int64).max // factor
        if raw.size and (raw.max() > limit or raw.min() < -limit):
            raise StreamError(path, f"timestamp[{col.type.unit}] values overflow nanoseconds")
        raw = raw * factor
    return raw


def list_column(table: pa.Table, name: str, width: int | None, path: Path, *, copy: bool = True) -> np.ndarray:
    """A list<float> column as a float32 array (N, width); null rows become NaN rows. ``copy=False``:
    the array may be a read-only view of the table's buffers (for a reader that only gathers rows)."""
    column = table.column(name)
    typ = column.type
    if column.num_chunks == 1 and pa.types.is_list(typ) and typ.value_type in _FLOAT_TYPES:
        fast = _dense_list_column(column.chunk(0), width, copy)
        if fast is not None:
            return fast
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        raise StreamError(path, f"column {name!r} is {typ}, expected list<float>")
    if not (pa.types.is_floating(typ.value_type)):
        raise StreamError(path, f"column {name!r} holds {typ.value_type}, expected float")
    col = column.combine_chunks()
    n = len(col)
    lengths, valid = primitive_numpy(pc.list_value_length(col))
    if valid is None:
        valid = np.ones(n, dtype=bool)
    lengths = lengths[valid].astype(np.int64)
    if width is None:
        width = int(lengths[0]) if len(lengths) else 0
    bad = np.flatnonzero(lengths != width)
    if bad.size:
        row = int(np.flatnonzero(valid)[bad[0]])
        raise StreamError(path, f"column {name!r} row {row} has {int(lengths[bad[0]])} values, expected {width}")
    flat, flat_valid = primitive_numpy(pc.list_flatten(col))  # null lists emit nothing
    flat = flat.astype(np.float32, copy=True)  # a writable copy, never a view of the file's buffers
    if flat_valid is not None:
        flat[~flat_valid] = np.nan  # null values inside a list
    if col.null_count:
        out = np.full((n, width), np.nan, dtype=np.float32)
        out[valid] = flat.reshape(-1, width)
        return out
    return flat.reshape(n, width)


def _dense_list_column(arr: pa.ListArray, width: int | None, copy: bool) -> np.ndarray | None:
    """:func:`list_column` of a list array without a null list or a null value whose lists all hold
    ``width`` values (the first list's count for None), read from its offsets and values buffers; None
    for any other array (:func:`list_column` then takes its general path, with its errors)."""
    n = len(arr)
    values = arr.values
    if n == 0 or arr.null_count or values.null_count:
        return None
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=arr.offset + n + 1)[arr.offset:]
    if width is None:
        width = int(offsets[1] - offsets[0])
    lo, hi = int(offsets[0]), int(offsets[-1])
    if width <= 0 or hi - lo != n * width or not (offsets == np.arange(lo, hi + 1, width, dtype=np.int32)).all():
        return None
    start = values.offset + lo
    flat = np.frombuffer(values.buffers()[1], dtype=_NUMPY_TYPES[values.type], count=start + hi - lo)[start:]
    # a writable copy, never a view of the file's buffers, unless the caller takes a view
    return flat.astype(np.float32, copy=copy).reshape(n, width)


def read_state_file(path: Path, prefix: str, *, copy: bool = True) -> dict[str, Stream]:
    """Read a ``state.parquet``: one Stream per attribute column (qpos/qvel/qtorque/pose). ``copy=False``:
    values may be read-only views of the file's buffers (see :func:`list_column`)."""
    return state_streams(read_table(path), path, prefix, copy=copy)


def state_streams(table: pa.Table, path: Path, prefix: str, *, copy: bool = True) -> dict[str, Stream]:
    """:func:`read_state_file` of a table already read from ``path``."""
    ts = timestamps_ns(table, path)
    out: dict[str, Stream] = {}
    for name in table.column_names:
        if name == layout.TIMESTAMP_COLUMN:
            continue
        if name not in layout.STATE_ATTRIBUTES:
            raise StreamError(path, f"unknown column {name!r} (allowed: timestamp, {', '.join(layout.STATE_ATTRIBUTES)})")
        columns = layout.POSE_JOINTS if name == "pose" else layout.ARM_JOINTS
        out[f"{prefix}/{name}"] = Stream(f"{prefix}/{name}", path, ts, list_column(table, name, len(columns), path, copy=copy), columns)
    return out


def read_attribute_file(path: Path, key: str, columns: tuple[str, ...], *, copy: bool = True) -> Stream:
    """Read a per-attribute parquet of older layouts (one ``positions`` or ``value`` list column);
    ``copy`` as :func:`read_state_file`."""
    return attribute_stream(read_table(path), path, key, columns, copy=copy)


def attribute_stream(table: pa.Table, path: Path, key: str, columns: tuple[str, ...], *, copy: bool = True) -> Stream:
    """:func:`read_attribute_file` of a table already read from ``path``."""
    ts = timestamps_ns(table, path)
    names = [n for n in table.column_names if n in layout.LEGACY_VALUE_COLUMNS]
    if len(names) != 1:
        raise StreamError(path, f"expected one of the columns {', '.join(layout.LEGACY_VALUE_COLUMNS)}, found {table.column_names}")
    return Stream(key, path, ts, list_column(table, names[0], len(columns), path, copy=copy), columns)


def numpy_to_arrow(values: np.ndarray, type: pa.DataType) -> pa.Array:
    """A null-free 1-D numpy array as an Arrow array of ``type`` (same width), sharing its buffer.

    Built from the buffer: ``pa.array(ndarray)`` imports pandas (~0.3 s) on first use, which every
    writer process (generation, convert, merge) would otherwise pay."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(type, len(values), [None, pa.py_buffer(values)])


def state_table(timestamps: np.ndarray, attributes: dict[str, np.ndarray]) -> pa.Table:
    """Build the 0.4.0 ``state.parquet`` table: timestamp[ns] + list<float32> per attribute."""
    ts = np.asarray(timestamps, dtype=np.int64)
    arrays = [numpy_to_arrow(ts, pa.timestamp("ns"))]
    names = [layout.TIMESTAMP_COLUMN]
    for name, values in attributes.items():
        v = np.ascontiguousarray(values, dtype=np.float32)
        if v.ndim != 2 or v.shape[0] != ts.shape[0]:
            raise ValueError(f"{name}: shape {v.shape} does not match {ts.shape[0]} timestamps")
        offsets = np.arange(0, v.size + 1, v.shape[1], dtype=np.int32)
        arrays.append(pa.ListArray.from_arrays(numpy_to_arrow(offsets, pa.int32()),
                                               numpy_to_arrow(v.reshape(-1), pa.float32())))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def legacy_value_table(timestamps: np.ndarray, values: np.ndarray) -> pa.Table:
    """A per-attribute table with a ``value`` list column (the lifter's format in 0.4.0)."""
    t = state_table(timestamps, {"value": values})
    return t


def write_table(path: str | os.PathLike, table: pa.Table) -> None:
    """Write a parquet table atomically (with column statistics, as the reference writer does)."""
    atomic_write_with(path, lambda tmp: pq.write_table(table, tmp))
