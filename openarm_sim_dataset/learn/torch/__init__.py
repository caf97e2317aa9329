"""PyTorch loader (optional extra ``[torch]``): a ``torch.utils.data.Dataset`` read in place.

    from openarm_sim_dataset.torch import TorchDataset
    ds = TorchDataset("path/to/dataset", hz=10, action_horizon=16)
    train, val = ds.split(0.1, seed=0)
    shuffled = ds.shuffle_buffer()   # over MP4 cameras: each frame decoded about once per epoch

See :class:`TorchDataset` for the items, :mod:`.index` for how steps are numbered and aligned, and
:mod:`.stats` for normalisation statistics.
"""

try:
    import torch  # noqa: F401  (absolute: PyTorch itself, not this package)
except ImportError:
    raise ImportError("openarm_sim_dataset.torch needs PyTorch: pip install 'openarm-sim-dataset[torch]' "
                      "(or pip install torch==2.13.0)") from None

from .dataset import TorchDataset
from .index import SIM_STREAMS, EpisodeIndex, build_index
from .normalization import cached_stats, compute, default_cache_dir
from .stream import ShuffleBuffer

__all__ = ["SIM_STREAMS", "EpisodeIndex", "ShuffleBuffer", "TorchDataset", "build_index", "cached_stats", "compute", "default_cache_dir"]
