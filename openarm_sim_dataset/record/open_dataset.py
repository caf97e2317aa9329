"""Opening a dataset for a recorder: taking its lock (waiting for the writer of a killed recorder to
release it) and loading and checking its metadata.yaml, or creating it from the metadata given."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping
from pathlib import Path

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import MetadataError
from openarm_sim_dataset.core.lock import OutputLock, lock_path
from openarm_sim_dataset.core.metadata import Metadata, load_yaml_document

from .errors import RecorderLockError, RecordError

#: How long a new recorder waits for the writer process of a killed recorder to exit (its lock).
ORPHAN_WAIT_S = 5.0


class _Lock(OutputLock):
    error = RecorderLockError


def acquire_lock(root: Path) -> _Lock:
    """The dataset's lock; waits (at most :data:`ORPHAN_WAIT_S`) if the process that holds it is the
    writer of a recorder that was killed (the pid in the lock file is gone): it exits at once."""
    deadline = time.monotonic() + ORPHAN_WAIT_S
    while True:
        try:
            return _Lock(root)
        except RecorderLockError:
            if time.monotonic() > deadline or _holder_alive(root):
                raise
            time.sleep(0.01)


def _holder_alive(root: Path) -> bool:
    try:
        pid = int(lock_path(root).read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError) as e:
        return not isinstance(e, ProcessLookupError)
    return True


def open_metadata(root: Path, metadata, camera_format: str) -> Metadata:
    """The metadata of the dataset ``root`` a recorder opens: loaded and checked against ``metadata``
    and ``camera_format`` (tasks it adds are appended), or, for a new dataset, created from ``metadata``."""
    meta_path = root / layout.METADATA_FILE
    given = _given_metadata(metadata)
    if meta_path.exists():
        meta = Metadata.load(root)
        if meta.version != layout.FORMAT_VERSION:
            raise RecordError(meta_path, f"is a {meta.version} dataset; the recorder appends to "
                                         f"{layout.FORMAT_VERSION} only (dataset-convert it first)")
        if meta.simulation is not None:
            raise RecordError(meta_path, "is a simulated dataset (simulation: block); record into another folder")
        stored = _camera_format_on_disk(root, meta)
        if stored is not None and stored != camera_format:
            raise RecordError(meta_path, f"its episodes store cameras as {stored!r}, not {camera_format!r} "
                                         f"(one format per dataset: pass camera_format={stored!r})")
        if given is not None:
            if _fixed_equipment(given.get("equipment")) != _fixed_equipment(meta.data.get("equipment")):
                raise RecordError(meta_path, "equipment differs from the metadata given to the recorder "
                                             "(cameras and embodiments of a dataset are fixed)")
            prompts = {t.get("prompt") for t in meta.tasks}
            new = [t for t in given.get("tasks") or [] if t.get("prompt") not in prompts]
            if new:
                meta.data.setdefault("tasks", []).extend(copy.deepcopy(new))
                meta.write(root)
        return meta
    if given is None:
        raise RecordError(meta_path, "not found, and no metadata was given to create the dataset")
    if root.exists() and any(not p.name.startswith(".tmp-") for p in root.iterdir()):
        raise RecordError(root, "exists, is not empty and has no metadata.yaml")
    data = copy.deepcopy(dict(given))
    data["version"] = layout.FORMAT_VERSION
    data.setdefault("operation_type", "teleop")
    data["episodes"] = []
    data.setdefault("frequencies", {})
    meta = Metadata(data, meta_path)
    if not meta.tasks:
        raise RecordError(meta_path, "the metadata given has no tasks (start_episode needs a task_index)")
    if not (meta.data.get("equipment") or {}).get("embodiments"):
        raise RecordError(meta_path, "the metadata given has no equipment.embodiments")
    root.mkdir(parents=True, exist_ok=True)
    meta.write(root)
    return meta


def _given_metadata(metadata) -> dict | None:
    if metadata is None:
        return None
    if isinstance(metadata, Metadata):
        return metadata.to_dict()
    if isinstance(metadata, Mapping):
        return copy.deepcopy(dict(metadata))
    path = Path(metadata)
    doc = load_yaml_document(path)
    if not isinstance(doc, dict):
        raise MetadataError(path, f"must be a mapping at the top level, not {type(doc).__name__}")
    return doc


def _fixed_equipment(equipment) -> dict:
    """The part of ``equipment`` a dataset keeps fixed: all but ``leader`` (a teleop leader's firmware
    versions, filled in while recording)."""
    return {k: v for k, v in (equipment or {}).items() if k != "leader"} if isinstance(equipment, Mapping) else equipment


def _camera_format_on_disk(root: Path, meta: Metadata) -> str | None:
    """``dir`` or ``tar``: how the last listed episode stores its cameras (None: no camera stored)."""
    for ep_id in reversed(meta.episode_ids):
        cams = layout.episode_dir(root, ep_id) / layout.CAMERAS_DIR
        if cams.is_dir():
            for entry in os.scandir(cams):
                return "tar" if entry.name.endswith(layout.TAR_SUFFIX) else "dir"
    return None
