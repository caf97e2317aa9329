"""dataset-show DIR --episode ID [--frame K | --time T] -o out.png: look at stored data.

One PNG with a row per camera and columns RGB, depth (metres, viridis with a scale bar) and labels
(a fixed colour per label, legend of the labels present) for simulated datasets; RGB only for
recorded ones. Everything comes from the dataset's files (never re-simulated). --plot also writes
the episode's joint positions and commands over time; --contact-sheet writes one frame per episode
(or per task) as a grid instead. Needs matplotlib: pip install 'openarm-sim-dataset[viz]'.
Exit 0, or 2 on unusable input (missing folder, episode, frame, or matplotlib).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import Parser, check_output, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-show", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="dataset folder (any OpenArm layout)")
    p.add_argument("--episode", help="episode id (default: the first episode)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--frame", type=int, help="frame index K of the first camera (default: the middle frame)")
    g.add_argument("--time", type=float, help="seconds after the episode's first frame (the last frame at or before)")
    p.add_argument("-o", "--output", required=True, help="PNG to write (replaced atomically)")
    p.add_argument("--plot", nargs="?", const="", metavar="PNG",
                   help="also write the joint plot (default: OUTPUT with a -plot suffix)")
    p.add_argument("--hz", type=float, default=10.0, help="--plot: sampling grid to mark, Hz (default 10)")
    p.add_argument("--contact-sheet", choices=("episode", "task"), nargs="?", const="episode",
                   help="write one frame per episode (or per task) as a grid instead of one episode's frame")
    p.add_argument("--camera", help="--contact-sheet: camera to show (default: the first)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.contact_sheet and args.plot is not None:
        parser.error("--plot goes with one episode, not with --contact-sheet")

    def body() -> int:
        from openarm_sim_dataset.core.dataset import Dataset  # start-up: not for --help
        from openarm_sim_dataset.explore.show import contact_sheet, plot_episode, show_frame  # start-up: not for --help

        outputs = [args.output] + ([args.plot] if args.plot else [])
        for out in outputs:  # a PNG inside the dataset would be a file its metadata does not list
            check_output(out, [args.dataset], folder=False)
        ds = Dataset(args.dataset)
        if args.contact_sheet:
            lay = contact_sheet(ds, args.output, per=args.contact_sheet, camera=args.camera, frame=args.frame,
                                time_s=args.time)
            print(f"contact sheet ({len(lay.panels)} {args.contact_sheet}s) written to {lay.path}")
            return 0
        episode = args.episode if args.episode is not None else 0
        if args.plot is not None:  # first: the joints are plotted even when a camera's file is missing
            out = Path(args.plot) if args.plot else Path(args.output).with_name(Path(args.output).stem + "-plot.png")
            plot_episode(ds, episode, out, hz=args.hz)
            print(f"joint plot written to {out}")
        lay = show_frame(ds, episode, args.output, frame=args.frame, time_s=args.time)
        print(f"episode {ds.episode_id(episode)} frame {lay.frame} ({lay.size[0]}x{lay.size[1]} px) written to {lay.path}")
        return 0

    return run(body, "dataset-show")


if __name__ == "__main__":
    sys.exit(main())
