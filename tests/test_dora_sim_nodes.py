"""The simulated dora nodes (openarm_sim_dataset.dora.sim_nodes) driven by dora.testing.MockNode, and
the recording node's start-up: everything a node loads lazily is loaded before the dataflow starts.

Why these matter in a live dataflow (tests/test_dora_live.py, CI): dora 1.1.0 feeds all of a node's
inputs through one ingress channel sized from the sum of their queue sizes, so a node that falls
behind drops any input, its own timer ticks and the UI's commands included. A camera fed every
follower state (500 events/s) went silent for over a second on a loaded machine, and the recorder's
first struct sample imported pandas (0.7 s) while the first episode's inputs were dropped."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

pa = pytest.importorskip("pyarrow")
pytest.importorskip("dora")
from dora.testing import MockNode  # noqa: E402

from openarm_sim_dataset.synthetic import MID_QPOS  # noqa: E402


def _position(side: str, delta: float = 0.0):
    from openarm_sim_dataset.dora import openarm_messages

    q = (MID_QPOS[side] + delta).astype(np.float32)
    return pa.array([{"qpos": q}], type=openarm_messages.qpos_type())


@pytest.fixture(scope="module")
def sim_camera():
    pytest.importorskip("mujoco")
    from openarm_sim_dataset.dora import sim_devices

    cam = sim_devices.SimCamera("head", 64, 48)
    yield cam
    cam.close()


def _run_camera(cam, events, inputs):
    from openarm_sim_dataset.dora import sim_devices

    node = MockNode(events, node_config={"inputs": {i: "x/y" for i in inputs}})
    sim_devices.camera(node, cam)
    return node


@pytest.mark.slow  # a renderer (EGL/OSMesa): ~2.5 s
def test_camera_requests_the_pose_at_its_rate_and_renders_once_both_arms_answered(sim_camera):
    ev = [("tick", pa.array([0])),
          ("position_right", _position("right")),
          ("position_left", _position("left")),          # both answered: a frame
          ("tick", pa.array([1])),
          ("position_right", _position("right", 0.3)),   # the left answer is lost ...
          ("tick", pa.array([2])),                       # ... a frame at this tick, newest pose
          ("position_left", _position("left")),
          ("position_right", _position("right", 0.3))]   # this tick's request answered: a frame
    node = _run_camera(sim_camera, ev, ["tick", "position_right", "position_left"])
    assert len(node.outputs["request_position"]) == 3
    images = node.outputs["image"]
    assert len(images) == 3
    decoded = [Image.open(io.BytesIO(bytes(a.to_numpy()))) for a in images]
    assert {im.size for im in decoded} == {(64, 48)} and {im.format for im in decoded} == {"JPEG"}
    # the frame shows the pose the followers reported: a moved arm changes it, the same pose does not
    assert images[0] != images[1] and images[1].equals(images[2])


@pytest.mark.slow
def test_camera_fed_follower_states_renders_at_every_tick(sim_camera):
    from openarm_sim_dataset.dora import openarm_messages

    state = pa.array([{
        "qpos": MID_QPOS["right"].astype(np.float32), "qvel": np.zeros(8, np.float32),
        "qtorque": np.zeros(8, np.float32), "tmos": [35] * 8, "trotor": [40] * 8, "motor_status": ["OK"] * 8,
        "bus": dict(openarm_messages.BUS)}], type=openarm_messages.state_type())
    ev = [("state_right", state), ("tick", pa.array([0])), ("state_right", state), ("tick", pa.array([1]))]
    node = _run_camera(sim_camera, ev, ["tick", "state_right", "state_left"])
    assert "request_position" not in node.outputs
    assert len(node.outputs["image"]) == 2


def test_follower_answers_each_request_with_the_dora_openarm_types():
    pytest.importorskip("mujoco")
    from openarm_sim_dataset.dora import openarm_messages, sim_devices

    target = _position("right", 0.05)
    ev = [("request_state", pa.array([0])), ("move_position", target), ("request_position", pa.array([True])),
          ("request_state", pa.array([1])), {"type": "INPUT_CLOSED", "id": "move_position"}]
    node = MockNode(ev)
    sim_devices.follower(node, "right")
    states, positions = node.outputs["state"], node.outputs["position"]
    assert len(states) == 2 and len(positions) == 1
    assert states[0].type == openarm_messages.state_type() and positions[0].type == openarm_messages.qpos_type()
    assert len(states[0].field("qpos")[0].values) == 8
    assert node.outputs["status"][0].to_pylist() == ["STARTED"]


def test_the_recorder_loads_nothing_while_the_first_episode_is_recorded(tmp_path):
    """In a subprocess (a fresh interpreter): after RecorderNode is built (what happens before
    ``Node()``), handling a start, struct and flat arm messages, a JPEG and the save imports no module."""
    script = textwrap.dedent(f"""
        import sys, numpy as np, pyarrow as pa
        from openarm_sim_dataset.dora import recorder_node as rn
        meta = rn.build_metadata(None, ["arm_right_observation", "arm_right_action", "camera_head"])
        node = rn.RecorderNode({str(tmp_path / "ds")!r}, meta, log=lambda level, msg: None, stale_after_s=None)
        before = set(sys.modules)
        st = pa.struct([("qpos", pa.list_(pa.float32())), ("qvel", pa.list_(pa.float32())),
                        ("tmos", pa.list_(pa.int32()))])
        z = np.zeros(8, np.float32)
        node.handle({{"type": "INPUT", "id": "command", "value": pa.array(["start"]), "metadata": {{"episode_number": 0}}}})
        for k in range(3):
            t = 1_772_000_000_000_000_000 + k * 4_000_000
            node.handle({{"type": "INPUT", "id": "arm_right_observation", "metadata": {{"observation_timestamp": t}},
                         "value": pa.array([{{"qpos": z + k, "qvel": z, "tmos": [1] * 8}}], type=st)}})
            node.handle({{"type": "INPUT", "id": "arm_right_action", "metadata": {{"timestamp": t}},
                         "value": pa.array(z + k)}})
            node.handle({{"type": "INPUT", "id": "camera_head", "metadata": {{"timestamp": t, "encoding": "jpeg"}},
                         "value": pa.array(np.frombuffer(b"\\xff\\xd8" + bytes([k]) * 64 + b"\\xff\\xd9", np.uint8))}})
        new = sorted(set(sys.modules) - before)
        assert node.counts == {{"stored": 9, "dropped": 0, "skipped": 0}}, node.counts
        node.close()
        print("NEW", new)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "NEW []" in p.stdout, p.stdout
