"""Benchmark ``Dataset.sample`` against openarm_dataset 0.4.0 on one synthetic 0.4.0 dataset.

    /work/venv/bin/python tools/bench_sample.py [--episodes 10] [--seconds 10] [--quick] [--data DIR]

Builds the dataset once (in a temporary folder, or reused/created under ``--data``), then in the
same run measures samples/s of ours (``Dataset(path).sample(hz, align=...)`` iterated fully) and of
openarm_dataset (``for ep in d.meta.episodes: for s in d.sample(hz, ep)``) at 30 Hz and 5 Hz,
without decoding (ours: lazy Frames; ref: its Frame objects) and with JPEG decoding (ours:
``decode=True``; ref: ``frame.load()`` on every camera frame of every sample). Each figure is the
median of several runs. Peak RSS is measured per configuration in a fresh subprocess, for ours on
a 2-episode and on the full dataset (it must not grow with the number of episodes).

With decoding, ours is also set against the JPEG decode limit: the bare decode of the very JPEG
files its ``decode=True`` run decodes (listed beforehand, each camera's repeat in consecutive samples
once, as that run decodes it), in that order, on one thread, with the decoder ``sample`` uses
(``decode_jpeg`` of the file's bytes) and no sampling: the limit's samples/s is the run's sample count
over that time. Its runs are interleaved with ours.

Targets (issue): >= 20x without decode at every row; with decode, at the JPEG decode limit (ours/limit
>= 1.0x; decoding runs on a thread per CPU); RSS flat in episodes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

HZS = (30.0, 5.0)
SYNTH = dict(state_hz=250, camera_hz=30, cameras=("head", "wrist_right"), size=(320, 240), jitter_ns=200_000)


def build(root: Path, episodes: int, seconds: float) -> Path:
    """The synthetic dataset for (episodes, seconds) under ``root``, written if not there yet.

    Written by a subprocess: this process must stay small until the peak-RSS children are spawned.
    """
    out = root / f"synthetic_e{episodes}_s{seconds:g}"
    if not (out / "metadata.yaml").is_file():
        t0 = time.perf_counter()
        code = ("import sys; from openarm_sim_dataset.synthetic import write_synthetic;"
                f"write_synthetic(sys.argv[1], episodes={episodes}, seconds={seconds!r}, **{SYNTH!r})")
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=_env())
        print(f"# built {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


# ------------------------------------------------------------------------------------- one run
def run_ours(path: Path, hz: float, align: str, decode: bool) -> int:
    from openarm_sim_dataset import Dataset

    n = 0
    for _s in Dataset(path).sample(hz, align=align, decode=decode):
        n += 1
    return n


def run_ref(path: Path, hz: float, decode: bool) -> int:
    import openarm_dataset as od

    d = od.Dataset(path)
    n = 0
    for ep in d.meta.episodes:
        for s in d.sample(hz, ep):
            if decode:
                for frame in s.cameras.values():
                    frame.load()
            n += 1
    return n


def decode_list(path: Path, hz: float, align: str) -> tuple[int, list[str]]:
    """(samples, the JPEG files ``sample(hz, align=align, decode=True)`` decodes, in the order it asks
    for them): per sample each camera's frame, unless it is that camera's frame of the sample before
    (decoded once). Found by sampling without decoding, before any timing."""
    from openarm_sim_dataset import Dataset

    n, files, last = 0, [], {}
    for s in Dataset(path).sample(hz, align=align):
        n += 1
        for name, frame in s.cameras.items():
            if last.get((s.episode, name)) != frame.index:
                last[(s.episode, name)] = frame.index
                files.append(str(frame.path))
    return n, files


def run_limit(files: list[str]) -> None:
    """The bare decode of ``files``, in order, on this thread: read and ``decode_jpeg``, as a frame's
    ``load()`` does."""
    from openarm_sim_dataset.core.camera import decode_jpeg

    for f in files:
        with open(f, "rb") as fh:
            decode_jpeg(fh.read(), f)


def run(which: str, path: Path, hz: float, align: str, decode: bool) -> int:
    return run_ours(path, hz, align, decode) if which == "ours" else run_ref(path, hz, decode)


def timed(which: str, path: Path, hz: float, align: str, decode: bool) -> tuple[int, float, float]:
    """(samples, samples/s, process CPU seconds) of one run."""
    t0, c0 = time.perf_counter(), time.process_time()
    n = run(which, path, hz, align, decode)
    return n, n / (time.perf_counter() - t0), time.process_time() - c0


def timed_limit(n: int, files: list[str]) -> tuple[int, float, float]:
    """(samples, samples/s, process CPU seconds) of the decode limit of a run of ``n`` samples."""
    t0, c0 = time.perf_counter(), time.process_time()
    run_limit(files)
    return n, n / (time.perf_counter() - t0), time.process_time() - c0


def measure(path: Path, hz: float, decode: bool, r_ours: int, r_ref: int) -> dict:
    """Interleaved repeats (ref, ours next, ours previous, ... and with decode the decode limit of each
    alignment) so that all see the same machine load; per key the sample count, the median samples/s
    and the median CPU seconds."""
    keys = [("ours", "next"), ("ours", "previous")]
    limits = {align: decode_list(path, hz, align) for align in ("next", "previous")} if decode else {}
    keys += [("limit", align) for align in limits]
    runs: dict = {k: [] for k in [("ref", "next"), *keys]}
    for r in range(max(r_ours, r_ref)):
        todo = ([("ref", "next")] if r < r_ref else []) + keys[:: 1 if r % 2 else -1]
        for which, align in (todo if r < r_ours else [("ref", "next")]):
            runs[(which, align)].append(timed_limit(*limits[align]) if which == "limit"
                                        else timed(which, path, hz, align, decode))
    out = {}
    for k, rs in runs.items():
        counts = {n for n, _, _ in rs}
        if len(counts) != 1:
            raise RuntimeError(f"{k} gave different sample counts: {counts}")
        out[k] = (counts.pop(), statistics.median(r for _, r, _ in rs), statistics.median(c for _, _, c in rs))
    if out[("ours", "next")][0] != out[("ref", "next")][0]:
        raise RuntimeError(f"at {hz} Hz ours (align=next) gave {out[('ours', 'next')][0]} samples, ref {out[('ref', 'next')][0]}")
    return out


# ----------------------------------------------------------------------------------- peak RSS
# ru_maxrss of a child is at least the parent's RSS when it was spawned (the high-water mark survives
# fork/vfork + exec on Linux), so the children are spawned before this process imports pandas etc.
def child(spec: str, path: Path) -> None:
    which, hz, align, decode = spec.split(":")
    t0 = time.perf_counter()
    n = run(which, path, float(hz), align, decode == "1")
    dt = time.perf_counter() - t0
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"samples": n, "seconds": dt, "maxrss_kb": rss_kb}))


def peak_rss(which: str, path: Path, hz: float, align: str, decode: bool) -> int:
    """ru_maxrss (KiB) of a fresh interpreter that runs one configuration once."""
    spec = f"{which}:{hz}:{align}:{int(decode)}"
    out = subprocess.run([sys.executable, __file__, "--child", spec, "--data", str(path)],
                         check=True, capture_output=True, text=True, env=_env())
    return json.loads(out.stdout.strip().splitlines()[-1])["maxrss_kb"]


def import_rss(module: str) -> int:
    """ru_maxrss (KiB) of a fresh interpreter that only imported ``module``."""
    code = f"import resource, {module}; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    return int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=_env()).stdout)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def rss_table(small: Path, path: Path, small_eps: int, episodes: int, with_ref: bool) -> list[str]:
    mib = 1024.0
    lines = [f"peak RSS, ru_maxrss of a fresh subprocess per configuration (after imports only: ours "
             f"{import_rss('openarm_sim_dataset') / mib:.0f} MiB, ref {import_rss('openarm_dataset') / mib:.0f} MiB)"]
    head = f"{'impl':<6}{'decode':<8}{'hz':>4}  {f'{small_eps} episodes':>12}  {f'{episodes} episodes':>12}  {'growth':>9}"
    lines += [head, "-" * len(head)]
    growth = []
    configs = [("ours", d, hz) for d in (False, True) for hz in HZS]
    if with_ref:
        configs += [("ref", d, 30.0) for d in (False, True)]
    for which, decode, hz in configs:
        a, b = peak_rss(which, small, hz, "next", decode), peak_rss(which, path, hz, "next", decode)
        if which == "ours":
            growth.append(b - a)
        lines.append(f"{which:<6}{'yes' if decode else 'no':<8}{hz:>4g}  {a / mib:>8.1f} MiB  {b / mib:>8.1f} MiB  "
                     f"{(b - a) / mib:>+5.1f} MiB")
    worst = max(growth) / mib
    lines.append(f"ours: largest peak-RSS growth {small_eps} -> {episodes} episodes {worst:+.1f} MiB "
                 f"({'independent of the number of episodes' if worst < 8 else 'GROWS with episodes'}; < 8 MiB counts as flat)")
    return lines


# ------------------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true", help="fewer repeats (ours 3, ref 1), no ref RSS runs")
    ap.add_argument("--repeats", type=int, help="repeats of ours (ref: about half, at least 1)")
    ap.add_argument("--data", help="folder to keep/reuse the synthetic datasets in (default: a temp dir)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, Path(args.data))

    tmp = None
    if args.data:
        root = Path(args.data)
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_sample_")
        root = Path(tmp.name)
    try:
        _bench(root, args)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _bench(root: Path, args) -> None:
    path = build(root, args.episodes, args.seconds)
    small_eps = min(2, args.episodes)
    small = build(root, small_eps, args.seconds)
    rss = rss_table(small, path, small_eps, args.episodes, with_ref=not args.quick)  # before the heavy imports

    import openarm_dataset
    import PIL

    r_ours = args.repeats or (3 if args.quick else 5)
    r_ref = 1 if args.quick and not args.repeats else max(1, (r_ours + 1) // 2)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        from importlib.metadata import version
        ref_version = version("openarm_dataset")
    except Exception:  # noqa: BLE001
        ref_version = getattr(openarm_dataset, "__version__", "?")
    print(f"dataset: {args.episodes} episodes x {args.seconds:g} s, state 250 Hz, cameras head + wrist_right 320x240 "
          f"@ 30 Hz, jitter 0.2 ms\n{cpus} CPUs, load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}, "
          f"openarm_dataset {ref_version}, Pillow {PIL.__version__}")
    print(f"runs interleaved, medians of ours {r_ours} / ref {r_ref}; ref aligns like align=next; "
          f"cpu = ref CPU s / ours CPU s per run\n")

    head = (f"{'decode':<8}{'hz':>4}  {'align':<9}{'samples':>8}  {'ours/s':>9}  {'ref/s':>8}  {'ours/ref':>8}  {'cpu':>6}"
            f"  {'limit/s':>8}  {'ours/limit':>10}")
    print(head)
    print("-" * len(head))
    ratios, vs_limit = {}, {}
    for decode in (False, True):
        for hz in HZS:
            m = measure(path, hz, decode, r_ours, r_ref)
            _, ref_rate, ref_cpu = m[("ref", "next")]
            for align in ("next", "previous"):
                n, rate, cpu = m[("ours", align)]
                ratios[(decode, hz, align)] = rate / ref_rate
                limit = ""
                if decode:
                    limit_rate = m[("limit", align)][1]
                    vs_limit[(hz, align)] = rate / limit_rate
                    limit = f"  {limit_rate:>8.0f}  {rate / limit_rate:>9.2f}x"
                print(f"{'yes' if decode else 'no':<8}{hz:>4g}  {align:<9}{n:>8}  {rate:>9.0f}  {ref_rate:>8.0f}  "
                      f"{rate / ref_rate:>7.2f}x  {ref_cpu / cpu:>5.2f}x{limit}", flush=True)
    nodec = min(r for (d, _, _), r in ratios.items() if not d)
    dec = min(r for (d, _, _), r in ratios.items() if d)
    lim = min(vs_limit.values())
    print(f"\nlowest ours/ref without decode: {nodec:.2f}x (target >= 20x at every row: {'met' if nodec >= 20 else 'MISSED'})")
    print(f"lowest ours/ref with decode:    {dec:.2f}x")
    print(f"lowest ours/limit with decode:  {lim:.2f}x (limit: the bare decode of the same JPEG files on one thread; "
          f"target at the limit, >= 1.0x: {'met' if lim >= 1.0 else 'MISSED'}; load average now {os.getloadavg()[0]:.2f})\n")
    print("\n".join(rss))


if __name__ == "__main__":
    main()
