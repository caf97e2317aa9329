"""No false alarm at any size or rate (issue 26 item 6), slow: what the project writes beyond the generated
matrix of tests/test_no_false_alarms.py validates with no failed check and no unexpected skip.

Rows (each a dataset built once per session, on first use):

* ``dataset-render`` of a physics-only generation (2 pick_place episodes of 6.7 s, seed 10) at 64x48 and
  320x240 at 5 Hz, at 64x48 at 31.25 Hz, and of a 3 s scripted rollout at 640x480 at 31.25 Hz (one short
  episode). 30 Hz is not a rate the simulation can draw: its frames must fall on 2 ms physics steps, so
  the nearest rates are 25 and 31.25 Hz (``dataset-render --camera-hz 30`` is refused in one line);
  31.25 Hz is the finer of the two periods, 32 ms against a real 30 Hz camera's 33.3 ms.
* ``dataset-render --visual-variants 2`` (every episode drawn twice, each with its own lights, colours
  and head camera pose).
* ``dataset-evaluate`` rollouts of every built-in policy (``scripted``, ``zero``, ``random``) and of the
  shipped camera checkpoint ``baselines/pick_place_cameras.pt`` (1 episode, 3-4 s).
* Both dora recorders, ours (``openarm-sim-dataset-dora-recorder``) and the reference
  (``dora-openarm-dataset-recorder`` 0.5.0), fed one stream of dora events in process
  (``dora.testing.MockNode``): the 64x48 render's episodes as a robot sends them (arm states stamped by
  ``observation_timestamp``, commands and JPEG frames by dora's datetime stamps).
* A ``Recorder`` episode of one arm of a bimanual OpenArm (the right arm of the same episodes, head and
  right wrist cameras): the validator accepts a one-arm recording of a two-arm embodiment (a component no
  episode stores needs no rate; decided in issue 26, docs/guarantees/resume.md "Live recorder").

The rendered and rolled-out datasets carry their sidecars and are judged as simulated data (every
``sim_*`` check); the recorders' output is recorded data (warnings allowed only where their row says).
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, run_cli

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.validate.thresholds import Thresholds

pytestmark = pytest.mark.slow

#: skips any dataset may show, with why (every other skip fails its row)
EXPECTED_SKIPS = {
    "pose_quaternions": "joint streams only (no pose streams to check)",
    "sim_regenerate": "regeneration runs only when asked for (--regenerate N)",
    "drift": "fewer than 8 episodes of one task: no first and last quarter to compare",
    "duplicate_episodes": "a dataset of one episode: nothing to compare it with",
}
#: render rows: name -> (source, --size, --camera-hz, extra dataset-render arguments)
RENDERS = {
    "render_64x48_5hz": ("physics", "64x48", "5", []),
    "render_320x240_5hz": ("physics", "320x240", "5", []),
    "render_64x48_31hz": ("physics", "64x48", "31.25", []),
    "render_640x480_31hz": ("short_physics", "640x480", "31.25", []),
    "render_visual_variants": ("physics", "96x72", "5", ["--visual-variants", "2"]),
}
#: rollout rows: name -> dataset-evaluate arguments
ROLLOUTS = {
    "rollout_scripted": ["--policy", "scripted", "--size", "96x72", "--camera-hz", "10", "--max-time", "6"],
    "rollout_zero": ["--policy", "zero", "--size", "96x72", "--camera-hz", "10", "--max-time", "3"],
    "rollout_random": ["--policy", "random", "--size", "96x72", "--camera-hz", "10", "--max-time", "3"],
    "rollout_checkpoint": ["--policy", str(REPO / "baselines/pick_place_cameras.pt"), "--max-time", "3"],
}
#: recorded rows: name -> the row statuses a recording may warn on (its timing only)
RECORDED = {"dora_ours": set(), "dora_reference": set(), "recorder_one_arm": set()}
#: skips of the reference recorder's output, with why: it writes no manifest (our recorders do)
REFERENCE_SKIPS = {"integrity": "the reference recorder writes no manifest.sha256",
                   "episode_summary": "the reference recorder writes no summary.json"}
#: skips of a rollout, with why
ROLLOUT_SKIPS = {"sim_wrist_projection": "the red cube never in view of a wrist: where it looks is the policy's choice"}
#: rows of episodes of 3 s, and what they skip: camera_joint_timing searches lags of +-1.5 s and needs
#: twice that plus a second of frames (shrinking the lag range with the episode was tried: on the 3 s
#: 640x480 rollout the scripted motion's own rhythm made a wrist camera correlate best at the range's
#: edge, -0.99 s, 0.60 against 0.43: a false alarm; so short episodes stay not judged)
SHORT = {"render_640x480_31hz", "rollout_zero", "rollout_random", "rollout_checkpoint"}
SHORT_SKIPS = {"camera_joint_timing": "no camera spanning 4 s: nothing to cross-correlate"}
#: the zero policy commands the same action throughout: its action is frozen and constant, true of it
ZERO_WARNS = {"constant_dimensions", "frozen_action"}
#: the zero policy holds both arms still: nothing moves to compare qvel or the commands with
STILL_SKIPS = {"qvel_consistency": "no moving obs stream", "action_follows_obs": "no moving joint",
               "camera_placement": "no arm moves: nothing tells a wrist camera from a fixed one",
               "pinned_at_bound": "no dimension moves: none can sit at a bound it moves to",
               "outliers": "no dimension moves: no scale to measure an outlier in",
               "action_convention": "the state never moves: no lag at which the action follows it"}
ROWS = [*RENDERS, *ROLLOUTS, *RECORDED]
CAMERAS = ("head", "wrist_right", "wrist_left")


class Builder:
    """Each dataset of the matrix built on first use, once per session (in ``root``)."""

    def __init__(self, root: Path):
        self.root, self.built = root, {}

    def __call__(self, name: str) -> Path:
        if name not in self.built:
            out = self.root / name
            make = getattr(self, f"_{name}", None)
            self.built[name] = (make or (lambda o: self._row(name, o)))(out) or out
        return self.built[name]

    def _physics(self, out: Path) -> None:
        run_cli("generate", "--out", out, "--episodes", "2", "--seed", "10", "--cameras", "none", "--quiet")

    def _short_physics(self, out: Path) -> None:
        run_cli("evaluate", "--policy", "scripted", "--out", out, "--episodes", "1", "--seed", "3",
                "--cameras", "none", "--max-time", "3", "--quiet")

    def _row(self, name: str, out: Path) -> None:
        if name in RENDERS:
            src, size, hz, extra = RENDERS[name]
            run_cli("render", self(src), out, "--size", size, "--camera-hz", hz, "--cameras", *CAMERAS,
                    "--quiet", *extra)
        elif name in ROLLOUTS:
            run_cli("evaluate", "--out", out, "--episodes", "1", "--seed", "3", "--quiet", *ROLLOUTS[name])
        elif name in ("dora_ours", "dora_reference"):
            return record_dora(self("render_64x48_5hz"), out, reference=name == "dora_reference")
        elif name == "recorder_one_arm":
            record_one_arm(self("render_64x48_5hz"), out)
        else:
            raise KeyError(name)


@pytest.fixture(scope="session")
def build(tmp_path_factory) -> Builder:
    return Builder(tmp_path_factory.mktemp("size_rate_matrix"))


# ------------------------------------------------------------------ recorders fed a rendered episode
def recorder_metadata(ds: Dataset, cameras=CAMERAS) -> dict:
    """A recording session's metadata file: the source's tasks, an OpenArm embodiment, its cameras' sizes."""
    doc = yaml.safe_load((ds.root_path / "metadata.yaml").read_text())
    sizes = doc["equipment"]["perceptions"]["cameras"]
    return {"location": "lab", "operator": "matrix", "tasks": [dict(t) for t in ds.meta.tasks],
            "equipment": {"id": "OpenArm", "version": "2",
                          "embodiments": {"arms": {"id": "OpenArm", "version": "2.0"}},
                          "perceptions": {"cameras": {c: dict(sizes.get(c, {})) for c in cameras}}}}


