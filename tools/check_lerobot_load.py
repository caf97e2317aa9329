"""Load a LeRobot export with LeRobot itself and compare every frame with the source dataset.

    PYTHONPATH=. /path/to/lerobot-venv/bin/python tools/check_lerobot_load.py SOURCE EXPORT

Runs in a separate environment that has ``lerobot`` installed (not a dependency of this package):
lerobot >= 0.4 for a v3.0 export, lerobot 0.3.x for v2.1. Opens ``LeRobotDataset(root=EXPORT,
video_backend="pyav")``, reads every item, and checks ``observation.state`` against the causal
resampling of SOURCE (exact) and each decoded camera frame against the source JPEG (PSNR, dB).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def main(src: str, export: str) -> int:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.convert.lerobot import LeRobotOptions, sample_episode
    from openarm_sim_dataset.convert.video import psnr

    info = json.loads((Path(export) / "meta/info.json").read_text())
    t0 = time.perf_counter()
    lr = LeRobotDataset("local/openarm_sim_dataset", root=export, video_backend="pyav")
    ds = Dataset(src)
    opts = LeRobotOptions(fps=info["fps"])
    expected = [sample_episode(ds, ep, opts) for ep in ds.episodes]
    worst, state_err = np.inf, 0.0
    for i in range(len(lr)):
        item = lr[i]
        ep, k = int(item["episode_index"]), int(item["frame_index"])
        _grid, obs, _act, frames = expected[ep]
        state_err = max(state_err, float(np.abs(item["observation.state"].numpy() - obs[k]).max()))
        for cam, (camera, idx) in frames.items():
            img = (item[f"observation.images.{cam}"].numpy().transpose(1, 2, 0) * 255).round().astype(np.uint8)
            worst = min(worst, psnr(img, camera.get_frame(int(idx[k])).load()))
    print(f"LeRobotDataset {info['codebase_version']}: {lr.num_episodes} episodes, {len(lr)} frames read in "
          f"{time.perf_counter() - t0:.1f} s; observation.state max |diff| {state_err:g}; "
          f"min PSNR vs source JPEGs {worst:.1f} dB")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
