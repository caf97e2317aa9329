"""What does each operation cost per episode at 10, 1,000, 10,000 (and 100,000) episodes?

The curve a user reads before a big run. Datasets of N episodes are built from a small generated one
(``--source``, default: 2 episodes of ``dataset-generate --episodes 2``, default cameras, made in the
work folder, once per camera format): real episode folders made of hard links (real files and sizes,
no simulation), listed under ids 0..N-1 in a metadata.yaml written by the package. The 100,000 size is
metadata-only (no folders): enough for opening and committing, which never look at episode files.

Each operation runs as a fresh process (what a person waits for); the figure is its own elapsed time,
measured inside the process around the call (interpreter start excluded) except for the CLIs, which
are timed whole:
  * ``open``: ``Dataset(path)`` (through the metadata index, as written by the package)
  * ``open, no index``: the same with ``metadata.index.json`` hidden and the index cache off (the
    YAML parsed as before the index existed): the baseline of the same run
  * ``first sample``: ``Dataset(path).sample(hz=5)[0]``
  * ``dataset-info, from the files``: ``dataset_info`` with the episode summaries ignored (every
    episode's streams, cameras and sizes read, as before the summaries): the baseline of the same run
  * ``dataset-info --json``, ``dataset-validate --quick``, ``dataset-merge --link`` (CLIs; merge of the
    N-episode dataset with the 2-episode source, ``--allow-duplicates`` as they share episodes)
  * ``validate-memory`` (only when asked, ``--only validate-memory``): ``dataset-validate --quick`` by a
    driver that reports its own peak RSS (``VmHWM``, its workers excluded): in its own process
    (``w1``), with ``--workers 2`` (``w2``) and with ``--ray`` on a local cluster of two nodes of one CPU
    each (``ray``): seconds per episode and the driver's peak RSS in MB (the "seconds" column)
    With ``--validate-full``, the same drivers run the full validation (every check, the physics
    replay and the re-render included) instead of ``--quick``.
  * ``commit``: in one process, physics-only episodes committed into the N-episode dataset through the
    writers' path (``writer.commit_episode``) for at least 100 commits and 25 s: mean per episode with
    the journal's folds during the run (every 10 s at this size), the median, and the writer's end (the
    last fold and the index) apart; baseline: one whole rewrite of metadata.yaml at N
    (``Metadata.write``), which is what every commit paid before the journal.

Usage: PYTHONPATH=. python tools/bench_scale.py [--sizes 10 1000 10000] [--meta-sizes 100000]
          [--formats dir tar] [--validate-max 1000] [--only open sample info validate merge commit]
          [--work DIR] [--json OUT] [--plot PNG]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BIN = Path(sys.executable).parent


def make_source(work: Path, fmt: str) -> Path:
    out = work / f"source-{fmt}"
    if not (out / "metadata.yaml").exists():
        subprocess.run([str(BIN / "dataset-generate"), "--out", str(out), "--episodes", "2", "--seed", "0",
                        "--camera-format", fmt, "--quiet"], check=True, stdout=subprocess.DEVNULL)
    return out


def build(source: Path, out: Path, n: int, folders: bool = True) -> None:
    """An n-episode dataset of hard links of ``source``'s episodes (metadata only without ``folders``)."""
    from openarm_sim_dataset import Dataset, layout

    ds = Dataset(source)
    files = []
    for ep in ds.episodes:
        src_dir = ds.episode_path(ep)
        files.append([(p.relative_to(src_dir), p) for p in sorted(src_dir.rglob("*")) if p.is_file()])
    if folders:
        for i in range(n):
            dst = layout.episode_dir(out, str(i))
            made = set()
            for rel, p in files[i % len(files)]:
                parent = dst / rel.parent
                if parent not in made:
                    parent.mkdir(parents=True, exist_ok=True)
                    made.add(parent)
                os.link(p, dst / rel)
    meta = ds.meta.copy()
    meta.data["episodes"] = [dict(ds.episodes[i % len(files)], id=str(i)) for i in range(n)]
    out.mkdir(parents=True, exist_ok=True)
    meta.write(out)


