"""dataset-merge: compatibility refusals, task dedup, renumbering, links, atomicity, sources untouched."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml
from conftest import REPO, assert_reads_like_reference, fixture_path, run_cli, tiny_config, tree_hashes

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.synthetic import write_synthetic

pytest.importorskip("mujoco")

from openarm_sim_dataset.sim.generate import generate  # noqa: E402

#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_merge")

def cli(*args, check: int | None = 0):
    return run_cli("merge", *args, check=check)


def edit_meta(root: Path, fn) -> None:
    path = root / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="module")
def gen(tmp_path_factory, tiny_generated) -> dict[str, Path]:
    """Shards A (episode 0) and B (episode 1) generated apart, in this process; ``whole``: the session's
    one generation of episodes 0-1 with the same settings by dataset-generate (conftest.TINY)."""
    base = tmp_path_factory.mktemp("merge_gen")
    out = {"A": base / "A", "B": base / "B", "whole": tiny_generated["path"]}
    generate(out["A"], range(0, 1), tiny_config())
    generate(out["B"], range(1, 2), tiny_config())
    return out


@pytest.fixture()
def synth(tmp_path) -> tuple[Path, Path]:
    a = write_synthetic(tmp_path / "sa", episodes=2, seconds=1.0, camera_hz=10, size=(32, 24))
    b = write_synthetic(tmp_path / "sb", episodes=1, seconds=1.0, camera_hz=10, size=(32, 24), seed=3)
    return a, b


@pytest.mark.slow
def test_merge_of_shards_equals_one_generation(gen, tmp_path):
    before = {k: tree_hashes(gen[k]) for k in ("A", "B")}
    out = tmp_path / "merged"
    r = cli(gen["A"], gen["B"], "-o", out)
    assert "2 episode(s)" in r.stdout and "frames" in r.stdout
    merged, whole = tree_hashes(out), tree_hashes(gen["whole"])
    episode_files = {k for k in whole if k.startswith("episodes/")}
    assert any("/sim/sidecar.npz" in k for k in episode_files) and any(k.endswith(".jpeg") for k in episode_files)
    assert {k: merged[k] for k in episode_files} == {k: whole[k] for k in episode_files}
    assert {k for k in merged if k.startswith("episodes/")} == episode_files
    m, w = Dataset(out), Dataset(gen["whole"])
    assert [{k: v for k, v in ep.items() if k != "source"} for ep in m.episodes] == w.episodes
    assert m.meta.simulation["model_sha256"] == w.meta.simulation["model_sha256"]
    # renumbering map: (input folder, original id) per new episode
    assert [ep["source"] for ep in m.episodes] == [
        {"dataset": str(gen["A"].resolve()), "id": "0"}, {"dataset": str(gen["B"].resolve()), "id": "1"}]
    assert [x["dataset"] for x in m.meta.data["merged_from"]] == [str(gen["A"].resolve()), str(gen["B"].resolve())]
    assert {k: tree_hashes(gen[k]) for k in ("A", "B")} == before  # inputs' bytes unchanged
    assert assert_reads_like_reference(out) > 1000  # openarm_dataset reads the merge


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


REFUSALS = {
    "version": "format version",
    "equipment": "equipment differs",
    "frequencies": "frequencies differs",
    "model_sha256": "simulation.model_sha256",
    "mujoco_version": "simulation.mujoco_version",
    "recorded_vs_simulated": "is a recorded dataset",
}


@pytest.mark.slow
@pytest.mark.parametrize("rule", sorted(REFUSALS))
def test_each_incompatibility_is_refused_with_a_clear_message(rule, gen, tmp_path):
    a = gen["A"]
    if rule == "version":
        a, b = fixture_path("own", "dataset_0.4.0"), fixture_path("own", "dataset_0.3.0")
    else:
        b = _copy(gen["B"], tmp_path / "b")
        edits = {
            "equipment": lambda d: d["equipment"].update(id="other-cell"),
            "frequencies": lambda d: d["frequencies"]["cameras"].update(head=10.0),
            "model_sha256": lambda d: d["simulation"].update(model_sha256="0" * 64),
            "mujoco_version": lambda d: d["simulation"].update(mujoco_version="3.3.0"),
            "recorded_vs_simulated": lambda d: d.pop("simulation"),
        }
        edit_meta(b, edits[rule])
    before = tree_hashes(b)
    out = tmp_path / "out"
    r = cli(a, b, "-o", out, check=2)
    assert REFUSALS[rule] in r.stderr and str(b) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".tmp-out*"))
    assert tree_hashes(b) == before
    if rule in ("model_sha256", "mujoco_version", "recorded_vs_simulated"):
        assert "--allow-mixed-provenance" in r.stderr


@pytest.mark.slow
def test_allow_mixed_provenance_keeps_each_episodes_provenance(gen, tmp_path):
    b = _copy(gen["B"], tmp_path / "b")
    edit_meta(b, lambda d: d["simulation"].update(model_sha256="f" * 64, mujoco_version="3.3.0"))
    out = tmp_path / "out"
    cli(gen["A"], b, "-o", out, "--allow-mixed-provenance", "-q")
    eps = Dataset(out).episodes
    assert eps[0]["provenance"]["model_sha256"] == Dataset(gen["A"]).meta.simulation["model_sha256"]
    assert eps[1]["provenance"] == {**eps[1]["provenance"], "model_sha256": "f" * 64, "mujoco_version": "3.3.0"}
    assert Dataset(out).meta.simulation["mixed_provenance"]
    rec = write_synthetic(tmp_path / "rec", episodes=1, seconds=0.5, camera_hz=5, size=(32, 24))
    edit_meta(rec, lambda d: d.update(equipment=Dataset(gen["A"]).meta.to_dict()["equipment"],
                                      frequencies=Dataset(gen["A"]).meta.to_dict()["frequencies"]))
    cli(gen["A"], rec, "-o", tmp_path / "out2", "--allow-mixed-provenance", "-q")
    assert Dataset(tmp_path / "out2").episodes[1]["provenance"] == {"recorded": True}


def test_usage_refusals(synth, tmp_path):
    a, b = synth
    r = cli(a, "-o", tmp_path / "o1", check=2)
    assert "At least two" in r.stderr
    r = cli(a, a, "-o", tmp_path / "o2", check=2)
    assert "given twice" in r.stderr
    (tmp_path / "exists").mkdir()
    r = cli(a, b, "-o", tmp_path / "exists", check=2)
    assert "already exists" in r.stderr
    before = tree_hashes(a)
    r = cli(a, b, "-o", a / "inner", check=2)
    assert "inside the input" in r.stderr and not (a / "inner").exists() and tree_hashes(a) == before
    r = cli(a, tmp_path / "nope", "-o", tmp_path / "o3", check=2)
    assert "nope: no such folder" in r.stderr


@pytest.mark.slow
def test_inputs_sharing_an_identical_episode_are_refused_naming_both(gen, synth, tmp_path):
    """Issue 26 item 7: an episode of one input identical to one of another (same obs/action streams and
    initial state: the digest duplicate_episodes compares) is one line naming both, exit 2, nothing
    written; --allow-duplicates merges, and the validator then fails the copy (what the refusal prevents)."""
    a, whole = gen["A"], gen["whole"]  # A is episode 0 of the same run as whole's episodes 0-1
    before = tree_hashes(a)
    out = tmp_path / "out"
    r = cli(a, whole, "-o", out, check=2)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert f"{whole / 'episodes' / '0'}: is identical to {a / 'episodes' / '0'}" in r.stderr, r.stderr
    assert "--allow-duplicates" in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".tmp-out*")) and tree_hashes(a) == before
    cli(a, gen["B"], "-o", tmp_path / "shards", "-q")  # different episodes of one run: merged as before
    cli(a, whole, "-o", out, "--allow-duplicates", "-q")
    row = {r.check: r for r in Dataset(out).validate(checks=["duplicate_episodes"])}["duplicate_episodes"]
    assert row.failed and row.episodes == ["1"], row
    # recorded data: a dataset merged with its own copy
    rec, _ = synth
    copy = _copy(rec, tmp_path / "copy")
    r = cli(rec, copy, "-o", tmp_path / "o2", check=2)
    assert f"{copy / 'episodes' / '0'}: is identical to {rec / 'episodes' / '0'}" in r.stderr, r.stderr
    assert not (tmp_path / "o2").exists()


def test_drop_in_merge_datasets_merges_a_dataset_with_its_copy_with_a_warning(synth, tmp_path):
    """The drop-in ``merge_datasets`` keeps openarm_dataset's contract (its own tests merge a fixture with
    its copy): identical episodes are merged, with one DuplicateEpisodesWarning line naming them and the
    inputs, pointing at the caller; ``merge()`` and ``dataset-merge`` still refuse them. The output opens
    (here and in the reference) and dataset-validate's duplicate_episodes fails it."""
    from openarm_sim_dataset.merge import DuplicateEpisodesWarning, MergeError, merge, merge_datasets

    a = _copy(fixture_path("ref", "dataset_0.3.0"), tmp_path / "dataset_a")
    b = _copy(a, tmp_path / "dataset_b")
    before = tree_hashes(a)
    out = tmp_path / "merged"
    with pytest.warns(DuplicateEpisodesWarning) as rec:
        merge_datasets([a, b], out)
    assert issubclass(DuplicateEpisodesWarning, UserWarning) and len(rec) == 1
    msg = str(rec[0].message)
    assert "\n" not in msg and rec[0].filename == __file__, (msg, rec[0].filename)
    assert f"episodes 0, 3 of {b} (output 2, 3) are identical to episodes 0, 3 of {a} (output 0, 1)" in msg, msg
    assert "--allow-duplicates" in msg and "duplicate_episodes" in msg
    ds = Dataset(out)
    assert ds.num_episodes == 4 and tree_hashes(a) == before
    assert [(Path(ep["source"]["dataset"]).name, ep["source"]["id"]) for ep in ds.episodes] == [
        ("dataset_a", "0"), ("dataset_a", "3"), ("dataset_b", "0"), ("dataset_b", "3")]
    assert assert_reads_like_reference(out) > 0
    row = {r.check: r for r in ds.validate(checks=["duplicate_episodes"])}["duplicate_episodes"]
    assert row.failed and row.episodes == ["2", "3"], row
    # this package's own API and tool refuse the same inputs, nothing written
    with pytest.raises(MergeError, match=r"is identical to .*--allow-duplicates"):
        merge([a, b], tmp_path / "api")
    r = cli(a, b, "-o", tmp_path / "tool", check=2)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert f"{b / 'episodes' / '0'}: is identical to {a / 'episodes' / '0'}" in r.stderr, r.stderr
    assert not (tmp_path / "api").exists() and not (tmp_path / "tool").exists()
    # inputs without a shared episode: no warning
    sa, sb = synth
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateEpisodesWarning)
        merge_datasets([sa, sb], tmp_path / "distinct")
    assert Dataset(tmp_path / "distinct").num_episodes == 3


