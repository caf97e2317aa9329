"""Resampling a dataset's episodes: what :meth:`Dataset.sample <openarm_sim_dataset.dataset.Dataset.sample>`
returns and how it is built.

:mod:`.sampler` is the pure arithmetic underneath (integer-nanosecond grids, alignment rules: arrays of
timestamps in, row indices out; nothing read). This module applies it to an episode of a dataset: the
grid over its streams' and cameras' common range (:func:`episode_grid`, after :func:`check_stamps`), one
plan per episode (the rows each stream, simulation stream and camera contributes at each grid point),
and the lazy :class:`SampleSequence` that builds :class:`~.sampler.Sample` items from it, decoding
frames ahead in threads when asked (one episode's arrays held at a time). :class:`CameraDict` is the
``{name: Camera}`` that also answers to legacy camera names.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import kinematics, layout, sampler
from .camera import Camera, Frame
from .errors import StreamError
from .sampler import Sample
from .streams import Stream

if TYPE_CHECKING:
    from .dataset import Dataset


class CameraDict(dict):
    """``{name: Camera}`` where a legacy name (``left_wrist``, ``right_wrist``) finds the camera that
    this package calls ``wrist_left``/``wrist_right``, as ported openarm_dataset code asks for it."""

    def _alias(self, key):
        new = layout.LEGACY_CAMERA_RENAMES.get(key) if isinstance(key, str) else None
        return new if new is not None and dict.__contains__(self, new) else None

    def __missing__(self, key):
        alias = self._alias(key)
        if alias is None:
            raise KeyError(key)
        return self[alias]

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or self._alias(key) is not None

    def get(self, key, default=None):
        return self[key] if key in self else default


class _EpisodePlan:
    """One episode's sampling, decided: the grid and, per stream, the rows picked at each grid point."""

    __slots__ = ("episode", "grid", "obs", "action", "sim", "cameras", "renamed")

    def __init__(self, episode: str, grid: np.ndarray, obs: list, action: list, sim: list, cameras: list,
                 renamed: bool):
        self.episode, self.grid, self.obs, self.action, self.sim, self.cameras = episode, grid, obs, action, sim, cameras
        self.renamed = renamed

    def frames(self, k: int, decode: bool) -> dict:
        out = CameraDict() if self.renamed else {}
        for name, cam, idx in self.cameras:
            i = int(idx[k])
            f = Frame(cam, i, int(cam.timestamps[i]))
            if decode:
                arr = f.load()
                arr.flags.writeable = False
                out[name] = arr
            else:
                out[name] = f
        return out

    def sample(self, k: int, t: int, cameras: dict) -> Sample:
        return Sample(self.episode, t, {key: v[k] for key, v in self.obs}, {key: v[k] for key, v in self.action},
                      cameras, {key: v[k] for key, v in self.sim})


def _episode_plan(ds: Dataset, episode: dict, hz: float, how: str) -> _EpisodePlan:
    """One episode's plan: its grid and the rows each stream (smoothed as the dataset says), simulation
    stream and camera contributes at each grid point."""
    ep_id = ds.episode_id(episode)
    groups = ds.kinds_streams(episode, layout.KINDS, copy=False)  # rows are gathered below
    # a LeRobot camera whose MP4 is missing stands on its rows' times: the joints are still served, a frame
    # asked for raises the error naming the file
    cameras = ds.load_cameras(episode, missing_ok=True)
    sim = ds.sim_streams(episode)
    grid = episode_grid(ds.episode_path(episode), groups, cameras, hz)
    groups = {kind: ds.smoothed(kind, streams) for kind, streams in groups.items()}
    rows = _Aligner(grid, how)
    # take(): the rows fancy indexing copies, at a fraction of its dispatch cost
    gathered = {
        kind: [(key, s.values.take(rows(s.timestamps), axis=0)) for key, s in streams.items()]
        for kind, streams in groups.items()
    }
    sim_rows = [(key, vals[rows(ts)]) for key, (ts, vals) in sim.items()]
    cam_idx = [(name, cam, rows(cam.timestamps)) for name, cam in cameras.items()]
    # a CameraDict (legacy names as keys) only where the dataset stores legacy names, the only case
    # where ported code asks for them; elsewhere a plain dict keeps the per-sample cost down
    renamed = any(ds.meta.stored_camera_name(name) != name for name in cameras)
    return _EpisodePlan(ep_id, grid, gathered["obs"], gathered["action"], sim_rows, cam_idx, renamed)


class _Aligner:
    """``sampler.align`` of many stamp arrays on one grid, computed once per array: the attributes of one
    ``state.parquet`` share their timestamps (one array), so an arm's qpos, qvel and qtorque align once."""

    __slots__ = ("grid", "how", "_done")

    def __init__(self, grid: np.ndarray, how: str):
        self.grid, self.how, self._done = grid, how, {}

    def __call__(self, stamps: np.ndarray) -> np.ndarray:
        hit = self._done.get(id(stamps))
        if hit is not None and hit[0] is stamps:
            return hit[1]
        idx = sampler.align(stamps, self.grid, self.how)
        self._done[id(stamps)] = (stamps, idx)  # the array kept alive: its id cannot be reused meanwhile
        return idx


