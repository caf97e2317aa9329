"""Benchmark of the Gymnasium environment and the evaluator, against floors measured in the same run.

1. Environment steps/s (``OpenArmEnv.step`` at the control rate, the zero policy's held targets) without
   cameras against bare ``mj_step`` of the same number of physics steps on the same model and state, and
   with cameras against bare ``mj_step`` plus the render floor (``SimRenderer.render`` RGB of the same
   cameras, as many frames, after ``mj_kinematics``/``mj_camlight``). Ratio = env time / floor time
   (target <= 1.2 with cameras). Medians of ``--repeats`` runs, interleaved.
2. Evaluation wall time per episode of ``dataset-evaluate`` (library call, zero policy, recorded) with
   ``--workers 2`` against 1 on the same episodes (fresh outputs each).

    python tools/bench_env.py [--steps 20] [--repeats 5] [--episodes 4] [--max-time 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402


def bench_env(control_steps: int, repeats: int, width: int, height: int) -> dict:
    from openarm_sim_dataset.env import make
    from openarm_sim_dataset.sim.render import SimRenderer

    envs = {"off": make("pick_place", cameras=False), "on": make("pick_place", width=width, height=height)}
    cams = envs["on"].cameras
    times = {k: [] for k in ("env_off", "env_on", "bare", "bare_render")}
    sub = envs["off"].substeps
    for _ in range(repeats):
        for key, env in envs.items():
            obs, _ = env.reset(seed=0, options={"index": 0})
            hold = np.concatenate([obs["arms"][s]["qpos"] for s in ("right", "left")]).astype(np.float64)
            t0 = time.perf_counter()
            for _ in range(control_steps):
                env.step(hold)
            times[f"env_{key}"].append(time.perf_counter() - t0)
        # floors: the same physics on the same model from the same state, bare
        env = envs["on"]
        obs, _ = env.reset(seed=0, options={"index": 0})
        m, d = env.model, env.data
        # the very commands the environment applied (the zero policy's held targets): same physics
        ctrl = d.ctrl.copy()
        ctrl[env.action_index] = np.concatenate([obs["arms"][s]["qpos"] for s in ("right", "left")])
        renderer: SimRenderer = env.renderer()
        for key, render in (("bare", False), ("bare_render", True)):
            d2 = mujoco.MjData(m)
            mujoco.mj_copyData(d2, m, d)
            t0 = time.perf_counter()
            for _ in range(control_steps):
                for _ in range(sub):
                    d2.ctrl[:] = ctrl
                    mujoco.mj_step(m, d2)
                if render:
                    mujoco.mj_kinematics(m, d2)
                    mujoco.mj_camlight(m, d2)
                    for c in cams:
                        renderer.render(d2, c, rgb=True, depth=False, labels=False)
            times[key].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    n = control_steps * sub
    return {"control_steps": control_steps, "physics_steps": n, "cameras": list(cams), "size": f"{width}x{height}",
            "control_hz": envs["off"].control_hz,
            "steps_per_s": {"env_no_cameras": n / med["env_off"], "bare_mj_step": n / med["bare"],
                            "env_cameras": n / med["env_on"], "bare_mj_step_plus_render": n / med["bare_render"]},
            "control_steps_per_s": {"env_no_cameras": control_steps / med["env_off"],
                                    "env_cameras": control_steps / med["env_on"]},
            "ratio_no_cameras": med["env_off"] / med["bare"], "ratio_cameras": med["env_on"] / med["bare_render"]}


def bench_workers(episodes: int, max_time: float) -> dict:
    from openarm_sim_dataset.evaluate import evaluate, jobs_for
    from openarm_sim_dataset.sim.generate import GenerateConfig

    cfg = GenerateConfig(max_time=max_time)
    jobs = jobs_for(["pick_place"], episodes, 0)
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-env-") as d:
        for w in (1, 2):
            t0 = time.perf_counter()
            evaluate("zero", Path(d) / f"w{w}", jobs, cfg, workers=w)
            out[w] = (time.perf_counter() - t0) / episodes
            shutil.rmtree(Path(d) / f"w{w}")
    return {"episodes": episodes, "max_time_s": max_time, "seconds_per_episode": {"workers_1": out[1], "workers_2": out[2]},
            "speedup": out[1] / out[2], "cpus": os.cpu_count(),
            "load_avg_1min": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20, help="control steps per timed run (default 20 = 2 s simulated)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--size", default="160x120")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--max-time", type=float, default=4.0)
    ap.add_argument("--skip-workers", action="store_true")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    r = bench_env(args.steps, args.repeats, w, h)
    s = r["steps_per_s"]
    print(f"env, {r['control_hz']:g} Hz control, {r['physics_steps']} physics steps per run, median of {args.repeats}:")
    print(f"  no cameras: {s['env_no_cameras']:,.0f} physics steps/s vs bare mj_step {s['bare_mj_step']:,.0f} "
          f"-> {r['ratio_no_cameras']:.3f}x the floor")
    print(f"  cameras {' '.join(r['cameras'])} {r['size']}: {s['env_cameras']:,.0f} physics steps/s "
          f"({r['control_steps_per_s']['env_cameras']:.1f} control steps/s) vs mj_step + render "
          f"{s['bare_mj_step_plus_render']:,.0f} -> {r['ratio_cameras']:.3f}x the floor (target <= 1.2)")
    if not args.skip_workers:
        wr = bench_workers(args.episodes, args.max_time)
        spe = wr["seconds_per_episode"]
        print(f"dataset-evaluate (zero policy, recorded, {wr['max_time_s']:g} s episodes, {wr['episodes']} episodes): "
              f"{spe['workers_1']:.2f} s/episode with 1 worker, {spe['workers_2']:.2f} s with 2 "
              f"-> {wr['speedup']:.2f}x (load {wr['load_avg_1min']:.2f} on {wr['cpus']} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
