"""Read a robot_eval_logger export with robot-eval-logger itself, in its own environment, and dump what it read.

    /path/to/logger-venv/bin/python tools/check_robot_eval_logger_load.py EXPORT DUMP.npz

Runs where ``import robot_eval_logger`` works as its users run it (robot-eval-logger 0.0.1 with numpy < 2
as it pins; it also needs, without declaring them, huggingface_hub < 1.0 for ``HfFolder``, opencv,
ml_collections and matplotlib). Imports nothing of openarm_sim_dataset. Loads ``EXPORT/<eval_id>/metadata.json``
with ``MetaData.load`` and every ``traj_<i>.pkl`` with ``TrajData.load``, prints one line, and writes
``DUMP.npz``: ``<i>/obs/<camera>``, ``<i>/action``, ``<i>/proprio`` (stacked) and ``info`` (JSON: the
metadata and each trajectory's prompt, success, duration) for tests/test_convert_robot_eval_logger.py
to compare with what this package wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main(export: str, dump: str) -> int:
    import robot_eval_logger
    from robot_eval_logger.typing import MetaData, TrajData

    (run_dir,) = [p for p in Path(export).iterdir() if p.is_dir()]
    meta = MetaData.load(str(run_dir / "metadata.json"))
    arrays, trajectories = {}, []
    n = len(list(run_dir.glob("traj_*.pkl")))
    for i in range(n):
        t = TrajData.load(str(run_dir / f"traj_{i}.pkl"))
        assert type(t) is TrajData, type(t)
        for cam, frames in t.obs.items():
            arrays[f"{i}/obs/{cam}"] = np.asarray(frames)
        for field in ("action", "proprio"):
            if getattr(t, field, None) is not None:
                arrays[f"{i}/{field}"] = np.stack(getattr(t, field))
        trajectories.append({"language_command": t.language_command, "success": t.success,
                             "eval_duration": t.eval_duration, "episode_length": t.episode_length})
    info = {"import": robot_eval_logger.__name__, "numpy": np.__version__, "eval_id": meta.eval_id.id,
            "robot_type": meta.robot_type.value, "robot_name": meta.robot_name, "location": meta.location,
            "time": meta.time.timestamp.isoformat(), "evaluator_name": meta.evaluator_name,
            "trajectories": trajectories}
    np.savez(dump, info=np.array(json.dumps(info)), **arrays)
    print(f"robot_eval_logger (numpy {np.__version__}): eval {meta.eval_id.id} ({meta.robot_type.value}, "
          f"{meta.robot_name}): {n} trajectories, {sum(t['episode_length'] for t in trajectories)} steps read")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
