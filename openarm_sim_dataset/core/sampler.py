"""Pure resampling: integer-nanosecond time grids and alignment rules (timestamps in, indices out).

No floats touch a timestamp: grid point k is ``start + floor(k * 1e9 / hz)`` computed exactly with
integers, so a frame stamped exactly on a grid point is always the one picked. Also the plain
containers sampling returns (:class:`Sample`) and openarm_dataset's ``Sampler`` front, which imports
nothing of the package (it calls the dataset it is given).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np

ALIGNMENTS = ("previous", "next", "nearest")


def period_ns(hz: float) -> Fraction:
    """The exact grid period in nanoseconds for a rate in Hz (rates are read to 1e-6 Hz)."""
    if isinstance(hz, bool) or not isinstance(hz, (int, float, Fraction)) or not hz > 0 or hz == float("inf"):
        raise ValueError(f"hz must be a positive finite number, not {hz!r}")
    return Fraction(10**9) / Fraction(hz).limit_denominator(1_000_000)


def time_grid(start_ns: int, end_ns: int, hz: float) -> np.ndarray:
    """Grid points ``start + floor(k * period)`` with ``start <= t < end`` (int64 ns).

    The half-open range matches ``numpy.arange(start, end, 1/hz)`` as openarm_dataset builds it.
    """
    p = period_ns(hz)
    if end_ns <= start_ns:
        return np.empty(0, dtype=np.int64)
    span = end_ns - start_ns
    # smallest n with n * p >= span: points k < n lie strictly before end
    n = -((-span * p.denominator) // p.numerator)
    return grid_points(start_ns, n, hz)


def grid_points(start_ns: int, n: int, hz: float) -> np.ndarray:
    """The first ``n`` points ``start + floor(k * 1e9 / hz)`` of a grid, exactly (int64 ns)."""
    p = period_ns(hz)
    q, r = divmod(p.numerator, p.denominator)
    k = np.arange(n, dtype=np.int64)
    return start_ns + k * q + (k * r) // p.denominator


def snap_seconds(seconds: np.ndarray, hz: float, tolerance_s: float) -> np.ndarray:
    """Times in float seconds from an episode's start to int64 ns: a time within ``tolerance_s`` of grid
    point k (``k / hz``) becomes that point exactly, ``floor(k * 1e9 / hz)`` (so that sampling at ``hz``
    picks it); any other time its own ``floor(seconds * 1e9)``. LeRobot's stamps (``k / fps`` stored as
    float32) thus land on the grid its exporter drew them from, and an off-grid stamp keeps its time."""
    seconds = np.asarray(seconds, dtype=np.float64)
    k = np.rint(seconds * hz).astype(np.int64)
    p = period_ns(hz)
    q, r = divmod(p.numerator, p.denominator)
    on_grid = (np.abs(seconds - k / hz) <= tolerance_s) & (k >= 0)
    return np.where(on_grid, k * q + (k * r) // p.denominator, np.floor(seconds * 1e9).astype(np.int64))


def common_range(stamp_arrays: list[np.ndarray]) -> tuple[int, int]:
    """(latest first stamp, earliest last stamp) over non-empty arrays of sorted timestamps."""
    starts = [int(a[0]) for a in stamp_arrays if len(a)]
    ends = [int(a[-1]) for a in stamp_arrays if len(a)]
    if not starts:
        raise ValueError("no stream has any sample")
    return max(starts), min(ends)


def align(stamps: np.ndarray, grid: np.ndarray, how: str = "previous") -> np.ndarray:
    """Index into ``stamps`` (sorted int64 ns) of the sample used at each grid time.

    ``previous``: the latest sample at or before t (causal: never stamped after t).
    ``next``: the first sample at or after t (openarm_dataset's rule: looks ahead).
    ``nearest``: the closer of the two; a tie goes to the earlier sample.
    Grid times outside the stamps' span are clipped to the first/last sample.
    """
    if how == "previous":
        idx = np.searchsorted(stamps, grid, side="right") - 1
    elif how == "next":
        idx = np.searchsorted(stamps, grid, side="left")
    elif how == "nearest":
        nxt = np.clip(np.searchsorted(stamps, grid, side="left"), 0, len(stamps) - 1)
        prv = np.clip(nxt - 1, 0, len(stamps) - 1)
        idx = np.where(grid - stamps[prv] <= stamps[nxt] - grid, prv, nxt)
        idx = np.where(stamps[nxt] == grid, nxt, idx)
    else:
        raise ValueError(f"align must be one of {ALIGNMENTS}, not {how!r}")
    # np.clip, in place on the fresh index array: np.clip's dispatch costs more than the two ufuncs
    np.maximum(idx, 0, out=idx)
    np.minimum(idx, len(stamps) - 1, out=idx)
    return idx


def is_strictly_increasing(stamps: np.ndarray) -> bool:
    stamps = np.asarray(stamps)
    return bool((stamps[1:] - stamps[:-1] > 0).all())  # np.diff's subtraction, without its overhead


# ------------------------------------------------------------------ what sampling returns
class Sample(Mapping):
    """One grid point of one episode.

    ``timestamp_ns`` is the exact grid time in int64 nanoseconds; ``timestamp`` is the same instant in
    float Unix seconds, as openarm_dataset's ``Sample.timestamp`` (compute with ``timestamp_ns``).
    ``obs``/``action`` map ``arms/right/qpos``-style keys to rows (float32; float64 when smoothed);
    ``cameras`` map names to lazy :class:`~openarm_sim_dataset.camera.Frame` objects, or to decoded
    read-only HxWx3 uint8 arrays when sampling with ``decode=True``; ``sim`` holds simulation streams
    (empty for recorded data). Like openarm_dataset's Sample it is a read-only mapping of the keys
    ``timestamp``, ``obs``, ``action``, ``cameras`` (``sample["obs"]``, ``dict(sample)``).
    """

    __slots__ = ("episode", "timestamp_ns", "obs", "action", "cameras", "sim")
    _KEYS = ("timestamp", "obs", "action", "cameras")

    def __init__(self, episode: str, timestamp_ns: int, obs: dict, action: dict, cameras: dict, sim: dict):
        self.episode = episode
        self.timestamp_ns = timestamp_ns
        self.obs = obs
        self.action = action
        self.cameras = cameras
        self.sim = sim

    @property
    def timestamp(self) -> float:
        """Grid time in float Unix seconds (openarm_dataset's meaning); ``timestamp_ns`` is exact."""
        return self.timestamp_ns / 1e9

    #: Former name of :attr:`timestamp` (float seconds).
    unixtime = timestamp

    def __getitem__(self, key: str):
        if key in self._KEYS or key in ("episode", "timestamp_ns", "sim"):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self):
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)

    def __repr__(self) -> str:
        return f"Sample(timestamp={self.timestamp!r}, episode={self.episode!r}, timestamp_ns={self.timestamp_ns})"


class Sampler:
    """openarm_dataset's ``Sampler``: ``Sampler().sample(dataset, episode, hz)`` resamples one episode.

    A thin front of :meth:`openarm_sim_dataset.Dataset.sample` (same grid; ``align`` defaults to the
    causal ``previous``, where openarm_dataset always looks ahead: pass ``align="next"`` for its values).
    """

    def sample(self, dataset, episode, hz: float, state: str | None = None, align: str = "previous", **options):
        """The samples of ``episode`` of ``dataset`` on an ``hz`` grid (a lazy sequence)."""
        return dataset.sample(hz, episode=episode, state=state, align=align, **options)
