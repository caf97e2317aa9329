"""Repair isolated gaps in obs/action streams: a null or NaN value whose previous and next values (same
column, same element) are finite becomes their mean; anything else (a run of two or more, or a gap
at the first or last sample) is reported as unrepairable and left as it was.

Only the list columns of obs/action parquet files (``qpos``/``qvel``/``qtorque``/``pose`` of a
``state.parquet``, ``positions``/``value`` of older per-attribute files) are looked at; timestamps,
cameras and sidecars are never touched. A repaired file keeps its schema (column types, list
types, timestamp unit; unrepaired nulls stay null) and is replaced atomically (temp file + rename).
With an output folder, the input is left unchanged: the copy is built in a temporary folder from
hard links of the input's files (copies across filesystems), each repaired file replaces its link
by rename (never writing through it), and the folder is renamed into place.

Integrity manifests (``manifest.sha256``) are rewritten only for what was repaired: the entry of each
repaired file gets its new hash, every other entry stays as recorded (a file damaged before the
repair still fails ``dataset-validate``'s ``integrity`` check). The manifest is updated before the
file is replaced, so a repair killed in between is completed by running it again (the same bytes
are written). An episode without a manifest gets none (repair did not write its other files).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from openarm_sim_dataset.core import layout, manifest
from openarm_sim_dataset.core.atomic import TMP_PREFIX, atomic_write_bytes, remove_tree
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import StreamError
from openarm_sim_dataset.core.report import Summary, progress
from openarm_sim_dataset.core.streams import read_table
from openarm_sim_dataset.core.writer import create_dataset_root, finish_dataset_root

VALUE_COLUMNS = layout.STATE_ATTRIBUTES + layout.LEGACY_VALUE_COLUMNS


@dataclass
class FileRepair:
    """What repair found in one parquet file (paths relative to the dataset root)."""

    path: str
    repaired: int = 0
    unrepairable: int = 0
    rows: list[int] = field(default_factory=list)  # first rows with an unrepairable value (up to 5)

    def lines(self) -> list[str]:
        out = []
        if self.repaired:
            out.append(f"{self.path}: repaired {self.repaired} value(s)")
        if self.unrepairable:
            rows = ", ".join(map(str, self.rows)) + (", ..." if self.unrepairable > len(self.rows) else "")
            # openarm_dataset's wording (scripts grep for it), then where
            out.append(f"{self.path}: {self.unrepairable} value(s) could not be repaired (consecutive or boundary "
                       f"gap), rows {rows}")
        return out


@dataclass
class RepairReport:
    files: list[FileRepair]
    summary: Summary

    @property
    def repaired(self) -> int:
        return sum(f.repaired for f in self.files)

    @property
    def unrepairable(self) -> int:
        return sum(f.unrepairable for f in self.files)


def fill_isolated(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(filled copy, mask of filled values, mask of values still missing) for (N, W) floats.

    A NaN at row i is filled with the mean of rows i-1 and i+1 of its column when both are finite.
    """
    v = np.array(values, dtype=np.float64, copy=True)
    bad = ~np.isfinite(v)
    fill = np.zeros_like(bad)
    if len(v) >= 3:
        inner = bad[1:-1] & np.isfinite(v[:-2]) & np.isfinite(v[2:])
        fill[1:-1] = inner
        v[1:-1][inner] = ((v[:-2] + v[2:]) / 2)[inner]
    return v, fill, bad & ~fill


