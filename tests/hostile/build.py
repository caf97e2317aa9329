"""Build the hostile-input corpus: each case is a copy of a good dataset with one hostile change.

``CASES`` lists :class:`Case` objects; ``case.make(bases, dst)`` copies the base dataset to ``dst``
and applies the change with real writers (PyYAML, pyarrow, tarfile, zipfile, PIL, numpy), so the
corpus is regenerated from code on every run. ``read_all`` is every library read a user can make.

Each case states what the library must raise (a documented ``DatasetError`` subclass), which file
the message must name, and its ``level``, which fixes what the command-line tools must do:

=========  ======================  =========================  ==========================================
level      dataset-validate        dataset-sample --decode    dataset-convert (openarm)
=========  ======================  =========================  ==========================================
dataset    exit 2 (unusable)       exit 2                     exit 2, no output
episode    exit 1 (FAIL row)       exit 2                     exit 2, no output
content    exit 1 (FAIL row)       exit 2                     exit 0: carried verbatim (not decoded)
=========  ======================  =========================  ==========================================
"""

from __future__ import annotations

import io
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from PIL import Image

from openarm_sim_dataset import CameraError, Dataset, MetadataError, StreamError, UnsafeNameError, layout, sidecar
from openarm_sim_dataset.errors import DatasetError

#: a name that, if ever used as a path, would land here (checked after every case)
ESCAPE_MARK = "hostile-escape-7f3a"

STATE = "episodes/0/obs/arms/right/state.parquet"
HEAD_TAR = "episodes/0/cameras/head.tar"
SIDE = "episodes/0/sim/sidecar.npz"
FRAMES = "episodes/0/sim/frames.npz"
META = "metadata.yaml"


@dataclass(frozen=True)
class Case:
    id: str
    base: str  # "dir" | "tar" | "sim"
    change: Callable[[Path], None]
    error: type  # the documented exception read_all must raise
    file: str  # relative path the message must name ("" = the dataset folder itself)
    level: str  # "dataset" | "episode" | "content"

    def make(self, bases: dict[str, Path], dst: Path) -> Path:
        shutil.copytree(bases[self.base], dst, symlinks=True)
        self.change(dst)
        return dst


def read_all(root: Path) -> int:
    """Every read a user can make: open, streams, cameras with every frame decoded, sidecars, sample."""
    ds = Dataset(root)
    n = 0
    for ep in ds.episode_ids:
        for kind in layout.KINDS:
            n += sum(len(s) for s in ds.streams(ep, kind).values())
        for cam in ds.load_cameras(ep).values():
            for frame in cam:
                frame.load()
                n += 1
        sim = layout.sim_dir(root, ep)
        for name in (sidecar.SIDECAR_FILE, sidecar.FRAMES_FILE):
            if (sim / name).exists() or (sim / name).is_symlink():
                n += len(sidecar.load_npz(sim / name))
        n += len(ds.sim_streams(ep))
    n += sum(1 for _ in ds.sample(5, decode=True, workers=1))
    return n


# ------------------------------------------------------------------------ metadata.yaml
def _doc(root: Path) -> dict:
    return yaml.safe_load((root / META).read_text())


def _put_doc(root: Path, doc) -> None:
    (root / META).write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=False))


def _text(text: str | bytes) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        data = text.encode("utf-8") if isinstance(text, str) else text
        (root / META).write_bytes(data)

    return change


def _mutate(fn: Callable[[dict], None]) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        doc = _doc(root)
        fn(doc)
        _put_doc(root, doc)

    return change


def _set(path: tuple, value) -> Callable[[dict], None]:
    def fn(doc: dict) -> None:
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    return fn


def _delete(path: tuple) -> Callable[[dict], None]:
    def fn(doc: dict) -> None:
        node = doc
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]

    return fn


def _laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


def _huge_sparse(root: Path) -> None:
    with open(root / META, "r+b") as f:
        f.truncate(65 * 1024 * 1024)  # sparse: costs no disk, refused by size before reading


