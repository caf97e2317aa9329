"""Compiled scene models, built once and keyed by their content.

Compiling the scene (:func:`~openarm_sim_dataset.sim.scene.build_model`) and hashing it costs about
1.1 s; replay, validation, regeneration and re-rendering all need the same model again and again, in
this process and in the next one. :func:`load_model` compiles a configuration once per process and hands
out copies (``mj_copyModel``, ~0.07 s; a caller may change its copy without touching the cache). Across
processes, the compiled model is kept on disk as MJB (``mj_saveModel``) in
``$OPENARM_SIM_MODEL_CACHE`` (default ``$XDG_CACHE_HOME/openarm_sim_dataset/models``, i.e.
``~/.cache/...``; ``off`` disables it), named by the key's digest and the MJB's own SHA-256: a file is
used only if its bytes hash to the name (~0.15 s to read, hash and load, instead of compiling), the
newest :data:`DISK_ENTRIES` are kept, and every write is atomic.

The cache key is everything the compiled model depends on: the :class:`SceneConfig` (a frozen
dataclass: its field values), the MuJoCo version, and the SHA-256 of every asset file the scene reads
(the OpenArm MJCF and meshes; re-hashed whenever a file's size, mtime or inode changes). The SHA-256 of
the compiled model (MJB) is computed once, at build time, and kept with it; given the hash recorded in
a dataset, :func:`load_model` refuses to return a model whose hash differs (:class:`ModelMismatchError`),
so a cached model can never stand in for a different one. The model hash *is* the SHA-256 of the MJB
bytes, so a disk entry whose bytes hash to the recorded value is the recorded model, field for field.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import mujoco

from ..errors import DatasetError
from .scene import _FILE_SHA256, SceneConfig, _file_sha256, asset_hashes, build_model, model_bytes, model_hash

__all__ = ["ModelMismatchError", "CachedModel", "load_model", "cached_model", "cache_info", "clear_cache"]


class ModelMismatchError(DatasetError):
    """The model built from a recorded configuration is not the recorded model (hash differs)."""


@dataclass(frozen=True)
class CachedModel:
    """A compiled model and the SHA-256 (hex) of its MJB serialisation.

    ``model`` is the cache's own instance: never modify it (use :func:`load_model` for a copy)."""

    model: mujoco.MjModel
    sha256: str


_LOCK = threading.Lock()
_MODELS: dict[tuple, CachedModel] = {}
_STATS = {"builds": 0, "hits": 0, "disk_loads": 0}
#: Disk entries kept (48 MB each for the default scene); older ones are removed when one is written.
DISK_ENTRIES = 8


def _key(cfg: SceneConfig) -> tuple:
    return (cfg, mujoco.__version__, _mujoco_library_sha256(), tuple(sorted(asset_hashes().items())))


def _mujoco_library_sha256() -> str:
    """The MuJoCo build itself (two builds may share a version string and compile differently)."""
    lib = sorted(Path(mujoco.__file__).parent.glob("libmujoco.so*")) or [Path(mujoco._functions.__file__)]
    return _file_sha256(lib[0])


def disk_dir() -> Path | None:
    """Folder of the on-disk model cache, or None when ``OPENARM_SIM_MODEL_CACHE=off``."""
    env = os.environ.get("OPENARM_SIM_MODEL_CACHE")
    if env is not None and env.strip().lower() in ("", "0", "off", "no", "none"):
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "openarm_sim_dataset" / "models"


def _digest(key: tuple) -> str:
    cfg, *rest = key
    return hashlib.sha256(json.dumps([asdict(cfg), rest], sort_keys=True, default=list).encode()).hexdigest()[:32]


def _load_from_disk(folder: Path, digest: str) -> CachedModel | None:
    for path in sorted(folder.glob(f"{digest}-*.mjb")):
        sha = path.stem.split("-", 1)[1]
        try:
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != sha:  # torn or altered: never used
                path.unlink(missing_ok=True)
                continue
            model = mujoco.MjModel.from_binary_path(str(path))
        except (OSError, ValueError):
            continue
        os.utime(path)  # most recently used
        return CachedModel(model, sha)
    return None


def _save_to_disk(folder: Path, digest: str, model: mujoco.MjModel) -> str:
    from ..atomic import atomic_write_bytes

    data = model_bytes(model)
    sha = hashlib.sha256(data).hexdigest()
    try:
        atomic_write_bytes(folder / f"{digest}-{sha}.mjb", data)
        entries = sorted(folder.glob("*.mjb"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[DISK_ENTRIES:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only or full cache folder only costs the next process a compilation
    return sha


def cached_model(cfg: SceneConfig = SceneConfig()) -> CachedModel:
    """The compiled model of ``cfg`` with its hash, compiled on first use in this process.

    The returned ``model`` is shared: read it, never modify it."""
    key = _key(cfg)
    with _LOCK:
        hit = _MODELS.get(key)
        if hit is not None:
            _STATS["hits"] += 1
            return hit
        folder = disk_dir()
        digest = _digest(key)
        entry = _load_from_disk(folder, digest) if folder is not None and folder.is_dir() else None
        if entry is not None:
            _STATS["disk_loads"] += 1
        else:
            model = build_model(cfg)
            sha = _save_to_disk(folder, digest, model) if folder is not None else model_hash(model)
            entry = CachedModel(model, sha)
            _STATS["builds"] += 1
        _MODELS[key] = entry
        return entry


def load_model(cfg: SceneConfig = SceneConfig(), expected_sha256: str | None = None,
               where: str | os.PathLike = "model") -> mujoco.MjModel:
    """A private copy of the compiled model of ``cfg`` (compiled once per process).

    ``expected_sha256``: the hash recorded with a dataset. If the model built here hashes differently,
    :class:`ModelMismatchError` is raised naming ``where`` (e.g. the dataset's metadata.yaml) and both
    hash prefixes (:func:`openarm_sim_dataset.sim.replay.provenance_differences` says why: MuJoCo
    version, changed asset files, ...).
    """
    entry = cached_model(cfg)
    if expected_sha256 is not None and entry.sha256 != expected_sha256:
        raise ModelMismatchError(where, f"model hash {str(expected_sha256)[:12]} recorded, {entry.sha256[:12]} "
                                        "built here from the recorded scene: not the recorded model")
    return copy.copy(entry.model)


def cache_info() -> dict[str, int]:
    """Counters of this process's cache: ``builds`` (compilations), ``disk_loads`` (MJB files read),
    ``hits`` (found in memory), ``models`` held."""
    return {**_STATS, "models": len(_MODELS)}


def clear_cache() -> None:
    """Forget every cached model and file hash (tests; a long-lived process that swaps model files)."""
    with _LOCK:
        _MODELS.clear()
        _FILE_SHA256.clear()
        _STATS.update(builds=0, hits=0, disk_loads=0)
