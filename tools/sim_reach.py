"""Measure reachability of the scripted pick-and-place plan over the cube area.

For every cube pose on an n x n grid of the 20 x 20 cm cube area and cube yaws
(-45, 0, +44 deg), builds the full plan of :class:`PickPlace` (IK of approach,
descent, lift, carry and lowering knots with top-down orientation) and counts the
poses for which every IK solve converged (1 mm / 0.01 rad).

With ``--side left`` the grid covers the left arm's cube area (the mirror image of the right arm's
in y) and the left arm plans (task ``tray_green`` with the cube on that side).

Usage: PYTHONPATH=. python tools/sim_reach.py [--n 11] [--side right|left]
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import time

import mujoco
import numpy as np

from openarm_sim_dataset.sim.pick_place import EpisodeParams, PickPlace, set_initial_state
from openarm_sim_dataset.sim.scene import SceneConfig, build_model
from openarm_sim_dataset.sim.tasks.base import area_center


def measure(model, cfg: SceneConfig, n: int = 11, yaws=(-math.pi / 4, 0.0, math.pi / 4 - 0.01), side: str = "right"):
    """Return (reachable count, total, list of failing (x, y, yaw_deg), grasp-yaw offsets used)."""
    cx, cy = area_center(cfg, side)
    h = cfg.cube_area_half
    data = mujoco.MjData(model)
    ok = tot = 0
    fails = []
    offs = {}
    for x in np.linspace(cx - h, cx + h, n):
        for y in np.linspace(cy - h, cy + h, n):
            for yaw in yaws:
                far = cy + (0.5 if side == "right" else -0.5)
                if side == "right":  # the default task: red cube, right arm
                    p = EpisodeParams(cube_poses=((x, y, yaw), (cx, far, 0.0), (cx + 0.1, far, 0.0)))
                else:  # tray_green, green cube on the left
                    p = EpisodeParams(cube_poses=((cx, far, 0.0), (x, y, yaw), (cx + 0.1, far, 0.0)),
                                      task="tray_green", side="left")
                set_initial_state(model, data, p, cfg)
                ctl = PickPlace(model, p)
                ctl.reset(data)
                tot += 1
                if ctl.outcome == "ik_failed":
                    fails.append((round(float(x), 3), round(float(y), 3), round(math.degrees(yaw))))
                else:
                    ok += 1
                    k = round(math.degrees(ctl.grasp_yaw - yaw))
                    offs[k] = offs.get(k, 0) + 1
    return ok, tot, fails, offs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=11)
    ap.add_argument("--arm-height", type=float, default=None)
    ap.add_argument("--table-height", type=float, default=None)
    ap.add_argument("--side", choices=("right", "left"), default="right")
    a = ap.parse_args()
    cfg = SceneConfig()
    kw = {}
    if a.arm_height is not None:
        kw["arm_height"] = a.arm_height
    if a.table_height is not None:
        kw["table_height"] = a.table_height
    cfg = dataclasses.replace(cfg, **kw)
    model = build_model(cfg)
    t0 = time.perf_counter()
    ok, tot, fails, offs = measure(model, cfg, a.n, side=a.side)
    dt = time.perf_counter() - t0
    print(f"{a.side} arm, area centre {area_center(cfg, a.side)}; cfg arm_height={cfg.arm_height} table_height={cfg.table_height} area_center={cfg.cube_area_center} "
          f"tray={cfg.tray_center_xy}")
    print(f"full plan reachable {ok}/{tot} = {100 * ok / tot:.1f} %  ({1e3 * dt / tot:.1f} ms/plan); "
          f"grasp-yaw offset use (deg from cube yaw, incl. wrap): {offs}")
    for f in fails[:30]:
        print("  fail", f)


if __name__ == "__main__":
    main()
