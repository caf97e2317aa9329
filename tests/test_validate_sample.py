"""Sampled validation (validate/sampling.py, dataset-validate --sample): the exact bound, the seeded
stratified draw, a replay fault caught when sampled and bounded when not, and what metadata.yaml keeps."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml
from conftest import run_cli
from corrupt import plant

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.core.stats import clopper_pearson
from openarm_sim_dataset.validate.registry import SAMPLED_CHECKS, check_table, families
from openarm_sim_dataset.validate.sampling import Sample, draw_sample


@pytest.mark.parametrize("k, n", [(0, 1), (0, 300), (1, 300), (6, 300), (3, 10), (10, 10), (0, 10_000), (200, 10_000),
                                  (37, 91)])
def test_bounds_equal_scipys_beta_quantiles(k, n):
    """Clopper-Pearson bounds are quantiles of the beta distribution: the hand-written exact sums agree
    with scipy's to 1e-9 (the library is the oracle of the tests, not a dependency of the core)."""
    beta = pytest.importorskip("scipy.stats").beta
    lo, hi = clopper_pearson(k, n, 0.95)
    assert hi == pytest.approx(1.0 if k == n else beta.ppf(0.95, k + 1, n - k), abs=1e-9)
    assert lo == pytest.approx(0.0 if k == 0 else beta.ppf(0.05, k, n - k + 1), abs=1e-9)
    assert clopper_pearson(0, 300)[1] < 0.01  # the figure the documentation quotes: 0 of 300, at most 1.0%
    with pytest.raises(ValueError):
        clopper_pearson(3, 2)


def _fake(strata: dict[tuple[str, str], int]) -> SimpleNamespace:
    episodes, i = [], 0
    for (task, arm), count in strata.items():
        for _ in range(count):
            episodes.append({"id": str(i), "task": task, "arms": arm})
            i += 1
    return SimpleNamespace(meta=SimpleNamespace(episodes=episodes)), [e["id"] for e in episodes]


def test_the_draw_is_seeded_proportional_to_each_stratum_and_covers_every_one():
    ds, ids = _fake({("pick_place", "right"): 600, ("tray_blue", "left"): 300, ("bimanual_tray", "both"): 100})
    a = draw_sample(ds, ids, 50, seed=4)
    assert a == draw_sample(ds, ids, 50, seed=4) and a != draw_sample(ds, ids, 50, seed=5)
    assert len(a) == len(set(a)) == 50 and set(a) <= set(ids)
    entries = {e["id"]: e for e in ds.meta.episodes}
    per = {}
    for ep in a:
        per[entries[ep]["task"]] = per.get(entries[ep]["task"], 0) + 1
    assert per == {"pick_place": 30, "tray_blue": 15, "bimanual_tray": 5}
    # a rare stratum still gets one episode once the sample reaches the number of strata
    ds, ids = _fake({("pick_place", "right"): 997, ("stack", "right"): 3})
    assert any(int(ep) >= 997 for ep in draw_sample(ds, ids, 2, seed=0))
    assert draw_sample(ds, ids, 5000, seed=0) == ids  # at least the whole population: every episode
    assert Sample(fraction=0.01).count(10_000) == 100 and Sample(fraction=0.001).count(10) == 1


def test_the_sampled_checks_are_rows_of_the_registry():
    names = {n for _, rows, _ in families() for n, _ in rows}
    assert SAMPLED_CHECKS <= names
    cheap = [n for n, _ in check_table({"schema_version": 2}) if n not in SAMPLED_CHECKS]
    assert "integrity" in cheap and "sim_streams_agree" in cheap and "sim_replay" not in cheap


def _sampled(report: dict) -> list[str]:
    return report["sample"]["sampled"]


