"""Benchmark of the live recorder (openarm_sim_dataset.record), synthetic data, two parts:

1. **latency** (real time): a control loop at 250 Hz calling ``add_obs`` + ``add_action`` for both
   arms and ``add_frame`` for 5 cameras at 30 Hz with 640x480 frames (JPEG bytes as a camera driver
   gives them, or ``--frames array``: HxWx3 uint8 encoded by the recorder's threads). Prints each
   call's p50/p99/max and the samples dropped, against a baseline measured in the same run: the
   same loop writing each frame synchronously in the loop and appending rows to lists (what the
   reference dataflow recorder does).
2. **memory** (faster than real time): a ``--minutes`` long episode (default 30) at the same rates,
   fed as fast as the writer takes it (the feeder waits when half of ``max_pending_bytes`` is
   queued, so nothing is dropped), frames in tar archives and small (the payload size changes only
   the disk space: the queue bound is what memory depends on). Prints the RSS every few minutes of
   recorded time and the peak, against the RSS after the first recorded minute.

    python tools/bench_record.py [--seconds 30] [--minutes 30] [--frames jpeg|array] [--skip-memory]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openarm_sim_dataset import Dataset, layout  # noqa: E402
from openarm_sim_dataset.validate.core import validate  # noqa: E402
from openarm_sim_dataset.record import Recorder  # noqa: E402
from openarm_sim_dataset.synthetic import MID_QPOS  # noqa: E402

STATE_HZ, CAMERA_HZ = 250, 30
CAMERAS = ("head", "wrist_right", "wrist_left", "chest", "side")


def metadata() -> dict:
    return {"location": "bench", "operator": "tools/bench_record.py",
            "tasks": [{"prompt": "Wave.", "description": "Synthetic sinusoids."}],
            "equipment": {"id": "bench", "version": "1",
                          "embodiments": {"arms": {"id": "OpenArm", "version": "2.0"}},
                          "perceptions": {"cameras": {c: {"width": 640, "height": 480} for c in CAMERAS}}}}


def frames(n: int, size: tuple[int, int], quality: int = 90) -> list[np.ndarray]:
    """``n`` distinct textured RGB images (h, w)."""
    h, w = size
    y, x = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(0)
    out = []
    for k in range(n):
        img = np.empty((h, w, 3), np.uint8)
        img[..., 0] = (x * 255 // w + 8 * k) % 256
        img[..., 1] = (y * 255 // h) % 256
        img[..., 2] = (128 + 100 * np.sin(x / 9.0 + k) * np.cos(y / 7.0)).astype(np.uint8)
        out.append(np.clip(img.astype(np.int16) + rng.integers(-20, 21, img.shape), 0, 255).astype(np.uint8))
    return out


def encode(img: np.ndarray, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def qpos(side: str, k: int) -> np.ndarray:
    return (MID_QPOS[side] + 0.2 * np.sin(k * 0.004 + np.arange(8))).astype(np.float32)


def pct(a: list[int]) -> str:
    v = np.asarray(a, dtype=np.float64) / 1e3
    return f"p50 {np.percentile(v, 50):7.1f} us  p99 {np.percentile(v, 99):8.1f} us  max {v.max():9.1f} us  (n={len(v)})"


# ---------------------------------------------------------------------------------- latency
def control_loop(seconds: float, add_state, add_frame, payloads: list) -> dict[str, list[int]]:
    """Real-time loop: every 4 ms both arms' obs + action, every 1/30 s a frame per camera; returns
    per-call durations (ns) by call type. Stamps are the wall clock (time.time_ns)."""
    lat: dict[str, list[int]] = {"state": [], "frame": []}
    stamps = np.empty(int(seconds * STATE_HZ), dtype=np.int64)
    period = 1.0 / STATE_HZ
    cam_period_ns = 10**9 // CAMERA_HZ
    n = int(seconds * STATE_HZ)
    end = time.perf_counter() + seconds
    target = time.perf_counter()
    next_frame_ns = None
    k = 0
    while k < n and target < end:
        # a fixed-rate loop: a late tick is late, the next one is due a period after it (no burst
        # to catch up), so stamps are never closer than a period
        now = time.perf_counter()
        if now < target:
            time.sleep(target - now)
        target = max(target, now) + period
        t = time.time_ns()
        stamps[k] = t
        for side in layout.ARM_SIDES:
            q = qpos(side, k)
            a = time.perf_counter_ns()
            add_state("obs", side, t, q)
            b = time.perf_counter_ns()
            add_state("action", side, t, q)
            c = time.perf_counter_ns()
            lat["state"] += [b - a, c - b]
        if next_frame_ns is None:
            next_frame_ns = t
        if t >= next_frame_ns:
            next_frame_ns = max(next_frame_ns + cam_period_ns, t)  # late: no burst of frames either
            for ci, cam in enumerate(CAMERAS):
                p = payloads[(k + ci) % len(payloads)]
                a = time.perf_counter_ns()
                add_frame(cam, t + ci, p)
                lat["frame"].append(time.perf_counter_ns() - a)
        k += 1
    d = np.diff(stamps[:k])
    lat["gaps"] = int(np.sum(d > 1.5e9 / STATE_HZ))  # what dataset-validate's timestamps check counts
    lat["late_ms"] = float(np.max(d) / 1e6 - 1e3 / STATE_HZ)
    return lat


def run_ours(out: Path, seconds: float, payloads: list) -> tuple[dict, dict]:
    rec = Recorder(out, metadata())
    ep = rec.start_episode()

    def add_state(kind, side, t, q):
        if kind == "obs":
            ep.add_obs(f"arms/{side}", t, qpos=q, qvel=q, qtorque=q)
        else:
            ep.add_action(f"arms/{side}", t, qpos=q)

    lat = control_loop(seconds, add_state, ep.add_frame, payloads)
    t0 = time.perf_counter()
    res = ep.save()
    info = {"save_s": time.perf_counter() - t0, "dropped": rec.dropped_total, "peak_pending_mib": rec.peak_pending_bytes / 2**20,
            "rows": sum(res.rows.values()), "frames": sum(res.frames.values()), "measured_hz": res.entry.get("measured_hz")}
    rec.close()
    return lat, info


def run_sync_baseline(out: Path, seconds: float, payloads: list) -> dict:
    """Frames written in the loop (one file per frame), rows appended to lists: the reference
    recorder's approach, which writes the parquet files at the end of the episode."""
    rows: dict = {}
    folders = {c: out / "cameras" / c for c in CAMERAS}
    for f in folders.values():
        f.mkdir(parents=True)

    def add_state(kind, side, t, q):
        rows.setdefault((kind, side), []).append((t, q.copy()))

    def add_frame(cam, t, payload):
        if not isinstance(payload, bytes):
            payload = encode(payload)
        (folders[cam] / layout.frame_name(t)).write_bytes(payload)

    return control_loop(seconds, add_state, add_frame, payloads)


