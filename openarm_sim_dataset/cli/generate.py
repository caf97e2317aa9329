"""dataset-generate: simulated OpenArm episodes of scripted tasks, recorded in the 0.4.0 layout.

Episode i of seed S draws only from numpy.random.default_rng([S, i]) (and, with --tasks, its task
from default_rng([S, i, TASK_STREAM])); --episode-range A:B makes episodes A..B-1, so shards
generated apart merge into the same dataset as one run. Rerunning the same command on an
interrupted output resumes it. Without --tasks every episode is the default task (pick_place).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported


from . import Parser, check_output, progress_bar, run  # noqa: E402


def parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be WIDTHxHEIGHT, not {text!r}") from None
    if not (8 <= w <= 4096 and 8 <= h <= 4096):
        raise argparse.ArgumentTypeError(f"size {w}x{h} out of range 8..4096")
    return w, h


def _range(text: str) -> range:
    try:
        a, b = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"episode range must be A:B, not {text!r}") from None
    if not 0 <= a < b:
        raise argparse.ArgumentTypeError(f"episode range {text!r} must satisfy 0 <= A < B")
    return range(a, b)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-generate", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="output dataset folder (created, or resumed)")
    p.add_argument("--list-tasks", action="store_true", help="print every task's name, arms and prompt, then exit")
    p.add_argument("--tasks", nargs="+", metavar="NAME",
                   help="tasks to draw episodes from (names of --list-tasks, or all; default: pick_place alone)")
    p.add_argument("--task-weights", nargs="+", type=float, metavar="W",
                   help="relative weight of each task of --tasks (default: equal)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--episodes", type=int, help="generate episodes 0..N-1")
    g.add_argument("--episode-range", type=_range, help="generate episodes A..B-1")
    p.add_argument("--seed", type=int, default=0, help="dataset seed (default 0)")
    p.add_argument("--workers", type=int, default=1, help="processes, one renderer each (default 1)")
    p.add_argument("--cameras", nargs="+", default=["head", "wrist_right", "wrist_left"],
                   choices=["head", "wrist_right", "wrist_left", "none"],
                   help="cameras (default head wrist_right wrist_left: the wrist view of every arm a task can use); "
                        "none: physics only (obs, action and the sidecar, no rendering at all; dataset-render draws "
                        "the cameras later)")
    p.add_argument("--size", type=parse_size, default=(160, 120), help="image size WxH (default 160x120)")
    p.add_argument("--camera-hz", type=float, default=10.0, help="camera rate, divides 500 Hz (default 10)")
    p.add_argument("--state-hz", type=float, default=250.0, help="obs/action rate, divides 500 Hz (default 250)")
    p.add_argument("--sigma", type=float, default=0.0, help="perception error std in metres (default 0)")
    p.add_argument("--retry", action="store_true", help="act on grasp checks and retry a failed grasp once")
    p.add_argument("--randomize", choices=["none", "visual", "physics", "all"], default="none",
                   help="scene randomisation per episode: visual (lights, colours, head camera pose), physics "
                        "(cube size, mass, friction) or all; recorded per episode (default none)")
    p.add_argument("--camera-format", choices=["dir", "tar"], default="dir", help="JPEG folder or tar (default dir)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    r = p.add_argument_group("Ray (pip install 'openarm-sim-dataset[ray]')")
    r.add_argument("--ray", nargs="?", const=LOCAL, metavar="ADDRESS",
                   help="record each episode as a Ray task: a local cluster without ADDRESS, or an existing one "
                        "(auto, host:port, ray://host:port); instead of --workers")
    r.add_argument("--ray-shared-fs", action="store_true",
                   help="workers write episode folders into --out directly (a path every node mounts); "
                        "default: tasks return the files and only this process writes")
    r.add_argument("--ray-max-in-flight", type=int, metavar="N",
                   help="episodes submitted and not yet committed, at most (default: twice the cluster's CPUs)")
    return p


#: ``--ray`` without an address: start a local cluster.
LOCAL = "local"


def ray_options(args: argparse.Namespace):
    """The :class:`~openarm_sim_dataset.cluster.RayOptions` of ``--ray*``, or None (local run)."""
    if args.ray is None:
        if args.ray_shared_fs or args.ray_max_in_flight is not None:
            raise ValueError("--ray-shared-fs and --ray-max-in-flight need --ray")
        return None
    if args.ray_max_in_flight is not None and args.ray_max_in_flight < 1:
        raise ValueError("--ray-max-in-flight must be >= 1")
    from ..core.cluster import RayOptions  # start-up: hashlib, socket and platform only for --ray

    return RayOptions(address=None if args.ray == LOCAL else args.ray, shared_fs=args.ray_shared_fs,
                      max_in_flight=args.ray_max_in_flight)


def camera_names(names: list[str]) -> tuple[str, ...]:
    """``--cameras`` as a tuple: ``none`` alone is the empty tuple (physics only); twice the same name or
    ``none`` with cameras is refused."""
    if "none" in names:
        if len(names) != 1:
            raise ValueError("--cameras none cannot be combined with camera names")
        return ()
    if len(set(names)) != len(names):
        raise ValueError(f"--cameras names a camera twice: {' '.join(names)}")
    return tuple(names)


def config_from_args(args: argparse.Namespace):
    """The :class:`~openarm_sim_dataset.sim.generate.GenerateConfig` these arguments ask for (rates are
    checked here, before any work)."""
    from openarm_sim_dataset.sim.episode_recorder import RecordConfig  # start-up: not for --help
    from openarm_sim_dataset.sim.generate import GenerateConfig  # start-up: not for --help
    from openarm_sim_dataset.sim.scene import SceneConfig  # start-up: not for --help
    from openarm_sim_dataset.sim.tasks import resolve_tasks  # start-up: not for --help

    if args.sigma < 0 or args.workers < 1:
        raise ValueError("--sigma must be >= 0 and --workers >= 1")
    tasks, weights = (), ()
    if args.tasks:
        tasks, weights = resolve_tasks(args.tasks, args.task_weights or ())
        if not args.task_weights:
            weights = ()
    elif args.task_weights:
        raise ValueError("--task-weights needs --tasks")
    cameras = camera_names(args.cameras)
    scene = SceneConfig(cameras=cameras, width=args.size[0], height=args.size[1],
                        wrist_left="wrist_left" in cameras)
    cfg = GenerateConfig(seed=args.seed, sigma=args.sigma, retry=args.retry, scene=scene,
                         record=RecordConfig(state_hz=args.state_hz, camera_hz=args.camera_hz),
                         camera_format=args.camera_format, tasks=tasks, task_weights=weights,
                         randomize=args.randomize)
    cfg.record.every(scene.timestep)
    return cfg


def list_tasks() -> str:
    """One line per registered task: name, arms, prompt."""
    from openarm_sim_dataset.sim.tasks import TASKS  # start-up: not for --help

    w = max(len(n) for n in TASKS)
    return "\n".join(f"{n:<{w}}  {t.arms:<6}  {t.prompt}" for n, t in TASKS.items())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_tasks:
        def listing() -> int:
            print(list_tasks())
            return 0

        return run(listing, "dataset-generate")
    if args.out is None or (args.episodes is None and args.episode_range is None):
        parser.error("--out and one of --episodes / --episode-range are required")

    def body() -> int:
        from openarm_sim_dataset.sim.generate import generate  # start-up: not for --help

        check_output(args.out)  # --out FILE: says it is a file
        indices = args.episode_range or range(args.episodes)
        if len(indices) == 0:
            raise ValueError("--episodes must be at least 1")
        cfg = config_from_args(args)
        ray = ray_options(args)
        if ray is not None and args.workers != 1:
            raise ValueError("--workers and --ray exclude each other (Ray runs one episode per CPU of the cluster)")
        bar = None
        if not args.quiet:
            # episodes/s even below one per second (tqdm would switch to s/ep); lines off a terminal
            bar = progress_bar(len(indices), "generate", unit="ep",
                               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]")
        t0 = time.perf_counter()

        outcomes: Counter = Counter()

        def progress(index: int, entry: dict) -> None:
            outcomes[entry["outcome"]] += 1
            if bar is not None:
                bar.set_postfix_str(", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
                bar.update(1)

        summary = generate(args.out, indices, cfg, workers=args.workers, progress=progress, ray=ray)
        if bar is not None:
            bar.update(summary.skipped)
            bar.close()
        n = len(summary.episodes)
        lo, hi = summary.wilson()
        print(f"{args.out}: {n} episode(s) ({summary.made} generated, {summary.skipped} already present) "
              f"in {time.perf_counter() - t0:.1f} s")
        print(f"success {summary.successes}/{n} = {summary.successes / n:.1%} (95% Wilson interval {lo:.1%}-{hi:.1%})")
        for outcome, count in sorted(summary.categories().items()):
            if outcome == "success":
                continue
            examples = [e for e in summary.episodes if e.get("outcome") == outcome][:3]
            shown = ", ".join(f"episode {e['id']}" + (f" ({e['task']})" if "task" in e else "")
                              + f" cubes (x, y, yaw)={[tuple(c) for c in e['initial_cubes']]}" for e in examples)
            print(f"  {outcome}: {count}  e.g. {shown}")
        knocked = sum(bool(e.get("knocked_over")) for e in summary.episodes if e.get("success"))
        if knocked:
            print(f"  successes with the cube knocked onto another face: {knocked}")
        if cfg.tasks:
            by_task = {}
            for e in summary.episodes:
                by_task.setdefault(e.get("task"), []).append(e)
            for name, eps in by_task.items():
                ok = sum(bool(e.get("success")) for e in eps)
                contacts = sum(int(e.get("arm_contacts", 0)) for e in eps)
                print(f"  {name}: {ok}/{len(eps)} successes, arm-arm contact steps {contacts}")
        return 0

    return run(body, "dataset-generate")


if __name__ == "__main__":
    sys.exit(main())
