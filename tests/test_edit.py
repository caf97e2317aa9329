"""dataset-edit: select, relabel, trim, split; edited_from; a trimmed simulated episode replays bit for bit;
every bad input is one line, exit 2, nothing written, the source untouched."""

from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import assert_reads_like_reference, run_cli, run_cli_process, tree_hashes
from PIL import Image

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.validate.core import validate

#: one worker: the module's recorded dataset is built once, not once per worker
pytestmark = pytest.mark.xdist_group("test_edit")

HZ, CAM_HZ = 250, 10
T0 = 1_772_000_000_000_000_000
#: per episode: idle head, motion, idle tail (s)
HEAD_S, MOVE_S, TAIL_S = 0.8, 2.4, 0.6


def _jpeg(x: float) -> bytes:
    """A bright square at x (0..1) on a grey background: a picture that moves as the arm does."""
    img = np.full((48, 64, 3), 90, dtype=np.uint8)
    c = int(round(4 + 44 * x))
    img[16:32, c:c + 12] = 230
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _build_recorded(out: Path) -> Path:
    """Six recorded episodes of two tasks (0-2 wave, 3-5 point) with the live Recorder: each rests
    HEAD_S, moves MOVE_S (right arm joints, a smooth swing), rests TAIL_S; episode 2 is a fumbled one
    (success false, outcome fumbled_grasp). A head camera at 10 Hz shows a square that follows the arm."""
    from openarm_sim_dataset.record import Recorder
    from openarm_sim_dataset.synthetic import MID_QPOS

    meta = {"location": "lab", "operator": "test", "operation_type": "teleop",
            "tasks": [{"prompt": "Wave.", "description": "wave the right arm"},
                      {"prompt": "Point.", "description": "point with the right arm"}],
            "equipment": {"id": "rig", "version": "1", "embodiments": {"arms": {"id": "OpenArm", "version": "2.0"}},
                          "perceptions": {"cameras": {"head": {}}}}}
    n = int(round((HEAD_S + MOVE_S + TAIL_S) * HZ))
    t = np.arange(n) / HZ
    u = np.clip((t - HEAD_S) / MOVE_S, 0, 1)
    x = 0.5 - 0.5 * np.cos(2 * np.pi * u)                        # 0 -> 1 -> 0, still at both ends
    dx = np.where((u > 0) & (u < 1), np.pi * np.sin(2 * np.pi * u) / MOVE_S, 0.0)
    with Recorder(out, meta, stale_after_s=None) as rec:
        for e in range(6):
            ep = rec.start_episode(0 if e < 3 else 1)
            base = T0 + e * 10**10
            for i in range(n):
                ts = base + i * (10**9 // HZ)
                for side in ("right", "left"):
                    amp = 0.6 if side == "right" else 0.0
                    q = (MID_QPOS[side] + amp * x[i]).astype(np.float32)
                    ep.add_obs(f"arms/{side}", ts, qpos=q, qvel=np.full(8, amp * dx[i], np.float32), qtorque=q * 0)
                    ep.add_action(f"arms/{side}", ts, qpos=q)
                if i % (HZ // CAM_HZ) == 0:
                    ep.add_frame("head", ts + 1000, _jpeg(x[i]))
            if e == 2:
                ep.save(success=False, outcome="fumbled_grasp")
            else:
                ep.save(success=True, outcome="success")
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A recorded dataset with a fumbled episode and idle tails (never modify it)."""
    return _build_recorded(tmp_path_factory.mktemp("edit") / "recorded")


def _meta(path: Path) -> dict:
    return yaml.safe_load((path / "metadata.yaml").read_text())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _valid(path: Path, **kw):
    report = validate(Dataset(path), **kw)
    failed = {r.check: r.detail for r in report if r.failed}
    assert report.valid, failed
    return report


# ----------------------------------------------------------------------------- recorded data
def test_recorded_dataset_drop_relabel_trim_idle_and_split(recorded, tmp_path):
    """The curation of a day of recording in one command: the fumbled episode dropped, a prompt fixed, an
    episode's outcome relabelled, idle heads and tails cut (figures printed), a validation split stratified
    by task; each output validates, openarm_dataset reads it, edited_from names the source."""
    before = tree_hashes(recorded)
    out = tmp_path / "out"
    r = run_cli_process("edit", recorded, out, "--drop", "2", "--set-prompt", "0", "Wave the right arm.",
                        "--set-outcome", "1", "waved", "--trim-idle", "--split", "val=0.4", "--seed", "1")
    assert tree_hashes(recorded) == before
    # the figures: every kept episode loses its idle head and tail, up to the first (last) sample at which the
    # right arm is 0.01 rad from its first (last) value, minus the 0.2 s margins
    rise = MOVE_S * np.arccos(1 - 2 * 0.01 / 0.6) / (2 * np.pi)  # 0.6 * x(t) reaches 0.01 rad
    last = (round((HEAD_S + MOVE_S + TAIL_S) * HZ) - 1) / HZ
    want_head, want_tail = HEAD_S + rise - 0.2, last - (HEAD_S + MOVE_S - rise) - 0.2
    lines = [ln for ln in r.stdout.splitlines() if "idle head" in ln]
    assert len(lines) == 5, r.stdout
    for ln in lines:
        head, tail = (float(v) for v in ln.split("idle head ")[1].replace(" s, tail ", " ").split(" s cut")[0].split())
        assert head == pytest.approx(want_head, abs=0.01) and tail == pytest.approx(want_tail, abs=0.01), ln
    train, val = out / "train", out / "val"
    tm, vm = _meta(train), _meta(val)
    # stratified: 5 episodes (2 wave, 3 point) -> round(0.4 * 5) = 2 in val, one of each task
    assert sorted(e["task_index"] for e in vm["episodes"]) == [0, 1]
    assert len(tm["episodes"]) == 3
    sources = sorted(e["source"]["id"] for m in (tm, vm) for e in m["episodes"])
    assert sources == ["0", "1", "3", "4", "5"]  # episode 2 dropped
    for m in (tm, vm):
        assert [e["id"] for e in m["episodes"]] == [str(i) for i in range(len(m["episodes"]))]  # renumbered
        assert m["tasks"][0]["prompt"] == "Wave the right arm." and m["tasks"][1]["prompt"] == "Point."
        ed = m["edited_from"]
        assert ed["path"] == str(recorded.resolve())
        assert ed["metadata_sha256"] == _sha(recorded / "metadata.yaml")
        assert set(ed["episodes"]) == {e["source"]["id"] for e in m["episodes"]}
        for sid, digest in ed["episodes"].items():
            assert digest == _sha(recorded / "episodes" / sid / "manifest.sha256")
        assert {"drop": ["2"]} in ed["operations"] and any("trim_idle" in op for op in ed["operations"])
        assert ed["split"]["name"] in ("train", "val")
        for e in m["episodes"]:
            assert e["trimmed"]["reason"] == "idle"
            assert e["trimmed"]["start_s"] == pytest.approx(want_head, abs=0.01)
    relabelled = [e for m in (tm, vm) for e in m["episodes"] if e["source"]["id"] == "1"][0]
    assert relabelled["outcome"] == "waved" and relabelled["relabelled"]["outcome"] == {"from": "success", "to": "waved", "by": "hand"}
    for path in (train, val):
        _valid(path)
        assert assert_reads_like_reference(path) > 0
        d = Dataset(path)
        for ep in d.episode_ids:
            obs = d.streams(ep, "obs")["arms/right/qpos"]
            dur = (obs.timestamps[-1] - obs.timestamps[0]) / 1e9
            assert dur == pytest.approx(MOVE_S - 2 * rise + 0.4, abs=0.01)  # the motion and its two margins
    info = run_cli("info", val).stdout
    assert f"edited     from {recorded.resolve()}" in info and "split val" in info


def test_keep_where_and_explicit_trim_in_seconds_and_frames(recorded, tmp_path):
    out = tmp_path / "out"
    run_cli("edit", recorded, out, "--where", "success=true", "--where", "task_index=1", "--keep-ids",
            "--trim", "3", "1s", "3s", "--trim", "4", "5", "30", "-q")
    m = _meta(out)
    assert [e["id"] for e in m["episodes"]] == ["3", "4", "5"]  # ids kept
    d = Dataset(out)
    cam = d.load_cameras("4")["head"]
    src = Dataset(recorded).load_cameras("4")["head"]
    assert list(cam.timestamps) == list(src.timestamps[5:31])  # frames 5..30 of its first camera, inclusive
    obs = d.streams("3", "obs")["arms/right/qpos"].timestamps
    first = Dataset(recorded).streams("3", "obs")["arms/right/qpos"].timestamps[0]
    assert (obs[0] - first, obs[-1] - first) == (10**9, 3 * 10**9)
    assert m["episodes"][0]["trimmed"]["start_s"] == 1.0 and m["episodes"][0]["trimmed"]["end_s"] == 3.0
    assert "trimmed" not in m["episodes"][2]
    _valid(out)


def test_an_interrupted_edit_resumes(recorded, tmp_path, monkeypatch):
    """Episodes are committed one by one: a run that dies after the first resumes to the same output;
    an existing output of another edit is refused."""
    from openarm_sim_dataset import edit as edit_mod
    from openarm_sim_dataset.edit import write as edit_write

    out = tmp_path / "out"
    real = edit_write.write_episode
    calls = []

    def dying(*a, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*a, **kw)

    spec = edit_mod.EditSpec(drop=("2",), trim_idle=edit_mod.IdleTrim())
    monkeypatch.setattr(edit_write, "write_episode", dying)
    with pytest.raises(KeyboardInterrupt):
        edit_mod.edit(recorded, out, spec)
    assert len(Dataset(out).episode_ids) == 2
    monkeypatch.setattr(edit_write, "write_episode", real)
    s = edit_mod.edit(recorded, out, spec)
    assert (s.made, s.skipped) == (3, 2)
    straight = tmp_path / "straight"
    edit_mod.edit(recorded, straight, spec)
    assert tree_hashes(out) == tree_hashes(straight) | {"metadata.yaml": tree_hashes(out)["metadata.yaml"]}
    assert _meta(out)["episodes"] == _meta(straight)["episodes"]
    r = run_cli("edit", recorded, out, "--drop", "3", check=2)
    assert "is another edit" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_split_is_stratified_and_reproducible():
    from openarm_sim_dataset.edit import split_entries

    entries = [{"id": str(i), "task_index": i % 3} for i in range(30)]
    a = split_entries(entries, [("val", 0.2)], seed=5)
    assert split_entries(entries, [("val", 0.2)], seed=5) == a
    assert len(a["val"]) == 6 and sorted(e["task_index"] for e in a["val"]) == [0, 0, 1, 1, 2, 2]
    assert len(a["train"]) == 24 and not {e["id"] for e in a["val"]} & {e["id"] for e in a["train"]}
    assert split_entries(entries, [("val", 0.2)], seed=6)["val"] != a["val"]


# ----------------------------------------------------------------------------- bad input
@pytest.mark.slow
def test_every_bad_input_is_one_line_exit_2_nothing_written(recorded, generated, tmp_path):
    before = tree_hashes(recorded), tree_hashes(generated)
    out = tmp_path / "out"
    cases = [
        ((recorded, out, "--drop", "99"), "no episode 99"),
        ((recorded, out, "--keep", "0", "--set-success", "7", "false"), "no episode 7"),
        ((recorded, out, "--trim", "0", "1s", "9s"), "lies outside episode 0"),
        ((recorded, out, "--trim", "0", "3", "200"), "frame 200 lies outside episode 0"),
        ((recorded, out, "--where", "success=false", "--drop", "2"), "leaves no episode"),
        ((recorded, out, "--keep", "0", "--split", "val=0.2"), "val split would hold no episode"),
        ((recorded, recorded / "edited"), "lies inside the input"),
        ((generated, out, "--set-success", "0", "false"), "contradicts its simulation"),
    ]
    for args, what in cases:
        r = run_cli_process("edit", *args, check=2)
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and what in r.stderr, (args, r.stderr)
        assert r.stderr.startswith("dataset-edit: error: ") and "Traceback" not in r.stderr
        assert not out.exists() and not (recorded / "edited").exists()
        assert not list(tmp_path.glob(".out*")) and not list(recorded.parent.glob(".recorded*"))
    assert (tree_hashes(recorded), tree_hashes(generated)) == before


# ----------------------------------------------------------------------------- simulated data
@pytest.mark.slow
def test_trimmed_simulated_episode_replays_bit_for_bit(generated, tmp_path):
    """Episode 1 cut to 1.0-4.0 s: its new initial state is the stored state of its first kept frame;
    replaying physics_ctrl from it reproduces every kept frame's whole integration state bit for bit (the
    source's stored states), and the simulation checks that read the cut pass."""
    from openarm_sim_dataset import sidecar
    from openarm_sim_dataset.sim.models import load_model
    from openarm_sim_dataset.sim.replay import replay
    from openarm_sim_dataset.validate.core import Context
    from openarm_sim_dataset.validate.sim_model import scene_config

    out = tmp_path / "out"
    r = run_cli("edit", generated, out, "--trim", "1", "1.0s", "4.0s", "--keep-ids", "-q")
    assert "sidecar frames 5-20" in r.stdout  # 5 Hz frames: 1.0 s is frame 5, 4.0 s frame 20
    src = sidecar.load_npz(generated / "episodes/1/sim/sidecar.npz")
    new = sidecar.load_npz(out / "episodes/1/sim/sidecar.npz")
    k0, k1 = 5, 20
    s0 = int(src["step"][k0])
    assert np.array_equal(new["initial_state"], src["state"][k0])
    assert np.array_equal(new["state"], src["state"][k0:k1 + 1])
    assert np.array_equal(new["physics_ctrl"], src["physics_ctrl"][s0:])
    assert np.array_equal(new["source_initial_state"], src["initial_state"])
    assert sidecar.first_step(new) == s0
    model = load_model(scene_config(Context(Dataset(generated), [])), _meta(generated)["simulation"]["model_sha256"])
    rep = replay(model, new)
    assert rep.ok and rep.frames == k1 - k0 + 1 and rep.max_qpos_diff == 0.0
    entry = _meta(out)["episodes"][1]
    assert entry["steps"] == len(new["physics_ctrl"]) and entry["trimmed"]["first_step"] == s0
    assert [f.timestamp_ns for f in Dataset(out).load_cameras("1")["head"].frames()] == list(src["frame_timestamp"][k0:k1 + 1])
    report = _valid(out, checks=["sim_identity", "sim_sidecar_agrees", "sim_replay", "sim_resume", "sim_labels",
                                 "sim_streams_agree", "camera_coverage", "integrity"])
    assert all(row.status == "pass" for row in report), [(r.check, r.detail) for r in report]
    # dataset-replay, a process: bit for bit from the new first frame
    rr = run_cli_process("replay", out, "--episode", "1")
    assert "replay equal" in rr.stdout + rr.stderr


@pytest.mark.slow  # full validation of simulated edits (renders every frame again): ~30 s
def test_simulated_edits_validate_and_survive_merge_and_convert(generated, tmp_path):
    """Trim, trim-idle, a forced relabel (marked, reported by sim_labels, accepted), a task relabel by hand;
    the whole validator passes; dataset-merge keeps each input's edited_from, dataset-convert keeps it."""
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("edit", generated, a, "--trim", "0", "0.6s", "5s", "--trim-idle", "-q")
    run_cli("edit", generated, b, "--keep", "1", "--set-success", "1", "false", "--force",
            "--set-prompt", "0", "Put the red cube into the tray.", "-q")
    for p in (a, b):
        report = _valid(p)
        assert not any(r.failed for r in report)
    labels = {r.check: r for r in validate(Dataset(b))}["sim_labels"]
    assert labels.passed and "relabelled by hand" in labels.detail
    entry = _meta(b)["episodes"][0]
    assert entry["success"] is False and entry["relabelled"]["success"] == {"from": True, "to": False, "by": "hand"}
    # an unmarked copy of the same relabel fails: the mark is what the validator accepts
    c = tmp_path / "c"
    shutil.copytree(b, c)
    meta = _meta(c)
    del meta["episodes"][0]["relabelled"]
    (c / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    assert {r.check: r for r in validate(Dataset(c), checks=["sim_labels"])}["sim_labels"].failed
    # merge: each input's record kept with it; convert: kept
    m = tmp_path / "m"
    run_cli("merge", a, b, "-o", m, "-q", "--allow-duplicates")
    merged = _meta(m)
    assert "edited_from" not in merged
    assert [x["edited_from"]["path"] for x in merged["merged_from"]] == [str(generated.resolve())] * 2
    assert "merge input 1: from" in run_cli("info", m).stdout
    cv = tmp_path / "cv"
    run_cli("convert", b, cv, "--format", "openarm", "-q")
    assert _meta(cv)["edited_from"] == _meta(b)["edited_from"]
    # an edit of an edit keeps the first record under previous
    e2 = tmp_path / "e2"
    run_cli("edit", a, e2, "--trim", "0", "1", "6", "-q")
    ed = _meta(e2)["edited_from"]
    assert ed["path"] == str(a.resolve()) and ed["previous"]["path"] == str(generated.resolve())
    report = _valid(e2, regenerate=["0"])  # trimmed twice: the regenerated episode cut as its record says
    regen = {r.check: r for r in report}["sim_regenerate"]
    assert regen.status == "pass" and "1 trimmed" in regen.detail, regen.detail