SNIPPETS = {
    "open": "from openarm_sim_dataset import Dataset\nt=time.perf_counter(); ds=Dataset(P); t=time.perf_counter()-t",
    # dataset-info as before the episode summaries: every episode read from its files (same code otherwise)
    "info from files": ("from openarm_sim_dataset import episode_summary, info\nepisode_summary.read=lambda d: None\n"
                        "t=time.perf_counter(); info.dataset_info(P); t=time.perf_counter()-t"),
    "first sample": ("from openarm_sim_dataset import Dataset\nt=time.perf_counter(); s=Dataset(P).sample(hz=5)[0]; "
                     "t=time.perf_counter()-t"),
}


#: operations --only can select
OPS = ("open", "sample", "info", "validate", "validate-memory", "merge", "commit")

#: the driver of ``dataset-validate``, timed inside the process, with its own peak RSS (workers excluded):
#: VmHWM, the peak of this process's memory map, which exec starts anew; not ``ru_maxrss``, which
#: survives exec and so reported the bench's own RSS at the fork (211 MB at 10,000 episodes, where the
#: driver itself peaks at 98 MB)
VALIDATE_DRIVER = """import resource, sys, time
from openarm_sim_dataset.cli import validate
t = time.perf_counter()
code = validate.main(sys.argv[1:])
t = time.perf_counter() - t
try:
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
except (OSError, StopIteration):
    hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(t, hwm, code)
"""


