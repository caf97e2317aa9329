"""openarm_sim_dataset: OpenArm robot-learning datasets you can trust.

Reads every OpenArm Dataset layout (unversioned, 0.1.0-0.4.0), writes 0.4.0, resamples on an
integer-nanosecond grid, and (``openarm_sim_dataset.sim``) generates simulated episodes in MuJoCo.
"""

from .camera import Camera, Frame
from .dataset import Dataset, Sample
from .errors import CameraError, DatasetError, MetadataError, OutputExistsError, StreamError, UnsafeNameError
from .metadata import Metadata

__version__ = "0.1.0"

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