def test_a_replay_fault_fails_when_sampled_and_is_bounded_when_not(generated, tmp_path):
    """A fault only the replay can see (one frame's stored warm-start, manifests re-sealed) in episode 1 of
    two: a sample of one that draws it fails sim_replay, naming it, with a bound that excludes 0; one that
    draws episode 0 passes with the bound stated, every episode form-checked; metadata.yaml keeps which
    episodes were checked fully and the seed that draws them again."""
    ds = tmp_path / "ds"
    bad = plant(generated, ds, "state_warmstart", reseal=True)
    seeds = {}
    for seed in range(20):
        seeds.setdefault(draw_sample(Dataset(ds), ["0", "1"], 1, seed)[0], seed)
    assert set(seeds) == {"0", "1"}

    hit = run_cli("validate", str(ds), "--sample", "1", "--seed", str(seeds[bad]), "--json", check=1)
    doc = json.loads(hit.stdout)
    assert _sampled(doc) == [bad] and doc["episodes"][bad] is False
    rows = {r["check"]: r for r in doc["rows"]}
    assert rows["sim_replay"]["status"] == "fail" and rows["sim_replay"]["episodes"] == [bad]
    assert "[on the 1 sampled episodes]" in rows["sim_replay"]["detail"]
    assert rows["integrity"]["status"] == "pass"  # re-sealed: only the meaning check can tell
    sim = next(b for b in doc["sample"]["bounds"] if b["family"] == "simulation")
    assert sim["failed"] == [bad] and sim["lower"] > 0 and sim["upper"] == 1.0

    miss = run_cli("validate", str(ds), "--sample", "1", "--seed", str(seeds["0"]), check=0)
    assert "sampled: 1 of 2 episodes fully checked (seed" in miss.stdout
    assert "simulation: 0 of 1 sampled episodes fail (" in miss.stdout and "at most 95.0% of the 2 would (95%)" in miss.stdout
    doc = yaml.safe_load((ds / "metadata.yaml").read_text())
    assert {e["id"]: e["checked"] for e in doc["episodes"]} == {"0": "full", "1": "form"}
    assert doc["validation"]["seed"] == seeds["0"] and doc["validation"]["sampled"] == ["0"]
    assert Dataset(ds).validate(checks=["metadata"])  # the record is a valid document of ours
    openarm_dataset = pytest.importorskip("openarm_dataset")
    assert openarm_dataset.Dataset(str(ds)).num_episodes == 2  # and the reference reads it

    # a whole run replaces the sampled record: its verdict is of every check on every episode
    run_cli("validate", str(ds), "--checks", "metadata", "sim_replay", check=1)
    doc = yaml.safe_load((ds / "metadata.yaml").read_text())
    assert "validation" not in doc and all("checked" not in e for e in doc["episodes"])


@pytest.mark.parametrize("args, words", [(["--sample", "0"], "--sample must be at least 1"),
                                         (["--sample-fraction", "1.5"], "--sample-fraction must be in (0, 1]"),
                                         (["--sample", "3", "--quick"], "--quick runs none of the checks"),
                                         (["--sample", "3", "--sample-fraction", "0.1"], "not allowed with")])
def test_bad_sample_options_are_one_line_and_exit_2(generated, args, words):
    r = run_cli("validate", str(generated), *args, "--no-update-metadata", check=2)
    assert words in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_workers_draw_and_judge_the_same_sample(generated, tmp_path):
    """--workers 2 runs the groups in two processes: the same sample, rows and bounds as one process."""
    one = json.loads(run_cli("validate", str(generated), "--sample", "1", "--seed", "2", "--json",
                             "--no-update-metadata").stdout)
    two = json.loads(run_cli("validate", str(generated), "--sample", "1", "--seed", "2", "--json", "--workers", "2",
                             "--no-update-metadata").stdout)
    assert one["sample"] == two["sample"]
    assert [(r["check"], r["status"], r["episodes"]) for r in one["rows"]] == \
        [(r["check"], r["status"], r["episodes"]) for r in two["rows"]]


def test_the_verdict_is_written_into_the_document_as_it_is_and_never_under_a_writer(generated, tmp_path):
    """An episode committed while a validation ran stays listed (the verdict goes into metadata.yaml as it
    is when written, under the writers' lock); while a writer holds the lock, nothing is written and one
    line says so, the verdict printed and its exit status kept."""
    from openarm_sim_dataset.core.lock import OutputLock
    from openarm_sim_dataset.core.metadata import Metadata
    from openarm_sim_dataset.validate import valid_flags, validate, write_valid_flags

    ds_path = tmp_path / "ds"
    import shutil

    shutil.copytree(generated, ds_path)
    ds = Dataset(ds_path)
    rows = validate(ds, checks=["metadata", "episode_folders"])
    # a writer commits a third episode meanwhile (here: its entry, as a fold would write it)
    meta = Metadata.load(ds_path)
    meta.episodes.append(dict(meta.episodes[0], id="2"))
    meta.write(ds_path)
    write_valid_flags(ds, valid_flags(ds, rows))
    doc = yaml.safe_load((ds_path / "metadata.yaml").read_text())
    assert [e["id"] for e in doc["episodes"]] == ["0", "1", "2"]
    assert [e.get("valid") for e in doc["episodes"]] == [True, True, None]

    before = (ds_path / "metadata.yaml").read_bytes()
    lock = OutputLock(ds_path)
    try:
        r = run_cli("validate", str(ds_path), "--checks", "metadata", check=0)
    finally:
        lock.release()
    assert "not updated: another process is writing this dataset (lock held)" in r.stderr and "valid" in r.stdout
    assert (ds_path / "metadata.yaml").read_bytes() == before
