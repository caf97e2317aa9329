"""Read LeRobot-written datasets with LeRobot and with this package, and compare every frame.

    PYTHONPATH=. HF_HUB_OFFLINE=1 /tmp/lr044/bin/python tools/check_lerobot_read.py tests/fixture/lerobot/v30_*
    PYTHONPATH=. HF_HUB_OFFLINE=1 /tmp/lr033/bin/python tools/check_lerobot_read.py tests/fixture/lerobot/v21_*

Runs in a LeRobot environment (LeRobot is never a dependency of the package): lerobot >= 0.4 for v3.0,
0.3.x for v2.1. For every item ``LeRobotDataset(repo_id, root=ROOT, video_backend="pyav")[i]`` it
compares ``observation.state`` and ``action`` with ``Dataset(ROOT).streams(...)`` dimension by name
(ours in radians, turned back to degrees where LeRobot's names say degrees), ``timestamp`` with our
row stamps, and every camera's picture (LeRobot: float CHW in [0, 1], taken to uint8 as
``round(x * 255)``) with our decoded frame. Prints the largest differences; exit 1 when a value or a
frame count disagrees. A dataset LeRobot itself cannot open is reported with LeRobot's error. The
`datasets` cache goes to a temporary HF_HOME, removed at the end; nothing is downloaded (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
_WORK = Path(tempfile.mkdtemp(prefix="check_lerobot_read_"))
os.environ["HF_HOME"] = str(_WORK / "hf_home")  # the `datasets` cache LeRobot's loading fills, removed at exit

import numpy as np  # noqa: E402

LEROBOT_NAME = re.compile(r"^(?:(right|left)_)?(joint_[1-7]|gripper)\.(pos|vel|torque)$")
ATTRIBUTE = {"pos": "qpos", "vel": "qvel", "torque": "qtorque"}
VALUE_TOLERANCE = 1e-3  # degrees (or stored units): float32 radians turned back to degrees


def our_vector(streams: dict, key: str, names: list[str]) -> np.ndarray:
    """Our streams of one LeRobot vector feature put back in LeRobot's dimension order and units."""
    columns = []
    for name in names:
        generic = streams.get(f"lerobot/{key}")
        if generic is not None and name in generic.columns:
            columns.append(generic.values[:, generic.columns.index(name)].astype(np.float64))
            continue
        m = LEROBOT_NAME.match(name)
        if m is None:
            raise KeyError(f"{key}: dimension {name!r} is in no stream")
        side, motor, attr = m[1] or "right", m[2].replace("joint_", "joint"), m[3]
        stream = streams[f"arms/{side}/{ATTRIBUTE[attr]}"]
        values = stream.values[:, stream.columns.index(motor)].astype(np.float64)
        columns.append(np.rad2deg(values) if attr in ("pos", "vel") else values)
    return np.stack(columns, axis=1)


def check(root: Path) -> bool:
    import lerobot
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from openarm_sim_dataset import Dataset

    t0 = time.perf_counter()
    try:
        lr = LeRobotDataset(f"fixture/{root.name}", root=root, video_backend="pyav")
    except Exception as e:  # noqa: BLE001 - reported: what LeRobot itself does with the dataset
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        try:
            Dataset(root)
            ours = "opens"
        except Exception as o:  # noqa: BLE001
            ours = f"{type(o).__name__}: {o}"
        print(f"{root.name}: LeRobot {lerobot.__version__} cannot open it ({type(e).__name__}: {first}); ours: {ours}")
        return True
    ds = Dataset(root)
    features = lr.meta.features
    vector_keys = [k for k in ("observation.state", "action") if k in features]
    camera_keys = [k for k, f in features.items() if f["dtype"] in ("video", "image")]
    ours: dict[int, dict] = {}
    worst_value = {k: 0.0 for k in vector_keys}
    worst_ts = 0.0
    worst_pixel = {k: 0 for k in camera_keys}
    mean_pixel = {k: [] for k in camera_keys}
    ok = True
    for i in range(len(lr)):
        item = lr[i]
        ep, k = int(item["episode_index"]), int(item["frame_index"])
        if ep not in ours:
            obs, act = ds.streams(ep, "obs"), ds.streams(ep, "action")
            ours[ep] = {
                "observation.state": our_vector(obs, "observation.state", features["observation.state"]["names"]),
                "action": our_vector(act, "action", features["action"]["names"]),
                "ts": next(iter(obs.values())).timestamps,
                "cams": {c: ds.load_camera(c.removeprefix("observation.images."), ep) for c in camera_keys},
            }
            n = ds.episodes[ep]["length"]
            for c, cam in ours[ep]["cams"].items():
                if len(cam) != n:
                    print(f"  {root.name} episode {ep} {c}: {len(cam)} frames, {n} rows")
                    ok = False
        for key in vector_keys:
            diff = np.abs(item[key].numpy().astype(np.float64) - ours[ep][key][k]).max()
            worst_value[key] = max(worst_value[key], float(diff))
        worst_ts = max(worst_ts, abs(float(item["timestamp"]) - ours[ep]["ts"][k] / 1e9))
        for c in camera_keys:
            theirs = (item[c].numpy().transpose(1, 2, 0) * 255).round().astype(np.int16)
            mine = ours[ep]["cams"][c].get_frame(k).load().astype(np.int16)
            d = np.abs(theirs - mine)
            worst_pixel[c] = max(worst_pixel[c], int(d.max()))
            mean_pixel[c].append(float(d.mean()))
    ok &= all(v <= VALUE_TOLERANCE for v in worst_value.values()) and worst_ts <= 1e-4
    values = ", ".join(f"{k} max |diff| {v:.2g}" for k, v in worst_value.items())
    pixels = ", ".join(f"{k.removeprefix('observation.images.')} max {worst_pixel[k]} mean {np.mean(mean_pixel[k]):.3f}"
                       for k in camera_keys) or "no cameras"
    print(f"{root.name}: LeRobot {lerobot.__version__} {lr.meta.info['codebase_version']}, {lr.num_episodes} episodes, "
          f"{len(lr)} frames in {time.perf_counter() - t0:.1f} s; {values}; timestamp max |diff| {worst_ts:.2g} s; "
          f"pixels (uint8) {pixels}{'' if ok else ' -- MISMATCH'}")
    return ok


def main(paths: list[str]) -> int:
    ok = True
    try:
        for p in paths:
            ok &= check(Path(p).resolve())
    finally:
        shutil.rmtree(_WORK, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
