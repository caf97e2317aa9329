"""Success rate of the scripted tasks (physics and control only, no rendering).

Usage (from the repository root):

    PYTHONPATH=. python tools/sim_success_rate.py                 # default task, 100 episodes, seed 10, sigma 0
    PYTHONPATH=. python tools/sim_success_rate.py --sigma 0.01 --retry
    PYTHONPATH=. python tools/sim_success_rate.py --paired         # blind vs check+retry at 10 and 15 mm
    PYTHONPATH=. python tools/sim_success_rate.py --tasks all      # per task, 100 episodes each
    PYTHONPATH=. python tools/sim_success_rate.py --tasks all --randomize none --compare all

Prints per configuration the success rate with a 95 % Wilson interval, the outcome counts with
example (seed, index) pairs for failures, lucky successes (object on another face), arm-arm contact
steps, and in paired modes the exact two-sided sign test on the discordant pairs (same initial
states and perception draws on both sides of the comparison).

Episode ``i`` of task ``T`` is the episode a ``dataset-generate --tasks T`` run would make
(:func:`openarm_sim_dataset.sim.generate.params_for` on a GenerateConfig). ``--randomize MODE`` is
that GenerateConfig's scene randomisation (each episode on its own varied model, as generated);
``--compare MODE2`` runs the same episodes under MODE2 too and tests the pairs.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from multiprocessing import Pool

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("MUJOCO_GL", "egl")

_MODELS: dict = {}


def make_config(seed: int, sigma: float, retry: bool, task: str | None, randomize: str):
    """The GenerateConfig of one configuration (``randomize`` set only when the config has the field)."""
    from openarm_sim_dataset.sim.generate import GenerateConfig

    kw = dict(seed=seed, sigma=sigma, retry=retry, tasks=(task,) if task else ())
    kw["randomize"] = randomize
    return GenerateConfig(**kw)


def episode_model(cfg, index: int, params):
    """The model episode ``index`` runs on, as generation builds it: the configured scene with the
    episode's scene variation applied (``cfg.randomize``; none: the nominal model)."""
    from openarm_sim_dataset.sim.models import episode_model as varied_model, load_model
    from openarm_sim_dataset.sim.variation import draw_variation

    variation = draw_variation(cfg.seed, index, cfg.randomize, cfg.scene)
    if variation is not None:
        return varied_model(cfg.scene, variation).model
    key = repr(cfg.scene)
    if key not in _MODELS:
        _MODELS[key] = load_model(cfg.scene)
    return _MODELS[key]


def _episode(args: tuple[int, int, float, bool, str | None, str]) -> tuple:
    from openarm_sim_dataset.sim.generate import params_for
    from openarm_sim_dataset.sim.tasks import run_episode

    seed, index, sigma, retry, task, randomize = args
    cfg = make_config(seed, sigma, retry, task, randomize)
    params, _ = params_for(cfg, index)
    t0 = time.perf_counter()
    r = run_episode(episode_model(cfg, index, params), params, max_time=cfg.max_time)
    return index, r.outcome, r.knocked_over, r.steps, time.perf_counter() - t0, r.arm_contacts, params.side


# one implementation of each statistic, shared with the evaluator and dataset-info
from openarm_sim_dataset.stats import sign_test, wilson_interval as wilson  # noqa: E402


def run_many(seed: int, indices: Sequence[int], sigma: float, retry: bool, procs: int,
             task: str | None = None, randomize: str = "none") -> list[tuple]:
    jobs = [(seed, i, sigma, retry, task, randomize) for i in indices]
    if procs > 1:
        with Pool(procs) as pool:
            return sorted(pool.map(_episode, jobs, chunksize=4))
    return [_episode(j) for j in jobs]


