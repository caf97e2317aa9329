"""Start-up and fixed costs of the command-line tools, against baselines measured in the same run.

  python tools/bench_startup.py [--datasets DIR ...] [--baseline-tree OLD_CHECKOUT] [--repeat 5]

1. ``--help`` of every tool: median wall time of fresh processes against the bare interpreter
   (``python -c pass``), and which heavy modules each imports (mujoco, pandas, pyarrow, matplotlib, ...).
2. ``dataset-sample`` on a small fixture (no decode), the same way.
3. ``dataset-validate --no-update-metadata`` on each ``--datasets`` folder (e.g. a 1-episode and a
   10-episode simulated dataset): median wall time, and in one in-process run where that time goes:
   imports, compiling the model (once per process), the checks themselves (physics replay, geometry, ...).
``import openarm_sim_dataset`` is timed first. With ``--baseline-tree``, (1)-(3) also run with that checkout first on PYTHONPATH (e.g. a ``git worktree``
of an older commit) and the ratios old/new are printed. Medians: these machines are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("sample", "validate", "generate", "merge", "convert", "repair", "replay", "info", "show")
#: every console script's module (--help of each is timed)
ALL_TOOLS = TOOLS + ("edit", "evaluate", "render", "train", "ensemble", "view")
HEAVY = ("mujoco", "pandas", "pyarrow", "numpy", "PIL", "yaml", "matplotlib", "rerun", "av", "scipy", "tqdm")


#: Commands run from a neutral folder: with ``python -c``/``-m`` the current folder comes first on sys.path.
CWD = "/"


def env_for(tree: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(tree), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))


def wall(cmd: list[str], env: dict, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=CWD, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def heavy_imports(module: str, argv: list[str], env: dict) -> list[str]:
    code = (f"import sys\nfrom {module.rsplit('.', 1)[0]} import {module.rsplit('.', 1)[1]} as m\n"
            f"try:\n    m.main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print(' '.join(k for k in {HEAVY!r} if k in sys.modules) or 'none', file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=CWD, capture_output=True, text=True)
    return (r.stderr.strip().splitlines() or ["?"])[-1].split()


def exists(tree: Path, tool: str) -> bool:
    return (tree / "openarm_sim_dataset" / "cli" / f"{tool}.py").exists()


def check_names(tree: Path) -> list[str]:
    """The validation checks a checkout has (its tables, in order)."""
    code = ("import openarm_sim_dataset.validate as v\n"
            "t = list(v.FORM_CHECKS) + list(getattr(v, 'CAMERA_CHECKS', [])) + list(v.SIM_CHECKS)\n"
            "print(' '.join(n for n, _ in t))")
    r = subprocess.run([sys.executable, "-c", code], env=env_for(tree), cwd=CWD, capture_output=True, text=True)
    return r.stdout.split()


def breakdown(tree: Path, dataset: Path, checks: list[str] | None) -> dict[str, float]:
    """One in-process validate run, split into imports, model compilation and the checks."""
    code = f"""
import time, json, sys
t0 = time.perf_counter()
from openarm_sim_dataset import Dataset
from openarm_sim_dataset.validate import validate
from openarm_sim_dataset.validate.simulation import scene_config
from openarm_sim_dataset.validate.core import Context, Thresholds
import openarm_sim_dataset.sim
t1 = time.perf_counter()
ds = Dataset({str(dataset)!r})
cfg = scene_config(Context(ds, ds.episode_ids, Thresholds()))
try:
    from openarm_sim_dataset.sim.models import cached_model
    cached_model(cfg)
except ImportError:  # before the model cache: validate compiles the model inside its checks
    pass
