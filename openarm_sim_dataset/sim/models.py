"""Compiled scene models, built once per process and keyed by their content.

Compiling the scene (:func:`~openarm_sim_dataset.sim.scene.build_model`) costs about a second; replay,
validation, regeneration and re-rendering all need the same model again and again. :func:`load_model`
compiles a configuration once per process and hands out copies (``mj_copyModel``, ~0.07 s; a caller
may change its copy without touching the cache).

The cache key is everything the compiled model depends on: the :class:`SceneConfig` (a frozen
dataclass: its field values), the MuJoCo version, and the SHA-256 of every asset file the scene reads
(the OpenArm MJCF and meshes; re-hashed whenever a file's size, mtime or inode changes). The SHA-256 of
the compiled model (MJB) is computed once, at build time, and kept with it; given the hash recorded in
a dataset, :func:`load_model` refuses to return a model whose hash differs (:class:`ModelMismatchError`),
so a cached model can never stand in for a different one.
"""

from __future__ import annotations

import copy
import os
import threading
from dataclasses import dataclass

import mujoco

from ..errors import DatasetError
from .scene import _FILE_SHA256, SceneConfig, asset_hashes, build_model, model_hash

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
_STATS = {"builds": 0, "hits": 0}


def _key(cfg: SceneConfig) -> tuple:
    return (cfg, mujoco.__version__, tuple(sorted(asset_hashes().items())))


def cached_model(cfg: SceneConfig = SceneConfig()) -> CachedModel:
    """The compiled model of ``cfg`` with its hash, compiled on first use in this process.

    The returned ``model`` is shared: read it, never modify it."""
    key = _key(cfg)
    with _LOCK:
        hit = _MODELS.get(key)
        if hit is not None:
            _STATS["hits"] += 1
            return hit
        model = build_model(cfg)
        entry = CachedModel(model, model_hash(model))
        _MODELS[key] = entry
        _STATS["builds"] += 1
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
    """Counters of this process's cache: ``builds`` (compilations), ``hits``, ``models`` held."""
    return {**_STATS, "models": len(_MODELS)}


def clear_cache() -> None:
    """Forget every cached model and file hash (tests; a long-lived process that swaps model files)."""
    with _LOCK:
        _MODELS.clear()
        _FILE_SHA256.clear()
        _STATS.update(builds=0, hits=0)
