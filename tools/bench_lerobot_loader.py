"""Frames per second into a training loop over LeRobot MP4, side by side with the decoder's own limit and
LeRobot's loader, on the same files, in one run.

    .venv/bin/python tools/bench_lerobot_loader.py --lerobot-python /tmp/lr044/bin/python \
        [--episodes 4] [--seconds 10] [--size 320x240] [--workers 0 2] [--repeats 3] [--lerobot-repeats 1] \
        [--backends pyav torchcodec] [--long 20x30] [--data DIR]

Builds once (kept under ``--data``) a synthetic OpenArm dataset (two cameras at 30 Hz) and two LeRobot
v3.0 copies of it at 30 fps: ``h264``, this package's exporter (H.264, a keyframe every 15 frames), and
``av1``, the H.264 copy's frames written again by LeRobot's own writer (``LeRobotDataset.create`` +
``add_frame``, its default AV1 encoding; ``tools/lerobot_bench_support.py rewrite``, run by
``--lerobot-python``). Then, per copy, interleaved so that every figure sees the same machine load
(medians of ``--repeats``), one epoch through ``DataLoader(batch_size=32, num_workers=W)`` of:

- ``limit``: no loader: PyAV decoding every frame of the copy's MP4 files in order to RGB, one thread,
  one process (``limit x2``: the files split over two processes, what two workers could at most reach);
- ``shuffle buffer``: ``TorchDataset(copy, hz=30).shuffle_buffer()`` (clips in random order, each frame
  decoded about once);
- ``exact``: ``TorchDataset(copy, hz=30)`` with ``shuffle=True`` (random access: each item seeks);
- ``LeRobotDataset``: LeRobot's loader with ``shuffle=True`` and ``video_backend`` pyav / torchcodec, run
  by ``--lerobot-python`` (a venv with LeRobot, never this package's dependency) in its own process;
- ``jpeg``: ``TorchDataset`` over the OpenArm JPEG layout with ``shuffle=True`` (no video at all).

Frames/s = items/s x cameras; worker start-up is included, as a training loop pays it each epoch. Worker
RSS is the largest resident set of one DataLoader worker during the epoch (sampled each batch from
/proc), the main process's for ``num_workers=0``. ``--long EPISODESxSECONDS`` adds a long epoch of the
shuffle buffer with 2 workers on its own H.264 dataset, printing each worker's RSS at every tenth of the
epoch (memory flat in the epoch's length).
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
SUPPORT = ROOT / "tools" / "lerobot_bench_support.py"


def build(base: Path, episodes: int, seconds: float, size: tuple[int, int], lerobot_python: str | None) -> dict[str, Path]:
    """The OpenArm JPEG source and its LeRobot copies (``h264``; ``av1`` when LeRobot is at hand)."""
    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.synthetic import write_synthetic

    tag = f"e{episodes}_s{seconds:g}_{size[0]}x{size[1]}"
    out = {"jpeg": base / f"openarm_{tag}", "h264": base / f"lerobot_v30_h264_{tag}", "av1": base / f"lerobot_v30_av1_{tag}"}
    if not (out["jpeg"] / "metadata.yaml").is_file():
        write_synthetic(out["jpeg"], episodes=episodes, seconds=seconds, state_hz=250, camera_hz=30, cameras=CAMERAS,
                        size=size, jitter_ns=200_000)
    if not (out["h264"] / "meta/info.json").is_file():
        Dataset(out["jpeg"]).write(out["h264"], format="lerobot_v3.0", fps=30)
    if lerobot_python is None:
        del out["av1"]
    elif not (out["av1"] / "meta/info.json").is_file():
        r = subprocess.run([lerobot_python, str(SUPPORT), "rewrite", str(out["h264"]), str(out["av1"])],
                           capture_output=True, text=True, env=_lerobot_env())
        if r.returncode:
            raise SystemExit(f"LeRobot's writer failed: {r.stderr.strip()[-800:]}")
    return out


def _lerobot_env() -> dict:
    return dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH="")


# ------------------------------------------------------------------------------------- the runs
def _children_rss_mib() -> list[float]:
    """Resident set (MiB) of each child of this process (the DataLoader's workers)."""
    out = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out.append(int(line.split()[1]) / 1024)
            except OSError:
                pass
    return out


def _self_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def limit(path: Path, processes: int = 1) -> tuple[float, int, float, dict]:
    """(frames/s, frames, RSS MiB) decoding every frame of the MP4s under ``path`` in order, RGB out, one
    thread per process; with 2 processes the files are split between them."""
    files = sorted(str(p) for p in path.glob("videos/**/*.mp4"))
    code = ("import av, sys, json\nn = 0\nfor f in sys.argv[1:]:\n    with av.open(f) as c:\n"
            "        s = c.streams.video[0]\n        s.codec_context.thread_count = 1\n"
            "        for fr in c.decode(s):\n            fr.to_ndarray(format='rgb24'); n += 1\n"
            # VmHWM, not ru_maxrss: the latter keeps the high-water mark of the process that spawned this one
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
            "print(json.dumps({'frames': n, 'rss': int(hwm) / 1024}))")
    shares = [files[i::processes] for i in range(processes)]
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code, *share], stdout=subprocess.PIPE, text=True)
             for share in shares if share]
    docs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    dt = time.perf_counter() - t0
    n = sum(d["frames"] for d in docs)
    return n / dt, n, max(d["rss"] for d in docs), {}


