"""Benchmark of the live recorder (openarm_sim_dataset.record), synthetic data, three parts:

1. **latency** (real time): a control loop at 250 Hz calling ``add_obs`` + ``add_action`` for both
   arms and ``add_frame`` for 5 cameras at 30 Hz with 640x480 frames (JPEG bytes as a camera driver
   gives them, or ``--frames array``: HxWx3 uint8 encoded by the recorder's writer). Each variant
   runs in a fresh process, ``--rounds`` times interleaved, medians reported: ``none`` (the same
   loop, no recorder: the baseline), ``recorder`` (this checkout), ``before`` (the recorder of
   another checkout given by ``--before DIR``, e.g. the in-process writer thread of main before
   issue 21) and ``inloop`` (frames written synchronously in the loop, rows appended to lists: what
   the reference dataflow recorder does). Late ticks are what ``dataset-validate`` counts as dropped
   samples: stamp intervals > 1.5 periods. Prints each call's p50/p99 and the samples dropped, and
   beside ``add_frame`` a **bare copy** of the same bytes (``bytearray(payload)``: what any recorder
   must do at least, the caller may reuse its buffer), timed in the same loop, on the same payload,
   the two in alternating order (the first one after the loop's sleep finds the payload out of
   cache): the ratio of ``add_frame``'s p99 to the copy's is the recorder's overhead, a figure that
   depends far less on the machine and its load than the microseconds do. Both p50s are printed
   for a burst's first camera (the first calls after the loop's sleep: their code and data out of
   the CPU's caches, where the p99 comes from) and for the other cameras.
2. **memory** (faster than real time): a ``--minutes`` long episode (default 30) at the same rates,
   fed as fast as the writer takes it (the feeder waits when half of ``max_pending_bytes`` is
   queued, so nothing is dropped), frames in tar archives and small (the payload size changes only
   the disk space: the queue bound is what memory depends on). Prints the RSS every few minutes of
   recorded time and the peak, against the RSS after the first recorded minute.

3. **save** (faster than real time): episodes of ``--save-minutes`` (folder cameras, one JPEG file
   per frame) and what :meth:`Episode.save` costs the caller: wall time and the caller's CPU time
   (the writer process's manifest work is not the caller's).

    python tools/bench_record.py [--seconds 20] [--rounds 3] [--before /work/main] [--minutes 30]
                                 [--frames jpeg|array] [--variants recorder ...] [--skip-memory] [--skip-save]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

# BENCH_PACKAGE_ROOT: the checkout whose recorder a ``before`` variant measures
sys.path.insert(0, os.environ.get("BENCH_PACKAGE_ROOT") or str(Path(__file__).resolve().parents[1]))

from openarm_sim_dataset import Dataset, layout  # noqa: E402
from openarm_sim_dataset.record import Recorder  # noqa: E402
from openarm_sim_dataset.synthetic import MID_QPOS  # noqa: E402
from openarm_sim_dataset.validate.core import validate  # noqa: E402

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
    per-call durations (ns) by call type (``copy``: the bare copy of each frame's bytes, see the
    module doc). Stamps are the wall clock (time.time_ns)."""
    lat: dict[str, list[int]] = {"state": [], "frame": [], "copy": []}
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
            copy_first = len(lat["copy"]) % 2 == 0  # which of the two finds the burst's payload cold
            for ci, cam in enumerate(CAMERAS):
                p = payloads[(k + ci) % len(payloads)]
                if copy_first:
                    lat["copy"].append(bare_copy(p))
                a = time.perf_counter_ns()
                add_frame(cam, t + ci, p)
                lat["frame"].append(time.perf_counter_ns() - a)
                if not copy_first:
                    lat["copy"].append(bare_copy(p))
        k += 1
    # late: stamps taken after the sleep (a late wake-up counts), intervals as dataset-validate counts them
    d = np.diff(stamps[:k])
    lat["gaps"] = int(np.sum(d > 1.5e9 / STATE_HZ))
    lat["intervals"] = int(len(d))
    lat["late_ms"] = float(np.max(d) / 1e6 - 1e3 / STATE_HZ)
    return lat


def bare_copy(payload) -> int:
    """Time (ns) of a copy of ``payload``'s bytes into new memory: the least a recorder does with a
    frame it must keep after the call returns."""
    a = time.perf_counter_ns()
    kept = bytearray(payload) if not isinstance(payload, np.ndarray) else payload.copy()
    b = time.perf_counter_ns()
    del kept
    return b - a


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


