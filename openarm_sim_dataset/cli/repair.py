"""dataset-repair IN [-o OUT]: fill isolated null/NaN values of obs/action streams with the mean of their neighbours."""

from __future__ import annotations

import argparse
import sys

from . import EXIT_INVALID, EXIT_OK, Parser, check_output, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="dataset-repair", description=__doc__,
        epilog="A null/NaN whose previous and next samples (same column) are finite becomes their mean; runs of two "
               "or more and gaps at the first/last sample are reported as unrepairable (exit 1). Files are replaced "
               "atomically. With -o, OUT is a repaired copy (hard links for untouched files) and IN is unchanged.")
    p.add_argument("dataset", help="dataset folder (any OpenArm layout)")
    p.add_argument("-o", "--output", help="write a repaired copy here instead of repairing in place (must not exist)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from openarm_sim_dataset.ops.repair import repair  # start-up: not for --help

        if args.output is not None:
            check_output(args.output, [args.dataset])  # a copy outside the dataset it repairs

        def show(line: str, bad: bool) -> None:
            print(line, file=sys.stderr if bad else sys.stdout)

        report = repair(args.dataset, args.output, quiet=args.quiet, on_line=show)
        print(report.summary.line())
        return EXIT_INVALID if report.unrepairable else EXIT_OK

    return run(body, "dataset-repair")


if __name__ == "__main__":
    sys.exit(main())
