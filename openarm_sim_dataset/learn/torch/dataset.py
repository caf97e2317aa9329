"""``TorchDataset``: a ``torch.utils.data.Dataset`` over a dataset folder, read in place.

Nothing is exported or copied: states and actions are resampled once into the index
(:mod:`.index`); camera frames and depth/label images are read when an item is asked for, through
file handles each process opens for itself (a DataLoader worker never uses its parent's) and keeps
for the last few episodes only, so a worker's memory stays flat over an epoch. A LeRobot dataset's
video frames are decoded, from the keyframe before each, by the process's own decoder of each MP4
(:class:`~openarm_sim_dataset.core.video.VideoDecoder`, :data:`OPEN_VIDEOS` files at once), giving
the frames of ``VideoCamera.load_frame``. The loader keeps its decoders rather than using the shared
:func:`~openarm_sim_dataset.core.video.decoder`, which in a forked worker frees decoders the parent
opened (and hangs there).
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.camera import Camera, decode_jpeg_chw
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import CameraError
from openarm_sim_dataset.core.video import VideoDecoder
from openarm_sim_dataset.core.video_camera import DecodedCamera

from . import normalization as _stats
from .index import EpisodeIndex, build_index, open_decoded_camera
from .stream import BUFFER_MIB, CLIP_STEPS, ShuffleBuffer

#: Episodes whose indexed cameras (legacy frame names only) and depth/label arrays a process keeps at once.
OPEN_EPISODES = 4
#: Camera tar files a process keeps open at once.
OPEN_TARS = 64
#: MP4 files (video cameras) a process keeps a decoder of at once.
OPEN_VIDEOS = 8

#: Handles a forked process inherited from its parent, kept so that they are never freed there: freeing a
#: video decoder the parent opened waits forever for the parent's codec threads, which the child lacks.
_INHERITED: list = []


class _Handles:
    """Per-process cache: open tar files, :class:`Camera` objects (folders with non-canonical frame names),
    video decoders of MP4 files, and loaded frames.npz arrays of recent episodes."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.videos: OrderedDict[str, VideoDecoder] = OrderedDict()
        self.decoded: OrderedDict[tuple[int, int], DecodedCamera] = OrderedDict()
        self.dataset: Dataset | None = None
        self.tars: OrderedDict[tuple[int, int], int] = OrderedDict()
        self.cameras: OrderedDict[int, dict[str, Camera]] = OrderedDict()
        self.sim: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()

    @staticmethod
    def _touch(cache: OrderedDict, key, make, drop=None, limit: int = OPEN_EPISODES):
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        value = cache[key] = make()
        while len(cache) > limit:
            _, old = cache.popitem(last=False)
            if drop:
                drop(old)
        return value

    def close(self) -> None:
        for dec in self.videos.values():
            dec.close()
        self.videos.clear()
        self.decoded.clear()
        self.dataset = None
        for fd in self.tars.values():
            os.close(fd)
        self.tars.clear()
        for cams in self.cameras.values():
            _close_cameras(cams)
        self.cameras.clear()
        self.sim.clear()