def ours(path: Path, workers: int, mode: str) -> tuple[float, int, float, dict]:
    """(frames/s, items, peak worker RSS MiB, facts) of one epoch of TorchDataset."""
    import torch

    from openarm_sim_dataset.torch import TorchDataset

    t0 = time.perf_counter()
    ds = TorchDataset(path, hz=30)
    facts = {}
    if mode == "buffer":
        src = ds.shuffle_buffer()
        facts = {"capacity": src.capacity, "item_mib": src.item_bytes / 2**20, "clip": src.clip}
        dl = torch.utils.data.DataLoader(src, batch_size=BATCH, num_workers=workers)
    else:
        dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                                         generator=torch.Generator().manual_seed(0))
    n, rss = 0, 0.0
    for b in dl:
        n += len(b["index"])
        rss = max([rss, *(_children_rss_mib() if workers else [_self_rss_mib()])])
    return n * len(ds.cameras) / (time.perf_counter() - t0), n, rss, facts


def theirs(python: str, path: Path, workers: int, backend: str) -> tuple[float, int, float, dict]:
    r = subprocess.run([python, str(SUPPORT), "epoch", str(path), str(workers), str(BATCH), backend],
                       capture_output=True, text=True, env=_lerobot_env())
    if r.returncode:
        raise RuntimeError(f"LeRobot's loader ({backend}) failed: {r.stderr.strip()[-600:]}")
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    rss = doc.get("peak_rss_worker_mib") if workers else doc.get("peak_rss_main_mib")
    # opening the dataset counts, as building ours does
    return doc["items"] * len(CAMERAS) / (doc["seconds"] + doc["open_seconds"]), doc["items"], float(rss or "nan"), doc


def long_epoch(base: Path, spec: str, size: tuple[int, int]) -> list[str]:
    """Worker RSS at each tenth of one long shuffled epoch (2 workers) over an H.264 copy."""
    import torch

    from openarm_sim_dataset.torch import TorchDataset

    episodes, seconds = (float(v) for v in spec.split("x"))
    paths = build(base, int(episodes), seconds, size, None)
    src = TorchDataset(paths["h264"], hz=30).shuffle_buffer()
    dl = torch.utils.data.DataLoader(src, batch_size=BATCH, num_workers=2)
    one, two = limit(paths["h264"], 1)[0], limit(paths["h264"], 2)[0]
    total, n, marks, t0 = len(src), 0, [], time.perf_counter()
    for b in dl:
        n += len(b["index"])
        if n >= total * (len(marks) + 1) / 10:
            marks.append((n, time.perf_counter() - t0, _children_rss_mib()))
    rate = n * len(CAMERAS) / marks[-1][1]
    lines = [f"long epoch: {int(episodes)} episodes x {seconds:g} s ({total} items, {total * len(CAMERAS)} frames), "
             f"{src.describe()}, 2 workers: {rate:.0f} frames/s, {rate / one:.2f}x the 1-process limit ({one:.0f}), "
             f"{rate / two:.2f}x the 2-process limit ({two:.0f}); load {os.getloadavg()[0]:.2f}",
             "| items read | s | worker RSS, MiB |", "|---:|---:|---|"]
    lines += [f"| {k} | {t:.0f} | {' / '.join(f'{r:.0f}' for r in rss)} |" for k, t, rss in marks]
    return lines


