"""dataset-render: draw a simulated dataset's cameras from its stored physics (no new simulation).

Every episode is replayed from its sidecar (initial state and the command of every physics step, bit
for bit) on the model of the output's scene, and the cameras are drawn at the new frame times. The obs
and action streams are carried over byte for byte; cameras, the sidecar's per-frame arrays and
depth/labels are the new cameras'. Rerunning the same command on an interrupted output resumes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported


from . import Parser, check_output, progress_bar, run  # noqa: E402
from .generate import LOCAL, camera_names, parse_size  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-render", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", help="simulated dataset with sidecars (e.g. from dataset-generate --cameras none)")
    p.add_argument("out", help="output dataset folder (created, or resumed)")
    p.add_argument("--cameras", nargs="+", default=["head", "wrist_right"], metavar="NAME",
                   help="cameras of the model to draw, e.g. head wrist_right wrist_left (default head wrist_right)")
    p.add_argument("--size", type=parse_size, default=(160, 120), help="image size WxH (default 160x120)")
    p.add_argument("--camera-hz", type=float, help="camera rate; frames must fall on physics steps (default: the source's)")
    p.add_argument("--camera-format", choices=["dir", "tar"], default="dir", help="JPEG folder or tar (default dir)")
    p.add_argument("--visual-variants", type=int, default=0, metavar="K",
                   help="K renderings of every episode, each with its own visual variation (lights, colours, head "
                        "camera pose), episodes <id>-v<k>; the physics stays the source's (default 0: one, as recorded)")
    p.add_argument("--seed", type=int, default=0, help="render seed of the visual variants (default 0)")
    p.add_argument("--workers", type=int, default=1, help="processes, one renderer each (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    r = p.add_argument_group("Ray (pip install 'openarm-sim-dataset[ray]')")
    r.add_argument("--ray", nargs="?", const=LOCAL, metavar="ADDRESS",
                   help="render each episode as a Ray task: a local cluster without ADDRESS, or an existing one")
    r.add_argument("--ray-max-in-flight", type=int, metavar="N", help="episodes submitted and not yet committed")
    r.add_argument("--ray-gpus-per-task", type=float, metavar="G",
                   help="GPUs each render task asks for (Ray places it on a GPU node; default none: CPU rendering)")
    return p


def config_from_args(args: argparse.Namespace):
    """The :class:`~openarm_sim_dataset.sim.render_dataset.RenderConfig` of these arguments."""
    from openarm_sim_dataset.sim.render_dataset import RenderConfig  # start-up: not for --help

    if args.workers < 1:
        raise ValueError("--workers must be >= 1")
    if args.visual_variants < 0:
        raise ValueError("--visual-variants must be >= 0")
    cameras = camera_names(args.cameras)
    return RenderConfig(cameras=cameras, width=args.size[0], height=args.size[1], camera_hz=args.camera_hz,
                        camera_format=args.camera_format, visual_variants=args.visual_variants, seed=args.seed)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from openarm_sim_dataset.sim.render_dataset import render_dataset  # start-up: not for --help

        check_output(args.out, [args.src])  # never inside the source, never an existing file
        cfg = config_from_args(args)
        ray = None
        if args.ray is not None:
            if args.workers != 1:
                raise ValueError("--workers and --ray exclude each other")
            from ..core.cluster import RayOptions  # start-up: only for --ray

            ray = RayOptions(address=None if args.ray == LOCAL else args.ray, max_in_flight=args.ray_max_in_flight)
        elif args.ray_max_in_flight is not None or args.ray_gpus_per_task is not None:
            raise ValueError("--ray-max-in-flight and --ray-gpus-per-task need --ray")
        if args.ray_gpus_per_task is not None and args.ray_gpus_per_task <= 0:
            raise ValueError("--ray-gpus-per-task must be > 0")
        bar = None
        if not args.quiet:
            total = None
            try:  # the bar's length; an unreadable source is the library's one-line error below
                from openarm_sim_dataset.core.metadata import Metadata  # start-up: not for --help

                total = len(Metadata.load(args.src).episodes) * max(1, cfg.visual_variants)
            except Exception:  # noqa: BLE001
                pass
            bar = progress_bar(total, "render", unit="ep",  # lines, not a bar, off a terminal
                               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]")
        t0 = time.perf_counter()

        def progress(episode: str, entry: dict) -> None:  # noqa: ARG001
            if bar is not None:
                bar.set_postfix_str(f"episode {episode}")
                bar.update(1)

        try:
            summary = render_dataset(args.src, args.out, cfg, workers=args.workers, progress=progress, ray=ray,
                                     ray_gpus_per_task=args.ray_gpus_per_task)
            if bar is not None:
                bar.update(summary.skipped)  # found committed: done too
        finally:
            if bar is not None:
                bar.close()
        dt = time.perf_counter() - t0
        per = f", {dt / summary.frames * 1e3:.1f} ms per camera frame (start-up included)" if summary.frames else ""
        print(f"{args.out}: {len(summary.episodes)} episode(s) ({summary.made} rendered, {summary.skipped} already "
              f"present), {summary.frames} camera frames in {dt:.1f} s{per}")
        return 0

    return run(body, "dataset-render")


if __name__ == "__main__":
    sys.exit(main())
