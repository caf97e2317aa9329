"""dataset-edit SRC OUT: a new dataset from SRC with episodes selected, relabelled, trimmed or split (SRC is never modified)."""

from __future__ import annotations

import argparse
import sys

from . import Parser, check_output, progress_line, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="dataset-edit", description=__doc__,
        epilog="Order: select (--keep, --drop, --where on the source's labels), relabel, trim, split; ids renumbered "
               "0..N-1 per output unless --keep-ids. START/END of --trim: '1.5s' is seconds from the episode's first "
               "stamp, '15' a frame number (a simulated episode's sidecar frames, else its first camera's frames, else "
               "rows of its first obs stream), both inclusive; a simulated episode is cut at its sidecar frames and "
               "still replays bit for bit. With --split, OUT/train and OUT/<name> are written. Every output records "
               "edited_from (source path, SHA-256 of its metadata.yaml and kept episodes' manifests, the operations). "
               "Each episode is committed as it is written; rerunning the same command resumes an interrupted edit. "
               "Bad input (unknown id, trim outside an episode, empty result, OUT inside SRC, a relabel a simulated "
               "episode's judge contradicts without --force) is one line, exit 2, nothing written.")
    p.add_argument("src", help="source dataset folder (never modified)")
    p.add_argument("out", help="output folder (new, or an interrupted run of the same edit to resume)")
    g = p.add_argument_group("select")
    g.add_argument("--keep", nargs="+", metavar="IDS", help="keep only these episode ids ('0,3 5-7')")
    g.add_argument("--drop", nargs="+", metavar="IDS", default=[], help="drop these episode ids")
    g.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep episodes whose entry has KEY=VALUE (or KEY!=VALUE): success, valid, knocked_over, outcome, "
                        "task, task_index, prompt, operation_type or any entry key; repeat to AND clauses")
    g.add_argument("--keep-ids", action="store_true", help="keep the source's episode ids (default: renumber 0..N-1)")
    g = p.add_argument_group("relabel")
    g.add_argument("--set-prompt", nargs=2, action="append", default=[], metavar=("TASK", "TEXT"),
                   help="replace task TASK's prompt")
    g.add_argument("--set-description", nargs=2, action="append", default=[], metavar=("TASK", "TEXT"),
                   help="replace task TASK's description")
    g.add_argument("--set-task", nargs=2, action="append", default=[], metavar=("ID", "TASK"),
                   help="set episode ID's task_index")
    g.add_argument("--set-success", nargs=2, action="append", default=[], metavar=("ID", "BOOL"),
                   help="set episode ID's success (true|false)")
    g.add_argument("--set-outcome", nargs=2, action="append", default=[], metavar=("ID", "TEXT"),
                   help="set episode ID's outcome")
    g.add_argument("--force", action="store_true",
                   help="relabel a simulated episode against its task's rule (or its seed's task index): the entry is "
                        "marked 'relabelled: {KEY: {from, to, by: hand}}', which dataset-validate accepts and reports")
    g = p.add_argument_group("trim")
    g.add_argument("--trim", nargs=3, action="append", default=[], metavar=("ID", "START", "END"),
                   help="keep episode ID from START to END ('1.5s' seconds or '15' a frame number)")
    g.add_argument("--trim-idle", action="store_true",
                   help="cut each episode's head and tail in which no obs joint moves more than --idle-threshold "
                        "(episodes given --trim excepted); the figures are printed")
    g.add_argument("--idle-threshold", type=float, default=0.01, metavar="RAD",
                   help="motion threshold of --trim-idle, radians from the first/last sample (default 0.01)")
    g.add_argument("--idle-margin", type=float, default=0.2, metavar="S",
                   help="seconds kept before the first and after the last motion (default 0.2)")
    g = p.add_argument_group("split")
    g.add_argument("--split", nargs="+", metavar="NAME=FRACTION",
                   help="write OUT/NAME with that fraction of each task's episodes and OUT/train with the rest (val=0.1)")
    g.add_argument("--seed", type=int, default=0, help="seed of the split's draw (default 0)")
    p.add_argument("--camera-format", choices=("dir", "tar"), help="cameras as folders or tars (default: the source's)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines (the figures of --trim-idle stay)")
    return p


def spec_from_args(args: argparse.Namespace):
    """The :class:`~openarm_sim_dataset.edit.EditSpec` of parsed arguments."""
    from openarm_sim_dataset.ops.edit import (  # start-up: not for --help
        EditSpec,
        IdleTrim,
        Trim,
        parse_bool,
        parse_ids,
        parse_split,
    )

    def task_index(text: str, flag: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{flag} {text!r}: a task index (0, 1, ...)") from None

    if args.idle_threshold <= 0 or args.idle_margin < 0:
        raise ValueError("--idle-threshold must be > 0 and --idle-margin >= 0")
    return EditSpec(
        keep=parse_ids(args.keep) if args.keep else None,
        drop=parse_ids(args.drop),
        where=tuple(args.where),
        keep_ids=args.keep_ids,
        prompts=tuple((task_index(t, "--set-prompt"), text) for t, text in args.set_prompt),
        descriptions=tuple((task_index(t, "--set-description"), text) for t, text in args.set_description),
        tasks=tuple((parse_ids([e])[0], task_index(t, "--set-task")) for e, t in args.set_task),
        successes=tuple((parse_ids([e])[0], parse_bool(v, f"--set-success {e}")) for e, v in args.set_success),
        outcomes=tuple((parse_ids([e])[0], str(v)) for e, v in args.set_outcome),
        force=args.force,
        trims=tuple(Trim(parse_ids([e])[0], s, t) for e, s, t in args.trim),
        trim_idle=IdleTrim(args.idle_threshold, args.idle_margin) if args.trim_idle else None,
        split=parse_split(args.split) if args.split else (),
        seed=args.seed,
        camera_format=args.camera_format,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from openarm_sim_dataset.ops.edit import edit  # start-up: not for --help

        check_output(args.out, [args.src])
        spec = spec_from_args(args)

        def say(line: str) -> None:
            if line.startswith("edit: "):
                if not args.quiet:
                    progress_line(line)
            else:
                print(line, flush=True)

        summary = edit(args.src, args.out, spec, progress=say)
        print(summary.line())
        return 0

    return run(body, "dataset-edit")


if __name__ == "__main__":
    sys.exit(main())
