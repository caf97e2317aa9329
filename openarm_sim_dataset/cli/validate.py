"""dataset-validate DIR: checks of form (any dataset) and of meaning (simulated datasets).

Prints one row per check, `[pass|FAIL|skip] check  detail`, with figures, then a summary counting
passed, failed and skipped checks apart (a skip verified nothing; --strict makes a skip of a check
that applies to the dataset a failure). By default the result is written into metadata.yaml as
`valid: true|false` per checked episode (atomically); an episode is invalid when a failed check
names it. Exit 0: valid; 1: some check failed; 2: unusable input.

integrity: every episode's files against its manifest.sha256 (SHA-256 and size, written by every
writer of this package); skipped when no episode has one (a dataset written by another tool).
camera_frozen: the same image (byte-identical, or a mean |difference| below --frozen-noise-floor)
for --frozen-seconds or longer while an arm joint moves more than --frozen-motion rad.
sim_render: every camera frame rendered again from its stored state; on the GL renderer recorded in
the provenance the re-encoded JPEG must equal the stored bytes; on another renderer the comparison
is approximate (the renderer differs): decoded pixels must reach PSNR >= --render-psnr-db
(default 25 dB; JPEG quality 90 alone costs 30-34 dB on the generated images).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import fields

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported

from ..validate.thresholds import Thresholds  # noqa: E402
from . import EXIT_INVALID, EXIT_OK, run  # noqa: E402

_HELP = {
    "gap_periods": "an interval longer than this many declared periods is a dropped sample",
    "rate_tolerance": "median interval must be within this fraction of the declared period",
    "max_joint_step": "rad: a larger qpos change between consecutive samples is a jump",
    "joint_limit_margin": "rad allowed beyond the OpenArm joint limits (joints 1-7)",
    "quat_norm_tolerance": "allowed | |q| - 1 | of pose quaternions",
    "min_duration": "s: shorter episodes are too short to use",
    "plane_error": "m: median distance of back-projected floor/table pixels to their plane",
    "reprojection_px": "px: cube centre projected with the fixed camera vs its mask centroid",
    "wrist_hit_fraction": "fraction of in-view frames where the red cube projects onto its own label",
    "frozen_seconds": "s: a camera showing one image this long while the arms move is frozen",
    "frozen_noise_floor": "grey levels: consecutive frames whose mean |difference| is at most this show the same image",
    "frozen_motion": "rad: arm motion (largest joint range) during an unchanged run that makes it a frozen camera "
                     "(recorded data: a wrist camera counts its own arm only, a fixed camera any arm)",
    "frozen_view_fraction": "simulated data: fraction of a camera's pixels whose sidecar label or depth changed during "
                            "an unchanged run that makes it a frozen camera (measured: still views of clean data <= 0.0007, "
                            "the moving wrist view of a frozen camera > 0.5)",
    "frozen_depth_m": "m: depth change of a sidecar pixel that counts as a change of the camera's view",
    "render_psnr_db": "dB: sim_render on another GL renderer than the recorded one (approximate): lowest PSNR "
                      "of a re-rendered frame against the stored JPEG",
    "sim_render_stride": "sim_render re-renders every K-th camera frame (1: every frame)",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dataset-validate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="dataset folder (any OpenArm layout)")
    p.add_argument("--episodes", nargs="+", help="only these episode ids")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--no-update-metadata", action="store_true", help="do not write valid flags into metadata.yaml")
    p.add_argument("--no-simulation", action="store_true", help="skip the simulation checks")
    p.add_argument("--regenerate", nargs="+", metavar="ID", default=[],
                   help="generate these episodes again from their seed and compare array for array (slow)")
    p.add_argument("--checks", nargs="+", help="run only these checks")
    p.add_argument("--quick", action="store_true", help="only the form and integrity checks (no camera content, "
                                                        "no simulation checks)")
    p.add_argument("--strict", action="store_true", help="a skipped check that applies to the dataset (nothing "
                                                         "verified, e.g. no manifest) is a failure")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run the per-episode simulation checks as Ray tasks: a local cluster without ADDRESS, or an "
                        "existing one (auto, host:port, ray://host:port); the dataset path must be readable on every "
                        "node (pip install 'openarm-sim-dataset[ray]')")
    t = p.add_argument_group("thresholds")
    for f in fields(Thresholds):
        t.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default,
                       help=f"{_HELP.get(f.name, '')} (default {f.default})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def body() -> int:
        from ..dataset import Dataset
        from ..validate import valid_flags, validate, write_valid_flags

        ds = Dataset(args.dataset)
        th = Thresholds(**{f.name: getattr(args, f.name) for f in fields(Thresholds)})
        ray = None
        if args.ray is not None:
            from ..cluster import RayOptions, import_ray

            import_ray()  # a missing extra is one line before any work
            ray = RayOptions(address=None if args.ray == "local" else args.ray)
        rows = validate(ds, episodes=args.episodes, thresholds=th, simulation=not args.no_simulation,
                        regenerate=args.regenerate, checks=args.checks, quick=args.quick, strict=args.strict, ray=ray)
        flags = valid_flags(ds, rows, args.episodes)
        if not args.no_update_metadata:
            write_valid_flags(ds, flags)
        failed = [r for r in rows if r.failed]
        for line in rows.file_lines:  # openarm_dataset's per-file lines, which scripts grep stderr for
            print(line, file=sys.stderr)
        if args.json:
            print(json.dumps({"dataset": str(ds.root), "valid": not failed, "checks": rows.counts, "strict": args.strict,
                              "rows": [r.to_dict() for r in rows], "episodes": flags}, indent=2))
        else:
            width = max(len(r.check) for r in rows)
            for r in rows:
                tag = {"skip": "skip", "pass": "pass", "fail": "FAIL"}[r.status]
                eps = f"  [episodes: {', '.join(r.episodes[:10])}{' ...' if len(r.episodes) > 10 else ''}]" if r.failed and r.episodes else ""
                print(f"[{tag}] {r.check:<{width}}  {r.detail}{eps}")
            n_bad = sum(not v for v in flags.values())
            print(f"{ds.root}: {'valid' if not failed else 'INVALID'} ({rows.summary()}, "
                  f"{len(flags) - n_bad}/{len(flags)} episodes valid)")
        return EXIT_INVALID if failed else EXIT_OK

    return run(body, "dataset-validate")


if __name__ == "__main__":
    sys.exit(main())