@lru_cache(maxsize=64)
def _builder_factory(n_obs: int, n_action: int, n_cameras: int, n_sim: int, renamed: bool):
    """``factory(Sample, CameraDict, episode, *keys) -> build(t, *row of every column)``: one Sample from
    one grid point's rows, its mappings built as literals (keys bound once per episode; the cameras a
    CameraDict where legacy names must resolve): a quarter less per sample than dicts of zipped keys and
    rows. Compiled once per shape (counts of obs, action, camera and sim columns); the source holds only
    names made here, never a key."""
    cols = [[f"{kind}{i}" for i in range(n)] for kind, n in (("o", n_obs), ("a", n_action), ("c", n_cameras),
                                                            ("s", n_sim))]

    def literal(names: list[str]) -> str:
        return "{" + ", ".join(f"k{v}: {v}" for v in names) + "}"

    cameras = f"CameraDict({literal(cols[2])})" if renamed else literal(cols[2])
    every = [v for names in cols for v in names]
    source = (f"def factory(Sample, CameraDict, episode, {', '.join('k' + v for v in every)}):\n"
              f"    def build(t, {', '.join(every)}):\n"
              f"        return Sample(episode, t, {literal(cols[0])}, {literal(cols[1])}, {cameras}, {literal(cols[3])})\n"
              f"    return build\n")
    namespace: dict = {}
    exec(compile(source, "<sample builder>", "exec"), namespace)  # noqa: S102 - source made above from counts
    return namespace["factory"]


def _sample_episode(ds: Dataset, episode: dict, hz: float, how: str, pool) -> Iterator[Sample]:
    plan = _episode_plan(ds, episode, hz, how)
    n = len(plan.grid)
    if pool is None:
        cam_cols = [(name, map(Frame, repeat(cam, n), idx.tolist(), cam.timestamps.take(idx).tolist()))
                    for name, cam, idx in plan.cameras]
    else:  # decoded on demand, in grid order, as the samples are built
        cam_cols = [(name, map(_DecodedColumn(cam, idx, *pool).__getitem__, range(n))) for name, cam, idx in plan.cameras]
    # the hot loop, with no Python statement per sample: map() hands each grid point's rows (the views
    # v[k] of the episode's gathered arrays, the frames) to a builder of the Sample
    groups = (plan.obs, plan.action, cam_cols, plan.sim)
    build = _builder_factory(*map(len, groups), plan.renamed)(Sample, CameraDict, plan.episode,
                                                               *(key for g in groups for key, _ in g))
    yield from map(build, plan.grid.tolist(), *(col for g in groups for _, col in g))


class SampleSequence(Sequence):
    """The samples of :meth:`Dataset.sample`, built on access.

    ``len()`` reads only timestamps (once per episode); ``seq[k]`` (negative too) loads the episode
    holding k and keeps that one episode's arrays; ``seq[a:b:c]`` is a list of those samples;
    iterating goes episode by episode (frames decoded ahead with ``decode=True``) and can be repeated.
    ``next(seq)`` continues a private iterator, so code written for the generator this used to be
    still runs. Memory stays that of one episode however long the dataset.
    """

    def __init__(self, ds: Dataset, episodes: list[dict], hz: float, align: str, decode: bool,
                 workers: int | None, state: str | None):
        self._ds, self._episodes, self._hz, self._align = ds, episodes, hz, align
        self._decode, self._workers, self._state = decode, workers, state
        self._lengths: list[int] | None = None
        self._offsets: np.ndarray | None = None
        self._cached: tuple[int, _EpisodePlan, list | None] | None = None
        self._cursor: Iterator[Sample] | None = None

    def _sizes(self, upto: int | None = None) -> np.ndarray:
        """Offsets of the episodes' first samples, read up to the episode holding sample ``upto``
        (None: all): the first sample of a 100,000-episode dataset reads one episode's stamps."""
        if self._lengths is None:
            self._lengths = []
        n = len(self._episodes)
        if len(self._lengths) < n and (upto is None or self._offsets is None or self._offsets[-1] <= upto):
            total = int(self._offsets[-1]) if self._offsets is not None else 0
            while len(self._lengths) < n and (upto is None or total <= upto):
                self._lengths.append(len(self._ds.sample_grid(self._episodes[len(self._lengths)], self._hz)))
                total += self._lengths[-1]
            self._offsets = np.cumsum([0] + self._lengths)
        if self._offsets is None:
            self._offsets = np.zeros(1, dtype=np.int64)
        return self._offsets

    def __len__(self) -> int:
        return int(self._sizes()[-1])

    def _episode(self, e: int) -> tuple[_EpisodePlan, list | None]:
        if self._cached is None or self._cached[0] != e:
            self._cached = None  # release the previous episode's arrays before loading the next
            plan = _episode_plan(self._ds, self._episodes[e], self._hz, self._align)
            converted = None
            if self._state is not None:  # FK/IK run per episode in one batch, as when iterating
                batch = [plan.sample(k, t, plan.frames(k, False)) for k, t in enumerate(plan.grid.tolist())]
                converted = list(kinematics.convert_batch(self._ds, batch, self._state)) if batch else []
            self._cached = (e, plan, converted)
        return self._cached[1], self._cached[2]

    def _item(self, k: int) -> Sample:
        offsets = self._sizes(k)
        e = int(np.searchsorted(offsets, k, side="right") - 1)
        plan, converted = self._episode(e)
        j = k - int(offsets[e])
        if converted is not None:
            return self._item_of(plan, converted, j)
        return plan.sample(j, int(plan.grid[j]), plan.frames(j, self._decode))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._item(k) for k in range(*index.indices(len(self)))]
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"sample indices must be integers or slices, not {type(index).__name__}")
        index = int(index)
        if index >= 0:
            offsets = self._sizes(index)
            if index < offsets[-1]:
                return self._item(index)
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"sample index {index} out of range ({n} samples)")
        return self._item(index % n)

    def __iter__(self) -> Iterator[Sample]:
        if self._state is not None:
            for e in range(len(self._episodes)):
                plan, converted = self._episode(e)
                yield from (self._item_of(plan, converted, j) for j in range(len(converted)))
            return
        if not self._decode:
            for ep in self._episodes:
                yield from _sample_episode(self._ds, ep, self._hz, self._align, None)
            return
        workers = self._workers or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jpeg") as pool:
            for ep in self._episodes:
                yield from _sample_episode(self._ds, ep, self._hz, self._align, (pool, workers))

    def _item_of(self, plan: _EpisodePlan, converted: list, j: int) -> Sample:
        s = converted[j]
        if self._decode:
            return Sample(s.episode, s.timestamp_ns, s.obs, s.action, plan.frames(j, True), s.sim)
        return s

    def __next__(self) -> Sample:
        if self._cursor is None:
            self._cursor = iter(self)
        return next(self._cursor)

    def __repr__(self) -> str:
        n = "?" if self._offsets is None or len(self._lengths or ()) < len(self._episodes) else str(len(self))
        return f"SampleSequence({n} samples of {len(self._episodes)} episode(s) at {self._hz:g} Hz, align={self._align!r})"


