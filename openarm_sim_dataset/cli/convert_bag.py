"""dataset-convert with a ROS bag as its input: the conversion, the bag's faults, the output validated.

Parsing is dataset-convert's (:mod:`.convert`, which imports this module only after parsing: ``--help``
stays free of rosbags and pyarrow); this prints. Exit 0: converted and valid; 1: converted,
but the bag has faults or the output fails validation (the output is kept: its report says what); 2: the
bag or its map cannot be used (nothing written).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.ops.convert.rosbag import bag_to_lerobot, bag_to_openarm, inspect_bag
from openarm_sim_dataset.ops.convert.rosbag.bag import is_bag
from openarm_sim_dataset.validate import valid_flags, validate, write_valid_flags

from . import EXIT_INVALID, EXIT_OK

LEROBOT = {"lerobot": "lerobot_v3.0", "lerobot_v3.0": "lerobot_v3.0", "lerobot_v2.1": "lerobot_v2.1", "gr00t": "gr00t"}


def bag_input(path: str) -> bool:
    """Whether IN is a bag, or a folder of bags that is not a dataset (no metadata.yaml, no LeRobot meta/)."""
    p = Path(path)
    if is_bag(p):
        return True
    if not p.is_dir() or (p / "metadata.yaml").exists() or (p / "meta").is_dir():
        return False
    return any(is_bag(c) for c in p.iterdir())


def inspect(source: str) -> int:
    print(inspect_bag(source), end="")
    return EXIT_OK


def _validated(out: str, quiet: bool) -> bool:
    """Validate the output (its valid flags written), print the rows that did not pass; True if valid."""
    ds = Dataset(out)
    rows = validate(ds, simulation=False)
    flags = valid_flags(ds, rows, None)
    if flags and ds.lerobot is None:  # a LeRobot output has no metadata.yaml to hold them
        write_valid_flags(ds, flags)
    failed = [r for r in rows if r.failed]
    width = max((len(r.check) for r in rows), default=0)
    for r in rows:
        if r.status in ("fail", "warn") or not quiet:
            tag = {"skip": "skip", "pass": "pass", "warn": "warn", "fail": "FAIL"}[r.status]
            print(f"  [{tag}] {r.check:<{width}}  {r.detail}")
    bad = sum(not v for v in flags.values())
    print(f"{ds.root}: {'valid' if not failed else 'INVALID'} ({rows.summary()}, {len(flags) - bad}/{len(flags)} "
          "episodes valid)")
    return not failed


def convert_bag(args: argparse.Namespace) -> int:
    """Convert the bag(s) ``args.input`` as dataset-convert's options say; print what happened."""
    if args.format == "openarm":
        conv = bag_to_openarm(args.input, args.output, map_file=args.map, split_on=args.split_on,
                              camera_format=args.camera_format, task=args.task)
        print(conv.summary.line())
    else:
        conv, summary = bag_to_lerobot(args.input, args.output, LEROBOT[args.format], map_file=args.map,
                                       split_on=args.split_on, reference=getattr(args, "reference", None),
                                       max_age=getattr(args, "max_age", None),
                                       fps=args.fps_given, task=args.task, quiet=args.quiet, state=args.state,
                                       arm_dynamics=args.arm_dynamics, gop=args.gop, crf=args.crf,
                                       train_split=args.train_split)
        print(summary.line())
    faults = False
    for rep in conv.reports:
        eps = f"episode {rep.episodes[0]}" if len(rep.episodes) == 1 else f"episodes {rep.episodes[0]}..{rep.episodes[-1]}"
        print(f"bag {rep.bag} ({eps}):")
        for f in rep.findings:
            if f.status == "fail" or not args.quiet:
                print(f"  {f.line()}")
            faults |= f.status == "fail"
    print(f"validating {args.output}:")
    valid = _validated(args.output, args.quiet)
    return EXIT_INVALID if faults or not valid else EXIT_OK