class TorchDataset(torch.utils.data.Dataset):
    """Items of an OpenArm dataset at ``hz``, for ``torch.utils.data.DataLoader``.

    Item ``i`` is step ``s`` of episode ``e`` (:meth:`locate` / :meth:`index_of`; episodes in metadata
    order, steps on the grid of ``Dataset.sample(hz, align=align)``), a dict:

    ``observation.images.<cam>``  uint8 (3, H, W) RGB, decoded when the item is built
    ``observation.state``         float32 (D,): the ``state`` streams concatenated (:attr:`state_names`)
    ``action``                    float32 (H, D'): the ``action`` streams at steps s .. s+H-1
                                  (``action_horizon`` H): row 0 is the command sent at the item's time,
                                  the one that drives the next step; rows past the episode's end repeat
                                  its last action
    ``action_is_pad``             bool (H,): True on those repeated rows
    ``sim.<stream>[.<cam>]``      simulation streams asked for with ``sim`` (stored dtype): ``object_pose``
                                  (3, 7) metres + wxyz, ``cam_pos`` (3,), ``cam_mat`` (9,), ``depth``
                                  float32 (H, W) metres, ``labels`` uint8 (H, W)
    ``task``                      the episode's task prompt ("" when it has none)
    ``episode``                   episode id; ``step`` s; ``index`` i
    ``timestamp``                 int64 nanoseconds of the grid point

    With ``history`` K > 1 every observation (images, state, sim streams) gains a leading axis of K
    steps s-K+1 .. s, the ones before the episode's start repeating its first step, and
    ``observation_is_pad`` bool (K,) marks them. No item reads outside its episode.

    ``cameras`` selects cameras (default all; ``[]`` for none); ``state``/``action`` name streams by
    key (``arms/right/qpos``) or attribute (``qpos``: every arm); ``align`` is the sampler's rule
    (``previous``: causal); ``episodes`` restricts to some episodes (ids or positions).
    """

    def __init__(self, path: str | os.PathLike, hz: float = 10.0, *, cameras: Sequence[str] | None = None,
                 state: Sequence[str] = ("qpos",), action: Sequence[str] = ("qpos",), action_horizon: int = 1,
                 history: int = 1, sim: bool | Sequence[str] = False, align: str = "previous",
                 episodes: Sequence | None = None):
        for name, value in (("action_horizon", action_horizon), ("history", history)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
        ds = Dataset(path, camera_names=None if cameras is None else list(cameras))
        state, action = ((v,) if isinstance(v, str) else tuple(v) for v in (state, action))
        self._setup(build_index(ds, hz, align, state, action, sim, episodes),
                    int(action_horizon), int(history))

    def _setup(self, index: EpisodeIndex, action_horizon: int, history: int) -> None:
        self.index = index
        self.action_horizon = action_horizon
        self.history = history
        self._handles: _Handles | None = None

    @classmethod
    def _from_index(cls, index: EpisodeIndex, action_horizon: int, history: int) -> TorchDataset:
        obj = cls.__new__(cls)
        obj._setup(index, action_horizon, history)
        return obj

    # ----------------------------------------------------------------- description
    @property
    def root(self) -> Path:
        return Path(self.index.root)

    @property
    def hz(self) -> float:
        return self.index.hz

    @property
    def episode_ids(self) -> list[str]:
        return self.index.episode_ids.tolist()

    @property
    def num_episodes(self) -> int:
        return self.index.num_episodes

    @property
    def cameras(self) -> tuple[str, ...]:
        return self.index.cameras

    @property
    def state_names(self) -> tuple[str, ...]:
        """One name per value of ``observation.state``: ``<stream key>/<column>``."""
        return self.index.state_names

    @property
    def action_names(self) -> tuple[str, ...]:
        return self.index.action_names

    @property
    def sim_keys(self) -> list[str]:
        """Item keys of the simulation streams served (``sim.object_pose``, ``sim.depth.head``, ...)."""
        return [_item_key(k) for k in (*self.index.sim_small, *self.index.sim_images)]

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return (f"TorchDataset({self.index.root!r}, hz={self.hz}, {len(self)} items, {self.num_episodes} episodes, "
                f"cameras={list(self.cameras)}, action_horizon={self.action_horizon}, history={self.history})")

    # -------------------------------------------------------------------- mapping
    def _check(self, i) -> int:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            if isinstance(i, torch.Tensor) and i.ndim == 0 and not i.is_floating_point() and i.dtype != torch.bool:
                i = int(i)
            else:
                raise TypeError(f"item index must be an integer, not {type(i).__name__}")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"item index {i} out of range for {n} items")
        return int(i) % n

    def locate(self, i: int) -> tuple[str, int]:
        """(episode id, step within the episode) of item ``i``."""
        i = self._check(i)
        e = int(self.index.episode_of(i))
        return str(self.index.episode_ids[e]), i - int(self.index.starts[e])

    def index_of(self, episode: str | int, step: int) -> int:
        """Item index of ``step`` of an episode given by id (str) or position in this dataset (int)."""
        if isinstance(episode, str):
            hits = np.flatnonzero(self.index.episode_ids == episode)
            if not len(hits):
                raise KeyError(f"no episode {episode!r} in this dataset")
            e = int(hits[0])
        elif isinstance(episode, (int, np.integer)) and not isinstance(episode, bool):
            if not 0 <= episode < self.num_episodes:
                raise IndexError(f"episode position {episode} out of range for {self.num_episodes} episodes")
            e = int(episode)
        else:
            raise TypeError(f"episode must be an id (str) or a position (int), not {type(episode).__name__}")
        n = int(self.index.starts[e + 1] - self.index.starts[e])
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 0 <= step < n:
            raise IndexError(f"episode {self.index.episode_ids[e]!r} has steps 0..{n - 1}, no step {step!r}")
        return int(self.index.starts[e]) + int(step)

    def split(self, val_fraction: float, seed: int = 0) -> tuple[TorchDataset, TorchDataset]:
        """(train, val) by episode, never by frame: ``round(val_fraction * episodes)`` episodes (at least
        one, leaving at least one) drawn with ``numpy.random.default_rng(seed)`` go to val. Each keeps
        this dataset's episode order; the same seed gives the same split."""
        e = self.num_episodes
        if not isinstance(val_fraction, (int, float)) or not 0 < val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), not {val_fraction!r}")
        if e < 2:
            raise ValueError(f"cannot split {e} episode(s) into train and val")
        n_val = min(max(1, round(val_fraction * e)), e - 1)
        val = np.sort(np.random.default_rng(seed).permutation(e)[:n_val])
        train = np.setdiff1d(np.arange(e), val)
        return (self._from_index(self.index.subset(train), self.action_horizon, self.history),
                self._from_index(self.index.subset(val), self.action_horizon, self.history))

    # ---------------------------------------------------------------------- items
    def __getitem__(self, i) -> dict:
        i = self._check(i)
        idx = self.index
        e = int(idx.episode_of(i))
        start, stop = int(idx.starts[e]), int(idx.starts[e + 1])
        step = i - start
        fut = i + np.arange(self.action_horizon)
        action_pad = fut >= stop
        item: dict = {}
        if self.history > 1:
            past = i - self.history + 1 + np.arange(self.history)
            obs_pad = past < start
            obs_rows = np.maximum(past, start)
        else:
            obs_rows = np.array([i])
        h = self._handles_here()
        for c, name in enumerate(idx.cameras):
            item[f"observation.images.{name}"] = self._frames(h, e, c, obs_rows)
        item["observation.state"] = self._obs(idx.state[obs_rows])
        if self.history > 1:
            item["observation_is_pad"] = torch.from_numpy(obs_pad)
        item["action"] = torch.from_numpy(idx.action[np.minimum(fut, stop - 1)])
        item["action_is_pad"] = torch.from_numpy(action_pad)
        for key, values in idx.sim_small.items():
            item[_item_key(key)] = self._obs(values[obs_rows])
        if idx.sim_images:
            arrays = h._touch(h.sim, e, lambda: self._load_sim_images(e))
            rows = idx.sim_frame[obs_rows]
            for key in idx.sim_images:
                item[_item_key(key)] = self._obs(arrays[key][rows])
        item["task"] = str(idx.tasks[e])
        item["episode"] = str(idx.episode_ids[e])
        item["step"] = step
        item["index"] = i
        item["timestamp"] = int(idx.timestamps[i])
        return item

    # Items are assembled in numpy and handed over with torch.from_numpy (no copy): torch's own ops
    # (torch.stack) start its intra-op thread pool, which on a busy 2-core machine cost 45 ms for two
    # 128x96 frames against 15 us with one thread.
    def _obs(self, rows: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(rows if self.history > 1 else rows[0])

    def _frame_chw(self, h: _Handles, e: int, c: int, row: int) -> tuple[np.ndarray, str]:
        """Camera ``c``'s frame at step ``row``: 3xHxW uint8 RGB, and the path naming it."""
        idx = self.index
        if idx.camera_video is not None and idx.camera_video[e, c]:
            path, pts = str(idx.camera_paths[e, c]), int(idx.frame_pts[row, c])
            try:
                dec = h._touch(h.videos, path, lambda: VideoDecoder(path), VideoDecoder.close, OPEN_VIDEOS)
                rgb = dec.frame(pts)
            except CameraError as err:  # name the episode and frame, not only the file
                raise CameraError(path, f"episode {idx.episode_ids[e]}, camera {idx.cameras[c]!r}, frame "
                                        f"{int(idx.frame_index[row, c])} ({idx.frame_stamp[row, c] / 1e9:.3f} s into "
                                        f"the episode): {err.message}") from None
            return np.ascontiguousarray(rgb.transpose(2, 0, 1)), f"{path}#pts={pts}"
        if idx.camera_decoded is not None and idx.camera_decoded[e, c]:  # e.g. PNG images in a frame table
            if h.dataset is None:
                h.dataset = Dataset(idx.root)
            cam = h._touch(h.decoded, (e, c), lambda: open_decoded_camera(idx, e, c, h.dataset))
            f = int(idx.frame_index[row, c])
            return np.ascontiguousarray(cam.load_frame(f).transpose(2, 0, 1)), str(cam.frame_path(f))
        data, path = self._frame_bytes(h, e, c, row)
        return decode_jpeg_chw(data, path), path

    def _frames(self, h: _Handles, e: int, c: int, rows: np.ndarray) -> torch.Tensor:
        if self.history == 1:
            return torch.from_numpy(self._frame_chw(h, e, c, int(rows[0]))[0])
        out = None
        first: dict[int, int] = {}
        for j, row in enumerate(rows.tolist()):
            f = int(self.index.frame_index[row, c])
            if f in first:  # history padding repeats a frame: decode it once
                out[j] = out[first[f]]
                continue
            chw, path = self._frame_chw(h, e, c, row)
            if out is None:
                out = np.empty((len(rows), *chw.shape), dtype=np.uint8)
            elif chw.shape != out.shape[1:]:
                raise CameraError(path, f"is {chw.shape[2]}x{chw.shape[1]}, another frame of this camera "
                                        f"{out.shape[3]}x{out.shape[2]}")
            out[j] = chw
            first[f] = j
        return torch.from_numpy(out)

    def _frame_bytes(self, h: _Handles, e: int, c: int, row: int) -> tuple[bytes, str]:
        """The JPEG bytes of camera ``c`` at step ``row`` and the path naming them, read without listing
        the folder or indexing the tar again (both were done when the index was built)."""
        idx = self.index
        folder = str(idx.camera_paths[e, c])
        name = f"{int(idx.frame_stamp[row, c])}{layout.JPEG_SUFFIX}"
        offset = int(idx.frame_offset[row, c])
        if offset >= 0:
            tar = folder + layout.TAR_SUFFIX
            fd = h._touch(h.tars, (e, c), lambda: _open_regular(tar), os.close, OPEN_TARS)
            size = int(idx.frame_size[row, c])
            data = os.pread(fd, size, offset)
            if len(data) != size:
                raise CameraError(tar, f"member {name} is truncated (the file changed since the loader was built)")
            return data, os.path.join(tar, name)
        if idx.camera_direct[e, c]:
            path = os.path.join(folder, name)
            fd = _open_regular(path)
            try:
                with os.fdopen(fd, "rb") as f:
                    return f.read(), path
            except OSError as err:
                raise CameraError(path, f"cannot read ({err.strerror})") from None
        cams = h._touch(h.cameras, e, lambda: self._open_cameras(e), _close_cameras)
        cam, f = cams[idx.cameras[c]], int(idx.frame_index[row, c])
        return cam.read_bytes(f), str(cam.frame_path(f))

    def _handles_here(self) -> _Handles:
        # a forked DataLoader worker inherits the parent's cache: it opens its own handles instead (and
        # keeps the parent's from being freed: see _INHERITED)
        if self._handles is None or self._handles.pid != os.getpid():
            if self._handles is not None and self._handles.videos:
                _INHERITED.append(self._handles)
            self._handles = _Handles()
        return self._handles

    def _open_cameras(self, e: int) -> dict[str, Camera]:
        out = {}
        for c, name in enumerate(self.index.cameras):
            cam = Camera(name, self.index.camera_paths[e, c])
            if cam.num_frames != self.index.camera_frames[e, c]:
                raise CameraError(cam.path, f"has {cam.num_frames} frames, {self.index.camera_frames[e, c]} when the "
                                            "loader was built (the dataset changed; build it again)")
            out[name] = cam
        return out

    def _load_sim_images(self, e: int) -> dict[str, np.ndarray]:
        path = Path(self.index.sim_dirs[e]) / sidecar.FRAMES_FILE
        wanted = {k: k.replace("/", "_") for k in self.index.sim_images}
        arrays = sidecar.load_npz(path, members=set(wanted.values()))
        out = {}
        for key, member in wanted.items():
            a = arrays.get(member)
            if a is None:
                raise sidecar.SidecarError(path, f"no {member!r} array")
            if a.ndim == 0 or len(a) != self.index.sim_frames[e]:
                raise sidecar.SidecarError(path, f"{member} has not one row per frame ({self.index.sim_frames[e]})")
            out[key] = a
        return out

    def close(self) -> None:
        """Close this process's open camera files (they reopen when needed)."""
        if self._handles is not None and self._handles.pid == os.getpid():
            self._handles.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_handles"] = None  # handles never travel to another process
        return state

    def shuffle_buffer(self, *, buffer_mib: float = BUFFER_MIB, clip: int = CLIP_STEPS, seed: int = 0) -> ShuffleBuffer:
        """This dataset's items as a shuffled :class:`~.stream.ShuffleBuffer` (an ``IterableDataset``):
        clips of ``clip`` steps in random order, read forward (each video frame decoded about once)
        through a buffer of ``buffer_mib`` MiB per process. Items are ``self[i]``, each once per epoch;
        use it with ``DataLoader(..., shuffle=False)`` and call ``set_epoch`` before each epoch."""
        return ShuffleBuffer(self, buffer_mib=buffer_mib, clip=clip, seed=seed)

    # -------------------------------------------------------------- normalisation
    def stats(self, cache_dir: str | os.PathLike | None = None,
              images: bool = False) -> dict[str, dict[str, np.ndarray]]:
        """Mean, std, min, max per feature (see :func:`openarm_sim_dataset.torch.stats.compute`), cached."""
        return _stats.cached_stats(self, cache_dir=cache_dir, images=images)


def _open_regular(path: str) -> int:
    """A read-only descriptor of ``path``, which must still be a regular file (never a link, FIFO or device
    put there after the index was built: opening a FIFO would block)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise CameraError(path, f"cannot open ({err.strerror}; the dataset changed since the loader was built?)") \
            from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CameraError(path, "is no longer a regular file")
    return fd


def _close_cameras(cams: dict[str, Camera]) -> None:
    for cam in cams.values():
        cam.close()


def _item_key(sim_key: str) -> str:
    return "sim." + sim_key.replace("/", ".")
