"""The dora recording node (openarm_sim_dataset.dora.recorder_node) driven by dora.testing.MockNode:
the reference recorder's inputs, episode protocol and output layout; malformed messages logged and
skipped, never a crash; start while recording refused; cancel removes the episode and frees its id;
an episode interrupted by a SIGKILL is removed at the next start and its id is used again."""

from __future__ import annotations

import datetime
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

pa = pytest.importorskip("pyarrow")
pytest.importorskip("dora")
from dora.testing import MockNode  # noqa: E402

from openarm_sim_dataset import Dataset  # noqa: E402
from openarm_sim_dataset.dora import recorder_node as rn  # noqa: E402
from openarm_sim_dataset.synthetic import MID_QPOS  # noqa: E402
from openarm_sim_dataset.validate.core import validate  # noqa: E402

T0 = 1_772_000_000_000_000_000
STATE = pa.struct([("qpos", pa.list_(pa.float32())), ("qvel", pa.list_(pa.float32())),
                   ("qtorque", pa.list_(pa.float32())), ("tmos", pa.list_(pa.int32()))])
QPOS = pa.struct([("qpos", pa.list_(pa.float32()))])
INPUTS = ["command", "arm_right_observation", "arm_right_action", "arm_left_observation", "arm_left_action",
          "camera_head", "ker_metadata"]
DESCRIPTOR = {"nodes": [
    {"id": "leader", "inputs": {"tick": "dora/timer/millis/4"}},
    {"id": "right", "inputs": {"request_state": "leader/tick"}},
    {"id": "left", "inputs": {"request_state": "leader/tick"}},
    {"id": "head", "inputs": {"tick": "dora/timer/millis/40"}},
    {"id": "recorder", "inputs": {}}]}
CONFIG = {"inputs": {"command": "ui/command", "arm_right_observation": "right/state",
                     "arm_right_action": "leader/right", "arm_left_observation": "left/state",
                     "arm_left_action": "leader/left", "camera_head": "head/image", "ker_metadata": "leader/ker"}}


def jpeg(k: int) -> bytes:
    img = np.random.default_rng(k).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=70)
    return buf.getvalue()


