"""How long does a sampled validation take, and does its bound see a planted fault?

``dataset-validate --sample K --workers W`` on an N-episode simulated dataset built from a small generated
one (``--source-episodes``, default 10 distinct episodes of ``dataset-generate --seed 0``, default cameras):
episode i is a hard-linked copy of source episode i mod S under id i (real files, real sizes; the replay and
the re-render of a sampled episode do their real work). ``duplicate_episodes`` is left out: the copies are
duplicates by construction. With ``--plant-fraction F``, a fraction F of the N episodes (drawn with seed 1)
get a fault only the replay can see: one frame's stored warm-start acceleration moved by 1e-3 in the
episode's sidecar, the manifest re-sealed (own files, no longer links).

Reported per run: wall time, the time of the cheap pass per episode and of the sampled pass per sampled
episode (from the process's own timing of each pass), the driver process's peak RSS (its workers not
counted: what grows with the number of episodes is the driver's), the bound lines the CLI prints, the load average,
and the projection to 10,000 episodes (cheap per episode x 10,000 / W + the sampled pass).

Usage: PYTHONPATH=. python tools/bench_sampled_validation.py [--sizes 1000] [--sample 300] [--workers 2]
          [--plant-fraction 0.02] [--ray | --ray-only] [--work DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))
BIN = Path(sys.executable).parent

from bench_scale import LocalCluster, build  # noqa: E402

#: Times the two passes of a sampled run inside the process (the CLI's code path, its output printed).
DRIVER = """import resource, sys, time
from openarm_sim_dataset.validate import sampling, runner
passes = []
real = runner.validate
def timed(*a, **k):
    t = time.perf_counter(); r = real(*a, **k); passes.append(time.perf_counter() - t); return r
sampling.validate = timed
from openarm_sim_dataset.cli import validate
t = time.perf_counter()
code = validate.main(sys.argv[1:])
try:  # VmHWM: this process's own peak; ru_maxrss survives exec and can be the bench's RSS at the fork
    kib = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("PASSES", time.perf_counter() - t, *passes, kib, code)
"""


def plant_replay_faults(root: Path, fraction: float, seed: int = 1) -> list[str]:
    """A replay-only fault in ``fraction`` of the episodes of ``root`` (ids drawn from ``seed``): their ids."""
    import numpy as np

    from openarm_sim_dataset import Dataset, manifest, sidecar
    from openarm_sim_dataset.sim.models import load_model
    from openarm_sim_dataset.sim.replay import state_components
    from openarm_sim_dataset.sim.scene import SceneConfig

    ds = Dataset(root)
    ids = ds.episode_ids
    k = max(1, round(fraction * len(ids)))
    chosen = sorted(np.random.default_rng(seed).choice(len(ids), size=k, replace=False).tolist())
    i, _ = {n: (i, j) for n, i, j in state_components(load_model(SceneConfig()))}["qacc_warmstart"]
    for c in chosen:
        ep_dir = ds.episode_path(ids[c])
        path = ep_dir / "sim" / "sidecar.npz"
        side = sidecar.load_npz(path)
        side["state"][3, i] += 1e-3
        path.unlink()  # a file of its own, not the shared link
        sidecar.save_npz(path, side)
        manifest.write(ep_dir)
    return [ids[c] for c in chosen]


def run(path: Path, sample: int, workers: int, ray: str | None, env: dict) -> dict:
    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.validate.registry import check_table

    names = [n for n, _ in check_table(Dataset(path).meta.simulation) if n != "duplicate_episodes"]
    cmd = [sys.executable, "-c", DRIVER, str(path), "--sample", str(sample), "--seed", "0", "--workers", str(workers),
           "--no-update-metadata", "--checks", *names]
    if ray:
        cmd += ["--ray", ray]
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    lines = r.stdout.strip().splitlines()
    last = lines[-1].split() if lines else []
    if not last or last[0] != "PASSES" or last[-1] not in ("0", "1"):
        raise SystemExit(f"dataset-validate {path}: exit {r.returncode}: {r.stderr.strip()[-800:]}")
    total, cheap, costly, rss_kib = float(last[1]), float(last[2]), float(last[3]), int(last[-2])
    return {"wall_s": round(wall, 1), "in_process_s": round(total, 1), "cheap_s": round(cheap, 1),
            "sampled_s": round(costly, 1), "driver_max_rss_mib": round(rss_kib / 1024, 1),
            "exit": int(last[-1]), "load_before": round(load0, 2),
            "load_after": round(os.getloadavg()[0], 2),
            "report": [ln for ln in lines if ln.split(":")[0] in ("sampled", "cameras", "simulation")
                       or ln.startswith(str(path))]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000])
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--source-episodes", type=int, default=10)
    ap.add_argument("--plant-fraction", type=float, default=0.0)
    ap.add_argument("--ray", action="store_true", help="also on a local Ray cluster of two nodes of one CPU each")
    ap.add_argument("--ray-only", action="store_true", help="only on the local Ray cluster")
    ap.add_argument("--work", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_sampled_"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    source = work / f"source-{args.source_episodes}"
    if not (source / "metadata.yaml").exists():
        subprocess.run([str(BIN / "dataset-generate"), "--out", str(source), "--episodes", str(args.source_episodes),
                        "--seed", "0", "--quiet"], check=True, stdout=subprocess.DEVNULL, env=env)
    results = []
    for n in args.sizes:
        path = work / f"n{n}-plant{args.plant_fraction}"
        if path.exists():
            shutil.rmtree(path)
        build(source, path, n)
        planted = plant_replay_faults(path, args.plant_fraction) if args.plant_fraction > 0 else []
        modes = ([] if args.ray_only else [("local", None)]) + ([("ray", "cluster")] if args.ray or args.ray_only else [])
        for mode, _ in modes:
            if mode == "ray":
                with LocalCluster() as address:
                    res = run(path, args.sample, args.workers, address, env)
            else:
                res = run(path, args.sample, args.workers, None, env)
            from openarm_sim_dataset import Dataset
            from openarm_sim_dataset.validate.sampling import draw_sample

            drawn = set(draw_sample(Dataset(path), Dataset(path).episode_ids, min(args.sample, n), 0))
            res["planted_sampled"] = [ep for ep in planted if ep in drawn]
            per_cheap = res["cheap_s"] / n
            res.update(n=n, mode=mode, sample=min(args.sample, n), workers=args.workers, planted=len(planted),
                       cheap_s_per_episode=round(per_cheap, 4),
                       sampled_s_per_episode=round(res["sampled_s"] / min(args.sample, n), 3),
                       projected_10000_s=round(per_cheap * 10_000 + res["sampled_s"], 0))
            print(json.dumps(res), flush=True)
            results.append(res)
        shutil.rmtree(path)
    if args.json:
        args.json.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
