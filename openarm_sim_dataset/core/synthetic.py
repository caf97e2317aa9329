"""Synthetic 0.4.0 datasets (smooth joint trajectories, textured JPEGs) for benchmarks, tests and demos.

Not simulation: values are closed-form sinusoids. Everything derives from ``seed``, so two calls
with the same arguments write identical files.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from . import layout, sampler
from .metadata import Metadata
from .writer import ComponentStreams, EpisodeData, new_dataset, write_episode_tree

#: Joint-range centres of the OpenArm v2 MJCF (rad; last value: gripper), so that synthetic
#: trajectories (+-0.3 rad around them) respect the joint limits.
MID_QPOS = {
    "right": np.array([1.047, 1.571, 0.0, 1.222, 0.0, 0.0, 0.0, -0.3]),
    "left": np.array([-1.047, -1.571, 0.0, 1.222, 0.0, 0.0, 0.0, 0.3]),
}

#: First timestamp of episode 0: a Unix time in ns (all stamps share one digit count).
BASE_NS = 1_772_000_000_000_000_000


def synthetic_metadata(num_episodes: int, cameras: tuple[str, ...], state_hz: float, camera_hz: float) -> Metadata:
    data = {
        "version": layout.FORMAT_VERSION,
        "location": "synthetic",
        "operator": "openarm_sim_dataset.synthetic",
        "operation_type": "synthetic",
        "tasks": [{"prompt": "Wave both arms.", "description": "Closed-form sinusoidal joint trajectories."}],
        "episodes": [{"id": str(i), "success": True, "task_index": 0} for i in range(num_episodes)],
        "equipment": {
            "id": "synthetic",
            "version": "1.0",
            "embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM, "version": "2.0"}},
            "perceptions": {"cameras": {c: {} for c in cameras}},
        },
        "frequencies": {
            "obs": {"arms": {s: float(state_hz) for s in layout.ARM_SIDES}},
            "action": {"arms": {s: float(state_hz) for s in layout.ARM_SIDES}},
            "cameras": {c: float(camera_hz) for c in cameras},
        },
    }
    return Metadata(data)


def _stamps(start: int, seconds: float, hz: float, jitter_ns: int, rng: np.random.Generator) -> np.ndarray:
    n = int(round(seconds * hz))
    t = sampler.grid_points(start, n, hz)
    if jitter_ns:
        t = t + rng.integers(-jitter_ns, jitter_ns + 1, size=n)
        t[0] = start
    return t


def _jpeg(rng: np.random.Generator, w: int, h: int, phase: float, quality: int) -> bytes:
    y, x = np.mgrid[0:h, 0:w]
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[..., 0] = (x * 255 // max(w - 1, 1) + int(phase * 40)) % 256
    img[..., 1] = (y * 255 // max(h - 1, 1)) % 256
    img[..., 2] = (128 + 100 * np.sin(x / 7.0 + phase) * np.cos(y / 5.0)).astype(np.uint8)
    img = np.clip(img.astype(np.int16) + rng.integers(-12, 13, size=img.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def synthetic_episode(index: int, seconds: float, state_hz: float, camera_hz: float, cameras: tuple[str, ...],
                      size: tuple[int, int], seed: int, jitter_ns: int = 0, quality: int = 90) -> EpisodeData:
    """One episode: obs/action (qpos, qvel, qtorque) for both arms, JPEG frames per camera."""
    rng = np.random.default_rng([seed, index])
    start = BASE_NS + index * 60 * 10**9
    data = EpisodeData()
    for side_i, side in enumerate(layout.ARM_SIDES):
        for kind, target, lag in (("obs", data.obs, 0.0), ("action", data.action, 0.05)):
            ts = _stamps(start, seconds, state_hz, jitter_ns, rng)
            t = (ts - start) / 1e9
            freq = 0.2 + 0.05 * np.arange(8)
            phase = rng.uniform(0, 2 * np.pi, 8) + side_i
            q = (MID_QPOS[side] + 0.3 * np.sin(2 * np.pi * freq * (t[:, None] + lag) + phase)).astype(np.float32)
            attrs = {"qpos": q}
            if kind == "obs":
                attrs["qvel"] = (0.6 * np.pi * freq * np.cos(2 * np.pi * freq * t[:, None] + phase)).astype(np.float32)
                attrs["qtorque"] = (0.1 * q).astype(np.float32)
            target[("arms", side)] = ComponentStreams(ts, attrs)
    w, h = size
    for c_i, cam in enumerate(cameras):
        ts = _stamps(start, seconds, camera_hz, jitter_ns, rng)
        frames = [(int(t), _jpeg(rng, w, h, k * 0.1 + c_i, quality)) for k, t in enumerate(ts)]
        data.cameras[cam] = frames
    return data


def write_synthetic(out: str | Path, episodes: int = 2, seconds: float = 2.0, state_hz: float = 250.0,
                    camera_hz: float = 30.0, cameras: tuple[str, ...] = ("head", "wrist_right"),
                    size: tuple[int, int] = (320, 240), camera_format: str = "dir", seed: int = 0,
                    jitter_ns: int = 0) -> Path:
    """Write a synthetic 0.4.0 dataset at ``out`` (built in a temporary folder, then renamed)."""
    out = Path(out)
    with new_dataset(out) as tmp:
        meta = synthetic_metadata(episodes, tuple(cameras), state_hz, camera_hz)
        for i in range(episodes):
            ep = synthetic_episode(i, seconds, state_hz, camera_hz, tuple(cameras), size, seed, jitter_ns)
            write_episode_tree(layout.episode_dir(tmp, str(i)), ep, camera_format)
        meta.write(tmp)
    return out
