"""Benchmark physics-only generation and dataset-render against their floors, measured in the same run.

    python tools/bench_render_dataset.py [--episodes 3] [--size 160x120] [--camera-hz 10] [--cameras head wrist_right]

* physics-only: ``generate()`` with no camera (``dataset-generate --cameras none``) of N episodes into a
  fresh folder, one process (control, IK, recording, parquet/npz encoding, atomic commits included), per
  episode; against the **physics floor**: the same number of ``mj_step`` calls with a constant control,
  nothing else (the controller's cost is ours, not the floor's), and against the **episode floor**: the
  scripted episode itself (``run_episode`` with no hook: physics and controller, IK planning included,
  no recording or I/O), which any generation of that episode pays;
* dataset-render: ``render_dataset()`` of that output with ``--cameras`` (replay from the initial state
  with the stored commands, the renders, JPEG encoding, sidecar/frames npz, copying obs/action, atomic
  commits), per camera frame; against the **render floor**: ``SimRenderer.render`` (RGB + depth + labels)
  of the same camera frames from their stored states, nothing else (no replay, JPEG or I/O).

Per episode / per camera frame: the median over the episodes after the first (the first pays for
model build and GL context). Both wall and CPU seconds (CPU of this process, llvmpipe's threads
included: the figure to trust on a shared machine). Targets (issue 20): both ratios <= 1.2x.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from openarm_sim_dataset import sidecar  # noqa: E402
from openarm_sim_dataset.sim.generate import GenerateConfig, generate, params_for  # noqa: E402
from openarm_sim_dataset.sim.models import load_model  # noqa: E402
from openarm_sim_dataset.sim.recorder import RecordConfig  # noqa: E402
from openarm_sim_dataset.sim.render import SimRenderer  # noqa: E402
from openarm_sim_dataset.sim.render_dataset import RenderConfig, render_dataset  # noqa: E402
from openarm_sim_dataset.sim.scene import SceneConfig  # noqa: E402
from openarm_sim_dataset.sim.tasks import set_initial_state  # noqa: E402


class Clock:
    """Wall and CPU seconds between successive :meth:`tick` calls."""

    def __init__(self) -> None:
        self.wall, self.cpu = [], []
        self.reset()

    def reset(self) -> None:
        self._w, self._c = time.perf_counter(), time.process_time()

    def tick(self, *_args) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.wall.append(w - self._w)
        self.cpu.append(c - self._c)
        self._w, self._c = w, c


def steady(values: list[float]) -> float:
    return statistics.median(values[1:] if len(values) > 1 else values)


def physics_floor(model, cfg: GenerateConfig, index: int, steps: int) -> tuple[float, float]:
    data = mujoco.MjData(model)
    set_initial_state(model, data, params_for(cfg, index)[0])
    w, c = time.perf_counter(), time.process_time()
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return time.perf_counter() - w, time.process_time() - c


def episode_floor(model, cfg: GenerateConfig, index: int) -> tuple[float, float]:
    from openarm_sim_dataset.sim.tasks import run_episode

    params = params_for(cfg, index)[0]
    w, c = time.perf_counter(), time.process_time()
    run_episode(model, params, max_time=cfg.max_time)
    return time.perf_counter() - w, time.process_time() - c


def render_floor(renderer: SimRenderer, model, states: np.ndarray) -> tuple[float, float, int]:
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    w, c = time.perf_counter(), time.process_time()
    n = 0
    for st in states:
        mujoco.mj_setState(model, data, st, spec)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_camlight(model, data)
        for cam in renderer.cameras:
            renderer.render(data, cam)
            n += 1
    return time.perf_counter() - w, time.process_time() - c, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--size", default="160x120")
    ap.add_argument("--camera-hz", type=float, default=10.0)
    ap.add_argument("--cameras", nargs="+", default=["head", "wrist_right"])
    ap.add_argument("--seed", type=int, default=10)
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    cameras = tuple(args.cameras)
    phys_cfg = GenerateConfig(seed=args.seed, scene=SceneConfig(cameras=()), record=RecordConfig(camera_hz=args.camera_hz))
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "phys", Path(tmp) / "rendered"
        clock = Clock()
        summary = generate(src, range(args.episodes), phys_cfg, progress=clock.tick)
        model = load_model(phys_cfg.scene)
        floors = [physics_floor(model, phys_cfg, int(e["id"]), int(e["steps"])) for e in summary.episodes]
        episodes = [episode_floor(model, phys_cfg, int(e["id"])) for e in summary.episodes]
        gen_w, gen_c = steady(clock.wall), steady(clock.cpu)
        ep_w, ep_c = steady([f[0] for f in episodes]), steady([f[1] for f in episodes])
        fl_w, fl_c = steady([f[0] for f in floors]), steady([f[1] for f in floors])
        print(f"{args.episodes} episodes (seed {args.seed}), load average {os.getloadavg()[0]:.1f}")
        print(f"physics-only generation: {gen_w:.2f} s wall, {gen_c:.2f} s CPU per episode; physics floor "
              f"{fl_w:.2f} s wall, {fl_c:.2f} s CPU: ratio {gen_w / fl_w:.2f}x wall, {gen_c / fl_c:.2f}x CPU "
              f"(target <= 1.2x)")
        print(f"  against the episode floor (physics + scripted controller, no recording or I/O) {ep_w:.2f} s wall, "
              f"{ep_c:.2f} s CPU: ratio {gen_w / ep_w:.2f}x wall, {gen_c / ep_c:.2f}x CPU")

        cfg = RenderConfig(cameras=cameras, width=w, height=h, camera_hz=args.camera_hz)
        clock = Clock()
        rendered = render_dataset(src, out, cfg, progress=clock.tick)
        frames = []
        for e in rendered.episodes:
            side = sidecar.load_npz(out / "episodes" / str(e["id"]) / "sim" / sidecar.SIDECAR_FILE)
            frames.append(side["state"])
        per_w = [t / (len(f) * len(cameras)) for t, f in zip(clock.wall, frames)]
        per_c = [t / (len(f) * len(cameras)) for t, f in zip(clock.cpu, frames)]
        scene = dataclasses.replace(phys_cfg.scene, cameras=cameras, width=w, height=h, wrist_left="wrist_left" in cameras)
        rmodel = load_model(scene)
        renderer = SimRenderer(rmodel, scene)
        floor = [render_floor(renderer, rmodel, f) for f in frames]
        renderer.close()
        rf_w = steady([a / n for a, _, n in floor])
        rf_c = steady([b / n for _, b, n in floor])
        print(f"dataset-render {', '.join(cameras)} at {args.size}, {args.camera_hz:g} Hz: {steady(per_w) * 1e3:.1f} ms wall, "
              f"{steady(per_c) * 1e3:.1f} ms CPU per camera frame; render floor {rf_w * 1e3:.1f} ms wall, "
              f"{rf_c * 1e3:.1f} ms CPU: ratio {steady(per_w) / rf_w:.2f}x wall, {steady(per_c) / rf_c:.2f}x CPU "
              f"(target <= 1.2x)")
        frames_per_ep = statistics.median(len(f) * len(cameras) for f in frames)
        print(f"per episode: physics-only {gen_c:.2f} s CPU; render {steady(clock.cpu):.2f} s CPU "
              f"({frames_per_ep:.0f} camera frames)")


if __name__ == "__main__":
    main()
