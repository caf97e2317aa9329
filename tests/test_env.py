"""Gymnasium environments of the task library: the checker, reset == the generator's initial state,
the scripted policy in the environment == the generator's episode, the success rule."""

from __future__ import annotations

import warnings
from dataclasses import replace

import mujoco
import numpy as np
import pytest
from conftest import SMALL, tiny_config, tree_bytes

gym = pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from openarm_sim_dataset import env as E, layout, sidecar  # noqa: E402
from openarm_sim_dataset.evaluate import Job, evaluate, run_episode  # noqa: E402
from openarm_sim_dataset.metadata import Metadata  # noqa: E402
from openarm_sim_dataset.policies import ScriptedPolicy, ZeroPolicy  # noqa: E402
from openarm_sim_dataset.sidecar import load_npz as load_sidecar  # noqa: E402
from openarm_sim_dataset.sim.generate import GenerateConfig, params_for  # noqa: E402
from openarm_sim_dataset.sim.models import load_model  # noqa: E402
from openarm_sim_dataset.sim.scene import cube_qpos_adr  # noqa: E402
from openarm_sim_dataset.sim.tasks import (  # noqa: E402
    make_controller,
    run_episode as generator_episode,
    set_initial_state,
    task_names,
)
from openarm_sim_dataset.sim.tasks.planner import table_height, tray_geometry  # noqa: E402


def _check(env) -> None:
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checker's advice on unbounded / non-normalised Boxes
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize("task", task_names())
def test_check_env_every_task(task):
    env = E.make(task, cameras=False)
    _check(env)
    assert env.observation_space["prompt"].contains(env.task.prompt)


@pytest.mark.slow
def test_check_env_with_cameras_and_registered_ids():
    env = gym.make(E.env_id("pick_place"), width=32, height=24)
    _check(env.unwrapped)
    obs, info = env.reset(seed=3, options={"index": 1})
    for cam in env.unwrapped.config.scene.cameras:
        assert obs["cameras"][cam].shape == (24, 32, 3) and obs["cameras"][cam].dtype == np.uint8
    assert set(E.register_all()) == {f"OpenArmSim/{t}-v0" for t in task_names()}
    assert all(i in gym.registry for i in E.register_all())
    # simulator state only in info: the observation is what the robot measures
    assert set(obs) == {"arms", "cameras", "prompt"} and set(obs["arms"]["right"]) == {"qpos", "qvel", "qtorque"}
    assert info["object_pose"].shape == (3, 7) and info["state"].ndim == 1
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", task_names())
def test_reset_is_the_generators_initial_state(task):
    """Bit for bit the initial state of the generator's own episode loop (tasks.run_episode), for
    three (seed, index) pairs per task; the variation too under randomisation."""
    cfg = GenerateConfig(tasks=() if task == "pick_place" else (task,))
    env = E.make(task, cameras=False)
    model = load_model(cfg.scene)
    for k, (seed, index) in enumerate(((7, 3), (0, 0), (123, 11))):
        obs, info = env.reset(seed=seed, options={"index": index})
        params, _ = params_for(replace(cfg, seed=seed), index)
        assert env.params == params
        if k == 0:  # the generator's loop itself, no step taken (it plans: once per task)
            gen = generator_episode(model, params, max_time=0.0)
            state, qpos, qvel = gen.initial_state, gen.final_qpos, gen.final_qvel
        else:  # its first call, on a fresh MjData
            d = mujoco.MjData(model)
            set_initial_state(model, d, params)
            state = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION))
            mujoco.mj_getState(model, d, state, mujoco.mjtState.mjSTATE_INTEGRATION)
            qpos, qvel = d.qpos, d.qvel
        assert np.array_equal(env.initial_state, state) and np.array_equal(info["state"], state)
        assert np.array_equal(env.data.qpos, qpos) and np.array_equal(env.data.qvel, qvel)
    # reset() without a seed is the next episode of the same seed
    env.reset()
    assert (env._seed, env._index) == (123, 12)


