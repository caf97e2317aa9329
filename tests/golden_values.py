"""Golden comparison of generated data on a CPU without a golden set of its own (issue 35 item 6).

MuJoCo's physics differs in the last bits between CPUs (libm and compiled kernels take other SIMD paths),
so the golden SHA-256 of a generation (tests/golden/none_generation.json) hold only on the CPUs they were
recorded on. On any other CPU, :func:`compare_unseen` proves what does not depend on the CPU's
floating-point path byte for byte, and the rest by value against reference values recorded on a CPU
whose own set passes byte for byte (tests/golden/generation_values.npz):

* the set of file names equals the golden one (JPEG names, i.e. frame timestamps, included);
* a file whose bytes equal the first recording's or any recorded CPU's passes as is (and the bytes the
  reference values were taken from are still compared by value: a check of the values file itself);
* every other file must be of a physics-dependent kind and match the reference in its CPU-independent
  parts exactly (``exact``: a state parquet's schema, row count, timestamps, list lengths and every
  non-float column; an npz's array names, dtypes, shapes and every integer array; a JPEG's size and
  mode; a manifest's header and the files it lists) and in its values within the tolerances below;
  a manifest's digests and sizes must also be those of the files beside it.

metadata.yaml is compared as a document by the caller, on every path (it does not depend on the CPU).
The golden tests take this path on a CPU not listed in the golden file's ``by_cpu``, and on any machine
with ``OPENARM_GOLDEN_CPU=unseen`` (conftest.golden_set); ``OPENARM_RECORD_GOLDEN=1`` records this CPU's
hashes and (see :func:`record_golden_values`) the reference values.

The tolerances, and why (measured with ``tiny`` and ``SMALL`` generated here under another libm and
numpy SIMD path: ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX`` and
``NPY_DISABLE_CPU_FEATURES="AVX2 FMA3 AVX F16C"``, which gives other obs parquet and sidecar bytes, and
for SMALL another frames.npz, just as an AVX-512 EPYC does): over these 6.7 s episodes (3,351 physics
steps, contacts and a grasp) last-bit differences grew to 5e-9 in positions (rad, m), 2e-7 in
velocities, 2e-9 in the parquet values (float32) and 1.2e-5 in the constraint solver's warm-start
accelerations inside ``state``; camera poses moved by 1e-13 and 9 depth pixels by 1 float32 ulp; no
JPEG and no label changed.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from conftest import GOLDEN_FILE, cpu_identity, golden_hashes, recorded_files
from PIL import Image

from openarm_sim_dataset import layout, sidecar

VALUES_FILE = GOLDEN_FILE.with_name("generation_values.npz")

#: physics values (state parquets' float columns in rad, m, rad/s, N m; sidecar.npz float arrays): the
#: largest absolute deviation allowed from the reference. 8x the largest last-bit growth measured (1.2e-5,
#: a solver warm-start acceleration; positions moved 5e-9, velocities 2e-7), far below what a change of
#: the code moves (a gain, a time step, an object or a target moved by a millimetre: 1e-3 and more).
PHYSICS_ATOL = 1e-4
#: stored physics values are multiples of this (1/100 of the tolerance: each is the recorded value to 5e-7)
QUANTUM = 1e-6
#: frames.npz depth (metres): mean depth of each thumbnail cell (GRID over the frame). Last-bit pose
#: differences move depths by ~1e-8 m; a surface moved by a millimetre moves its cells by about that.
DEPTH_ATOL = 1e-3
DEPTH_QUANTUM = 1e-5  # stored depth cell means: the recorded ones to 5e-6 m
#: frames.npz labels (stored whole, compressed): pixels of one frame allowed to carry another label, as
#: a fraction of the frame (at least 1): a pose differing in the last bits can flip a pixel on an edge
LABEL_FRACTION = 0.002
#: camera JPEGs, decoded, as GRID thumbnails of per-channel cell means (grey levels 0-255): the mean
#: absolute difference over the thumbnail, and the largest of one cell (a flipped pixel on an edge moves
#: its 8x8 cell of a 128x96 frame by at most 4; a 16x16 block painted in moves four cells by ~100). In the
#: TINY generation's 32x24 frames a cell is 2x2 pixels, where one flipped pixel could exceed the cell
#: tolerance: none flipped in the measurement above (poses moved by 1e-9 m, a pixel spans ~1 cm there)
JPEG_MEAN_TOL = 1.0
JPEG_CELL_TOL = 8.0
JPEG_QUANTUM = 1 / 8  # stored thumbnails: the recorded cell means to 1/16 grey level
GRID = (12, 16)  # thumbnail rows x columns

TOLERANCES = {"physics_atol": PHYSICS_ATOL, "physics_quantum": QUANTUM, "depth_atol_m": DEPTH_ATOL,
              "depth_quantum_m": DEPTH_QUANTUM, "label_fraction": LABEL_FRACTION, "jpeg_mean_tol": JPEG_MEAN_TOL,
              "jpeg_cell_tol": JPEG_CELL_TOL, "jpeg_quantum": JPEG_QUANTUM, "grid": list(GRID)}
FORMAT = 1


# ----------------------------------------------------------------------------- reading a file
def kind_of(rel: str) -> str | None:
    """The physics-dependent kind of a generated file (its path relative to the dataset), or None."""
    parts = rel.split("/")
    name = parts[-1]
    if name == layout.STATE_FILE:
        return "state"
    if len(parts) >= 2 and parts[-2] == layout.SIM_DIR and name == sidecar.SIDECAR_FILE:
        return "sidecar"
    if len(parts) >= 2 and parts[-2] == layout.SIM_DIR and name == sidecar.FRAMES_FILE:
        return "frames"
    if len(parts) >= 3 and parts[-3] == layout.CAMERAS_DIR and name.endswith(layout.JPEG_SUFFIX):
        return "jpeg"
    if name == layout.MANIFEST_FILE:
        return "manifest"
    return None


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True).encode())
        h.update(b"\0")
    return h.hexdigest()


def block_means(a: np.ndarray, axes: tuple[int, int]) -> np.ndarray:
    """Means of a GRID of cells over the two ``axes`` of ``a`` (float64)."""
    a = np.asarray(a, np.float64)
    for axis, cells in zip(axes, GRID):
        n = a.shape[axis]
        edges = np.linspace(0, n, min(cells, n) + 1).astype(int)
        sums = np.add.reduceat(a, edges[:-1], axis=axis)
        shape = [1] * a.ndim
        shape[axis] = len(edges) - 1
        a = sums / np.diff(edges).reshape(shape)
    return a


def _column_parts(name: str, col: pa.ChunkedArray) -> tuple[dict, np.ndarray | None]:
    """(exact parts, float values or None) of one parquet column."""
    arr = col.combine_chunks()
    exact = {f"{name} nulls": _digest(arr.is_null().to_numpy(zero_copy_only=False).tobytes())}
    lengths = None
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type):
        lengths = arr.value_lengths().fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        exact[f"{name} list lengths"] = _digest(lengths.tobytes())
        arr = arr.flatten()
    if pa.types.is_floating(arr.type):
        values = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        if lengths is not None and len(lengths) and (lengths == lengths[0]).all() and lengths[0] > 0:
            values = values.reshape(len(lengths), -1)  # rows x width: differences along time compress
        return exact, values
    if pa.types.is_timestamp(arr.type) or pa.types.is_integer(arr.type) or pa.types.is_boolean(arr.type):
        data = arr.cast(pa.int64()).to_numpy(zero_copy_only=False).tobytes()
    else:
        data = json.dumps(arr.to_pylist(), default=str).encode()
    exact[f"{name} values"] = _digest(data)
    return exact, None


def read_parts(path: Path, kind: str) -> tuple[dict, dict[str, tuple[str, np.ndarray]]]:
    """(exact parts: name -> digest or value, compared exactly; values: name -> (how, array)) of a file."""
    exact: dict = {}
    values: dict[str, tuple[str, np.ndarray]] = {}
    if kind == "state":
        table = pq.read_table(path)
        exact["schema"] = _digest(table.schema.serialize().to_pybytes())
        exact["rows"] = table.num_rows
        for name in table.column_names:
            parts, floats = _column_parts(name, table[name])
            exact.update(parts)
            if floats is not None:
                values[name] = ("physics", floats)
    elif kind in ("sidecar", "frames"):
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        exact["arrays"] = _digest([[k, a.dtype.str, list(a.shape)] for k, a in arrays.items()])
        for k, a in arrays.items():
            if kind == "frames" and a.ndim == 3:  # (frames, height, width) images
                values[k] = ("depth", block_means(a, (1, 2))) if a.dtype.kind == "f" else ("labels", a)
            elif a.dtype.kind == "f":
                values[k] = ("physics", a.astype(np.float64))
            else:
                exact[k] = _digest(a.tobytes())
    elif kind == "jpeg":
        with Image.open(path) as im:
            exact["image"] = [im.mode, list(im.size)]
            pixels = np.asarray(im)
        values["thumbnail"] = ("jpeg", block_means(pixels, (0, 1)))
    elif kind == "manifest":
        listed, sized, comments = _manifest(path)
        exact["header"] = _digest(comments)
        exact["listed"] = _digest(sorted(p for p in listed if p != layout.SUMMARY_FILE))
        exact["sized"] = _digest(sorted(p for p in sized if p != layout.SUMMARY_FILE))
    else:
        raise ValueError(f"no values of a {kind!r} file")
    return exact, values


def _manifest(path: Path) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """(digest by listed path, size by listed path, the other comment lines) of a manifest."""
    listed, sized, comments = {}, {}, []
    for line in path.read_text().splitlines():
        if line.startswith("# size "):
            size, _, rel = line[len("# size "):].partition(" ")
            sized[rel] = int(size)
        elif line.startswith("#"):
            comments.append(line)
        else:
            digest, _, rel = line.partition("  ")
            listed[rel] = digest
    return listed, sized, comments


def _manifest_matches_files(path: Path) -> list[str]:
    """Problems of a manifest against the files beside it (every file listed, digests and sizes theirs)."""
    listed, sized, _ = _manifest(path)
    ep = path.parent
    present = {p.relative_to(ep).as_posix() for p in ep.rglob("*") if p.is_file() and p != path}
    out = []
    if set(listed) != present or set(sized) != present:
        out.append(f"lists {sorted(set(listed) ^ present)[:4]} / sizes {sorted(set(sized) ^ present)[:4]} "
                   "unlike the files of its episode")
    for rel in sorted(set(listed) & present):
        data = (ep / rel).read_bytes()
        if listed[rel] != hashlib.sha256(data).hexdigest():
            out.append(f"lists SHA-256 {listed[rel][:12]}... for {rel}, whose bytes hash to "
                       f"{hashlib.sha256(data).hexdigest()[:12]}...")
        if sized.get(rel) != len(data):
            out.append(f"lists size {sized.get(rel)} for {rel}, which holds {len(data)} bytes")
    return out


# ----------------------------------------------------------------------------- storing values
def encode(a: np.ndarray, quantum: float) -> np.ndarray:
    """``a`` as integer multiples of ``quantum``, second differences along axis 0, in the narrowest
    integer type (lossless for the quantised values; smooth trajectories give small numbers)."""
    a = np.asarray(a, np.float64)
    if not np.isfinite(a).all():
        raise ValueError("reference values must be finite")
    q = np.round(a / quantum).astype(np.int64)
    for _ in range(2):
        if q.ndim and q.shape[0] > 1:
            q = np.diff(q, axis=0, prepend=np.zeros_like(q[:1]))
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        if q.size == 0 or (q.min() >= np.iinfo(dtype).min and q.max() <= np.iinfo(dtype).max):
            return q.astype(dtype)
    raise AssertionError("unreachable")


def decode(stored: np.ndarray, quantum: float) -> np.ndarray:
    q = stored.astype(np.int64)
    for _ in range(2):
        if q.ndim and q.shape[0] > 1:
            q = np.cumsum(q, axis=0)
    return q * quantum


QUANTA = {"physics": QUANTUM, "depth": DEPTH_QUANTUM, "jpeg": JPEG_QUANTUM, "labels": None}


def reference(root: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(index of a generation's files, stored arrays by key) for :func:`record_golden_values`: each
    file's SHA-256 (of the bytes a golden digest sees), kind, exact parts and values; JPEG thumbnails of
    one camera folder stacked in one array (a row each)."""
    files: dict[str, dict] = {}
    arrays: dict[str, np.ndarray] = {}
    thumbs: dict[str, list[tuple[str, np.ndarray]]] = {}

    def store(a: np.ndarray) -> str:
        key = "d" + _digest(a.dtype.str, list(a.shape), a.tobytes())[:20]
        arrays[key] = a
        return key

    for p, data in recorded_files(root).items():
        rel = p.relative_to(root).as_posix()
        kind = kind_of(rel)
        if kind is None:
            continue
        exact, values = read_parts(p, kind)
        entry = {"sha256": hashlib.sha256(data).hexdigest(), "kind": kind, "exact": exact, "values": {}}
        for name, (how, a) in values.items():
            if how == "jpeg":
                thumbs.setdefault(rel.rsplit("/", 1)[0], []).append((rel, a))
                continue
            stored = a if QUANTA[how] is None else encode(a, QUANTA[how])
            entry["values"][name] = {"how": how, "data": store(stored), "shape": list(a.shape)}
        files[rel] = entry
    for rows in thumbs.values():
        key = store(encode(np.stack([a for _, a in rows]), JPEG_QUANTUM))
        for i, (rel, a) in enumerate(rows):
            files[rel]["values"]["thumbnail"] = {"how": "jpeg", "data": key, "row": i, "shape": list(a.shape)}
    return files, arrays