def _fifo(root: Path) -> None:
    import os

    (root / META).unlink()
    os.mkfifo(root / META)


def _symlink_to(target: str, rel: str = META) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / rel).unlink()
        (root / rel).symlink_to(target)

    return change


#: hostile names for episode ids / camera names / embodiment names
HOSTILE_NAMES = {
    "dotdot": "..",
    "dot": ".",
    "parent": "../" + ESCAPE_MARK,
    "deep_parent": "../../../../../../" + ESCAPE_MARK,
    "slash": "a/" + ESCAPE_MARK,
    "absolute": "/tmp/" + ESCAPE_MARK,
    "nul": "ok\x00" + ESCAPE_MARK,
    "long": "x" * 4096,
    "empty": "",
    "hidden": ".hidden",
    "dash": "-rf",
    "backslash": "..\\" + ESCAPE_MARK,
    "newline": "a\nb",
    "unicode": "épisode",
    "float": 1.5,
    "list": [1],
    "null": None,
    "bool": True,
}

_KEYABLE = {k: v for k, v in HOSTILE_NAMES.items() if isinstance(v, (str, float)) or v is None or v is True}


def metadata_cases() -> list[Case]:
    cases: list[Case] = []

    def add(cid, change, err=MetadataError, file=META):
        cases.append(Case(f"meta-{cid}", "dir", change, err, file, "dataset"))

    # not YAML / not a mapping
    for cid, text in {
        "empty": "", "blank": "   \n\n", "comment_only": "# nothing\n", "null": "~\n", "list": "- a\n- b\n",
        "int": "42\n", "string": "just text\n", "binary_tag": "!!binary AAAA\n", "syntax": "version: [unclosed\n",
        "tab_indent": "version: 0.4.0\n\tequipment: {}\n", "not_utf8": b"version: \xff\xfe\n",
        "bom_utf16": "version: 0.4.0\n".encode("utf-16"),
        "python_apply": "!!python/object/apply:os.system ['touch " + ESCAPE_MARK + "']\n",
        "python_name": "!!python/name:os.system\n", "python_module": "!!python/module:os\n",
        "python_new": "!!python/object/new:subprocess.Popen [['touch', '" + ESCAPE_MARK + "']]\n",
        "python_tag_in_value": "version: 0.4.0\nlocation: !!python/object/apply:os.getcwd []\n",
        "billion_laughs": _laughs(), "alias_small": "a: &x 1\nb: *x\n",
        "deep_nesting": "a: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "deep_mapping": "a: " + "{b: " * 20_000 + "1" + "}" * 20_000 + "\n",
        "unhashable_key": "? [a, b]\n: 1\n",
    }.items():
        add(cid, _text(text))
    add("huge_sparse", _huge_sparse)
    add("fifo", _fifo)
    add("symlink_dev_zero", _symlink_to("/dev/zero"))
    add("directory", lambda r: ((r / META).unlink(), (r / META).mkdir()))
    add("missing", lambda r: (r / META).unlink())
    add("dangling_symlink", _symlink_to("/nonexistent/" + ESCAPE_MARK))

    # missing keys
    for cid, path in {
        "version": ("version",), "equipment": ("equipment",), "embodiments": ("equipment", "embodiments"),
        "embodiment_id": ("equipment", "embodiments", "arms", "id"),
    }.items():
        add(f"missing_{cid}", _mutate(_delete(path)))
    add("missing_episode_id", _mutate(lambda d: d["episodes"][0].pop("id")))

    # wrong types for every key the schema knows
    wrong = {"list": [1, 2], "map": {"a": 1}, "bool": True, "str": "x", "float": 1.5, "neg": -3}
    typed_keys = {
        "version": (("version",), ("list", "map", "bool", "float", "neg")),
        "location": (("location",), ("list", "map", "bool")),
        "operator": (("operator",), ("list", "map", "bool")),
        "operation_type": (("operation_type",), ("list", "map", "bool")),
        "tasks": (("tasks",), ("map", "bool", "str", "float")),
        "task": (("tasks", 0), ("list", "bool", "str", "float")),
        "task_prompt": (("tasks", 0, "prompt"), ("list", "map", "bool", "float")),
        "task_description": (("tasks", 0, "description"), ("list", "map", "bool", "float")),
        "episodes": (("episodes",), ("map", "bool", "str", "float")),
        "episode": (("episodes", 0), ("list", "bool", "str", "float")),
        "episode_success": (("episodes", 0, "success"), ("list", "map", "str", "float", "neg")),
        "episode_valid": (("episodes", 0, "valid"), ("list", "map", "str", "float")),
        "episode_task_index": (("episodes", 0, "task_index"), ("list", "map", "bool", "str", "float", "neg")),
        "equipment": (("equipment",), ("list", "bool", "str", "float")),
        "embodiments": (("equipment", "embodiments"), ("list", "bool", "str", "float")),
        "embodiment": (("equipment", "embodiments", "arms"), ("list", "bool", "str", "float")),
        "embodiment_id": (("equipment", "embodiments", "arms", "id"), ("list", "map", "bool", "str", "float")),
        "perceptions": (("equipment", "perceptions"), ("list", "bool", "str", "float")),
        "cameras": (("equipment", "perceptions", "cameras"), ("list", "bool", "str", "float")),
        "frequencies": (("frequencies",), ("list", "bool", "str", "float")),
        "frequencies_obs": (("frequencies", "obs"), ("list", "bool", "str", "float")),
        "frequencies_obs_arm": (("frequencies", "obs", "arms", "right"), ("list", "map", "bool", "str", "neg")),
        "frequencies_cameras": (("frequencies", "cameras"), ("list", "bool", "str", "float")),
        "frequencies_camera": (("frequencies", "cameras", "head"), ("list", "map", "bool", "str", "neg")),
        "simulation": (("simulation",), ("list", "bool", "str", "float")),
    }
    for cid, (path, kinds) in typed_keys.items():
        for kind in kinds:
            add(f"type_{cid}_{kind}", _mutate(_set(path, wrong[kind])))
    add("frequency_inf", _mutate(_set(("frequencies", "cameras", "head"), float("inf"))))
    add("frequency_nan", _mutate(_set(("frequencies", "cameras", "head"), float("nan"))))
    add("frequency_zero", _mutate(_set(("frequencies", "cameras", "head"), 0)))
    add("task_index_out_of_range", _mutate(_set(("episodes", 0, "task_index"), 99)))
    add("duplicate_episode", _mutate(lambda d: d["episodes"].append(dict(d["episodes"][0]))))
    add("duplicate_int_str_episode", _mutate(lambda d: d["episodes"].append({"id": int(d["episodes"][0]["id"])})))
    add("unknown_version", _mutate(_set(("version",), "9.9.9")))
    add("unknown_embodiment", _mutate(_set(("equipment", "embodiments", "arms", "id"), "UR5")))

    # hostile names
    for cid, name in HOSTILE_NAMES.items():
        add(f"episode_id_{cid}", _mutate(_set(("episodes", 0, "id"), name)))
    for cid, name in _KEYABLE.items():
        def cam(doc, name=name):
            doc["equipment"]["perceptions"]["cameras"][name] = {}

        def emb(doc, name=name):
            doc["equipment"]["embodiments"][name] = {"id": "OpenArm"}

        add(f"camera_name_{cid}", _mutate(cam))
        add(f"embodiment_name_{cid}", _mutate(emb))
    return cases


