"""One simulation of both arms of the MuJoCo OpenArm that the node owns and records (:mod:`.sim_nodes`
``arms``): :class:`SimArms`, locked to the wall clock and recording each episode's sidecar, and its
event loop :func:`arms`."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pyarrow as pa

from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.core.synthetic import MID_QPOS
from openarm_sim_dataset.sim.episode_recorder import RecordConfig, StepRecorder
from openarm_sim_dataset.sim.generate import dataflow_simulation_block
from openarm_sim_dataset.sim.models import load_model
from openarm_sim_dataset.sim.scene import SceneConfig, arm_index
from openarm_sim_dataset.sim.tasks.planner import EpisodeResult

from .dataflow_config import config_from_environment, timer_hz
from .openarm_messages import STATUS_STARTED, STATUS_STOPPED, qpos_type, state_type, targets
from .sim_devices import arm_state, set_targets


class SimArms:
    """Both arms of the MuJoCo OpenArm in **one** simulation that this node owns, advanced a state
    period (``state_hz``) per :meth:`tick` and locked to the wall clock (a late tick catches up, at
    most ``MAX_CATCH_UP_S``), so every sample is stamped exactly ``start + step * timestep`` (Unix ns).
    Between :meth:`begin` and :meth:`end` it records the episode's physics stream through the
    generator's :class:`~openarm_sim_dataset.sim.recorder.StepRecorder` (physics only: every step's
    control, the initial state, a full state every ``1/frame_hz`` s): the episode's sidecar, so that it
    replays bit for bit and its recorded streams can be checked against the physics."""

    MAX_CATCH_UP_S = 0.05

    def __init__(self, state_hz: float = 250.0, frame_hz: float = 10.0):
        self.mujoco = mujoco = import_mujoco()
        self.scene = SceneConfig(cameras=())
        self.model = load_model(self.scene)
        self.data = mujoco.MjData(self.model)
        self.arms = {side: arm_index(self.model, side) for side in ("right", "left")}
        for side, a in self.arms.items():  # at rest inside the joint limits, the servos holding it
            self.data.qpos[a.qpos] = MID_QPOS[side]
            self.data.ctrl[a.actuators] = MID_QPOS[side]
        mujoco.mj_forward(self.model, self.data)
        self.record = RecordConfig(state_hz=state_hz, camera_hz=frame_hz)
        self.dt_ns = int(round(self.model.opt.timestep * 1e9))
        self.period, _ = self.record.every(self.model.opt.timestep)  # physics steps per state sample
        self.steps = 0  # physics steps since the first tick
        self.start_ns: int | None = None  # Unix ns of step 0, taken at the first tick
        self.recorder = None
        self.episode: tuple | None = None  # (episode number, first step, initial state)
        self._block: dict | None = None

    def stamp(self) -> int:
        """Unix ns of the current state (the one the next step integrates)."""
        return self.start_ns + self.steps * self.dt_ns

    def move(self, side: str, q: np.ndarray) -> None:
        set_targets(self.model, self.data, self.arms[side], q)

    def _period(self) -> None:
        m, d, rec = self.model, self.data, self.recorder
        for _ in range(self.period):
            if rec is not None:
                rec.on_step(d, self.steps - self.episode[1], d.ctrl.copy())
            self.mujoco.mj_step(m, d)
            self.steps += 1

    def tick(self, now_ns: int | None = None) -> tuple[int, dict, dict]:
        """``(stamp ns, {side: state}, {side: targets})`` of the state sample this tick takes (before
        the period it then integrates); periods the wall clock says were missed run first, unsampled."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        if self.start_ns is None:
            self.start_ns = now_ns
        behind = (now_ns - self.stamp()) // (self.period * self.dt_ns)
        for _ in range(int(min(behind, self.MAX_CATCH_UP_S * self.record.state_hz))):
            self._period()
        ts = self.stamp()
        states = {side: self.state(side) for side in self.arms}
        targets = {side: self.data.ctrl[a.actuators].astype(np.float32) for side, a in self.arms.items()}
        self._period()
        return ts, states, targets

    def state(self, side: str) -> dict:
        return arm_state(self.data, self.arms[side])

    def begin(self, number: int) -> None:
        """Start recording episode ``number`` at the current state (a state-period boundary)."""
        if self.start_ns is None:
            self.start_ns = time.time_ns()
        self.data.time = 0.0  # an episode's simulated time starts at 0, as a generated one's (nothing here depends on it)
        st = np.empty(self.mujoco.mj_stateSize(self.model, self.mujoco.mjtState.mjSTATE_INTEGRATION))
        self.mujoco.mj_getState(self.model, self.data, st, self.mujoco.mjtState.mjSTATE_INTEGRATION)
        self.episode = (int(number), self.steps, st)
        self.recorder = StepRecorder(self.model, None, int(number), self.record, cameras=(), base_ns=self.stamp())

    def end(self, keep: bool = True) -> tuple[int, dict[str, bytes]] | None:
        """Stop recording: ``(episode number, {relative path: bytes})`` of its ``sim/`` files, or None
        (nothing was being recorded, or ``keep`` False: a cancel)."""
        rec, episode = self.recorder, self.episode
        self.recorder, self.episode = None, None
        if rec is None or not keep:
            return None
        number, first, initial = episode
        steps = self.steps - first
        d = self.data
        # the recorder's last call: the state after the final step, with the control that step applied
        # (a target that came since belongs to the next step, which this episode does not have)
        now, last = d.ctrl.copy(), (rec.ctrl_log[-1] if steps else d.ctrl.copy())
        d.ctrl[:] = last
        rec.on_step(d, steps, last.copy())
        d.ctrl[:] = now
        result = EpisodeResult(outcome="teleoperated", knocked_over=False, success=False, attempts=0, steps=steps,
                               sim_time=steps * float(self.model.opt.timestep), cube_final=np.zeros(7),
                               initial_state=initial, final_qpos=d.qpos.copy(), final_qvel=d.qvel.copy(),
                               estimates=[], phase_log=[])
        return number, dict(rec.finish(result).data.files)

    def simulation_block(self) -> dict:
        """The dataset's ``simulation:`` block (computed once: the model's and the assets' hashes)."""
        if self._block is None:
            self._block = dataflow_simulation_block(self.scene, self.record)
        return self._block


