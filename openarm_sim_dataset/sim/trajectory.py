"""Minimum-jerk interpolation in joint space.

A :class:`MinJerkPath` maps time (s, relative to its start) to joint positions
(rad).  It goes through knots ``q[0] .. q[K-1]`` (e.g. IK solutions along a
straight Cartesian segment) with path parameter ``s(t) = 10 u^3 - 15 u^4 + 6 u^5``,
``u = t / duration``: zero velocity and acceleration at both ends.  With two knots
it is the classic minimum-jerk point-to-point motion.  Everything is precomputed
with numpy; :meth:`MinJerkPath.at` is a few flops per call.
"""

from __future__ import annotations

import numpy as np

__all__ = ["min_jerk_s", "MinJerkPath"]


def min_jerk_s(u):
    """Minimum-jerk profile ``s(u)`` for ``u`` in [0, 1] (clipped); scalar or array."""
    u = np.clip(u, 0.0, 1.0)
    return u * u * u * (10.0 + u * (-15.0 + 6.0 * u))


class MinJerkPath:
    """Joint path through ``knots`` (K, n) timed by a minimum-jerk profile over ``duration`` s.

    Knots are equally spaced in the path parameter ``s`` in [0, 1]; between knots
    the path is linear in ``s``.
    """

    def __init__(self, knots: np.ndarray, duration: float) -> None:
        k = np.atleast_2d(np.asarray(knots, dtype=float))
        if k.shape[0] < 2:
            k = np.vstack([k, k])
        self.knots = k
        self.duration = float(max(duration, 1e-9))
        self._nseg = k.shape[0] - 1
        self._delta = np.diff(k, axis=0)

    @property
    def start(self) -> np.ndarray:
        return self.knots[0]

    @property
    def end(self) -> np.ndarray:
        return self.knots[-1]

    def at(self, t: float) -> np.ndarray:
        """Joint positions at time ``t`` (s) since the start; held at the ends outside [0, duration]."""
        u = t / self.duration
        if u <= 0.0:
            return self.knots[0].copy()
        if u >= 1.0:
            return self.knots[-1].copy()
        s = u * u * u * (10.0 + u * (-15.0 + 6.0 * u)) * self._nseg
        i = min(int(s), self._nseg - 1)
        return self.knots[i] + (s - i) * self._delta[i]

    def sample(self, times: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`at` for an array of times; returns (len(times), n)."""
        s = min_jerk_s(np.asarray(times, float) / self.duration) * self._nseg
        i = np.minimum(s.astype(int), self._nseg - 1)
        return self.knots[i] + (s - i)[:, None] * self._delta[i]