def test_reset_equals_a_generated_dataset(generated):
    """The initial state stored in a generated dataset's sidecar, and its first frame's qpos/qvel."""
    env = E.make("pick_place", config=SMALL, cameras=False)
    for ep in ("0", "1"):
        side = load_sidecar(generated / "episodes" / ep / layout.SIM_DIR / sidecar.SIDECAR_FILE)
        env.reset(seed=SMALL.seed, options={"index": int(ep)})
        assert np.array_equal(env.initial_state, side["initial_state"])
        assert np.array_equal(env.data.qpos, side["qpos"][0]) and np.array_equal(env.data.qvel, side["qvel"][0])


@pytest.mark.slow
def test_reset_equals_a_randomized_dataset(randomized):
    """Randomised: the episode's variation and model as generated, and its initial state."""
    cfg = replace(SMALL, randomize="all")
    env = E.make("pick_place", config=cfg, cameras=False)
    meta = Metadata.load(randomized)
    for entry in meta.episodes:
        side = load_sidecar(randomized / "episodes" / entry["id"] / layout.SIM_DIR / sidecar.SIDECAR_FILE)
        env.reset(seed=cfg.seed, options={"index": int(entry["id"])})
        assert env.variation.to_dict() == entry["variation"] and env.model_sha256 == entry["model_sha256"]
        assert np.array_equal(env.initial_state, side["initial_state"])


@pytest.mark.slow
def test_scripted_policy_in_the_env_is_the_generated_episode(tiny_generated, tmp_path):
    """Generation is the scripted policy run in the environment and recorded: the evaluator's rollout
    of ``scripted`` is ``dataset-generate``'s episode file for file (manifest, sidecar, parquet, JPEG),
    and its metadata entry the generator's plus ``success_any``."""
    cfg = tiny_config()
    out = tmp_path / "scripted"
    rep = evaluate("scripted", out, [Job("pick_place", cfg.seed, 0, "0")], replace(cfg, tasks=()))
    ours = tree_bytes(out / "episodes" / "0", skip=())
    theirs = tree_bytes(tiny_generated["path"] / "episodes" / "0", skip=())
    assert ours.keys() == theirs.keys() and all(ours[k] == theirs[k] for k in ours)
    gen_entry = Metadata.load(tiny_generated["path"]).episodes[0]
    entry = dict(rep.episodes[0])
    assert entry.pop("success_any") is True
    assert entry == gen_entry
    meta = Metadata.load(out)
    assert meta.operation_type == "rollout" and meta.data["model"]["name"] == "scripted"
    assert len(meta.data["model"]["sha256"]) == 64


@pytest.mark.slow
def test_scripted_other_task_same_actions_and_outcome():
    """Another task (two-sided, arm contacts counted): same physics commands and outcome as the
    generator's loop; the environment's rule agrees with the controller's judge at the end."""
    cfg = GenerateConfig(tasks=("unload_blue",))
    model = load_model(cfg.scene)
    params, _ = params_for(replace(cfg, seed=4), 2)
    ctrls = []
    gen = generator_episode(model, params, on_step=lambda d, s, c: ctrls.append(c))
    env = E.make("unload_blue", cameras=False, control_hz="physics")
    rec, out = run_episode(env, ScriptedPolicy(), 4, 2, record=True)
    assert np.array_equal(rec.sidecar["physics_ctrl"], np.asarray(ctrls[:gen.steps]))
    assert (out.outcome, out.steps, rec.result.attempts, rec.result.arm_contacts) == \
        (gen.outcome, gen.steps, gen.attempts, gen.arm_contacts)
    assert out.success_rule_end == (gen.outcome == "success")


