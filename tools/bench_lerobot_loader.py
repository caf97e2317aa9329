"""Frames per second into a training loop, side by side: our ``TorchDataset`` over (a) the OpenArm JPEG
layout and (b) its LeRobot v3.0 copy, against LeRobot's own ``LeRobotDataset`` over (b).

    .venv/bin/python tools/bench_lerobot_loader.py --lerobot-python /tmp/lr044/bin/python \
        [--episodes 8] [--seconds 10] [--size 320x240] [--workers 0 2] [--repeats 3] [--data DIR]

Builds a synthetic OpenArm dataset once (two cameras at 30 Hz; kept under ``--data``) and its LeRobot
v3.0 export at 30 fps (H.264, this package's exporter, the same frames LeRobot's loader reads). Then,
interleaved so that every figure sees the same machine load (medians of ``--repeats``), one shuffled
epoch through ``torch.utils.data.DataLoader(batch_size=32, num_workers=W)`` of:

- ``ours/jpeg``: ``TorchDataset(openarm, hz=30)``;
- ``ours/lerobot``: ``TorchDataset(lerobot_v3.0, hz=30)`` (frames decoded from the MP4 with PyAV);
- ``lerobot``: ``LeRobotDataset(root=lerobot_v3.0, video_backend="pyav")`` run by ``--lerobot-python`` (a
  venv with LeRobot installed, never this package's dependency), in its own process.

Frames/s = items/s x cameras; worker start-up is included, as a training loop pays it each epoch.
"""

from __future__ import annotations

import argparse
import json
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

CAMERAS = ("head", "wrist_right")
BATCH = 32

#: run by the LeRobot venv's python: one shuffled epoch of LeRobotDataset, items/s on stdout (JSON)
LEROBOT_EPOCH = r"""
import json, sys, time, torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset
root, workers, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ds = LeRobotDataset("local/bench", root=root, video_backend="pyav")
dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                 generator=torch.Generator().manual_seed(0))
t0 = time.perf_counter()
n = 0
for b in dl:
    n += len(b["index"])
print(json.dumps({"items": n, "seconds": time.perf_counter() - t0, "lerobot": __import__("lerobot").__version__,
                  "torch": torch.__version__}))
"""


def build(base: Path, episodes: int, seconds: float, size: tuple[int, int]) -> tuple[Path, Path]:
    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.synthetic import write_synthetic

    src = base / f"openarm_e{episodes}_s{seconds:g}_{size[0]}x{size[1]}"
    out = base / f"lerobot_v30_e{episodes}_s{seconds:g}_{size[0]}x{size[1]}"
    if not (src / "metadata.yaml").is_file():
        write_synthetic(src, episodes=episodes, seconds=seconds, state_hz=250, camera_hz=30, cameras=CAMERAS,
                        size=size, jitter_ns=200_000)
    if not (out / "meta/info.json").is_file():
        Dataset(src).write(out, format="lerobot_v3.0", fps=30)
    return src, out


def ours(path: Path, workers: int) -> tuple[float, int]:
    import torch

    from openarm_sim_dataset.torch import TorchDataset

    ds = TorchDataset(path, hz=30)
    dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                                     generator=torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    n = sum(len(b["index"]) for b in dl)
    return n / (time.perf_counter() - t0), n


def theirs(python: str, path: Path, workers: int) -> tuple[float, int, dict]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH="")
    r = subprocess.run([python, "-c", LEROBOT_EPOCH, str(path), str(workers), str(BATCH)], capture_output=True,
                       text=True, env=env)
    if r.returncode:
        raise SystemExit(f"LeRobot's loader failed: {r.stderr.strip()[-800:]}")
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    return doc["items"] / doc["seconds"], doc["items"], doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lerobot-python", required=True, help="python of a venv with LeRobot installed")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", type=Path, default=None)
    args = ap.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    base = args.data or Path(tempfile.mkdtemp(prefix="bench_lerobot_loader_"))
    base.mkdir(parents=True, exist_ok=True)
    src, lr = build(base, args.episodes, args.seconds, size)
    rates: dict[tuple[str, int], list[float]] = {}
    items: dict[tuple[str, int], int] = {}
    versions = {}
    for _ in range(args.repeats):
        for w in args.workers:
            for name, run in (("ours/jpeg", lambda w=w: ours(src, w)), ("ours/lerobot", lambda w=w: ours(lr, w)),
                              ("lerobot", lambda w=w: theirs(args.lerobot_python, lr, w))):
                out = run()
                rates.setdefault((name, w), []).append(out[0])
                items[(name, w)] = out[1]
                if len(out) > 2:
                    versions = out[2]
    load = os.getloadavg()
    print(f"# {args.episodes} episodes x {args.seconds:g} s, {len(CAMERAS)} cameras {args.size} at 30 fps, batch {BATCH}, "
          f"median of {args.repeats}; LeRobot {versions.get('lerobot')} (torch {versions.get('torch')}); "
          f"load {load[0]:.2f} {load[1]:.2f}")
    print("| loader | dataset | workers | items | frames/s | ratio to LeRobot's |")
    print("|---|---|---:|---:|---:|---:|")
    for w in args.workers:
        base_rate = statistics.median(rates[("lerobot", w)])
        for name, what in (("ours/jpeg", "OpenArm 0.4.0 (JPEG)"), ("ours/lerobot", "LeRobot v3.0 (MP4)"),
                           ("lerobot", "LeRobot v3.0 (MP4)")):
            med = statistics.median(rates[(name, w)])
            loader = "LeRobotDataset" if name == "lerobot" else "TorchDataset"
            print(f"| {loader} | {what} | {w} | {items[(name, w)]} | {med * len(CAMERAS):.0f} | {med / base_rate:.2f}x |")


if __name__ == "__main__":
    main()
