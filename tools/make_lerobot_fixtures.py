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
