"""dataset-validate DIR: checks of form (any dataset) and of meaning (simulated datasets).

Prints one row per check, `[pass|warn|FAIL|skip] check  detail`, with figures, then a summary
counting passed, warned, failed and skipped checks apart (a skip verified nothing; a warn row keeps a
finding, with its counts, that leaves the episodes it names usable; --strict makes a warning, and a
skip of a check that applies to the dataset, a failure). By default the result is written into
metadata.yaml as `valid: true|false` per checked episode (atomically); an episode is invalid when a
failed check names it (a warning leaves it valid). Exit 0: valid; 1: some check failed, or the dataset
has no episodes (one line says so: nothing was checked); 2: unusable input.

integrity: every episode's files against its manifest.sha256 (SHA-256 and size, written by every
writer of this package); skipped when no episode has one (a dataset written by another tool).
timestamps, camera_rate: recorded data (no sim/sidecar.npz) is judged against a dropped-sample
budget per episode and stream (--max-dropped-fraction, --max-gap-seconds): within it the row is a
warn (the episode stays valid), beyond it a failure; a median rate off the declared one is a warn.
Simulated episodes keep exact timing: any gap fails.
qvel_consistency, action_follows_obs, duplicate_episodes, jpeg_encoding: physical consistency of any
dataset (obs qvel vs obs qpos; each obs joint vs its own command; identical episodes under other ids;
each camera's JPEG headers the same across frames and episodes).
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

from openarm_sim_dataset.validate.thresholds import Thresholds  # noqa: E402

from . import EXIT_INVALID, EXIT_OK, Parser, run  # noqa: E402

_HELP = {
    "gap_periods": "an interval longer than this many declared periods is a dropped sample",
    "rate_tolerance": "median interval must be within this fraction of the declared period (recorded data: "
                      "beyond it a warn, the declared rate is wrong but every sample has its stamp; simulated: fail)",
    "max_dropped_fraction": "dropped-sample budget of recorded data, per episode and stream: up to this fraction "
                            "dropped/(stored+dropped) the gaps are a warn, beyond it a failure (simulated data: any "
                            "gap fails); measured: reference fixtures 0.003, tools/record_demo.py on a loaded 2-core "
                            "machine 0.273 (state) and 0.238 (cameras)",
    "max_gap_seconds": "s: dropped-sample budget of recorded data: longest gap of one stream of one episode; "
                       "measured: reference fixtures 0.0087, tools/record_demo.py 0.060 (state at 250 Hz) and "
                       "0.464 (cameras at 10 Hz)",
    "max_joint_speed": "rad/s: qpos_jumps, a joint faster than this between consecutive samples jumps (per sample "
                       "this times the stream's median period: 0.12 rad at 250 Hz, 3 rad at 10 Hz); the fastest "
                       "OpenArm joints (5-7) turn 20.9 rad/s without load, joints 1-2 16.8, joints 3-4 5.4; "
                       "measured: ours <= 10 rad/s, recorded fixtures 1.1, LeRobot fixtures 4.9",
    "max_joint_step": "rad per sample: qpos_jumps limit at any rate instead of --max-joint-speed times the median "
                      "period (0: derived from --max-joint-speed; 0.3 was the fixed limit before)",
    "joint_limit_margin": "rad allowed beyond the OpenArm joint limits (joints 1-7)",
    "quat_norm_tolerance": "allowed | |q| - 1 | of pose quaternions",
    "min_duration": "s: shorter episodes are too short to use",
    "qvel_window_seconds": "s: qvel_consistency compares the integral of obs qvel with the displacement of obs qpos "
                           "over windows this long",
    "qvel_motion": "rad: qvel_consistency uses the windows where a joint moves more than this",
    "qvel_min_corr": "qvel_consistency: from this correlation (integral vs displacement) a median ratio outside "
                     "1/x..x of --qvel-scale-tolerance fails (negative: sign); below it a warn (qvel does not "
                     "follow qpos); measured: ours 1.000 (generated), 0.988 (tools/record_demo.py), reference "
                     "fixtures -0.003 (their qvel is qpos/10: warn)",
    "qvel_scale_tolerance": "qvel_consistency: allowed median ratio integral/displacement (1/x..x); measured: ours "
                            "1.00-1.05; qvel in deg/s 57.3, sign flipped -1",
    "follow_max_lag_seconds": "s: action_follows_obs searches lags of obs behind its command up to this (both ways); "
                              "measured lags +0.00..+0.08 s",
    "follow_motion": "rad: action_follows_obs compares the joints whose obs or command range exceeds this",
    "follow_scale_tolerance": "action_follows_obs: allowed range ratio obs/command (1/x..x); measured: ours "
                              "0.915-1.06 (every task), reference fixtures 1.01-1.21; action in degrees 0.0175, a still arm 0",
    "follow_margin": "action_follows_obs: another command column correlating with an obs joint by more than this "
                     "above its own command means swapped columns or arms; measured: clean margins >= +0.012 "
                     "(8 episodes, every task, --randomize all), +0.083 (record_demo), +0.481 (reference); "
                     "swapped joints -0.18..-0.61, swapped arms of a bimanual episode -0.91",
    "plane_error": "m: median distance of back-projected floor/table pixels to their plane",
    "reprojection_px": "px at 160x120, in proportion to the image diagonal above it (4 px at 320x240): cube centre "
                       "projected with the fixed camera vs its mask centroid; measured max 1.53-1.57 px per 200 px "
                       "of diagonal",
    "wrist_hit_fraction": "fraction of in-view frames where the red cube projects onto its own label",
    "frozen_seconds": "s: a camera showing one image this long while the arms move is frozen",
    "frozen_noise_floor": "grey levels: consecutive frames whose mean |difference| is at most this show the same image",
    "frozen_motion": "rad: arm motion (largest joint range) during an unchanged run that makes it a frozen camera "
                     "(recorded data: a wrist camera counts its own arm only, a fixed camera any arm)",
    "frozen_view_fraction": "simulated data: fraction of a camera's pixels whose sidecar label or depth changed during "
                            "an unchanged run that makes it a frozen camera (measured: still views of clean data <= 0.0007, "
                            "the moving wrist view of a frozen camera > 0.5)",
    "frozen_depth_m": "m: depth change of a sidecar pixel that counts as a change of the camera's view",
    "coverage_periods": "camera periods: camera_coverage, a camera's first/last frame at most this far inside the "
                        "state streams' common span (beyond: frames not recorded, judged by the dropped-sample "
                        "budget on recorded data, a failure on simulated); measured: generated <= 0.75, "
                        "tools/record_demo.py 1.47, our recorded fixtures 0.89",
    "continuity_ratio": "camera_continuity: a frame farther from each neighbour than this many times what it may "
                        "be (the neighbours' distance to each other or, if more, what the joints it sees moved, in "
                        "grey levels) does not belong between them (16x12 grey thumbnails); measured: clean <= 1.18 "
                        "(3.13 to the neighbours alone: a wrist camera at 5 Hz reaching the cube), planted faults 3.6-74",
    "continuity_floor": "grey levels: camera_continuity divides by at least this (still scenes)",
    "continuity_min_grey": "grey levels: camera_continuity judges frames more than this far from both neighbours",
    "camera_max_lag_seconds": "s: camera_joint_timing searches lags of image motion against joint motion up to this "
                              "(both ways)",
    "camera_lag_step_seconds": "s: camera_joint_timing lag resolution (at most half a camera period)",
    "timing_min_frames": "camera_joint_timing: cameras with fewer frames are not judged",
    "timing_min_corr": "camera_joint_timing: a best rank correlation below this is not measurable (counted)",
    "timing_margin": "camera_joint_timing: a lag outside the allowed ones correlating better than every allowed lag "
                     "by more than max(this, 1/sqrt(frames)) fails (simulated; recorded: a lead fails, a latency "
                     "warns); measured: clean, the best other lag at most +0.06 above the allowed ones (2.5 Hz, 29 "
                     "frames: needs 0.19); pictures shifted 1.4 s +0.19..+0.47; found from a shift of 3 periods",
    "camera_lag_tolerance_periods": "camera periods: camera_joint_timing allows lags within +- this (simulated) "
                                    "or from this lead (recorded)",
    "camera_max_latency_seconds": "s: camera_joint_timing allows recorded pictures this late (a camera's latency); "
                                  "measured lags: generated -0.04..+0.10 s, tools/record_demo.py -0.02 s",
    "render_psnr_db": "dB: sim_render on another GL renderer than the recorded one (approximate): lowest PSNR "
                      "of a re-rendered frame against the stored JPEG",
    "sim_render_stride": "sim_render re-renders every K-th camera frame (1: every frame)",
    "signal_rest_range": "signal checks: a dimension whose range over an episode is at most this times max(1, |value|) "
                         "rests there (not moving)",
    "frozen_action_min_samples": "frozen_action: an action unchanged for this many command periods (the median "
                                 "interval between its changes) is frozen",
    "frozen_action_share": "frozen_action: an episode frozen for more than this share of its time warns (our "
                           "planner's settles: 0.11; a public SO-101 recording 0.07-0.36)",
    "pinned_share": "pinned_at_bound: a dimension at its own dataset minimum or maximum for more than this share "
                    "of its samples warns (clean simulated grippers at most 0.58)",
    "outlier_sigmas": "outliers: a value this many standard deviations from the dimension's dataset mean warns "
                      "(lerobot-doctor's 10; clean data <= 4.5)",
    "jump_factor": "outliers: a one-sample step this many times the dimension's 99th-percentile step warns "
                   "(clean data <= 3.5)",
    "drift_sigmas": "drift: a dimension whose mean moves this many pooled standard deviations between the first "
                    "and the last quarter of a task's episodes warns (clean randomised data <= 0.42)",
    "drift_min_episodes": "drift: episodes of one task needed to compare its first and last quarter",
    "convention_max_lag": "action_convention: frames searched for the lag at which the action equals the state",
}


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-validate", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="dataset folder (any OpenArm layout)")
    p.add_argument("--episodes", nargs="+", help="only these episode ids")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown into FILE (the verdict, the "
                                                      "robot, what was judged and skipped, a row per check, the "
                                                      "timed findings): for a pull request or a CI summary")
    p.add_argument("--by-episode", action="store_true",
                   help="also list the episodes worst first, each with the checks it fails and warns and its count of "
                        "timed findings: which episodes to look at, drop or re-record (in --json: by_episode)")
    p.add_argument("--fail-on", choices=("fail", "warn"), default="fail",
                   help="exit 1 on a failed check (default) or also on a warning (warn: for CI; unlike --strict it "
                        "changes no verdict and no valid flag)")
    p.add_argument("--no-update-metadata", action="store_true", help="do not write valid flags into metadata.yaml")
    p.add_argument("--no-simulation", action="store_true", help="skip the simulation checks")
    p.add_argument("--regenerate", nargs="+", metavar="ID", default=[],
                   help="generate these episodes again from their seed and compare array for array (slow)")
    p.add_argument("--checks", nargs="+", help="run only these checks")
    robot = p.add_mutually_exclusive_group()
    robot.add_argument("--robot", metavar="NAME", help="judge joints, limits, speeds and units by this robot profile "
                                                       "(the robot reference lists them: openarm, so101, so100, koch, "
                                                       "aloha, generic) instead of the one robot_type, names and values "
                                                       "detect")
    robot.add_argument("--robot-file", metavar="FILE.yaml", help="a robot profile of your own (the format of the "
                                                                 "shipped ones), for a robot the registry lacks")
    p.add_argument("--quick", action="store_true", help="only the form and integrity checks (no camera content, "
                                                        "no simulation checks)")
    p.add_argument("--strict", action="store_true", help="a warning (warn row, e.g. dropped samples within the "
                                                         "budget), and a skipped check that applies to the dataset "
                                                         "(nothing verified, e.g. no manifest), is a failure")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run the per-episode simulation checks as Ray tasks: a local cluster without ADDRESS, or an "
                        "existing one (auto, host:port, ray://host:port); the dataset path must be readable on every "
                        "node (pip install 'openarm-sim-dataset[ray]')")
    p.add_argument("--workers", type=int, default=1, metavar="K",
                   help="validate groups of episodes in K processes (default 1); above 50 episodes the checks "
                        "always run on groups of 50 episodes, so memory stays flat in the number of episodes")
    s = p.add_argument_group("sampled validation (a big dataset: a verdict with its bound)")
    size = s.add_mutually_exclusive_group()
    size.add_argument("--sample", type=int, metavar="N",
                      help="every episode gets the checks that are cheap per episode; N episodes drawn at random "
                           "(stratified by task and arm) get every check, the camera content, replay and re-render "
                           "included; the report states per family of sampled checks the one-sided 95%% "
                           "Clopper-Pearson upper bound on the fraction of all episodes that would fail "
                           "(0 of 300: at most 1.0%%)")
    size.add_argument("--sample-fraction", type=float, metavar="F", help="as --sample, with a fraction F of the "
                                                                         "episodes (rounded up)")
    s.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0): the same seed draws the "
                                                       "same episodes")
    t = p.add_argument_group("thresholds")
    for f in fields(Thresholds):
        t.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default,
                       help=f"{_HELP.get(f.name, '')} (default {f.default})")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    sampled = args.sample is not None or args.sample_fraction is not None
    if sampled and args.quick:
        parser.error("--sample and --quick: --quick runs none of the checks a sample is for (drop one)")
    if args.sample is not None and args.sample < 1:
        parser.error(f"--sample must be at least 1, not {args.sample}")
    if args.sample_fraction is not None and not 0.0 < args.sample_fraction <= 1.0:
        parser.error(f"--sample-fraction must be in (0, 1], not {args.sample_fraction}")

    def body() -> int:
        from openarm_sim_dataset.core.dataset import Dataset  # start-up: not for --help
        from openarm_sim_dataset.core.lock import LockHeldError  # start-up: not for --help
        from openarm_sim_dataset.validate import (  # start-up: not for --help
            NO_EPISODES,
            valid_flags,
            validate,
            write_valid_flags,
        )

        ds = Dataset(args.dataset)
        profile = None
        if args.robot is not None or args.robot_file is not None:
            from openarm_sim_dataset.core.robots import get_profile, load_profile_file, profiles  # start-up

            if args.robot_file is not None:
                profile = load_profile_file(args.robot_file)  # a file that does not parse: one line, exit 2
            elif args.robot not in profiles():
                parser.error(f"--robot {args.robot!r}: no such robot profile (known: {', '.join(sorted(profiles()))})")
            else:
                profile = get_profile(args.robot)
        th = Thresholds(**{f.name: getattr(args, f.name) for f in fields(Thresholds)})
        ray = None
        if args.ray is not None:
            from ..core.cluster import RayOptions, import_ray  # start-up: only for --ray

            import_ray()  # a missing extra is one line before any work
            ray = RayOptions(address=None if args.ray == "local" else args.ray)
        options = dict(episodes=args.episodes, thresholds=th, simulation=not args.no_simulation,
                       regenerate=args.regenerate, checks=args.checks, quick=args.quick, strict=args.strict, ray=ray,
                       workers=max(1, args.workers), robot=profile)
        if sampled:
            from openarm_sim_dataset.validate.sampling import Sample, sampled_validate  # start-up: only --sample

            rows = sampled_validate(ds, Sample(args.sample, args.sample_fraction, args.seed), **options)
        else:
            rows = validate(ds, **options)
        flags = valid_flags(ds, rows, args.episodes)
        record = rows.sample.to_dict() if rows.sample is not None else None
        if not args.no_update_metadata and flags:  # no episode (an empty dataset): nothing to flag
            try:
                write_valid_flags(ds, flags, sample=record)
            except LockHeldError:  # a writer is committing episodes: the verdict stands, unrecorded
                print(f"dataset-validate: {ds.root / 'metadata.yaml'}: not updated: another process is writing this "
                      "dataset (lock held); the verdict below is not recorded", file=sys.stderr)
        failed = [r for r in rows if r.failed]
        if args.markdown:
            from openarm_sim_dataset.core.atomic import atomic_write_bytes  # start-up: only --markdown
            from openarm_sim_dataset.validate.report_markdown import markdown  # start-up: only --markdown

            atomic_write_bytes(args.markdown, markdown(rows, args.dataset, flags).encode())
        warned = args.fail_on == "warn" and any(r.status == "warn" for r in rows)
        for line in rows.file_lines:  # openarm_dataset's per-file lines, which scripts grep stderr for
            print(line, file=sys.stderr)
        if args.json:
            doc = {"dataset": str(ds.root), "valid": not failed, "checks": rows.counts,
                   "judged": rows.judged_summary(), "robot": rows.robot, "strict": args.strict,
                   "rows": [r.to_dict() for r in rows], "episodes": flags}
            if record is not None:
                doc["sample"] = record
            if args.by_episode:
                from openarm_sim_dataset.validate.episode_table import episode_table  # start-up: only --by-episode

                doc["by_episode"] = episode_table(rows, flags)
            print(json.dumps(doc, indent=2))
        elif [r.check for r in rows] == [NO_EPISODES]:  # an empty dataset: one verdict, exit 1
            print(f"{ds.root}: INVALID ({rows[0].detail})")
        else:
            if rows.robot is not None:
                print(f"robot: {rows.robot['profile']} ({rows.robot['why']})")
            width = max(len(r.check) for r in rows)
            for r in rows:
                tag = {"skip": "skip", "pass": "pass", "warn": "warn", "fail": "FAIL"}[r.status]
                named = r.episodes if r.failed else r.warned if r.status == "warn" else []
                eps = f"  [episodes: {', '.join(named[:10])}{' ...' if len(named) > 10 else ''}]" if named else ""
                print(f"[{tag}] {r.check:<{width}}  {r.detail}{eps}")
            if rows.sample is not None:
                for line in rows.sample.lines():
                    print(line)
            n_bad = sum(not v for v in flags.values())
            print(f"judged: {rows.judged_summary()}")
            if args.by_episode:
                from openarm_sim_dataset.validate.episode_table import episode_lines, episode_table  # start-up

                for line in episode_lines(episode_table(rows, flags)):
                    print(line)
            print(f"{ds.root}: {'valid' if not failed else 'INVALID'} ({rows.summary()}, "
                  f"{len(flags) - n_bad}/{len(flags)} episodes valid)")
        return EXIT_INVALID if failed or warned else EXIT_OK

    return run(body, "dataset-validate")


if __name__ == "__main__":
    sys.exit(main())
