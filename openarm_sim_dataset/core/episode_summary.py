"""The per-episode summary ``episodes/<id>/summary.json``: what ``dataset-info`` needs, written at commit.

``dataset-info`` used to read, per episode, 4 parquet timestamp columns, a listing or tar index per
camera and the first JPEG header of each, and ``lstat`` every file for the bytes on disk: 4-7 ms of
CPU per episode, 76-94 s at 10,000 episodes. Every writer of this package records those figures
beside the manifest instead (:func:`write`, called by :func:`manifest.write` before it hashes the
folder, so the manifest lists the summary and ``integrity`` covers it); ``dataset-info`` reads one
small JSON file per episode and falls back to the files for an episode without one (older datasets,
other tools' output) or with one it cannot use.

The figures are derived from the episode's files alone (not from metadata.yaml), by :func:`compute`,
the same function the ``episode_summary`` validation check runs to re-derive them. The document
(JSON, keys sorted)::

    {"summary": 1,
     "streams": {"obs/arms/right/state.parquet": {"rows": n, "columns": [...], "first_ns": t, "last_ns": t,
                                                  "min_ns": t, "max_ns": t}, ...},
     "cameras": {"head": {"format": "dir"|"tar", "frames": n, "first_ns": t, "last_ns": t, "size": [w, h]}, ...},
     "bytes": {"parquet": b, "images": b, "sidecar": b, "metadata": b, "other": b}}

``streams``: every ``*.parquet`` under ``obs/`` and ``action/`` (path relative to the episode folder;
``columns`` without ``timestamp``; the stamps null when there is no row). ``cameras``: every camera
under ``cameras/`` by its name on disk (a folder read before a tar of the same name, as readers do;
``size`` of the first frame from its JPEG header, null when there is no frame). ``bytes``: sizes of
the episode's files by kind (as ``dataset-info`` counts them), the manifest and the summary itself
excepted (their sizes are read when the summary is used).

A summary whose episode cannot be summarised (an unreadable stream or JPEG header) is not written:
``dataset-info`` then reads the files and reports the problem, as before.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from . import layout
from .atomic import TMP_PREFIX, atomic_write_bytes
from .camera import Camera
from .errors import CameraError, DatasetError
from .streams import read_timestamps

#: Version of the summary document (its ``summary`` key); a reader ignores any other.
SUMMARY_VERSION = 1
#: Kinds of bytes, as ``dataset-info`` reports them.
BYTE_KINDS = ("parquet", "images", "sidecar", "metadata", "other")
#: A summary larger than this is not read (it is a few kB).
MAX_BYTES = 1 << 20


def path_of(ep_dir: Path) -> Path:
    return Path(ep_dir) / layout.SUMMARY_FILE


def _path_str(ep_dir: str | os.PathLike) -> str:
    return os.path.join(ep_dir, layout.SUMMARY_FILE)  # no Path objects on the hot path of dataset-info


def file_kind(parts: tuple[str, ...], name: str) -> str:
    """Kind of the file ``name`` in folder ``parts`` (relative to its episode folder)."""
    if any(p.startswith(TMP_PREFIX) for p in parts) or name.startswith(TMP_PREFIX):
        return "other"
    if parts and parts[0] == layout.SIM_DIR:
        return "sidecar"
    if not parts and name in (layout.MANIFEST_FILE, layout.SUMMARY_FILE):
        return "metadata"
    if name.endswith(".parquet"):
        return "parquet"
    if layout.parse_frame_name(name) is not None or name.endswith(layout.TAR_SUFFIX):
        return "images"
    return "other"


def jpeg_size(data: bytes, path: str | os.PathLike = "<bytes>") -> tuple[int, int]:
    """(width, height) from a JPEG's header; the pixels are not decoded."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data), formats=["JPEG"]) as im:  # lazy: reads the header only
            return im.size
    except Image.DecompressionBombError as e:  # a header declaring billions of pixels: refused, never allocated
        raise CameraError(path, f"JPEG header declares an implausible size ({str(e).splitlines()[0][:120]})") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise CameraError(path, f"not a JPEG ({str(e).splitlines()[0][:120]})") from None


