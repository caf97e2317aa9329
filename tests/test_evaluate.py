"""dataset-evaluate: rollouts as datasets (validate, replay, resume), statistics against hand-computed
cases, paired comparison, broken policies as one-line errors."""

from __future__ import annotations

import json
import math
import textwrap

import pytest
from conftest import run_cli

pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from openarm_sim_dataset.evaluate import compare, load_rollouts, paired_counts, summarize  # noqa: E402
from openarm_sim_dataset.metadata import Metadata  # noqa: E402
from openarm_sim_dataset.stats import newcombe_paired, sign_test, wilson_interval  # noqa: E402

#: a tiny evaluation: one 32x24 camera at 2.5 Hz, 1 s episodes
TINY_EVAL = ["--size", "32x24", "--cameras", "head", "--camera-hz", "2.5", "--max-time", "1", "--quiet", "--seed", "10"]


# ------------------------------------------------------------------ statistics
def test_sign_test_hand_computed():
    # 9 vs 2 discordant pairs: 2 * (C(11,0) + C(11,1) + C(11,2)) / 2**11 = 2 * 67 / 2048
    assert sign_test(9, 2) == pytest.approx(134 / 2048, abs=1e-15)
    assert sign_test(2, 9) == sign_test(9, 2)
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0
    assert sign_test(0, 6) == pytest.approx(2 / 64)  # 2 * 1/2**6


def test_newcombe_paired_hand_computed():
    # a=5 (both), b=5 (only the first), c=d=0: p1 = 1, p2 = 0.5, phi = 0 (a zero margin).
    # Wilson 95%: 10/10 -> [0.72247, 1]; 5/10 -> [0.23659, 0.76341] (textbook values).
    # L = 0.5 - sqrt((1 - 0.72247)^2 + (0.76341 - 0.5)^2) = 0.5 - sqrt(0.077023 + 0.069385) = 0.11737
    # U = 0.5 + sqrt(0 + (0.5 - 0.23659)^2) = 0.76341
    lo, hi = newcombe_paired(5, 5, 0, 0)
    assert lo == pytest.approx(0.11737, abs=2e-5) and hi == pytest.approx(0.76341, abs=2e-5)
    w = wilson_interval(5, 10)
    assert w[0] == pytest.approx(0.23659, abs=1e-5) and wilson_interval(10, 10)[0] == pytest.approx(0.72247, abs=1e-5)
    # equal discordant counts: the interval is symmetric about 0
    lo, hi = newcombe_paired(10, 4, 4, 12)
    assert lo == pytest.approx(-hi) and lo < 0 < hi
    # phi != 0, a=12 b=9 c=2 d=21 (n=44): p1 = 21/44, p2 = 14/44, phi = 234 / sqrt(21*23*14*30)
    p1, p2 = 21 / 44, 14 / 44
    l1, u1 = wilson_interval(21, 44)
    l2, u2 = wilson_interval(14, 44)
    phi = 234 / math.sqrt(21 * 23 * 14 * 30)
    assert phi == pytest.approx(0.51953, abs=1e-5)
    lo_h = (p1 - p2) - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    hi_h = (p1 - p2) + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    assert newcombe_paired(12, 9, 2, 21) == pytest.approx((lo_h, hi_h))
    # a positive correlation narrows the interval against independent samples (phi = 0)
    assert hi_h - lo_h < (p1 - p2 + math.hypot(u1 - p1, p2 - l2)) - (p1 - p2 - math.hypot(p1 - l1, u2 - p2))
    assert newcombe_paired(0, 0, 0, 0) == (-1.0, 1.0)


def test_compare_and_summary_hand_computed():
    a = {("t", 0, i): s for i, s in enumerate([1, 1, 1, 0, 0, 1, 0, 1])}
    b = {("t", 0, i): s for i, s in enumerate([1, 0, 0, 0, 1, 1, 0, 0])}
    b[("t", 0, 99)] = True  # not in a: unpaired, ignored
    t = paired_counts(a, b)
    assert t == {"pairs": 8, "both": 2, "only_a": 3, "only_b": 1, "neither": 2}
    c = compare(a, b)
    assert c["difference"] == pytest.approx(2 / 8) and c["rate_a"] == 5 / 8 and c["rate_b"] == 3 / 8
    assert c["mcnemar_exact_p"] == pytest.approx(2 * (1 + 4) / 16)  # 3 vs 1 of 4
    assert c["unpaired_b"] == 1 and c["unpaired_a"] == 0
    assert c["newcombe95"] == list(newcombe_paired(2, 3, 1, 2))
    entries = [{"id": "0", "task": "x", "success": True, "knocked_over": True, "outcome": "success", "success_any": True},
               {"id": "1", "task": "x", "success": False, "outcome": "undone", "success_any": True},
               {"id": "2", "task": "y", "success": False, "outcome": "not_done", "success_any": False}]
    s = summarize(entries, ["x", "y"])
    x = s["tasks"]["x"]
    assert x["end"]["successes"] == 1 and x["lucky"] == 1 and x["clean"]["successes"] == 0
    assert x["any_time"]["successes"] == 2 and x["failures"] == {"undone": 1}
    assert s["overall"]["end"]["wilson95"] == list(wilson_interval(1, 3))


