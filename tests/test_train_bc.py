"""tools/train_bc.py: a checkpoint trained on a real generated dataset loads in dataset-evaluate, runs
an episode whose rollout validates; training is deterministic from its seed; a corrupted checkpoint
is a one-line error naming the file."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from conftest import REPO, run_cli

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from openarm_sim_dataset.metadata import Metadata  # noqa: E402

#: the evaluation of test_evaluate.py's TINY_EVAL, at tiny_generated's camera (head 32x24)
TINY_EVAL = ["--size", "32x24", "--cameras", "head", "--camera-hz", "2.5", "--max-time", "1", "--quiet", "--seed", "10"]
FEW = ["--steps", "4", "--batch", "16", "--hidden", "32", "--quiet", "--val", "0.5"]


def _tool():
    spec = importlib.util.spec_from_file_location("train_bc_under_test", REPO / "tools" / "train_bc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _train(tool, data, out, *extra) -> dict:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert tool.main([str(data), "--out", str(out), *FEW, "--json", *map(str, extra)]) == 0
    return json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def checkpoints(tiny_generated, tmp_path_factory):
    tool = _tool()
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
    r = run_cli("evaluate", "--policy", ckpt, "--out", out, "--episodes", "1", *TINY_EVAL, "--json")
    rep = json.loads(r.stdout)
    meta = Metadata.load(out)
    assert meta.operation_type == "rollout" and meta.episode_ids == ["0"]
    # the model is identified by the checkpoint's bytes
    import hashlib

    assert meta.data["model"]["sha256"] == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    assert meta.data["evaluation"]["control_hz"] == (10.0 if variant == "state" else 5.0)
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
    with pytest.raises(ValueError, match="64x48, trained on 32x24"):
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
    assert ("not a train_bc checkpoint" if damage == "foreign" else "not a readable train_bc checkpoint") in err
    assert not out.exists()  # refused before the output exists


def test_bad_training_input_is_a_one_line_error(tmp_path, capsys):
    tool = _tool()
    assert tool.main([str(tmp_path / "nowhere"), "--inputs", "state", "--out", str(tmp_path / "x.pt"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
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
    bad = run_cli("evaluate", "--policy", d / "cams.pt", "--out", tmp_path / "cams", "--episodes", "1", *tiny, check=2)
    assert "no camera 'head'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
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

    tool = checkpoints[0]
    data = tmp_path / "data"
    shutil.copytree(tiny_generated["path"], data)
    meta = data / "metadata.yaml"
    text = meta.read_text()
    assert text.count("success: true") >= 2
    meta.write_text(text.replace("success: true", "success: false", 1))
    assert _train(tool, data, tmp_path / "one.pt", "--inputs", "state", "--val", "0")["episodes"] == 1
    meta.write_text(text.replace("success: true", "success: false"))
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert tool.main([str(data), "--out", str(tmp_path / "none.pt"), "--inputs", "state", *FEW]) == 2
    assert "no successful episode" in err.getvalue() and not (tmp_path / "none.pt").exists()
