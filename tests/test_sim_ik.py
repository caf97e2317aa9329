"""IK convergence, reachability of the cube area, min-jerk trajectories."""
import math

import mujoco
import numpy as np
import pytest

from openarm_sim_dataset.sim.ik import IKSolver, solve_ik
from openarm_sim_dataset.sim.models import load_model
from openarm_sim_dataset.sim.pick_place import EpisodeParams, PickPlace, set_initial_state
from openarm_sim_dataset.sim.scene import SceneConfig
from openarm_sim_dataset.sim.trajectory import MinJerkPath, min_jerk_s


@pytest.fixture(scope="module")
def model():
    return load_model()  # compiled once per process (sim/models.py), a private copy


def test_ik_recovers_fk_pose(model):
    ik = IKSolver(model, "right")
    q_true = np.array([0.8, 0.2, 0.1, 1.2, 0.2, 0.1, 0.3])
    p, R = ik.site_pose(q_true)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, R.ravel())
    q, ok, err = ik.solve(p, quat, np.zeros(7), np.random.default_rng(0))
    assert ok and err < 2e-3
    p2, R2 = ik.site_pose(q)
    assert np.linalg.norm(p2 - p) < 1e-3
    q, ok, err = solve_ik(model, "left", [0.2, 0.25, 0.45], [1, 0, 0, 0], np.zeros(7), np.random.default_rng(1))
    assert ok


def test_ik_deterministic(model):
    args = ([0.15, -0.2, 0.5], [0, 0, 0, 1], np.zeros(7))
    a = IKSolver(model, "right").solve(*args, np.random.default_rng(5))
    b = IKSolver(model, "right").solve(*args, np.random.default_rng(5))
    assert np.array_equal(a[0], b[0])


@pytest.mark.slow  # 18 full IK plans; generation in the default run plans its own episodes
def test_cube_area_reachable(model):
    """Full pick-and-place plan (all IK knots) exists at the corners and centre of the cube area."""
    cfg = SceneConfig()
    cx, cy = cfg.cube_area_center
    h = cfg.cube_area_half
    data = mujoco.MjData(model)
    fails = []
    for x in (cx - h, cx, cx + h):
        for y in (cy - h, cy, cy + h):
            for yaw in (-math.pi / 4, 0.0):
                p = EpisodeParams(cube_poses=((x, y, yaw), (cx, 0.4, 0.0), (cx + 0.1, 0.4, 0.0)))
                set_initial_state(model, data, p)
                ctl = PickPlace(model, p)
                ctl.reset(data)
                if ctl.outcome == "ik_failed":
                    fails.append((x, y, yaw))
    assert len(fails) <= 1, fails


def test_min_jerk():
    assert min_jerk_s(0.0) == 0.0 and min_jerk_s(1.0) == 1.0
    path = MinJerkPath(np.array([[0.0, 1.0], [1.0, 3.0]]), 2.0)
    assert np.allclose(path.at(0.0), [0, 1]) and np.allclose(path.at(2.0), [1, 3])
    assert np.allclose(path.at(1.0), [0.5, 2.0])
    eps = 1e-4
    assert np.allclose((path.at(eps) - path.at(0.0)) / eps, 0, atol=1e-3)
    t = np.linspace(0, 2, 50)
    assert np.allclose(path.sample(t), np.array([path.at(x) for x in t]))
    assert np.all(np.diff(path.sample(t)[:, 0]) >= 0)
    multi = MinJerkPath(np.array([[0.0], [1.0], [2.0]]), 1.0)
    assert np.isclose(multi.at(0.5)[0], 1.0)