# ---------------------------------------------------------------------------------- memory
def rss_kib() -> tuple[int, int]:
    vals = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                vals[line.split(":")[0]] = int(line.split()[1])
    return vals["VmRSS"], vals["VmHWM"]


def run_memory(out: Path, minutes: float, payloads: list[bytes], camera_format: str = "tar") -> None:
    rec = Recorder(out, metadata(), camera_format=camera_format)
    ep = rec.start_episode()
    t0 = 1_772_000_000_000_000_000
    ticks = int(minutes * 60 * STATE_HZ)
    per_frame = STATE_HZ / CAMERA_HZ  # 8.33 ticks per frame
    next_frame = 0.0
    frames_n = 0
    wall = time.perf_counter()
    samples = []
    report_every = int(max(1.0, minutes / 10) * 60 * STATE_HZ)
    half = rec.max_pending_bytes // 2
    qs = {s: np.stack([qpos(s, k) for k in range(1000)]) for s in layout.ARM_SIDES}
    rss0 = rss_kib()[0]
    for k in range(ticks):
        t = t0 + k * 4_000_000
        for side in layout.ARM_SIDES:
            q = qs[side][k % 1000]
            ep.add_obs(f"arms/{side}", t, qpos=q, qvel=q, qtorque=q)
            ep.add_action(f"arms/{side}", t, qpos=q)
        if k >= next_frame:
            next_frame += per_frame
            for ci, cam in enumerate(CAMERAS):
                ep.add_frame(cam, t + ci, payloads[(frames_n + ci) % len(payloads)])
            frames_n += 1
            while rec.pending_bytes > half:  # faster than real time: let the writer catch up
                time.sleep(0.001)
        if (k + 1) % report_every == 0 or k + 1 == 60 * STATE_HZ:
            rss, hwm = rss_kib()
            samples.append(((k + 1) / STATE_HZ / 60, rss, hwm))
    feed_s = time.perf_counter() - wall
    t = time.perf_counter()
    res = ep.save()
    save_s = time.perf_counter() - t
    rss, hwm = rss_kib()
    rec.close()
    base = next(s for s in samples if abs(s[0] - 1.0) < 1e-9)
    print(f"\nmemory: {minutes:g} min episode ({camera_format} cameras), {sum(res.rows.values()):,} rows, "
          f"{sum(res.frames.values()):,} frames, fed in {feed_s:.1f} s ({minutes * 60 / feed_s:.1f}x real time), "
          f"save() {save_s:.1f} s, dropped {rec.dropped_total}, peak queue {rec.peak_pending_bytes / 2**20:.1f} MiB")
    print(f"  RSS before the episode (imports, payloads): {rss0 / 1024:.1f} MiB; the queue may hold "
          f"{half / 2**20:.0f} MiB of it (the feeder waits above)")
    print("  recorded min   RSS MiB   peak MiB")
    for m, r, h in samples:
        print(f"  {m:12.1f} {r / 1024:9.1f} {h / 1024:10.1f}")
    print(f"  after save    {rss / 1024:9.1f} {hwm / 1024:10.1f}")
    print(f"  growth from minute 1 to the end: {(samples[-1][1] - base[1]) / 1024:+.1f} MiB RSS, "
          f"peak {hwm / 1024:.1f} MiB vs {base[2] / 1024:.1f} MiB at minute 1 ({hwm / base[2]:.2f}x)")
    sizes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"  on disk: {sizes / 2**20:.0f} MiB; streams in {_row_groups(out)} row groups")


