"""The cameras the viewer serves: which ones an episode stores (for the list: one folder listing, no
index read), the camera indexes kept open (per folder/tar version; only files inside the dataset folder),
and a frame's JPEG bytes by its exact stamp (no image decoded).

A LeRobot dataset's cameras are decoded (:class:`~openarm_sim_dataset.core.video_camera.DecodedCamera`:
a window of an MP4, or PNG images in the frame table): the reader says which file holds them
(``cam.path``, resolved inside the dataset folder or refused), the cache follows that file's version and
the dataset's metadata, and a frame's JPEG is encoded from the decoded picture (``cam.read_bytes``)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout, lerobot_layout
from openarm_sim_dataset.core.camera import Camera
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.video_camera import DecodedCamera

from .errors import NotFound

#: camera indexes kept open (a tar camera holds a file descriptor)
CAMERA_CACHE = 32


def _lerobot_feature(ds: Dataset, name: str) -> str | None:
    """The LeRobot feature of camera ``name`` (``observation.images.<name>``, or the name itself)."""
    src = ds.lerobot
    key = lerobot_layout.IMAGE_PREFIX + name
    key = key if key in src.features else name
    return key if key in src.video_keys or key in src.image_keys else None


def lerobot_camera_files(ds: Dataset, ep_id: str, name: str) -> list[Path]:
    """The files a LeRobot camera of an episode is read from (nothing is read): its MP4 (a video feature)
    and the episode's data parquet (its frame table: images, stamps)."""
    files = [ds.episode_path(ep_id)]
    key = _lerobot_feature(ds, name)
    if key in ds.lerobot.video_keys:
        files.append(ds.lerobot.video_file(ep_id, key)[0])
    return files


def _lerobot_presence(ds: Dataset, ep_id: str, name: str) -> str | None:
    """``video`` (its MP4 is there), ``image`` (PNG in the frame table) or None (missing): no file read."""
    key = _lerobot_feature(ds, name)
    if key is None:
        return None
    if key in ds.lerobot.image_keys:
        return "image"
    try:
        return "video" if ds.lerobot.video_file(ep_id, key)[0].is_file() else None
    except (DatasetError, KeyError):
        return None


def camera_presence(ds: Dataset, ep_id: str) -> list[dict]:
    """Each declared camera of an episode: stored as a folder, a tar archive, or missing (one listing);
    for a LeRobot dataset ``video`` (its MP4 is there) or ``image`` (in the frame table)."""
    names = ds.camera_names
    if not names:
        return []
    if ds.lerobot is not None:
        return [{"name": n, "format": _lerobot_presence(ds, ep_id, n)} for n in names]
    if ds.version == layout.FORMAT_VERSION:
        try:
            with os.scandir(layout.episode_dir(ds.root, ep_id) / layout.CAMERAS_DIR) as it:
                present = {e.name for e in it}
        except OSError:
            present = set()
        return [{"name": n, "format": "dir" if n in present else "tar" if n + layout.TAR_SUFFIX in present
                 else None} for n in names]
    out = []
    for n in names:
        p = layout.camera_dir(ds.root, ep_id, n, ds.version, ds.meta.stored_camera_name(n))
        tar = p.with_name(p.name + layout.TAR_SUFFIX)
        out.append({"name": n, "format": "dir" if p.is_dir() else "tar" if tar.is_file() else None})
    return out


class CameraCache:
    """The camera indexes of one viewer, the :data:`CAMERA_CACHE` most recently used kept open, each
    reloaded when its folder or tar changes; guarded by the viewer's lock (``lock``)."""

    def __init__(self, root: Path, real_root: Path, lock: threading.RLock):
        self.root = root
        self.real_root = real_root
        self.lock = lock
        self.cameras: OrderedDict[tuple[str, str], tuple[tuple, Camera]] = OrderedDict()

    def get(self, ds: Dataset, ep: dict, ep_id: str, name: str) -> Camera:
        """Camera ``name`` (a URL's, checked; 404 when not declared) of the episode whose metadata entry
        is ``ep``; refused when its files lie outside the dataset."""
        name = layout.check_name(name, "camera name")
        if name not in ds.camera_names:
            raise NotFound(f"no camera {name!r} in {ds.meta.path} (cameras: {ds.camera_names})")
        key = (ep_id, name)
        version = _version(ds, ep_id, name)
        with self.lock:
            hit = self.cameras.get(key)
            if hit is not None and hit[0] == version:
                self.cameras.move_to_end(key)
                return hit[1]
        cam = ds.load_camera(name, ep)
        real = cam.path.resolve()
        if not real.is_relative_to(self.real_root):
            cam.close()
            raise NotFound(f"camera {name!r} of episode {ep_id!r} lies outside the dataset ({real})")
        with self.lock:
            self.cameras[key] = (version, cam)
            while len(self.cameras) > CAMERA_CACHE:
                self.cameras.popitem(last=False)[1][1].close()
        return cam

    def close(self) -> None:
        """Close every camera index kept open."""
        with self.lock:
            for _, cam in self.cameras.values():
                cam.close()
            self.cameras.clear()


def _stat(p: Path) -> tuple | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _version(ds: Dataset, ep_id: str, name: str) -> tuple:
    """What a cached camera index depends on: its folder and tar (OpenArm layouts); for a LeRobot
    dataset the dataset read (its episode windows: a reload is a new Dataset) and the camera's files."""
    if ds.lerobot is not None:
        try:
            files = lerobot_camera_files(ds, ep_id, name)
        except (DatasetError, KeyError):
            files = []
        return (ds, *((str(p), _stat(p)) for p in files))
    base = layout.camera_dir(ds.root, ep_id, name, ds.version, ds.meta.stored_camera_name(name))
    return tuple((p.stat().st_mtime_ns, p.stat().st_ino) if p.exists() else None
                 for p in (base, base.with_name(base.name + layout.TAR_SUFFIX)))


def check_stamp(stamp: str) -> None:
    """A URL's frame stamp: decimal integer ns (at most 20 digits), else 404."""
    if not (stamp.isascii() and stamp.isdigit() and 0 < len(stamp) <= 20):
        raise NotFound(f"frame {stamp!r}: not a timestamp in integer ns")


def frame_bytes(cam: Camera, stamp: str, real_root: Path, ep_id: str, name: str) -> tuple[bytes, int]:
    """The JPEG bytes of the frame of ``cam`` stamped exactly ``stamp`` (checked by :func:`check_stamp`)
    and its index; 404 when no frame has that stamp or its file lies outside ``real_root``. A decoded
    camera's frame (``frame_path`` is ``<mp4>#pts=..``, no file) is checked by the file it is decoded
    from (``cam.path``), and its JPEG encoded from the decoded picture (``cam.read_bytes``)."""
    ts = int(stamp)
    i = int(np.searchsorted(cam.timestamps, ts))
    if i >= len(cam.timestamps) or int(cam.timestamps[i]) != ts:
        raise NotFound(f"camera {name!r} of episode {ep_id!r} has no frame stamped {ts}")
    if isinstance(cam, DecodedCamera):
        real = cam.path.resolve()
        if not real.is_relative_to(real_root):
            raise NotFound(f"frame {ts} of camera {name!r} lies outside the dataset ({real})")
    elif cam.format == "dir":
        real = cam.frame_path(i).resolve()
        if not real.is_relative_to(real_root):
            raise NotFound(f"frame {ts} of camera {name!r} lies outside the dataset")
    return cam.read_bytes(i), i
