"""Benchmark the PyTorch loader (``openarm_sim_dataset.torch.TorchDataset``) against raw JPEG decoding.

    .venv/bin/python tools/bench_loader.py [--episodes 8] [--seconds 10] [--size 320x240] [--hz 30]
                                           [--camera-format dir|tar] [--repeats 3] [--long 4] [--data DIR]

Builds a synthetic 0.4.0 dataset once (2 cameras at 30 Hz, 250 Hz states; in a temporary folder, or
kept under ``--data``), then measures in the same run, interleaved so that every figure sees the same
machine load (medians of ``--repeats``):

- the raw decode rate of exactly the frames an epoch of the loader shows (JPEG bytes already in memory,
  ``camera.decode_jpeg``): on one core, and with two processes (the 2-core decode limit);
- one epoch of ``DataLoader(TorchDataset(path, hz), batch_size=32, shuffle=True)`` with ``num_workers``
  0 and 2: items/s, and frames/s (items/s x cameras) against the decode rates. ``num_workers=0`` is run
  twice: with torch's default intra-op threads in this process and with one (``torch.set_num_threads(1)``):
  the default collate's ``torch.stack`` runs on that thread pool, which on a busy 2-core machine costs
  more than the decoding (workers always use one thread).

Then a long run (``--long`` epochs' worth of items drawn with replacement, persistent workers) samples
each worker's RSS (and its private anonymous part, RssAnon) every few batches: it must stay flat.

Target (issue 9): num_workers=2 >= 0.8x the 2-core decode limit.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

CAMERAS = ("head", "wrist_right")


def build(root: Path, episodes: int, seconds: float, size: tuple[int, int], camera_format: str) -> Path:
    from openarm_sim_dataset.synthetic import write_synthetic

    out = root / f"synthetic_e{episodes}_s{seconds:g}_{size[0]}x{size[1]}_{camera_format}"
    if not (out / "metadata.yaml").is_file():
        t0 = time.perf_counter()
        write_synthetic(out, episodes=episodes, seconds=seconds, state_hz=250, camera_hz=30, cameras=CAMERAS,
                        size=size, camera_format=camera_format, jitter_ns=200_000)
        print(f"# built {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def epoch_frames(ds) -> list[bytes]:
    """JPEG bytes of every camera frame one epoch of ``ds`` decodes, in item order."""
    from openarm_sim_dataset.camera import Camera

    idx = ds.index
    out = []
    for e in range(idx.num_episodes):
        cams = [Camera(n, idx.camera_paths[e, c]) for c, n in enumerate(idx.cameras)]
        for row in idx.frame_index[idx.starts[e]:idx.starts[e + 1]].tolist():
            out += [cam.read_bytes(f) for cam, f in zip(cams, row)]
        for cam in cams:
            cam.close()
    return out


def _decode_all(frames: list[bytes]) -> int:
    from openarm_sim_dataset.camera import decode_jpeg

    for data in frames:
        decode_jpeg(data)
    return len(frames)


def _cpu() -> float:
    """CPU seconds of this process and of its children that have been waited for (DataLoader workers,
    once an epoch ends)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def decode_rate(frames: list[bytes], pool=None) -> tuple[float, float]:
    """Frames/s decoding ``frames`` in this process, or split over the processes of ``pool``; and CPU
    seconds per frame (this process only: None for the pool)."""
    t0, c0 = time.perf_counter(), _cpu()
    if pool is None:
        _decode_all(frames)
    else:
        n = pool._processes
        sum(pool.map(_decode_all, [frames[k::n] for k in range(n)]))
    return len(frames) / (time.perf_counter() - t0), (_cpu() - c0) / len(frames) if pool is None else float("nan")


