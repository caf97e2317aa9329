"""Benchmark physics replay (validation's sim_replay) against raw mj_step on the same model.

    python tools/bench_validate.py [--episodes 2] [--repeats 5] [--data DIR]

Generates (or reuses under --data) a small simulated dataset, then in the same run measures:
  * raw:    a Python loop of ``data.ctrl[:] = ctrl[s]; mujoco.mj_step(model, data)`` over the stored
            commands (the floor: the same steps with no comparison),
  * replay: ``openarm_sim_dataset.sim.replay.replay`` (the same steps plus bit-exact comparison of
            qpos/qvel at every stored frame),
and prints steps/s of both (medians of --repeats runs) and their ratio (target >= 0.7x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402

from openarm_sim_dataset import Dataset, layout, sidecar  # noqa: E402
from openarm_sim_dataset.sim.generate import GenerateConfig, generate  # noqa: E402
from openarm_sim_dataset.sim.replay import replay  # noqa: E402
from openarm_sim_dataset.validate.core import Context, Thresholds  # noqa: E402
from openarm_sim_dataset.validate.simulation import model as stored_model  # noqa: E402


def raw_steps(model: mujoco.MjModel, side: dict) -> int:
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, side["initial_state"], mujoco.mjtState.mjSTATE_INTEGRATION)
    ctrl = side["physics_ctrl"]
    for s in range(len(ctrl)):
        data.ctrl[:] = ctrl[s]
        mujoco.mj_step(model, data)
    return len(ctrl)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", type=Path, help="dataset folder to reuse or create")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory() if args.data is None else None
    path = args.data or Path(tmp.name) / "ds"
    if not (path / layout.METADATA_FILE).exists():
        generate(path, range(args.episodes), GenerateConfig(seed=10))
    ds = Dataset(path)
    model = stored_model(Context(ds, ds.episode_ids, Thresholds()))
    sides = [sidecar.load_npz(layout.sim_dir(path, ep) / sidecar.SIDECAR_FILE) for ep in ds.episode_ids]
    steps = sum(len(s["physics_ctrl"]) for s in sides)
    raw_t, rep_t = [], []
    for _ in range(args.repeats):  # interleaved so both see the same machine load
        t = time.perf_counter()
        for s in sides:
            raw_steps(model, s)
        raw_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        for s in sides:
            assert replay(model, s).ok
        rep_t.append(time.perf_counter() - t)
    raw = steps / statistics.median(raw_t)
    rep = steps / statistics.median(rep_t)
    print(f"{len(sides)} episodes, {steps} physics steps, {args.repeats} repeats (medians), load {os.getloadavg()[0]:.2f}")
    print(f"raw mj_step loop : {raw:10.0f} steps/s")
    print(f"replay + compare : {rep:10.0f} steps/s   ratio {rep / raw:.2f}x (target >= 0.7x)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