def record_golden_values(name: str, root: Path) -> None:
    """Store the reference values of the generation ``name`` (at ``root``) in VALUES_FILE
    (OPENARM_RECORD_GOLDEN=1 only, after :func:`conftest.record_golden` stored this CPU's hashes of the
    same files, on a CPU whose own set passed byte for byte before). Values recorded on another CPU are
    kept while every file they were taken from is still in a golden set (a CPU recording its own set does
    not move the reference); they are replaced when recorded here before, absent, or stale."""
    with open(GOLDEN_FILE.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        index, stored = _read_values_file() if VALUES_FILE.exists() else ({}, {})
        old = index.get("sets", {}).get(name) if index.get("format") == FORMAT else None
        hashes = golden_hashes(json.loads(GOLDEN_FILE.read_text()), name)
        if old is not None and old["cpu"] != cpu_identity() and set(old["files"]) == {r for r in hashes if kind_of(r)} \
                and all(f["sha256"] in hashes[rel] for rel, f in old["files"].items()):
            return
        files, arrays = reference(root)
        index = {"format": FORMAT, "tolerances": TOLERANCES, "sets": {**index.get("sets", {})}}
        index["sets"][name] = {"cpu": cpu_identity(), "files": files}
        stored.update(arrays)
        used = {v["data"] for s in index["sets"].values() for f in s["files"].values() for v in f["values"].values()}
        out = {"index": sidecar.json_array(index), **{k: stored[k] for k in sorted(used)}}
        tmp = VALUES_FILE.with_suffix(".tmp")
        tmp.write_bytes(sidecar.npz_bytes(out, compress=True))
        os.replace(tmp, VALUES_FILE)


def _read_values_file() -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(VALUES_FILE, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(arrays.pop("index").tobytes().decode()), arrays


@functools.lru_cache(maxsize=2)
def _values_at(stamp: tuple[int, int]) -> tuple[dict, dict[str, np.ndarray]]:
    return _read_values_file()


def load_values() -> tuple[dict, dict[str, np.ndarray]]:
    """(index, stored arrays) of VALUES_FILE (read once per version of the file)."""
    st = VALUES_FILE.stat()
    return _values_at((st.st_mtime_ns, st.st_size))


# ----------------------------------------------------------------------------- comparing
@dataclass
class Report:
    """What :func:`compare_unseen` compared, and what it found."""

    name: str
    files: int = 0  # files of the generation looked at (metadata.yaml aside)
    by_hash: int = 0  # passed as is: bytes of another recorded CPU's set
    by_value: int = 0  # compared part by part and by value
    values: int = 0  # reference values compared
    failures: list[str] = field(default_factory=list)

    def check(self, source: str = "") -> None:
        """Raise AssertionError naming every failure (the first 12) and where the reference comes from."""
        if self.failures:
            shown = "\n  ".join(self.failures[:12])
            more = f"\n  ... and {len(self.failures) - 12} more" if len(self.failures) > 12 else ""
            raise AssertionError(f"{self.name}: {len(self.failures)} difference(s) from the golden generation "
                                 f"({source}):\n  {shown}{more}")


def _where(idx: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def compare_values(rel: str, name: str, how: str, got: np.ndarray, ref: np.ndarray) -> str | None:
    """A failure message when ``got`` is not within the tolerance of ``ref``, else None."""
    what = f"{rel} {'column' if rel.endswith('.parquet') else 'array'} {name}"
    if got.shape != ref.shape:
        return f"{what}: shape {got.shape}, reference {ref.shape}"
    if got.size == 0:
        return None
    if how == "labels":
        differ = (got != ref).reshape(len(got), -1).sum(axis=1)
        allowed = max(1, int(LABEL_FRACTION * got[0].size))
        i = int(differ.argmax())
        if differ[i] > allowed:
            return (f"{what}: {int(differ[i])} pixels of frame {i} carry another label than the reference's; "
                    f"the tolerance is {allowed} ({LABEL_FRACTION:g} of a frame)")
        return None
    dev = np.abs(got - ref)
    dev[np.isnan(got) != np.isnan(ref)] = np.inf
    dev[np.isnan(got) & np.isnan(ref)] = 0.0
    i = np.unravel_index(int(np.argmax(dev)), dev.shape)
    at = f"largest deviation {dev[i]:.3g} at {_where(i)} (reference {ref[i]:.9g}, here {got[i]:.9g})"
    if how == "jpeg":
        mean = float(dev.mean())
        if mean > JPEG_MEAN_TOL or dev[i] > JPEG_CELL_TOL:
            return (f"{what} (decoded, {GRID[0]}x{GRID[1]} cell means per channel): mean absolute deviation "
                    f"{mean:.3g} grey levels (tolerance {JPEG_MEAN_TOL:g}), {at} (tolerance {JPEG_CELL_TOL:g})")
        return None
    tol = DEPTH_ATOL if how == "depth" else PHYSICS_ATOL
    if not dev[i] <= tol:
        cells = f" ({GRID[0]}x{GRID[1]} cell means, metres)" if how == "depth" else ""
        return f"{what}{cells}: {at}; the tolerance is {tol:g}"
    return None


def compare_unseen(name: str, root: Path, gold: dict) -> Report:
    """Compare the generation ``name`` at ``root`` with the golden one as a CPU without a set of its own
    must (see the module's docstring). metadata.yaml is only required to exist: the caller compares it
    as a document. Returns the :class:`Report`; ``report.check()`` raises on any failure."""
    report = Report(name)
    hashes = golden_hashes(gold, name)
    index, stored = load_values() if VALUES_FILE.exists() else ({"sets": {}}, {})
    ref_set = index["sets"].get(name)
    if ref_set is None or index.get("format") != FORMAT:
        report.failures.append(f"{VALUES_FILE.name} holds no reference values of {name} (format {FORMAT}): "
                               "record them with OPENARM_RECORD_GOLDEN=1 on a CPU whose own set passes")
        return report
    got = {p.relative_to(root).as_posix(): data for p, data in recorded_files(root).items()}
    if set(got) != set(hashes):
        report.failures.append(f"the files differ from the golden set's: missing {sorted(set(hashes) - set(got))[:5]}, "
                               f"extra {sorted(set(got) - set(hashes))[:5]}")
    decoded: dict[str, np.ndarray] = {}
    for rel in sorted(set(got) & set(hashes)):
        if rel == layout.METADATA_FILE:
            continue
        report.files += 1
        digest = hashlib.sha256(got[rel]).hexdigest()
        ref = ref_set["files"].get(rel)
        if ref is not None and ref["sha256"] not in hashes[rel]:
            report.failures.append(f"{rel}: the reference values were taken from bytes no golden set holds "
                                   f"({ref['sha256'][:12]}...): {VALUES_FILE.name} is stale")
            continue
        kind = kind_of(rel)
        if digest in hashes[rel] and (ref is None or digest != ref["sha256"]):
            report.by_hash += 1  # another recorded CPU's bytes
            if kind == "manifest":  # a recorded manifest still has to list the files beside it, as they are
                report.failures += [f"{rel}: {m}" for m in _manifest_matches_files(root / rel)]
            continue
        if kind is None or ref is None:
            report.failures.append(f"{rel}: differs in bytes from every golden set and is not of a physics-"
                                   "dependent kind (state parquet, sidecar/frames npz, camera JPEG, manifest)")
            continue
        report.by_value += 1
        try:
            exact, values = read_parts(root / rel, kind)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, pa.ArrowException) as e:
            # an unreadable file is a difference, named
            report.failures.append(f"{rel}: unreadable as a {kind} file: {type(e).__name__}: {str(e)[:200]}")
            continue
        for part in sorted(set(exact) | set(ref["exact"])):
            if exact.get(part) != ref["exact"].get(part):
                report.failures.append(f"{rel}: {part} differs from the reference's (compared exactly: it does "
                                       "not depend on the CPU)")
        if kind == "manifest":
            report.failures += [f"{rel}: {m}" for m in _manifest_matches_files(root / rel)]
        for vname, spec in ref["values"].items():
            if vname not in values:
                continue  # named by the exact parts (columns, arrays)
            how, have = values[vname]
            if spec["data"] not in decoded:
                q = QUANTA[how]
                decoded[spec["data"]] = stored[spec["data"]] if q is None else decode(stored[spec["data"]], q)
            want = decoded[spec["data"]]
            if "row" in spec:
                want = want[spec["row"]]
            problem = compare_values(rel, vname, how, np.asarray(have), want)
            report.values += want.size
            if problem:
                report.failures.append(problem)
    return report
