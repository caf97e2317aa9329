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
  * ``dataset-info --json``, ``dataset-validate --quick``, ``dataset-merge --link`` (CLIs; merge of the
    N-episode dataset with the 2-episode source, ``--allow-duplicates`` as they share episodes)
  * ``commit``: in one process, physics-only episodes committed into the N-episode dataset through the
    writers' path (``writer.commit_episode``) for at least 100 commits and 25 s: mean per episode with
    the journal's folds during the run (every 10 s at this size), the median, and the writer's end (the
    last fold and the index) apart; baseline: one whole rewrite of metadata.yaml at N
    (``Metadata.write``), which is what every commit paid before the journal.

Usage: PYTHONPATH=. python tools/bench_scale.py [--sizes 10 1000 10000] [--meta-sizes 100000]
          [--formats dir tar] [--validate-max 1000] [--work DIR] [--json OUT] [--plot PNG]
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
    "first sample": ("from openarm_sim_dataset import Dataset\nt=time.perf_counter(); s=Dataset(P).sample(hz=5)[0]; "
                     "t=time.perf_counter()-t"),
}


def in_process(what: str, path: Path, env: dict) -> float:
    code = f"import time\nP={str(path)!r}\n{SNIPPETS[what]}\nprint(t)"
    r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    return float(r.stdout.strip().splitlines()[-1])


def timed(cmd: list[str], env: dict, ok=(0,)) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    if r.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return time.perf_counter() - t0


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
                record(fmt, n, "open", in_process("open", path, env))
                record(fmt, n, "open, no index", open_without_index(path, env))
                record(fmt, n, "first sample", in_process("first sample", path, env))
                record(fmt, n, "dataset-info --json", timed([str(BIN / "dataset-info"), str(path), "--json"], env))
                if n <= args.validate_max:
                    record(fmt, n, "dataset-validate --quick",
                           timed([str(BIN / "dataset-validate"), str(path), "--quick", "--no-update-metadata"], env))
                merged = work / f"{fmt}-{n}-merged"
                record(fmt, n, "dataset-merge --link",
                       timed([str(BIN / "dataset-merge"), str(path), str(source), "-o", str(merged), "--link",
                              "--allow-duplicates"], env))
                shutil.rmtree(merged, ignore_errors=True)
                record_commits(fmt, n, source, path)
                shutil.rmtree(path)
        fmt = args.formats[0]
        source = make_source(work, fmt)
        for n in args.meta_sizes:
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
