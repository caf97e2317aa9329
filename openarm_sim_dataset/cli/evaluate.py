"""dataset-evaluate: run a policy in the task environments, write every rollout as a dataset, report
success with intervals and, with --compare, a paired comparison on the same initial states.

Initial states: episodes 0..N-1 of seed S per task (--episodes N --seed S), or exactly those of an
existing dataset's episodes (--initial-states DATASET). The output is an OpenArm 0.4.0 dataset
(operation_type: rollout) that validates and replays like a generated one; rerunning the same
command resumes it. --policy: scripted, zero, random, module:factory, or a dataset-train checkpoint
(.pt: its cameras, image size and camera rate are the defaults; a flag that contradicts them is refused). Exit 2 on unusable input or a policy that raises or returns a wrong action.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported

from . import Parser, check_output, progress_line, run  # noqa: E402
from .generate import LOCAL, camera_names, parse_size, ray_options  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-evaluate", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", required=True, help="scripted, zero, random, module:factory or a checkpoint .pt")
    p.add_argument("--out", required=True, help="rollout dataset folder (created, or resumed)")
    p.add_argument("--tasks", nargs="+", metavar="NAME", help="tasks (default: a checkpoint's own tasks, else pick_place; all: every task)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--episodes", type=int, help="initial states 0..N-1 of --seed, per task")
    src.add_argument("--initial-states", metavar="DATASET", help="the initial states of this dataset's episodes")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial states (default 0)")
    p.add_argument("--cameras", nargs="+", choices=["head", "wrist_right", "wrist_left", "none"],
                   help="recorded cameras (default: a checkpoint's own, else head wrist_right; none: physics only, "
                        "no rendering: for policies that read no image, e.g. a privileged-state checkpoint)")
    p.add_argument("--size", type=parse_size, help="image size WxH (default: a checkpoint's own, else 160x120)")
    p.add_argument("--camera-hz", type=float,
                   help="camera rate and the default policy rate, divides 500 Hz (default: a checkpoint's own, else 10)")
    p.add_argument("--randomize", choices=["none", "visual", "physics", "all"], default="none",
                   help="scene randomisation of the initial states (default none)")
    p.add_argument("--max-time", type=float, help="time limit per episode, s (default 12, or the initial-states dataset's)")
    p.add_argument("--stop-on-success", action="store_true",
                   help="end an episode as soon as the success rule holds (default: run until the policy is done "
                        "or the time limit, so that success at the end and at any time differ)")
    p.add_argument("--compare", metavar="OTHER",
                   help="a rollout dataset on the same initial states, or another policy (evaluated into "
                        "--compare-out): discordant pairs, exact McNemar test, Newcombe interval")
    p.add_argument("--compare-out", metavar="DIR", help="where --compare's policy rollouts go (default OUT-compare)")
    p.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    p.add_argument("--ray", nargs="?", const=LOCAL, metavar="ADDRESS",
                   help="run each rollout as a Ray task (local cluster without ADDRESS); instead of --workers")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def _config(args):
    from openarm_sim_dataset.learn import evaluate as ev  # start-up: not for --help
    from openarm_sim_dataset.sim.episode_recorder import RecordConfig  # start-up: not for --help
    from openarm_sim_dataset.sim.generate import GenerateConfig  # start-up: not for --help
    from openarm_sim_dataset.sim.scene import SceneConfig  # start-up: not for --help

    # a checkpoint knows what it reads: its cameras, size and rate unless a flag says otherwise (and
    # a flag that contradicts it is refused, naming both)
    cams, size, hz = ev.recording_for(args.policy, None if args.cameras is None else camera_names(args.cameras),
                                      args.size, args.camera_hz)
    scene = SceneConfig(cameras=cams, width=size[0], height=size[1], wrist_left="wrist_left" in cams)
    cfg = GenerateConfig(seed=args.seed, scene=scene, record=RecordConfig(camera_hz=hz),
                         randomize=args.randomize, max_time=float(args.max_time or 12.0))
    cfg.record.every(scene.timestep)
    return cfg


def _pct(r: dict) -> str:
    lo, hi = r["wilson95"]
    rate = r["rate"] or 0.0
    return f"{r['successes']}/{r['episodes']} = {rate:.1%} (95% Wilson {lo:.1%}-{hi:.1%})"


def format_report(report: dict) -> str:
    lines = [f"{report['out']}: {report['episodes']} rollout(s) of policy {report['model']['name']} "
             f"({report['made']} run, {report['skipped']} already present) in {report['seconds']:.1f} s"]
    for name, b in list(report["stats"]["tasks"].items()) + [("overall", report["stats"]["overall"])]:
        fails = ", ".join(f"{k} {v}" for k, v in sorted(b["failures"].items())) or "none"
        lines.append(f"  {name}: success at the end {_pct(b['end'])}; lucky {b['lucky']}; "
                     f"at any time {_pct(b['any_time'])}; failures: {fails}")
    c = report.get("compare")
    if c:
        lo, hi = c["newcombe95"]
        lines.append(f"  compared with {c['other']} on {c['pairs']} paired initial states: only this policy "
                     f"{c['only_a']}, only the other {c['only_b']} (both {c['both']}, neither {c['neither']}); "
                     f"difference {c['difference']:+.1%} (95% Newcombe {lo:+.1%} to {hi:+.1%}); "
                     f"exact McNemar p = {c['mcnemar_exact_p']:.4g}"
                     + (f"; unpaired {c['unpaired_a']} + {c['unpaired_b']}" if c['unpaired_a'] or c['unpaired_b'] else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from openarm_sim_dataset.learn import evaluate as ev  # start-up: not for --help

        # the outputs are folders outside every input dataset (--initial-states, --compare DATASET; a
        # folder that is no dataset is refused by what reads it, before anything is written)
        inputs = [p for p in (args.initial_states, args.compare) if p and (Path(p) / "metadata.yaml").is_file()]
        check_output(args.out, inputs)
        if args.compare_out is not None:
            check_output(args.compare_out, inputs + [args.out])
        if args.workers < 1:
            raise ValueError("--workers must be >= 1")
        if args.max_time is not None and not args.max_time > 0:
            raise ValueError("--max-time must be > 0")
        args.ray_shared_fs, args.ray_max_in_flight = False, None
        ray = ray_options(args)
        if ray is not None and args.workers != 1:
            raise ValueError("--workers and --ray exclude each other")
        if args.initial_states:
            from openarm_sim_dataset.sim.tasks import resolve_tasks  # start-up: not for --help

            tasks = resolve_tasks(args.tasks)[0] if args.tasks else ()
            jobs, cfg = ev.jobs_from_dataset(args.initial_states, tasks)
            if args.max_time is not None:
                cfg = replace(cfg, max_time=float(args.max_time))
            ev.check_recording(args.policy, cfg, args.initial_states)
        else:
            cfg = _config(args)
            need = ev.checkpoint_inputs(args.policy)
            # a checkpoint's own tasks are the default (one trained on tray_green is evaluated on tray_green)
            jobs = ev.jobs_for(args.tasks or (need.tasks if need is not None else ()), args.episodes, args.seed)
        t0 = time.perf_counter()
        done = [0]

        def progress(job, entry) -> None:
            done[0] += 1
            if not args.quiet and not args.json:
                progress_line(f"{done[0]}/{len(jobs)} episode {entry['id']} {job.task}: {entry['outcome']}")

        rep = ev.evaluate(args.policy, args.out, jobs, cfg, workers=args.workers, ray=ray,
                          stop_on_success=args.stop_on_success, progress=progress)
        if done[0] and not args.quiet and not args.json and sys.stderr.isatty():
            print(file=sys.stderr)  # end the line rewritten in place
        report = {"out": str(rep.out), "model": rep.model, "episodes": len(rep.episodes), "made": rep.made,
                  "skipped": rep.skipped, "seconds": time.perf_counter() - t0, "stats": rep.stats}
        if args.compare:
            mine = ev.load_rollouts(rep.out)
            other = Path(args.compare)
            if not (other / "metadata.yaml").is_file():
                other_out = Path(args.compare_out or f"{rep.out}-compare")
                ev.evaluate(args.compare, other_out, jobs, cfg, workers=args.workers, ray=ray,
                            stop_on_success=args.stop_on_success)
                other = other_out
            report["compare"] = {"other": str(args.compare), "other_dataset": str(other),
                                 **ev.compare(mine, ev.load_rollouts(other))}
            if report["compare"]["pairs"] == 0:
                raise ev.EvaluateError(other, "shares no initial state (task, seed, index) with the rollouts")
        print(json.dumps(report, indent=2) if args.json else format_report(report))
        return 0

    return run(body, "dataset-evaluate")


if __name__ == "__main__":
    sys.exit(main())
