"""Simulated dora nodes on this package's MuJoCo OpenArm, for running a data-collection dataflow on a CPU.

``follower`` (``python -m openarm_sim_dataset.dora.sim_nodes follower --side right``): the ids and
Arrow types of ``dora-openarm`` 1.3.0's follower. Inputs ``request_state`` / ``request_position``
(one reply per request), ``move_position`` (``[{"qpos": [8 x float32]}]`` or a flat float32 array:
the 8 position targets, joint1..7 then gripper, rad), ``command`` (``start``/``stop``). Outputs
``state`` (a length-1 struct: qpos, qvel, qtorque list<float32> of 8, tmos/trotor list<int32>,
motor_status list<string>, bus counters), ``position`` (``[{"qpos": ...}]``) and ``status``
(``STARTED``/``STOPPED``), with metadata ``observation_timestamp`` (Unix ns, taken when the state
is read) and ``start_epoch``. The arm is the generator's model (position servos with gravity
compensation, the scene's timestep): each request advances the physics to the wall clock, so the
simulation runs in real time (capped at 50 ms per request when the machine falls behind).

``arms`` (``... arms --hz 250``): **one** simulation of both arms that this node owns, so that it
records each episode's sidecar. It takes the per-arm ids with a side suffix: inputs ``tick`` (the
state timer: each tick samples both arms, then integrates one state period; the simulation is locked
to the wall clock), ``request_position``, ``move_position_{right,left}``, ``command``
(``start``/``success``/``fail``/``cancel``/``quit`` with ``episode_number``, the UI's); outputs
``state_{right,left}``, ``action_{right,left}`` (the targets the servos track during that period,
float32 x 8), ``position_{right,left}``, ``status``, all stamped ``observation_timestamp`` = the
simulated time of the sample as Unix ns (the episode's start + step x timestep, exactly), and
``sim_file``: at ``success``/``fail`` the episode's ``sim/sidecar.npz`` and ``sim/frames.npz`` (UInt8,
metadata ``episode_number``, ``path``, ``files``, ``simulation``: the JSON of the dataset's
``simulation:`` block, ``source: dataflow``). Wire ``sim_file`` to the recording node's ``sim_file``
and the states and actions to its ``arm_*`` inputs: the episodes then replay bit for bit and the
validator checks the recorded streams against the physics (``sim_replay``, ``sim_streams_agree``).

``camera`` (``... camera --name head``): renders the scene's camera ``name`` on every ``tick`` as
JPEG (UInt8, metadata ``encoding``/``width``/``height``), the arms posed as the followers report
them. Wired as the follower's API intends, it asks for the pose at its own rate: output
``request_position`` (to the followers' ``request_position``), inputs ``position_{right,left}``
(their ``position`` replies); the frame is rendered once every side has answered that tick's
request (or at the next tick, with the newest pose, if an answer was lost). It also takes the
followers' ``state`` as ``state_{right,left}`` (then it renders at the tick with the newest state);
that costs the camera one event per state (500/s for two arms at 250 Hz) where the request costs
one per frame and side, and with dora 1.1.0's ingress channel (sized from the sum of the node's
input queue sizes, shared by every input) a busy camera then drops its own ticks.
With ``--replay-frames K`` it renders K frames of the arms in motion before ``Node()`` and sends
them in turn at every tick (``--view``: the model's camera that renders them, when ``--name`` is
not one): the load a hardware JPEG camera puts on a recorder, at sizes and rates a CPU could not
render live beside the followers.

``leader`` (``... leader --seconds 1 --episodes 2``): a scripted stand-in for a leader and the web
UI: on every ``tick`` it sends ``move_position_{right,left}`` (a slow sine about a resting pose) and
``action_{right,left}`` (the same targets, what a recorder records as actions), and ``command``
(``start`` with ``episode_number``/``task_index``, ``success`` after ``--seconds``, ..., ``quit``).

Every node loads its model (and the camera its renderer, with one warm-up frame) **before** it calls
``dora.Node()``: dora starts the dataflow's timers once every node has, so the nodes' start-up (a
second or more of CPU on a 2-core machine) is over when the first tick comes, instead of starving
the nodes that already run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time

import numpy as np

STATUS_STARTED, STATUS_STOPPED = "STARTED", "STOPPED"


def _pa():
    import pyarrow as pa

    return pa


def state_type():
    pa = _pa()
    bus = pa.struct([("carrier", pa.bool_()), ("bus_off", pa.int64()), ("error_passive", pa.int64()),
                     ("error_warning", pa.int64()), ("ack_error", pa.int64()), ("tx_overflow", pa.int64()),
                     ("rx_overflow", pa.int64()), ("net_down", pa.int64())])
    return pa.struct([("qpos", pa.list_(pa.float32())), ("qvel", pa.list_(pa.float32())),
                      ("qtorque", pa.list_(pa.float32())), ("tmos", pa.list_(pa.int32())),
                      ("trotor", pa.list_(pa.int32())), ("motor_status", pa.list_(pa.string())), ("bus", bus)])


def qpos_type():
    pa = _pa()
    return pa.struct([("qpos", pa.list_(pa.float32()))])


_BUS = {"carrier": True, "bus_off": 0, "error_passive": 0, "error_warning": 0, "ack_error": 0,
        "tx_overflow": 0, "rx_overflow": 0, "net_down": 0}


def targets(value) -> np.ndarray:
    """The 8 targets of a ``move_position`` message (struct with qpos, or a flat array)."""
    pa = _pa()
    if isinstance(value, pa.StructArray):
        value = value.field("qpos")[0].values
    v = np.asarray(value.to_numpy(zero_copy_only=False) if hasattr(value, "to_numpy") else value, dtype=np.float64)
    if v.shape != (8,) or not np.all(np.isfinite(v)):
        raise ValueError(f"move_position: expected 8 finite targets, got shape {v.shape}")
    return v


class SimArm:
    """One arm of the MuJoCo OpenArm driven by its position servos, stepped to the wall clock."""

    MAX_CATCH_UP_S = 0.05

    def __init__(self, side: str):
        from ..gl import import_mujoco
        from ..sim.models import load_model
        from ..sim.scene import SceneConfig, arm_index

        self.mujoco = import_mujoco()
        self.model = load_model(SceneConfig(cameras=()))
        self.data = self.mujoco.MjData(self.model)
        self.mujoco.mj_forward(self.model, self.data)
        from ..synthetic import MID_QPOS

        self.arm = arm_index(self.model, side)
        # start at rest inside the OpenArm joint limits (the model's zero pose is not), servos holding it
        self.data.qpos[self.arm.qpos] = MID_QPOS[side]
        self.data.ctrl[self.arm.actuators] = MID_QPOS[side]
        self.mujoco.mj_forward(self.model, self.data)
        self.t_wall = time.perf_counter()

    def advance(self) -> None:
        now = time.perf_counter()
        steps = int(min(now - self.t_wall, self.MAX_CATCH_UP_S) / self.model.opt.timestep)
        for _ in range(steps):
            self.mujoco.mj_step(self.model, self.data)
        self.t_wall = now if steps else self.t_wall

    def move(self, q: np.ndarray) -> None:
        _set_targets(self.model, self.data, self.arm, q)

    def state(self) -> dict:
        return _arm_state(self.data, self.arm)


def _set_targets(model, data, arm, q: np.ndarray) -> None:
    """The arm's 8 servo targets (rad), clipped to its actuators' control range."""
    lo, hi = model.actuator_ctrlrange[arm.actuators].T
    data.ctrl[arm.actuators] = np.clip(q, lo, hi)


def _arm_state(data, arm) -> dict:
    """One arm's ``state`` message fields (dora-openarm's): qpos/qvel/qtorque float32, fixed temperatures,
    motor status and bus counters."""
    return {"qpos": data.qpos[arm.qpos].astype(np.float32), "qvel": data.qvel[arm.qvel].astype(np.float32),
            "qtorque": data.actuator_force[arm.actuators].astype(np.float32),
            "tmos": [35] * 8, "trotor": [40] * 8, "motor_status": ["OK"] * 8, "bus": dict(_BUS)}


def follower(node, side: str, arm: SimArm | None = None) -> None:
    """The follower's event loop; ``arm``: one built before ``node`` was (see the module doc)."""
    pa = _pa()
    arm = arm if arm is not None else SimArm(side)
    arm.t_wall = time.perf_counter()  # the physics starts with the dataflow, not at model load
    epoch = 1
    st_type, q_type = state_type(), qpos_type()
    node.send_output("status", pa.array([STATUS_STARTED]), {"start_epoch": epoch})
    for event in node:
        if event["type"] == "INPUT_CLOSED" and event["id"] == "move_position":
            break  # the leader is gone: end (the timer alone would keep the node alive)
        if event["type"] != "INPUT":
            continue
        eid = event["id"]
        try:
            if eid in ("request_state", "request_position"):
                arm.advance()
                s = arm.state()
                md = {"observation_timestamp": time.time_ns(), "start_epoch": epoch}
                if eid == "request_state":
                    node.send_output("state", pa.array([s], type=st_type), md)
                else:
                    node.send_output("position", pa.array([{"qpos": s["qpos"]}], type=q_type), md)
            elif eid == "move_position":
                arm.advance()
                arm.move(targets(event["value"]))
            elif eid == "command":
                c = event["value"][0].as_py()
                if c == "start":
                    epoch += 1
                node.send_output("status", pa.array([STATUS_STARTED if c == "start" else STATUS_STOPPED]),
                                 {"start_epoch": epoch})
        except (ValueError, TypeError, IndexError) as e:
            print(f"[warn] follower {side}: {eid}: {e}", file=sys.stderr, flush=True)


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
        from ..gl import import_mujoco
        from ..sim.models import load_model
        from ..sim.recorder import RecordConfig
        from ..sim.scene import SceneConfig, arm_index
        from ..synthetic import MID_QPOS

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
        _set_targets(self.model, self.data, self.arms[side], q)

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
        return _arm_state(self.data, self.arms[side])

    def begin(self, number: int) -> None:
        """Start recording episode ``number`` at the current state (a state-period boundary)."""
        from ..sim.recorder import StepRecorder

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
        from ..sim.tasks.planner import EpisodeResult

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
            from ..sim.generate import dataflow_simulation_block

            self._block = dataflow_simulation_block(self.scene, self.record)
        return self._block


