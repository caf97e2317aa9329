"""Timing of the simulation core: planning, physics+controller loop, rendering.

Usage: PYTHONPATH=. python tools/sim_bench.py [--episodes 10] [--width 160 --height 120]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402

from openarm_sim_dataset.sim.pick_place import PickPlace, set_initial_state  # noqa: E402
from openarm_sim_dataset.sim.randomize import episode_params  # noqa: E402
from openarm_sim_dataset.sim.render import SimRenderer  # noqa: E402
from openarm_sim_dataset.sim.scene import SceneConfig, build_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--height", type=int, default=120)
    a = ap.parse_args()
    cfg = SceneConfig(width=a.width, height=a.height)
    t0 = time.perf_counter()
    model = build_model(cfg)
    print(f"build_model {1e3 * (time.perf_counter() - t0):.0f} ms")
    data = mujoco.MjData(model)
    t_plan = t_loop = 0.0
    steps = 0
    for i in range(a.episodes):
        p = episode_params(10, i)
        set_initial_state(model, data, p)
        ctl = PickPlace(model, p)
        t0 = time.perf_counter()
        ctl.reset(data)
        t1 = time.perf_counter()
        while not ctl.done:
            data.ctrl[:] = ctl.command(data)
            mujoco.mj_step(model, data)
            steps += 1
        t_loop += time.perf_counter() - t1
        t_plan += t1 - t0
    print(f"planning (reset) {1e3 * t_plan / a.episodes:.0f} ms/episode; physics+controller loop "
          f"{steps / t_loop:,.0f} steps/s (incl. re-planning on retries)")
    t0 = time.perf_counter()
    for _ in range(3000):
        mujoco.mj_step(model, data)
    print(f"bare mj_step {3000 / (time.perf_counter() - t0):,.0f} steps/s")
    t0 = time.perf_counter()
    r = SimRenderer(model, cfg)
    print(f"SimRenderer init {1e3 * (time.perf_counter() - t0):.0f} ms; GL: {r.gl_renderer}")
    for cam in cfg.cameras:
        for kind in ("rgb", "depth", "labels"):
            r.render(data, cam, rgb=kind == "rgb", depth=kind == "depth", labels=kind == "labels")
            n = 20
            t0 = time.perf_counter()
            for _ in range(n):
                r.render(data, cam, rgb=kind == "rgb", depth=kind == "depth", labels=kind == "labels")
            print(f"  {cam:12s} {kind:6s} {1e3 * (time.perf_counter() - t0) / n:.1f} ms")
    n = 10
    t0 = time.perf_counter()
    for _ in range(n):
        r.render_all(data)
    print(f"all cameras x (rgb+depth+labels) at {a.width}x{a.height}: {1e3 * (time.perf_counter() - t0) / n:.1f} ms/frame")
    r.close()


if __name__ == "__main__":
    main()