def test_tasks_with_the_same_prompt_become_one_task(synth, tmp_path):
    a, b = synth
    edit_meta(a, lambda d: d.update(tasks=[{"prompt": "pick"}, {"prompt": "place"}],
                                    episodes=[dict(d["episodes"][0], task_index=1), dict(d["episodes"][1], task_index=0)]))
    edit_meta(b, lambda d: d.update(tasks=[{"prompt": "wipe"}, {"prompt": "pick", "description": "dup"}],
                                    episodes=[dict(d["episodes"][0], task_index=1, success=False)]))
    c = write_synthetic(tmp_path / "sc", episodes=1, seconds=1.0, camera_hz=10, size=(32, 24), seed=5)  # not sa's 0
    edit_meta(c, lambda d: d.update(tasks=[{"prompt": "wipe"}], episodes=[dict(d["episodes"][0], task_index=0)]))
    out = tmp_path / "out"
    cli(a, b, c, "-o", out, "-q")
    ds = Dataset(out)
    assert [t["prompt"] for t in ds.meta.tasks] == ["pick", "place", "wipe"]
    assert [ep["task_index"] for ep in ds.episodes] == [1, 0, 0, 2]
    assert ds.episode_ids == ["0", "1", "2", "3"]
    assert [ep["success"] for ep in ds.episodes] == [True, True, False, True]
    assert [(Path(ep["source"]["dataset"]).name, ep["source"]["id"]) for ep in ds.episodes] == [
        ("sa", "0"), ("sa", "1"), ("sb", "0"), ("sc", "0")]
    od = pytest.importorskip("openarm_dataset")
    ref = od.Dataset(out)
    assert [ref.meta.data["tasks"][ep["task_index"]]["prompt"] for ep in ref.meta.episodes] == ["place", "pick", "pick", "wipe"]