t2 = time.perf_counter()
rows = validate(ds, checks={checks!r})
t3 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "model": t2 - t1, "checks": t3 - t2}}))
"""
    r = subprocess.run([sys.executable, "-c", code], env=env_for(tree), cwd=CWD, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1]}
    import json

    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="*", default=[], type=Path, help="datasets for dataset-validate")
    ap.add_argument("--baseline-tree", type=Path, help="an older checkout to compare with")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    trees = {"new": REPO} | ({"old": args.baseline_tree.resolve()} if args.baseline_tree else {})
    py = [sys.executable]
    floor = wall([*py, "-c", "pass"], env_for(REPO), args.repeat)
    print(f"interpreter floor (python -c pass): {floor * 1000:.0f} ms (median of {args.repeat})")
    ratios = []
    print("\nimport openarm_sim_dataset: median wall ms (x the interpreter floor)")
    cells, times = [], {}
    for name, tree in trees.items():
        times[name] = wall([*py, "-c", "import openarm_sim_dataset"], env_for(tree), args.repeat)
        cells.append(f"{name}: {times[name] * 1000:5.0f} ms ({times[name] / floor:4.1f}x)")
    if "old" in times:
        ratios.append(times["new"] / times["old"])
        cells.append(f"new/old {ratios[-1]:.2f}")
    print("  " + "   ".join(cells))
    print("\n--help of each tool: median wall ms, x the interpreter floor, heavy modules imported")
    for tool in ALL_TOOLS:
        cells, times = [], {}
        for name, tree in trees.items():
            if not exists(tree, tool):
                cells.append(f"{name}: -")
                continue
            t = times[name] = wall([*py, "-m", f"openarm_sim_dataset.cli.{tool}", "--help"], env_for(tree), args.repeat)
            mods = heavy_imports(f"openarm_sim_dataset.cli.{tool}", ["--help"], env_for(tree))
            cells.append(f"{name}: {t * 1000:5.0f} ms ({t / floor:4.1f}x) [{' '.join(mods) or 'none'}]")
        if len(times) == 2:
            ratios.append(times["new"] / times["old"])
            cells.append(f"new/old {ratios[-1]:.2f}")
        print(f"  dataset-{tool:<9} " + "   ".join(cells))
    if ratios:
        print(f"  new/old over the import and the {len(ratios) - 1} --help runs: median {statistics.median(ratios):.2f}, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}")
    fixture = REPO / "tests" / "fixture" / "dataset_0.4.0"
    print(f"\ndataset-sample {fixture.relative_to(REPO)} --hz 5 (2 episodes)")
    for name, tree in trees.items():
        t = wall([*py, "-m", "openarm_sim_dataset.cli.sample", str(fixture), "--hz", "5"], env_for(tree), args.repeat)
        mods = heavy_imports("openarm_sim_dataset.cli.sample", [str(fixture), "--hz", "5"], env_for(tree))
        print(f"  {name}: {t * 1000:.0f} ms ({t / floor:.1f}x the floor) [{' '.join(mods)}]")
    names = {name: check_names(tree) for name, tree in trees.items()}
    common = [n for n in names["new"] if all(n in v for v in names.values())]
    for ds in args.datasets:
        runs = [("new", REPO, None, "every check")]
        if "old" in trees:
            runs = [("new", REPO, common, f"the {len(common)} checks both have"),
                    ("old", trees["old"], common, f"the {len(common)} checks both have")] + runs
        print(f"\ndataset-validate {ds} --no-update-metadata")
        res = {}
        for name, tree, checks, what in runs:
            cmd = [*py, "-m", "openarm_sim_dataset.cli.validate", str(ds), "--no-update-metadata"]
            cmd += ["--checks", *checks] if checks else []
            t = wall(cmd, env_for(tree), max(1, args.repeat // 2))
            res.setdefault(name, t)
            b = breakdown(tree, ds, checks)
            parts = ", ".join(f"{k} {v:.2f} s" for k, v in b.items() if isinstance(v, float))
            total = sum(v for v in b.values() if isinstance(v, float)) or 1.0
            share = b.get("checks", 0.0) / total
            print(f"  {name} ({what}): {t:.2f} s wall; in-process: {parts or b} (checks {share:.0%} of it)")
        if "old" in res:
            print(f"  old/new on the same checks: {res['old'] / res['new']:.2f}x")


if __name__ == "__main__":
    main()