def _row_groups(out: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_row_groups for p in out.rglob("state.parquet"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="length of each real-time latency run")
    ap.add_argument("--minutes", type=float, default=30.0, help="recorded length of the memory run")
    ap.add_argument("--frames", choices=("jpeg", "array"), default="jpeg")
    ap.add_argument("--memory-camera-format", choices=("tar", "dir"), default="tar",
                    help="dir: one file per frame (the manifest entries of frames are kept until save)")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--dir", type=Path, default=None, help="scratch folder (default: a temporary one)")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench_record-", dir=args.dir))
    try:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if not args.skip_latency:
            imgs = frames(24, (480, 640))
            payloads = [encode(i) for i in imgs] if args.frames == "jpeg" else imgs
            size = np.mean([len(p) for p in payloads]) / 1024 if args.frames == "jpeg" else imgs[0].nbytes / 1024
            print(f"latency: {args.seconds:g} s real time, 250 Hz x 2 arms (obs + action), 5 cameras x 30 Hz "
                  f"640x480 {args.frames} ({size:.0f} KiB per frame)")
            base = run_sync_baseline(scratch / "sync", args.seconds, payloads)
            lat, info = run_ours(scratch / "ours", args.seconds, payloads)
            for name, d in (("baseline (in-loop writes)", base), ("recorder", lat)):
                print(f"  {name}:")
                print(f"    state add  {pct(d['state'])}")
                print(f"    frame add  {pct(d['frame'])}")
                print(f"    loop: {d['gaps']} stamp intervals > 1.5 periods (the loop itself late), "
                      f"worst {d['late_ms']:.1f} ms late")
            p99 = {k: (np.percentile(base[k], 99) / np.percentile(lat[k], 99)) for k in ("state", "frame")}
            print(f"  p99 baseline / recorder: state {p99['state']:.2f}x, frame {p99['frame']:.2f}x")
            print(f"  recorder: dropped {info['dropped']}, peak queue {info['peak_pending_mib']:.1f} MiB, "
                  f"{info['rows']:,} rows, {info['frames']:,} frames, save() {info['save_s']:.2f} s")
            print(f"  measured_hz: {info['measured_hz']}")
            report = validate(Dataset(scratch / "ours"), quick=True)
            print(f"  dataset-validate: {report.summary()}" + "".join(f"; {r.check}: {r.detail}" for r in report if r.failed))
            shutil.rmtree(scratch / "sync")
        if not args.skip_memory:
            small = [encode(i, 80) for i in frames(24, (120, 160))]
            run_memory(scratch / "memory", args.minutes, small, args.memory_camera_format)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
