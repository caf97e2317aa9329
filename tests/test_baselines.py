"""The shipped baselines (baselines/*.pt beside their cards): each loads and takes a step with the
inputs its checkpoint records; its card names the checkpoint's bytes and training data; the card's
evaluation command needs no flag but the output, episodes and seed; (slow) the card's physics dataset
generated afresh has the content SHA-256 the card states."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SUBPROCESS_ENV, unlocked_versions

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from openarm_sim_dataset import bc  # noqa: E402
from openarm_sim_dataset.bc.baseline import content_sha256, shipped  # noqa: E402

CARDS = shipped(REPO)


def test_there_are_shipped_baselines():
    assert CARDS, "baselines/ holds no card"


@pytest.mark.parametrize("card, front", CARDS, ids=[p.stem for p, _ in CARDS])
def test_shipped_checkpoint_loads_and_steps(card, front):
    ckpt = card.parent / front["checkpoint"]
    raw = ckpt.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == front["checkpoint_sha256"], "the card names other bytes"
    pol = bc.load_policy(ckpt)
    assert pol.cfg["dataset_sha256"] == front["dataset_metadata_sha256"]
    inputs = pol.inputs
    obs = {"arms": {s: {"qpos": np.zeros(8, np.float32)} for s in ("right", "left")}}
    if inputs.cameras:
        w, h = inputs.size
        obs["cameras"] = {c: np.full((h, w, 3), 128, np.uint8) for c in inputs.cameras}
    if inputs.prompts:  # a prompt-conditioned policy is told its task
        obs["prompt"] = inputs.prompts[0]
    info = {"object_pose": np.tile([0.1, -0.2, 0.0, 1.0, 0.0, 0.0, 0.0], (3, 1))} if inputs.privileged else None
    pol.reset()
    a = pol.act(obs, info)
    assert a.shape == (16,) and np.all(np.isfinite(a))
    # from a fresh clone the evaluation runs with no other flag: the checkpoint says what it reads
    cmd = shlex.split(front["evaluate"])
    assert cmd[0] == "dataset-evaluate" and not {"--cameras", "--size", "--camera-hz"} & set(cmd), cmd
    assert cmd[cmd.index("--policy") + 1] == f"baselines/{front['checkpoint']}"
    ev = front["evaluation"]
    assert str(ev["seed"]) == cmd[cmd.index("--seed") + 1] and 0 <= ev["successes"] <= ev["episodes"]


@pytest.mark.slow
def test_card_physics_dataset_regenerates_to_its_content_sha(tmp_path):
    """The first step of every card's recipe, run again: the physics-only training set (the cards share
    it) has the content SHA-256 the card states (metadata.yaml as a document without the machine's
    and checkout's names), on any machine of the kind with the locked MuJoCo and writers (tools/constraints.txt).
    A card that states a prefix is checked on its first N episodes (OPENARM_CARD_FULL=1: on the whole recipe)."""
    if unlocked := unlocked_versions("mujoco", "numpy", "pyarrow"):
        pytest.skip("the cards' content SHA-256 hold for the locked environment: " + "; ".join(unlocked))
    seen, prefixes = {}, {}
    # (a card of a training set merged from several generations lists each)
    for phys in (p for _, f in CARDS for p in (f["physics_dataset"] if isinstance(f["physics_dataset"], list)
                                               else [f["physics_dataset"]])):
        if "prefix" in phys and not os.environ.get("OPENARM_CARD_FULL"):
            # a recipe CI cannot afford whole: its first N episodes, the same command with --episodes N
            # (episode i depends only on the seed and i: the content of the whole with its list cut at N)
            cmd = shlex.split(phys["command"])
            cmd[cmd.index("--episodes") + 1] = str(phys["prefix"]["episodes"])
            prefixes.setdefault(shlex.join(cmd), set()).add(phys["prefix"]["content_sha256"])
            continue
        seen.setdefault(phys["command"], set()).add(phys["content_sha256"])
    assert all(len(v) == 1 for v in seen.values()) and all(len(v) == 1 for v in prefixes.values())
    seen.update(prefixes)
    # recipes that differ only in --episodes share one folder, smallest first: rerunning generation with
    # more episodes extends a dataset (episode i depends only on the seed and i), as the cards' were made
    def key(command):
        cmd = shlex.split(command)
        assert cmd[0] == "dataset-generate"
        n = int(cmd[cmd.index("--episodes") + 1])
        rest = cmd[1:cmd.index("--episodes")] + cmd[cmd.index("--episodes") + 2:]
        rest[rest.index("--out") + 1] = ""
        return tuple(rest), n

    folders: dict[tuple, Path] = {}
    for command in sorted(seen, key=lambda c: key(c)[1]):
        rest, n = key(command)
        out = folders.setdefault(rest, tmp_path / f"phys{len(folders)}")
        cmd = shlex.split(command)
        cmd[cmd.index("--out") + 1] = str(out)
        r = subprocess.run([sys.executable, "-m", "openarm_sim_dataset.cli.generate", *cmd[1:], "--quiet"],
                           env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=3000)
        assert r.returncode == 0, r.stderr[-2000:]
        assert content_sha256(out) == seen[command].pop(), command


@pytest.mark.slow
def test_a_prefix_content_sha_is_that_of_the_shorter_generation(tiny_generated, tmp_path):
    """What a card's ``physics_dataset.prefix`` relies on: the content of a generation's first N
    episodes (its list cut at N) is the content of the same command with ``--episodes N``."""
    from conftest import generate_cmd

    one = tmp_path / "one"
    r = subprocess.run(generate_cmd(one, 1), env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    full = tiny_generated["path"]
    assert content_sha256(full, 1) == content_sha256(one)
    assert content_sha256(full) != content_sha256(one)