def test_step_time_limit_and_bad_actions():
    env = E.make("pick_place", cameras=False, max_time=0.25)  # 125 physics steps, 50 per control step
    obs, _ = env.reset(seed=1)
    hold = np.concatenate([obs["arms"][s]["qpos"] for s in ("right", "left")]).astype(np.float64)
    flags = [env.step(hold)[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)] and env.steps == 125
    with pytest.raises(ValueError, match=r"shape \(15,\)"):
        env.step(hold[:15])
    with pytest.raises(ValueError, match="non-finite"):
        env.step(np.full(16, np.nan))
    with pytest.raises(ValueError, match="does not divide"):
        E.make("pick_place", cameras=False, control_hz=7.0)


def _teleport_into_tray(env) -> None:
    m, d = env.model, env.data
    a, _ = cube_qpos_adr(m, "cube_red")
    xy, _ = tray_geometry(m)
    d.qpos[a:a + 3] = (xy[0], xy[1], table_height(m) + 0.004 + 0.02 + 0.001)
    d.qvel[:] = 0
    mujoco.mj_forward(m, d)


def test_success_rule_terminates_and_held_cube_is_not_success():
    """The rule fires when the cube rests in the tray, released; a cube in the tray still gripped is
    not a success; ``terminate_on_success=False`` never terminates."""
    env = E.make("pick_place", cameras=False)
    obs, info = env.reset(seed=0)
    assert not info["success"] and info["outcome"] == "not_done"
    _teleport_into_tray(env)
    hold = np.concatenate([obs["arms"][s]["qpos"] for s in ("right", "left")]).astype(np.float64)
    _, reward, terminated, truncated, info = env.step(hold)
    assert terminated and not truncated and reward == 1.0 and info["outcome"] == "success"
    assert env.rule.goal_reached(env.data) and not env.rule.touched(env.data)
    # planted: every geom but the cubes counted as an arm's, so the cube resting on the tray floor is
    # "held": goal reached, not released, no success
    rule = env.rule
    rule._arm_geoms = ~rule._obj_geoms
    assert rule.goal_reached(env.data) and rule.touched(env.data) and not rule.success(env.data)
    env2 = E.make("pick_place", cameras=False, terminate_on_success=False)
    env2.reset(seed=0)
    _teleport_into_tray(env2)
    assert env2.step(hold)[2] is False


def _audit(seeds: int, indices: int) -> int:
    model = load_model(GenerateConfig().scene)
    data = mujoco.MjData(model)
    checked = 0
    for task in task_names():
        cfg = GenerateConfig(tasks=(task,))
        for seed in range(seeds):
            for index in range(indices):
                params, _ = params_for(replace(cfg, seed=seed), index)
                set_initial_state(model, data, params)
                rule = make_controller(model, params)
                assert not rule.goal_reached(data) and not rule.success(data), (task, seed, index)
                checked += 1
    return checked


def test_no_success_rule_holds_at_an_initial_state():
    """Predicate audit: over many seeds and indices no task's rule (nor its geometric part) holds at
    the initial state; the check is shown to see a planted success."""
    assert _audit(10, 4) == 240
    env = E.make("pick_place", cameras=False)
    env.reset(seed=0)
    _teleport_into_tray(env)
    assert env.rule.success(env.data)


@pytest.mark.slow
def test_no_success_rule_holds_at_3000_initial_states():
    assert _audit(100, 5) == 3000


def test_zero_policy_scores_zero_every_task():
    for task in task_names():
        env = E.make(task, cameras=False, max_time=2.0)
        _, out = run_episode(env, ZeroPolicy(), 5, 0, record=False)
        assert not out.success and not out.success_any and out.outcome == "not_done", task


@pytest.mark.slow
def test_zero_and_random_score_zero_every_task_full_length():
    from openarm_sim_dataset.policies import RandomPolicy

    for task in task_names():
        env = E.make(task, cameras=False)
        for policy in (ZeroPolicy(), RandomPolicy()):
            for index in range(3):
                _, out = run_episode(env, policy, 11, index, record=False)
                assert not out.success and not out.success_any, (task, policy.name, index)