def arms(node, sim: SimArms) -> None:
    """The event loop of one simulation node for both arms (see :mod:`.sim_nodes`)."""
    st_type, q_type = state_type(), qpos_type()
    block = json.dumps(sim.simulation_block(), sort_keys=True)
    epoch = 1
    node.send_output("status", pa.array([STATUS_STARTED]), {"start_epoch": epoch})
    closed: set[str] = set()
    moves = {f"move_position_{s}" for s in sim.arms}
    for event in node:
        if event["type"] == "INPUT_CLOSED" and event["id"] in moves:
            closed.add(event["id"])
            if closed >= moves:
                break  # the leader is gone
        if event["type"] != "INPUT":
            continue
        eid = event["id"]
        try:
            if eid == "tick":
                ts, states, tracked = sim.tick()
                md = {"observation_timestamp": ts, "start_epoch": epoch}
                for side in sim.arms:
                    node.send_output(f"state_{side}", pa.array([states[side]], type=st_type), md)
                    node.send_output(f"action_{side}", pa.array(tracked[side], type=pa.float32()), md)
            elif eid == "request_position":
                md = {"observation_timestamp": sim.stamp(), "start_epoch": epoch}
                for side in sim.arms:
                    node.send_output(f"position_{side}", pa.array([{"qpos": sim.state(side)["qpos"]}], type=q_type), md)
            elif eid in moves:
                sim.move(eid.removeprefix("move_position_"), targets(event["value"]))
            elif eid == "command":
                c = event["value"][0].as_py()
                md = event.get("metadata") or {}
                if c == "start":
                    epoch += 1
                    sim.end(keep=False)  # a start without an end: what was recorded is not an episode
                    sim.begin(int(md.get("episode_number", 0)))
                elif c in ("success", "fail", "quit"):
                    if c != "quit" and sim.episode is None:
                        # dora's node-to-node plane can drop an input silently when the node lags: say so,
                        # or the recorder's "saved with 0 simulation files" has no visible cause
                        print(f"[warn] arms: {c} while no episode is being simulated (its start never came): "
                              "no simulation files for it", file=sys.stderr, flush=True)
                    done = sim.end()
                    if done is not None:
                        number, files = done
                        for path, data in sorted(files.items()):
                            node.send_output("sim_file", pa.array(np.frombuffer(data, np.uint8)),
                                             {"episode_number": number, "path": path, "files": len(files),
                                              "simulation": block})
                elif c == "cancel":
                    sim.end(keep=False)
                node.send_output("status", pa.array([STATUS_STARTED if c == "start" else STATUS_STOPPED]),
                                 {"start_epoch": epoch})
        except (ValueError, TypeError, IndexError) as e:
            print(f"[warn] arms: {eid}: {e}", file=sys.stderr, flush=True)


def tick_hz() -> float | None:
    """The rate of this node's ``tick`` timer, from the configuration the dora daemon hands it (None
    outside a dataflow, or when ``tick`` is not a ``dora/timer``)."""
    config = config_from_environment()
    if config is None:
        return None
    cfg, _ = config
    return timer_hz((cfg.get("inputs") or {}).get("tick"), None)  # a timer wired to it directly
