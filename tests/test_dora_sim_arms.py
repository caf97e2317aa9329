"""One simulation node for both arms (``sim_nodes arms``) feeding the recording node, in process: the
arms node driven by ``dora.testing.MockNode``, its outputs (ids, Arrow values, metadata, in order)
handed to :class:`RecorderNode` as the dataflow would. The episodes carry the node's sidecar: they
replay bit for bit, their recorded streams equal the physics, and the validator says so; a changed
value, a changed control or a missing sidecar fails it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("dora")
pytest.importorskip("mujoco")
from dora.testing import MockNode  # noqa: E402

from openarm_sim_dataset import Dataset, sidecar  # noqa: E402
from openarm_sim_dataset.dora import (  # noqa: E402
    openarm_messages,
    recorder_node as rn,  # noqa: E402
    sim_arms,
)
from openarm_sim_dataset.synthetic import MID_QPOS  # noqa: E402
from openarm_sim_dataset.validate.core import validate  # noqa: E402

#: what the recording node's inputs are wired to (a dataflow's YAML)
WIRING = {"state_right": "arm_right_observation", "state_left": "arm_left_observation",
          "action_right": "arm_right_action", "action_left": "arm_left_action", "sim_file": "sim_file"}
SIM_CHECKS_THAT_RUN = {"sim_episodes", "sim_provenance", "sim_schema", "sim_ranges", "sim_sidecar_agrees",
                       "sim_replay", "sim_resume", "sim_streams_agree"}


class Wire(MockNode):
    """A MockNode that keeps, in order, every command it delivers and every output with its metadata:
    the recording node's input stream in a dataflow where it listens to this node and the UI."""

    def __init__(self, events):
        super().__init__(events)
        self.stream: list[dict] = []

    def __next__(self):
        event = super().__next__()
        if event.get("type") == "INPUT" and event.get("id") == "command":
            self.stream.append(dict(event))
        return event

    def send_output(self, output_id, data, metadata=None):
        super().send_output(output_id, data, metadata)
        if output_id in WIRING:
            self.stream.append({"type": "INPUT", "id": WIRING[output_id], "value": data, "metadata": dict(metadata or {})})


def cmd(c: str, **md) -> dict:
    return {"type": "INPUT", "id": "command", "value": pa.array([c]), "metadata": md}


def leader(episodes: int, ticks: int, gap: int = 10) -> list[dict]:
    """The arms node's inputs: targets and a state tick every 4 ms, ``episodes`` of ``ticks`` ticks."""
    q_type = openarm_messages.qpos_type()
    ev, k = [], 0
    for e in range(episodes):
        for phase in ("gap", "episode"):
            if phase == "episode":
                ev.append(cmd("start", episode_number=e, task_index=0))
            for _ in range(gap if phase == "gap" else ticks):
                for side in ("right", "left"):
                    q = (MID_QPOS[side] + 0.15 * np.sin(0.02 * k + np.arange(8))).astype(np.float32)
                    ev.append({"type": "INPUT", "id": f"move_position_{side}", "value": pa.array([{"qpos": q}], type=q_type),
                               "metadata": {}})
                ev.append({"type": "INPUT", "id": "tick", "value": pa.array([k]), "metadata": {}})
                k += 1
            if phase == "episode":
                ev.append(cmd("success" if e % 2 == 0 else "fail"))
    return ev + [cmd("quit")]


