"""LeRobot's statistics of an export, as its ``compute_episode_stats`` makes them: per feature ``min``,
``max``, ``mean``, ``std`` (shape (D,) or (1,)), ``count`` (shape (1,)), quantiles ``q01`` ... ``q99``;
images per channel in [0, 1] with shape (3, 1, 1), over the exported frames (pixels strided to ~150 px on
the long side). Dataset-wide stats aggregate the per-episode ones (count-weighted mean and pooled
variance)."""

from __future__ import annotations

import numpy as np

from .lerobot_common import Episode, frame_timestamps, image_key

QUANTILES = {"q01": 1, "q10": 10, "q50": 50, "q90": 90, "q99": 99}
IMAGE_STATS_SIDE = 150


def describe(x: np.ndarray) -> dict[str, np.ndarray]:
    """LeRobot's per-feature stats of (N, D) or (N,) values (D-vectors, or shape (1,) for scalars)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    out = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([len(x)])}
    qs = np.percentile(x, list(QUANTILES.values()), axis=0)
    out.update({k: q for k, q in zip(QUANTILES, qs)})
    return out


class ImageStats:
    """Per-channel min/max/mean/std in [0, 1] of RGB frames (pixels strided to ~150 px on the long
    side), exact from per-channel histograms of the uint8 values."""

    def __init__(self):
        self.hist = np.zeros((3, 256), dtype=np.int64)
        self.frames = 0

    def add(self, img: np.ndarray) -> None:
        step = max(1, max(img.shape[:2]) // IMAGE_STATS_SIDE)
        px = img[::step, ::step].reshape(-1, 3)
        for c in range(3):
            self.hist[c] += np.bincount(px[:, c], minlength=256)
        self.frames += 1

    def result(self) -> dict[str, np.ndarray]:
        v = np.arange(256, dtype=np.float64) / 255
        n = self.hist.sum(1)
        mean = (self.hist * v).sum(1) / n
        std = np.sqrt(np.maximum((self.hist * v**2).sum(1) / n - mean**2, 0))
        nz = self.hist > 0
        lo = np.array([v[np.flatnonzero(r)[0]] for r in nz])
        hi = np.array([v[np.flatnonzero(r)[-1]] for r in nz])
        shape = (3, 1, 1)
        return {"min": lo.reshape(shape), "max": hi.reshape(shape), "mean": mean.reshape(shape),
                "std": std.reshape(shape), "count": np.array([self.frames])}


def episode_stats(ep: Episode, fps: int, first_index: int, images: dict[str, dict]) -> dict[str, dict[str, np.ndarray]]:
    n = ep.length
    stats = {
        "observation.state": describe(ep.obs),
        "action": describe(ep.action),
        "timestamp": describe(frame_timestamps(n, fps)),
        "frame_index": describe(np.arange(n)),
        "episode_index": describe(np.full(n, ep.index)),
        "index": describe(np.arange(first_index, first_index + n)),
        "task_index": describe(np.full(n, ep.task_index)),
    }
    for cam, s in images.items():
        stats[image_key(cam)] = s
    return stats


def aggregate(per_episode: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Dataset stats from per-episode stats: count-weighted means, pooled variance, min of mins..."""
    out = {}
    for key in per_episode[0]:
        items = [s[key] for s in per_episode]
        counts = np.array([float(s["count"][0]) for s in items])
        total = counts.sum()
        shape = (-1,) + (1,) * (np.asarray(items[0]["mean"]).ndim)
        w = (counts / total).reshape(shape)
        means = np.stack([s["mean"] for s in items])
        mean = (means * w).sum(0)
        var = ((np.stack([s["std"] for s in items]) ** 2 + (means - mean) ** 2) * w).sum(0)
        agg = {"min": np.min(np.stack([s["min"] for s in items]), 0), "max": np.max(np.stack([s["max"] for s in items]), 0),
               "mean": mean, "std": np.sqrt(var), "count": np.array([int(total)])}
        for q in QUANTILES:
            if all(q in s for s in items):
                agg[q] = (np.stack([s[q] for s in items]) * w).sum(0)
        out[key] = agg
    return out


def jsonable(stats: dict[str, dict[str, np.ndarray]]) -> dict:
    return {k: {n: np.asarray(v).tolist() for n, v in d.items()} for k, d in stats.items()}
