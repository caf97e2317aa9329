"""dataset-train (openarm_sim_dataset.bc): a checkpoint trained on a real generated dataset loads in
dataset-evaluate with the inputs it records (no flag), runs an episode whose rollout validates;
training is deterministic from its seed and resumes after an interruption to the same weights; a
contradicting flag, a corrupted checkpoint and every unusable training input are one line, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import SUBPROCESS_ENV, run_cli

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from openarm_sim_dataset import bc  # noqa: E402
from openarm_sim_dataset.metadata import Metadata  # noqa: E402

#: one worker: the module's trained checkpoints are built once, not once per worker
pytestmark = pytest.mark.xdist_group("test_train")

#: the evaluation of test_evaluate.py's TINY_EVAL, at tiny_generated's camera (head 32x24)
TINY_EVAL = ["--size", "32x24", "--cameras", "head", "--camera-hz", "2.5", "--max-time", "1", "--quiet", "--seed", "10"]
FEW = ["--steps", "4", "--batch", "16", "--hidden", "32", "--quiet", "--val", "0.5"]


def _train(tool, data, out, *extra) -> dict:
    r = run_cli("train", data, "--out", out, *FEW, "--json", *extra)
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def checkpoints(tiny_generated, tmp_path_factory):
    tool = bc
    d = tmp_path_factory.mktemp("bc")
    data = tiny_generated["path"]
    state = _train(tool, data, d / "state.pt", "--inputs", "state", "--curve", d / "state.png")
    cams = _train(tool, data, d / "cams.pt", "--inputs", "cameras", "--hz", "5")
    return tool, d, state, cams


@pytest.mark.parametrize("variant", ["state", pytest.param("cams", marks=pytest.mark.slow)])
def test_checkpoint_evaluates_and_its_rollout_validates(checkpoints, tmp_path, variant):
    tool, d, state, _ = checkpoints
    ckpt = d / f"{variant}.pt"
    pol = tool.load_policy(ckpt)
    assert pol.privileged is (variant == "state") and pol.cameras is (variant == "cams")
    assert ("privileged" in pol.name) is (variant == "state")
    out = tmp_path / "rollouts"
    # the checkpoint says what it reads: a camera policy needs no --cameras/--size/--camera-hz
    flags = ["--max-time", "1", "--quiet", "--seed", "10"] if variant == "cams" else TINY_EVAL
    r = run_cli("evaluate", "--policy", ckpt, "--out", out, "--episodes", "1", *flags, "--json")
    rep = json.loads(r.stdout)
    meta = Metadata.load(out)
    assert meta.operation_type == "rollout" and meta.episode_ids == ["0"]
    # the model is identified by the checkpoint's bytes
    import hashlib

    assert meta.data["model"]["sha256"] == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    assert meta.data["evaluation"]["control_hz"] == (10.0 if variant == "state" else 5.0)
    if variant == "cams":
        sim = meta.data["simulation"]
        assert list(sim["scene"]["cameras"]) == ["head"] and sim["scene"]["width"] == 32 and sim["camera_hz"] == 2.5
    assert rep["stats"]["overall"]["end"]["episodes"] == 1
    run_cli("validate", out, "--quick", "--no-update-metadata")
    if variant == "state":
        assert (d / "state.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert state["episodes"] == 2 and state["val_episodes"] == 1 and state["bytes"] == ckpt.stat().st_size


def test_training_is_deterministic_from_its_seed(checkpoints, tiny_generated, tmp_path):
    tool, d, _, _ = checkpoints
    _train(tool, tiny_generated["path"], tmp_path / "again.pt", "--inputs", "state")
    _train(tool, tiny_generated["path"], tmp_path / "other.pt", "--inputs", "state", "--seed", "1")
    w = [torch.load(p, weights_only=True)["state_dict"] for p in (d / "state.pt", tmp_path / "again.pt", tmp_path / "other.pt")]
    assert all(torch.equal(w[0][k], w[1][k]) for k in w[0])
    assert not all(torch.equal(w[0][k], w[2][k]) for k in w[0])


def test_policy_chunks_and_wrong_camera_size(checkpoints):
    """The policy plays ``execute`` rows of a chunk before predicting again; an image of another size
    than the training one is an error naming the size (the evaluator turns it into one line)."""
    tool, d, _, _ = checkpoints
    pol = tool.load_policy(d / "cams.pt")
    obs = {"arms": {s: {"qpos": np.zeros(8, np.float32)} for s in ("right", "left")},
           "cameras": {"head": np.zeros((24, 32, 3), np.uint8)}}
    pol.reset()
    a = [pol.act(obs) for _ in range(pol.cfg["execute"] + 1)]
    assert all(x.shape == (16,) and np.all(np.isfinite(x)) for x in a)
    assert len(pol.queue) == pol.cfg["execute"] - 1  # a new chunk was predicted at the (execute+1)-th call
    obs["cameras"]["head"] = np.zeros((48, 64, 3), np.uint8)
    pol.reset()
    with pytest.raises(ValueError, match="64x48, the checkpoint was trained on 32x24"):
        pol.act(obs)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign"])
def test_corrupted_checkpoint_is_a_one_line_error(checkpoints, tmp_path, damage):
    _, d, _, _ = checkpoints
    bad = tmp_path / "bad.pt"
    raw = (d / "state.pt").read_bytes()
    if damage == "truncate":
        bad.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        bad.write_bytes(b"not a checkpoint\n" * 10)
    else:  # a valid torch file of something else
        torch.save({"weights": torch.zeros(3)}, bad)
    out = tmp_path / "out"
    r = run_cli("evaluate", "--policy", bad, "--out", out, "--episodes", "1", *TINY_EVAL, check=2)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and "Traceback" not in err, err
    assert ("not a dataset-train checkpoint" if damage == "foreign" else "not a readable checkpoint") in err
    assert not out.exists()  # refused before the output exists


def test_bad_training_input_is_a_one_line_error(tmp_path):
    r = run_cli("train", tmp_path / "nowhere", "--inputs", "state", "--out", tmp_path / "x.pt", "--quiet", check=2)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "nowhere" in err and "Traceback" not in err, err
    assert not (tmp_path / "x.pt").exists()


def test_state_checkpoint_evaluates_physics_only(checkpoints, tmp_path):
    """dataset-evaluate --cameras none: the privileged-state policy reads no image, so its rollouts need
    no rendering (no camera stream, still a dataset that validates); a camera policy there is one line."""
    tool, d, _, _ = checkpoints
    out = tmp_path / "none"
    tiny = [a for a in TINY_EVAL if a != "head"]
    tiny[tiny.index("--cameras") + 1:tiny.index("--cameras") + 1] = ["none"]
    r = run_cli("evaluate", "--policy", d / "state.pt", "--out", out, "--episodes", "1", *tiny, "--json")
    assert json.loads(r.stdout)["stats"]["overall"]["end"]["episodes"] == 1
    meta = Metadata.load(out)
    assert meta.episode_ids == ["0"] and not (out / "episodes" / "0" / "images").exists()
    assert not meta.episodes[0].get("cameras")
    run_cli("validate", out, "--quick", "--no-update-metadata")
    # the same checkpoint named another way (a copy, another path) resumes the folder: it is its bytes
    import shutil

    copy = shutil.copy(d / "state.pt", tmp_path / "elsewhere.pt")
    again = run_cli("evaluate", "--policy", copy, "--out", out, "--episodes", "2", *tiny, "--json")
    assert (json.loads(again.stdout)["made"], json.loads(again.stdout)["skipped"]) == (1, 1)
    assert Metadata.load(out).data["evaluation"]["policy"] == str(d / "state.pt")
    other = run_cli("evaluate", "--policy", "zero", "--out", out, "--episodes", "2", *tiny, check=2)
    assert "another policy" in other.stderr and len(other.stderr.strip().splitlines()) == 1
    bad = run_cli("evaluate", "--policy", d / "cams.pt", "--out", tmp_path / "cams", "--episodes", "1", *tiny, check=2)
    assert "--cameras none contradicts the checkpoint, which reads head" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "cams").exists()
    both = run_cli("evaluate", "--policy", "zero", "--out", tmp_path / "x", "--episodes", "1", "--cameras", "none",
                   "head", check=2)
    assert "cannot be combined" in both.stderr and not (tmp_path / "x").exists()


def test_temporal_ensembling_hand_computed(checkpoints):
    """--ensemble DECAY: a chunk is predicted every step and the played target is the mean of every
    stored chunk's row for this step, weight exp(-DECAY * i), i = 0 the oldest (checked against chunks
    of known values; the safety filter off and the range wide so it does not interfere)."""
    tool, d, _, _ = checkpoints
    pol = tool.load_policy(d / "state.pt")
    pol.cfg.update(ensemble=0.5, max_step=0.0, horizon=3)
    pol.stats["action"]["min"][:], pol.stats["action"]["max"][:] = -1e9, 1e9
    calls = []

    def predict(observation, info):  # chunk c: row r is 10 * c + r, in every column
        c = len(calls)
        calls.append(c)
        return np.repeat((10.0 * c + np.arange(3))[:, None], 16, axis=1)

    pol._predict = predict
    obs = {"arms": {s: {"qpos": np.zeros(8, np.float32)} for s in ("right", "left")}}
    pol.reset()
    got = [pol.act(obs, {})[0] for _ in range(4)]
    w = np.exp(-0.5 * np.arange(3))
    assert got[0] == 0.0  # one chunk: its row 0
    assert np.isclose(got[1], (w[0] * 1 + w[1] * 10) / w[:2].sum())  # chunk 0 row 1, chunk 1 row 0
    assert np.isclose(got[2], (w[0] * 2 + w[1] * 11 + w[2] * 20) / w.sum())
    assert np.isclose(got[3], (w[0] * 12 + w[1] * 21 + w[2] * 30) / w.sum())  # chunk 0 expired
    assert calls == [0, 1, 2, 3] and pol.k == 4
    pol.cfg.update(ensemble=None, execute=3)  # off: the receding horizon again (a chunk per 3 rows)
    pol.reset()
    calls.clear()
    assert [pol.act(obs, {})[0] for _ in range(4)] == [0.0, 1.0, 2.0, 10.0] and calls == [0, 1]


def test_failed_episodes_are_not_demonstrations(checkpoints, tiny_generated, tmp_path):
    """An episode metadata marks unsuccessful (the expert's ik_failed ones may not even span a step) is
    left out of training; none successful is a one-line error."""
    import shutil

    tool = checkpoints[0]  # noqa: F841
    data = tmp_path / "data"
    shutil.copytree(tiny_generated["path"], data)
    meta = data / "metadata.yaml"
    text = meta.read_text()
    assert text.count("success: true") >= 2
    meta.write_text(text.replace("success: true", "success: false", 1))
    assert _train(tool, data, tmp_path / "one.pt", "--inputs", "state", "--val", "0")["episodes"] == 1
    meta.write_text(text.replace("success: true", "success: false"))
    r = run_cli("train", data, "--out", tmp_path / "none.pt", "--inputs", "state", *FEW, check=2)
    err = r.stderr.strip()
    assert "no successful demonstration" in err and "metadata.yaml" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "none.pt").exists()


@pytest.mark.parametrize("flag, value, says", [
    ("--size", "64x48", "--size 64x48 contradicts the checkpoint's 32x24"),
    ("--camera-hz", "5", "--camera-hz 5 contradicts the checkpoint's 2.5 Hz"),
    ("--cameras", "wrist_right", "--cameras wrist_right contradicts the checkpoint, which reads head"),
])
def test_a_flag_that_contradicts_the_checkpoint_is_one_line(checkpoints, tmp_path, flag, value, says):
    """A checkpoint knows its inputs: a flag that says otherwise names both values, exit 2, nothing written."""
    _, d, _, _ = checkpoints
    out = tmp_path / "out"
    r = run_cli("evaluate", "--policy", d / "cams.pt", "--out", out, "--episodes", "1", flag, value, check=2)
    err = r.stderr.strip()
    assert says in err and str(d / "cams.pt") in err and len(err.splitlines()) == 1, err
    assert not out.exists()
    # the same values agreeing with it are accepted (and more cameras than it reads may be recorded)
    from openarm_sim_dataset.evaluate import recording_for

    assert recording_for(str(d / "cams.pt"), ("head", "wrist_right"), (32, 24), 2.5) == (("head", "wrist_right"), (32, 24), 2.5)
    assert recording_for(str(d / "cams.pt"), None, None, None) == (("head",), (32, 24), 2.5)
    assert recording_for("zero", None, None, None) == (("head", "wrist_right"), (160, 120), 10.0)


def test_checkpoint_records_its_inputs_and_data(checkpoints, tiny_generated):
    _, d, _, _ = checkpoints
    pol = bc.load_policy(d / "cams.pt")
    assert pol.inputs == bc.PolicyInputs(cameras=("head",), size=(32, 24), camera_hz=2.5, control_hz=5.0, privileged=False)
    assert bc.read_inputs(d / "state.pt").cameras == () and bc.read_inputs(d / "state.pt").privileged
    import hashlib

    sha = hashlib.sha256((tiny_generated["path"] / "metadata.yaml").read_bytes()).hexdigest()
    assert pol.cfg["dataset_sha256"] == sha and pol.cfg["arch"] == "keypoints" and pol.cfg["jpeg_quality"] == 90
    assert bc.load_policy(d / "state.pt").cfg["arch"] == "mlp"


def test_interrupted_training_resumes_to_the_same_weights(tiny_generated, tmp_path):
    """A run stopped mid-way leaves OUT.resume (and no checkpoint); the same command continues it to
    the weights and curve of an uninterrupted run, bit for bit; other arguments are refused, naming them."""
    data = str(tiny_generated["path"])
    base = dict(dataset=data, inputs="cameras", hz=5.0, steps=8, batch=8, hidden=16, keypoints=4, conv_width=4,
                val=0.5, checkpoint_every=1e9)
    full = bc.train(bc.TrainConfig(out=str(tmp_path / "full.pt"), **base))
    part = tmp_path / "part.pt"
    with pytest.raises(KeyboardInterrupt):
        bc.train(bc.TrainConfig(out=str(part), **base), stop_after=3)
    assert not part.exists() and (tmp_path / "part.pt.resume").is_file()
    r = run_cli("train", data, "--inputs", "cameras", "--out", part, "--hz", "5", "--steps", "9", "--batch", "8",
                "--hidden", "16", "--keypoints", "4", "--conv-width", "4", "--val", "0.5", "--quiet", check=2)
    assert "steps 8 there, 9 here" in r.stderr and "part.pt.resume" in r.stderr, r.stderr
    res = bc.train(bc.TrainConfig(out=str(part), **base))
    assert res.resumed_from == 3 and full.resumed_from == 0 and not (tmp_path / "part.pt.resume").exists()
    a = torch.load(tmp_path / "full.pt", weights_only=True)
    b = torch.load(part, weights_only=True)
    assert a["curve"] == b["curve"]
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])


@pytest.mark.slow
def test_sigkilled_training_resumes_to_the_same_weights(tiny_generated, tmp_path):
    """dataset-train killed with SIGKILL once a resumable state exists, then rerun: the same weights as
    an uninterrupted run (a real process, resumable state written every step)."""
    data = str(tiny_generated["path"])
    args = ["--inputs", "cameras", "--hz", "5", "--steps", "60", "--batch", "8", "--hidden", "16", "--keypoints", "4",
            "--conv-width", "4", "--val", "0.5", "--quiet", "--checkpoint-every", "0"]
    cmd = [sys.executable, "-m", "openarm_sim_dataset.cli.train", data]
    subprocess.run(cmd + ["--out", str(tmp_path / "full.pt"), *args], env=SUBPROCESS_ENV, check=True, timeout=600)
    out = tmp_path / "killed.pt"
    p = subprocess.Popen(cmd + ["--out", str(out), *args], env=SUBPROCESS_ENV)
    resume = tmp_path / "killed.pt.resume"
    deadline = time.monotonic() + 300
    while not resume.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert resume.exists() and not out.exists(), "the run ended before it could be killed"
    bc.checkpoint.load(resume)  # never torn: it loads
    subprocess.run(cmd + ["--out", str(out), *args], env=SUBPROCESS_ENV, check=True, timeout=600)
    a, b = (torch.load(x, weights_only=True) for x in (tmp_path / "full.pt", out))
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])


def test_unusable_training_data_is_one_line(tiny_generated, tmp_path):
    """A camera the dataset does not have, a physics-only dataset for --inputs cameras: one line naming
    the dataset, exit 2, no checkpoint."""
    data = tiny_generated["path"]
    r = run_cli("train", data, "--inputs", "cameras", "--cameras", "wrist_left", "--out", tmp_path / "x.pt", *FEW, check=2)
    assert f"{data}: has no camera 'wrist_left' (it has: head)" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    from conftest import tiny_config

    from openarm_sim_dataset.sim.generate import generate

    phys = tmp_path / "phys"
    import dataclasses

    cfg = tiny_config()
    generate(phys, range(1), dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, cameras=())))
    r = run_cli("train", phys, "--inputs", "cameras", "--out", tmp_path / "x.pt", *FEW, check=2)
    assert "has no camera (physics only?)" in r.stderr and str(phys) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.pt").exists()


def test_checkpoint_inside_the_dataset_and_bad_flags_are_one_line(tiny_generated, tmp_path):
    """The checkpoint never lands inside the dataset it learns from (the source stays untouched); a bad
    flag value is one line, no usage block."""
    data = tiny_generated["path"]
    before = sorted(p.name for p in data.rglob("*"))
    r = run_cli("train", data, "--inputs", "state", "--out", data / "bc.pt", *FEW, check=2)
    assert len(r.stderr.strip().splitlines()) == 1 and "bc.pt" in r.stderr, r.stderr
    assert sorted(p.name for p in data.rglob("*")) == before
    r = run_cli("train", data, "--inputs", "state", "--out", tmp_path / "x.pt", "--steps", "many", check=2)
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "--steps" in r.stderr, r.stderr
