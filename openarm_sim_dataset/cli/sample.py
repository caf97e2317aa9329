"""dataset-sample DIR --hz F: resample a dataset and print what the samples hold."""

from __future__ import annotations

import argparse
import sys
import time

from openarm_sim_dataset.core.sampler import ALIGNMENTS

from . import Parser, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-sample", description=__doc__)
    p.add_argument("dataset", help="dataset folder (any OpenArm layout)")
    p.add_argument("--hz", type=float, default=5.0, help="grid rate in Hz (default 5)")
    p.add_argument("--episode", help="only this episode id")
    p.add_argument("--align", choices=ALIGNMENTS, default="previous",
                   help="previous: latest value at or before t (default, causal); next: first at or after t "
                        "(openarm_dataset's rule); nearest")
    p.add_argument("--decode", action="store_true", help="decode camera frames (thread pool)")
    p.add_argument("--show", type=int, default=2, help="print the first N samples of each episode (default 2)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        import numpy as np

        from openarm_sim_dataset.core.dataset import Dataset  # start-up: not for --help

        ds = Dataset(args.dataset)
        t0 = time.perf_counter()
        counts: dict[str, int] = {}
        for s in ds.sample(args.hz, episode=args.episode, align=args.align, decode=args.decode):
            n = counts.get(s.episode, 0)
            counts[s.episode] = n + 1
            if n < args.show:
                cams = {k: (v.shape if isinstance(v, np.ndarray) else f"frame@{v.timestamp_ns}") for k, v in s.cameras.items()}
                obs = {k: np.round(v[:3], 3).tolist() for k, v in list(s.obs.items())[:2]}
                print(f"episode {s.episode} t={s.timestamp_ns} ns obs={obs} cameras={cams}")
        dt = time.perf_counter() - t0
        total = sum(counts.values())
        print(f"{total} samples from {len(counts)} episode(s) at {args.hz:g} Hz (align={args.align}) "
              f"in {dt:.2f} s ({total / max(dt, 1e-9):.0f} samples/s)")
        return 0

    return run(body, "dataset-sample")


if __name__ == "__main__":
    sys.exit(main())
