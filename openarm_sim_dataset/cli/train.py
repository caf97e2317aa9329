"""dataset-train: behaviour cloning with action chunks on an OpenArm dataset (extra [torch]).

    dataset-train DATASET --inputs cameras --out bc.pt [--cameras head wrist_right] [--steps N] [--curve c.png]
    dataset-train DATASET --inputs state   --out bc.pt --ensemble 0.5
    dataset-evaluate --policy bc.pt --out rollouts --episodes 100 --seed 1000

--inputs cameras reads what a robot measures (camera images, joint positions, time since the start);
--inputs state is privileged (the cubes' poses from the simulator). The checkpoint records its inputs
(cameras, image size, camera rate, control rate), so dataset-evaluate needs no other flag. A killed run
resumes from OUT.resume when rerun with the same command; deterministic from --seed at a given
--threads. Exit 2 on unusable input (one line).
"""

from __future__ import annotations

import argparse
import json
import sys

from . import Parser, check_output, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="OpenArm dataset of demonstrations (episodes with success: true)")
    p.add_argument("--inputs", choices=["state", "cameras"], required=True,
                   help="cameras: images + joints (what a robot measures); state: joints + privileged object poses")
    p.add_argument("--out", required=True, help="checkpoint .pt to write (OUT.resume while training)")
    p.add_argument("--curve", help="training-curve PNG to write (needs matplotlib)")
    p.add_argument("--cameras", nargs="+", metavar="NAME", help="cameras for --inputs cameras (default: all of the dataset's)")
    p.add_argument("--episodes", type=int, help="use the first N successful episodes only (failed ones never)")
    p.add_argument("--hz", type=float, default=10.0, help="control rate = the loader's grid, Hz (default 10)")
    p.add_argument("--horizon", type=int, default=10, help="action chunk length, control steps (default 10)")
    p.add_argument("--execute", type=int, default=5, help="rows of a chunk played before predicting again (default 5)")
    p.add_argument("--ensemble", type=float, metavar="DECAY",
                   help="temporal ensembling at evaluation: predict every step, play the mean of the overlapping "
                        "chunks weighted exp(-DECAY * i), i = 0 the oldest (default: off)")
    p.add_argument("--max-step", type=float, default=0.25,
                   help="safety filter: largest change of a joint 1-7 target per control step, rad (default 0.25; 0 off)")
    p.add_argument("--arch", choices=["mlp", "keypoints"],
                   help="network (default: mlp for state, keypoints for cameras: GroupNorm CNN + spatial softmax)")
    p.add_argument("--keypoints", type=int, default=32, help="spatial-softmax keypoints per camera (default 32)")
    p.add_argument("--conv-width", type=int, default=16, help="channels of the first convolutions (default 16)")
    p.add_argument("--aux", type=float, default=1.0,
                   help="weight of the auxiliary loss predicting the cubes' positions from the images (training "
                        "only, simulated data; 0 off; default 1)")
    p.add_argument("--hidden", type=int, default=256, help="MLP width (default 256)")
    p.add_argument("--steps", type=int, default=3000, help="optimiser steps (default 3000)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default 256)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate, cosine schedule (default 1e-3)")
    p.add_argument("--shift", type=int, default=3, help="random image shift, pixels (cameras; default 3)")
    p.add_argument("--val", type=float, default=0.1, help="fraction of episodes held out for the curve (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="split, initialisation, batches (default 0)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1; the result depends on it)")
    p.add_argument("--checkpoint-every", type=float, default=60.0, metavar="S",
                   help="seconds between resumable states OUT.resume (default 60)")
    p.add_argument("--prompt", action="store_true",
                   help="condition on each episode's task prompt (one policy for several tasks; the evaluator "
                        "gives it the task's prompt)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from openarm_sim_dataset.learn.bc import TrainConfig, train  # start-up: not for --help

        # the checkpoint (and OUT.resume) never lands inside the dataset it learns from
        check_output(args.out, [args.dataset], folder=False)
        cfg = TrainConfig(dataset=args.dataset, inputs=args.inputs, out=args.out, cameras=args.cameras,
                          curve=args.curve, episodes=args.episodes, hz=args.hz, horizon=args.horizon,
                          execute=args.execute, max_step=args.max_step, ensemble=args.ensemble, hidden=args.hidden,
                          steps=args.steps, batch=args.batch, lr=args.lr, shift=args.shift, val=args.val,
                          seed=args.seed, threads=args.threads, arch=args.arch, keypoints=args.keypoints,
                          conv_width=args.conv_width, aux=args.aux, checkpoint_every=args.checkpoint_every,
                          prompt=args.prompt)
        quiet = args.quiet or args.json
        # a bar on a terminal; off it, one line per logging interval (1/50 of the run), no carriage returns
        tty = sys.stderr.isatty()
        res = train(cfg, progress=not quiet and tty,
                    log=None if quiet or tty else (lambda line: print(line, file=sys.stderr, flush=True)))
        d = res.as_dict()
        if args.json:
            print(json.dumps(d))
        else:
            print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items()))
        return 0

    return run(body, "dataset-train")


if __name__ == "__main__":
    sys.exit(main())
