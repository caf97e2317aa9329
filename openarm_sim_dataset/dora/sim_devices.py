"""Simulated stand-ins for the hardware nodes of a data-collection dataflow (:mod:`.sim_nodes`
``follower`` and ``camera``): one arm of the MuJoCo OpenArm as ``dora-openarm``'s follower
(:class:`SimArm`, :func:`follower`), and a scene camera rendered as JPEG from the arms' joint
positions (:class:`SimCamera`, :func:`camera`)."""

from __future__ import annotations

import io
import sys
import time

import numpy as np
import pyarrow as pa
from PIL import Image

from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.core.synthetic import MID_QPOS
from openarm_sim_dataset.sim.models import load_model
from openarm_sim_dataset.sim.render import SimRenderer
from openarm_sim_dataset.sim.scene import SceneConfig, arm_index

from .openarm_messages import BUS, STATUS_STARTED, STATUS_STOPPED, qpos_type, state_type, targets


class SimArm:
    """One arm of the MuJoCo OpenArm driven by its position servos, stepped to the wall clock."""

    MAX_CATCH_UP_S = 0.05

    def __init__(self, side: str):
        self.mujoco = import_mujoco()
        self.model = load_model(SceneConfig(cameras=()))
        self.data = self.mujoco.MjData(self.model)
        self.mujoco.mj_forward(self.model, self.data)
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
        set_targets(self.model, self.data, self.arm, q)

    def state(self) -> dict:
        return arm_state(self.data, self.arm)


def set_targets(model, data, arm, q: np.ndarray) -> None:
    """The arm's 8 servo targets (rad), clipped to its actuators' control range."""
    lo, hi = model.actuator_ctrlrange[arm.actuators].T
    data.ctrl[arm.actuators] = np.clip(q, lo, hi)


def arm_state(data, arm) -> dict:
    """One arm's ``state`` message fields (dora-openarm's): qpos/qvel/qtorque float32, fixed temperatures,
    motor status and bus counters."""
    return {"qpos": data.qpos[arm.qpos].astype(np.float32), "qvel": data.qvel[arm.qvel].astype(np.float32),
            "qtorque": data.actuator_force[arm.actuators].astype(np.float32),
            "tmos": [35] * 8, "trotor": [40] * 8, "motor_status": ["OK"] * 8, "bus": dict(BUS)}


def follower(node, side: str, arm: SimArm | None = None) -> None:
    """The follower's event loop; ``arm``: one built before ``node`` was (see :mod:`.sim_nodes`)."""
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


class SimCamera:
    """One scene camera rendered as JPEG from the arms' joint positions (the generator's model and
    renderer); built, and one frame rendered, before ``Node()`` (EGL set-up, shader compilation)."""

    def __init__(self, name: str, width: int, height: int, quality: int = 80, view: str | None = None,
                 replay: int = 0):
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
    """The camera's event loop (see :mod:`.sim_nodes`) over ``cam``, built before ``node`` was (its
    builder closes it)."""
    inputs = set((node.node_config() or {}).get("inputs") or {})
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
