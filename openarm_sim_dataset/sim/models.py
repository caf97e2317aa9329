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
dataclass: its field values), an episode's :class:`~openarm_sim_dataset.sim.variation.Variation` (if
any), the MuJoCo version and library, the SHA-256 of every asset file the scene reads (the OpenArm MJCF
and meshes; re-hashed whenever a file's size, mtime or inode changes) and of the code that builds the
scene (``scene.py``, ``variation.py``: another checkout's scene never stands in for this one's, even
when both share the cache folder).

Per-episode models (an episode's variation applied to the scene spec, then compiled) are compiled once
per process and variation and kept as a *patch*: the elements of the compiled model that differ from
the nominal model of the same configuration (a few kB: colours, light and camera poses, cube sizes,
masses and what the compiler derives from them). A copy of the nominal model with the patch applied is
the compiled model field for field (its MJB bytes are compared once, when the patch is made; a patch
that does not reproduce them is not used, the full model is kept instead), so handing one out costs a
copy (~0.07 s) instead of a compilation and a hash (~1.5 s). They are not written to disk. The SHA-256 of
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
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import mujoco
import numpy as np

from openarm_sim_dataset.core.atomic import atomic_write_bytes
from openarm_sim_dataset.core.cache import cache_folder
from openarm_sim_dataset.core.errors import DatasetError

from . import scene as _scene, variation as _variation  # modules: their source files are hashed
from .scene import FILE_SHA256, SceneConfig, asset_hashes, build_model, file_sha256, model_bytes, model_hash

__all__ = ["ModelMismatchError", "CachedModel", "load_model", "cached_model", "episode_model", "cache_info",
           "clear_cache"]


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
    return (cfg, mujoco.__version__, mujoco_library_sha256(), tuple(sorted(asset_hashes().items())), _code_sha256())


def _code_sha256() -> str:
    """SHA-256 of the modules that build the scene (memoised by stat, like the asset files)."""
    return hashlib.sha256("".join(file_sha256(Path(m.__file__)) for m in (_scene, _variation)).encode()).hexdigest()


def mujoco_library_sha256() -> str:
    """The MuJoCo build itself (two builds may share a version string and compile differently)."""
    lib = sorted(Path(mujoco.__file__).parent.glob("libmujoco.so*")) or [Path(mujoco._functions.__file__)]
    return file_sha256(lib[0])


def disk_dir() -> Path | None:
    """Folder of the on-disk model cache, or None when ``OPENARM_SIM_MODEL_CACHE=off``."""
    return cache_folder("OPENARM_SIM_MODEL_CACHE", "models")


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
               where: str | os.PathLike = "model", variation=None) -> mujoco.MjModel:
    """A private copy of the compiled model of ``cfg`` (compiled once per process), with an episode's
    ``variation`` (:class:`~openarm_sim_dataset.sim.variation.Variation`) if given.

    ``expected_sha256``: the hash recorded with a dataset (or episode). If the model built here hashes
    differently, :class:`ModelMismatchError` is raised naming ``where`` (e.g. the dataset's
    metadata.yaml) and both hash prefixes (:func:`openarm_sim_dataset.sim.replay.provenance_differences`
    says why: MuJoCo version, changed asset files, ...).
    """
    if variation is not None:
        return episode_model(cfg, variation, expected_sha256, where).model
    entry = cached_model(cfg)
    _check_hash(entry.sha256, expected_sha256, where)
    return copy.copy(entry.model)


def _check_hash(built: str, expected: str | None, where) -> None:
    if expected is not None and built != expected:
        raise ModelMismatchError(where, f"model hash {str(expected)[:12]} recorded, {built[:12]} "
                                        "built here from the recorded scene: not the recorded model")


# ------------------------------------------------------------------------ per-episode models
#: Variant models kept per process (patches are a few kB; a full model, kept only when a patch cannot
#: reproduce it, is ~48 MB, hence the bound).
VARIANT_ENTRIES = 256
_VARIANTS: OrderedDict[tuple, tuple] = OrderedDict()  # key -> (patch | None, full model | None, sha256)


def episode_model(cfg: SceneConfig, variation=None, expected_sha256: str | None = None,
                  where: str | os.PathLike = "model") -> CachedModel:
    """The model an episode ran on: ``cfg``'s scene with ``variation`` applied to its spec, compiled
    (once per process and variation), with its hash; the model is a private instance (modify freely).

    ``variation=None`` gives a private copy of the nominal model. ``expected_sha256`` as in
    :func:`load_model` (the episode's recorded ``model_sha256``)."""
    if variation is None:
        entry = cached_model(cfg)
        _check_hash(entry.sha256, expected_sha256, where)
        return CachedModel(copy.copy(entry.model), entry.sha256)
    base = cached_model(cfg)
    key = (_key(cfg), variation.key())
    with _LOCK:
        hit = _VARIANTS.get(key)
        if hit is not None:
            _VARIANTS.move_to_end(key)
            _STATS["hits"] += 1
    if hit is None:
        built = build_model(cfg, variation)
        data = model_bytes(built)
        sha = hashlib.sha256(data).hexdigest()
        patch = _diff(base.model, built)
        if patch is not None and model_bytes(_patched(base.model, patch)) != data:
            patch = None  # a field the diff does not see: keep the compiled model itself
        hit = (patch, None if patch is not None else built, sha)
        with _LOCK:
            _STATS["builds"] += 1
            _VARIANTS[key] = hit
            while len(_VARIANTS) > VARIANT_ENTRIES:
                _VARIANTS.popitem(last=False)
    patch, full, sha = hit
    _check_hash(sha, expected_sha256, where)
    return CachedModel(_patched(base.model, patch) if patch is not None else copy.copy(full), sha)


def _struct_fields(obj, prefix: tuple = ()) -> Iterator[tuple[tuple, object]]:
    """(attribute path, value) of every array and number of a MuJoCo struct, nested structs walked."""
    for name in dir(obj):
        if name.startswith("_"):
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # noqa: BLE001 - bindings expose a few properties that raise when unset
            continue
        path = prefix + (name,)
        if isinstance(value, np.ndarray):
            yield path, value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path, value
        elif type(value).__module__.startswith("mujoco") and not callable(value) and len(prefix) < 2:
            yield from _struct_fields(value, path)  # opt, vis (and its groups), stat


def _diff(base: mujoco.MjModel, other: mujoco.MjModel) -> dict | None:
    """``{attribute path: (flat indices, values) | value}`` of what ``other`` has that ``base`` has not
    (None when the two differ in structure, e.g. array shapes)."""
    patch: dict = {}
    theirs = dict(_struct_fields(other))
    for path, a in _struct_fields(base):
        if path == ("signature",):
            continue  # not saved in MJB (a loaded model has 0): not part of the model hash
        if path not in theirs:
            return None
        b = theirs[path]
        if isinstance(a, np.ndarray):
            if not isinstance(b, np.ndarray) or a.shape != b.shape or a.dtype != b.dtype:
                return None
            if a.size == 0:
                continue
            fa = np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(a.size, -1)  # bytes: NaN == NaN
            fb = np.ascontiguousarray(b).reshape(-1).view(np.uint8).reshape(b.size, -1)
            if not np.array_equal(fa, fb):
                idx = np.flatnonzero((fa != fb).any(axis=1))
                patch[path] = (idx, b.reshape(-1)[idx].copy())
        elif a != b:
            if len(path) == 1:
                return None  # a size (nq, ngeom, ...): another structure
            patch[path] = b
    return patch


def _patched(base: mujoco.MjModel, patch: dict) -> mujoco.MjModel:
    """A copy of ``base`` with ``patch`` (:func:`_diff`) applied."""
    m = copy.copy(base)
    for path, value in patch.items():
        owner = m
        for name in path[:-1]:
            owner = getattr(owner, name)
        if isinstance(value, tuple):
            idx, values = value
            getattr(owner, path[-1]).reshape(-1)[idx] = values
        else:
            setattr(owner, path[-1], value)
    return m


def cache_info() -> dict[str, int]:
    """Counters of this process's cache: ``builds`` (compilations), ``disk_loads`` (MJB files read),
    ``hits`` (found in memory), ``models`` held."""
    return {**_STATS, "models": len(_MODELS)}


def clear_cache() -> None:
    """Forget every cached model and file hash (tests; a long-lived process that swaps model files)."""
    with _LOCK:
        _MODELS.clear()
        _VARIANTS.clear()
        FILE_SHA256.clear()
        _STATS.update(builds=0, hits=0, disk_loads=0)
