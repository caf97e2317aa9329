"""dataset-ensemble (openarm_sim_dataset.bc.ensemble): checkpoints trained with other seeds on a real
generated dataset joined into one checkpoint whose chunk is the mean of the members' chunks (checked
against the members run alone), which dataset-evaluate runs with no other flag and whose rollout
validates; members that read other inputs, a member given twice, an ensemble as a member and a single
checkpoint are one line, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import run_cli

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from openarm_sim_dataset import bc  # noqa: E402
from openarm_sim_dataset.bc.ensemble import combine  # noqa: E402
from openarm_sim_dataset.metadata import Metadata  # noqa: E402

#: CI only (every test here trains its members first): the default run keeps its 3-minute budget
pytestmark = pytest.mark.slow

FEW = dict(steps=4, batch=16, hidden=32, val=0.5, ensemble=0.5)


@pytest.fixture(scope="module")
def members(tiny_generated, tmp_path_factory):
    d = tmp_path_factory.mktemp("ens")
    data = str(tiny_generated["path"])
    for name, kw in (("s0", dict(seed=0)), ("s1", dict(seed=1)), ("hz10", dict(seed=2, hz=10.0)),
                     ("state", dict(seed=0, inputs="state"))):
        kw = {**FEW, "hz": 5.0, "inputs": "cameras", **kw}
        bc.train(bc.TrainConfig(dataset=data, out=str(d / f"{name}.pt"), **kw))
    return d


def _obs(h=24, w=32):
    return {"arms": {s: {"qpos": np.linspace(-0.3, 0.3, 8).astype(np.float32)} for s in ("right", "left")},
            "cameras": {"head": np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8)}}


def test_the_ensemble_plays_the_mean_of_its_members(members, tmp_path):
    out = tmp_path / "e.pt"
    r = run_cli("ensemble", members / "s0.pt", members / "s1.pt", "--out", out)
    assert "ensemble of 2" in r.stdout
    ens = bc.load_policy(out)
    solo = [bc.load_policy(members / f"{n}.pt") for n in ("s0", "s1")]
    assert ens.inputs == solo[0].inputs and "ensemble of 2" in ens.name
    cfg = ens.cfg
    assert cfg["arch"] == "ensemble" and cfg["members"] == 2 and cfg["seeds"] == [0, 1]
    assert cfg["member_sha256"] == [hashlib.sha256((members / f"{n}.pt").read_bytes()).hexdigest() for n in ("s0", "s1")]
    assert cfg["dataset_sha256"] == solo[0].cfg["dataset_sha256"]
    obs = _obs()
    for p in (ens, *solo):
        p.reset()
    chunks = [p._predict(obs, None) for p in solo]
    assert not np.allclose(chunks[0], chunks[1])  # the seeds made different networks
    np.testing.assert_allclose(ens._predict(obs, None), (chunks[0] + chunks[1]) / 2, rtol=0, atol=1e-12)
    # the members' own checkpoints, run alone, are the policy a single checkpoint was before
    a = [ens.act(obs) for _ in range(3)]
    assert all(x.shape == (16,) and np.all(np.isfinite(x)) for x in a)


def test_the_ensemble_evaluates_with_no_flag_and_its_rollout_validates(members, tmp_path):
    ckpt = combine([members / "s0.pt", members / "s1.pt"], tmp_path / "e.pt")
    out = tmp_path / "rollouts"
    r = run_cli("evaluate", "--policy", ckpt, "--out", out, "--episodes", "1", "--max-time", "1", "--quiet",
                "--seed", "10", "--json")
    assert json.loads(r.stdout)["stats"]["overall"]["end"]["episodes"] == 1
    meta = Metadata.load(out)
    assert meta.data["model"]["sha256"] == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    assert meta.data["evaluation"]["control_hz"] == 5.0 and list(meta.data["simulation"]["scene"]["cameras"]) == ["head"]
    run_cli("validate", out, "--quick", "--no-update-metadata")


@pytest.mark.parametrize("case, says", [
    ("other_rate", "hz 10.0 here, 5.0 in"),
    ("other_inputs", "inputs 'state' here, 'cameras' in"),
    ("twice", "given twice"),
    ("one", "at least two checkpoints"),
    ("nested", "is an ensemble already"),
    ("missing", "checkpoint not found"),
])
def test_a_bad_ensemble_is_one_line_and_writes_nothing(members, tmp_path, case, says):
    s0, s1 = members / "s0.pt", members / "s1.pt"
    given = {"other_rate": [s0, members / "hz10.pt"], "other_inputs": [s0, members / "state.pt"], "twice": [s0, s0],
             "one": [s0], "missing": [s0, tmp_path / "nowhere.pt"]}.get(case)
    if case == "nested":
        given = [combine([s0, s1], tmp_path / "inner.pt"), s1]
    out = tmp_path / "e.pt"
    r = run_cli("ensemble", *given, "--out", out, check=2)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and says in err and "Traceback" not in err, err
    assert not out.exists()


def test_the_ensemble_never_overwrites_a_member(members, tmp_path):
    before = (members / "s0.pt").read_bytes()
    r = run_cli("ensemble", members / "s0.pt", members / "s1.pt", "--out", members / "s0.pt", check=2)
    assert "is the input" in r.stderr and (members / "s0.pt").read_bytes() == before