def record(tmp_path, stream: list[dict], name: str = "ds") -> tuple[MockNode, int]:
    node = MockNode(stream, node_config={"inputs": {i: "x/y" for i in ["command", *WIRING.values()]}})
    code = rn.run(node, rn.options(["--directory", str(tmp_path), "--name", name]))
    return node, code


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(dataset path, the arms node's stream) of 2 episodes of 150 ticks (0.6 s each)."""
    tmp = tmp_path_factory.mktemp("sim_arms")
    sim = sim_arms.SimArms()
    wire = Wire(leader(2, 150))
    sim_arms.arms(wire, sim)
    node, code = record(tmp, wire.stream)
    assert code == 0 and not [e for e in node.logs if e["level"] in ("warn", "error")], node.logs
    return tmp / "ds", wire.stream


@pytest.mark.slow
def test_the_nodes_episodes_carry_their_sidecar_and_validate_against_the_physics(recorded):
    out, stream = recorded
    ds = Dataset(out)
    assert ds.episode_ids == ["0", "1"]
    assert ds.meta.simulation["source"] == sidecar.SOURCE_DATAFLOW
    files = [e for e in stream if e["id"] == "sim_file"]
    assert sorted(e["metadata"]["path"] for e in files) == ["sim/frames.npz"] * 2 + ["sim/sidecar.npz"] * 2
    report = validate(ds)
    assert report.valid and report.counts["failed"] == 0, [r for r in report if r.failed]
    ran = {r.check for r in report if r.passed}
    assert ran >= SIM_CHECKS_THAT_RUN | {"timestamps", "integrity"}, sorted(ran)
    not_applicable = {r.check: r.detail for r in report if r.skipped and not r.applicable}
    assert {"sim_identity", "sim_labels", "sim_regenerate"} <= set(not_applicable)
    # every stored obs and action row is the physics': stamps on the simulation's step grid
    side = sidecar.load_npz(out / "episodes/0/sim/sidecar.npz")
    obs = ds.load_obs(0)["arms/right/qpos"]
    stamps = obs.index.to_numpy().astype(np.int64)
    assert len(stamps) == 150 and np.all(np.diff(stamps) == 4_000_000)
    assert int(side["frame_timestamp"][0]) == stamps[0] and len(side["physics_ctrl"]) == 150 * 2
    # the actions are the targets the servos tracked: the leader's, clipped to the actuators' range
    act = ds.load_action(0)["arms/right/qpos"].to_numpy(np.float32)
    assert act.shape == (150, 8) and np.all(np.isfinite(act))


def test_replay_of_a_recorded_episode_is_bit_exact(recorded):
    from openarm_sim_dataset.sim.models import load_model
    from openarm_sim_dataset.sim.replay import replay
    from openarm_sim_dataset.sim.scene import SceneConfig

    out, _ = recorded
    side = sidecar.load_npz(out / "episodes/1/sim/sidecar.npz")
    r = replay(load_model(SceneConfig(cameras=())), side)
    assert r.frames == len(side["step"]) > 5 and r.exact == r.state_exact == r.frames and r.max_qpos_diff == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("fault, check", [("obs value", "sim_streams_agree"), ("control", "sim_replay"),
                                          ("no sidecar", "sim_episodes")])
def test_a_corrupted_copy_fails_the_check_that_owns_it(recorded, tmp_path, fault, check):
    import pyarrow.parquet as pq

    from openarm_sim_dataset import manifest

    src, _ = recorded
    out = tmp_path / "ds"
    shutil.copytree(src, out)
    ep = out / "episodes/0"
    if fault == "obs value":  # one float32 one ulp off, at a frame the sidecar stores
        path = ep / "obs/arms/right/state.parquet"
        t = pq.read_table(path)
        q = np.stack(t.column("qpos").to_numpy(zero_copy_only=False)).astype(np.float32)
        q[25, 2] = np.nextafter(q[25, 2], np.float32(10))
        t = t.set_column(t.schema.get_field_index("qpos"), "qpos", pa.array(list(q), type=t.schema.field("qpos").type))
        pq.write_table(t, path)
    elif fault == "control":
        path = ep / "sim/sidecar.npz"
        arrays = sidecar.load_npz(path)
        arrays["physics_ctrl"][40, 3] += 1e-3
        sidecar.save_npz(path, arrays)
    else:
        shutil.rmtree(ep / "sim")
    manifest.write(ep)  # a consistent manifest: the fault is one of meaning, not of integrity
    report = validate(Dataset(out), checks=[check, "integrity"])
    rows = {r.check: r for r in report}
    assert rows["integrity"].passed and rows[check].failed and "0" in rows[check].episodes, rows[check]


def test_the_recorder_waits_for_the_sim_files_and_saves_an_episode_without_them_at_the_end(
        recorded, tmp_path, monkeypatch):
    _, stream = recorded
    files = [e for e in stream if e["id"] == "sim_file"]
    # the files of episode 0 before its success (dora orders no two sources): saved at success
    first_success = next(i for i, e in enumerate(stream) if e["id"] == "command" and e["value"][0].as_py() == "success")
    early = [e for e in stream if e not in files[:2]]
    early[first_success - 1:first_success - 1] = files[:2]
    node, code = record(tmp_path, early, "early")
    assert code == 0 and not [e for e in node.logs if e["level"] != "info"], node.logs
    assert validate(Dataset(tmp_path / "early"), checks=["sim_episodes", "sim_replay"]).valid
    # episode 1's files never come: after quit the node waits, then saves it without them when the
    # dataflow stops, and the validator flags it
    lost = [e for e in stream if not (e["id"] == "sim_file" and e["metadata"]["episode_number"] == 1)]
    node, code = record(tmp_path, lost, "lost")
    warned = [e["message"] for e in node.logs if e["level"] == "warn"]
    assert code == 0 and warned == ["episode 1: saved with 0 of its simulation files (the rest did not come "
                                    "before the dataflow stopped)"], node.logs
    ds = Dataset(tmp_path / "lost")
    assert ds.episode_ids == ["0", "1"]
    rows = {r.check: r for r in validate(ds, checks=["sim_episodes"])}
    assert rows["sim_episodes"].failed and rows["sim_episodes"].episodes == ["1"]
    # the wait has a deadline: the next event after it saves the episode (here: the next start)
    monkeypatch.setattr(rn.RecorderNode, "SIM_FILES_WAIT_S", 0.0)
    node, code = record(tmp_path, [e for e in stream if e["id"] != "sim_file"], "late")
    warned = [e["message"] for e in node.logs if e["level"] == "warn"]
    assert code == 0 and warned == [f"episode {i}: saved with 0 of its simulation files (the rest did not come "
                                    f"within 0 s of {c})" for i, c in ((0, "success"), (1, "fail"))], node.logs
    assert Dataset(tmp_path / "late").episode_ids == ["0", "1"]


def test_an_episode_waiting_for_its_sim_files_does_not_hold_up_the_next_one(recorded, tmp_path):
    # dora orders no two sources: episode 0's files may come after the next start and a part of the next
    # episode. The old node saved episode 0 without them at that start (and skipped them when they came)
    src, stream = recorded
    files0 = [e for e in stream if e["id"] == "sim_file" and e["metadata"]["episode_number"] == 0]
    late = [e for e in stream if not any(e is f for f in files0)]
    start1 = next(i for i, e in enumerate(late) if e["id"] == "command" and e["value"][0].as_py() == "start"
                  and e["metadata"]["episode_number"] == 1)
    late[start1 + 40:start1 + 40] = files0  # after 10 ticks of episode 1 (4 messages a tick)
    node, code = record(tmp_path, late, "late")
    assert code == 0 and not [e for e in node.logs if e["level"] != "info"], node.logs
    ds, ref = Dataset(tmp_path / "late"), Dataset(src)
    assert ds.episode_ids == ["0", "1"] and [e["success"] for e in ds.meta.episodes] == [True, False]
    for i in (0, 1):  # both complete: the same rows and files as with the files in time
        assert ds.load_obs(i)["arms/right/qpos"].equals(ref.load_obs(i)["arms/right/qpos"])
        assert ds.load_action(i)["arms/left/qpos"].equals(ref.load_action(i)["arms/left/qpos"])
        for name in ("sidecar.npz", "frames.npz"):
            assert (tmp_path / f"late/episodes/{i}/sim/{name}").read_bytes() == (src / f"episodes/{i}/sim/{name}").read_bytes()
    # the verdicts of the dataset recorded with the files in time (on a loaded machine the arms node,
    # locked to the wall clock, may leave gaps in both: `timestamps`), the checks of the sidecar passed
    report = validate(ds)
    assert {r.check: r.passed for r in report} == {r.check: r.passed for r in validate(ref)}, report
    assert all(r.passed for r in report if r.check in SIM_CHECKS_THAT_RUN), [r for r in report if r.failed]


def test_a_recorder_that_starts_before_the_simulation_node_still_agrees_with_the_physics(recorded, tmp_path):
    # dora orders no two sources: the recorder may get `start` a few ticks before the simulation node
    # does (rows before its episode's step 0) and `success` a few ticks after it (rows past its end)
    _, stream = recorded
    moved = list(stream)
    for command in ("start", "success"):
        i = next(k for k, e in enumerate(moved) if e["id"] == "command" and e["value"][0].as_py() == command)
        e = moved.pop(i)
        moved.insert(i - 12 if command == "start" else i + 12, e)  # 3 ticks of 4 messages each
    node, code = record(tmp_path, moved)
    assert code == 0, node.logs
    report = validate(Dataset(tmp_path / "ds"), checks=["sim_streams_agree", "sim_replay"])
    rows = {r.check: r for r in report}
    assert report.valid, rows
    assert "action row(s) outside the sidecar's steps" in rows["sim_streams_agree"].detail


def test_the_state_rate_defaults_to_the_tick_timers(monkeypatch):
    monkeypatch.setenv("DORA_NODE_CONFIG", "run_config:\n  inputs:\n    tick: dora/timer/millis/5\ndataflow_descriptor: {}\n")
    assert sim_arms.tick_hz() == 200.0
    monkeypatch.setenv("DORA_NODE_CONFIG", "run_config:\n  inputs:\n    tick: leader/tick\ndataflow_descriptor: {}\n")
    assert sim_arms.tick_hz() is None
    monkeypatch.delenv("DORA_NODE_CONFIG")
    assert sim_arms.tick_hz() is None


@pytest.mark.slow  # a renderer (EGL/OSMesa) and 2 x 2 cameras drawn: ~6 s
def test_a_dataflow_recording_is_rendered_later_from_its_physics_and_validates(recorded, tmp_path):
    # the recorder begins 3 ticks after the simulation node: the frames the render draws keep to the
    # recorded streams' span (camera_span), and every drawn frame is re-rendered identically
    from openarm_sim_dataset.sim.render_dataset import RenderConfig, render_dataset

    _, stream = recorded
    late = list(stream)
    i = next(k for k, e in enumerate(late) if e["id"] == "command" and e["value"][0].as_py() == "start")
    late.insert(i + 12, late.pop(i))
    record(tmp_path, late, "late")
    summary = render_dataset(tmp_path / "late", tmp_path / "drawn", RenderConfig(cameras=("head", "wrist_right"),
                                                                                  width=64, height=48))
    assert summary.made == 2 and summary.frames > 0
    ds = Dataset(tmp_path / "drawn")
    assert ds.meta.simulation["source"] == sidecar.SOURCE_DATAFLOW and set(ds.meta.simulation["cameras"]) == {"head", "wrist_right"}
    first_row = int(ds.load_obs(0)["arms/right/qpos"].index.to_numpy().astype(np.int64)[0])
    frames = ds.load_cameras(0)["head"].timestamps
    assert frames[0] >= first_row - 4_000_000  # the sidecar's step-0 frame, 12 ms before the first row, left out
    report = validate(ds)
    assert report.valid and report.counts["failed"] == 0, [r for r in report if r.failed]
    assert {"sim_render", "sim_geometry", "camera_span", "sim_replay", "sim_sidecar_agrees"} <= {r.check for r in report if r.passed}


def test_render_of_a_block_without_the_generators_keys_is_one_line_naming_the_file(recorded, tmp_path):
    from conftest import run_cli

    src = tmp_path / "src"
    shutil.copytree(recorded[0], src)
    doc = (src / "metadata.yaml").read_text()
    assert "  source: dataflow\n" in doc
    (src / "metadata.yaml").write_text(doc.replace("  source: dataflow\n", ""))  # now it claims a generator's block
    p = run_cli("render", src, tmp_path / "out", "--quiet", check=2)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        f"dataset-render: error: {src / 'metadata.yaml'}: simulation block unusable (missing or bad 'seed')"], p.stderr
    assert not (tmp_path / "out").exists()