# ---------------------------------------------------------------------------- parquet
def _table(root: Path) -> pa.Table:
    return pq.read_table(root / STATE)


def _write_table(fn: Callable[[pa.Table], pa.Table]) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        pq.write_table(fn(_table(root)), root / STATE)

    return change


def _bytes_of(fn: Callable[[bytes], bytes], rel: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        p = root / rel
        p.write_bytes(fn(p.read_bytes()))

    return change


def _lists(n: int, width, dtype=pa.float32(), value=0.0):
    widths = [width(i) if callable(width) else width for i in range(n)]
    return pa.array([[value] * w for w in widths], type=pa.list_(dtype))


def _ts_col(t: pa.Table) -> np.ndarray:
    return t.column("timestamp").cast(pa.int64()).to_numpy()


def parquet_cases() -> list[Case]:
    cases: list[Case] = []

    def add(cid, change, level="episode"):
        cases.append(Case(f"parquet-{cid}", "dir", change, StreamError, STATE, level))

    add("truncated", _bytes_of(lambda b: b[: len(b) // 2], STATE))
    add("truncated_footer", _bytes_of(lambda b: b[:-3], STATE))
    add("garbage", _bytes_of(lambda b: b"not a parquet file at all" * 10, STATE))
    add("empty_file", _bytes_of(lambda b: b"", STATE))
    add("magic_only", _bytes_of(lambda b: b"PAR1PAR1", STATE))
    add("zero_rows", _write_table(lambda t: t.slice(0, 0)), level="content")
    add("qpos_list_int", _write_table(lambda t: t.set_column(1, "qpos", _lists(t.num_rows, 8, pa.int32(), 0))))
    add("qpos_string", _write_table(lambda t: t.set_column(1, "qpos", pa.array(["x"] * t.num_rows))))
    add("qpos_scalar_float", _write_table(lambda t: t.set_column(1, "qpos", pa.array(np.zeros(t.num_rows, np.float32)))))
    add("qpos_list_string", _write_table(lambda t: t.set_column(1, "qpos", _lists(t.num_rows, 8, pa.string(), "a"))))
    add("qpos_struct", _write_table(lambda t: t.set_column(1, "qpos", pa.array([{"a": 1.0}] * t.num_rows))))
    for w in (0, 1, 7, 9, 64):
        add(f"qpos_width_{w}", _write_table(lambda t, w=w: t.set_column(1, "qpos", _lists(t.num_rows, w))))
    add("qpos_width_mixed", _write_table(lambda t: t.set_column(1, "qpos", _lists(t.num_rows, lambda i: 8 if i % 7 else 9))))
    add("qpos_width_last_row", _write_table(lambda t: t.set_column(1, "qpos", _lists(t.num_rows, lambda i: 8 if i < t.num_rows - 1 else 7))))
    add("timestamp_int64", _write_table(lambda t: t.set_column(0, "timestamp", t.column("timestamp").cast(pa.int64()))))
    add("timestamp_float", _write_table(lambda t: t.set_column(0, "timestamp", pa.array(_ts_col(t) / 1e9))))
    add("timestamp_string", _write_table(lambda t: t.set_column(0, "timestamp", pa.array([str(v) for v in _ts_col(t)]))))
    add("timestamp_missing", _write_table(lambda t: t.drop(["timestamp"])))
    add("timestamp_null", _write_table(lambda t: t.set_column(0, "timestamp", pa.array([None] + _ts_col(t)[1:].tolist(), type=pa.timestamp("ns")))))
    add("timestamp_unsorted", _write_table(lambda t: t.take(pa.array(np.r_[1, 0, 2:t.num_rows]))), level="content")
    add("timestamp_reversed", _write_table(lambda t: t.take(pa.array(np.arange(t.num_rows)[::-1].copy()))), level="content")
    add("timestamp_duplicated", _write_table(lambda t: t.take(pa.array(np.r_[0, 0, 2:t.num_rows]))), level="content")
    add("timestamp_ms_overflow", _write_table(lambda t: t.set_column(0, "timestamp", pa.array(np.full(t.num_rows, 10**17) + np.arange(t.num_rows), type=pa.timestamp("ms")))))
    add("unknown_column", _write_table(lambda t: t.append_column("secret", t.column("qpos"))))
    add("symlink_dev_zero", _symlink_to("/dev/zero", STATE))
    return cases


#: inputs that look odd but are valid: read exactly as nanoseconds (library check only)
ACCEPTED_UNITS = ("s", "ms", "us", "ns")


def with_timestamp_unit(root: Path, unit: str) -> np.ndarray:
    """Rewrite STATE's timestamps in ``unit`` (as a writer in that unit would); return expected ns."""
    factor = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    t = pq.read_table(root / STATE)
    coarse = _ts_col(t) // factor
    pq.write_table(t.set_column(0, "timestamp", pa.array(coarse, type=pa.timestamp(unit))), root / STATE)
    return coarse * factor


# ------------------------------------------------------------------------------ tar
def _member(tf: tarfile.TarFile, name: str, data: bytes = b"", **attrs) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in attrs.items():
        setattr(info, k, v)
    tf.addfile(info, io.BytesIO(data) if info.isreg() else None)


def _jpeg(w: int = 16, h: int = 12) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 30, 30)).save(buf, format="JPEG")
    return buf.getvalue()


def _rebuild_tar(extra: Callable[[tarfile.TarFile, list], None], keep: bool = True) -> Callable[[Path], None]:
    """Rewrite HEAD_TAR: its good members (if ``keep``), then the hostile ones from ``extra``."""

    def change(root: Path) -> None:
        path = root / HEAD_TAR
        with tarfile.open(path) as tf:
            good = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]
        with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
            if keep:
                for m, data in good:
                    tf.addfile(m, io.BytesIO(data))
            extra(tf, good)

    return change


def tar_cases() -> list[Case]:
    cases: list[Case] = []

    def add(cid, change, level="episode"):
        cases.append(Case(f"tar-{cid}", "tar", change, CameraError, HEAD_TAR, level))

    j = _jpeg()
    add("symlink", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.SYMTYPE, linkname="/etc/passwd")))
    add("symlink_relative", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.SYMTYPE, linkname="../../../../" + ESCAPE_MARK)))
    add("hardlink", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.LNKTYPE, linkname=g[0][0].name)))
    add("hardlink_outside", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.LNKTYPE, linkname="/etc/shadow")))
    add("char_device", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.CHRTYPE, devmajor=1, devminor=5)))
    add("block_device", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.BLKTYPE, devmajor=8, devminor=0)))
    add("fifo", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.FIFOTYPE)))
    add("directory", _rebuild_tar(lambda tf, g: _member(tf, "1.jpeg", type=tarfile.DIRTYPE)))
    for cid, name in {
        "dotdot": "../1.jpeg", "deep_dotdot": "../../../../" + ESCAPE_MARK + "/1.jpeg", "absolute": "/tmp/1.jpeg",
        "subdir": "sub/1.jpeg", "non_numeric": "frame.jpeg", "png": "1.png", "negative": "-1.jpeg",
        "too_long_number": "1" * 25 + ".jpeg", "no_suffix": "1", "space": " 1.jpeg", "unicode_digits": "١٢.jpeg",
        "dotslash": "./1.jpeg", "nul": "1\x00.jpeg",
    }.items():
        add(f"name_{cid}", _rebuild_tar(lambda tf, g, name=name: _member(tf, name, j)))
    add("duplicate_member", _rebuild_tar(lambda tf, g: tf.addfile(g[0][0], io.BytesIO(g[0][1]))))
    add("duplicate_jpg_jpeg", _rebuild_tar(lambda tf, g: _member(tf, g[0][0].name.replace(".jpeg", ".jpg"), j)))
    add("not_a_tar", _bytes_of(lambda b: b"this is not a tar archive " * 40, HEAD_TAR))
    add("gzip_tar", _bytes_of(lambda b: __import__("gzip").compress(b), HEAD_TAR))
    add("truncated", _bytes_of(lambda b: b[: len(b) // 2 + 100], HEAD_TAR))
    add("truncated_header", _bytes_of(lambda b: b[:300], HEAD_TAR))
    add("bad_checksum", _bytes_of(lambda b: b[:148] + b"99999999" + b[156:], HEAD_TAR))
    add("member_beyond_end", _bytes_of(lambda b: _grow_last_size(b), HEAD_TAR))
    add("truncated_jpeg_members", _rebuild_tar(lambda tf, g: [_member(tf, m.name, d[: len(d) // 2]) for m, d in g], keep=False),
        level="content")
    return cases


def _grow_last_size(b: bytes) -> bytes:
    """Declare the first member 1 GiB long (its data then runs past the end of the archive)."""
    hdr = bytearray(b[:512])
    hdr[124:136] = b"%011o\0" % (1 << 30)
    hdr[148:156] = b" " * 8
    hdr[148:156] = b"%06o\0 " % sum(hdr)
    return bytes(hdr) + b[512:]


# ----------------------------------------------------------------------------- JPEG
def _first_frame(root: Path) -> Path:
    return sorted((root / "episodes/0/cameras/head").iterdir())[0]


def _frame_bytes(fn: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        p = _first_frame(root)
        p.write_bytes(fn(p.read_bytes()))

    return change


def _bomb(side: int) -> Callable[[bytes], bytes]:
    def fn(data: bytes) -> bytes:
        data = bytearray(data)
        sof = data.index(b"\xff\xc0")
        data[sof + 5 : sof + 9] = side.to_bytes(2, "big") + side.to_bytes(2, "big")
        return bytes(data)

    return fn


def _png(_b: bytes) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 12)).save(buf, format="PNG")
    return buf.getvalue()


class _FrameFile:
    """Message must name the first head frame of episode 0 (resolved after the copy)."""


def jpeg_cases() -> list[Case]:
    cases: list[Case] = []

    def add(cid, change, err=CameraError, level="content"):
        cases.append(Case(f"jpeg-{cid}", "dir", change, err, "episodes/0/cameras/head/<first>", level))

    add("truncated", _frame_bytes(lambda b: b[: len(b) // 2]))
    add("header_only", _frame_bytes(lambda b: b[:20]))
    add("empty", _frame_bytes(lambda b: b""))
    add("png", _frame_bytes(_png))
    add("text", _frame_bytes(lambda b: b"hello, not an image\n"))
    add("bomb_60000", _frame_bytes(_bomb(60000)))
    add("bomb_9000", _frame_bytes(_bomb(9000)))
    add("zero_size", _frame_bytes(_bomb(0)))
    add("soi_only", _frame_bytes(lambda b: b"\xff\xd8\xff\xd9"))

    def symlink(root: Path) -> None:
        p = _first_frame(root)
        p.unlink()
        p.symlink_to("/etc/hostname")

    def fifo(root: Path) -> None:
        import os

        p = _first_frame(root)
        p.unlink()
        os.mkfifo(p)

    def stray(root: Path) -> None:
        (root / "episodes/0/cameras/head/notes.txt").write_text("x")

    def missing_camera(root: Path) -> None:
        shutil.rmtree(root / "episodes/0/cameras/head")

    add("symlink_frame", symlink, level="episode")
    add("fifo_frame", fifo, level="episode")
    cases.append(Case("jpeg-stray_file", "dir", stray, CameraError, "episodes/0/cameras/head/notes.txt", "episode"))
    cases.append(Case("jpeg-missing_camera", "dir", missing_camera, CameraError, "episodes/0/cameras/head", "episode"))
    return cases


# --------------------------------------------------------------------------- sidecar
def _npz(rel: str, fn: Callable[[dict], dict]) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        arrays = sidecar.load_npz(root / rel)
        sidecar.save_npz(root / rel, fn(arrays))

    return change


def _object_arrays(root: Path) -> None:
    arrays = sidecar.load_npz(root / SIDE)
    arrays["object_pose"] = np.array([{"pwn": 1}] * len(arrays["frame_timestamp"]), dtype=object)
    np.savez(root / SIDE, **arrays)  # numpy pickles object arrays


def _npz_member(name: str, payload: bytes) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        with zipfile.ZipFile(root / SIDE, "a") as zf:
            zf.writestr(name, payload)

    return change


def _declared_huge(root: Path) -> None:
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(b, {"descr": "<f8", "fortran_order": False, "shape": (10**11,)})
    _npz_member("bomb.npy", b.getvalue() + b"\0" * 64)(root)


def sidecar_cases() -> list[Case]:
    cases: list[Case] = []

    def add(cid, change, file=SIDE):
        cases.append(Case(f"sidecar-{cid}", "sim", change, sidecar.SidecarError, file, "content"))

    add("object_array", _object_arrays)
    add("missing_frame_timestamp", _npz(SIDE, lambda a: {k: v for k, v in a.items() if k != "frame_timestamp"}))
    add("missing_object_pose", _npz(SIDE, lambda a: {k: v for k, v in a.items() if k != "object_pose"}))
    add("short_object_pose", _npz(SIDE, lambda a: dict(a, object_pose=a["object_pose"][:2])))
    add("scalar_object_pose", _npz(SIDE, lambda a: dict(a, object_pose=np.float64(1.0))))
    add("float_timestamps", _npz(SIDE, lambda a: dict(a, frame_timestamp=a["frame_timestamp"].astype(np.float64))))
    add("unsorted_timestamps", _npz(SIDE, lambda a: dict(a, frame_timestamp=a["frame_timestamp"][::-1].copy())))
    add("2d_timestamps", _npz(SIDE, lambda a: dict(a, frame_timestamp=a["frame_timestamp"].reshape(1, -1))))
    add("short_cam_pos", _npz(SIDE, lambda a: dict(a, cam_pos_head=a["cam_pos_head"][:1])))
    add("short_depth", _npz(FRAMES, lambda a: dict(a, depth_head=a["depth_head"][:1])), FRAMES)
    add("not_npy_member", _npz_member("notes.txt", b"hello"))
    add("declared_huge", _declared_huge)
    add("not_a_zip", _bytes_of(lambda b: b"not a zip", SIDE))
    add("truncated", _bytes_of(lambda b: b[: len(b) // 2], SIDE))
    add("empty", _bytes_of(lambda b: b"", SIDE))
    add("frames_truncated", _bytes_of(lambda b: b[: len(b) // 2], FRAMES), FRAMES)
    add("frames_fifo", lambda r: ((r / FRAMES).unlink(), __import__("os").mkfifo(r / FRAMES)), FRAMES)
    return cases


# --------------------------------------------------------------------------- folders
def folder_cases() -> list[Case]:
    def as_file(root: Path) -> None:
        shutil.rmtree(root)
        root.write_text("a file, not a folder")

    def gone(root: Path) -> None:
        shutil.rmtree(root)

    return [
        Case("folder-missing", "dir", gone, DatasetError, "", "dataset"),
        Case("folder-is_file", "dir", as_file, DatasetError, "", "dataset"),
    ]


def all_cases() -> list[Case]:
    cases = metadata_cases() + parquet_cases() + tar_cases() + jpeg_cases() + sidecar_cases() + folder_cases()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return cases


CASES = all_cases()

#: documented exception classes (a case may expect any subclass of its ``error``)
DOCUMENTED = (MetadataError, UnsafeNameError, StreamError, CameraError, sidecar.SidecarError, DatasetError)


def expected_file(case: Case, root: Path) -> Path:
    """The path the error message must contain."""
    if case.file.endswith("<first>"):
        return root / case.file.replace("<first>", "") / _first_frame_name(root)
    return root / case.file if case.file else root


def _first_frame_name(root: Path) -> str:
    folder = root / "episodes/0/cameras/head"
    return sorted(p.name for p in folder.iterdir())[0] if folder.is_dir() else ""