def _dt(ns: int) -> datetime.datetime:
    """dora's datetime stamp (microseconds) of a time in ns."""
    return datetime.datetime.fromtimestamp(ns // 1000 / 1e6, tz=datetime.timezone.utc)


def dora_events(ds: Dataset) -> list[dict]:
    """Every episode of ``ds`` as the inputs a dora recording node receives: ``start`` (its episode number
    and task), then in time order the arm states (a struct of qpos/qvel/qtorque, ``observation_timestamp``
    in ns), the commands (flat float32 qpos, dora's datetime stamp) and the JPEG frames (``encoding``
    jpeg, datetime stamp), then ``success``/``fail``; ``quit`` at the end."""
    import pyarrow as pa

    state = pa.struct([(k, pa.list_(pa.float32())) for k in ("qpos", "qvel", "qtorque")])
    events = []
    for entry in ds.meta.episodes:
        ep = str(entry["id"])
        timed = []
        obs, act = ds.streams(ep, "obs"), ds.streams(ep, "action")
        for side in ("right", "left"):
            q = obs[f"arms/{side}/qpos"]
            cols = {k: obs[f"arms/{side}/{k}"].values for k in ("qpos", "qvel", "qtorque")}
            for i, t in enumerate(q.timestamps.tolist()):
                value = pa.array([{k: v[i].tolist() for k, v in cols.items()}], type=state)
                timed.append((t, 0, {"id": f"arm_{side}_observation", "value": value,
                                     "metadata": {"observation_timestamp": t, "timestamp": _dt(t)}}))
            a = act[f"arms/{side}/qpos"]
            for t, v in zip(a.timestamps.tolist(), a.values):
                timed.append((t, 1, {"id": f"arm_{side}_action", "value": pa.array(v, type=pa.float32()),
                                     "metadata": {"timestamp": _dt(t)}}))
        for name, cam in ds.load_cameras(ep).items():
            for i, t in enumerate(cam.timestamps.tolist()):
                data = np.frombuffer(cam.get_frame(i).read_bytes(), np.uint8)
                timed.append((t, 2, {"id": f"camera_{name}", "value": pa.array(data),
                                     "metadata": {"encoding": "jpeg", "timestamp": _dt(t)}}))
        timed.sort(key=lambda x: (x[0], x[1]))
        events.append(_command("start", episode_number=int(ep), task_index=int(entry.get("task_index", 0))))
        events += [{"type": "INPUT", **e} for _t, _k, e in timed]
        events.append(_command("success" if entry.get("success") else "fail"))
    return events + [_command("quit")]


def _command(c: str, **md) -> dict:
    import pyarrow as pa

    return {"type": "INPUT", "id": "command", "value": pa.array([c]), "metadata": md}


#: the dataflow both recorders run in: arms at 250 Hz (the leader's 4 ms timer), cameras at 5 Hz
def _dataflow(cameras) -> tuple[dict, dict]:
    nodes = [{"id": "leader", "inputs": {"tick": "dora/timer/millis/4"}},
             {"id": "right", "inputs": {"request_state": "leader/tick"}},
             {"id": "left", "inputs": {"request_state": "leader/tick"}},
             *({"id": c, "inputs": {"tick": "dora/timer/millis/200"}} for c in cameras), {"id": "recorder", "inputs": {}}]
    inputs = {"command": "ui/command", **{f"arm_{s}_observation": f"{s}/state" for s in ("right", "left")},
              **{f"arm_{s}_action": f"leader/{s}" for s in ("right", "left")},
              **{f"camera_{c}": f"{c}/image" for c in cameras}}
    return {"nodes": nodes}, {"inputs": inputs}


def record_dora(src: Path, root: Path, reference: bool) -> Path:
    """``src``'s episodes recorded by a dora recording node (ours or the reference) into ``root/ds``."""
    from dora.testing import MockNode

    ds = Dataset(src)
    root.mkdir(parents=True)
    (root / "session.yaml").write_text(yaml.safe_dump(recorder_metadata(ds)))
    descriptor, config = _dataflow(CAMERAS)
    node = MockNode(dora_events(ds), dataflow_descriptor=descriptor, node_config=config)
    args = ["--directory", str(root), "--name", "ds", "--metadata-file", str(root / "session.yaml")]
    if reference:
        import dora_openarm_dataset_recorder.main as ref

        saved_node, saved_argv = ref.dora.Node, sys.argv
        ref.dora.Node, sys.argv = (lambda: node), ["dora-openarm-dataset-recorder", *args]
        try:
            ref.main()
        finally:
            ref.dora.Node, sys.argv = saved_node, saved_argv
    else:
        from openarm_sim_dataset.dora import recorder_node as rn

        # the stale-camera rule is for real cameras: a simulated camera has no sensor noise, and its frames
        # of a still view (the idle arm's wrist) are byte-identical for seconds
        assert rn.run(node, rn.options([*args, "--stale-after-s", "0"])) == 0, node.logs
        assert not [e for e in node.logs if e["level"] in ("warn", "error")], node.logs
    return root / "ds"


def record_one_arm(src: Path, out: Path) -> Path:
    """``src``'s episodes recorded by :class:`Recorder` for the right arm alone of the bimanual OpenArm
    embodiment (its obs and command streams, the head and right wrist cameras)."""
    from openarm_sim_dataset.record import Recorder

    ds = Dataset(src)
    cams = ("head", "wrist_right")
    with Recorder(out, recorder_metadata(ds, cams)) as rec:
        for entry in ds.meta.episodes:
            ep = str(entry["id"])
            obs, act = ds.streams(ep, "obs"), ds.streams(ep, "action")
            frames = ds.load_cameras(ep)
            timed = [(t, 0, i) for i, t in enumerate(obs["arms/right/qpos"].timestamps.tolist())]
            timed += [(t, 1, i) for i, t in enumerate(act["arms/right/qpos"].timestamps.tolist())]
            timed += [(t, 2, (c, i)) for c in cams for i, t in enumerate(frames[c].timestamps.tolist())]
            e = rec.start_episode(int(entry.get("task_index", 0)))
            for t, kind, i in sorted(timed, key=lambda x: (x[0], x[1])):
                if kind == 0:
                    e.add_obs("arms/right", t, **{k: obs[f"arms/right/{k}"].values[i] for k in ("qpos", "qvel", "qtorque")})
                elif kind == 1:
                    e.add_action("arms/right", t, qpos=act["arms/right/qpos"].values[i])
                else:
                    e.add_frame(i[0], t, frames[i[0]].get_frame(i[1]).read_bytes())
            e.save(success=bool(entry.get("success")))
    return out


# ------------------------------------------------------------------ the rows
@pytest.mark.parametrize("name", ROWS)
def test_validates_with_no_failed_check_and_no_unexpected_skip(build, name):
    path = build(name)
    ds = Dataset(path)
    assert ds.num_episodes >= 1
    big = name == "render_640x480_31hz"
    rows = ds.validate(thresholds=Thresholds(sim_render_stride=4 if big else 1))
    failed = {r.check: r.detail for r in rows if r.failed}
    assert failed == {}, failed
    warned = {r.check: r.detail for r in rows if r.status == "warn"}
    assert set(warned) <= RECORDED.get(name, set()) | (ZERO_WARNS if name == "rollout_zero" else set()), warned
    allowed = EXPECTED_SKIPS | (REFERENCE_SKIPS if name == "dora_reference" else {})
    skipped = {r.check: r.detail for r in rows if r.skipped}
    if name in ROLLOUTS and "a rollout: its policy decides" in skipped.get("sim_wrist_projection", ""):
        allowed = allowed | ROLLOUT_SKIPS  # a policy that never looks at the cube (zero, random, 3 s of a checkpoint)
    if name in SHORT:
        allowed = allowed | SHORT_SKIPS
    if name == "rollout_zero":
        allowed = allowed | STILL_SKIPS
    assert set(skipped) <= set(allowed), {k: v for k, v in skipped.items() if k not in allowed}
    passed = {r.check for r in rows if r.passed and not r.skipped}
    assert {"camera_coverage", "camera_continuity", "jpeg_frames"} <= passed, sorted(passed)
    if name in RENDERS or name in ROLLOUTS:  # judged as simulated data: replayed and re-rendered
        assert {"sim_replay", "sim_render", "sim_labels"} <= passed, sorted(passed)
    if name.startswith("render_") and name != "render_visual_variants":
        size = tuple(int(x) for x in RENDERS[name][1].split("x"))
        assert (ds.meta.simulation["scene"]["width"], ds.meta.simulation["scene"]["height"]) == size
        assert ds.meta.simulation["camera_hz"] == float(RENDERS[name][2])


def test_the_simulation_cannot_draw_30_hz_and_says_so(build, tmp_path):
    r = run_cli("render", build("physics"), tmp_path / "out", "--camera-hz", "30", "--quiet", check=2)
    assert "camera_hz 30 does not divide the physics rate 500 Hz" in r.stderr and not (tmp_path / "out").exists()


def test_the_least_cube_mask_scales_with_the_image_area():
    from openarm_sim_dataset.validate.sim_geometry import min_mask_pixels

    assert [min_mask_pixels(w, h) for w, h in ((160, 120), (320, 240), (128, 96), (64, 48), (32, 24))] == \
        [20.0, 80.0, 12.8, 4.0, 4.0]
