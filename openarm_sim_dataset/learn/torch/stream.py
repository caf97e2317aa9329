"""A shuffled epoch that decodes each video frame about once: clips in random order through a shuffle buffer.

A map-style :class:`~.dataset.TorchDataset` shuffled by a ``DataLoader`` asks for items in random order,
and each item over an MP4 camera then seeks to the keyframe before its frame and decodes forward to it,
throwing the rest away. :class:`ShuffleBuffer` reads the same items in another order: the epoch's steps
are cut into clips of about ``clip`` consecutive steps of one episode, the clips are shuffled, and each
process (the main one, or each ``DataLoader`` worker, which takes every ``num_workers``-th clip) reads
its clips forward, so that each decoder decodes on from frame to frame. The items go through a buffer
of ``capacity`` items: once it is full, each new item replaces one drawn uniformly from it, which is
yielded; at the end the rest leaves in random order.

The randomness this gives: the clip order is a uniform permutation (seeded by ``seed`` and the epoch);
an item leaves the buffer after a geometric number of draws (mean ``capacity``), so two consecutive
items come from the same clip with probability about ``clip / capacity``, and from any of the about
``capacity / clip`` clips in the buffer otherwise. The first items of an epoch come from the first
clips read: the buffer fills (``capacity`` items decoded) before the first item is yielded.

Every item is ``dataset[i]``, built by the same code as exact random access, so the items are the
same (tensor for tensor) whichever path reads them; each index is yielded exactly once per epoch.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from openarm_sim_dataset.core.video import video_index

#: Default buffer budget per process, MiB (the capacity in items is this over one item's bytes).
BUFFER_MIB = 256.0
#: Default clip length in steps (cuts move to a keyframe of every video camera within half a clip).
CLIP_STEPS = 32


class ShuffleBuffer(torch.utils.data.IterableDataset):
    """Every item of ``dataset`` once per epoch, in shuffled order, for ``DataLoader(..., shuffle=False)``.

    ``buffer_mib``: the buffer's budget per process in MiB (``capacity`` = budget // the bytes of one
    item, at least 1; each worker holds its own buffer). ``clip``: steps per clip (>= 1). ``seed`` and
    :meth:`set_epoch` fix the order: the same seed, epoch and number of workers give the same order.
    See the module docstring for the randomness this gives.
    """

    def __init__(self, dataset, *, buffer_mib: float = BUFFER_MIB, clip: int = CLIP_STEPS, seed: int = 0):
        if isinstance(clip, bool) or not isinstance(clip, (int, np.integer)) or clip < 1:
            raise ValueError(f"clip must be an integer >= 1, not {clip!r}")
        if isinstance(buffer_mib, bool) or not isinstance(buffer_mib, (int, float)) or not buffer_mib > 0:
            raise ValueError(f"buffer_mib must be a number > 0, not {buffer_mib!r}")
        self.dataset = dataset
        self.buffer_mib = float(buffer_mib)
        self.clip = int(clip)
        self.seed = int(seed)
        self.epoch = 0
        self.clips = clip_bounds(dataset.index, self.clip, dataset.history)
        self._item_bytes: int | None = None

    def __len__(self) -> int:
        return len(self.dataset)

    def set_epoch(self, epoch: int) -> None:
        """Use the order of ``epoch`` (as ``DistributedSampler.set_epoch``); call it before each epoch."""
        self.epoch = int(epoch)

    @property
    def item_bytes(self) -> int:
        """Bytes of the tensors of one item (item 0; every item of a dataset has the same shapes)."""
        if self._item_bytes is None:
            self._item_bytes = tensor_bytes(self.dataset[0])
        return self._item_bytes

    @property
    def capacity(self) -> int:
        """Items the buffer holds per process."""
        return max(1, int(self.buffer_mib * 2**20) // max(1, self.item_bytes))

    def describe(self) -> str:
        """One line: the buffer's size in items and MiB and the randomness it gives."""
        cap = self.capacity
        return (f"shuffle buffer of {cap} items ({cap * self.item_bytes / 2**20:.0f} MiB) per process, "
                f"{len(self.clips)} clips of about {self.clip} steps in random order: consecutive items share a clip "
                f"with probability about {min(1.0, self.clip / cap):.1%}")

    def clip_order(self, worker: int = 0, workers: int = 1) -> np.ndarray:
        """Rows of :attr:`clips` that process ``worker`` of ``workers`` reads, in its order."""
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.clips))
        return order[worker::workers]

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        rng = np.random.default_rng([self.seed, self.epoch, worker])
        capacity = self.capacity
        buf: list[dict] = []
        ds = self.dataset
        for row in self.clip_order(worker, workers):
            start, stop = (int(v) for v in self.clips[row])
            for i in range(start, stop):
                item = ds[i]
                if len(buf) < capacity:
                    buf.append(item)
                    continue
                j = int(rng.integers(capacity))
                out, buf[j] = buf[j], item
                yield out
        for j in rng.permutation(len(buf)):
            yield buf[j]


def tensor_bytes(item: dict) -> int:
    """Bytes held by the tensors and arrays of an item."""
    total = 0
    for v in item.values():
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, np.ndarray):
            total += v.nbytes
    return total


def clip_bounds(index, clip: int, history: int = 1) -> np.ndarray:
    """(K, 2) int64 ``[start, stop)`` global steps of the clips of ``index``: each episode cut every
    ``clip`` steps, each cut moved to the nearest step within half a clip whose first observed frame
    (``history - 1`` steps back) is a keyframe of every video camera, so that reading a clip seeks once
    and decodes nothing it does not serve."""
    out = []
    keyed = keyframe_steps(index, history)
    for e in range(index.num_episodes):
        start, stop = int(index.starts[e]), int(index.starts[e + 1])
        cuts = [start]
        for want in range(start + clip, stop, clip):
            lo, hi = max(cuts[-1] + 1, want - clip // 2), min(stop, want + (clip + 1) // 2)
            cands = np.flatnonzero(keyed[lo:hi]) + lo if keyed is not None and hi > lo else np.empty(0, np.int64)
            cut = int(cands[np.argmin(np.abs(cands - want))]) if len(cands) else want
            if cut > cuts[-1]:
                cuts.append(cut)
        cuts.append(stop)
        out += list(zip(cuts[:-1], cuts[1:]))
    return np.asarray(out, dtype=np.int64).reshape(-1, 2)


def keyframe_steps(index, history: int = 1) -> np.ndarray | None:
    """Bool (N,): whether the frame of every video camera at step ``k - history + 1`` (clamped to the
    episode) is a keyframe of its file; None when no camera is a video."""
    if index.camera_video is None or not index.camera_video.any():
        return None
    keyed = np.ones(len(index), dtype=bool)
    steps = np.arange(len(index))
    first = np.maximum(steps - (history - 1), index.starts[index.episode_of(steps)])
    for e in range(index.num_episodes):
        rows = slice(int(index.starts[e]), int(index.starts[e + 1]))
        for c in np.flatnonzero(index.camera_video[e]):
            vi = video_index(str(index.camera_paths[e, c]))
            pos = np.searchsorted(vi.pts, index.frame_pts[first[rows], c])
            keyed[rows] &= vi.keyframe[np.minimum(pos, len(vi) - 1)]
    return keyed
