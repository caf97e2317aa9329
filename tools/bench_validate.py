"""Benchmark validation's costly checks against their floors, measured in the same run.

    python tools/bench_validate.py [--episodes 2] [--repeats 5] [--data DIR] [--only replay|render|integrity|added]
    python tools/bench_validate.py --only full --baseline SRC [--episodes 10] [--repeats 3] [--data DIR]

Generates (or reuses under --data) a small simulated dataset, then measures (medians of --repeats
interleaved runs):
  * replay:    ``sim.replay.replay`` (mj_step + bit-exact comparison of qpos/qvel at every frame) vs a
               bare Python loop of ``data.ctrl[:] = ctrl[s]; mj_step`` over the same commands
               (steps/s; target >= 0.7x);
  * sim_render: the ``sim_render`` check (set state, render RGB, re-encode JPEG, compare bytes) vs
               the bare render floor of the same frames (set state + RGB render only, same renderer);
               cost ratio (target <= 1.2x);
  * integrity: the ``integrity`` check (manifest read, stat, SHA-256 of every file in threads) vs
               ``sha256sum`` over the same files (one process, as many paths per call as fit);
               MB/s ratio (target >= 0.8x). Both read from the page cache (files read once before).
  * full:      (only with ``--only full``) a whole ``dataset-validate DIR --no-update-metadata`` as a process
               with this checkout vs with the source tree ``--baseline`` (e.g. ``git archive <commit>``
               unpacked), interleaved, on the same dataset: wall seconds and the ratio (what the
               checks this checkout adds cost; target <= 1.10x for issue 18's).
  * added:     the whole validation (every check, as ``dataset-validate``) with and without the checks
               of physical consistency and JPEG encoding (validate/physics.py, validate/encoding.py),
               interleaved: the time they add, as a ratio (e.g. ``--episodes 10 --only added``).
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

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402

from openarm_sim_dataset import (  # noqa: E402
    Dataset,
    layout,
    manifest,  # noqa: E402
    sidecar,
)
from openarm_sim_dataset.sim.generate import GenerateConfig, generate  # noqa: E402
from openarm_sim_dataset.sim.replay import replay  # noqa: E402
from openarm_sim_dataset.validate import simulation as sim_checks  # noqa: E402
from openarm_sim_dataset.validate.core import Context, Thresholds  # noqa: E402
from openarm_sim_dataset.validate.simulation import model as stored_model  # noqa: E402


def raw_steps(model: mujoco.MjModel, side: dict) -> int:
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, side["initial_state"], mujoco.mjtState.mjSTATE_INTEGRATION)
    ctrl = side["physics_ctrl"]
    for s in range(len(ctrl)):
        data.ctrl[:] = ctrl[s]
        mujoco.mj_step(model, data)
    return len(ctrl)


def render_floor(r, sides: list[dict]) -> int:
    """Set each stored frame state and render RGB of every camera: nothing else."""
    data = mujoco.MjData(r.model)
    n = 0
    for side in sides:
        for state in side["state"]:
            mujoco.mj_setState(r.model, data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
            mujoco.mj_kinematics(r.model, data)
            mujoco.mj_camlight(r.model, data)
            for cam in r.cameras:
                r.render(data, cam, depth=False, labels=False)
                n += 1
    return n


def bench_render(ds: Dataset, repeats: int) -> None:
    ctx = Context(ds, ds.episode_ids, Thresholds())
    r = sim_checks.renderer(ctx)  # created once (as in validation), outside the timing
    sides = [ctx.sidecar(ep) for ep in ds.episode_ids]
    render_floor(r, sides[:1])  # warm up the GL pipeline
    floor_t, check_t = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        frames = render_floor(r, sides)
        floor_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        out = sim_checks.check_sim_render(Context(ds, ds.episode_ids, Thresholds()))
        check_t.append(time.perf_counter() - t)
        assert out.passed, out.detail
    f, c = statistics.median(floor_t), statistics.median(check_t)
    print(f"render floor     : {frames / f:10.1f} frames/s ({frames} camera frames, {r.width}x{r.height})")
    print(f"sim_render check : {frames / c:10.1f} frames/s   cost ratio {c / f:.2f}x (target <= 1.2x)")


def bench_integrity(ds: Dataset, repeats: int) -> None:
    root = ds.root
    files = [layout.episode_dir(root, ep) / rel for ep in ds.episode_ids for rel in manifest.read(layout.episode_dir(root, ep))]
    total = sum(f.stat().st_size for f in files)
    for f in files:  # both sides read from the page cache
        f.read_bytes()
    ctx = Context(ds, ds.episode_ids, Thresholds())
    from openarm_sim_dataset.validate.integrity import check_integrity

    ours_t, ref_t = [], []
    rel = [str(f.relative_to(root)) for f in files]
    for _ in range(repeats):
        t = time.perf_counter()
        out = check_integrity(ctx)
        ours_t.append(time.perf_counter() - t)
        assert out.passed, out.detail
        t = time.perf_counter()
        for i in range(0, len(rel), 2000):
            subprocess.run(["sha256sum", "--", *rel[i:i + 2000]], cwd=root, check=True, stdout=subprocess.DEVNULL)
        ref_t.append(time.perf_counter() - t)
    o, r_ = statistics.median(ours_t), statistics.median(ref_t)
    print(f"sha256sum        : {total / 1e6 / r_:10.1f} MB/s ({len(files)} files, {total / 1e6:.1f} MB)")
    print(f"integrity check  : {total / 1e6 / o:10.1f} MB/s   ratio {r_ / o:.2f}x (target >= 0.8x)")


def bench_full(path: Path, baseline: Path, repeats: int) -> None:
    """Wall time of a whole validation process, this checkout vs ``baseline`` (medians, interleaved)."""
    here = Path(__file__).resolve().parents[1]
    times: dict[str, list[float]] = {"baseline": [], "this checkout": []}
    rows: dict[str, int] = {}
    for _ in range(repeats):
        for name, src in (("baseline", baseline), ("this checkout", here)):
            env = dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="1")
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "openarm_sim_dataset.cli.validate", str(path), "--no-update-metadata",
                                "--json"], env=env, capture_output=True, text=True,
                               cwd=src)  # python -m puts the working folder first on the path
            times[name].append(time.perf_counter() - t)
            if r.returncode not in (0, 1) or not r.stdout.strip():
                raise SystemExit(f"{name}: dataset-validate exited {r.returncode}: {r.stderr.strip()[-300:]}")
            rows[name] = len(json.loads(r.stdout)["rows"])
    b, h = statistics.median(times["baseline"]), statistics.median(times["this checkout"])
    print(f"full validation  : baseline {b:.1f} s ({rows['baseline']} checks), this checkout {h:.1f} s "
          f"({rows['this checkout']} checks), ratio {h / b:.3f}x ({(h - b) / b:+.1%}); medians of {repeats}, "
          f"load {os.getloadavg()[0]:.2f}")
def bench_added(ds: Dataset, repeats: int) -> None:
    from openarm_sim_dataset.validate import validate
    from openarm_sim_dataset.validate.encoding import ENCODING_CHECKS
    from openarm_sim_dataset.validate.physics import PHYSICS_CHECKS

    added = [n for n, _ in PHYSICS_CHECKS + ENCODING_CHECKS]
    every = [r.check for r in validate(ds)]  # also warms the caches (model, page cache, GL)
    before = [n for n in every if n not in added]
    with_t, without_t, alone_t = [], [], []
    for _ in range(repeats):  # interleaved so both see the same machine load
        t = time.perf_counter()
        rows = validate(ds, checks=before)
        without_t.append(time.perf_counter() - t)
        assert rows.valid, [(r.check, r.detail) for r in rows if r.failed]
        t = time.perf_counter()
        rows = validate(ds)
        with_t.append(time.perf_counter() - t)
        assert rows.valid, [(r.check, r.detail) for r in rows if r.failed]
        t = time.perf_counter()
        validate(ds, checks=added)
        alone_t.append(time.perf_counter() - t)
    w, wo, a = statistics.median(with_t), statistics.median(without_t), statistics.median(alone_t)
    print(f"validation without {', '.join(added)}: {wo:8.2f} s ({len(before)} checks)")
    print(f"validation with them                  : {w:8.2f} s   ratio {w / wo:.3f}x; the {len(added)} checks alone "
          f"{a:.2f} s ({a / wo * 100:.1f} % of the rest)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", type=Path, help="dataset folder to reuse or create")
    ap.add_argument("--only", choices=("replay", "render", "integrity", "added", "full"), help="run one of the benchmarks")
    ap.add_argument("--baseline", type=Path, help="source tree to compare a full validation with (--only full)")
    args = ap.parse_args()
    if args.only == "full" and args.baseline is None:
        ap.error("--only full needs --baseline SRC")
    tmp = tempfile.TemporaryDirectory() if args.data is None else None
    path = args.data or Path(tmp.name) / "ds"
    if not (path / layout.METADATA_FILE).exists():
        generate(path, range(args.episodes), GenerateConfig(seed=10))
    ds = Dataset(path)
    print(f"{ds.num_episodes} episodes at {path}, load {os.getloadavg()[0]:.2f}")
    if args.only == "full":
        return bench_full(path, args.baseline, args.repeats)
    if args.only in (None, "added"):
        bench_added(ds, args.repeats)
    if args.only in (None, "render"):
        bench_render(ds, args.repeats)
    if args.only in (None, "integrity"):
        bench_integrity(ds, args.repeats)
    if args.only not in (None, "replay"):
        return
    model = stored_model(Context(ds, ds.episode_ids, Thresholds()))
    sides = [sidecar.load_npz(layout.sim_dir(path, ep) / sidecar.SIDECAR_FILE) for ep in ds.episode_ids]
    steps = sum(len(s["physics_ctrl"]) for s in sides)
    raw_t, rep_t = [], []
    for _ in range(args.repeats):  # interleaved so both see the same machine load
        t = time.perf_counter()
        for s in sides:
            raw_steps(model, s)
        raw_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        for s in sides:
            assert replay(model, s).ok
        rep_t.append(time.perf_counter() - t)
    raw = steps / statistics.median(raw_t)
    rep = steps / statistics.median(rep_t)
    print(f"{len(sides)} episodes, {steps} physics steps, {args.repeats} repeats (medians), load {os.getloadavg()[0]:.2f}")
    print(f"raw mj_step loop : {raw:10.0f} steps/s")
    print(f"replay + compare : {rep:10.0f} steps/s   ratio {rep / raw:.2f}x (target >= 0.7x)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
