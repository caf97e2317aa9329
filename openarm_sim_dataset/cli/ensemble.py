"""dataset-ensemble: several dataset-train checkpoints as one policy that plays the mean of their chunks.

    dataset-train cams --inputs cameras --out s0.pt --seed 0 ...
    dataset-train cams --inputs cameras --out s1.pt --seed 1 ...
    dataset-ensemble s0.pt s1.pt --out ensemble.pt
    dataset-evaluate --policy ensemble.pt --out rollouts --episodes 100 --seed 7001

The members must read the same inputs (cameras, image size, camera and control rates) and play their
chunks the same way (horizon, execute, temporal ensembling, safety step); each denormalises with its own
statistics and the chunks are averaged in joint units. Exit 2 on unusable input (one line).
"""

from __future__ import annotations

import argparse
import sys

from . import Parser, check_output, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-ensemble", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT", help="dataset-train checkpoints (.pt), two or more")
    p.add_argument("--out", required=True, help="the ensemble checkpoint .pt to write")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from openarm_sim_dataset.learn.bc.ensemble import combine  # start-up: not for --help

        # writing over a member would lose it: refused like an output inside an input
        check_output(args.out, args.checkpoints, folder=False)
        out = combine(args.checkpoints, args.out)
        print(f"{out}: ensemble of {len(args.checkpoints)} checkpoints")
        return 0

    return run(body, "dataset-ensemble")


if __name__ == "__main__":
    sys.exit(main())
