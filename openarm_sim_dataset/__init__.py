"""openarm_sim_dataset: OpenArm robot-learning datasets you can trust.

Reads every OpenArm Dataset layout (unversioned, 0.1.0-0.4.0), writes 0.4.0, resamples on an
integer-nanosecond grid, and (``openarm_sim_dataset.sim``) generates simulated episodes in MuJoCo.
"""

import importlib

__version__ = "0.1.0"

from .moved_modules import (
    MOVED as _MOVED,  # noqa: E402 - before any submodule is imported
    install as _install_moved,  # noqa: E402
)

_install_moved()  # the modules that moved into core/, ops/, learn/, explore/ keep their old import paths

from .core.errors import (  # noqa: E402
    CameraError,
    DatasetError,
    MetadataError,
    OutputExistsError,
    StreamError,
    UnsafeNameError,
)
from .core.lazy import lazy_attributes  # noqa: E402

# Imported on first use (PEP 562), so that a command-line tool's --help, or one that never builds a
# DataFrame, does not pay for numpy, pandas, Pillow and PyYAML.
_LAZY = {"Camera": "core.camera", "Frame": "core.camera", "Dataset": "core.dataset", "Sample": "core.sampler",
         "Sampler": "core.sampler", "SampleSequence": "core.dataset", "Metadata": "core.metadata",
         "MergeError": "ops.merge", "merge_datasets": "ops.merge", "repair_dataset": "ops.repair"}
_lazy_getattr = lazy_attributes(__name__, _LAZY)


def __getattr__(name: str):
    # ``openarm_sim_dataset.smoothing`` after ``import openarm_sim_dataset``, as before the modules moved
    if f"{__name__}.{name}" in _MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    return _lazy_getattr(name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Camera",
    "CameraError",
    "Dataset",
    "DatasetError",
    "Frame",
    "Metadata",
    "MergeError",
    "MetadataError",
    "OutputExistsError",
    "Sample",
    "SampleSequence",
    "Sampler",
    "StreamError",
    "UnsafeNameError",
    "merge_datasets",
    "repair_dataset",
    "__version__",
]