def report(seed: int, res: list[tuple], label: str) -> dict[int, bool]:
    n = len(res)
    k = sum(1 for r in res if r[1] == "success")
    lo, hi = wilson(k, n)
    cnt = Counter(r[1] for r in res)
    knocked = sum(1 for r in res if r[1] == "success" and r[2])
    ex = defaultdict(list)
    for r in res:
        if r[1] != "success":
            ex[r[1]].append((seed, r[0]))
    sides = Counter(r[6] for r in res)
    contacts = [r[5] for r in res]
    print(f"[{label}] success {k}/{n} = {100 * k / n:.1f} %  (95 % Wilson [{100 * lo:.1f}, {100 * hi:.1f}] %); "
          f"knocked_over among successes: {knocked}; arms {dict(sides)}; arm-arm contact steps: total "
          f"{sum(contacts)}, episodes with any {sum(c > 0 for c in contacts)}"
          + (f" (e.g. {[(seed, r[0], r[5]) for r in res if r[5]][:5]})" if any(contacts) else ""))
    for name, c in cnt.most_common():
        tail = f"  e.g. {ex[name][:5]}" if name in ex else ""
        print(f"    {name:17s} {c:4d}{tail}")
    steps = sum(r[3] for r in res)
    cpu = sum(r[4] for r in res)
    print(f"    physics+control: {steps / cpu:,.0f} steps/s per process ({cpu / n:.2f} s per episode)", flush=True)
    return {r[0]: r[1] == "success" for r in res}


def paired(idx: Sequence[int], a: dict[int, bool], b: dict[int, bool], what: str) -> None:
    only_b = sum(1 for i in idx if b[i] and not a[i])
    only_a = sum(1 for i in idx if a[i] and not b[i])
    print(f"  paired {what}: discordant pairs {only_a} + {only_b}, exact two-sided sign test p = "
          f"{sign_test(only_a, only_b):.4g}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--sigma", type=float, default=0.0, help="perception position error std (m)")
    ap.add_argument("--retry", action="store_true", help="act on checks, one grasp retry")
    ap.add_argument("--paired", action="store_true", help="blind vs check+retry at sigma 10 and 15 mm")
    ap.add_argument("--tasks", nargs="+", help="task names (or all): one report per task")
    ap.add_argument("--randomize", default="none", help="scene randomisation mode passed to the generation config")
    ap.add_argument("--compare", help="a second randomisation mode run on the same episodes (paired sign test)")
    ap.add_argument("--procs", type=int, default=2)
    a = ap.parse_args()
    idx = list(range(a.n))
    t0 = time.perf_counter()
    if a.tasks:
        from openarm_sim_dataset.sim.tasks import resolve_tasks

        names, _ = resolve_tasks(a.tasks)
        for task in names:
            first = report(a.seed, run_many(a.seed, idx, a.sigma, a.retry, a.procs, task, a.randomize),
                           f"{task}, seed {a.seed}, n {a.n}, randomize {a.randomize}")
            if a.compare:
                second = report(a.seed, run_many(a.seed, idx, a.sigma, a.retry, a.procs, task, a.compare),
                                f"{task}, seed {a.seed}, n {a.n}, randomize {a.compare}")
                paired(idx, first, second, f"{task}: {a.randomize}-only vs {a.compare}-only successes")
    elif not a.paired:
        res = run_many(a.seed, idx, a.sigma, a.retry, a.procs, None, a.randomize)
        report(a.seed, res, f"seed {a.seed}, n {a.n}, sigma {1e3 * a.sigma:g} mm, {'check+retry' if a.retry else 'blind'}")
    else:
        for sigma in (0.010, 0.015):
            blind = report(a.seed, run_many(a.seed, idx, sigma, False, a.procs), f"sigma {1e3 * sigma:g} mm blind")
            retry = report(a.seed, run_many(a.seed, idx, sigma, True, a.procs), f"sigma {1e3 * sigma:g} mm check+retry")
            paired(idx, blind, retry, f"sigma {1e3 * sigma:g} mm: blind-only vs retry-only successes")
    print(f"wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
