"""dataset-info DIR: what a dataset holds (episodes, success, streams, cameras, sizes, provenance).

Reads metadata.yaml, the timestamp column of each stream and the camera listings; never decodes an
image. --json prints the figures for machines; --card writes a dataset card (README.md with a YAML
header a dataset hub reads) into DIR atomically, or to -o FILE (a LeRobot dataset is never written
into: its card needs -o FILE outside it). Exit 0; 1 when files the dataset refers to are missing (a
LeRobot dataset's data or video files: the figures are printed all the same, with the missing files
grouped and where files of those names sit instead); 2 on unusable input.
"""

from __future__ import annotations

import argparse
import sys

from . import EXIT_INVALID, Parser, check_output, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-info", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="dataset folder (any OpenArm layout, or a LeRobot v2.0/v2.1/v3.0 dataset)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--episodes", action="store_true", help="also list every episode (duration, success, valid)")
    p.add_argument("--card", action="store_true",
                   help="write the dataset card to DIR/README.md (outside the paths readers open), or to -o FILE")
    p.add_argument("-o", "--output", help="with --card: write the card here instead of DIR/README.md")
    p.add_argument("--license", help="with --card: license id for the card's header (default: metadata's "
                                     "'license:' key, else 'unknown')")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.output or args.license) and not args.card:
        parser.error("-o/--output and --license go with --card")

    def body() -> int:
        import json

        from openarm_sim_dataset.explore.info import dataset_info, format_info  # start-up: not for --help

        info = dataset_info(args.dataset)
        if args.card:
            from openarm_sim_dataset.explore.card import write_card  # start-up: not for --help

            if info.get("lerobot") is not None:  # a LeRobot dataset is read, never written into
                if args.output is None:
                    from pathlib import Path

                    raise ValueError(f"{Path(args.dataset) / 'meta/info.json'}: a LeRobot dataset is never written "
                                     "into; give the card a path outside it with -o FILE")
                check_output(args.output, [args.dataset], folder=False)

            path = write_card(args.dataset, args.output, license=args.license, info=info)
            print(f"card written to {path}")
        elif args.json:
            print(json.dumps(info, indent=2))
        else:
            print(format_info(info, per_episode=args.episodes))
        return EXIT_INVALID if info.get("missing") else 0  # the figures are printed, the files still missing

    return run(body, "dataset-info")


if __name__ == "__main__":
    sys.exit(main())