def episode_grid(where: Path, groups: Mapping[str, Mapping[str, Stream]], cameras: Mapping[str, Camera],
                 hz: float) -> np.ndarray:
    """The sampling grid (int64 ns) of one episode's loaded streams (``{kind: {key: Stream}}``) and cameras:
    ``time_grid`` over their common range, after checking that each is non-empty and strictly increasing
    (a :class:`StreamError` names the file). What :meth:`Dataset.sample` and the PyTorch loader sample on."""
    stamp_arrays = []
    for streams in groups.values():
        for key, s in streams.items():
            if any(s.timestamps is a for a in stamp_arrays):
                continue  # the attributes of one state.parquet share one array: checked under its first key
            check_stamps(s.timestamps, s.path, key)
            stamp_arrays.append(s.timestamps)
    for name, cam in cameras.items():
        check_stamps(cam.timestamps, cam.path, f"camera {name}")
        stamp_arrays.append(cam.timestamps)
    if not stamp_arrays:
        raise StreamError(where, "episode has no streams and no cameras")
    return sampler.time_grid(*sampler.common_range(stamp_arrays), hz)


def check_stamps(stamps: np.ndarray, path: Path, what: str) -> None:
    """StreamError naming ``path`` unless ``stamps`` (of ``what``) are non-empty and strictly increasing."""
    if len(stamps) == 0:
        raise StreamError(path, f"{what} is empty: nothing to sample")
    if not sampler.is_strictly_increasing(stamps):
        raise StreamError(path, f"{what} timestamps are not strictly increasing")


class _DecodedColumn:
    """Indexable in increasing order only; keeps at most ``4 * workers`` decodes in flight."""

    def __init__(self, cam: Camera, idx: np.ndarray, pool: ThreadPoolExecutor, workers: int):
        self._cam = cam
        change = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]]) if len(idx) else np.empty(0, np.int64)
        self._unique = idx[change].tolist()  # consecutive repeats decoded once
        self._slot = np.cumsum(np.r_[True, idx[1:] != idx[:-1]]) - 1 if len(idx) else idx
        self._slot = self._slot.tolist()
        self._pool = pool
        self._pending: deque = deque()
        self._next_submit = 0
        self._current = (-1, None)
        self._window = 4 * workers

    def _decode(self, i: int) -> np.ndarray:
        arr = self._cam.get_frame(i).load()
        arr.flags.writeable = False
        return arr

    def _fill(self) -> None:
        while self._next_submit < len(self._unique) and len(self._pending) < self._window:
            i = self._next_submit
            self._pending.append((i, self._pool.submit(self._decode, self._unique[i])))
            self._next_submit += 1

    def __getitem__(self, k: int) -> np.ndarray:
        slot = self._slot[k]
        if slot == self._current[0]:
            return self._current[1]
        self._fill()
        while True:
            s, fut = self._pending.popleft()
            self._fill()
            if s == slot:
                self._current = (s, fut.result())
                return self._current[1]
