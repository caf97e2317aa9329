"""Per-episode randomisation.

All randomness of an episode comes from ``numpy.random.default_rng([seed, index])``
and is drawn in a fixed order, independent of ``sigma`` and ``retry``:

1. red (target) cube: x, y uniform in the cube area, yaw uniform in [-45, 45) deg;
2. perception draws: (2, 3) standard normals (first estimate, retry estimate);
3. IK restart seed;
4. green and blue cubes: rejection-sampled in the cube area, at least
   :data:`MIN_DIST_TARGET` from the red cube and :data:`MIN_DIST_OTHER` from each other.

So runs at different ``sigma`` (or with/without retry) of the same ``(seed, index)``
share the initial state and the perception draws; ``sigma`` only scales them.
"""

from __future__ import annotations

import math

import numpy as np

from ..scene import SceneConfig
from .planner import EpisodeParams

__all__ = ["episode_params", "MIN_DIST_TARGET", "MIN_DIST_OTHER"]

#: Minimum centre distance (m) of a distractor cube from the red cube (fingers open to ~9 cm).
MIN_DIST_TARGET = 0.11
#: Minimum centre distance (m) between the two distractor cubes.
MIN_DIST_OTHER = 0.065


def episode_params(seed: int, index: int, sigma: float = 0.0, retry: bool = False,
                   cfg: SceneConfig = SceneConfig()) -> EpisodeParams:
    """Episode parameters for ``(seed, index)``.

    Args:
        seed: dataset seed.
        index: episode index.
        sigma: perception position error std (m); yaw error std is ``sigma * YAW_NOISE_PER_M`` rad.
        retry: act on the grasp/lift checks and retry a failed grasp once.
        cfg: scene configuration (cube area).
    """
    rng = np.random.default_rng([seed, index])
    cx, cy = cfg.cube_area_center
    h = cfg.cube_area_half
    red = (float(rng.uniform(cx - h, cx + h)), float(rng.uniform(cy - h, cy + h)),
           float(rng.uniform(-math.pi / 4, math.pi / 4)))
    draws = rng.standard_normal((2, 3))
    ik_seed = int(rng.integers(0, 2 ** 31 - 1))
    placed = [red]
    for _k in range(2):
        for _ in range(10000):
            x, y = float(rng.uniform(cx - h, cx + h)), float(rng.uniform(cy - h, cy + h))
            yaw = float(rng.uniform(-math.pi / 4, math.pi / 4))
            dmin = [MIN_DIST_TARGET] + [MIN_DIST_OTHER] * (len(placed) - 1)
            if all(math.hypot(x - p[0], y - p[1]) >= d for p, d in zip(placed, dmin)):
                placed.append((x, y, yaw))
                break
        else:  # pragma: no cover - the area is large enough
            raise RuntimeError("could not place distractor cubes")
    return EpisodeParams(
        cube_poses=tuple(placed),
        perception_draws=tuple(tuple(float(v) for v in row) for row in draws),
        sigma=float(sigma),
        retry=bool(retry),
        ik_seed=ik_seed,
        meta={"seed": int(seed), "index": int(index), "sigma": float(sigma), "retry": bool(retry),
              "rng": "numpy.random.default_rng([seed, index])"},
    )