def arms(node, sim: SimArms) -> None:
    """The event loop of one simulation node for both arms (see the module doc)."""
    pa = _pa()
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


class SimCamera:
    """One scene camera rendered as JPEG from the arms' joint positions (the generator's model and
    renderer); built, and one frame rendered, before ``Node()`` (EGL set-up, shader compilation)."""

    def __init__(self, name: str, width: int, height: int, quality: int = 80, view: str | None = None,
                 replay: int = 0):
        from ..gl import import_mujoco
        from ..sim.models import load_model
        from ..sim.render import SimRenderer
        from ..sim.scene import SceneConfig, arm_index
        from ..synthetic import MID_QPOS

        self.mujoco = mujoco = import_mujoco()
        view = view or name  # the model's camera that renders this one's images
        self.name, self.view, self.width, self.height, self.quality = name, view, width, height, quality
        cfg = SceneConfig(cameras=(view,), width=width, height=height, wrist_left=view == "wrist_left")
        self.model = load_model(cfg)
        self.data = mujoco.MjData(self.model)
        self.arms = {s: arm_index(self.model, s) for s in ("right", "left")}
        for side, a in self.arms.items():
            self.data.qpos[a.qpos] = MID_QPOS[side]
        self.renderer = SimRenderer(self.model, cfg)
        self.jpeg()  # the first frame pays the renderer's set-up
        # replay: ``replay`` frames of the arms in motion rendered now and sent in turn at every tick,
        # the load of a hardware JPEG camera (a recorder benchmark at 640x480 x 5 cameras x 30 Hz,
        # which a CPU could not render live beside the followers)
        self.frames: list[bytes] = []
        for k in range(replay):
            for side, a in self.arms.items():
                self.data.qpos[a.qpos] = MID_QPOS[side] + 0.15 * np.sin(2 * np.pi * k / replay + np.arange(8))
            self.frames.append(self.jpeg())
        self._next = 0

    def pose(self, side: str, qpos) -> None:
        if side in self.arms:
            self.data.qpos[self.arms[side].qpos] = qpos

    def jpeg(self) -> bytes:
        from PIL import Image

        self.mujoco.mj_kinematics(self.model, self.data)
        self.mujoco.mj_camlight(self.model, self.data)
        rgb = self.renderer.render(self.data, self.view, depth=False, labels=False)["rgb"]
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, format="JPEG", quality=self.quality)
        return buf.getvalue()

    def replayed(self) -> bytes:
        frame = self.frames[self._next % len(self.frames)]
        self._next += 1
        return frame

    def close(self) -> None:
        self.renderer.close()


