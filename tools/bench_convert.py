"""Benchmark the LeRobot export against openarm_dataset's converter on one synthetic dataset.

    /work/venv/bin/python tools/bench_convert.py [--episodes 4] [--seconds 5] [--size 320x240] [--repeat 2]

In the same run, on the same 0.4.0 dataset (both arms at 250 Hz, two cameras at 30 Hz), measures
exported frames per second (LeRobot rows at 30 fps; every row encodes one frame per camera) of:

* ours: ``to_lerobot(..., "lerobot_v2.1")`` and ``"lerobot_v3.0"`` (PyAV libx264, veryfast, crf 18);
* openarm_dataset 0.4.0: ``Dataset.write(out, format="lerobot_v2.1", fps=30)`` — needs an ``ffmpeg``
  executable on PATH (it runs one ffmpeg process per episode and camera); skipped, and said so, if absent;
* PyAV's raw loop: decode the same JPEGs and encode them with the same encoder settings, nothing
  else (the floor of any H.264 export here).

Each figure is the best of ``--repeat`` runs (outputs removed between runs). Prints a table and the
ratios; ``--json`` prints the figures as JSON too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FPS = 30


def build(base: Path, episodes: int, seconds: float, size: tuple[int, int]) -> Path:
    from openarm_sim_dataset.synthetic import write_synthetic

    return write_synthetic(base / "src", episodes=episodes, seconds=seconds, state_hz=250, camera_hz=30,
                           cameras=("head", "wrist_right"), size=size, jitter_ns=200_000)


def ours(src: Path, out: Path, fmt: str) -> int:
    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.convert.lerobot import LeRobotOptions, to_lerobot

    return to_lerobot(Dataset(src), out, fmt, LeRobotOptions(fps=FPS), quiet=True).frames


def reference(src: Path, out: Path) -> int:
    import openarm_dataset as od

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        od.Dataset(src).write(out, format="lerobot_v2.1", fps=FPS)
    info = json.loads((out / "meta" / "info.json").read_text())
    return int(info["total_frames"])


def pyav_raw(src: Path, out: Path) -> int:
    """Decode every exported frame's JPEG and encode it, per episode and camera: no sampling, no stats."""
    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.convert.lerobot import LeRobotOptions, sample_episode
    from openarm_sim_dataset.convert.video import Mp4Writer

    ds = Dataset(src)
    out.mkdir()
    rows = 0
    for i, entry in enumerate(ds.episodes):
        _grid, _obs, _act, frames = sample_episode(ds, entry, LeRobotOptions(fps=FPS))
        for cam, (camera, idx) in frames.items():
            h, w = camera.get_frame(0).load().shape[:2]
            with Mp4Writer(out / f"{i}_{cam}.mp4", FPS, w, h) as wr:
                for j in idx.tolist():
                    wr.write(camera.get_frame(j).load())
        rows += len(_grid)
    return rows


def timed(fn, src: Path, base: Path, name: str, repeat: int, *args) -> tuple[float, int]:
    best, frames = float("inf"), 0
    for r in range(repeat):
        out = base / f"{name}_{r}"
        t0 = time.perf_counter()
        frames = fn(src, out, *args)
        best = min(best, time.perf_counter() - t0)
        shutil.rmtree(out, ignore_errors=True)
    return best, frames


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--size", default="320x240", help="camera WxH (default 320x240)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    w, h = (int(x) for x in args.size.split("x"))
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_convert_") as tmp:
        base = Path(tmp)
        src = build(base, args.episodes, args.seconds, (w, h))
        cams = 2
        print(f"# dataset: {args.episodes} episodes x {args.seconds:g} s, 2 cameras {w}x{h} @ 30 Hz, export {FPS} fps; "
              f"{os.cpu_count()} CPU(s)")
        runs = [("ours lerobot_v2.1", ours, ("lerobot_v2.1",)), ("ours lerobot_v3.0", ours, ("lerobot_v3.0",)),
                ("PyAV raw decode+encode loop", pyav_raw, ())]
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg:
            runs.append(("openarm_dataset lerobot_v2.1 (ffmpeg CLI)", reference, ()))
        for name, fn, extra in runs:
            sec, rows = timed(fn, src, base, name.split()[0] + str(len(results)), args.repeat, *extra)
            results[name] = {"seconds": sec, "rows": rows, "rows_per_s": rows / sec, "frames_per_s": rows * cams / sec}
        print(f"{'converter':44s} {'rows':>6s} {'seconds':>8s} {'rows/s':>8s} {'frames/s':>9s}")
        for name, r in results.items():
            print(f"{name:44s} {r['rows']:6d} {r['seconds']:8.2f} {r['rows_per_s']:8.0f} {r['frames_per_s']:9.0f}")
        ours21 = results["ours lerobot_v2.1"]["rows_per_s"]
        raw = results["PyAV raw decode+encode loop"]["rows_per_s"]
        print(f"ratio ours v2.1 / PyAV raw loop: {ours21 / raw:.2f}x")
        if ffmpeg:
            ref = results["openarm_dataset lerobot_v2.1 (ffmpeg CLI)"]["rows_per_s"]
            print(f"ratio ours v2.1 / openarm_dataset v2.1: {ours21 / ref:.2f}x "
                  f"(v3.0: {results['ours lerobot_v3.0']['rows_per_s'] / ref:.2f}x)")
        else:
            print("openarm_dataset's converter not run: no ffmpeg executable on PATH (it shells out to ffmpeg); "
                  "compared with PyAV's raw encode loop instead")
        if args.json:
            print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
