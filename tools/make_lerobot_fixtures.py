"""Write the LeRobot fixtures under tests/fixture/lerobot/ with LeRobot's own API (run by hand, never in CI).

    HF_HUB_OFFLINE=1 /tmp/lr044/bin/python tools/make_lerobot_fixtures.py --out tests/fixture/lerobot
    HF_HUB_OFFLINE=1 /tmp/lr033/bin/python tools/make_lerobot_fixtures.py --out tests/fixture/lerobot

Runs in a LeRobot virtual environment (imports numpy, lerobot and its `datasets` only; LeRobot is never a dependency
of this package). LeRobot >= 0.4 writes the v3.0 datasets, LeRobot 0.3.x the v2.1 one; each run
replaces the datasets it writes and its entries of ``SOURCE.json`` (versions, the command, the LeRobot
calls made, and the sha256 and size of every file), keeping the other version's entries.

The features are built the way ``lerobot-record`` builds them (the robot class's
``observation_features`` / ``action_features`` through the default processors), the robot objects
are constructed but never connected. Frames go through ``build_dataset_frame`` and ``add_frame``.
The joint values are smooth sinusoids in degrees inside the OpenArm follower's joint limits; every
camera shows bright bars whose x position follows joint_1 of an arm, so the pictures move with the
joints. Nothing is downloaded or pushed: HF_HUB_OFFLINE=1, every dataset has an explicit ``root``,
and HF_HOME points into the work folder (/tmp/make_lerobot_fixtures.work), removed at the end.

The datasets of other robots (v30_so101, v30_so101_m100, v30_aloha, v30_openarm_ros, v30_state_actions;
issue 46) carry those robots' names and units, values as they write them (see "other robots" below); their
SOURCE.json entries say in "content" what is planted where. v30_so101* build SO101Follower, whose bus needs
LeRobot's `feetech` extra: ``/tmp/lr044/bin/pip install 'feetech-servo-sdk>=1.0,<2'``.

A rerun writes the same bytes: the script runs itself with PYTHONHASHSEED=0 (LeRobot writes some
metadata in set order), works in a fixed folder and seeds the fingerprint ``datasets`` stores in
the parquet schema (it hashes the temporary image paths).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if os.environ.get("PYTHONHASHSEED") != "0":  # LeRobot's metadata follows set order: fixed, so that a rerun
    os.environ["PYTHONHASHSEED"] = "0"       # writes the same bytes
    os.execv(sys.executable, [sys.executable, *sys.argv])
os.environ["HF_HUB_OFFLINE"] = "1"
# a fixed work folder: `datasets` hashes the temporary image paths into the fingerprint of the parquet
_WORK = Path(tempfile.gettempdir()) / "make_lerobot_fixtures.work"
if "LEROBOT_FIXTURES_WORK" not in os.environ:  # not the crashing child writer, which shares it
    if _WORK.exists():
        sys.exit(f"{_WORK} exists: another run is under way, or a killed one left it (remove it)")
    _WORK.mkdir()
    os.environ["LEROBOT_FIXTURES_WORK"] = str(_WORK)
os.environ["HF_HOME"] = str(_WORK / "hf_home")  # caches of `datasets`/hub go here, not to ~/.cache
os.environ["HF_LEROBOT_HOME"] = str(_WORK / "lerobot_home")
os.environ["HF_LEROBOT_CALIBRATION"] = str(_WORK / "calibration")

import lerobot  # noqa: E402
import numpy as np  # noqa: E402

try:  # the fingerprint `datasets` stores in the parquet schema starts from a random one: seeded
    from datasets import fingerprint as _fingerprint

    _fingerprint.fingerprint_rng.seed(0)
except (ImportError, AttributeError):  # pragma: no cover
    pass

FPS = 30
WIDTH, HEIGHT = 64, 48
LENGTHS = (30, 38, 45)
# with a last episode over 4 s: what the validator's camera_joint_timing needs (2 x 1.5 s of lags + 1 s)
# and action_follows_obs (2 s), for the datasets whose pictures and actions those checks judge
LONG_LENGTHS = (30, 38, 125)
TASKS = ("pick up the red cube", "fold the towel")
EPISODE_TASKS = (0, 1, 0)
MOTORS = ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6", "joint_7", "gripper")
# lerobot/robots/openarm_follower/config_openarm_follower.py (0.4.4), degrees; checked against the
# module when it exists (LeRobot 0.3.x has no OpenArm robot)
LIMITS = {
    "left": {"joint_1": (-75.0, 75.0), "joint_2": (-90.0, 9.0), "joint_3": (-85.0, 85.0),
             "joint_4": (0.0, 135.0), "joint_5": (-85.0, 85.0), "joint_6": (-40.0, 40.0),
             "joint_7": (-80.0, 80.0), "gripper": (-65.0, 0.0)},
    "right": {"joint_1": (-75.0, 75.0), "joint_2": (-9.0, 90.0), "joint_3": (-85.0, 85.0),
              "joint_4": (0.0, 135.0), "joint_5": (-85.0, 85.0), "joint_6": (-40.0, 40.0),
              "joint_7": (-80.0, 80.0), "gripper": (-65.0, 0.0)},
}
SO100_MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
V30 = ("v30_bi_openarm_av1", "v30_openarm_h264", "v30_deleted", "v30_merged", "v30_no_finalize",
       "v30_other_robot", "v30_radians")
# other robots' names and units (issue 46); written only with LeRobot >= 0.4
V30_ROBOTS = ("v30_so101", "v30_so101_m100", "v30_aloha", "v30_openarm_ros", "v30_state_actions")
V30 = V30 + V30_ROBOTS
V21 = ("v21_bi_openarm",)
KEEP_TOP = ("meta", "data", "videos")  # what a LeRobot dataset folder holds; the rest is removed


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3] if x.isdigit())


LEROBOT_VERSION = getattr(lerobot, "__version__", None) or __import__("importlib.metadata").metadata.version("lerobot")
IS_V30 = version_tuple(LEROBOT_VERSION) >= (0, 4)


class Log:
    """The LeRobot calls made for one dataset, as written in SOURCE.json."""

    def __init__(self):
        self.calls: list[str] = []

    def __call__(self, text: str) -> None:
        self.calls.append(text)
        print("   ", text, flush=True)


# ------------------------------------------------------------------------------------------ content
def motion(side: str, n: int, episode: int) -> dict[str, np.ndarray]:
    """One arm's ``<motor>.pos`` (deg), ``.vel`` (deg/s) and ``.torque`` (N m) over n frames: every joint
    follows the arm's common profile (two sinusoids of unrelated periods: nothing repeats within an
    episode) plus a smaller sinusoid of its own, within 40 % of its range either side of its centre."""
    t = np.arange(n, dtype=np.float64) / FPS
    a = 1.3 * episode + (0.9 if side == "right" else 0.0)
    profile = [(0.75 * 0.6, 0.45, a), (0.75 * 0.4, 0.8, 2 * a + 0.5)]  # (weight, Hz, phase)
    out = {}
    for j, motor in enumerate(MOTORS):
        lo, hi = LIMITS[side][motor]
        centre, amp = (lo + hi) / 2, 0.4 * (hi - lo)
        terms = profile + [(0.25, 0.55 + 0.08 * j, 0.7 * j + a)]  # weights sum to 1: within centre +- amp
        out[f"{motor}.pos"] = centre + amp * sum(k * np.sin(2 * np.pi * hz * t + ph) for k, hz, ph in terms)
        out[f"{motor}.vel"] = amp * sum(k * 2 * np.pi * hz * np.cos(2 * np.pi * hz * t + ph) for k, hz, ph in terms)
        out[f"{motor}.torque"] = (3.0 if j < 4 else 0.8) * np.sin(2 * np.pi * terms[-1][1] * t + terms[-1][2] + 0.3)
    return out


BAR_HALF_WIDTH = 5.0  # pixels


def bar_centre(degrees: float) -> float:
    """Where the bar of a joint at ``degrees`` is centred (x in pixels from the left edge): -75..75 deg
    across the picture, the bar inside it."""
    return BAR_HALF_WIDTH + (np.clip(degrees, -75, 75) + 75) / 150 * (WIDTH - 2 * BAR_HALF_WIDTH)


def bars(positions: list[float], episode: int) -> np.ndarray:
    """A HEIGHTxWIDTHx3 uint8 picture: a dim episode-tinted gradient and, in horizontal band k, a bright
    bar 2 * BAR_HALF_WIDTH wide centred at ``bar_centre(positions[k])``, drawn with sub-pixel coverage
    (its edge pixels blended), so that it moves smoothly however slowly the joint moves."""
    img = np.zeros((HEIGHT, WIDTH, 3), np.float64)
    img[..., 0] = 20 + 25 * episode
    img[..., 1] = np.linspace(15, 55, WIDTH)[None, :]
    img[..., 2] = np.linspace(40, 10, HEIGHT)[:, None]
    colours = np.array(((250, 240, 80), (90, 240, 250)), np.float64)
    band = HEIGHT // len(positions)
    left = np.arange(WIDTH, dtype=np.float64)
    for k, deg in enumerate(positions):
        c = bar_centre(deg)
        cover = np.clip(np.minimum(left + 1, c + BAR_HALF_WIDTH) - np.maximum(left, c - BAR_HALF_WIDTH), 0, 1)
        rows = img[k * band:(k + 1) * band]
        rows[:] = rows * (1 - cover[None, :, None]) + colours[k % 2] * cover[None, :, None]
    return np.round(img).astype(np.uint8)


# ----------------------------------------------------------------------------------------- features
def robot_features(robot, use_videos: bool) -> dict:
    """The dataset features ``lerobot-record`` builds for ``robot`` (0.4.x: through the default
    processors; 0.3.x: hw_to_dataset_features). 0.4.x's record drops the cameras when ``use_videos`` is
    False; then the features come from ``hw_to_dataset_features``, which keeps them as ``image``."""
    if not use_videos:
        from lerobot.datasets.utils import hw_to_dataset_features
        return {**hw_to_dataset_features(robot.action_features, "action", use_videos),
                **hw_to_dataset_features(robot.observation_features, "observation", use_videos)}
    try:
        from lerobot.datasets.pipeline_features import aggregate_pipeline_dataset_features, create_initial_features
        from lerobot.datasets.utils import combine_feature_dicts
        from lerobot.processor import make_default_processors
    except ImportError:
        from lerobot.datasets.utils import hw_to_dataset_features
        return {**hw_to_dataset_features(robot.action_features, "action", use_videos),
                **hw_to_dataset_features(robot.observation_features, "observation", use_videos)}
    teleop_action, _robot_action, robot_observation = make_default_processors()
    return combine_feature_dicts(
        aggregate_pipeline_dataset_features(pipeline=teleop_action,
                                            initial_features=create_initial_features(action=robot.action_features),
                                            use_videos=use_videos),
        aggregate_pipeline_dataset_features(pipeline=robot_observation,
                                            initial_features=create_initial_features(observation=robot.observation_features),
                                            use_videos=use_videos),
    )


class FakeRobot:
    """What a robot class exposes to ``lerobot-record`` for features: used for LeRobot 0.3.x, which has
    no OpenArm robot, with the names LeRobot 0.4.4's OpenArm classes record."""

    def __init__(self, name: str, motors: dict[str, type], cameras: dict[str, tuple]):
        self.name = name
        self.action_features = dict(motors)
        self.observation_features = {**motors, **cameras}
        self.cameras = cameras