def camera(node, cam: SimCamera) -> None:
    """The camera's event loop (see the module doc) over ``cam``, built before ``node`` was (its
    builder closes it)."""
    pa = _pa()
    inputs = set(((node.node_config() or {}).get("inputs") or {}))
    ask = {i.removeprefix("position_") for i in inputs if i.startswith("position_")} & set(cam.arms)
    pending: set[str] = set()  # sides whose answer to this tick's request has not come

    def send() -> None:
        node.send_output("image", pa.array(np.frombuffer(cam.replayed() if cam.frames else cam.jpeg(), np.uint8)),
                         {"encoding": "jpeg", "width": cam.width, "height": cam.height})

    watched = inputs - {"tick"}  # the node ends once every one of them is closed (the timer never is)
    closed: set[str] = set()
    for event in node:
        if event["type"] == "INPUT_CLOSED" and event["id"] in watched:
            closed.add(event["id"])
            if closed >= watched:
                break  # the followers (or whatever else feeds it) are gone
        if event["type"] != "INPUT":
            continue
        eid = event["id"]
        if eid.startswith(("state_", "position_")):
            side = eid.split("_", 1)[1]
            cam.pose(side, event["value"].field("qpos")[0].values.to_numpy())
            if side in pending:
                pending.discard(side)
                if not pending:
                    send()
        elif eid == "tick":
            if pending:
                send()  # an answer was lost: this tick's frame with the newest pose
                pending = set()
            if ask and not cam.frames:
                pending = set(ask)
                node.send_output("request_position", pa.array([True]))
            else:
                send()


