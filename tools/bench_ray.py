"""Benchmark generation on Ray against local worker processes, and the driver's memory, in one run.

    nice python tools/bench_ray.py [--episodes 6] [--memory 10 40] [--size 64x48] [--camera-hz 2.5]

* throughput: N episodes with ``dataset-generate --workers <cpus>`` (local processes) and N episodes with
  ``--ray ADDRESS`` on a local Ray cluster of the same CPUs started once beforehand (a cluster outlives a
  run; its start-up is reported apart), each as a fresh driver process: episodes/s and the ratio;
* driver memory: peak RSS (``ru_maxrss``) of the ``dataset-generate --ray`` driver process for each count
  of ``--memory`` (default 10 and 40 episodes): with a bounded number of episodes in flight it must not
  grow with the count.
Both drivers write the same dataset (checked: the Ray output equals the local one, file for file).
A small camera configuration (one head camera) keeps it affordable; the figures are for comparison.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a one-machine cluster its drivers join by address
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: Runs dataset-generate in this interpreter and prints its peak RSS (KiB) last, on stderr.
DRIVER = ("import resource, sys; from openarm_sim_dataset.cli.generate import main; code = main(sys.argv[1:]); "
          "print('peak_rss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(code)")


def driver(args: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one dataset-generate process."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"bench_ray: dataset-generate failed: {r.stderr[-2000:]}")
    rss = [int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("peak_rss_kib")]
    return wall, rss[-1]


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=6, help="episodes of the throughput comparison")
    ap.add_argument("--memory", type=int, nargs="+", default=[10, 40], help="episode counts of the RSS measurement")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--size", default="64x48")
    ap.add_argument("--camera-hz", default="2.5")
    args = ap.parse_args()
    import ray

    common = ["--seed", "10", "--size", args.size, "--camera-hz", args.camera_hz, "--cameras", "head", "--quiet"]
    t = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, object_store_memory=300 * 2**20)
    startup = time.perf_counter() - t
    address = ray.get_runtime_context().gcs_address
    print(f"Ray {ray.__version__}: local cluster of {args.cpus} CPUs started in {startup:.1f} s ({address})")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
            tmp = Path(tmp)
            n = args.episodes
            # the Ray cluster's idle workers are warm after the first run; warm both sides alike (one episode)
            driver(["--out", str(tmp / "warm-ray"), "--episodes", "1", *common, "--ray", address])
            driver(["--out", str(tmp / "warm-local"), "--episodes", "1", *common])
            local_s, local_rss = driver(["--out", str(tmp / "local"), "--episodes", str(n), *common,
                                         "--workers", str(args.cpus)])
            ray_s, ray_rss = driver(["--out", str(tmp / "ray"), "--episodes", str(n), *common, "--ray", address])
            same = tree(tmp / "local") == tree(tmp / "ray")
            print(f"throughput, {n} episodes ({args.size}, head camera at {args.camera_hz} Hz), driver process included:")
            print(f"  --workers {args.cpus}: {local_s:6.1f} s  {n / local_s:.3f} episodes/s  (driver peak RSS {local_rss / 1024:.0f} MiB)")
            print(f"  --ray      : {ray_s:6.1f} s  {n / ray_s:.3f} episodes/s  (driver peak RSS {ray_rss / 1024:.0f} MiB)")
            print(f"  ratio Ray / local processes: {local_s / ray_s:.2f}x; outputs identical file for file: {same}")
            print("driver peak RSS with --ray by episode count (bounded in flight: 2 x CPUs):")
            for count in args.memory:
                wall, rss = driver(["--out", str(tmp / f"mem{count}"), "--episodes", str(count), *common, "--ray", address])
                print(f"  {count:4d} episodes: {rss / 1024:7.1f} MiB peak RSS  ({wall:.1f} s, {count / wall:.3f} episodes/s)")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
