"""openarm_sim_dataset: OpenArm robot-learning datasets you can trust.

Reads every OpenArm Dataset layout (unversioned, 0.1.0-0.4.0), writes 0.4.0, resamples on an
integer-nanosecond grid, and (``openarm_sim_dataset.sim``) generates simulated episodes in MuJoCo.
"""

from .errors import CameraError, DatasetError, MetadataError, OutputExistsError, StreamError, UnsafeNameError

__version__ = "0.1.0"

# Imported on first use (PEP 562), so that a command-line tool's --help, or one that never builds a
# DataFrame, does not pay for numpy, pandas, Pillow and PyYAML.
_LAZY = {"Camera": "camera", "Frame": "camera", "Dataset": "dataset", "Sample": "dataset", "Metadata": "metadata"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "Camera",
    "CameraError",
    "Dataset",
    "DatasetError",
    "Frame",
    "Metadata",
    "MetadataError",
    "OutputExistsError",
    "Sample",
    "StreamError",
    "UnsafeNameError",
    "__version__",
]