def leader(node, seconds: float, episodes: int, gap: float = 0.3, cancel_first: bool = False,
           warmup: float = 1.0) -> None:
    """Scripted leader + UI: episodes of ``seconds``, ``gap`` s apart; the first cancelled and
    restarted under the same number if ``cancel_first``; then ``quit``. The plan's clock starts
    ``warmup`` s after the first ``tick``: what a human operator waits before pressing start, and what
    lets a timer's first backlog pass."""
    pa = _pa()
    from ..synthetic import MID_QPOS

    q_type = qpos_type()
    plan: list[tuple[float, str, dict]] = []
    t = gap
    number = 0
    if cancel_first:
        plan += [(t, "start", {"episode_number": 0, "task_index": 0}), (t + seconds / 2, "cancel", {})]
        t += seconds / 2 + gap
    for k in range(episodes):
        plan += [(t, "start", {"episode_number": number, "task_index": 0}),
                 (t + seconds, "success" if k % 2 == 0 else "fail", {})]
        number += 1
        t += seconds + gap
    plan.append((t, "quit", {}))
    t0 = None
    i = 0
    for event in node:
        if event["type"] != "INPUT" or event["id"] != "tick":
            continue
        if t0 is None:
            t0 = time.perf_counter() + warmup
        now = time.perf_counter() - t0
        for side in ("right", "left"):
            q = (MID_QPOS[side] + 0.15 * np.sin(2 * np.pi * 0.5 * now + np.arange(8))).astype(np.float32)
            q[7] = MID_QPOS[side][7]
            node.send_output(f"move_position_{side}", pa.array([{"qpos": q}], type=q_type))
            node.send_output(f"action_{side}", pa.array(q, type=pa.float32()))
        while i < len(plan) and plan[i][0] <= now:
            _, c, md = plan[i]
            node.send_output("command", pa.array([c]), md)
            i += 1
        if i == len(plan) and now > plan[-1][0] + 0.5:
            break