def loader_rate(ds, workers: int, threads: int | None = None) -> tuple[float, float, int]:
    """Items/s of one shuffled epoch through a DataLoader (worker start-up included), CPU seconds per
    item (this process and its workers), and the item count.
    ``threads``: torch's intra-op threads in this process during the run (None: torch's default)."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        dl = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers,
                                         generator=torch.Generator().manual_seed(0))
        t0, c0 = time.perf_counter(), _cpu()
        n = sum(len(b["index"]) for b in dl)
        wall = time.perf_counter() - t0
        del dl  # workers joined: their CPU time is counted
        return n / wall, (_cpu() - c0) / n, n
    finally:
        torch.set_num_threads(before)


def _children() -> list[int]:
    pids = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return pids


def _rss_kib(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields.get("RssAnon", "0 kB").split()[0])


def long_run(ds, epochs: int) -> list[str]:
    """Per-worker RSS over ``epochs`` epochs' worth of random items (num_workers=2, persistent)."""
    import torch

    n = epochs * len(ds)
    sampler = torch.utils.data.RandomSampler(ds, replacement=True, num_samples=n,
                                             generator=torch.Generator().manual_seed(1))
    dl = torch.utils.data.DataLoader(ds, batch_size=32, sampler=sampler, num_workers=2, persistent_workers=True)
    samples: dict[int, list[tuple[int, int, int]]] = {}
    done = 0
    t0 = time.perf_counter()
    for b, batch in enumerate(dl):
        done += len(batch["index"])
        if b % 5 == 0:
            for pid in _children():
                try:
                    samples.setdefault(pid, []).append((done, *_rss_kib(pid)))
                except (OSError, KeyError):
                    pass
    dt = time.perf_counter() - t0
    lines = [f"long run: {done} items ({epochs} epochs' worth, drawn with replacement) in {dt:.1f} s, "
             f"{done / dt:.0f} items/s; RSS of each worker (sampled every 5 batches; second sample -> last):"]
    for pid, rows in sorted(samples.items()):
        if len(rows) < 3:
            continue
        (i0, r0, a0), (i1, r1, a1) = rows[1], rows[-1]
        peak = max(r for _, r, _ in rows)
        lines.append(f"  worker pid {pid}: VmRSS {r0 / 1024:.1f} -> {r1 / 1024:.1f} MiB (peak {peak / 1024:.1f}), "
                     f"RssAnon {a0 / 1024:.1f} -> {a1 / 1024:.1f} MiB ({(a1 - a0) / 1024:+.1f} MiB over items "
                     f"{i0}..{i1}; {len(rows)} samples)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", default="320x240", help="WxH of the camera frames")
    ap.add_argument("--hz", type=float, default=30.0, help="loader rate (the cameras run at 30 Hz)")
    ap.add_argument("--camera-format", choices=("dir", "tar"), default="dir")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--long", type=int, default=4, help="epochs' worth of items in the RSS run (0: skip)")
    ap.add_argument("--data", help="folder to keep/reuse the synthetic dataset in (default: a temp dir)")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.lower().split("x"))
    tmp = None
    if args.data:
        root = Path(args.data)
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_loader_")
        root = Path(tmp.name)
    try:
        _bench(build(root, args.episodes, args.seconds, (w, h), args.camera_format), args)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _bench(path: Path, args) -> None:
    import torch

    from openarm_sim_dataset.torch import TorchDataset

    t0 = time.perf_counter()
    ds = TorchDataset(path, hz=args.hz)
    built = time.perf_counter() - t0
    frames = epoch_frames(ds)
    cams = len(ds.cameras)
    print(f"dataset: {path.name}: {ds.num_episodes} episodes, {len(ds)} items at {args.hz:g} Hz, {cams} cameras "
          f"({args.camera_format}), {len(frames)} frame decodes per epoch; index built in {built:.2f} s")
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    order = ["decode1", "decode2", "w0", "w0t1", "w2"]
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in order}
    with mp.get_context("fork").Pool(2) as pool:
        for r in range(args.repeats):
            for key in order if r % 2 == 0 else order[::-1]:
                if key == "decode1":
                    runs[key].append(decode_rate(frames))
                elif key == "decode2":
                    runs[key].append(decode_rate(frames, pool))
                else:
                    rate, cpu, n = loader_rate(ds, int(key[1]), 1 if key.endswith("t1") else None)
                    assert n == len(ds), (n, len(ds))
                    runs[key].append((rate * cams, cpu / cams))  # per frame
    med = {k: statistics.median(r for r, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    limit = med["decode2"]
    print(f"\nmedians of {args.repeats} interleaved repeats (frames/s = items/s x {cams} cameras; CPU: this "
          "process and its DataLoader workers, per frame)")
    print(f"{'what':<44}{'items/s':>9}{'frames/s':>10}{'vs 1-core':>11}{'vs 2-core':>11}{'CPU ms/frame':>14}")
    rows = [("raw decode, 1 process (bytes in memory)", "decode1"),
            ("raw decode, 2 processes (the 2-core limit)", "decode2"),
            (f"DataLoader num_workers=0 ({torch.get_num_threads()} torch threads)", "w0"),
            ("DataLoader num_workers=0 (1 torch thread)", "w0t1"),
            ("DataLoader num_workers=2", "w2")]
    for name, key in rows:
        fps = med[key]
        items = "" if key.startswith("decode") else f"{fps / cams:.0f}"
        print(f"{name:<44}{items:>9}{fps:>10.0f}{fps / med['decode1']:>10.2f}x{fps / limit:>10.2f}x"
              f"{cpu[key] * 1e3:>14.2f}")
    ratio = med["w2"] / limit
    verdict = "met" if ratio >= 0.8 else "NOT met"
    print(f"\nnum_workers=2: {ratio:.2f}x the 2-core decode limit (target >= 0.8x: {verdict}); "
          f"CPU per frame {cpu['w2'] / cpu['decode1']:.2f}x the bare decode's")
    print(f"load average {os.getloadavg()[0]:.1f} at the end (2 cores shared with other work make every figure noisy)")
    if args.long:
        print()
        print("\n".join(long_run(ds, args.long)))


if __name__ == "__main__":
    main()
