"""Record one simulated episode into the OpenArm 0.4.0 layout plus the exact-replay sidecar.

Time: physics step ``s`` happens at simulated time ``s * timestep``; its dataset timestamp is
``episode_base_ns(index) + s * timestep_ns`` (integer ns, Unix-epoch magnitude so all frame file
names have the same digit count). Obs/action are sampled every ``timestep * state_hz``-th step,
camera frames every ``camera_hz``-th step, always from the state *before* that step's integration
(the state the control is applied to), after ``mj_kinematics``/``mj_camlight`` so that rendered
poses belong to the stored qpos. Those two calls only recompute derived quantities; the physics
stream stays bit-identical to a replay without them (tested).

Streams per arm (8 values: joint1..7, gripper): obs ``qpos`` (rad; gripper: ``finger_joint1``, a
hinge in rad — right arm: -0.785 open, 0 closed),
``qvel`` (rad/s), ``qtorque`` (actuator force of the physics step that ended at the sample, N·m;
gripper N); action ``qpos``: the position targets the controller commanded (tracked) at that step.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import mujoco
import numpy as np
from PIL import Image

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.sidecar import sim_files  # noqa: F401 - its old home
from openarm_sim_dataset.core.writer import ComponentStreams, EpisodeData

from .pick_place import EpisodeParams, EpisodeResult, run_episode
from .render import SimRenderer
from .scene import CUBE_NAMES, arm_index, cube_qpos_adr

#: Dataset timestamp of episode 0's first step: 2030-03-17 (Unix ns), 20 digits like real data.
SIM_EPOCH_NS = 1_900_000_000 * 10**9
#: Episodes are spaced 1000 s apart on the dataset clock (an episode lasts < 20 s).
EPISODE_SPACING_NS = 1_000 * 10**9


def episode_base_ns(index: int) -> int:
    """Dataset timestamp (ns) of physics step 0 of episode ``index``: a pure function of the index."""
    return SIM_EPOCH_NS + int(index) * EPISODE_SPACING_NS


@dataclass(frozen=True)
class RecordConfig:
    """Recording rates and image encoding. Rates must divide the physics rate exactly."""

    state_hz: float = 250.0
    camera_hz: float = 10.0
    jpeg_quality: int = 90

    def every(self, timestep: float) -> tuple[int, int]:
        """(physics steps per state sample, per camera frame)."""
        out = []
        for name, hz in (("state_hz", self.state_hz), ("camera_hz", self.camera_hz)):
            n = 1.0 / (hz * timestep)
            if not hz > 0 or abs(n - round(n)) > 1e-9 or round(n) < 1:
                raise ValueError(f"{name} {hz:g} does not divide the physics rate {1 / timestep:g} Hz")
            out.append(int(round(n)))
        return out[0], out[1]


@dataclass
class RecordedEpisode:
    """A recorded episode ready for the writer, and the controller's result."""

    data: EpisodeData
    result: EpisodeResult
    sidecar: dict[str, np.ndarray]
    frames: dict[str, np.ndarray]
    variation: dict | None = None
    model_sha256: str | None = None


def encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


class CameraFrames:
    """The camera part of an episode's frames: per camera the pose (``cam_pos``, ``cam_mat``), the JPEG,
    depth and labels of every frame, drawn by :meth:`add` from a ``data`` whose integration state is the
    frame's. The one place both recording paths draw through (:class:`StepRecorder`, live, and
    :mod:`.render_dataset`, from replayed states), so their images cannot differ in how they are made."""

    def __init__(self, model: mujoco.MjModel, renderer: SimRenderer | None, cameras, quality: int) -> None:
        self.model, self.renderer, self.cameras, self.quality = model, renderer, tuple(cameras), int(quality)
        self.pos = {c: [] for c in self.cameras}
        self.mat = {c: [] for c in self.cameras}
        self.jpegs = {c: [] for c in self.cameras}
        self.depth = {c: [] for c in self.cameras}
        self.labels = {c: [] for c in self.cameras}

    def add(self, data: mujoco.MjData) -> None:
        """Draw every camera for ``data``'s state: ``mj_kinematics`` and ``mj_camlight`` first (derived
        quantities only: the physics is untouched), so poses and pixels belong to the stored qpos."""
        mujoco.mj_kinematics(self.model, data)
        mujoco.mj_camlight(self.model, data)
        r = self.renderer
        for c in self.cameras:
            self.pos[c].append(r.cam_pos(data, c))
            self.mat[c].append(r.cam_mat(data, c))
            img = r.render(data, c)
            self.jpegs[c].append(encode_jpeg(img["rgb"], self.quality))
            self.depth[c].append(img["depth"])
            self.labels[c].append(img["labels"])

    def streams(self, ts_frame: np.ndarray) -> dict[str, list[tuple[int, bytes]]]:
        """``{camera: [(timestamp ns, jpeg bytes), ...]}`` for :class:`EpisodeData.cameras`."""
        return {c: list(zip(ts_frame.tolist(), self.jpegs[c])) for c in self.cameras}