def run_variant(variant: str, seconds: float, frames_kind: str, scratch: Path) -> dict:
    """One latency run in this process; a JSON-able summary."""
    imgs = frames(24, (480, 640))
    payloads = [encode(i) for i in imgs] if frames_kind == "jpeg" else imgs
    info: dict = {}
    if variant == "none":
        lat = control_loop(seconds, lambda *a: None, lambda *a: None, payloads)
    elif variant == "inloop":
        lat = run_sync_baseline(scratch / "sync", seconds, payloads)
    else:
        lat, info = run_ours(scratch / "ours", seconds, payloads)
        report = validate(Dataset(scratch / "ours"), quick=True)
        info["validate"] = report.summary() + "".join(f"; {r.check}: {r.detail}" for r in report if r.failed)
    out = {"gaps": lat["gaps"], "intervals": lat["intervals"], "late_ms": lat["late_ms"], **info}
    for k in ("state", "frame", "copy"):
        v = np.asarray(lat[k], dtype=np.float64) / 1e3
        out[f"{k}_p50_us"] = float(np.percentile(v, 50)) if len(v) else None
        out[f"{k}_p99_us"] = float(np.percentile(v, 99)) if len(v) else None
        if k != "state" and len(v):  # a burst's first camera (the first calls after the loop's sleep) and the others
            first = np.zeros(len(v), bool)
            first[::len(CAMERAS)] = True
            out[f"{k}_first_p50_us"] = float(np.median(v[first]))
            out[f"{k}_rest_p50_us"] = float(np.median(v[~first])) if (~first).any() else None
    return out