def dt(ns: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ns // 1000 / 1e6, tz=datetime.timezone.utc)


def cmd(c: str, **md) -> dict:
    return {"type": "INPUT", "id": "command", "value": pa.array([c]), "metadata": md}


def q(side: str, i: int) -> list[float]:
    return list((MID_QPOS[side] + 0.2 * np.sin(i * 0.01 + np.arange(8))).astype(np.float32))


def samples(start_ns: int, ticks: int, frame_every: int = 10, k0: int = 0) -> list[dict]:
    """250 Hz arm states (struct with qpos/qvel/qtorque and an extra int field, stamped by
    observation_timestamp) and actions (flat float32, dora's timestamp), a JPEG every 40 ms."""
    ev = []
    for i in range(ticks):
        t = start_ns + i * 4_000_000
        for side in ("right", "left"):
            v = q(side, i)
            state = pa.array([{"qpos": v, "qvel": v, "qtorque": v, "tmos": [30] * 8}], type=STATE)
            ev.append({"type": "INPUT", "id": f"arm_{side}_observation", "value": state,
                       "metadata": {"observation_timestamp": t, "timestamp": dt(t + 500_000)}})
            ev.append({"type": "INPUT", "id": f"arm_{side}_action", "value": pa.array(v, type=pa.float32()),
                       "metadata": {"timestamp": dt(t)}})
        if i % frame_every == 0:
            ev.append({"type": "INPUT", "id": "camera_head", "value": pa.array(np.frombuffer(jpeg(k0 + i), np.uint8)),
                       "metadata": {"encoding": "jpeg", "width": 32, "height": 24, "timestamp": dt(t + 1000)}})
    return ev


def run_node(tmp_path, events, metadata_file=None, **env) -> tuple[MockNode, int]:
    node = MockNode(events, dataflow_descriptor=DESCRIPTOR, node_config=CONFIG)
    args = rn.options(["--directory", str(tmp_path), "--name", "ds",
                       *(["--metadata-file", str(metadata_file)] if metadata_file else [])])
    code = rn.run(node, args)
    return node, code


def logs(node, level=None) -> list[str]:
    return [e["message"] for e in node.logs if level is None or e["level"] == level]


def metadata_file(tmp_path) -> Path:
    p = tmp_path / "metadata.yaml"
    p.write_text(yaml.safe_dump({"location": "lab", "operator": "test",
                                 "tasks": [{"prompt": "Wave.", "description": "Wave both arms."},
                                           {"prompt": "Rest.", "description": "Hold still."}],
                                 "equipment": {"id": "OpenArm", "version": "2",
                                               "embodiments": {"arms": {"id": "OpenArm", "version": "2.0"}},
                                               "perceptions": {"cameras": {"head": {"width": 32, "height": 24}}}}}))
    return p


def test_protocol_start_success_fail_cancel_quit_writes_the_reference_layout(tmp_path):
    mf = metadata_file(tmp_path)
    ker = {"type": "INPUT", "id": "ker_metadata", "value": pa.array([json.dumps({"fw": "1.2", "hw": "B"})]),
           "metadata": {}}
    events = [ker, *samples(T0 - 10**9, 5),  # samples before any start: ignored
              cmd("start", episode_number=0, task_index=1), *samples(T0, 100), cmd("success"),
              cmd("start", episode_number=1), *samples(T0 + 10**10, 100), cmd("fail"),
              cmd("start", episode_number=2), *samples(T0 + 2 * 10**10, 50), cmd("cancel"),
              cmd("start", episode_number=2), *samples(T0 + 3 * 10**10, 100), cmd("success"),
              cmd("start", episode_number=3), *samples(T0 + 4 * 10**10, 100), cmd("quit"),
              cmd("start", episode_number=9)]  # after quit: never read
    node, code = run_node(tmp_path, events, mf)
    assert code == 0 and not logs(node, "error") and not logs(node, "warn"), node.logs
    out = tmp_path / "ds"
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert [(e["id"], e["success"], e["task_index"]) for e in meta["episodes"]] == \
        [("0", True, 1), ("1", False, 0), ("2", True, 0), ("3", False, 0)]
    assert "discarded_episodes" not in meta  # cancel frees the id, as the reference's rmtree does
    assert meta["equipment"]["leader"]["ker"] == {"id": "OpenArmKER", "firmware_version": "1.2", "hardware_version": "B"}
    assert meta["operation_type"] == "teleop"
    assert meta["frequencies"]["obs"]["arms"]["right"] == 250.0 and meta["frequencies"]["cameras"]["head"] == 25.0
    ds = Dataset(out)
    assert ds.episode_ids == ["0", "1", "2", "3"]
    report = validate(ds)
    assert report.valid, [r for r in report if r.failed]
    obs = ds.load_obs(0)
    # stamped by observation_timestamp (ns), qpos/qvel/qtorque kept, the int field not a column
    np.testing.assert_array_equal(obs["arms/right/qpos"].index.to_numpy().astype(np.int64), T0 + np.arange(100) * 4_000_000)
    np.testing.assert_array_equal(obs["arms/left/qtorque"].to_numpy(np.float32)[7], np.float32(q("left", 7)))
    act = ds.load_action(0)
    # the action's datetime stamp (µs) converted exactly
    assert int(act["arms/right/qpos"].index.to_numpy().astype(np.int64)[3]) == T0 + 3 * 4_000_000
    cam = ds.load_cameras(0)["head"]
    assert cam.num_frames == 10 and cam.get_frame(2).read_bytes() == jpeg(20)


def test_malformed_messages_are_logged_and_skipped_never_a_crash(tmp_path):
    bad = [
        {"type": "INPUT", "id": "command", "value": pa.array([7]), "metadata": {}},
        {"type": "INPUT", "id": "command", "value": pa.array([], type=pa.string()), "metadata": {}},
        cmd("jump"),
        {"type": "INPUT", "id": "arm_right_observation", "value": pa.array([1.0] * 7, type=pa.float32()),
         "metadata": {"observation_timestamp": T0 + 500 * 4_000_000}},  # 7 values
        {"type": "INPUT", "id": "arm_right_observation", "value": pa.array([{"qpos": None}], type=QPOS),
         "metadata": {"observation_timestamp": T0 + 501 * 4_000_000}},  # null
        {"type": "INPUT", "id": "arm_left_observation", "value": pa.array([{"tmos": [1]}],
                                                                          type=pa.struct([("tmos", pa.list_(pa.int32()))])),
         "metadata": {"observation_timestamp": T0 + 502 * 4_000_000}},  # no state field
        {"type": "INPUT", "id": "arm_left_action", "value": pa.array([0.0] * 8, type=pa.float32()),
         "metadata": {}},  # no timestamp
        {"type": "INPUT", "id": "arm_left_action", "value": pa.array([0.0] * 8, type=pa.float32()),
         "metadata": {"timestamp": dt(T0)}},  # not after the previous stamp
        {"type": "INPUT", "id": "camera_head", "value": pa.array([0.5, 0.25]), "metadata": {"timestamp": dt(T0 + 10**9)}},
        {"type": "INPUT", "id": "camera_head", "value": pa.array([1, 2], type=pa.uint8()),
         "metadata": {"encoding": "rgb8", "timestamp": dt(T0 + 10**9 + 1000)}},
        {"type": "INPUT", "id": "camera_side", "value": pa.array([1], type=pa.uint8()),
         "metadata": {"timestamp": dt(T0 + 10**9 + 2000)}},  # undeclared camera
        {"type": "INPUT", "id": "ker_metadata", "value": pa.array(["{not json"]), "metadata": {}},
        {"type": "INPUT", "id": "gripper_extra", "value": pa.array([1]), "metadata": {}},
        {"type": "ERROR", "id": "x", "error": "something upstream"},
    ]
    good = samples(T0, 100)
    events = [cmd("success"), cmd("start", episode_number=0), *good[:200], *bad, *good[200:], cmd("success")]
    node, code = run_node(tmp_path, events, metadata_file(tmp_path))
    assert code == 0
    warned = logs(node, "warn")
    for expected in ("expected a length-1 string array", "'jump'", "success: no episode", "the stream has", "qpos is null",
                     "without any of qpos", "missing or not a timestamp", "not after the previous one",
                     "UInt8", "'rgb8'", "not declared", "ker_metadata", "'gripper_extra'"):
        assert any(expected in w for w in warned), (expected, warned)
    ds = Dataset(tmp_path / "ds")
    assert ds.episode_ids == ["0"] and validate(ds).valid
    assert len(ds.load_obs(0)["arms/right/qpos"]) == 100


def test_start_while_recording_and_a_used_episode_number_are_refused_with_a_log_line(tmp_path):
    events = [cmd("start", episode_number=0), *samples(T0, 80), cmd("start", episode_number=5), *samples(T0 + 80 * 4_000_000, 20),
              cmd("success"), cmd("start", episode_number=0), cmd("start"), *samples(T0 + 10**10, 100), cmd("success")]
    node, code = run_node(tmp_path, events, metadata_file(tmp_path))
    assert code == 0
    warned = logs(node, "warn")
    assert any("start refused: episode 0 is being recorded" in w for w in warned), warned
    assert any("start refused" in w and "episode 0 exists already" in w for w in warned), warned
    meta = yaml.safe_load((tmp_path / "ds/metadata.yaml").read_text())
    assert [e["id"] for e in meta["episodes"]] == ["0", "1"]  # the refused start did not interrupt episode 0
    assert len(Dataset(tmp_path / "ds").load_obs(0)["arms/right/qpos"]) == 100


def test_metadata_from_inputs_and_timers_without_a_metadata_file(tmp_path):
    node, code = run_node(tmp_path, [cmd("start"), *samples(T0, 100), cmd("success")])
    assert code == 0
    meta = yaml.safe_load((tmp_path / "ds/metadata.yaml").read_text())
    assert meta["equipment"]["embodiments"] == {"arms": {"id": "OpenArm", "version": "unknown"}}
    assert list(meta["equipment"]["perceptions"]["cameras"]) == ["head"]
    assert meta["tasks"] == [rn.DEFAULT_TASK]
    assert rn.timer_frequencies(DESCRIPTOR, CONFIG) == {"action": {"arms": {"right": 250.0, "left": 250.0}},
                                                       "obs": {"arms": {"right": 250.0, "left": 250.0}},
                                                       "cameras": {"head": 25.0}}
    assert validate(Dataset(tmp_path / "ds")).valid


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    import test_dora_recorder as t
    from dora.testing import MockNode
    from openarm_sim_dataset.dora import recorder_node as rn

    class Paused(MockNode):  # the event stream stalls before its final STOP: killed while recording
        def __next__(self):
            if len(self._events) == 1:
                while rec[0].recorder.pending_bytes:
                    time.sleep(0.01)
                print("RECORDING", flush=True)
                time.sleep(60)
            return super().__next__()

    rec = [None]
    node = Paused([t.cmd("start", episode_number=0), *t.samples(t.T0, 100), t.cmd("success"),
                   t.cmd("start", episode_number=1), *t.samples(t.T0 + 10**10, 300)],
                  dataflow_descriptor=t.DESCRIPTOR, node_config=t.CONFIG)
    args = rn.options(["--directory", {out!r}, "--name", "ds"])
    rec[0] = rn.node_from_dora(node, args, log=lambda level, msg: None)
    for ev in node:
        rec[0].handle(ev)
""")


@pytest.mark.slow
def test_a_restart_after_sigkill_mid_episode_removes_it_and_reuses_its_id(tmp_path):
    code = CHILD.format(tests=str(Path(__file__).parent), out=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "RECORDING", (line, p.stderr.read() if p.poll() is not None else "")
        partial = [d.name for d in (tmp_path / "ds/episodes").iterdir() if d.name.startswith(".tmp-1.")]
        assert len(partial) == 1
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
        p.stderr.close()
    assert Dataset(tmp_path / "ds").episode_ids == ["0"]
    node, code = run_node(tmp_path, [cmd("start", episode_number=1), *samples(T0 + 2 * 10**10, 100), cmd("success")])
    assert code == 0
    assert any("removed what a killed recorder left: " + partial[0] in m for m in logs(node, "info")), node.logs
    meta = yaml.safe_load((tmp_path / "ds/metadata.yaml").read_text())
    assert [e["id"] for e in meta["episodes"]] == ["0", "1"] and "discarded_episodes" not in meta
    assert sorted(d.name for d in (tmp_path / "ds/episodes").iterdir()) == ["0", "1"]
    assert validate(Dataset(tmp_path / "ds")).valid


#: DORA_NODE_CONFIG as the dora 1.1.0 daemon set it for a node (captured from a `dora run`), with
#: what that node's Node().node_config() and .dataflow_descriptor() returned
DAEMON_ENV = textwrap.dedent("""\
    dataflow_id: 01a2310a-6669-7d2d-adfa-78f784238610
    node_id: t
    run_config:
      inputs:
        other:
          source: dora/timer/secs/1
          queue_size: 3
        tick: dora/timer/millis/100
      outputs: []
    daemon_communication: !Tcp
      socket_addr: 127.0.0.1:44585
    dataflow_descriptor:
      nodes:
      - id: t
        name: null
        path: /usr/bin/python3
        args: dump.py
        env: null
        outputs: []
        inputs:
          other:
            source: dora/timer/secs/1
            queue_size: 3
          tick: dora/timer/millis/100
        restart_policy: never
      deploy: null
    dynamic: false
    restart_count: 0
    output_routing: {}
    """)


def test_the_node_config_is_read_from_the_daemons_environment_before_node_is_made(tmp_path):
    cfg, descriptor = rn.config_from_environment({"DORA_NODE_CONFIG": DAEMON_ENV})
    assert cfg == {"inputs": {"other": {"source": "dora/timer/secs/1", "queue_size": 3},
                              "tick": "dora/timer/millis/100"}, "outputs": []}
    assert [n["id"] for n in descriptor["nodes"]] == ["t"] and descriptor["nodes"][0]["inputs"] == cfg["inputs"]
    for bad in ({}, {"DORA_NODE_CONFIG": ""}, {"DORA_NODE_CONFIG": "a: [unclosed"}, {"DORA_NODE_CONFIG": "- 1"}):
        assert rn.config_from_environment(bad) is None  # main() then asks the node, as before
    # a recorder made from it before any node exists is the one made from the node
    env = yaml.safe_dump({"node_id": "recorder", "run_config": CONFIG, "dataflow_descriptor": DESCRIPTOR})
    args = rn.options(["--directory", str(tmp_path), "--name", "ds"])
    early = rn.node_from_dora(None, args, log=lambda *_: None, config=rn.config_from_environment({"DORA_NODE_CONFIG": env}))
    node = MockNode([cmd("start"), *samples(T0, 100), cmd("success")])
    assert rn.run(node, args, recorder=early) == 0
    meta = yaml.safe_load((tmp_path / "ds/metadata.yaml").read_text())
    assert meta["frequencies"]["cameras"] == {"head": 25.0} and list(meta["equipment"]["perceptions"]["cameras"]) == ["head"]
    assert validate(Dataset(tmp_path / "ds")).valid