def openarm_motor_names(prefix: str = "") -> list[str]:
    return [f"{prefix}{m}.{a}" for m in MOTORS for a in ("pos", "vel", "torque")]


def camera_shape() -> tuple[int, int, int]:
    return (HEIGHT, WIDTH, 3)


def make_robot(kind: str, cameras: tuple[str, ...] = ()):
    """(robot, calls) for ``bi_openarm_follower``, ``openarm_follower`` or ``so100_follower``: LeRobot's own
    class when it has it, constructed, never connected."""
    calib = Path(os.environ["HF_LEROBOT_CALIBRATION"])
    try:
        from lerobot.cameras.opencv import OpenCVCameraConfig
    except ImportError:  # pragma: no cover
        from lerobot.common.cameras.opencv import OpenCVCameraConfig

    def cams(names):
        return {c: OpenCVCameraConfig(index_or_path=i, fps=FPS, width=WIDTH, height=HEIGHT) for i, c in enumerate(names)}

    if kind == "bi_openarm_follower":
        try:
            from lerobot.robots.bi_openarm_follower import BiOpenArmFollower, BiOpenArmFollowerConfig
            from lerobot.robots.openarm_follower import config_openarm_follower as oc
            from lerobot.robots.openarm_follower.config_openarm_follower import OpenArmFollowerConfigBase
        except ImportError:
            assert all(c.startswith("left_") for c in cameras)
            motors = {n: float for n in openarm_motor_names("left_") + openarm_motor_names("right_")}
            return FakeRobot(kind, motors, {c: camera_shape() for c in cameras}), (
                f"features by hand (this LeRobot has no bi_openarm_follower): names as LeRobot 0.4.4's "
                f"BiOpenArmFollower records them, cameras {list(cameras)}")
        assert oc.LEFT_DEFAULT_JOINTS_LIMITS == LIMITS["left"] and oc.RIGHT_DEFAULT_JOINTS_LIMITS == LIMITS["right"]
        left = [c.removeprefix("left_") for c in cameras if c.startswith("left_")]
        right = [c.removeprefix("right_") for c in cameras if c.startswith("right_")]
        cfg = BiOpenArmFollowerConfig(
            left_arm_config=OpenArmFollowerConfigBase(port="can0", side="left", cameras=cams(left)),
            right_arm_config=OpenArmFollowerConfigBase(port="can1", side="right", cameras=cams(right)),
            id="fixture", calibration_dir=calib)
        robot = BiOpenArmFollower(cfg)
        assert list(robot.action_features) == openarm_motor_names("left_") + openarm_motor_names("right_")
        return robot, (f"BiOpenArmFollower(BiOpenArmFollowerConfig(left_arm_config=OpenArmFollowerConfigBase("
                       f"port='can0', side='left', cameras={left}), right_arm_config=OpenArmFollowerConfigBase("
                       f"port='can1', side='right', cameras={right}))) (constructed, never connected)")
    if kind == "openarm_follower":
        from lerobot.robots.openarm_follower import OpenArmFollower, OpenArmFollowerConfig
        robot = OpenArmFollower(OpenArmFollowerConfig(port="can0", side="right", cameras=cams(cameras), id="fixture",
                                                      calibration_dir=calib))
        assert list(robot.action_features) == openarm_motor_names()
        return robot, (f"OpenArmFollower(OpenArmFollowerConfig(port='can0', side='right', cameras={list(cameras)})) "
                       "(constructed, never connected)")
    if kind == "so100_follower":
        # SOFollower.__init__ builds a FeetechMotorsBus, which imports scservo_sdk (LeRobot's `feetech`
        # extra, not installed): the features are built from its motor names, as its _motors_ft does
        from lerobot.robots.so_follower import SO100Follower
        motors = {f"{m}.pos": float for m in SO100_MOTORS}
        return FakeRobot(SO100Follower.name, motors, {c: camera_shape() for c in cameras}), (
            f"features from SO100Follower's motor names (its bus needs scservo_sdk, not installed); "
            f"robot_type = SO100Follower.name = {SO100Follower.name!r}; cameras {list(cameras)}")
    raise ValueError(kind)


