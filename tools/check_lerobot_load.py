"""Load a LeRobot dataset with LeRobot's own ``LeRobotDataset`` and check every frame against its files.

    PYTHONPATH=. HF_HUB_OFFLINE=1 /tmp/lr044/bin/python tools/check_lerobot_load.py OUT [OUT ...]

Runs in a LeRobot environment (lerobot >= 0.4 for v3.0, 0.3.x for v2.1; never a dependency of the
package). For each dataset: ``LeRobotDataset(repo_id, root=OUT, video_backend="pyav")`` opens it, its
length equals info.json's ``total_frames``, and every item's ``observation.state``, ``action``, ``timestamp``
and ``frame_index`` equal the data parquet's row (read with pyarrow), and every camera gives a (3, H, W)
picture in [0, 1]. Prints one line per dataset; exit 1 when LeRobot cannot open one or a value differs.
The ``datasets`` cache goes to a temporary HF_HOME, removed at the end; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
_WORK = Path(tempfile.mkdtemp(prefix="check_lerobot_load_"))
os.environ["HF_HOME"] = str(_WORK / "hf_home")

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def check(root: Path) -> bool:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    info = json.loads((root / "meta/info.json").read_text())
    try:
        ds = LeRobotDataset(f"local/{root.name}", root=root, video_backend="pyav")
    except Exception as e:  # noqa: BLE001 - LeRobot's own refusal is the finding
        print(f"{root}: LeRobot cannot open it: {type(e).__name__}: {e}")
        return False
    tables = [pq.read_table(p) for p in sorted(root.glob("data/**/*.parquet"))]
    rows = {k: [v for t in tables for v in t.column(k).to_pylist()] for k in ("observation.state", "action",
                                                                             "timestamp", "frame_index")}
    cams = [k for k, f in info["features"].items() if f["dtype"] in ("video", "image")]
    if len(ds) != info["total_frames"] or len(ds) != len(rows["timestamp"]):
        print(f"{root}: LeRobot gives {len(ds)} items, info.json says {info['total_frames']}, the parquet holds "
              f"{len(rows['timestamp'])}")
        return False
    worst = 0.0
    for i in range(len(ds)):
        item = ds[i]
        for key in ("observation.state", "action"):
            worst = max(worst, float(np.abs(item[key].numpy() - np.asarray(rows[key][i], np.float32)).max()))
        if abs(float(item["timestamp"]) - rows["timestamp"][i]) > 1e-6 or int(item["frame_index"]) != rows["frame_index"][i]:
            print(f"{root}: item {i}: timestamp/frame_index {float(item['timestamp'])}/{int(item['frame_index'])} "
                  f"!= the parquet's {rows['timestamp'][i]}/{rows['frame_index'][i]}")
            return False
        for cam in cams:
            img = item[cam]
            if img.ndim != 3 or img.shape[0] != 3 or float(img.min()) < 0 or float(img.max()) > 1:
                print(f"{root}: item {i} camera {cam}: shape {tuple(img.shape)}, range {float(img.min())}..{float(img.max())}")
                return False
    ok = worst == 0.0
    print(f"{root}: LeRobot {info['codebase_version']} loads {len(ds)} items of {ds.num_episodes} episode(s), "
          f"cameras {', '.join(cams) or 'none'}; state/action max |difference| to the parquet {worst:g}"
          f"{'' if ok else ' (DIFFERS)'}")
    return ok


def main(argv: list[str]) -> int:
    try:
        ok = all([check(Path(p).resolve()) for p in argv])
    finally:
        shutil.rmtree(_WORK, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