def _tick_hz() -> float | None:
    """The rate of this node's ``tick`` timer, from the configuration the dora daemon hands it (None
    outside a dataflow, or when ``tick`` is not a ``dora/timer``)."""
    from .recorder_node import config_from_environment, timer_hz

    config = config_from_environment()
    if config is None:
        return None
    cfg, _ = config
    return timer_hz((cfg.get("inputs") or {}).get("tick"), None)  # a timer wired to it directly


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="openarm-sim-dataset-dora-sim", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="node", required=True)
    f = sub.add_parser("follower")
    f.add_argument("--side", choices=("right", "left"), default=os.getenv("SIDE", "right"))
    a = sub.add_parser("arms", help="one simulation of both arms that records each episode's sidecar")
    a.add_argument("--hz", type=float, default=float(os.getenv("STATE_HZ", "0")) or None,
                   help="the state rate (default: its tick timer's, read from the dataflow; else 250)")
    a.add_argument("--frame-hz", type=float, default=10.0, help="rate of the sidecar's full states")
    c = sub.add_parser("camera")
    c.add_argument("--name", default=os.getenv("CAMERA", "head"))
    c.add_argument("--size", default=os.getenv("SIZE", "160x120"))
    c.add_argument("--quality", type=int, default=80)
    c.add_argument("--view", default=None, help="the model's camera to render (default: --name)")
    c.add_argument("--replay-frames", type=int, default=0,
                   help="render this many frames at start and send them in turn (a JPEG camera's load)")
    ld = sub.add_parser("leader")
    ld.add_argument("--seconds", type=float, default=float(os.getenv("EPISODE_SECONDS", "1.0")))
    ld.add_argument("--episodes", type=int, default=int(os.getenv("EPISODES", "2")))
    ld.add_argument("--cancel-first", action="store_true")
    ld.add_argument("--warmup", type=float, default=float(os.getenv("WARMUP_SECONDS", "1.0")),
                    help="seconds between every node being live and the first command")
    args = ap.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        from dora import Node
    except ImportError:
        print("the simulated dora nodes need dora-rs: pip install 'openarm-sim-dataset[dora]'", file=sys.stderr)
        return 2
    # the heavy set-up first: dora starts the timers once every node has called Node()
    if args.node == "follower":
        arm = SimArm(args.side)
        follower(Node(), args.side, arm)
    elif args.node == "arms":
        sim = SimArms(args.hz or _tick_hz() or 250.0, args.frame_hz)
        sim.simulation_block()  # its model hash and asset hashes computed before Node(), not at an episode's end
        arms(Node(), sim)
    elif args.node == "camera":
        w, h = (int(v) for v in args.size.lower().split("x"))
        cam = SimCamera(args.name, w, h, args.quality, view=args.view, replay=args.replay_frames)
        try:
            camera(Node(), cam)
        finally:
            cam.close()
    else:
        leader(Node(), args.seconds, args.episodes, cancel_first=args.cancel_first, warmup=args.warmup)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
