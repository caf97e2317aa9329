"""Do the rollouts of every shipped checkpoint validate? The no-false-alarm matrix at full size.

For each ``baselines/*.pt`` (or ``--policies``) and each seed: ``dataset-evaluate --policy P --episodes N
--seed S --workers W`` (the checkpoint's own tasks, cameras, size and rate), then a full
``dataset-validate`` of the rollouts (every check: camera content, replay, re-render). Printed per run:
episodes, the rollouts' success, the verdict, and every row that is not a pass or an expected skip
(``pose_quaternions``: no pose streams; ``sim_regenerate``: not asked; ``sim_wrist_projection`` where no
wrist saw the red cube), with its detail. Exit 1 when any row fails or warns.

Resumable: ``dataset-evaluate`` resumes a rollout folder, and a run whose verdict is in the work folder
(``<policy>-<seed>.verdict.json``) is not repeated (``--again`` validates again, e.g. after a change of a check).

    python tools/rollout_matrix.py --work DIR [--seeds 7001 52817] [--episodes 20]
                                                [--policies baselines/tray_green_cameras.pt ...]
                                                [--workers 2] [--again]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BIN = Path(sys.executable).parent

from openarm_sim_dataset import Dataset  # noqa: E402

EXPECTED_SKIPS = {"pose_quaternions", "sim_regenerate", "sim_wrist_projection"}


def run_one(policy: Path, seed: int, episodes: int, workers: int, work: Path, again: bool, env: dict) -> dict:
    name = f"{policy.stem}-{seed}"
    out, verdict = work / name, work / f"{name}.verdict.json"
    if verdict.exists() and not again:
        return json.loads(verdict.read_text())
    t0 = time.perf_counter()
    # the checkpoint as the repository names it (baselines/<name>.pt, from the checkout), so that every
    # rollout folder records the same evaluation.policy wherever the tool is run from
    spec = os.path.relpath(policy, REPO) if policy.is_relative_to(REPO) else str(policy)
    r = subprocess.run([str(BIN / "dataset-evaluate"), "--policy", spec, "--episodes", str(episodes), "--seed",
                        str(seed), "--workers", str(workers), "--out", str(out.resolve()), "--quiet", "--json"],
                       capture_output=True, text=True, env=env, cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"dataset-evaluate {policy} seed {seed}: exit {r.returncode}: {r.stderr.strip()[-600:]}")
    rollout_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    v = subprocess.run([str(BIN / "dataset-validate"), str(out), "--workers", str(workers), "--json",
                        "--no-update-metadata"], capture_output=True, text=True, env=env)
    if v.returncode not in (0, 1):
        raise SystemExit(f"dataset-validate {out}: exit {v.returncode}: {v.stderr.strip()[-600:]}")
    rows = json.loads(v.stdout)["rows"]
    ds = Dataset(out)
    res = {"policy": policy.name, "seed": seed, "episodes": ds.num_episodes,
           "success": sum(bool(e.get("success")) for e in ds.meta.episodes),
           "valid": v.returncode == 0, "rollout_s": round(rollout_s), "validate_s": round(time.perf_counter() - t0),
           "not_passed": {r["check"]: f"{r['status']}: {r['detail']}" for r in rows
                          if r["status"] != "pass" and not (r["status"] == "skip" and r["check"] in EXPECTED_SKIPS)}}
    verdict.write_text(json.dumps(res, indent=1))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[7001, 52817])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--policies", type=Path, nargs="+", default=sorted((REPO / "baselines").glob("*.pt")))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--again", action="store_true", help="validate again the runs already validated")
    args = ap.parse_args()
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    bad = 0
    print(f"{'policy':38} {'seed':>6} {'episodes':>8} {'success':>8} verdict   (rollouts s, validation s; load "
          f"{os.getloadavg()[0]:.1f})", flush=True)
    for seed in args.seeds:
        for policy in args.policies:
            res = run_one(policy.resolve(), seed, args.episodes, args.workers, args.work, args.again, env)
            bad += bool(res["not_passed"])
            print(f"{res['policy']:38} {seed:>6} {res['episodes']:>8} {res['success']:>8} "
                  f"{'valid' if res['valid'] else 'INVALID':8}  ({res['rollout_s']}, {res['validate_s']})", flush=True)
            for check, what in res["not_passed"].items():
                print(f"    {check}: {what[:400]}", flush=True)
    print(f"{bad} run(s) with a row that is not a pass or an expected skip", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
