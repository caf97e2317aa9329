"""Success rate of the scripted pick-and-place (no rendering).

Usage (from the repository root):

    PYTHONPATH=. python tools/sim_success_rate.py                 # 100 episodes, seed 10, sigma 0
    PYTHONPATH=. python tools/sim_success_rate.py --sigma 0.01 --retry
    PYTHONPATH=. python tools/sim_success_rate.py --paired         # blind vs check+retry at 10 and 15 mm

Prints the success rate with a 95 % Wilson interval, the outcome counts with
example (seed, index) pairs for failures, and in ``--paired`` mode the exact
two-sided sign test on the discordant pairs (same initial states and perception
draws for both arms of the comparison).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter, defaultdict
from multiprocessing import Pool
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_MODEL = None


def _episode(args: Tuple[int, int, float, bool]) -> Tuple[int, str, bool, int, float]:
    from openarm_sim_dataset.sim.pick_place import run_episode
    from openarm_sim_dataset.sim.randomize import episode_params
    from openarm_sim_dataset.sim.scene import build_model

    global _MODEL
    if _MODEL is None:
        _MODEL = build_model()
    seed, index, sigma, retry = args
    t0 = time.perf_counter()
    r = run_episode(_MODEL, episode_params(seed, index, sigma=sigma, retry=retry))
    return index, r.outcome, r.knocked_over, r.steps, time.perf_counter() - t0


def wilson(k: int, n: int, z: float = 1.959963984540054) -> Tuple[float, float]:
    """95 % Wilson score interval for k successes out of n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


def sign_test(b: int, c: int) -> float:
    """Exact two-sided sign test p-value for b vs c discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def run_many(seed: int, indices: Sequence[int], sigma: float, retry: bool, procs: int) -> List[Tuple]:
    jobs = [(seed, i, sigma, retry) for i in indices]
    if procs > 1:
        with Pool(procs) as pool:
            return sorted(pool.map(_episode, jobs, chunksize=4))
    return [_episode(j) for j in jobs]


def report(seed: int, res: List[Tuple], label: str) -> Dict[int, bool]:
    n = len(res)
    k = sum(1 for r in res if r[1] == "success")
    lo, hi = wilson(k, n)
    cnt = Counter(r[1] for r in res)
    knocked = sum(1 for r in res if r[1] == "success" and r[2])
    ex = defaultdict(list)
    for r in res:
        if r[1] != "success":
            ex[r[1]].append((seed, r[0]))
    print(f"[{label}] success {k}/{n} = {100 * k / n:.1f} %  (95 % Wilson [{100 * lo:.1f}, {100 * hi:.1f}] %); "
          f"knocked_over among successes: {knocked}")
    for name, c in cnt.most_common():
        tail = f"  e.g. {ex[name][:5]}" if name in ex else ""
        print(f"    {name:17s} {c:4d}{tail}")
    steps = sum(r[3] for r in res)
    cpu = sum(r[4] for r in res)
    print(f"    physics+control: {steps / cpu:,.0f} steps/s per process ({cpu / n:.2f} s per episode)")
    return {r[0]: r[1] == "success" for r in res}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--sigma", type=float, default=0.0, help="perception position error std (m)")
    ap.add_argument("--retry", action="store_true", help="act on checks, one grasp retry")
    ap.add_argument("--paired", action="store_true", help="blind vs check+retry at sigma 10 and 15 mm")
    ap.add_argument("--procs", type=int, default=2)
    a = ap.parse_args()
    idx = list(range(a.n))
    t0 = time.perf_counter()
    if not a.paired:
        res = run_many(a.seed, idx, a.sigma, a.retry, a.procs)
        report(a.seed, res, f"seed {a.seed}, n {a.n}, sigma {1e3 * a.sigma:g} mm, {'check+retry' if a.retry else 'blind'}")
    else:
        for sigma in (0.010, 0.015):
            blind = report(a.seed, run_many(a.seed, idx, sigma, False, a.procs), f"sigma {1e3 * sigma:g} mm blind")
            retry = report(a.seed, run_many(a.seed, idx, sigma, True, a.procs), f"sigma {1e3 * sigma:g} mm check+retry")
            b = sum(1 for i in idx if retry[i] and not blind[i])
            c = sum(1 for i in idx if blind[i] and not retry[i])
            print(f"  paired sigma {1e3 * sigma:g} mm: retry-only successes {b}, blind-only successes {c}, "
                  f"exact two-sided sign test p = {sign_test(b, c):.4g}")
    print(f"wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