def run_save_scaling(scratch: Path, minutes_list: list[float], payloads: list[bytes]) -> None:
    """Folder cameras, fed faster than real time: what save() costs the caller per episode length."""
    print("\nsave (folder cameras: one JPEG file per frame), fed faster than real time:")
    print("  recorded min    frames   save() wall s   caller CPU in save() s   dropped")
    for minutes in minutes_list:
        out = scratch / f"save-{minutes:g}"
        rec = Recorder(out, metadata(), camera_format="dir")
        ep = rec.start_episode()
        t0 = 1_772_000_000_000_000_000
        ticks = int(minutes * 60 * STATE_HZ)
        per_frame = STATE_HZ / CAMERA_HZ
        next_frame, n = 0.0, 0
        half = rec.max_pending_bytes // 2
        q = {s: qpos(s, 0) for s in layout.ARM_SIDES}
        for k in range(ticks):
            t = t0 + k * 4_000_000
            for side in layout.ARM_SIDES:
                ep.add_obs(f"arms/{side}", t, qpos=q[side], qvel=q[side], qtorque=q[side])
                ep.add_action(f"arms/{side}", t, qpos=q[side])
            if k >= next_frame:
                next_frame += per_frame
                for ci, cam in enumerate(CAMERAS):
                    ep.add_frame(cam, t + ci, payloads[(n + ci) % len(payloads)])
                n += 1
                while rec.pending_bytes > half:
                    time.sleep(0.001)
        while rec.pending_bytes:  # the writer caught up: save() measures the commit, not the backlog
            time.sleep(0.01)
        w0, c0 = time.perf_counter(), time.process_time()
        res = ep.save()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        rec.close()
        print(f"  {minutes:12g} {sum(res.frames.values()):9,} {wall:15.2f} {cpu:24.3f} {rec.dropped_total:9}")
        shutil.rmtree(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each real-time latency run")
    ap.add_argument("--rounds", type=int, default=3, help="latency runs per variant (interleaved; medians)")
    ap.add_argument("--before", type=Path, default=None,
                    help="another checkout (e.g. /work/main) whose recorder is measured as 'before'")
    ap.add_argument("--minutes", type=float, default=30.0, help="recorded length of the memory run")
    ap.add_argument("--save-minutes", type=float, nargs="+", default=[0.5, 2.0])
    ap.add_argument("--frames", choices=("jpeg", "array"), default="jpeg")
    ap.add_argument("--memory-camera-format", choices=("tar", "dir"), default="tar",
                    help="dir: one file per frame (the manifest entries of frames are kept until save)")
    ap.add_argument("--variants", nargs="+", choices=("none", "recorder", "inloop"),
                    default=["none", "recorder", "inloop"], help="latency variants to run (and 'before')")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-save", action="store_true")
    ap.add_argument("--dir", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--variant", choices=("none", "recorder", "inloop"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench_record-", dir=args.dir))
    try:
        if args.variant:  # one latency run, in a fresh process (see below)
            print(json.dumps(run_variant(args.variant, args.seconds, args.frames, scratch)))
            return
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if not args.skip_latency:
            latency(args)
        if not args.skip_save:
            run_save_scaling(scratch, args.save_minutes, [encode(i, 80) for i in frames(24, (120, 160))])
        if not args.skip_memory:
            small = [encode(i, 80) for i in frames(24, (120, 160))]
            run_memory(scratch / "memory", args.minutes, small, args.memory_camera_format)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def latency(args) -> None:
    variants: dict[str, str | None] = {v: None for v in args.variants}
    if args.before is not None:
        variants["before"] = str(args.before.resolve())
    print(f"latency: {args.seconds:g} s real time per run, {args.rounds} rounds, 250 Hz x 2 arms (obs + action), "
          f"5 cameras x 30 Hz 640x480 {args.frames}; variants {', '.join(variants)}")
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v, root in variants.items():
            env = dict(os.environ)
            if root is not None:
                env["BENCH_PACKAGE_ROOT"] = root
                env["PYTHONPATH"] = root
            cmd = [sys.executable, __file__, "--variant", "recorder" if v == "before" else v,
                   "--seconds", str(args.seconds), "--frames", args.frames]
            if args.dir is not None:
                cmd += ["--dir", str(args.dir)]
            # run in the checkout measured: its writer process (python -m, which puts the current
            # folder first on the path) must import that checkout's package too
            p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               cwd=root or Path(__file__).resolve().parents[1])
            if p.returncode:
                raise SystemExit(f"variant {v} failed:\n{p.stderr}")
            runs[v].append(json.loads(p.stdout.strip().splitlines()[-1]))
            d = runs[v][-1]
            print(f"  round {r + 1} {v:9}: {d['gaps']:4} late ticks of {d['intervals']}, worst {d['late_ms']:.1f} ms late"
                  + (f"; dropped {d['dropped']}" if "dropped" in d else "")
                  + (f"; add_frame p50/p99 {d['frame_p50_us']:.1f}/{d['frame_p99_us']:.1f} us, bare copy "
                     f"{d['copy_p50_us']:.1f}/{d['copy_p99_us']:.1f} us: p99 ratio {d['frame_p99_us'] / d['copy_p99_us']:.2f}x"
                     if v in ("recorder", "before") else ""), flush=True)

    def med(v, k):
        vals = [d[k] for d in runs[v] if d.get(k) is not None]
        return float(np.median(vals)) if vals else float("nan")

    def med_ratio(v, k):  # per round (same loop, same load), then the median over rounds
        vals = [d[f"frame_{k}_us"] / d[f"copy_{k}_us"] for d in runs[v] if d.get(f"copy_{k}_us")]
        return float(np.median(vals)) if vals else float("nan")

    print("  median over rounds:          late ticks   state add p50/p99 us   frame add p50/p99 us   "
          "bare copy p50/p99 us   add/copy p50 p99   dropped")
    for v in variants:
        mine = v in ("recorder", "before")
        print(f"    {v:26} {med(v, 'gaps'):10.0f}   {med(v, 'state_p50_us'):8.1f} /{med(v, 'state_p99_us'):8.1f}   "
              f"{med(v, 'frame_p50_us'):8.1f} /{med(v, 'frame_p99_us'):8.1f}   "
              f"{med(v, 'copy_p50_us'):8.1f} /{med(v, 'copy_p99_us'):8.1f}   "
              + (f"{med_ratio(v, 'p50'):6.2f}x {med_ratio(v, 'p99'):5.2f}x   {med(v, 'dropped'):.0f}" if mine else
                 f"{'-':>6}  {'-':>5}    -"))
    if "none" in variants:
        base = med("none", "gaps")
        for v in variants:
            if v != "none":
                print(f"  late ticks {v} / none: {(med(v, 'gaps') + 1) / (base + 1):.2f}x  ((n+1)/(n0+1), medians)")
    for v in ("recorder", "before"):
        if v in runs:
            print(f"  {v}: p50 of a burst's first camera (right after the loop's sleep, code and data out of the "
                  f"CPU's caches) add_frame {med(v, 'frame_first_p50_us'):.1f} us, bare copy "
                  f"{med(v, 'copy_first_p50_us'):.1f} us; of the other cameras {med(v, 'frame_rest_p50_us'):.1f} / "
                  f"{med(v, 'copy_rest_p50_us'):.1f} us")
    for v in ("recorder", "before"):
        for d in runs.get(v, [])[-1:]:
            print(f"  {v} dataset-validate (last round): {d['validate']}")


if __name__ == "__main__":
    main()