def episode_arrays(initial_state, physics_ctrl, steps: np.ndarray, dt: float, ts_frame: np.ndarray, state, qpos, qvel,
                   object_pose, frames: CameraFrames, variation=None, model_sha256: str | None = None,
                   identity: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(sidecar arrays, frames arrays)`` of an episode, keys in the order they are written (the npz
    bytes depend on it): see :mod:`openarm_sim_dataset.sidecar`. ``steps``: physics step of each frame;
    ``frames``: the camera part (none for a physics-only episode: no ``cam_*`` array, an empty
    frames.npz). ``identity``: the episode's identity and judge arrays (``sidecar.EPISODE_KEY``,
    ``sidecar.JUDGE_KEY``, schema 2), written after the camera poses."""
    side_arrays = {
        "initial_state": np.asarray(initial_state, np.float64),
        "physics_ctrl": np.asarray(physics_ctrl, np.float64),
        "step": np.asarray(steps, np.float64),
        "time": np.asarray(steps, np.float64) * dt,
        "frame_timestamp": np.asarray(ts_frame, np.int64),
        "state": state,
        "qpos": qpos,
        "qvel": qvel,
        "object_pose": object_pose,
    }
    for c in frames.cameras:
        side_arrays[f"cam_pos_{c}"] = np.asarray(frames.pos[c], np.float64)
        side_arrays[f"cam_mat_{c}"] = np.asarray(frames.mat[c], np.float64)
    side_arrays.update(identity or {})
    if variation is not None:
        side_arrays[sidecar.VARIATION_KEY] = sidecar.text_array(variation.key())
        side_arrays[sidecar.MODEL_SHA256_KEY] = sidecar.text_array(str(model_sha256))
    frame_arrays = {}
    for c in frames.cameras:
        frame_arrays[f"depth_{c}"] = np.asarray(frames.depth[c], np.float32)
        frame_arrays[f"labels_{c}"] = np.asarray(frames.labels[c], np.uint8)
    return side_arrays, frame_arrays


class StepRecorder:
    """Collects one episode's streams, camera frames and sidecar arrays from a physics loop.

    Call :meth:`on_step` with ``(data, s, ctrl)`` before each ``mj_step`` (``data.ctrl`` already set
    to ``ctrl``; ``data.time == s * timestep``) and once more after the final step (``s`` = number of
    steps, ``ctrl`` = the last control), the hook contract of :func:`~.tasks.run_episode`; then
    :meth:`finish`. Any loop that steps the physics (the scripted generator, an environment driven by
    a policy) records through this one class, so their outputs cannot differ in form.

    ``renderer`` None (and no ``cameras``): physics only, as ``dataset-generate --cameras none``: the
    per-frame states are still taken every ``camera_hz`` frame, nothing is drawn and no ``cam_*`` array
    is written (``dataset-render`` draws the cameras later, :mod:`.render_dataset`).

    ``base_ns``: the dataset timestamp of the episode's step 0 (default ``episode_base_ns(index)``; a
    simulation run live in a dataflow maps it to the wall clock at the episode's start)."""

    def __init__(self, model: mujoco.MjModel, renderer: SimRenderer | None, index: int,
                 rec: RecordConfig = RecordConfig(), cameras: tuple[str, ...] | None = None,
                 base_ns: int | None = None) -> None:
        self.model = model
        self.renderer = renderer
        if renderer is not None:
            renderer.use_model(model)
        self.rec = rec
        self.dt = float(model.opt.timestep)
        self.dt_ns = int(round(self.dt * 1e9))
        self.state_every, self.cam_every = rec.every(self.dt)
        self.index = int(index)
        self.base = episode_base_ns(index) if base_ns is None else int(base_ns)  # dataset stamp of step 0
        self.arms = {side: arm_index(model, side) for side in layout.ARM_SIDES}
        self.cube_adr = [cube_qpos_adr(model, name)[0] for name in CUBE_NAMES]
        self.cameras = list(renderer.cameras if cameras is None and renderer is not None else (cameras or ()))
        self.nstate = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION)
        self.ctrl_log: list[np.ndarray] = []
        self.state_steps: list[int] = []
        self.obs = {side: {"qpos": [], "qvel": [], "qtorque": []} for side in layout.ARM_SIDES}
        self.act = {side: [] for side in layout.ARM_SIDES}
        self.f_step, self.f_state, self.f_qpos, self.f_qvel, self.f_obj = [], [], [], [], []
        self.frames = CameraFrames(model, renderer, self.cameras, rec.jpeg_quality) if self.cameras else None

    def on_step(self, data: mujoco.MjData, s: int, ctrl: np.ndarray) -> None:
        model = self.model
        self.ctrl_log.append(ctrl)
        if s % self.state_every == 0:
            self.state_steps.append(s)
            for side, a in self.arms.items():
                o = self.obs[side]
                o["qpos"].append(data.qpos[a.qpos])
                o["qvel"].append(data.qvel[a.qvel])
                o["qtorque"].append(data.actuator_force[a.actuators])
                self.act[side].append(ctrl[a.actuators])
        if s % self.cam_every == 0:
            st = np.empty(self.nstate)
            mujoco.mj_getState(model, data, st, mujoco.mjtState.mjSTATE_INTEGRATION)
            self.f_step.append(s)
            self.f_state.append(st)
            self.f_qpos.append(data.qpos.copy())
            self.f_qvel.append(data.qvel.copy())
            self.f_obj.append(np.stack([data.qpos[a:a + 7] for a in self.cube_adr]))
            if self.cameras:  # physics-only (no camera): nothing derived is needed, nothing is drawn
                self.frames.add(data)

    def finish(self, result: EpisodeResult, variation=None, model_sha256: str | None = None,
               params: EpisodeParams | None = None) -> RecordedEpisode:
        """The recorded episode of ``result`` (``result.steps`` physics steps from ``result.initial_state``).

        ``params``: the episode's parameters, whose task, arm(s) and seed inputs the sidecar records
        (``episode``, schema 2), with the judge's history facts of ``result`` (``judge``), so that a
        validator can tell the episode's identity and judge it again; a loop without a scripted task
        (e.g. a policy in an environment) passes None and records neither."""
        model = self.model
        steps = result.steps
        # the last on_step call (after the final mj_step) repeats the last control: not a physics step
        physics_ctrl = np.array(self.ctrl_log[:steps], dtype=np.float64).reshape(steps, model.nu)
        ts_state = self.base + np.asarray(self.state_steps, dtype=np.int64) * self.dt_ns
        ts_frame = self.base + np.asarray(self.f_step, dtype=np.int64) * self.dt_ns
        data = EpisodeData()
        for side in layout.ARM_SIDES:
            data.obs[("arms", side)] = ComponentStreams(
                ts_state, {k: np.asarray(v, np.float32) for k, v in self.obs[side].items()})
            data.action[("arms", side)] = ComponentStreams(ts_state, {"qpos": np.asarray(self.act[side], np.float32)})
        frames = self.frames if self.frames is not None else CameraFrames(model, None, (), self.rec.jpeg_quality)
        identity = {}
        if params is not None:
            seed_inputs = {"seed": int(params.meta.get("seed", 0)), "index": int(params.meta.get("index", self.index))}
            identity[sidecar.EPISODE_KEY] = sidecar.json_array(
                {"task": params.task, "arms": params.side, "seed_inputs": seed_inputs})
            if result.judge_facts:
                identity[sidecar.JUDGE_KEY] = sidecar.json_array(result.judge_facts)
        side_arrays, frame_arrays = episode_arrays(
            result.initial_state, physics_ctrl, np.asarray(self.f_step, np.int64), self.dt, ts_frame,
            np.asarray(self.f_state, np.float64).reshape(-1, self.nstate), np.asarray(self.f_qpos, np.float64),
            np.asarray(self.f_qvel, np.float64), np.asarray(self.f_obj, np.float64).reshape(-1, len(self.cube_adr), 7),
            frames, variation, model_sha256, identity)
        data.cameras.update(frames.streams(ts_frame))
        data.files.update(sidecar.sim_files(side_arrays, frame_arrays))
        return RecordedEpisode(data, result, side_arrays, frame_arrays,
                               None if variation is None else variation.to_dict(), model_sha256 if variation else None)


def record_episode(model: mujoco.MjModel, renderer: SimRenderer, params: EpisodeParams, index: int,
                   rec: RecordConfig = RecordConfig(), max_time: float = 12.0, variation=None,
                   model_sha256: str | None = None) -> RecordedEpisode:
    """Run the scripted episode ``params`` and record every stream (see module doc).

    ``variation``: the :class:`~openarm_sim_dataset.sim.variation.Variation` ``model`` was built with
    and ``model_sha256`` its hash, recorded in the sidecar (nothing is added for the nominal scene).
    ``renderer`` is switched to ``model`` (:meth:`SimRenderer.use_model`)."""
    recorder = StepRecorder(model, renderer, index, rec)
    result = run_episode(model, params, on_step=recorder.on_step, max_time=max_time)
    return recorder.finish(result, variation, model_sha256, params)
