"""Full episodes: success, determinism, bit-exact replay and resume (real MuJoCo)."""
import mujoco
import numpy as np
import pytest

from openarm_sim_dataset.sim.models import load_model
from openarm_sim_dataset.sim.pick_place import (
    OUTCOMES,
    EpisodeParams,
    PickPlace,
    run_episode,
    set_initial_state,
    wrap_yaw_90,
)
from openarm_sim_dataset.sim.randomize import episode_params

#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_sim_episode")

INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION


@pytest.fixture(scope="module")
def model():
    return load_model()  # compiled once per process (sim/models.py), a private copy


@pytest.fixture(scope="module")
def recorded(model):
    """One episode (seed 10, index 0) with its initial state, per-step ctrl and a mid-episode state."""
    params = episode_params(10, 0)
    ctrls = []
    mid = {}
    n_state = mujoco.mj_stateSize(model, INTEGRATION)

    def on_step(data, i, ctrl):
        ctrls.append(ctrl.copy())
        if i == 1100:  # fingers closing on the cube: contacts active
            s = np.zeros(n_state)
            mujoco.mj_getState(model, data, s, INTEGRATION)
            mid["state"] = s
            mid["qpos"], mid["qvel"], mid["time"] = data.qpos.copy(), data.qvel.copy(), data.time
            mid["ctrl"] = data.ctrl.copy()
            mid["ncon"] = data.ncon

    res = run_episode(model, params, on_step=on_step)
    return params, res, np.array(ctrls[:res.steps]), mid


def test_episode_succeeds(recorded):
    params, res, ctrls, _ = recorded
    assert res.outcome == "success", res
    assert not res.knocked_over
    assert res.steps * 0.002 < 12.0
    assert ctrls.shape == (res.steps, 16)
    assert params.meta["seed"] == 10 and params.meta["index"] == 0


def test_deterministic(model, recorded):
    params, res, _, _ = recorded
    again = run_episode(model, episode_params(10, 0))
    assert np.array_equal(again.final_qpos, res.final_qpos)
    assert np.array_equal(again.final_qvel, res.final_qvel)
    assert np.array_equal(again.initial_state, res.initial_state)


def test_replay_bit_exact(model, recorded):
    _, res, ctrls, _ = recorded
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, res.initial_state, INTEGRATION)
    for c in ctrls:
        data.ctrl[:] = c
        mujoco.mj_step(model, data)
    assert np.array_equal(data.qpos, res.final_qpos)
    assert np.array_equal(data.qvel, res.final_qvel)


def test_resume_needs_full_integration_state(model, recorded):
    _, res, ctrls, mid = recorded
    assert mid["ncon"] > 0
    rest = ctrls[1100:]
    d1 = mujoco.MjData(model)
    mujoco.mj_setState(model, d1, mid["state"], INTEGRATION)
    for c in rest:
        d1.ctrl[:] = c
        mujoco.mj_step(model, d1)
    assert np.array_equal(d1.qpos, res.final_qpos)
    assert np.array_equal(d1.qvel, res.final_qvel)

    d2 = mujoco.MjData(model)
    d2.qpos[:], d2.qvel[:], d2.time, d2.ctrl[:] = mid["qpos"], mid["qvel"], mid["time"], mid["ctrl"]
    for c in rest:
        d2.ctrl[:] = c
        mujoco.mj_step(model, d2)
    assert not np.array_equal(d2.qpos, res.final_qpos)  # warm start (qacc_warmstart) missing


def test_controller_stepwise_matches_run_episode(model, recorded):
    params, res, ctrls, _ = recorded
    data = mujoco.MjData(model)
    set_initial_state(model, data, params)
    ctl = PickPlace(model, params)
    ctl.reset(data)
    k = 0
    while not ctl.done:
        c = ctl.command(data)
        assert np.array_equal(c, ctrls[k])
        assert ctl.targets["right"].shape == (8,) and ctl.targets["left"].shape == (8,)
        assert np.array_equal(c[ctl.right.actuators], ctl.targets["right"])
        data.ctrl[:] = c
        mujoco.mj_step(model, data)
        k += 1
    assert ctl.outcome == "success" and k == res.steps


def test_params_share_draws_across_sigma():
    a, b = episode_params(10, 3, sigma=0.0), episode_params(10, 3, sigma=0.015, retry=True)
    assert a.cube_poses == b.cube_poses
    assert a.perception_draws == b.perception_draws
    assert a.ik_seed == b.ik_seed
    assert a.cube_poses != episode_params(10, 4).cube_poses
    for _x, _y, yaw in a.cube_poses:
        assert -np.pi / 4 <= yaw < np.pi / 4
    (rx, ry, _), *others = a.cube_poses
    for x, y, _ in others:
        assert np.hypot(x - rx, y - ry) >= 0.1


def test_wrap_yaw():
    for y in np.linspace(-7, 7, 57):
        w = wrap_yaw_90(y)
        assert -np.pi / 4 <= w < np.pi / 4
        assert np.isclose(np.cos(4 * (w - y)), 1.0)


def test_retry_after_missed_grasp(model):
    """A 7 cm perception error on the first estimate misses; the retry (exact estimate) succeeds."""
    base = episode_params(10, 0)
    p = EpisodeParams(cube_poses=base.cube_poses, perception_draws=((2.5, 2.5, 0.0), (0.0, 0.0, 0.0)),
                      sigma=0.02, retry=True, ik_seed=base.ik_seed)
    res = run_episode(model, p)
    assert res.attempts == 2
    assert res.outcome in OUTCOMES
    assert res.outcome == "success", res.phase_log