# -------------------------------------------------------------------------------------------- write
def record(root: Path, repo_id: str, kind: str, cameras: tuple[str, ...], log: Log, *, use_videos: bool = True,
           vcodec: str | None = None, lengths=LENGTHS, episode_tasks=EPISODE_TASKS, radians: bool = False,
           episode_offset: int = 0, crash_after_save: bool = False):
    """Record ``len(lengths)`` episodes through LeRobot's writer into ``root`` as lerobot-record does."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.datasets.utils import build_dataset_frame

    robot, made = make_robot(kind, cameras)
    log(made)
    features = robot_features(robot, use_videos)
    log(f"features = dataset features of {kind} as lerobot-record builds them (use_videos=True)" if use_videos else
        "features = hw_to_dataset_features(action_features, 'action', False) | hw_to_dataset_features("
        "observation_features, 'observation', False) (cameras as `image`: lerobot-record drops them without video)")
    robot_type = robot.name  # what lerobot-record stores (0.4.4's SO100Follower is SOFollower: "so_follower")
    kwargs = dict(repo_id=repo_id, fps=FPS, features=features, root=root, robot_type=robot_type, use_videos=use_videos,
                  video_backend="pyav")
    if vcodec is not None:
        kwargs["vcodec"] = vcodec
    shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if k not in ("features", "root"))
    ds = LeRobotDataset.create(**kwargs)
    log(f"LeRobotDataset.create({shown}, features=features, root=<out>/{root.name})")
    for e, n in enumerate(lengths):
        ep = e + episode_offset
        task = TASKS[episode_tasks[e]]
        arms = ("left", "right") if kind == "bi_openarm_follower" else ("right",)
        state = {s: motion(s, n + 1, ep) for s in arms}
        for i in range(n):
            obs, act = {}, {}
            for s in arms:
                prefix = f"{s}_" if kind == "bi_openarm_follower" else ""
                for name, values in state[s].items():
                    v_obs, v_act = values[i], values[i + 1]  # action: the next frame's target
                    if kind == "so100_follower":
                        motor = name.split(".")[0]
                        if not name.endswith(".pos") or motor not in MOTORS[:6]:
                            continue
                        name = SO100_MOTORS[MOTORS.index(motor)] + ".pos"
                        if name == "gripper.pos":  # MotorNormMode.RANGE_0_100, from joint_6's -40..40 deg
                            v_obs, v_act = (v_obs + 40) / 80 * 100, (v_act + 40) / 80 * 100
                    elif radians and not name.endswith(".torque"):
                        v_obs, v_act = np.deg2rad(v_obs), np.deg2rad(v_act)
                    obs[prefix + name], act[prefix + name] = float(v_obs), float(v_act)
            j1 = {s: state[s]["joint_1.pos"][i] for s in arms}
            for cam in cameras:
                if kind == "bi_openarm_follower" and cam.endswith("head"):
                    obs[cam] = bars([j1["left"], j1["right"]], ep)
                elif kind == "bi_openarm_follower":
                    obs[cam] = bars([j1[cam.split("_")[0]]], ep)
                else:
                    obs[cam] = bars([j1["right"]], ep)
            frame = {**build_dataset_frame(ds.features, obs, prefix="observation"),
                     **build_dataset_frame(ds.features, act, prefix="action")}
            if IS_V30:
                ds.add_frame({**frame, "task": task})
            else:
                ds.add_frame(frame, task=task)
        ds.save_episode()
        call = f"{{**obs_frame, **action_frame, 'task': {task!r}}}" if IS_V30 else f"{{**obs_frame, **action_frame}}, task={task!r}"
        log(f"{n} x add_frame({call}); save_episode()  # *_frame = build_dataset_frame(ds.features, values, prefix)")
    if crash_after_save:
        log("os._exit(1) (the writer process dies: no finalize())")
        sys.stdout.flush()
        os._exit(1)
    if hasattr(ds, "finalize"):  # LeRobot 0.3.x has none (its v2.1 files are whole after save_episode)
        ds.finalize()
        log("finalize()")
    return ds


# ------------------------------------------------------------------------ other robots (issue 46)
# Datasets recorded with other robots' names and units, to show the validator honest on them. Values are
# smooth sinusoids plus small seeded noise, so the clean parts are clean; what is planted, and where, is
# written into their SOURCE.json entries ("content").
ROBOT_LENGTHS = (32, 36, 40)
# TheRobotStudio SO-ARM100 Simulation/SO101/so101_new_calib, rad, zero at mid-range (LeRobot 0.4.4's degrees
# have their zero at the calibration's middle too)
SO101_LIMITS_RAD = {"shoulder_pan": (-1.92, 1.92), "shoulder_lift": (-1.75, 1.75), "elbow_flex": (-1.69, 1.69),
                    "wrist_flex": (-1.66, 1.66), "wrist_roll": (-2.74, 2.84)}
ALOHA_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper")
# rad: the ViperX 300 S joint limits (Interbotix); the gripper normalised 0..1 as ALOHA datasets store it
ALOHA_RANGES = {"waist": (-3.14159, 3.14159), "shoulder": (-1.85005, 1.25664), "elbow": (-1.76278, 1.6057),
                "forearm_roll": (-3.14159, 3.14159), "wrist_angle": (-1.8675, 2.23402),
                "wrist_rotate": (-3.14159, 3.14159), "gripper": (0.0, 1.0)}
SEEDS = {"v30_so101": 101, "v30_so101_m100": 100, "v30_aloha": 14, "v30_openarm_ros": 16, "v30_state_actions": 12}
#: per dataset, what its values are and what is planted where (SOURCE.json's "content")
CONTENT: dict[str, dict] = {}


def wave(n: int, episode: int, j: int, lo: float, hi: float, frac: float = 0.4, phase: float = 0.0) -> np.ndarray:
    """n samples of a smooth trajectory within ``frac`` x (hi - lo) either side of the range's centre:
    motion()'s profile (two sinusoids of unrelated periods) plus a smaller sinusoid of dimension j's own."""
    t = np.arange(n, dtype=np.float64) / FPS
    a = 1.3 * episode + phase
    terms = [(0.45, 0.45, a), (0.3, 0.8, 2 * a + 0.5), (0.25, 0.55 + 0.08 * j, 0.7 * j + a)]  # weights sum to 1
    centre, amp = (lo + hi) / 2, frac * (hi - lo)
    return centre + amp * sum(k * np.sin(2 * np.pi * hz * t + ph) for k, hz, ph in terms)


def written_ranges(episodes: list[dict[str, np.ndarray]], names: dict[str, list[str]]) -> dict:
    """{feature: {dimension name: [min, max]}} of the float32 values written (rounded to 1e-6)."""
    out = {}
    for key, dims in names.items():
        v = np.concatenate([e[key] for e in episodes]).astype(np.float32)
        out[key] = {d: [round(float(v[:, i].min()), 6), round(float(v[:, i].max()), 6)] for i, d in enumerate(dims)}
    return out


def camera_configs(names) -> dict:
    try:
        from lerobot.cameras.opencv import OpenCVCameraConfig
    except ImportError:  # pragma: no cover
        from lerobot.common.cameras.opencv import OpenCVCameraConfig
    return {c: OpenCVCameraConfig(index_or_path=i, fps=FPS, width=WIDTH, height=HEIGHT) for i, c in enumerate(names)}


def create(root: Path, repo_id: str, features: dict, robot_type: str, log: Log):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    use_videos = any(f["dtype"] == "video" for f in features.values())
    ds = LeRobotDataset.create(repo_id=repo_id, fps=FPS, features=features, root=root, robot_type=robot_type,
                               use_videos=use_videos, video_backend="pyav")
    log(f"LeRobotDataset.create(repo_id={repo_id!r}, fps={FPS}, robot_type={robot_type!r}, use_videos={use_videos}, "
        f"video_backend='pyav', features=features, root=<out>/{root.name})")
    return ds


def record_so(root: Path, name: str, *, use_degrees: bool, robot_type: str, cameras: tuple[str, ...], log: Log) -> None:
    """An SO-101 follower as lerobot-record records it: LeRobot 0.4.4's SO101Follower (constructed, never
    connected; its Feetech bus needs LeRobot's `feetech` extra, feetech-servo-sdk) gives the features and the
    frames go through build_dataset_frame. ``use_degrees`` True: the body in degrees (0.4.4's default);
    False: -100..100 (MotorNormMode.RANGE_M100_100, what LeRobot <= 0.4.3 wrote). Gripper 0..100 in both.
    The robot_type is given (0.4.4 itself stores SOFollower.name, 'so_follower')."""
    from lerobot.datasets.utils import build_dataset_frame
    from lerobot.motors import MotorNormMode
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

    robot = SO101Follower(SO101FollowerConfig(port="/dev/null", id="fixture", use_degrees=use_degrees,
                                              cameras=camera_configs(cameras),
                                              calibration_dir=Path(os.environ["HF_LEROBOT_CALIBRATION"])))
    modes = {m: robot.bus.motors[m].norm_mode for m in SO100_MOTORS}
    body = MotorNormMode.DEGREES if use_degrees else MotorNormMode.RANGE_M100_100
    assert all(modes[m] == body for m in SO100_MOTORS[:5]) and modes["gripper"] == MotorNormMode.RANGE_0_100
    assert list(robot.action_features) == [f"{m}.pos" for m in SO100_MOTORS]
    log(f"SO101Follower(SO101FollowerConfig(port='/dev/null', use_degrees={use_degrees}, cameras={list(cameras)})) "
        f"(constructed, never connected): bus norm modes body {body.value}, gripper {MotorNormMode.RANGE_0_100.value}")
    features = robot_features(robot, use_videos=True)
    log("features = dataset features of SO101Follower as lerobot-record builds them (use_videos=True)")
    ds = create(root, f"fixture/{name}", features, robot_type, log)
    log(f"(robot_type given: LeRobot 0.4.4's SO101Follower.name is {robot.name!r})")
    rng = np.random.default_rng(SEEDS[name])
    names = [f"{m}.pos" for m in SO100_MOTORS]
    written = []
    for e, n in enumerate(ROBOT_LENGTHS):
        task = TASKS[EPISODE_TASKS[e]]
        smooth = []
        for j, m in enumerate(SO100_MOTORS):
            if m == "gripper":
                lo, hi = 0.0, 100.0
            elif use_degrees:
                lo, hi = np.rad2deg(SO101_LIMITS_RAD[m])
            else:
                lo, hi = -100.0, 100.0
            smooth.append(wave(n + 1, e, j, lo, hi))
        smooth = np.stack(smooth, axis=1)
        noise = 0.05  # degrees, or hundredths of the range
        state = smooth[:n] + rng.normal(0.0, noise, (n, 6))
        action = smooth[1:] + rng.normal(0.0, noise, (n, 6))  # the leader's reading: the next frame's target
        written.append({"observation.state": state, "action": action})
        for i in range(n):
            obs = dict(zip(names, map(float, state[i])))
            act = dict(zip(names, map(float, action[i])))
            pan_deg = smooth[i, 0] if use_degrees else smooth[i, 0] * 1.1  # bar x: shoulder_pan, as degrees
            for cam in cameras:
                obs[cam] = bars([0.8 * pan_deg], e)
            ds.add_frame({**build_dataset_frame(ds.features, obs, prefix="observation"),
                          **build_dataset_frame(ds.features, act, prefix="action"), "task": task})
        ds.save_episode()
        log(f"{n} x add_frame({{**obs_frame, **action_frame, 'task': {task!r}}}); save_episode()  "
            "# *_frame = build_dataset_frame(ds.features, values, prefix)")
    ds.finalize()
    log("finalize()")
    unit = "degrees (zero at mid-range)" if use_degrees else "-100..100 (RANGE_M100_100)"
    limits = ({m: [round(float(x), 3) for x in np.rad2deg(SO101_LIMITS_RAD[m])] for m in SO100_MOTORS[:5]}
              if use_degrees else {m: [-100.0, 100.0] for m in SO100_MOTORS[:5]})
    CONTENT[name] = {
        "units": {"body": unit, "gripper.pos": "0..100 (RANGE_0_100)"},
        "range_used": {**{f"{m}.pos": v for m, v in limits.items()}, "gripper.pos": [0.0, 100.0]},
        "values": "each dimension a smooth wave within the middle 80 % of its range, plus N(0, 0.05) noise; "
                  "action = the next frame's smooth value plus its own noise",
        "cameras": ({c: "bright bar whose x follows 0.8 x shoulder_pan (degrees" + ("" if use_degrees else
                     ", from -100..100 x 1.1") + "), AV1" for c in cameras}),
        "planted": "nothing: clean",
        "written_ranges": written_ranges(written, {"observation.state": names, "action": names}),
    }


def record_arrays(root: Path, name: str, robot_type: str, features: dict, episodes: list[dict[str, np.ndarray]],
                  log: Log, how: str) -> None:
    """Episodes given as (n, D) arrays per feature, passed to add_frame as float32 arrays, as recorders that
    are not lerobot-record do (a ROS 2 node, the ALOHA scripts): features written as given."""
    ds = create(root, f"fixture/{name}", features, robot_type, log)
    keys = list(episodes[0])
    for e, arrays in enumerate(episodes):
        task = TASKS[EPISODE_TASKS[e % len(EPISODE_TASKS)]]
        n = len(arrays[keys[0]])
        for i in range(n):
            ds.add_frame({**{k: np.asarray(arrays[k][i], dtype=np.float32) for k in keys}, "task": task})
        ds.save_episode()
        log(f"{n} x add_frame({{{', '.join(f'{k!r}: <float32 ({arrays[k].shape[1]},)>' for k in keys)}, "
            f"'task': {task!r}}}); save_episode()  # {how}")
    ds.finalize()
    log("finalize()")


def vector_feature(names, as_motors: bool = False) -> dict:
    return {"dtype": "float32", "shape": (len(names),), "names": {"motors": list(names)} if as_motors else list(names)}


def make_aloha(root: Path, log: Log) -> None:
    name = "v30_aloha"
    names = [f"{s}_{j}" for s in ("left", "right") for j in ALOHA_JOINTS]
    features = {"observation.state": vector_feature(names, True), "action": vector_feature(names, True)}
    log("features by hand, as ALOHA datasets declare them: observation.state and action float32 (14,), "
        "names {'motors': [left_waist .. left_gripper, right_waist .. right_gripper]} (LeRobot 0.4.4 has no ALOHA "
        "robot; build_dataset_frame cannot read a names mapping, so the frames are arrays)")
    rng = np.random.default_rng(SEEDS[name])
    episodes = []
    for e, n in enumerate(ROBOT_LENGTHS):
        cols = []
        for s in range(2):  # left, then right
            for j, joint in enumerate(ALOHA_JOINTS):
                lo, hi = ALOHA_RANGES[joint]
                cols.append(wave(n + 1, e, j, lo, hi, frac=0.4 if joint == "gripper" else 0.2, phase=0.9 * s))
        smooth = np.stack(cols, axis=1)
        episodes.append({"observation.state": smooth[:n] + rng.normal(0.0, 1e-3, (n, 14)),
                         "action": smooth[1:] + rng.normal(0.0, 1e-3, (n, 14))})
    record_arrays(root, name, "aloha", features, episodes, log, "rows of the arrays below")
    CONTENT[name] = {
        "units": {"joints": "rad", "gripper": "0..1 (normalised)"},
        "range_used": {f"{s}_{j}": list(ALOHA_RANGES[j]) for s in ("left", "right") for j in ALOHA_JOINTS},
        "values": "joints: smooth waves within the middle 40 % of the ViperX 300 S range, gripper within 0.1..0.9, "
                  "plus N(0, 0.001) noise; action = the next frame's smooth value plus its own noise",
        "names_form": "{'motors': [...]}",
        "planted": "nothing: clean",
        "written_ranges": written_ranges(episodes, {"observation.state": names, "action": names}),
    }


def make_openarm_ros(root: Path, log: Log) -> None:
    name = "v30_openarm_ros"
    names = [f"{s}_rev{k}" for s in ("left", "right") for k in range(1, 9)]
    zero = names.index("right_rev3")
    features = {"observation.state": vector_feature(names), "action": vector_feature(names)}
    log("features by hand, as a ROS 2 recording node declares them: observation.state and action float32 (16,), "
        "names left_rev1..left_rev8, right_rev1..right_rev8 (rev8 the gripper)")
    rng = np.random.default_rng(SEEDS[name])
    episodes = []
    for e, n in enumerate(ROBOT_LENGTHS):
        cols = [np.deg2rad(motion(side, n, e)[f"{m}.pos"]) for side in ("left", "right") for m in MOTORS]
        state = np.stack(cols, axis=1) + rng.normal(0.0, 5e-4, (n, 16))
        state[:, zero] = 0.0  # a joint name missing from /joint_states: written as 0.0
        state = state.astype(np.float32)
        action = np.concatenate([state[1:], state[-1:]])  # the next frame's state; the last frame's its own
        episodes.append({"observation.state": state, "action": action})
    record_arrays(root, name, "openarm_static_bimanual", features, episodes, log,
                  "state: /joint_states in rad; action[i] = state[i+1], action[last] = state[last]")
    CONTENT[name] = {
        "units": {"joints": "rad", "rev8 (gripper)": "rad"},
        "range_used": {f"{s}_rev{k}": [round(float(x), 6) for x in np.deg2rad(LIMITS[s][m])]
                       for s in ("left", "right") for k, m in enumerate(MOTORS, 1)},
        "values": "LeRobot's OpenArm joint limits (inside the OpenArm MJCF's too) in rad; smooth waves within the "
                  "middle 80 % (motion()), plus N(0, 0.0005) noise; stored float32",
        "action": "action[i] == observation.state[i+1] bit for bit; action[last] == observation.state[last], so "
                  "the last two actions of every episode are equal (as the ROS 2 recorder writes them)",
        "planted": {"zero_joint": {"name": "right_rev3", "dimension": zero, "value": 0.0,
                                   "where": "every frame of every episode, observation.state and action"}},
        "written_ranges": written_ranges(episodes, {"observation.state": names, "action": names}),
    }


def make_state_actions(root: Path, log: Log) -> None:
    name = "v30_state_actions"
    joints = ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "gripper")
    names = [f"{s}.{j}.pos" for s in ("left", "right") for j in joints]
    constant = {names.index(k): v for k, v in (("left.joint_4.pos", 0.3), ("left.joint_5.pos", -0.2),
                                               ("right.joint_4.pos", 0.3), ("right.joint_5.pos", -0.2))}
    pinned = names.index("right.gripper.pos")
    lengths = (40, 40, 40)
    dip_episode, dip = 1, (17, 22)  # state frames below the gripper's max (inclusive)
    freeze_episode, freeze = 0, (5, 35)  # action frames equal to the action at frame 5 (inclusive): 1 s
    features = {"state": vector_feature(names), "actions": vector_feature(names)}
    log("features by hand: vectors named 'state' and 'actions' (not observation.state/action), float32 (12,), "
        "names left.joint_1.pos .. left.gripper.pos, right.joint_1.pos .. right.gripper.pos")
    rng = np.random.default_rng(SEEDS[name])
    episodes = []
    for e, n in enumerate(lengths):
        cols = []
        for s in range(2):  # left, then right
            for j, joint in enumerate(joints):
                lo, hi = (0.0, 1.0) if joint == "gripper" else (-1.2, 1.2)
                cols.append(wave(n + 1, e, j, lo, hi, phase=0.9 * s))
        # n + 1 frames: the last one, never recorded, is the last frame's action
        state = np.stack(cols, axis=1) + rng.normal(0.0, 1e-3, (n + 1, 12))
        for d, v in constant.items():
            state[:, d] = v
        state[:, pinned] = 1.0
        if e == dip_episode:
            k = np.arange(dip[1] - dip[0] + 1)
            state[dip[0]:dip[1] + 1, pinned] = 1.0 - 0.5 * np.sin(np.pi * (k + 1) / (len(k) + 1))
        state = state.astype(np.float32)
        state, actions = state[:n], state[1:].copy()
        if e == freeze_episode:
            actions[freeze[0]:freeze[1] + 1] = actions[freeze[0]]
        episodes.append({"state": state, "actions": actions})
    record_arrays(root, name, "bimanual_custom", features, episodes, log,
                  "actions[i] = state[i+1] (the last: the state one frame on, not recorded), but for the "
                  "frozen stretch")
    total = sum(lengths)
    below = dip[1] - dip[0] + 1
    CONTENT[name] = {
        "units": {"joints": "rad", "gripper": "0..1"},
        "values": "moving joints: smooth waves within -0.96..0.96 rad, grippers within 0.1..0.9, plus N(0, 0.001) "
                  "noise; actions[i] = state[i+1] (the last frame's: the state one frame past the episode, not recorded), "
                  "except the frozen stretch; no two consecutive actions equal outside it",
        "planted": {
            "constant_dimensions": {"features": ["state", "actions"], "dimensions": sorted(constant),
                                    "names": [names[d] for d in sorted(constant)],
                                    "values": [constant[d] for d in sorted(constant)],
                                    "share": f"{len(constant)} of {len(names)}", "where": "every frame"},
            "gripper_at_max": {"dimension": pinned, "name": names[pinned], "max": 1.0,
                               "share_at_max": round((total - below) / total, 4), "frames": total,
                               "below_max": {"state": {"episode": dip_episode, "frames": list(dip)},
                                             "actions": {"episode": dip_episode, "frames": [dip[0] - 1, dip[1] - 1]}},
                               "features": ["state", "actions"]},
            "frozen_action": {"feature": "actions", "episode": freeze_episode, "frames": list(freeze),
                              "frame_count": freeze[1] - freeze[0] + 1,
                              "seconds": (freeze[1] - freeze[0]) / FPS, "dimensions": "all 12",
                              "value": "actions at frame 5 (= state at frame 6)"},
        },
        "written_ranges": written_ranges(episodes, {"state": names, "actions": names}),
    }


def clean(root: Path) -> list[str]:
    """Remove what LeRobot leaves that is not part of the dataset; the removed paths."""
    removed = []
    for p in sorted(root.iterdir()):
        if p.name not in KEEP_TOP:
            held = sum(1 for q in p.rglob("*") if q.is_file()) if p.is_dir() else 0
            removed.append(p.name + (f"/ ({held} files)" if p.is_dir() else ""))
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    for p in sorted(root.rglob("*"), reverse=True):
        if not p.exists():
            continue
        rel = p.relative_to(root).as_posix()
        if p.name in (".cache", "__pycache__") or p.suffix == ".lock" or p.name.startswith(".") or \
                (p.is_dir() and not any(p.iterdir())):
            removed.append(rel + ("/" if p.is_dir() else ""))
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    return removed


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def versions() -> dict[str, str]:
    import importlib.metadata as md
    out = {"lerobot": LEROBOT_VERSION}
    for name in ("av", "torch", "numpy", "pyarrow", "datasets"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    out["python"] = platform.python_version()
    return out


# ---------------------------------------------------------------------------------------- datasets
def make_v30(work: Path, only: set[str]) -> dict[str, tuple[Path, list[str]]]:
    from lerobot.datasets import dataset_tools
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    made: dict[str, tuple[Path, list[str]]] = {}
    bi_cams = ("left_head", "left_wrist")

    def want(name):
        return name in only

    if want("v30_bi_openarm_av1") or want("v30_deleted"):
        print("v30_bi_openarm_av1", flush=True)
        log = Log()
        record(work / "v30_bi_openarm_av1", "fixture/v30_bi_openarm_av1", "bi_openarm_follower", bi_cams, log,
               lengths=LONG_LENGTHS)
        made["v30_bi_openarm_av1"] = (work / "v30_bi_openarm_av1", log.calls)
    if want("v30_deleted"):
        print("v30_deleted", flush=True)
        log = Log()
        src = LeRobotDataset("fixture/v30_bi_openarm_av1", root=work / "v30_bi_openarm_av1", video_backend="pyav")
        log("src = LeRobotDataset('fixture/v30_bi_openarm_av1', root=<out>/v30_bi_openarm_av1, video_backend='pyav')")
        dataset_tools.delete_episodes(src, episode_indices=[1], output_dir=work / "v30_deleted",
                                      repo_id="fixture/v30_deleted")
        log("lerobot.datasets.dataset_tools.delete_episodes(src, episode_indices=[1], "
            "output_dir=<out>/v30_deleted, repo_id='fixture/v30_deleted')")
        made["v30_deleted"] = (work / "v30_deleted", log.calls)
    if want("v30_openarm_h264"):
        print("v30_openarm_h264", flush=True)
        log = Log()
        record(work / "v30_openarm_h264", "fixture/v30_openarm_h264", "openarm_follower", ("wrist",), log,
               vcodec="h264", lengths=LONG_LENGTHS)
        made["v30_openarm_h264"] = (work / "v30_openarm_h264", log.calls)
    if want("v30_merged"):
        print("v30_merged", flush=True)
        log = Log()
        parts = []
        for name, lengths, tasks, offset in (("part_a", (30, 36), (0, 1), 0), ("part_b", (33,), (0,), 5)):
            log(f"# {name}: an openarm_follower dataset of {len(lengths)} episode(s) (not kept)")
            record(work / "merge_inputs" / name, f"fixture/{name}", "openarm_follower", ("wrist",), log,
                   lengths=lengths, episode_tasks=tasks, episode_offset=offset)
            parts.append(LeRobotDataset(f"fixture/{name}", root=work / "merge_inputs" / name, video_backend="pyav"))
            log(f"{name} = LeRobotDataset('fixture/{name}', root=<tmp>/{name}, video_backend='pyav')")
        dataset_tools.merge_datasets(parts, output_repo_id="fixture/v30_merged", output_dir=work / "v30_merged")
        log("lerobot.datasets.dataset_tools.merge_datasets([part_a, part_b], output_repo_id='fixture/v30_merged', "
            "output_dir=<out>/v30_merged)")
        made["v30_merged"] = (work / "v30_merged", log.calls)
    if want("v30_no_finalize"):
        print("v30_no_finalize", flush=True)
        root = work / "v30_no_finalize"
        cmd = [sys.executable, os.path.abspath(__file__), "--crash-writer", str(root)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        calls = [line.strip() for line in r.stdout.splitlines() if line.startswith("    ")]
        if r.returncode != 1 or not root.is_dir():
            sys.exit(f"the crashing writer exited {r.returncode}, not 1:\n{r.stdout}\n{r.stderr}")
        calls.insert(0, f"in a child process ({Path(sys.executable).name} {Path(__file__).name} --crash-writer <out>):")
        calls.append(f"child exit status {r.returncode}")
        made["v30_no_finalize"] = (root, calls)
    if want("v30_other_robot"):
        print("v30_other_robot", flush=True)
        log = Log()
        record(work / "v30_other_robot", "fixture/v30_other_robot", "so100_follower", ("front",), log, use_videos=False)
        made["v30_other_robot"] = (work / "v30_other_robot", log.calls)
    if want("v30_radians"):
        print("v30_radians", flush=True)
        log = Log()
        record(work / "v30_radians", "fixture/v30_radians", "openarm_follower", (), log, radians=True)
        log("(pos and vel values written in rad and rad/s, under names whose LeRobot unit is degrees)")
        made["v30_radians"] = (work / "v30_radians", log.calls)
    if want("v30_so101"):
        print("v30_so101", flush=True)
        log = Log()
        record_so(work / "v30_so101", "v30_so101", use_degrees=True, robot_type="so101_follower", cameras=("front",),
                  log=log)
        made["v30_so101"] = (work / "v30_so101", log.calls)
    if want("v30_so101_m100"):
        print("v30_so101_m100", flush=True)
        log = Log()
        record_so(work / "v30_so101_m100", "v30_so101_m100", use_degrees=False, robot_type="so100_follower",
                  cameras=(), log=log)
        made["v30_so101_m100"] = (work / "v30_so101_m100", log.calls)
    for name, make in (("v30_aloha", make_aloha), ("v30_openarm_ros", make_openarm_ros),
                       ("v30_state_actions", make_state_actions)):
        if want(name):
            print(name, flush=True)
            log = Log()
            make(work / name, log)
            made[name] = (work / name, log.calls)
    if "v30_bi_openarm_av1" not in only:
        made.pop("v30_bi_openarm_av1", None)
    return made


def make_v21(work: Path, only: set[str]) -> dict[str, tuple[Path, list[str]]]:
    made = {}
    if "v21_bi_openarm" in only:
        print("v21_bi_openarm", flush=True)
        log = Log()
        record(work / "v21_bi_openarm", "fixture/v21_bi_openarm", "bi_openarm_follower", ("left_head", "left_wrist"), log,
               lengths=LONG_LENGTHS)
        made["v21_bi_openarm"] = (work / "v21_bi_openarm", log.calls)
    return made


def crash_writer(root: Path) -> None:
    """The child of v30_no_finalize: records three episodes and dies after the last save_episode()."""
    log = Log()
    record(root, "fixture/v30_no_finalize", "openarm_follower", ("wrist",), log, crash_after_save=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/fixture/lerobot"))
    ap.add_argument("--only", nargs="*", help="names of the datasets to write (default: all this LeRobot writes)")
    ap.add_argument("--crash-writer", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.crash_writer:
        crash_writer(args.crash_writer)
        return 2  # not reached: the writer exits 1 after save_episode()
    names = V30 if IS_V30 else V21
    only = set(args.only or names)
    if only - set(names):
        ap.error(f"LeRobot {LEROBOT_VERSION} writes {', '.join(names)}, not {', '.join(sorted(only - set(names)))}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = _WORK / "datasets"
    work.mkdir()
    try:
        made = make_v30(work, only) if IS_V30 else make_v21(work, only)
        source_path = out / "SOURCE.json"
        source = json.loads(source_path.read_text()) if source_path.is_file() else {}
        entries = source.get("datasets", {})
        command = shlex.join(["HF_HUB_OFFLINE=1", sys.executable, *sys.argv])
        for name, (root, calls) in sorted(made.items()):
            removed = clean(root)
            dest = out / name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(root, dest)
            files = {p.relative_to(dest).as_posix(): {"sha256": sha256(p), "size": p.stat().st_size}
                     for p in sorted(dest.rglob("*")) if p.is_file()}
            info = json.loads((dest / "meta/info.json").read_text())
            entries[name] = {
                **versions(),
                "codebase_version": info.get("codebase_version"),
                "command": command,
                "lerobot_calls": calls,
                "removed_after_writing": removed,
                **({"content": CONTENT[name]} if name in CONTENT else {}),
                "total_size": sum(f["size"] for f in files.values()),
                "files": files,
            }
            print(f"{name}: {len(files)} files, {entries[name]['total_size']} bytes; removed {removed}", flush=True)
        source = {
            "about": "Datasets written by LeRobot itself with tools/make_lerobot_fixtures.py; files are as LeRobot "
                     "left them, minus the entries of removed_after_writing (caches, temporary image folders).",
            "datasets": dict(sorted(entries.items())),
        }
        source_path.write_text(json.dumps(source, indent=1) + "\n")
    finally:
        shutil.rmtree(_WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
