"""Benchmark generation: wall time per episode against the floor measured in the same run.

    python tools/bench_generate.py [--episodes 3] [--size 160x120] [--camera-hz 10] [--task NAME] [--randomize all]

* ours:  ``generate()`` of N episodes into a fresh folder, one process (control, IK, recording,
         JPEG/npz encoding, atomic commits included), per episode;
* floor: for each of those episodes, the same number of ``mj_step`` calls (constant control) and the
         same number of renders (RGB + depth + segmentation per camera frame) with no control,
         recording or I/O, on the same model (with ``--randomize``: the episode's own varied model,
         built before the clock starts, so ours pays for building it and the floor does not) and
         renderer;
* workers: N*2 episodes generated with --workers 2 vs 1 (throughput ratio; process start-up and
         model building included).
Targets (issue 3): ours <= 1.2x the floor at 160x120, 10 Hz, 2 cameras; 2 workers >= 1.8x one.
``--task NAME``: every episode is that task (``dataset-generate --tasks NAME``); default: the default task.
``--cameras NAME...``: the camera set (default: SceneConfig's, head + wrist_right + wrist_left).
``--compare-cameras``: instead, the cost of the default camera set against the former one (head +
wrist_right): the same N episodes generated with each, in the order A B B A, per-episode medians of the
steady-state episodes (the first episode of each run builds the model and renderer) and their ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from openarm_sim_dataset.sim.generate import (  # noqa: E402
    GenerateConfig,
    generate,
    params_for,  # noqa: E402
)
from openarm_sim_dataset.sim.models import episode_model  # noqa: E402
from openarm_sim_dataset.sim.recorder import RecordConfig  # noqa: E402
from openarm_sim_dataset.sim.render import SimRenderer  # noqa: E402
from openarm_sim_dataset.sim.scene import SceneConfig, build_model  # noqa: E402
from openarm_sim_dataset.sim.tasks import set_initial_state  # noqa: E402
from openarm_sim_dataset.sim.variation import draw_variation  # noqa: E402


def floor_time(model, renderer, cfg: GenerateConfig, index: int, steps: int) -> float:
    """Seconds for ``steps`` mj_step calls and the matching renders, nothing else."""
    variation = draw_variation(cfg.seed, index, cfg.randomize, cfg.scene)
    if variation is not None:
        model = episode_model(cfg.scene, variation).model
    renderer.use_model(model)
    data = mujoco.MjData(model)
    set_initial_state(model, data, params_for(cfg, index)[0])
    _, cam_every = cfg.record.every(model.opt.timestep)
    t = time.perf_counter()
    for s in range(steps + 1):
        if s % cam_every == 0:
            for c in renderer.cameras:
                renderer.render(data, c)
        if s < steps:
            mujoco.mj_step(model, data)
    return time.perf_counter() - t


def compare_cameras(cfg: GenerateConfig, args) -> None:
    """Median steady-state s/episode of the default camera set vs head + wrist_right (A B B A)."""
    import dataclasses

    sets = {"before": ("head", "wrist_right"), "after": SceneConfig.cameras}
    per: dict[str, list[float]] = {k: [] for k in sets}
    cpu: dict[str, list[float]] = {k: [] for k in sets}  # process CPU s (all threads: llvmpipe's too)
    with tempfile.TemporaryDirectory() as tmp:
        for k, which in enumerate(("before", "after", "after", "before") * args.rounds):
            cams = sets[which]
            run = dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, cameras=cams,
                                                                     wrist_left="wrist_left" in cams))
            times: list[float] = []
            cpus: list[float] = []
            last = [time.perf_counter(), time.process_time()]

            def progress(index, entry):
                now, now_cpu = time.perf_counter(), time.process_time()
                times.append(now - last[0])
                cpus.append(now_cpu - last[1])
                last[:] = [now, now_cpu]

            generate(Path(tmp) / f"{k}-{which}", range(args.episodes), run, progress=progress)
            per[which] += times[1:] if len(times) > 1 else times
            cpu[which] += cpus[1:] if len(cpus) > 1 else cpus
    b, a = np.median(per["before"]), np.median(per["after"])
    print(f"task {args.task or 'default'}: {args.episodes} episodes x 2 runs each at {args.size}, {args.camera_hz:g} Hz, "
          f"randomize {args.randomize}, load {os.getloadavg()[0]:.2f}")
    print(f"before {sets['before']}: {b:.2f} s/episode (median of {len(per['before'])})")
    print(f"after  {sets['after']}: {a:.2f} s/episode (median of {len(per['after'])})")
    print(f"ratio after/before: {a / b:.2f}x wall; CPU {np.median(cpu['before']):.2f} vs {np.median(cpu['after']):.2f} "
          f"s/episode: {np.median(cpu['after']) / np.median(cpu['before']):.2f}x (less sensitive to a loaded machine)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--size", default="160x120")
    ap.add_argument("--camera-hz", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--no-workers", action="store_true", help="skip the 2-worker throughput measurement")
    ap.add_argument("--task", help="generate this task only (default: the default task)")
    ap.add_argument("--randomize", default="none", choices=["none", "visual", "physics", "all"])
    ap.add_argument("--cameras", nargs="+", choices=["head", "wrist_right", "wrist_left"])
    ap.add_argument("--rounds", type=int, default=1, help="--compare-cameras: repeat A B B A this many times")
    ap.add_argument("--compare-cameras", action="store_true",
                    help="cost of the default camera set against head + wrist_right (ratio, same run)")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    cams = tuple(args.cameras) if args.cameras else SceneConfig.cameras
    cfg = GenerateConfig(seed=args.seed, scene=SceneConfig(cameras=cams, width=w, height=h, wrist_left="wrist_left" in cams),
                         record=RecordConfig(camera_hz=args.camera_hz),
                         tasks=(args.task,) if args.task else (), randomize=args.randomize)
    if args.compare_cameras:
        compare_cameras(cfg, args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        times: list[float] = []
        last = [time.perf_counter()]

        def progress(index, entry):
            now = time.perf_counter()
            times.append(now - last[0])
            last[0] = now

        t0 = time.perf_counter()
        summary = generate(Path(tmp) / "one", range(args.episodes), cfg, progress=progress)
        total1 = time.perf_counter() - t0
        # the first interval includes model build and renderer creation: measure episodes 2.. as steady state
        model = build_model(cfg.scene)
        renderer = SimRenderer(model, cfg.scene)
        floors = [floor_time(model, renderer, cfg, int(e["id"]), int(e["steps"])) for e in summary.episodes]
        renderer.close()
        per_ep = np.array(times[1:] if len(times) > 1 else times)
        fl = np.array(floors[1:] if len(floors) > 1 else floors)
        print(f"task {args.task or 'default'}: {args.episodes} episodes at {args.size}, cameras {cfg.scene.cameras} at {args.camera_hz:g} Hz, "
              f"randomize {args.randomize}, "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"ours : {np.median(per_ep):.2f} s/episode (median of steady-state episodes)")
        print(f"floor: {np.median(fl):.2f} s/episode (same mj_step calls + renders, no control or I/O)")
        print(f"ratio: {np.median(per_ep) / np.median(fl):.2f}x (target <= 1.2x)")
        if not args.no_workers:
            n = 2 * args.episodes
            t0 = time.perf_counter()
            generate(Path(tmp) / "w1", range(n), cfg, workers=1)
            t1 = time.perf_counter() - t0
            t0 = time.perf_counter()
            generate(Path(tmp) / "w2", range(n), cfg, workers=2)
            t2 = time.perf_counter() - t0
            print(f"{n} episodes: 1 worker {t1:.1f} s, 2 workers {t2:.1f} s: throughput {t1 / t2:.2f}x (target >= 1.8x)")
        del total1


if __name__ == "__main__":
    main()