# ------------------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lerobot-python", help="python of a venv with LeRobot installed (without: no LeRobot rows, no AV1)")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lerobot-repeats", type=int, default=1, help="LeRobot's loader is slow: fewer repeats")
    ap.add_argument("--backends", nargs="+", default=["pyav", "torchcodec"])
    ap.add_argument("--long", help="EPISODESxSECONDS of a long epoch for worker RSS (e.g. 20x30)")
    ap.add_argument("--data", type=Path, default=None)
    args = ap.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    base = args.data or Path(tempfile.mkdtemp(prefix="bench_lerobot_loader_"))
    base.mkdir(parents=True, exist_ok=True)
    paths = build(base, args.episodes, args.seconds, size, args.lerobot_python)
    backends = list(args.backends) if args.lerobot_python else []
    runs: dict[tuple, list] = {}
    facts: dict[tuple, dict] = {}
    copies = [c for c in ("h264", "av1") if c in paths]
    for r in range(args.repeats):
        for copy in copies:
            path = paths[copy]
            todo = [(("limit", 1), lambda p=path: limit(p, 1)), (("limit x2", 2), lambda p=path: limit(p, 2))]
            for w in args.workers:
                todo += [(("shuffle buffer", w), lambda p=path, w=w: ours(p, w, "buffer")),
                         (("exact", w), lambda p=path, w=w: ours(p, w, "exact"))]
                if copy == "h264":
                    todo.append((("jpeg", w), lambda w=w: ours(paths["jpeg"], w, "exact")))
                if r < args.lerobot_repeats:
                    todo += [((f"LeRobotDataset {b}", w), lambda p=path, w=w, b=b: theirs(args.lerobot_python, p, w, b))
                             for b in backends]
            for key, run in todo:
                try:
                    out = run()
                except RuntimeError as e:  # e.g. torchcodec not loadable in the LeRobot venv
                    print(f"# {copy} {key}: {str(e).splitlines()[0][:200]}", file=sys.stderr)
                    continue
                runs.setdefault((copy, *key), []).append(out)
                if out[3]:
                    facts[(copy, *key)] = out[3]
    load = os.getloadavg()
    lr = next((f for k, f in facts.items() if k[1].startswith("LeRobotDataset")), {})
    print(f"# {args.episodes} episodes x {args.seconds:g} s, {len(CAMERAS)} cameras {args.size} at 30 fps, batch {BATCH}; "
          f"medians of {args.repeats} (LeRobot {args.lerobot_repeats}); {os.cpu_count()} CPUs, load {load[0]:.2f} "
          f"{load[1]:.2f}; LeRobot {lr.get('lerobot', '-')} (torch {lr.get('torch', '-')})")
    for copy in copies:
        buf = facts.get((copy, "shuffle buffer", args.workers[-1]), {})
        if buf:
            print(f"# {copy}: shuffle buffer {buf['capacity']} items x {buf['item_mib']:.2f} MiB = "
                  f"{buf['capacity'] * buf['item_mib']:.0f} MiB per process, clips of {buf['clip']} steps")
    print("| copy | loader | workers | frames/s | ratio to the limit | ratio to LeRobot (pyav) | worker RSS, MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for copy in copies:
        lim = statistics.median(o[0] for o in runs[(copy, "limit", 1)])
        for key in sorted({k[1:] for k in runs if k[0] == copy}, key=_order):
            name, w = key
            rate = statistics.median(o[0] for o in runs[(copy, *key)])
            rss = max(o[2] for o in runs[(copy, *key)])
            base_lr = runs.get((copy, "LeRobotDataset pyav", w))
            vs = f"{rate / statistics.median(o[0] for o in base_lr):.1f}x" if base_lr and not name.startswith("limit") else ""
            label = {"limit": "PyAV, every frame in order, 1 process", "limit x2": "PyAV, every frame in order, 2 processes",
                     "jpeg": "TorchDataset over the JPEG layout (no video)"}.get(name, name if name.startswith("LeRobot")
                                                                                else f"TorchDataset, {name}")
            workers = "-" if name.startswith("limit") else str(w)
            print(f"| {copy} | {label} | {workers} | {rate:.0f} | {rate / lim:.2f}x | {vs} | {rss:.0f} |")
    if args.long:
        print()
        print("\n".join(long_epoch(base, args.long, size)))


def _order(key: tuple) -> tuple:
    name, w = key
    rank = ["limit", "limit x2", "shuffle buffer", "exact", "LeRobotDataset pyav", "LeRobotDataset torchcodec", "jpeg"]
    return (rank.index(name) if name in rank else 99, w)


if __name__ == "__main__":
    main()