def test_link_hard_links_and_never_symlinks(synth, tmp_path):
    a, b = synth
    before = tree_hashes(a)
    out = tmp_path / "out"
    cli(a, b, "--link", "-o", out, "-q")
    files = [p for p in out.rglob("*") if p.is_file()]
    assert not [p for p in out.rglob("*") if p.is_symlink()]
    src = a / "episodes/1/obs/arms/right/state.parquet"
    dst = out / "episodes/1/obs/arms/right/state.parquet"
    assert os.stat(src).st_ino == os.stat(dst).st_ino and len(files) > 20
    # this package's writers replace files by rename: rewriting the output never reaches the source
    from openarm_sim_dataset.streams import read_table, write_table
    write_table(dst, read_table(dst).slice(0, 3))
    assert tree_hashes(a) == before and os.stat(src).st_ino != os.stat(dst).st_ino
    # copy mode: independent inodes
    cli(a, b, "-o", tmp_path / "copied", "-q")
    assert os.stat(tmp_path / "copied/episodes/1/obs/arms/right/state.parquet").st_ino != os.stat(src).st_ino


def test_old_layouts_merge_into_0_4_0(tmp_path):
    src = fixture_path("own", "dataset_0.1.0")
    b = _copy(src, tmp_path / "copy")
    out = tmp_path / "out"
    cli(src, b, "-o", out, "-q", "--allow-duplicates")
    ds = Dataset(out)
    assert ds.version == "0.4.0" and ds.num_episodes == 2 * Dataset(src).num_episodes
    n = len(Dataset(src).episode_ids)
    for i in range(ds.num_episodes):
        o, s = ds.load_obs(i), Dataset(src).load_obs(i % n)
        assert list(o) == list(s) and all(o[k].equals(s[k]) for k in o)
    assert assert_reads_like_reference(out) > 0