# --------------------------------------------------------------- rollouts
@pytest.fixture(scope="module")
def zero_rollouts(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "zero"
    r = run_cli("evaluate", "--policy", "zero", "--out", out, "--episodes", "1", "--tasks", "pick_place",
                "tray_green", *TINY_EVAL, "--json")
    return out, json.loads(r.stdout)


@pytest.mark.slow
def test_rollout_dataset_validates_and_replays(zero_rollouts):
    out, report = zero_rollouts
    meta = Metadata.load(out)
    assert meta.operation_type == "rollout" and meta.data["model"]["name"] == "zero"
    assert len(meta.data["model"]["sha256"]) == 64 and meta.episode_ids == ["0", "1"]
    assert [e["task"] for e in meta.episodes] == ["pick_place", "tray_green"]
    assert report["stats"]["overall"]["end"]["successes"] == 0
    assert report["stats"]["tasks"]["tray_green"]["failures"] == {"not_done": 1}
    v = run_cli("validate", out)
    assert "valid" in v.stdout and "sim_replay" in v.stdout
    run_cli("replay", out, "--episode", "1")


@pytest.mark.slow
@pytest.mark.parametrize("change", [{"success": True, "outcome": "success"}, {"outcome": "undone"}])
def test_a_relabelled_rollout_fails_sim_labels(zero_rollouts, tmp_path, change):
    """A rollout's labels are judged again by the task's state-only rule (what the environment labelled
    it with): a flipped success, or an outcome that contradicts its success_any, fails sim_labels by name."""
    import shutil

    import yaml

    out, _ = zero_rollouts
    bad = tmp_path / "relabelled"
    shutil.copytree(out, bad)
    doc = yaml.safe_load((bad / "metadata.yaml").read_text())
    doc["episodes"][1].update(change)
    (bad / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("validate", bad, "--checks", "sim_labels", "sim_identity", "--no-update-metadata", check=1)
    assert "[FAIL] sim_labels" in r.stdout and "[pass] sim_identity" in r.stdout
    assert "rule judges" in r.stdout


@pytest.mark.slow
def test_resume_and_compare_with_a_dataset(zero_rollouts, tmp_path):
    out, _ = zero_rollouts
    import shutil

    mine = tmp_path / "again"
    shutil.copytree(out, mine)
    r = run_cli("evaluate", "--policy", "zero", "--out", mine, "--episodes", "1", "--tasks", "pick_place",
                "tray_green", *TINY_EVAL, "--compare", out, "--json")
    rep = json.loads(r.stdout)
    assert rep["made"] == 0 and rep["skipped"] == 2
    c = rep["compare"]
    assert (c["pairs"], c["only_a"], c["only_b"], c["mcnemar_exact_p"]) == (2, 0, 0, 1.0)
    # another policy's settings on the same output: refused, one line
    bad = run_cli("evaluate", "--policy", "random", "--out", mine, "--episodes", "1", "--tasks", "pick_place",
                  "tray_green", *TINY_EVAL, check=2)
    assert "another policy" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert load_rollouts(mine) == load_rollouts(out)


@pytest.mark.slow
def test_compare_with_another_policy(tmp_path):
    """--compare POLICY evaluates it on the same initial states (into --compare-out) and pairs them."""
    r = run_cli("evaluate", "--policy", "random", "--out", tmp_path / "r", "--episodes", "1", *TINY_EVAL,
                "--compare", "zero", "--compare-out", tmp_path / "z")
    assert "compared with zero on 1 paired initial states" in r.stdout and "exact McNemar p = 1" in r.stdout
    assert Metadata.load(tmp_path / "z").data["model"]["name"] == "zero"
    assert Metadata.load(tmp_path / "r").data["evaluation"]["control_hz"] == 10.0
    # the random walk's commands are ones a real arm could be given: no jump, inside the joint limits
    v = run_cli("validate", tmp_path / "r", "--quick", "--no-update-metadata")
    assert "[pass] qpos_jumps" in v.stdout and "[pass] joint_limits" in v.stdout


BAD_POLICIES = textwrap.dedent('''
    import numpy as np

    class Raises:
        name = "raiser"
        def reset(self):
            self.n = 0
        def act(self, obs):
            self.n += 1
            if self.n == 3:
                raise RuntimeError("boom\\nsecond line")
            return np.concatenate([obs["arms"]["right"]["qpos"], obs["arms"]["left"]["qpos"]])

    class Short:
        name = "short"
        def reset(self):
            pass
        def act(self, obs):
            return np.zeros(15)

    class NoAct:
        pass
''')


@pytest.mark.parametrize("factory, message", [
    ("Raises", "policy raiser (bad_policies_h19:Raises): act() raised RuntimeError at step 2: boom second line"),
    ("Short", "policy short (bad_policies_h19:Short): act() returned shape (15,) at step 0, expected (16,)"),
    ("NoAct", "has no reset() and act(observation)"),
    ("Missing", "cannot load the policy factory"),
])
def test_broken_policy_is_a_one_line_error(tmp_path, monkeypatch, factory, message):
    (tmp_path / "bad_policies_h19.py").write_text(BAD_POLICIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    r = run_cli("evaluate", "--policy", f"bad_policies_h19:{factory}", "--out", out, "--episodes", "1",
                *TINY_EVAL, check=2)
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    # nothing of the broken episode is listed
    if (out / "metadata.yaml").exists():
        assert Metadata.load(out).episodes == []


def test_initial_states_of_a_dataset(tiny_generated, tmp_path):
    """--initial-states: the dataset's own episodes (ids, seed, index), scripted: its outcomes again."""
    out = tmp_path / "from_ds"
    r = run_cli("evaluate", "--policy", "zero", "--out", out, "--initial-states", tiny_generated["path"],
                "--max-time", "1", "--json", "--quiet")
    rep = json.loads(r.stdout)
    src = Metadata.load(tiny_generated["path"])
    got = Metadata.load(out)
    assert got.episode_ids == src.episode_ids
    assert [e["seed_inputs"] for e in got.episodes] == [e["seed_inputs"] for e in src.episodes]
    assert got.simulation["scene"] == {**src.simulation["scene"]} and rep["stats"]["overall"]["end"]["successes"] == 0
    bad = run_cli("evaluate", "--policy", "zero", "--out", tmp_path / "x", "--initial-states", tmp_path, check=2)
    assert "metadata.yaml" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_initial_states_of_a_multi_task_randomised_dataset_are_its_own_bit_for_bit(mixed, tmp_path):
    """--initial-states from a dataset of every task with randomize=all (a left-arm and a bimanual
    episode): each rollout starts from its source episode's stored initial state, bit for bit, with
    the source's task, arm and variation."""
    import numpy as np

    from openarm_sim_dataset import sidecar

    out = tmp_path / "roll"
    run_cli("evaluate", "--policy", "zero", "--out", out, "--initial-states", mixed, "--cameras", "none",
            "--max-time", "0.5", "--quiet")
    src, got = Metadata.load(mixed), Metadata.load(out)
    assert got.episode_ids == src.episode_ids
    for a, b in zip(got.episodes, src.episodes):
        assert (a["task"], a["arms"], a["seed_inputs"]) == (b["task"], b["arms"], b["seed_inputs"])
        assert a.get(sidecar.VARIATION_KEY) == b.get(sidecar.VARIATION_KEY)
        ra = sidecar.load_npz(out / "episodes" / a["id"] / "sim" / sidecar.SIDECAR_FILE)
        rb = sidecar.load_npz(mixed / "episodes" / b["id"] / "sim" / sidecar.SIDECAR_FILE)
        assert np.array_equal(ra["initial_state"], rb["initial_state"]), a["id"]


@pytest.mark.slow
def test_two_workers_and_ray_write_the_same_rollouts(tmp_path):
    from conftest import tree_bytes

    args = ["--policy", "random", "--episodes", "2", *TINY_EVAL]
    run_cli("evaluate", "--out", tmp_path / "one", *args)
    run_cli("evaluate", "--out", tmp_path / "two", "--workers", "2", *args)
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")
    pytest.importorskip("ray")
    run_cli("evaluate", "--out", tmp_path / "ray", "--ray", *args)
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "ray")


def test_without_the_env_extra_one_line_and_no_output(tmp_path):
    """gymnasium missing (blocked in a fresh interpreter): the core still imports; dataset-evaluate is
    one line naming the pip install, exit 2, and no output folder."""
    import subprocess
    import sys

    from conftest import SUBPROCESS_ENV

    code = ("import sys; sys.modules['gymnasium'] = None\n"
            "import openarm_sim_dataset, openarm_sim_dataset.evaluate, openarm_sim_dataset.policies\n"
            "from openarm_sim_dataset.cli.evaluate import main\n"
            f"sys.exit(main(['--policy', 'zero', '--out', {str(tmp_path / 'out')!r}, '--episodes', '1']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("dataset-evaluate: error: openarm_sim_dataset.env needs gymnasium: "
                                "pip install 'openarm-sim-dataset[env]'")
    assert not (tmp_path / "out").exists()
