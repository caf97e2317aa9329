"""Small statistics shared by the generator, dataset-info and the dataset card."""

from __future__ import annotations

import math

#: Two-sided 95% normal quantile.
Z95 = 1.959964


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval (default 95%) of a binomial proportion ``k`` successes of ``n``.

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0/n or n/n;
    ``n == 0`` gives the uninformative (0, 1).
    """
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))
