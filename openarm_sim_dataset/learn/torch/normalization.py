"""Normalisation statistics of a loader: mean, std, min, max per feature, computed once and cached.

Statistics cover what a model is fed: the state and action vectors at the loader's grid (each step
once, whatever the action horizon or history), and, when asked, the RGB channels of every camera frame
the grid shows (in the uint8 tensors' units, 0-255; shape (3, 1, 1) so that they broadcast over CHW).

The cache is one JSON file per key, outside the dataset folder unless asked (``cache_dir``; default
``$OPENARM_SIM_STATS_CACHE``, else ``$XDG_CACHE_HOME/openarm_sim_dataset/stats``, else
``~/.cache/openarm_sim_dataset/stats``). The key is a SHA-256 of the values the statistics are computed
from (grid stamps, state and action arrays, feature names, rate, alignment), so it changes exactly when
the data does; image statistics add each episode's integrity manifest (SHA-256 of every file) where it
has one, else each camera file's size and modification time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.atomic import atomic_write_bytes
from openarm_sim_dataset.core.camera import Camera, decode_jpeg_chw
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.video import VideoDecoder

from .index import open_decoded_camera

if TYPE_CHECKING:
    from .dataset import TorchDataset

#: Bumped when what the statistics mean changes, so that older cache files are never read.
STATS_VERSION = 1
STATS = ("mean", "std", "min", "max")


def default_cache_dir() -> Path:
    if os.environ.get("OPENARM_SIM_STATS_CACHE"):
        return Path(os.environ["OPENARM_SIM_STATS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "openarm_sim_dataset" / "stats"


def _feature_stats(values: np.ndarray, axis) -> dict[str, np.ndarray]:
    v = values.astype(np.float64, copy=False)
    return {"mean": v.mean(axis=axis), "std": v.std(axis=axis), "min": v.min(axis=axis), "max": v.max(axis=axis)}


def _camera_identity(ds: TorchDataset) -> list:
    """What identifies the camera files: manifests where episodes have them, else sizes and times."""
    out = []
    idx = ds.index
    for e, ep in enumerate(idx.episode_ids.tolist()):
        manifest = layout.episode_dir(Path(idx.root), ep) / layout.MANIFEST_FILE
        if manifest.is_file():
            out.append([ep, hashlib.sha256(manifest.read_bytes()).hexdigest()])
            continue
        for p in idx.camera_paths[e].tolist():
            tar = Path(p + layout.TAR_SUFFIX)
            st = (Path(p) if Path(p).exists() else tar).stat()  # a folder, an MP4, else the tar beside
            out.append([ep, p, st.st_size, st.st_mtime_ns])
    return out


def cache_key(ds: TorchDataset, images: bool) -> str:
    idx = ds.index
    h = hashlib.sha256()
    head = {"v": STATS_VERSION, "hz": idx.hz, "align": idx.align, "state": idx.state_names,
            "action": idx.action_names, "episodes": idx.episode_ids.tolist(), "starts": idx.starts.tolist()}
    if images:
        head["cameras"] = list(idx.cameras)
        head["files"] = _camera_identity(ds)
    h.update(json.dumps(head, sort_keys=True).encode())
    for a in (idx.timestamps, idx.state, idx.action) + ((idx.frame_index,) if images else ()):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def compute(ds: TorchDataset, images: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """``{"observation.state": {"mean", "std", "min", "max"}, "action": {...}}`` (float64, one value per
    feature, population std), plus ``observation.images.<cam>`` (3, 1, 1) with ``images=True`` (decodes
    every distinct frame the grid shows, once)."""
    idx = ds.index
    out = {"observation.state": _feature_stats(idx.state, 0), "action": _feature_stats(idx.action, 0)}
    if images:
        levels = np.arange(256, dtype=np.float64)
        reader = Dataset(idx.root) if idx.camera_decoded is not None and idx.camera_decoded.any() else None
        for c, name in enumerate(idx.cameras):
            # a histogram of grey levels per channel: exact sums, and bincount beats strided reductions
            hist = np.zeros((3, 256), dtype=np.int64)
            for e in range(idx.num_episodes):
                rows = slice(idx.starts[e], idx.starts[e + 1])
                if idx.camera_video is not None and idx.camera_video[e, c]:
                    dec = VideoDecoder(idx.camera_paths[e, c])  # its own: closed here, in this process
                    try:
                        for pts in np.unique(idx.frame_pts[rows, c]).tolist():
                            rgb = dec.frame(pts).reshape(-1, 3)
                            for ch in range(3):
                                hist[ch] += np.bincount(rgb[:, ch], minlength=256)
                    finally:
                        dec.close()
                    continue
                if idx.camera_decoded is not None and idx.camera_decoded[e, c]:  # images in a frame table
                    cam = open_decoded_camera(idx, e, c, ds=reader)
                    for f in np.unique(idx.frame_index[rows, c]).tolist():
                        rgb = cam.load_frame(f).reshape(-1, 3)
                        for ch in range(3):
                            hist[ch] += np.bincount(rgb[:, ch], minlength=256)
                    continue
                cam = Camera(name, idx.camera_paths[e, c])
                try:
                    for f in np.unique(idx.frame_index[idx.starts[e]:idx.starts[e + 1], c]).tolist():
                        chw = decode_jpeg_chw(cam.read_bytes(f), cam.frame_path(f)).reshape(3, -1)
                        for ch in range(3):
                            hist[ch] += np.bincount(chw[ch], minlength=256)
                finally:
                    cam.close()
            count = hist.sum(1)
            mean = hist @ levels / count
            std = np.sqrt(np.maximum(hist @ levels**2 / count - mean**2, 0.0))
            seen = hist > 0
            lo = np.argmax(seen, axis=1).astype(np.float64)
            hi = 255.0 - np.argmax(seen[:, ::-1], axis=1)
            out[f"observation.images.{name}"] = {k: v.reshape(3, 1, 1) for k, v in
                                                 (("mean", mean), ("std", std), ("min", lo), ("max", hi))}
    return out


def _to_json(stats: dict) -> dict:
    return {feat: {k: np.asarray(v).tolist() for k, v in d.items()} for feat, d in stats.items()}


def _from_json(doc: dict) -> dict[str, dict[str, np.ndarray]]:
    return {feat: {k: np.asarray(d[k], dtype=np.float64) for k in STATS} for feat, d in doc.items()}


def cached_stats(ds: TorchDataset, cache_dir: str | os.PathLike | None = None,
                 images: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """:func:`compute`, read from ``<cache_dir>/<key>.json`` when there (written atomically when not).
    A cache file that cannot be read or written is ignored: statistics are then computed again."""
    key = cache_key(ds, images)
    path = Path(cache_dir if cache_dir is not None else default_cache_dir()) / f"{key}.json"
    try:
        doc = json.loads(path.read_text())
        if doc.get("key") == key:
            return _from_json(doc["stats"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    stats = compute(ds, images)
    doc = {"key": key, "version": STATS_VERSION, "dataset": ds.index.root, "hz": ds.index.hz, "images": images,
           "stats": _to_json(stats)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps(doc, indent=1).encode())
    except OSError:
        pass
    return stats
