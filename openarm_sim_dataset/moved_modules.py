"""The import paths of modules that moved into the layer packages (core, ops, learn, explore, record).

``openarm_sim_dataset.dataset`` is ``openarm_sim_dataset.core.dataset``: the same module object under both
names, so a class, a registry or a monkeypatch seen through one name is the one seen through the other.
Installed by the package's ``__init__`` before anything else is imported.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec

_PKG = __package__
#: old module path -> new one (a package's submodules follow it)
MOVED = {f"{_PKG}.{old}": f"{_PKG}.{new}" for old, new in {
    **{m: f"core.{m}" for m in (
        "atomic", "cache", "camera", "cluster", "dataframe", "dataset", "episode_summary", "errors", "formats",
        "frequencies", "gl", "journal", "kinematics", "layout", "lock", "machine", "manifest", "metadata",
        "metadata_index", "palette", "report", "resample", "sampler", "sidecar", "smoothing", "stats", "streams",
        "synthetic", "window", "writer", "yaml_codec")},
    "_lazy": "core.lazy",
    **{m: f"ops.{m}" for m in ("convert", "edit", "merge", "repair")},
    **{m: f"learn.{m}" for m in ("bc", "env", "evaluate", "policies", "torch")},
    **{m: f"explore.{m}" for m in ("card", "info", "show", "view")},
    "record_writer": "record.compat",
    # renamed where two modules had one name
    "sim.distributed": "sim.generate_on_ray",
    "sim.recorder": "sim.episode_recorder",
    "validate.distributed": "validate.checks_on_ray",
    "validate.summary": "validate.summary_json",
    "learn.torch.stats": "learn.torch.normalization",
}.items()}


def new_path(name: str) -> str | None:
    """Where the module once importable as ``name`` lives now (None: it did not move)."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class MovedModules:
    """Imports an old path as the module at its new path (``python -m`` of an old package path runs its
    ``__main__`` from the new folder: that one is left to the normal finders). A finder and loader by
    protocol, as ``importlib.abc`` would import ``importlib.resources`` and ``pathlib`` at every start-up."""

    def __init__(self):
        self._modules: dict = {}

    def find_spec(self, name, path=None, target=None):
        new = new_path(name)
        if new is None or name.endswith(".__main__"):
            return None
        module = importlib.import_module(new)
        self._modules[name] = (module, module.__spec__)
        return ModuleSpec(name, self, is_package=hasattr(module, "__path__"))

    def create_module(self, spec):
        return self._modules[spec.name][0]

    def exec_module(self, module):
        # the import system set the old name's spec on the module: give it back its own (resources, reload)
        for name, (mod, spec) in list(self._modules.items()):
            if mod is module:
                module.__spec__ = spec
                del self._modules[name]


def install() -> None:
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
