"""ROS bags to datasets: how fast ``bag_to_openarm`` (and ``bag_to_lerobot``) convert, against rosbags reading
the same bag alone, and whether their peak memory stays flat as the bag grows.

    .venv/bin/python tools/bench_rosbag.py [--seconds 60,180] [--storages mcap,sqlite3,ros1] \
        [--cameras head,wrist_left,wrist_right] [--size 320x240] [--repeats 3] [--lerobot] [--profile 15] [--work DIR]

Writes one synthetic OpenArm bag per storage and length (``tools/make_rosbag.py``: joint states at 250 Hz,
four command topics at 100 Hz, each camera a CompressedImage JPEG at 30 Hz) under ``--work`` (default a temp
dir, removed at the end). Then per bag, repeats interleaved (A B C D A B C D ...) so all see the same load,
the median of:

1. ``read alone``: ``Bag(path).raw()`` iterated over every topic (open + read the serialised bytes): the limit;
2. ``read+deser``: ``Bag(path).messages()`` (each message deserialised by rosbags as well);
3. ``openarm dir`` / ``openarm tar``: ``bag_to_openarm(bag, out, camera_format=...)`` into a fresh folder
   (removed after, outside the timing);
4. with ``--lerobot``, once per bag: ``bag_to_lerobot(bag, out, "lerobot_v3.0")`` (encodes video; messages/s
   and output frames/s). If it raises, its cell says n/a and the error.

Every rate is the bag's message count over the call's wall time. **Ratios**: a row's messages/s over the
same bag's ``read alone`` messages/s in the same run; 1.00x would mean converting costs no more than reading,
0.25x that it takes four times as long. Absolute rates follow the machine's load, the ratios hold better.

Peak RSS: each conversion runs once more in a fresh interpreter (``--child``), which reports its own
``VmHWM`` (the high-water resident set of its address space; ``ru_maxrss`` of a child spawned by vfork+exec
would also carry the parent's). Memory is flat in the bag's length when the longest bag's peak is about
the shortest's while the bag grows (``--profile N``: the top N functions of one openarm dir and one tar
conversion of the first bag by own time, cProfile).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "tools")):  # run from a checkout without installing
    if _p not in sys.path:
        sys.path.insert(0, _p)

KEYS = ("raw", "messages", "dir", "tar")
MIB = 1024.0


def bag_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def message_count(path: Path) -> int:
    from openarm_sim_dataset.ops.convert.rosbag import Bag

    with Bag(path) as b:
        return sum(t.count for t in b.topics.values())


# ------------------------------------------------------------------------------------------ one run
def run(key: str, path: Path, out: Path) -> int:
    """One run of ``key`` on the bag at ``path`` (output into ``out``): messages read, or frames written."""
    from openarm_sim_dataset.ops.convert.rosbag import Bag, bag_to_lerobot, bag_to_openarm

    if key in ("raw", "messages"):
        n = 0
        with Bag(path) as b:
            for _ in (b.raw() if key == "raw" else b.messages()):
                n += 1
        return n
    if key == "lerobot":
        return bag_to_lerobot(path, out, "lerobot_v3.0")[1].frames
    return bag_to_openarm(path, out, camera_format=key).summary.frames


def timed(key: str, path: Path, work: Path) -> tuple[float, int]:
    """(wall seconds, the run's count) of one run; its output folder removed after, untimed."""
    out = work / f"out_{key}"
    t0 = time.perf_counter()
    try:
        n = run(key, path, out)
        return time.perf_counter() - t0, n
    finally:
        shutil.rmtree(out, ignore_errors=True)


def measure(path: Path, messages: int, work: Path, repeats: int, lerobot: bool) -> dict:
    """Per key: median messages/s over the interleaved repeats (lerobot: one run, with frames/s, or its error)."""
    rates: dict[str, list[float]] = {k: [] for k in KEYS}
    for _ in range(repeats):
        for key in KEYS:
            dt, n = timed(key, path, work)
            if key in ("raw", "messages") and n != messages:
                raise RuntimeError(f"{path}: {key} read {n} messages, the bag's index says {messages}")
            rates[key].append(messages / dt)
    out = {k: statistics.median(v) for k, v in rates.items()}
    if lerobot:
        try:
            dt, frames = timed("lerobot", path, work)
            out["lerobot"] = (messages / dt, frames / dt)
        except Exception as e:  # noqa: BLE001 - reported in its cell, the benchmark goes on
            out["lerobot"] = f"n/a ({type(e).__name__}: {' '.join(str(e).split())[:120]})"
    return out


# ----------------------------------------------------------------------------------------- peak RSS
def child(key: str, path: str, out: str) -> None:
    import resource

    if key != "import":
        timed(key, Path(path), Path(out))
    else:
        import openarm_sim_dataset.ops.convert.rosbag  # noqa: F401
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    print(json.dumps({"hwm_kib": hwm, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def peak_rss(key: str, path: Path, work: Path) -> float:
    """Peak resident set (MiB) of a fresh interpreter running ``key`` on ``path`` once."""
    r = subprocess.run([sys.executable, __file__, "--child", key, str(path), str(work)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"child {key} {path}: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["hwm_kib"] / MIB


# --------------------------------------------------------------------------------------------- main
def _size(text: str) -> tuple[int, int]:
    w, h = (int(x) for x in text.lower().split("x"))
    return w, h


def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", default="60,180", help="bag lengths, comma separated")
    ap.add_argument("--storages", default="mcap,sqlite3,ros1")
    ap.add_argument("--cameras", default="head,wrist_left,wrist_right")
    ap.add_argument("--size", type=_size, default=(320, 240), help="image WxH")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lerobot", action="store_true", help="also bag_to_lerobot(..., 'lerobot_v3.0'), once per bag")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="print the top N functions (own time) of one openarm dir and tar conversion of the first bag")
    ap.add_argument("--work", help="folder for the bags and outputs (default: a temp dir, removed at the end)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child)
    if args.work:
        work = Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_rosbag_")
        work = Path(tmp.name)
    try:
        _bench(work, args)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _bench(work: Path, args) -> None:
    import make_rosbag

    seconds = [float(s) for s in args.seconds.split(",")]
    storages = [s for s in args.storages.split(",") if s]
    cameras = tuple(c for c in args.cameras.split(",") if c)
    load0, t_start = os.getloadavg(), time.perf_counter()
    bags: dict[tuple[str, float], Path] = {}
    for st in storages:
        for s in seconds:
            path = work / f"bag_{st}_{s:g}s{'.bag' if st == 'ros1' else ''}"
            if not path.exists():
                t0 = time.perf_counter()
                make_rosbag.write_openarm_bag(path, storage=st, seconds=s, cameras=cameras, size=args.size)
                print(f"# wrote {path.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
            bags[(st, s)] = path
    os.sync()  # the fresh bags' dirty pages: not flushed by the first conversion's syncfs
    base_rss = peak_rss("import", next(iter(bags.values())), work)
    rows, rss = [], {}
    for (st, s), path in bags.items():
        n, mb = message_count(path), bag_size(path) / 1e6
        m = measure(path, n, work, args.repeats, args.lerobot)
        rss[(st, s)] = {k: peak_rss(k, path, work) for k in ("dir", "tar", *(["lerobot"] if args.lerobot else []))}
        print(f"# {path.name}: {n} messages, {mb:.1f} MB, read alone {_fmt(m['raw'])} msg/s, "
              f"openarm dir {_fmt(m['dir'])} msg/s", file=sys.stderr, flush=True)
        rows.append((st, s, n, mb, m))
    load1, took = os.getloadavg(), time.perf_counter() - t_start

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    from importlib.metadata import version
    print(f"bags: {', '.join(cameras)} at 30 Hz ({args.size[0]}x{args.size[1]} JPEG), /joint_states 250 Hz, 4 command "
          f"topics 100 Hz; rosbags {version('rosbags')}, python {sys.version.split()[0]}")
    print(f"{cpus} CPUs; load average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end "
          f"(5 min: {load0[1]:.2f}, {load1[1]:.2f}); {took / 60:.1f} min")
    print("command: python tools/bench_rosbag.py " + " ".join(sys.argv[1:]))
    print(f"medians of {args.repeats} interleaved repeats; ratio = messages/s over the same bag's read alone\n")
    lr = " lerobot v3.0 msg/s | ratio | lerobot frames/s |" if args.lerobot else ""
    print(f"| storage | s | messages | MB | read alone msg/s | read+deser msg/s | ratio | openarm dir msg/s | ratio | "
          f"openarm tar msg/s | ratio |{lr} peak RSS MiB, dir / tar |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if args.lerobot else "") + "---:|")
    for st, s, n, mb, m in rows:
        raw = m["raw"]
        cells = [st, f"{s:g}", _fmt(n), f"{mb:.0f}", _fmt(raw)]
        for k in ("messages", "dir", "tar"):
            cells += [_fmt(m[k]), f"{m[k] / raw:.2f}x"]
        if args.lerobot:
            lrm = m["lerobot"]
            cells += ([_fmt(lrm[0]), f"{lrm[0] / raw:.3f}x", _fmt(lrm[1])] if isinstance(lrm, tuple) else [lrm, "", ""])
        cells.append(f"{rss[(st, s)]['dir']:.0f} / {rss[(st, s)]['tar']:.0f}")
        print("| " + " | ".join(cells) + " |")

    lo, hi = min(seconds), max(seconds)
    print(f"\npeak RSS (VmHWM of a fresh interpreter per conversion; after the imports alone {base_rss:.0f} MiB), "
          f"{lo:g} s bag against {hi:g} s bag:\n")
    print(f"| storage | conversion | bag MB {lo:g} s / {hi:g} s | peak MiB {lo:g} s | peak MiB {hi:g} s | ratio | growth MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    sizes = {(st, s): mb for st, s, _, mb, _ in rows}
    for st in storages:
        for k in rss[(st, lo)]:
            a, b = rss[(st, lo)][k], rss[(st, hi)][k]
            print(f"| {st} | {k} | {sizes[(st, lo)]:.0f} / {sizes[(st, hi)]:.0f} | {a:.0f} | {b:.0f} | "
                  f"{b / a:.2f}x | {b - a:+.1f} |")
    for fmt in ("dir", "tar") if args.profile else ():
        _profile(next(iter(bags.values())), work, fmt, args.profile)


def _profile(path: Path, work: Path, fmt: str, top: int) -> None:
    import cProfile
    import pstats

    out, prof = work / "out_profile", cProfile.Profile()
    prof.enable()
    run(fmt, path, out)
    prof.disable()
    shutil.rmtree(out, ignore_errors=True)
    print(f"\ncProfile of one openarm {fmt} conversion of {path.name} (top {top} by own time):\n")
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    main()