@pytest.mark.slow
def test_merge_killed_midway_leaves_no_output(tmp_path):
    a = write_synthetic(tmp_path / "a", episodes=8, seconds=2.0, camera_hz=30, size=(32, 24))
    b = write_synthetic(tmp_path / "b", episodes=8, seconds=2.0, camera_hz=30, size=(32, 24), seed=1)
    before = tree_hashes(a) | {"b/" + k: v for k, v in tree_hashes(b).items()}
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "openarm_sim_dataset.cli.merge", str(a), str(b), "-o", str(out), "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    killed_with_tmp = False
    while time.time() < deadline and proc.poll() is None:
        tmps = list(tmp_path.glob(".tmp-out.*"))
        if tmps and (tmps[0] / "episodes" / "2").exists():
            proc.send_signal(signal.SIGKILL)
            killed_with_tmp = True
            break
        time.sleep(0.005)
    proc.wait()
    assert killed_with_tmp, "merge finished before it could be killed"
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    assert list(tmp_path.glob(".tmp-out.*"))  # the half-built temporary folder is all that is left
    assert tree_hashes(a) | {"b/" + k: v for k, v in tree_hashes(b).items()} == before
    # the next merge removes the dead run's leftover and completes
    cli(a, b, "-o", out, "-q")
    assert Dataset(out).num_episodes == 16 and not list(tmp_path.glob(".tmp-out.*"))


def _session(out: Path, period_ns: int, episodes: int = 2) -> Path:
    """A recording session of the recorder (measured rates replace the declared 250 Hz)."""
    import numpy as np

    from openarm_sim_dataset.record import Recorder
    from openarm_sim_dataset.synthetic import MID_QPOS

    meta = {"tasks": [{"prompt": "Wave.", "description": "Wave."}],
            "equipment": {"id": "rig", "version": "1", "embodiments": {"arms": {"id": "OpenArm", "version": "2"}},
                          "perceptions": {"cameras": {}}},
            "frequencies": {k: {"arms": {"right": 250.0, "left": 250.0}} for k in ("obs", "action")}}
    with Recorder(out, meta, stale_after_s=None) as rec:
        for e in range(episodes):
            ep = rec.start_episode()
            for i in range(300):
                t = 1_772_000_000_000_000_000 + e * 10**10 + i * period_ns
                for side in ("right", "left"):
                    q = (MID_QPOS[side] + 0.1 * np.sin(i * 0.02 + np.arange(8))).astype(np.float32)
                    ep.add_obs(f"arms/{side}", t, qpos=q, qvel=np.full(8, 0.1 * 0.02 * 250, np.float32) * np.cos(i * 0.02 + np.arange(8)).astype(np.float32))
                    ep.add_action(f"arms/{side}", t, qpos=q)
            ep.save()
    return out


