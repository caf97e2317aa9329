"""dataset-train --prompt: one camera policy for several tasks, told which by the task's prompt (a
one-hot over the training data's prompts in the network's vector input). The checkpoint records its
prompts; the policy reads ``observation["prompt"]``; the evaluator refuses a task whose prompt the
checkpoint never saw (one line, exit 2, nothing written); a rollout of a known task validates;
one-task data, and an ensemble of a conditioned and an unconditioned member, are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli, shared_build

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from openarm_sim_dataset import bc  # noqa: E402
from openarm_sim_dataset.bc.checkpoint import CheckpointError  # noqa: E402
from openarm_sim_dataset.bc.ensemble import combine  # noqa: E402
from openarm_sim_dataset.sim.tasks import TASKS  # noqa: E402

#: CI only (every test here trains on a generated two-task dataset): the default run keeps its 3-minute budget
pytestmark = pytest.mark.slow

FEW = ["--steps", "4", "--batch", "16", "--hidden", "32", "--quiet", "--val", "0", "--hz", "5", "--json"]
#: seed 11 draws tray_green for episode 0 and stack_red_on_blue for episode 1, both successful
TWO_TASKS = ["--tasks", "tray_green", "stack_red_on_blue", "--episodes", "2", "--seed", "11", "--size", "32x24",
             "--camera-hz", "2.5", "--cameras", "head", "--quiet"]
PROMPTS = sorted([TASKS["tray_green"].prompt, TASKS["stack_red_on_blue"].prompt])


@pytest.fixture(scope="module")
def two_tasks(tmp_path_factory):
    def build(out):
        run_cli("generate", "--out", str(out), *TWO_TASKS)

    data = shared_build(tmp_path_factory, "two_tasks", build)
    d = tmp_path_factory.mktemp("prompt")
    run_cli("train", data, "--inputs", "cameras", "--out", d / "prompt.pt", "--prompt", *FEW)
    run_cli("train", data, "--inputs", "cameras", "--out", d / "plain.pt", *FEW)
    return data, d


def _obs(prompt):
    return {"arms": {s: {"qpos": np.zeros(8, np.float32)} for s in ("right", "left")},
            "cameras": {"head": np.full((24, 32, 3), 128, np.uint8)}, "prompt": prompt}


@pytest.mark.slow
def test_the_checkpoint_records_its_prompts_and_the_policy_reads_them(two_tasks):
    data, d = two_tasks
    assert bc.read_inputs(d / "prompt.pt").prompts == tuple(PROMPTS)
    assert bc.read_inputs(d / "plain.pt").prompts == ()
    pol = bc.load_policy(d / "prompt.pt")
    assert pol.prompts == tuple(PROMPTS) and "conditioned on 2 prompts" in pol.name
    chunks = {}
    for p in PROMPTS:
        pol.reset()
        chunks[p] = pol._predict(_obs(p), None)
    # the same images and joints, another instruction: another chunk (the one-hot reaches the output)
    assert not np.allclose(chunks[PROMPTS[0]], chunks[PROMPTS[1]])
    pol.reset()
    with pytest.raises(ValueError, match="is not one the checkpoint was trained on"):
        pol.act(_obs(TASKS["pick_place"].prompt))
    pol.reset()
    with pytest.raises(ValueError, match="no prompt"):
        pol.act({k: v for k, v in _obs(None).items() if k != "prompt"})
    # an unconditioned policy ignores the prompt
    plain = bc.load_policy(d / "plain.pt")
    a = plain._predict(_obs(PROMPTS[0]), None)
    plain.reset()
    assert np.array_equal(a, plain._predict(_obs(PROMPTS[1]), None))


def test_an_unknown_task_is_one_line_and_a_known_one_validates(two_tasks, tmp_path):
    _, d = two_tasks
    out = tmp_path / "pick"
    r = run_cli("evaluate", "--policy", d / "prompt.pt", "--out", out, "--tasks", "pick_place", "--episodes", "1",
                "--max-time", "1", "--quiet", check=2)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "task pick_place's prompt" in err and "Traceback" not in err, err
    assert not out.exists()
    out = tmp_path / "stack"
    r = run_cli("evaluate", "--policy", d / "prompt.pt", "--out", out, "--tasks", "stack_red_on_blue", "--episodes",
                "1", "--seed", "5", "--max-time", "1", "--quiet", "--json")
    assert json.loads(r.stdout)["stats"]["overall"]["end"]["episodes"] == 1
    run_cli("validate", out, "--quick", "--no-update-metadata")


@pytest.mark.slow
def test_the_checkpoint_knows_its_tasks_and_is_evaluated_on_them_by_default(two_tasks, checkpoints_tiny, tmp_path):
    """A checkpoint records its demonstrations' task names; dataset-evaluate without --tasks runs those
    (one trained on tray_green is not evaluated on pick_place); data naming no task (the default
    generation) records none and keeps pick_place as the default."""
    _, d = two_tasks
    assert bc.read_inputs(d / "prompt.pt").tasks == ("stack_red_on_blue", "tray_green")
    assert bc.read_inputs(checkpoints_tiny).tasks == ()
    out = tmp_path / "both"
    r = run_cli("evaluate", "--policy", d / "prompt.pt", "--out", out, "--episodes", "1", "--seed", "5",
                "--max-time", "0.5", "--quiet", "--json")
    assert sorted(json.loads(r.stdout)["stats"]["tasks"]) == ["stack_red_on_blue", "tray_green"], r.stdout


@pytest.fixture(scope="module")
def checkpoints_tiny(tiny_generated, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "cams.pt"
    run_cli("train", tiny_generated["path"], "--inputs", "cameras", "--out", out, *FEW)
    return out


def test_one_task_data_and_a_mixed_ensemble_are_refused(two_tasks, tiny_generated, tmp_path):
    _, d = two_tasks
    data = tiny_generated["path"]
    r = run_cli("train", data, "--inputs", "cameras", "--out", tmp_path / "x.pt", "--prompt", *FEW, check=2)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "--prompt needs demonstrations of two or more tasks" in err, err
    assert not (tmp_path / "x.pt").exists()
    with pytest.raises(CheckpointError, match="prompts"):
        combine([d / "prompt.pt", d / "plain.pt"], tmp_path / "e.pt")
    assert not (tmp_path / "e.pt").exists()


def test_a_prompt_run_resumes_to_the_same_weights(two_tasks, tmp_path):
    data, d = two_tasks
    cfg = bc.TrainConfig(dataset=str(data), inputs="cameras", out=str(tmp_path / "r.pt"), steps=4, batch=16,
                         hidden=32, val=0.0, hz=5.0, prompt=True)
    with pytest.raises(KeyboardInterrupt):
        bc.train(cfg, stop_after=2)
    res = bc.train(cfg)
    assert res.resumed_from == 2
    a = torch.load(d / "prompt.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "r.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
