"""Benchmark ``dataset-validate --quick`` on LeRobot v3.0 datasets of growing size: time per episode, flat in N.

    .venv/bin/python tools/bench_lerobot_validate.py [--episodes 100 1000] [--repeats 3] [--data DIR]

Builds (or reuses under ``--data``) synthetic OpenArm datasets of each size (1 s episodes, 30 fps, one
64x48 camera), exports each to LeRobot v3.0 with this package's exporter (many episodes per data and
MP4 file, as LeRobot writes them), then runs ``dataset-validate DIR --quick --no-update-metadata`` as a
process on each, interleaved, and reports the median wall time, the time per episode and its ratio to
the smallest size's (flat: about 1). The process start (imports) is measured apart, on an empty
``--help`` run, and subtracted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

VALIDATE = [sys.executable, "-m", "openarm_sim_dataset.cli.validate"]


def build(base: Path, episodes: int) -> Path:
    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.synthetic import write_synthetic

    out = base / f"lerobot_v30_e{episodes}"
    if (out / "meta/info.json").is_file():
        return out
    t0 = time.perf_counter()
    src = write_synthetic(base / f"src_e{episodes}", episodes=episodes, seconds=1.0, camera_hz=30,
                          cameras=("head",), size=(64, 48))
    Dataset(src).write(out, format="lerobot_v3.0", fps=30)
    print(f"# built {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in (0,):
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", type=Path, default=None, help="keep the datasets here (reused when present)")
    args = ap.parse_args()
    base = args.data or Path(tempfile.mkdtemp(prefix="bench_lerobot_validate_"))
    base.mkdir(parents=True, exist_ok=True)
    roots = {n: build(base, n) for n in sorted(args.episodes)}
    times: dict[int, list[float]] = {n: [] for n in roots}
    start: list[float] = []
    for _ in range(args.repeats):
        start.append(wall([*VALIDATE, "--help"]))
        for n, root in roots.items():
            times[n].append(wall([*VALIDATE, str(root), "--quick", "--no-update-metadata"]))
    load = os.getloadavg()
    floor = statistics.median(start)
    print(f"# dataset-validate --quick on LeRobot v3.0 (median of {args.repeats}; process start {floor:.2f} s "
          f"subtracted; load {load[0]:.2f} {load[1]:.2f})")
    print("| episodes | wall s | ms per episode | ratio to the smallest |")
    print("|---:|---:|---:|---:|")
    first = None
    for n in roots:
        med = statistics.median(times[n])
        per = (med - floor) / n * 1e3
        first = first or per
        print(f"| {n} | {med:.2f} | {per:.1f} | {per / first:.2f}x |")


if __name__ == "__main__":
    main()