@pytest.mark.slow
def test_recording_sessions_whose_measured_rates_differ_slightly_merge(tmp_path):
    a = _session(tmp_path / "a", 4_000_000)        # 250.0 Hz
    b = _session(tmp_path / "b", 4_016_000)        # 249.0 Hz: the same rig, another session
    c = _session(tmp_path / "c", 10_000_000, 1)    # 100 Hz: another configuration
    fa = yaml.safe_load((a / "metadata.yaml").read_text())["frequencies"]
    fb = yaml.safe_load((b / "metadata.yaml").read_text())["frequencies"]
    assert fa != fb  # what made dataset-merge refuse two sessions of one rig
    run_cli("merge", a, b, "-o", tmp_path / "ab")
    meta = yaml.safe_load((tmp_path / "ab/metadata.yaml").read_text())
    assert meta["frequencies"]["obs"]["arms"]["right"] == pytest.approx(249.5, abs=0.11)  # of all 4 episodes
    from openarm_sim_dataset.validate.core import validate

    assert len(meta["episodes"]) == 4 and validate(Dataset(tmp_path / "ab")).valid
    r = run_cli("merge", a, c, "-o", tmp_path / "ac", check=2)
    assert "frequencies differs" in r.stderr and not (tmp_path / "ac").exists()


@pytest.mark.slow  # two randomised generations and a full validate: ~8 s
def test_randomised_runs_of_two_seeds_merge_into_a_dataset_that_validates(tmp_path):
    """Each merged episode's variation is the one its own seed draws (seed_inputs), not the merged
    dataset's first seed: no false alarm on a merge of two randomised runs."""
    import dataclasses

    from openarm_sim_dataset.validate.core import validate

    base = tiny_config()
    ins = []
    for seed in (3, 4):
        cfg = dataclasses.replace(base, seed=seed, randomize="physics",
                                  scene=dataclasses.replace(base.scene, cameras=()))
        generate(tmp_path / f"s{seed}", range(0, 1), cfg)
        ins.append(tmp_path / f"s{seed}")
    cli(*ins, "-o", tmp_path / "m")
    report = validate(Dataset(tmp_path / "m"))
    failed = {r.check: r.detail for r in report if r.failed}
    assert not failed, failed
    assert any(r.check == "sim_provenance" and r.passed and not r.skipped for r in report)


def test_rollouts_of_two_policies_are_refused_and_two_seeds_of_one_merge(tmp_path):
    """The dataset keeps one ``evaluation:`` and one ``model:`` block, and its validation re-derives each
    episode's commands and labels from them: rollouts of the zero and the random policy are refused (with
    or without --allow-mixed-provenance), naming the key; two seeds of one policy merge and validate."""
    short = ["--cameras", "none", "--episodes", "1", "--max-time", "1", "--quiet"]
    for name, policy, seed in (("zero", "zero", "3"), ("random", "random", "3"), ("zero4", "zero", "4")):
        run_cli("evaluate", "--policy", policy, "--seed", seed, "--out", tmp_path / name, *short)
    for extra in ((), ("--allow-mixed-provenance",)):
        r = cli(tmp_path / "zero", tmp_path / "random", "-o", tmp_path / "out", *extra, check=2)
        line = r.stderr.strip()
        assert len(line.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
        assert "evaluation.policy ('zero' vs 'random')" in line and str(tmp_path / "random") in line, line
        assert not (tmp_path / "out").exists()
    cli(tmp_path / "zero", tmp_path / "zero4", "-o", tmp_path / "seeds")
    ds = Dataset(tmp_path / "seeds")
    from openarm_sim_dataset.validate import validate

    report = validate(ds)
    assert report.valid, [(r.check, r.detail) for r in report if r.failed]
