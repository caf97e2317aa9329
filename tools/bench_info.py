"""How fast is dataset-info on a 100-episode dataset? Against baselines measured in the same run.

The 100 episodes are hard links of the episodes of a generated dataset (``--source``, default: 2
episodes generated at 160x120, 10 Hz into a temporary folder), listed under ids 0..99 in a copied
metadata.yaml: real files and sizes, no simulation of 100 episodes.

Prints medians of interleaved runs of
  * ``dataset-info DIR --json`` as a fresh process (what a person waits for),
  * the floor: a fresh process that imports the package, loads metadata.yaml and walks the tree,
  * in-process ``dataset_info`` vs reading every stream in full (``Dataset.streams``) and indexing
    every camera (what a tool without the timestamp-only path would do).
Usage: PYTHONPATH=. python tools/bench_info.py [--source DIR] [--episodes 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build(source: Path, out: Path, n: int) -> None:
    from openarm_sim_dataset import Dataset, layout

    ds = Dataset(source)
    meta = ds.meta.copy()
    entries = []
    for i in range(n):
        src_ep = ds.episodes[i % ds.num_episodes]
        src_dir = ds.episode_path(src_ep)
        dst = layout.episode_dir(out, str(i))
        for p in sorted(src_dir.rglob("*")):
            target = dst / p.relative_to(src_dir)
            if p.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(p, target)
        entries.append(dict(src_ep, id=str(i)))
    meta.data["episodes"] = entries
    meta.write(out)


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_info."))
    try:
        source = Path(a.source) if a.source else work / "src"
        if not a.source:
            from openarm_sim_dataset.sim.generate import GenerateConfig, generate

            generate(source, range(2), GenerateConfig(seed=10))
        big = work / "big"
        build(source, big, a.episodes)
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        info_cmd = [sys.executable, "-m", "openarm_sim_dataset.cli.info", str(big), "--json"]
        floor_cmd = [sys.executable, "-c", "import os, sys, openarm_sim_dataset.metadata as m; m.Metadata.load(sys.argv[1]); "
                     "[os.lstat(os.path.join(d, f)) for d, _, fs in os.walk(sys.argv[1]) for f in fs]", str(big)]
        from openarm_sim_dataset import Dataset
        from openarm_sim_dataset.info import dataset_info

        def full_read() -> None:
            ds = Dataset(big)
            for ep in ds.episodes:
                for kind in ("obs", "action"):
                    ds.streams(ep, kind)
                ds.load_cameras(ep)

        t_info, t_floor, t_lib, t_full = [], [], [], []
        for _ in range(a.repeat):
            t_info.append(timed(info_cmd, env))
            t_floor.append(timed(floor_cmd, env))
            t0 = time.perf_counter()
            dataset_info(big)
            t_lib.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            full_read()
            t_full.append(time.perf_counter() - t0)
        med = statistics.median
        info = dataset_info(big)
        print(f"{a.episodes} episodes, {info['cameras'][0]['frames'] * len(info['cameras'])} camera frames, "
              f"{sum(s['rows'] for s in info['streams'])} stream rows, {info['disk_bytes']['total'] / 1e6:.0f} MB")
        print(f"dataset-info --json (fresh process): {med(t_info):.2f} s; floor (import + metadata + walk): "
              f"{med(t_floor):.2f} s; ratio {med(t_info) / med(t_floor):.2f}x")
        print(f"in-process dataset_info: {med(t_lib):.3f} s; full stream reads + camera indexing: {med(t_full):.3f} s; "
              f"ratio {med(t_full) / med(t_lib):.2f}x")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