def stream_figures(path: Path) -> dict:
    """Rows, value columns and stamps (first, last, min, max; int ns) of one parquet stream."""
    ts, names = read_timestamps(path)
    have = len(ts) > 0
    return {"rows": int(len(ts)), "columns": [n for n in names if n != layout.TIMESTAMP_COLUMN],
            "first_ns": int(ts[0]) if have else None, "last_ns": int(ts[-1]) if have else None,
            "min_ns": int(ts.min()) if have else None, "max_ns": int(ts.max()) if have else None}


def camera_figures(cam) -> dict:
    """Format, frames, first and last stamp and first frame's size of one :class:`~.camera.Camera`."""
    n = cam.num_frames
    return {"format": cam.format, "frames": int(n),
            "first_ns": int(cam.timestamps[0]) if n else None, "last_ns": int(cam.timestamps[-1]) if n else None,
            "size": list(jpeg_size(cam.get_frame(0).read_bytes(), cam.frame_path(0))) if n else None}


def compute(ep_dir: Path) -> dict:
    """The summary of an episode folder, from its files (raises DatasetError naming an unreadable one)."""
    ep_dir = Path(ep_dir)
    streams: dict[str, dict] = {}
    nbytes = dict.fromkeys(BYTE_KINDS, 0)
    cameras: set[str] = set()
    for dirpath, dirnames, files in os.walk(ep_dir):
        parts = Path(dirpath).relative_to(ep_dir).parts
        dirnames.sort()
        if len(parts) == 1 and parts[0] == layout.CAMERAS_DIR:
            cameras.update(d for d in dirnames if not d.startswith("."))
            cameras.update(f[:-len(layout.TAR_SUFFIX)] for f in files
                           if f.endswith(layout.TAR_SUFFIX) and not f.startswith("."))
        for name in sorted(files):
            if not parts and name in (layout.MANIFEST_FILE, layout.SUMMARY_FILE):
                continue
            nbytes[file_kind(parts, name)] += os.lstat(os.path.join(dirpath, name)).st_size
            if parts and parts[0] in layout.KINDS and name.endswith(".parquet") and not name.startswith("."):
                rel = "/".join((*parts, name))
                streams[rel] = stream_figures(ep_dir / rel)
    cams = {}
    for name in sorted(cameras):
        cam = Camera(name, ep_dir / layout.CAMERAS_DIR / name)
        try:
            cams[name] = camera_figures(cam)
        finally:
            cam.close()
    return {"summary": SUMMARY_VERSION, "streams": streams, "cameras": cams, "bytes": nbytes}


def encode(summary: dict) -> bytes:
    return json.dumps(summary, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def write(ep_dir: Path) -> dict | None:
    """Compute and write the summary of ``ep_dir`` (atomically); None (and no summary left) when an
    episode file cannot be summarised: readers then read the files, which report the problem."""
    try:
        summary = compute(ep_dir)
    except (DatasetError, OSError):
        path_of(ep_dir).unlink(missing_ok=True)
        return None
    atomic_write_bytes(path_of(ep_dir), encode(summary))
    return summary


def read(ep_dir: str | os.PathLike) -> tuple[dict, os.stat_result] | None:
    """The stored summary of ``ep_dir`` and its file's stat (for its size and inode), or None when there
    is none or it is not one this version reads (too big, not JSON, another ``summary`` version)."""
    try:
        fd = os.open(_path_str(ep_dir), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_size > MAX_BYTES:
            return None
        raw = os.read(fd, st.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    ok = (isinstance(doc, dict) and doc.get("summary") == SUMMARY_VERSION and isinstance(doc.get("streams"), dict)
          and isinstance(doc.get("cameras"), dict) and isinstance(doc.get("bytes"), dict)
          and all(isinstance(doc["bytes"].get(k), int) for k in BYTE_KINDS))
    return (doc, st) if ok else None


def differences(stored: dict, derived: dict) -> list[str]:
    """Where a stored summary disagrees with the one derived from the files (``streams/<path>.rows``...)."""
    out = []
    first = ("summary", "streams", "cameras", "bytes")  # what a reader sees first, the bytes last

    def walk(a, b, where):
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(set(a) | set(b), key=lambda k: (not where and k in first and first.index(k), str(k)))
            for k in keys:
                walk(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{where}.{k}" if where else str(k))
        elif a != b:
            out.append(f"{where}: {a!r} stored, {b!r} in the files")

    walk(stored, derived, "")
    return out
