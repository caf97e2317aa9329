"""openarm_sim_dataset: OpenArm robot-learning datasets you can trust.

Reads every OpenArm Dataset layout (unversioned, 0.1.0-0.4.0), writes 0.4.0, resamples on an
integer-nanosecond grid, and (``openarm_sim_dataset.sim``) generates simulated episodes in MuJoCo.
"""

from ._lazy import lazy_attributes
from .errors import CameraError, DatasetError, MetadataError, OutputExistsError, StreamError, UnsafeNameError

__version__ = "0.1.0"

# Imported on first use (PEP 562), so that a command-line tool's --help, or one that never builds a
# DataFrame, does not pay for numpy, pandas, Pillow and PyYAML.
_LAZY = {"Camera": "camera", "Frame": "camera", "Dataset": "dataset", "Sample": "sampler", "Sampler": "sampler",
         "SampleSequence": "dataset", "Metadata": "metadata", "MergeError": "merge", "merge_datasets": "merge",
         "repair_dataset": "repair"}
__getattr__ = lazy_attributes(__name__, _LAZY)


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
