"""Small statistics shared by the generator, dataset-info, the dataset card, the evaluator and sampled
validation (Wilson intervals, the exact sign test, Newcombe's interval for paired rates and the exact
Clopper-Pearson bounds of a binomial proportion)."""

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


def sign_test(b: int, c: int) -> float:
    """Exact two-sided sign test (exact McNemar test) p-value of ``b`` vs ``c`` discordant pairs:
    ``min(1, 2 * P(X <= min(b, c)))`` for X ~ Binomial(b + c, 1/2); 1.0 without discordant pairs."""
    n = int(b) + int(c)
    if n == 0:
        return 1.0
    k = min(int(b), int(c))
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def newcombe_paired(a: int, b: int, c: int, d: int, z: float = Z95) -> tuple[float, float]:
    """Interval (default 95%) of the difference of two paired proportions ``p1 - p2`` with
    ``p1 = (a + b) / n``, ``p2 = (a + c) / n``: Newcombe (1998) method 10, from the two Wilson
    intervals and the phi correlation of the 2x2 table (``a``: both succeed, ``b``: only the first,
    ``c``: only the second, ``d``: neither). Stays inside [-1, 1]; ``n == 0`` gives (-1, 1)."""
    n = a + b + c + d
    if n == 0:
        return (-1.0, 1.0)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, z)
    l2, u2 = wilson_interval(a + c, n, z)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(den) if den > 0 else 0.0
    delta = p1 - p2
    dl = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    du = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return (max(-1.0, delta - math.sqrt(max(dl, 0.0))), min(1.0, delta + math.sqrt(max(du, 0.0))))


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed exactly in log space (no overflow at n = 10**5)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq, ln = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    terms = [ln - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def _solve_decreasing(f, target: float) -> float:
    """The p in [0, 1] where the decreasing function ``f`` equals ``target`` (bisection to 1e-12)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact one-sided bounds of a binomial proportion from ``k`` of ``n``: ``(lower, upper)``, each holding
    at ``confidence`` on its own (Clopper and Pearson, 1934): the true rate is at most ``upper`` (at least
    ``lower``) with probability ``confidence``. ``k == 0`` gives a lower bound of 0 and an upper bound of
    ``1 - (1 - confidence) ** (1 / n)`` (0 of 300 at 95%: 0.99%); ``n == 0`` gives (0, 1).

    Conservative for a sample drawn without replacement from a finite set (the hypergeometric bound is
    tighter), which is how sampled validation uses it."""
    k, n = int(k), int(n)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, not k={k}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    alpha = 1.0 - confidence
    upper = 1.0 if k == n else _solve_decreasing(lambda p: _binomial_cdf(k, n, p), alpha)
    # P(X >= k; p) increases with p: the lower bound is where it reaches alpha
    lower = 0.0 if k == 0 else _solve_decreasing(lambda p: _binomial_cdf(k - 1, n, p), 1.0 - alpha)
    return (lower, upper)
