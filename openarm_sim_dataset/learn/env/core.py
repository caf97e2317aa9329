"""The Gymnasium environment of one task: the generator's scene, task, servos and renderer behind
``reset(seed, index)`` / ``step(targets)``.

Nothing physical is written here: the initial state is the task's (:func:`~..sim.tasks.set_initial_state`
of :func:`~..sim.generate.params_for`), the scene variation the generator's
(:func:`~..sim.variation.draw_variation`, :func:`~..sim.models.episode_model`), the success rule the
task controller's (:meth:`~..sim.tasks.planner.ScriptedController.success`), the images the
generator's :class:`~..sim.render.SimRenderer`, and a recorded episode goes through the generator's
:class:`~..sim.recorder.StepRecorder` (same streams, same sidecar).

Time: one ``step`` holds the 16 joint position targets for ``physics_hz / control_hz`` physics steps
(``data.ctrl`` set before each ``mj_step``, exactly as the scripted generator sets it). The episode
is truncated at ``max_time`` s of simulated time (the generation config's, 12 s by default).

Observation (what a real OpenArm measures, nothing else)::

    {"arms": {"right"|"left": {"qpos": (8,), "qvel": (8,), "qtorque": (8,)}},   float32, the obs stream
     "cameras": {name: (H, W, 3) uint8},                                         if cameras are on
     "prompt": str}                                                              the task's instruction

per arm joint1..7 then the gripper (finger_joint1): rad, rad/s, N·m (gripper N), the actuator force of
the physics step that ended at the sample. Images show the state the observation holds (after
``mj_kinematics``/``mj_camlight``, which recompute derived quantities only: the physics is untouched).

Action: ``(16,)`` float64, right arm's 8 targets then the left arm's (joint1..7 rad, gripper command),
the action stream's units; ``action_space`` bounds are the actuators' control ranges (MuJoCo clamps).

``info`` carries the simulator state, privileged (a policy meant for the robot must not read it):
``state`` (mjSTATE_INTEGRATION), ``object_pose`` (3, 7: red, green, blue cube position m + wxyz),
``success`` (the rule now), ``success_any`` (held at any step boundary so far), ``knocked_over``,
``outcome`` (``success``, ``not_done`` if the rule never held, ``undone`` if it held and no longer does),
``seed``/``index``/``task``/``step``/``time``, and ``sim`` (:class:`SimHandle`: the live ``model``,
``data``, ``params``, for the scripted policy only: it plans from the true state as the generator does).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.sim.episode_recorder import RecordedEpisode, StepRecorder
from openarm_sim_dataset.sim.generate import GenerateConfig, config_for_task, params_for
from openarm_sim_dataset.sim.models import cached_model, episode_model
from openarm_sim_dataset.sim.render import SimRenderer
from openarm_sim_dataset.sim.scene import CUBE_NAMES, arm_index, cube_qpos_adr
from openarm_sim_dataset.sim.tasks import (
    get_task,
    make_controller,
    object_up_vectors,
    objects_turned,
    rollout_outcome,
    set_initial_state,
)
from openarm_sim_dataset.sim.tasks.planner import EpisodeResult
from openarm_sim_dataset.sim.tasks.planner.geometry import arm_contact_pairs, geoms_touch
from openarm_sim_dataset.sim.variation import check_mode, draw_variation

__all__ = ["OpenArmEnv", "PROMPT_CHARSET", "SimHandle", "config_for_task"]

#: Characters a prompt may hold (the Text space's charset; Gymnasium's default has no space or '.').
PROMPT_CHARSET = string.ascii_letters + string.digits + " .,;:'!?-()"


class SimHandle:
    """The live simulation in ``info["sim"]`` (``model``, ``data``, ``params``): for the scripted
    policy, which plans from the true state as the generator does. Two handles are equal when their
    episodes' parameters and integration states are (what Gymnasium's determinism check compares)."""

    __slots__ = ("model", "data", "params")

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, params) -> None:
        self.model, self.data, self.params = model, data, params

    def _state(self) -> np.ndarray:
        st = np.empty(mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_INTEGRATION))
        mujoco.mj_getState(self.model, self.data, st, mujoco.mjtState.mjSTATE_INTEGRATION)
        return st

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SimHandle) and self.params == other.params
                and np.array_equal(self._state(), other._state()))

    def __hash__(self) -> int:  # pragma: no cover - handles are not keys
        return id(self)


class OpenArmEnv(gym.Env):
    """One task of the OpenArm scene as a Gymnasium environment (see the module docstring).

    Args:
        task: registered task name (``OpenArmSim/<task>-v0``).
        config: the generation config (scene, record rates, sigma/retry, randomisation, time limit);
            ``reset(seed=s, options={"index": i})`` is episode ``i`` of that config with seed ``s``.
        cameras: True: the config's cameras at its resolution; False/(): none (physics only); or names.
        width, height: image size override (pixels; the config's scene otherwise).
        control_hz: policy rate (Hz), must divide the physics rate; default the config's camera rate;
            ``"physics"``: every physics step.
        terminate_on_success: ``terminated`` when the success rule holds (else never terminated).
        randomize: scene randomisation override (none, visual, physics, all).
        max_time: time limit override (s).
        renderer: a :class:`SimRenderer` of the same scene to share (else one is made on first use).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, task: str = "pick_place", config: GenerateConfig | None = None,
                 cameras: bool | Sequence[str] = True, width: int | None = None, height: int | None = None,
                 control_hz: float | str | None = None, terminate_on_success: bool = True,
                 randomize: str | None = None, max_time: float | None = None,
                 render_mode: str | None = None, renderer: SimRenderer | None = None) -> None:
        cfg = config_for_task(task, config)
        scene = cfg.scene
        if width is not None or height is not None:
            scene = replace(scene, width=int(width or scene.width), height=int(height or scene.height))
        cfg = replace(cfg, scene=scene, randomize=check_mode(randomize or cfg.randomize),
                      max_time=float(max_time if max_time is not None else cfg.max_time))
        self.task = get_task(task)
        self.config = cfg
        self.render_mode = render_mode
        self.cameras = tuple(scene.cameras) if cameras is True else tuple(cameras or ())
        for c in self.cameras:
            if c not in scene.cameras:
                raise ValueError(f"camera {c!r} is not one of the scene's {list(scene.cameras)}")
        # the process's compiled model of the scene, shared by every environment of it (46 MB of
        # buffers each otherwise): read-only, as every episode's model (a varied one is private)
        self.nominal = cached_model(scene).model
        self.model = self.nominal
        self.dt = float(self.nominal.opt.timestep)
        self.physics_hz = 1.0 / self.dt
        if control_hz == "physics":  # act every physics step, as the scripted generator's controller does
            control_hz = self.physics_hz
        self.control_hz = float(control_hz if control_hz is not None else cfg.record.camera_hz)
        n = self.physics_hz / self.control_hz
        if not self.control_hz > 0 or abs(n - round(n)) > 1e-9 or round(n) < 1:
            raise ValueError(f"control_hz {self.control_hz:g} does not divide the physics rate {self.physics_hz:g} Hz")
        self.substeps = int(round(n))
        self.max_steps = int(round(cfg.max_time / self.dt))
        self.terminate_on_success = bool(terminate_on_success)
        self.metadata = dict(self.metadata, render_fps=self.control_hz)
        arms = [arm_index(self.nominal, s) for s in layout.ARM_SIDES]
        self._arms = dict(zip(layout.ARM_SIDES, arms))
        #: ctrl indices of the 16 action values (right arm's 8, then the left arm's)
        self.action_index = np.concatenate([a.actuators for a in arms]).astype(int)
        self._obs_qpos = np.stack([a.qpos for a in arms]).astype(int)
        self._obs_qvel = np.stack([a.qvel for a in arms]).astype(int)
        self._obs_act = np.stack([a.actuators for a in arms]).astype(int)
        rng = self.nominal.actuator_ctrlrange[self.action_index]
        self.action_space = spaces.Box(rng[:, 0].copy(), rng[:, 1].copy(), (16,), np.float64)
        vec = spaces.Box(-np.inf, np.inf, (8,), np.float32)
        obs = {"arms": spaces.Dict({s: spaces.Dict({"qpos": vec, "qvel": vec, "qtorque": vec}) for s in layout.ARM_SIDES}),
               "prompt": spaces.Text(max_length=256, min_length=1, charset=PROMPT_CHARSET)}
        if self.cameras:
            obs["cameras"] = spaces.Dict({c: spaces.Box(0, 255, (scene.height, scene.width, 3), np.uint8)
                                          for c in self.cameras})
        self.observation_space = spaces.Dict(obs)
        # a renderer of the same scene may be shared by several environments (one GL context per
        # process: the evaluator's per-task environments); a shared one is not closed by close()
        if renderer is not None and (tuple(renderer.cameras) != tuple(scene.cameras)
                                     or (renderer.width, renderer.height) != (scene.width, scene.height)):
            raise ValueError("the shared renderer renders another scene's cameras or size")
        self._renderer: SimRenderer | None = renderer
        self._own_renderer = renderer is None
        self._right_geoms, self._left_geoms = arm_contact_pairs(self.nominal)  # a variation changes no geom
        self._cube_adr = [cube_qpos_adr(self.nominal, c)[0] for c in CUBE_NAMES]
        self._cube_rows = np.asarray(self._cube_adr)[:, None] + np.arange(7)  # (3, 7) qpos indices
        self.data: mujoco.MjData | None = None
        self.recorder: StepRecorder | None = None
        self._seed = int(cfg.seed)
        self._index = -1

    # ------------------------------------------------------------------ episode
    def episode_config(self, seed: int) -> GenerateConfig:
        """The generation config of seed ``seed`` (this environment's config otherwise)."""
        return replace(self.config, seed=int(seed))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Episode ``options["index"]`` (default: 0 after a new ``seed``, else the next index) of the
        generation with seed ``seed`` (default: the last one, initially the config's): its initial
        state and scene variation exactly, bit for bit. ``options["record"]=True`` records the
        episode through :class:`StepRecorder` (see :meth:`recorded`); ``options["record_index"]``
        is the episode index on the dataset clock (default: ``index``)."""
        super().reset(seed=seed)
        options = dict(options or {})
        if seed is not None:
            self._seed = int(seed)
            self._index = -1
        index = int(options["index"]) if "index" in options else self._index + 1
        if index < 0:
            raise ValueError(f"episode index {index} < 0")
        self._index = index
        cfg = self.episode_config(self._seed)
        self.params, self.task_index = params_for(cfg, index)
        self.variation = draw_variation(cfg.seed, index, cfg.randomize, cfg.scene)
        if self.variation is None:
            self.model, self.model_sha256 = self.nominal, None
        else:
            built = episode_model(cfg.scene, self.variation)
            self.model, self.model_sha256 = built.model, built.sha256
        self.data = mujoco.MjData(self.model)  # a fresh one per episode, as the generator's loop
        set_initial_state(self.model, self.data, self.params)
        self.initial_state = self._state()
        self.rule = make_controller(self.model, self.params)  # its success rule only (never reset/stepped)
        self._start_up = object_up_vectors(self.model, self.rule, self.data)
        self.steps = 0
        self.arm_contacts = 0
        self.success_any = False
        self.last_ctrl = self.data.ctrl.copy()
        self.recorder = None
        if options.get("record"):
            self.recorder = StepRecorder(self.model, self.renderer(), int(options.get("record_index", index)),
                                         self.config.record)
        return self._observation(), self._info()

    def step(self, action):
        """Hold ``action`` (16 targets) for ``substeps`` physics steps (fewer at the time limit)."""
        if self.data is None:
            raise RuntimeError("step() before reset()")
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (16,):
            raise ValueError(f"action has shape {a.shape}, expected (16,)")
        if not np.all(np.isfinite(a)):
            raise ValueError("action holds a non-finite value")
        ctrl = self.data.ctrl.copy()
        ctrl[self.action_index] = a
        ctrl.setflags(write=False)  # the recorder keeps a reference per physics step
        model, data, rec = self.model, self.data, self.recorder
        count = self.rule.count_arm_contacts
        for _ in range(self.substeps):
            if self.steps >= self.max_steps:
                break
            if count:  # the state this step's control acts on, as the task controller counts them
                self.arm_contacts += self._arms_touch(data)
            data.ctrl[:] = ctrl
            if rec is not None:
                rec.on_step(data, self.steps, ctrl)
            mujoco.mj_step(model, data)
            self.steps += 1
        self.last_ctrl = ctrl
        success = self.rule.success(data)
        self.success_any = self.success_any or success
        terminated = bool(success and self.terminate_on_success)
        truncated = bool(self.steps >= self.max_steps and not terminated)
        return self._observation(), 0.0 if not success else 1.0, terminated, truncated, self._info(success)

    def _arms_touch(self, data: mujoco.MjData) -> bool:
        """A geom of one arm touches a geom of the other in ``data``'s contacts."""
        return geoms_touch(data, self._right_geoms, self._left_geoms)

    # --------------------------------------------------------------- outcome
    def knocked_over(self) -> bool:
        """A task object rests on another face than it started on (a success then counts as lucky)."""
        return objects_turned(self.rule, self.data, self._start_up)

    def outcome(self, success: bool | None = None) -> str:
        return rollout_outcome(self.rule, self.data, self._start_up, self.success_any, success)[0]

    def result(self, outcome: str | None = None) -> EpisodeResult:
        """The episode so far as the generator's :class:`EpisodeResult` (``outcome``: a policy's own
        category, e.g. the scripted controller's; default :meth:`outcome`)."""
        d = self.data
        outcome = outcome or self.outcome()
        a = cube_qpos_adr(self.model, self.rule.objects[0])[0]
        return EpisodeResult(outcome=outcome, knocked_over=bool(outcome == "success" and self.knocked_over()),
                             success=outcome == "success", attempts=0, steps=self.steps, sim_time=float(d.time),
                             arm_contacts=int(self.arm_contacts),
                             cube_final=d.qpos[a:a + 7].copy(), initial_state=self.initial_state,
                             final_qpos=d.qpos.copy(), final_qvel=d.qvel.copy(), estimates=[], phase_log=[])

    def recorded(self, result: EpisodeResult | None = None) -> RecordedEpisode:
        """Finish the recording started by ``reset(options={"record": True})``: the recorder's last
        call (after the final step, the last control), then the recorded episode."""
        if self.recorder is None:
            raise RuntimeError("the episode is not being recorded (reset(options={'record': True}))")
        rec, self.recorder = self.recorder, None
        rec.on_step(self.data, self.steps, self.last_ctrl)
        # params: the sidecar records the episode's identity (task, arms, seed inputs) as a generated
        # one does; the judge facts only where the policy is the scripted controller (result.judge_facts)
        return rec.finish(result or self.result(), self.variation, self.model_sha256, params=self.params)

    # ------------------------------------------------------------------ parts
    def renderer(self) -> SimRenderer:
        """The generator's renderer of the config's cameras (made on first use, switched per episode)."""
        if self._renderer is None:
            self._renderer = SimRenderer(self.model, self.config.scene)
        self._renderer.use_model(self.model)
        return self._renderer

    def _state(self) -> np.ndarray:
        st = np.empty(mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_INTEGRATION))
        mujoco.mj_getState(self.model, self.data, st, mujoco.mjtState.mjSTATE_INTEGRATION)
        return st

    def _observation(self) -> dict:
        d = self.data
        # one gather per quantity for both arms (rows: right, left), then per-arm views
        q = d.qpos[self._obs_qpos].astype(np.float32)
        v = d.qvel[self._obs_qvel].astype(np.float32)
        f = d.actuator_force[self._obs_act].astype(np.float32)
        obs: dict[str, Any] = {"arms": {s: {"qpos": q[k], "qvel": v[k], "qtorque": f[k]}
                                        for k, s in enumerate(layout.ARM_SIDES)},
                               "prompt": self.task.prompt}
        if self.cameras:
            obs["cameras"] = self._images()
        return obs

    def _images(self) -> dict:
        # after mj_step the derived quantities are the pre-integration ones: recompute the poses the
        # image must show (derived only; the physics stream is untouched, as in the recorder)
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)
        r = self.renderer()
        return {c: r.render(self.data, c, rgb=True, depth=False, labels=False)["rgb"] for c in self.cameras}

    def _info(self, success: bool | None = None) -> dict:
        d = self.data
        success = self.rule.success(d) if success is None else success
        return {"task": self.task.name, "seed": self._seed, "index": self._index, "step": self.steps,
                "time": float(d.time), "state": self._state(),
                "object_pose": d.qpos[self._cube_rows],
                "success": bool(success), "success_any": bool(self.success_any or success),
                "knocked_over": bool(success and self.knocked_over()), "outcome": self.outcome(success),
                "sim": SimHandle(self.model, d, self.params)}

    def render(self):
        """``rgb_array``: the first camera's image of the current state (None without cameras)."""
        if self.render_mode != "rgb_array" or self.data is None:
            return None
        cams = self.cameras or tuple(self.config.scene.cameras)
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)
        return self.renderer().render(self.data, cams[0], rgb=True, depth=False, labels=False)["rgb"]

    def close(self) -> None:
        if self._renderer is not None and self._own_renderer:
            self._renderer.close()
        self._renderer = None