def validate_driver(path: Path, env: dict, extra: list[str], quick: bool = True) -> tuple[float, float]:
    """(seconds, the driver's peak RSS in MB) of ``dataset-validate PATH [--quick] --no-update-metadata EXTRA``."""
    r = subprocess.run([sys.executable, "-c", VALIDATE_DRIVER, str(path), *(["--quick"] if quick else []),
                        "--no-update-metadata", *extra],
                       capture_output=True, text=True, env=env)
    last = r.stdout.strip().splitlines()[-1].split() if r.stdout.strip() else []
    if len(last) != 3 or last[2] not in ("0", "1"):
        raise SystemExit(f"dataset-validate {path} {' '.join(extra)}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return float(last[0]), float(last[1])


class LocalCluster:
    """A local Ray cluster of two nodes of one CPU each (``ray.cluster_utils.Cluster``): its address."""

    def __enter__(self) -> str:
        os.environ["RAY_AUTH_MODE"] = "disabled"  # a test cluster on one machine, as tests/test_ray.py
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        self.cluster.add_node(num_cpus=1)
        self.cluster.wait_for_nodes()
        return self.cluster.address

    def __exit__(self, *exc) -> None:
        self.cluster.shutdown()


def in_process(what: str, path: Path, env: dict) -> float:
    import resource

    code = f"import time\nP={str(path)!r}\n{SNIPPETS[what]}\nprint(t)"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(r.stdout.strip().splitlines()[-1])


#: CPU seconds (user + system) of the last :func:`timed` command and the processes it waited for
LAST_CPU = [0.0]


def timed(cmd: list[str], env: dict, ok=(0,)) -> float:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    if r.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall


def open_without_index(path: Path, env: dict) -> float:
    from openarm_sim_dataset import layout

    index = path / layout.METADATA_INDEX_FILE
    hidden = path.parent / (path.name + ".index-hidden")
    moved = index.exists()
    if moved:
        index.rename(hidden)
    try:
        return in_process("open", path, dict(env, OPENARM_SIM_INDEX_CACHE="off"))
    finally:
        if moved:
            hidden.rename(index)


def commit_cost(source: Path, path: Path, k: int = 100, seconds: float = 25.0) -> tuple[float, float, float, float]:
    """(mean s per commit with the journal's folds during the run, median s per commit, the writer's
    end (last fold + index), one whole rewrite at N). At least ``k`` commits and ``seconds`` of them, so
    that folds due by time (every 10 s) fall inside the run."""
    from openarm_sim_dataset import Dataset, Metadata
    from openarm_sim_dataset.writer import EpisodeData, close_log, commit_episode

    ds = Dataset(source)
    data = ds.episode_data(0)
    data = EpisodeData(obs=data.obs, action=data.action, files=data.files)  # physics only
    entry = dict(ds.episodes[0])
    meta = Metadata.load(path)
    n = meta.num_episodes
    t0 = time.perf_counter()
    meta.copy().write(path)  # the baseline: what each commit cost before (a whole rewrite)
    rewrite = time.perf_counter() - t0
    meta = Metadata.load(path)
    # the writer's one-time start (adopting metadata.yaml's rendered entries) is not a commit
    from openarm_sim_dataset.journal import episode_log

    episode_log(path, meta)
    times = []
    t_all = time.perf_counter()
    i = 0
    while i < k or time.perf_counter() - t_all < seconds:
        t0 = time.perf_counter()
        commit_episode(path, meta, dict(entry, id=str(n + i)), data)
        times.append(time.perf_counter() - t0)
        i += 1
    total = time.perf_counter() - t_all
    t0 = time.perf_counter()
    close_log(path, meta)
    end = time.perf_counter() - t0
    return total / len(times), statistics.median(times), end, rewrite


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 1000, 10000])
    ap.add_argument("--meta-sizes", type=int, nargs="*", default=[100000],
                    help="metadata-only sizes (open and commit only)")
    ap.add_argument("--formats", nargs="+", default=["dir", "tar"], choices=["dir", "tar"])
    ap.add_argument("--validate-max", type=int, default=1000, help="largest N validated (--quick)")
    ap.add_argument("--only", nargs="+", choices=OPS, help="only these operations (default: all but "
                                                            "validate-memory)")
    ap.add_argument("--validate-checks", nargs="+", help="validate-memory: only these checks (--checks)")
    ap.add_argument("--validate-modes", nargs="+", default=["w1", "w2", "ray"], choices=["w1", "w2", "ray"],
                    help="validate-memory: in the driver's process (w1), --workers 2 (w2), --ray on a local "
                         "cluster of 2 nodes of 1 CPU (ray)")
    ap.add_argument("--validate-full", action="store_true",
                    help="validate-memory: the full validation (every check: replay, render, pixels) instead of "
                         "--quick")
    ap.add_argument("--work", help="work folder (kept; default: a temporary one, removed)")
    ap.add_argument("--json", help="write the figures as JSON here")
    ap.add_argument("--plot", help="write the per-episode curves as a PNG here (needs matplotlib)")
    args = ap.parse_args()

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench_scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENARM_SIM_INDEX_CACHE=str(work / "index-cache"))
    rows = []  # (format, N, operation, seconds, seconds per episode)

    def record(fmt: str, n: int, op: str, s: float, per: float | None = None) -> None:
        per = s / n if per is None else per
        rows.append({"format": fmt, "n": n, "op": op, "seconds": s, "per_episode_ms": per * 1e3})
        print(f"{fmt:>4} {n:>7} {op:<26} {s:9.3f} s  {per * 1e3:9.3f} ms/episode", flush=True)

    def record_commits(fmt: str, n: int, source: Path, path: Path) -> None:
        figures = commit_cost(source, path)
        for op, s in zip(("commit", "commit (median)", "writer's end", "rewrite (before)"), figures):
            record(fmt, n, op, s, s)

    def want(op: str) -> bool:
        return op in args.only if args.only else op != "validate-memory"

    try:
        for fmt in args.formats:
            source = make_source(work, fmt)
            for n in args.sizes:
                path = work / f"{fmt}-{n}"
                if path.exists():
                    shutil.rmtree(path)
                t0 = time.perf_counter()
                build(source, path, n)
                print(f"built {path.name}: {n} episodes in {time.perf_counter() - t0:.1f} s", flush=True)
                if want("open"):
                    record(fmt, n, "open", in_process("open", path, env))
                    record(fmt, n, "open, no index", open_without_index(path, env))
                if want("sample"):
                    record(fmt, n, "first sample", in_process("first sample", path, env))
                if want("info"):
                    record(fmt, n, "dataset-info --json", timed([str(BIN / "dataset-info"), str(path), "--json"], env))
                    record(fmt, n, "dataset-info --json, CPU", LAST_CPU[0])  # on a shared machine: what it costs
                    record(fmt, n, "dataset-info, from the files", in_process("info from files", path, env))
                    record(fmt, n, "dataset-info, from the files, CPU", LAST_CPU[0])
                if want("validate") and n <= args.validate_max:
                    record(fmt, n, "dataset-validate --quick",
                           timed([str(BIN / "dataset-validate"), str(path), "--quick", "--no-update-metadata"], env))
                if want("validate-memory") and n <= args.validate_max:
                    quick = not args.validate_full
                    for mode in args.validate_modes:
                        extra = {"w1": [], "w2": ["--workers", "2"]}.get(mode)
                        checks = ["--checks", *args.validate_checks] if args.validate_checks else []
                        if extra is None:
                            with LocalCluster() as address:
                                s, rss = validate_driver(path, dict(env, RAY_AUTH_MODE="disabled"),
                                                         ["--ray", address, *checks], quick)
                        else:
                            s, rss = validate_driver(path, env, extra + checks, quick)
                        record(fmt, n, f"dataset-validate {'--quick' if quick else '(full)'}, {mode}", s)
                        record(fmt, n, f"validate driver peak RSS MB, {mode}", rss, 0.0)
                if want("merge"):
                    merged = work / f"{fmt}-{n}-merged"
                    record(fmt, n, "dataset-merge --link",
                           timed([str(BIN / "dataset-merge"), str(path), str(source), "-o", str(merged), "--link",
                                  "--allow-duplicates"], env))
                    shutil.rmtree(merged, ignore_errors=True)
                if want("commit"):
                    record_commits(fmt, n, source, path)
                shutil.rmtree(path)
        fmt = args.formats[0]
        source = make_source(work, fmt)
        for n in args.meta_sizes if want("open") or want("commit") else ():
            path = work / f"meta-{n}"
            if path.exists():
                shutil.rmtree(path)
            t0 = time.perf_counter()
            build(source, path, n, folders=False)
            print(f"built {path.name}: {n} entries (metadata only) in {time.perf_counter() - t0:.1f} s", flush=True)
            record("meta", n, "open", in_process("open", path, env))
            record("meta", n, "open, no index", open_without_index(path, env))
            record_commits("meta", n, source, path)
            shutil.rmtree(path)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.plot:
        plot(rows, Path(args.plot))


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ops_total = ["open", "open, no index"]
    for ax, title, ops, key in (
            (axes[0], "cost per episode (ms): flat or falling = at most linear in N", None, "per_episode_ms"),
            (axes[1], "whole call (s): open and commit", ops_total + ["commit", "rewrite (before)", "writer's end"],
             "seconds")):
        series: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for r in rows:
            if "RSS" in r["op"]:
                continue
            if ops is None and r["op"] in ("commit (median)", "open, no index", "rewrite (before)", "writer's end"):
                continue
            if ops is not None and r["op"] not in ops:
                continue
            fmt = "metadata only" if r["format"] == "meta" else r["format"]
            series.setdefault((fmt, r["op"]), []).append((r["n"], r[key]))
        for (fmt, op), pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{op} ({fmt})",
                    linestyle={"dir": "-", "tar": "--"}.get(fmt, ":"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("episodes in the dataset (N)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
