"""dataset-merge IN1 IN2 ... -o OUT: merge datasets into a new one (episodes renumbered in input order)."""

from __future__ import annotations

import argparse
import sys

from . import Parser, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="dataset-merge", description=__doc__,
        epilog="Refused unless every input has the same format version, equipment and frequencies and, for "
               "simulated datasets, the same MuJoCo version and model hash, and no two inputs share an identical "
               "episode (--allow-duplicates). Tasks with the same prompt become one "
               "task. Each episode records its source (input folder, original id). OUT is built in a temporary "
               "folder and renamed into place; an existing OUT is refused; inputs are never modified.")
    p.add_argument("inputs", nargs="+", help="input dataset folders (at least two)")
    p.add_argument("-o", "--output", required=True, help="output folder (must not exist)")
    p.add_argument("--link", "--symlink", action="store_true", dest="link",
                   help="hard-link files instead of copying them (same filesystem; never symlinks: --symlink, "
                        "openarm_dataset's flag, makes hard links too)")
    p.add_argument("--allow-mixed-provenance", action="store_true",
                   help="merge simulated datasets of different MuJoCo versions/model hashes (or recorded with "
                        "simulated); each episode then keeps its provenance in its metadata entry")
    p.add_argument("--allow-duplicates", action="store_true",
                   help="merge inputs that share an identical episode (same obs/action streams and initial state; "
                        "refused by default: the output would fail dataset-validate's duplicate_episodes)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from openarm_sim_dataset.ops.merge import merge  # start-up: not for --help

        summary = merge(args.inputs, args.output, link=args.link,
                        allow_mixed_provenance=args.allow_mixed_provenance, quiet=args.quiet,
                        allow_duplicates=args.allow_duplicates)
        print(summary.line())
        return 0

    return run(body, "dataset-merge")


if __name__ == "__main__":
    sys.exit(main())