def _list_values(col: pa.Array, path: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values (N, W) float64 with NaN for nulls, mask of null elements) of a list<float> column."""
    typ = col.type
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        raise StreamError(path, f"column {name!r} is {typ}, expected list<float>")
    if not pa.types.is_floating(typ.value_type):
        raise StreamError(path, f"column {name!r} holds {typ.value_type}, expected float")
    n = len(col)
    row_valid = col.is_valid().to_numpy(zero_copy_only=False)
    lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False)
    widths = set(lengths[row_valid].astype(np.int64).tolist())
    if len(widths) > 1:
        raise StreamError(path, f"column {name!r} has rows of different lengths {sorted(widths)}")
    w = widths.pop() if widths else 0
    flat = pc.list_flatten(col)
    vals = np.full((n, w), np.nan)
    nulls = np.ones((n, w), dtype=bool)
    if w:
        vals[row_valid] = flat.to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, w)
        nulls[row_valid] = flat.is_null().to_numpy(zero_copy_only=False).reshape(-1, w)
    return vals, nulls


def repair_table(table: pa.Table, path: Path, rel: str) -> tuple[pa.Table | None, FileRepair]:
    """The table with isolated gaps filled (None if nothing changed) and what was found."""
    rep = FileRepair(rel)
    changed = False
    for name in table.column_names:
        if name not in VALUE_COLUMNS:
            continue
        col = table.column(name).combine_chunks()
        vals, nulls = _list_values(col, path, name)
        filled, fill, still = fill_isolated(vals)
        rep.repaired += int(fill.sum())
        rep.unrepairable += int(still.sum())
        if still.any() and len(rep.rows) < 5:
            rep.rows += [int(r) for r in np.unique(np.nonzero(still)[0])[: 5 - len(rep.rows)]]
        if fill.any():
            n, w = filled.shape
            offsets = pa.array(np.arange(0, n * w + 1, w, dtype=np.int32))
            keep_null = nulls & still
            values = pa.array(filled.reshape(-1), type=col.type.value_type, mask=keep_null.reshape(-1), from_pandas=False)
            new = pa.ListArray.from_arrays(offsets, values).cast(col.type)
            table = table.set_column(table.schema.get_field_index(name), table.schema.field(name), new)
            changed = True
    return (table if changed else None), rep


def stream_files(ds: Dataset) -> list[Path]:
    """Every obs/action parquet file of every episode (each once, in episode order)."""
    seen: dict[Path, None] = {}
    for ep in ds.episodes:
        for kind in layout.KINDS:
            for s in ds.streams(ep, kind).values():
                seen.setdefault(s.path, None)
    return list(seen)


def _link_tree(src: Path, dest: Path) -> None:
    """Hard-link (or, across filesystems, copy) every regular file of ``src`` into ``dest``."""
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = [d for d in dirnames if not d.startswith(TMP_PREFIX) and not os.path.islink(os.path.join(dirpath, d))]
        rel = Path(dirpath).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            p = Path(dirpath) / name
            if name.startswith(TMP_PREFIX) or name == ".lock" or p.is_symlink() or not p.is_file():
                continue
            try:
                os.link(p, dest / rel / name, follow_symlinks=False)
            except OSError:
                shutil.copy2(p, dest / rel / name)


def repair_dataset(input_path: str | os.PathLike, output_path: str | os.PathLike | None = None,
                   on_repair=None, on_error=None) -> None:
    """openarm_dataset's ``repair_dataset``: :func:`repair`, calling ``on_repair(message)`` for each
    file repaired (``<file>: repaired N value(s)``) and ``on_error(message)`` for each file with values
    left unrepaired (``<file>: N value(s) could not be repaired (consecutive or boundary gap), rows ...``)."""

    def line(message: str, bad: bool) -> None:
        callback = on_error if bad else on_repair
        if callback is not None:
            callback(message)

    repair(input_path, output_path, on_line=line)


def repair(root: str | os.PathLike, out: str | os.PathLike | None = None, quiet: bool = True,
           on_line=None) -> RepairReport:
    """Repair ``root`` in place, or (``out``) write a repaired copy and leave ``root`` unchanged."""
    root = Path(root)
    ds = Dataset(root)
    files = stream_files(ds)
    summary = Summary("dataset-repair", Path(out) if out is not None else root)
    summary.episodes = ds.num_episodes
    target, tmp = root, None
    if out is not None:
        out = Path(out)
        o, r = out.resolve(), root.resolve()
        if o == r or r in o.parents:
            raise StreamError(out, f"lies inside the input {root} (use no -o to repair in place)")
        tmp = create_dataset_root(out)
        target = tmp
    reports: list[FileRepair] = []
    bar = progress(len(files), "repair", quiet)
    try:
        if tmp is not None:
            _link_tree(root, tmp)
        for path in files:
            rel = path.relative_to(root).as_posix()
            table = read_table(path)
            summary.frames += table.num_rows
            new, rep = repair_table(table, path, rel)
            if new is not None:
                sink = pa.BufferOutputStream()
                pq.write_table(new, sink)
                data = sink.getvalue().to_pybytes()
                parts = Path(rel).parts
                if len(parts) > 2 and parts[0] == layout.EPISODES_DIR:
                    manifest.update(target / parts[0] / parts[1], {Path(*parts[2:]).as_posix(): data})
                atomic_write_bytes(target / rel, data)
                if len(parts) > 2 and parts[0] == layout.EPISODES_DIR:
                    manifest.refresh_summary(target / parts[0] / parts[1])  # its rows and stamps changed
            reports.append(rep)
            for line in rep.lines():
                if on_line:
                    on_line(line, "could not be repaired" in line)
            bar.update(1)
        if tmp is not None:
            finish_dataset_root(tmp, out)
    except BaseException:
        if tmp is not None:
            remove_tree(tmp)
        raise
    finally:
        bar.close()
    total = RepairReport(reports, summary.finish())
    total.summary.notes.append(f"{total.repaired} value(s) repaired, {total.unrepairable} unrepairable "
                               f"in {sum(1 for f in reports if f.repaired or f.unrepairable)} of {len(reports)} file(s)")
    return total

