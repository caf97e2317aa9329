"""dataset-convert IN OUT --format openarm|lerobot|lerobot_v2.1|lerobot_v3.0|gr00t|rrd|robot_eval_logger: a converted copy.

IN is a dataset, or a ROS bag (a rosbag2 folder, a .mcap/.db3 file, a ROS 1 .bag, or a folder of bags: one
episode per bag), converted to openarm or a LeRobot format; `dataset-convert --inspect BAG` prints what a bag
holds and the topic map the conversion would use."""

from __future__ import annotations

import argparse
import sys

from . import Parser, check_output, run

FORMATS = ("openarm", "lerobot", "lerobot_v2.1", "lerobot_v3.0", "gr00t", "rrd", "robot_eval_logger")
#: what --format lerobot means
LEROBOT_DEFAULT = "lerobot_v3.0"
#: the formats a ROS bag converts to
BAG_FORMATS = ("openarm", "lerobot", "lerobot_v2.1", "lerobot_v3.0", "gr00t")
STATES = ("qpos", "pose", "rot6d")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="dataset-convert", description=__doc__,
        epilog="IN may be any readable layout (unversioned, 0.1.0-0.4.0, or a LeRobot v2.1/v3.0 dataset of OpenArm "
               "arms); IN is never modified. OUT must not exist: "
               "it is built in a temporary folder and renamed into place. LeRobot formats need PyAV "
               "(pip install 'openarm-sim-dataset[lerobot]'); rrd (one Rerun recording file OUT.rrd) needs rerun-sdk "
               "(pip install 'openarm-sim-dataset[rerun]'); robot_eval_logger (OUT/<eval_id>/metadata.json + "
               "traj_<i>.pkl, the LocalStorage layout of robot-eval-logger 0.0.1) needs that package "
               "(pip install 'openarm-sim-dataset[robot_eval_logger]').")
    p.add_argument("input", nargs="?", help="input dataset folder, or a ROS bag (or a folder of bags)")
    p.add_argument("output", nargs="?", help="output folder (must not exist)")
    p.add_argument("--format", choices=FORMATS, default="openarm",
                   help="output format (default openarm = 0.4.0; lerobot = lerobot_v3.0)")
    p.add_argument("--inspect", metavar="BAG", default=None,
                   help="print a ROS bag's topics (types, counts, rates) and the map a conversion would use, as a "
                        "YAML file to edit for --map; converts nothing")
    p.add_argument("--map", metavar="MAP.yaml", default=None,
                   help="ROS bag: which topic is which stream (default: made from the bag: joint names through the "
                        "OpenArm robot profile, each image topic a camera named after its topic)")
    p.add_argument("--split-on", metavar="TOPIC", default=None,
                   help="ROS bag: an episode begins at each message of TOPIC (default: one bag, one episode)")
    p.add_argument("--task", default="", help="ROS bag: the prompt of the converted episodes' task (default empty)")
    p.add_argument("--camera-format", choices=("dir", "tar"), default="dir",
                   help="openarm: cameras as folders of <ns>.jpeg (dir, default) or one tar per camera")
    p.add_argument("--valid-only", action="store_true",
                   help="only episodes that dataset-validate flagged valid: true (an episode without a valid flag "
                        "has not been validated and is excluded)")
    p.add_argument("--success-only", action="store_true", help="only episodes with success: true")
    p.add_argument("--exclude-knocked", action="store_true",
                   help="drop lucky successes (knocked_over: true: an object ended on another face, or a toppled "
                        "stack was rebuilt by chance); training on them teaches knocking objects over")
    p.add_argument("--step-hz", type=float, default=None, metavar="HZ",
                   help="robot_eval_logger: one trajectory step per 1/HZ s, each stream and camera giving its latest "
                        "sample (default: a rollout's evaluation.control_hz, the policy's steps, at most the fastest "
                        "camera's rate; else the fastest camera's rate)")
    p.add_argument("--fps", type=int, default=None,
                   help="LeRobot: frame rate of the causal resampling (default 30; from a ROS bag: the reference "
                        "topic's median rate)")
    p.add_argument("--state", choices=STATES, default="qpos",
                   help="LeRobot: arm state representation: joint positions (qpos), end-effector pose "
                        "x,y,z,qw,qx,qy,qz,gripper in the arm_origin frame (pose), or position + first two "
                        "rotation-matrix columns + gripper (rot6d); computed by forward kinematics when not recorded")
    p.add_argument("--arm-dynamics", action="store_true",
                   help="LeRobot: append recorded qvel and qtorque (obs) to observation.state")
    p.add_argument("--smoothing-cutoff", type=float, default=None, metavar="HZ",
                   help="LeRobot: low-pass the streams (4th-order Butterworth, filtfilt as openarm_dataset) at HZ "
                        "before sampling (default: none, the recorded values; openarm_dataset's default is 1.0)")
    p.add_argument("--smoothing", choices=("filtfilt", "lfilter"), default="filtfilt",
                   help="LeRobot, with --smoothing-cutoff: filtfilt (zero lag, looks ahead) or lfilter (causal)")
    p.add_argument("--reference", metavar="STREAM", default=None,
                   help="LeRobot: the frames are this stream's samples (cameras/<name>, or obs|action/<embodiment>/"
                        "<component>[/<attribute>], e.g. obs/arms/right; from a ROS bag: a topic), every other stream "
                        "and camera taken as of each frame (its latest sample, never a later one); default: the "
                        "--fps grid. Give --fps as the reference's nominal rate")
    p.add_argument("--max-age", type=float, default=None, metavar="S",
                   help="LeRobot, with --reference: drop a frame where some stream's or camera's latest sample is "
                        "more than S seconds old; the summary counts the dropped frames per episode and says where")
    p.add_argument("--train-split", type=float, default=1.0,
                   help="LeRobot: fraction of the episodes in info.json's train split, the rest val (default 1.0; "
                        "openarm_dataset's default is 0.8)")
    p.add_argument("--gop", type=int, default=None, help="LeRobot: keyframe interval in frames (default: fps/2)")
    p.add_argument("--crf", type=int, default=18, help="LeRobot: H.264 constant rate factor (default 18)")
    p.add_argument("--jpeg-quality", type=int, default=95, metavar="Q",
                   help="openarm: JPEG quality (1-100, default 95) of frames decoded from another encoding (a "
                        "LeRobot input's MP4 videos or PNG images); JPEG frames are copied as stored")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_intermixed_args(argv)  # IN OUT before or after the options (both optional: --inspect)
    from . import convert_bag as bag_cli  # start-up: --help stays free of rosbags, pyarrow and pandas
    if args.inspect is not None:
        if args.input is not None or args.output is not None:
            parser.error("--inspect BAG takes no IN or OUT (it converts nothing)")
        return run(lambda: bag_cli.inspect(args.inspect), "dataset-convert")
    if args.input is None or args.output is None:
        parser.error("IN and OUT are required (or --inspect BAG)")
    args.fps_given = args.fps
    if args.fps is None:
        args.fps = 30
    bag = bag_cli.bag_input(args.input)
    if bag:
        if args.format not in BAG_FORMATS:
            parser.error(f"a ROS bag converts to {', '.join(BAG_FORMATS)}, not {args.format}")
        if args.valid_only or args.success_only or args.exclude_knocked:
            parser.error("--valid-only, --success-only and --exclude-knocked select a dataset's episodes, not a bag's")
        if args.smoothing_cutoff is not None:
            parser.error("--smoothing-cutoff applies to a dataset input (a bag's LeRobot frames are as of each "
                         "reference message)")
    elif args.map is not None or args.split_on is not None or args.task:
        parser.error("--map, --split-on and --task apply to a ROS bag input")
    if args.format == "lerobot":
        args.format = LEROBOT_DEFAULT
    recorded_values = ("openarm", "rrd", "robot_eval_logger")
    if args.format in recorded_values and (args.state != "qpos" or args.arm_dynamics):
        parser.error("--state and --arm-dynamics apply to the LeRobot formats only (openarm, rrd and robot_eval_logger "
                     "keep the recorded data)")
    if args.format in recorded_values and (args.smoothing_cutoff is not None or args.train_split != 1.0):
        parser.error("--smoothing-cutoff and --train-split apply to the LeRobot formats only")
    if args.step_hz is not None and args.format != "robot_eval_logger":
        parser.error("--step-hz applies to --format robot_eval_logger only")
    if args.step_hz is not None and not 0 < args.step_hz < float("inf"):
        parser.error(f"--step-hz must be a positive number, not {args.step_hz:g}")
    if not 1 <= args.jpeg_quality <= 100:
        parser.error(f"--jpeg-quality must be from 1 to 100, not {args.jpeg_quality}")
    if args.jpeg_quality != 95 and args.format != "openarm":
        parser.error("--jpeg-quality applies to --format openarm only")
    if not 0.0 <= args.train_split <= 1.0:
        parser.error(f"--train-split must be between 0 and 1, not {args.train_split}")
    if args.format in recorded_values and (args.reference is not None or args.max_age is not None):
        parser.error("--reference and --max-age apply to the LeRobot formats only")
    if args.max_age is not None and not 0 < args.max_age < float("inf"):
        parser.error(f"--max-age must be a positive number of seconds, not {args.max_age:g}")
    if args.max_age is not None and args.reference is None and not bag:
        parser.error("--max-age applies with --reference (the frames of the --fps grid are never stale)")

    if bag:
        def bag_body() -> int:
            check_output(args.output, [args.input])
            return bag_cli.convert_bag(args)

        return run(bag_body, "dataset-convert")

    def body() -> int:
        # start-up: --help stays free of pyarrow and pandas
        from openarm_sim_dataset.core.dataset import Dataset
        from openarm_sim_dataset.ops.convert import (
            LeRobotOptions,
            select_episodes,
            to_lerobot,
            to_openarm,
            to_robot_eval_logger,
            to_rrd,
        )

        # never inside (or over) the input; a folder's path (rrd: a file's) that is not an existing file
        check_output(args.output, [args.input], folder=args.format != "rrd")
        ds = Dataset(args.input)
        if args.format == "rrd":
            chosen = select_episodes(ds, valid_only=args.valid_only, success_only=args.success_only,
                                     exclude_knocked=args.exclude_knocked)
            summary = to_rrd(ds, args.output, quiet=args.quiet, episodes=chosen)
        elif args.format == "robot_eval_logger":
            summary = to_robot_eval_logger(ds, args.output, step_hz=args.step_hz, valid_only=args.valid_only,
                                           success_only=args.success_only, exclude_knocked=args.exclude_knocked,
                                           quiet=args.quiet)
        elif args.format == "openarm":
            summary = to_openarm(ds, args.output, camera_format=args.camera_format, valid_only=args.valid_only,
                                 success_only=args.success_only, quiet=args.quiet,
                                 exclude_knocked=args.exclude_knocked, jpeg_quality=args.jpeg_quality)
        else:
            opts = LeRobotOptions(fps=args.fps, state=args.state, arm_dynamics=args.arm_dynamics,
                                  valid_only=args.valid_only, success_only=args.success_only,
                                  exclude_knocked=args.exclude_knocked, gop=args.gop, crf=args.crf,
                                  train_split=args.train_split, smoothing_cutoff=args.smoothing_cutoff,
                                  smoothing=args.smoothing, reference=args.reference, max_age_s=args.max_age)
            summary = to_lerobot(ds, args.output, args.format, opts, quiet=args.quiet)
        print(summary.line())
        return 0

    return run(body, "dataset-convert")


if __name__ == "__main__":
    sys.exit(main())
