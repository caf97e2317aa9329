"""Committing in constant time (journal.py) and opening in constant time (metadata_index.py).

Real parts: episodes written by the writers' commit path into real folders, metadata.yaml read back by
our reader and by openarm_dataset, a generation SIGKILLed in the journal's regime (slow), and a
10,000-episode dataset read by openarm_dataset (slow).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import REPO, SUBPROCESS_ENV, tree_bytes
from openarm_sim_dataset import Dataset, Metadata, layout
from openarm_sim_dataset import journal as journal_mod
from openarm_sim_dataset import metadata_index
from openarm_sim_dataset.errors import MetadataError
from openarm_sim_dataset.writer import EpisodeData, close_log, commit_episode


def physics_only(ds: Dataset, ep) -> EpisodeData:
    data = ds.episode_data(ep)
    return EpisodeData(obs=data.obs, action=data.action, files=data.files)


def empty_copy(src: Path, out: Path) -> Metadata:
    """``src``'s metadata with no episode, written to ``out`` (a dataset a writer starts)."""
    meta = Dataset(src).meta.copy()
    meta.data["episodes"] = []
    out.mkdir(parents=True)
    meta.write(out)
    return Metadata.load(out)


def yaml_ids(root: Path) -> list[str]:
    return [str(e["id"]) for e in yaml.safe_load((root / "metadata.yaml").read_text())["episodes"] or []]


# ------------------------------------------------------------------------------------- journal
def test_commits_go_to_the_journal_and_fold_into_canonical_yaml(generated, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENARM_SIM_FOLD_EVERY", "3")
    src = Dataset(generated)
    out = tmp_path / "ds"
    meta = empty_copy(generated, out)
    data = physics_only(src, 0)
    entry = dict(src.episodes[0])
    for i in range(2):
        commit_episode(out, meta, dict(entry, id=str(i)), data)
    # committed (folders in place, journal lines) but not folded: our reader lists them, metadata.yaml not yet
    assert yaml_ids(out) == []
    assert len((out / layout.JOURNAL_FILE).read_bytes().splitlines()) == 2
    assert Dataset(out).episode_ids == ["0", "1"]
    od = pytest.importorskip("openarm_dataset")
    assert len(od.Dataset(out).meta.episodes) == 0  # the reference reads a valid dataset lacking the newest
    commit_episode(out, meta, dict(entry, id="2"), data)  # the third commit folds
    assert yaml_ids(out) == ["0", "1", "2"] and not (out / layout.JOURNAL_FILE).exists()
    commit_episode(out, meta, dict(entry, id="3"), data)
    close_log(out, meta)  # the writer's end folds the rest
    assert yaml_ids(out) == ["0", "1", "2", "3"] and not (out / layout.JOURNAL_FILE).exists()
    # a fold writes the bytes a whole dump of the document writes (appending rendered entries is exact)
    loaded = Metadata.load(out)
    assert (out / "metadata.yaml").read_bytes() == loaded.dump()
    assert yaml.safe_load((out / "metadata.yaml").read_text()) == loaded.to_dict()
    assert [str(e["id"]) for e in od.Dataset(out).meta.episodes] == ["0", "1", "2", "3"]
    # (physics-only copies of one episode: the checks of the listing and the files, not of cameras or duplicates)
    report = Dataset(out).validate(simulation=False, checks=["metadata", "episode_folders", "integrity",
                                                             "parquet_schema", "timestamps"])
    assert report.valid and len(report) == 5, [(r.check, r.detail) for r in report if r.status == "fail"]


def test_a_torn_last_journal_line_is_ignored_and_the_next_writer_folds(generated, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENARM_SIM_FOLD_EVERY", "100")
    src = Dataset(generated)
    out = tmp_path / "ds"
    meta = empty_copy(generated, out)
    data = physics_only(src, 0)
    for i in range(2):
        commit_episode(out, meta, dict(src.episodes[0], id=str(i)), data)
    journal = out / layout.JOURNAL_FILE
    intact = journal.read_bytes()
    # a kill in the middle of appending the third line: no newline, half an object
    journal.write_bytes(intact + b'{"id":"2","succ')
    assert Dataset(out).episode_ids == ["0", "1"]
    # the next writer (a resumed generation) folds the journal before appending to it
    meta2 = Metadata.load(out)
    commit_episode(out, meta2, dict(src.episodes[0], id="2"), data)
    assert yaml_ids(out) == ["0", "1"]  # folded at the writer's start; "2" is in a fresh journal
    assert journal.read_bytes().count(b"\n") == 1
    close_log(out, meta2)
    assert yaml_ids(out) == ["0", "1", "2"] and not journal.exists()
    # a bad line before the last one is damage, not a kill: one line naming the journal
    journal.write_bytes(b"not json\n" + intact)
    with pytest.raises(MetadataError, match=r"metadata\.journal.*line 1"):
        Metadata.load(out)
    r = subprocess.run([sys.executable, "-m", "openarm_sim_dataset.cli.info", str(out)], env=SUBPROCESS_ENV,
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "metadata.journal" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_writer_with_nothing_to_commit_still_folds_a_journal(generated, tmp_path, monkeypatch):
    """A rerun that finds every episode present (killed after the last journal line, before its fold)
    commits nothing, and still leaves metadata.yaml complete and no journal."""
    monkeypatch.setenv("OPENARM_SIM_FOLD_EVERY", "100")
    src = Dataset(generated)
    out = tmp_path / "ds"
    meta = empty_copy(generated, out)
    commit_episode(out, meta, dict(src.episodes[0], id="0"), physics_only(src, 0))
    assert yaml_ids(out) == [] and (out / layout.JOURNAL_FILE).exists()
    close_log(out, Metadata.load(out))  # the rerun's end, no commit in between
    assert yaml_ids(out) == ["0"] and not (out / layout.JOURNAL_FILE).exists()


def test_metadata_write_folds_the_journal(generated, tmp_path, monkeypatch):
    """dataset-validate rewriting metadata.yaml (Metadata.write) takes the journal's entries with it."""
    monkeypatch.setenv("OPENARM_SIM_FOLD_EVERY", "100")
    src = Dataset(generated)
    out = tmp_path / "ds"
    meta = empty_copy(generated, out)
    commit_episode(out, meta, dict(src.episodes[0], id="0"), physics_only(src, 0))
    other = Metadata.load(out)
    assert other.episode_ids == ["0"]
    other.write(out)
    assert yaml_ids(out) == ["0"] and not (out / layout.JOURNAL_FILE).exists()


# --------------------------------------------------------------------------------------- index
def big_dataset(generated: Path, out: Path, n: int) -> Metadata:
    """A metadata-only dataset of ``n`` entries (large enough for an index)."""
    meta = Dataset(generated).meta.copy()
    eps = Dataset(generated).episodes
    meta.data["episodes"] = [dict(eps[i % len(eps)], id=str(i)) for i in range(n)]
    out.mkdir(parents=True)
    meta.write(out)
    return meta


def test_a_big_metadata_opens_through_its_index_and_never_through_a_stale_one(generated, tmp_path, monkeypatch):
    out = tmp_path / "big"
    meta = big_dataset(generated, out, 600)
    raw = (out / "metadata.yaml").read_bytes()
    assert len(raw) >= metadata_index.INDEX_MIN_BYTES
    index = json.loads((out / layout.METADATA_INDEX_FILE).read_text())
    assert index["metadata_sha256"] == metadata_index.sha256(raw)
    slow = yaml.safe_load(raw)
    # through the index: YAML is parsed only for the few-kB header
    calls = []
    import openarm_sim_dataset.metadata as m

    original = m.load_yaml_document

    def counting(path, raw=None):
        calls.append(len(raw) if raw is not None else -1)
        return original(path, raw)

    monkeypatch.setattr(m, "load_yaml_document", counting)
    fast = Metadata.load(out)
    assert fast.to_dict() == meta.to_dict() and fast.data == slow
    assert calls and max(calls) < 20_000, calls
    # stale: metadata.yaml edited by hand (an entry's success flipped): the YAML is parsed, the edit seen
    text = raw.decode().replace("success: true", "success: false", 1)
    (out / "metadata.yaml").write_text(text)
    calls.clear()
    edited = Metadata.load(out)
    assert max(calls) == len(text.encode()) and edited.data == yaml.safe_load(text)
    # ... and the parse is cached outside the dataset (a reader never writes into it)
    assert sorted(p.name for p in out.iterdir()) == ["metadata.index.json", "metadata.yaml"]
    cached = Path(os.environ["OPENARM_SIM_INDEX_CACHE"]) / f"{metadata_index.sha256(text.encode())}.json"
    assert cached.is_file()
    calls.clear()
    assert Metadata.load(out).data == edited.data and max(calls) < 20_000
    # a damaged index is a miss, not an error
    cached.write_text("{")
    (out / layout.METADATA_INDEX_FILE).write_text("{")
    assert Metadata.load(out).data == edited.data


def test_an_index_is_not_written_for_entries_json_would_change(generated, tmp_path):
    out = tmp_path / "big"
    meta = Dataset(generated).meta.copy()
    eps = Dataset(generated).episodes
    meta.data["episodes"] = [dict(eps[0], id=str(i), note={1: "integer key"}) for i in range(600)]
    out.mkdir()
    meta.write(out)
    assert not (out / layout.METADATA_INDEX_FILE).exists()
    assert Metadata.load(out).episodes[7]["note"] == {1: "integer key"}


def test_first_sample_and_lookups_read_one_episode(generated, tmp_path, monkeypatch):
    """sample(hz)[0] reads the first episode's stamps only; an id lookup is a map, not a scan."""
    ds = Dataset(generated)
    counted = []
    original = Dataset.sample_grid

    def grid(self, episode, hz):
        counted.append(episode["id"])
        return original(self, episode, hz)

    monkeypatch.setattr(Dataset, "sample_grid", grid)
    seq = ds.sample(hz=5)
    first = seq[0]
    assert counted == [ds.episodes[0]["id"]] and first.episode == ds.episode_ids[0]
    assert len(seq) == sum(len(original(ds, ep, 5)) for ep in ds.episodes)
    assert seq[-1].episode == ds.episode_ids[-1]
    meta = Metadata.load(generated)
    assert meta.index_of("1") == 1
    meta.episodes.append(dict(meta.episodes[0], id="x"))
    assert meta.index_of("x") == 2
    with pytest.raises(KeyError):
        meta.index_of("nope")


# ------------------------------------------------------------------------------------ slow: kills
@pytest.mark.slow
def test_generation_killed_in_the_journal_regime_resumes_with_every_episode_once(tmp_path):
    """SIGKILL a physics-only generation at several points while the journal holds entries (folds every
    4 commits): each time the reference reads metadata.yaml as a valid dataset, ours lists every committed
    episode and validates; the resumed run lists each episode once, as an uninterrupted run does."""
    od = pytest.importorskip("openarm_dataset")
    n = 14
    args = ["--episodes", str(n), "--seed", "3", "--cameras", "none", "--quiet"]
    env = dict(SUBPROCESS_ENV, OPENARM_SIM_FOLD_EVERY="4", SOURCE_DATE_EPOCH="1800000000")
    cmd = lambda out: [sys.executable, "-m", "openarm_sim_dataset.cli.generate", "--out", str(out), *args]  # noqa: E731
    ref = tmp_path / "ref"
    subprocess.run(cmd(ref), env=env, check=True, capture_output=True, cwd=REPO, timeout=600)
    out = tmp_path / "killed"
    journal_seen = 0
    for target in (2, 6, 11):
        p = subprocess.Popen(cmd(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        deadline = time.time() + 300
        while time.time() < deadline and p.poll() is None:
            try:
                if len(Metadata.load(out).episodes) >= target:
                    break
            except (MetadataError, OSError):
                pass
            time.sleep(0.05)
        assert p.poll() is None, "finished before the kill"
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        ours = Dataset(out)
        theirs = od.Dataset(out)
        folded = [str(e["id"]) for e in theirs.meta.episodes]
        assert ours.episode_ids[: len(folded)] == folded and len(ours.episode_ids) >= target
        journal_seen += (out / layout.JOURNAL_FILE).exists()
        for ep in theirs.meta.episodes[-1:]:
            assert len(theirs.load_obs(ep)) > 0
        rows = {r.check: r for r in ours.validate(simulation=True, episodes=ours.episode_ids[-2:])}
        bad = [c for c, r in rows.items() if not (r.passed or r.skipped) and c != "episode_folders"]
        assert bad == [], [(c, rows[c].detail) for c in bad]
        # the only possible complaint: a folder a kill left between its rename and its journal line
        if not (rows["episode_folders"].passed):
            assert "unlisted" in rows["episode_folders"].detail or "leftovers" in rows["episode_folders"].detail
    assert journal_seen >= 1, "no kill found entries in the journal"
    r = subprocess.run(cmd(out), env=env, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    ids = yaml_ids(out)
    assert ids == [str(i) for i in range(n)] and not (out / layout.JOURNAL_FILE).exists()
    a, b = tree_bytes(out, skip=()), tree_bytes(ref, skip=())
    strip = lambda d: {k: v for k, v in d.items() if k != "metadata.yaml"}  # noqa: E731
    assert strip(a) == strip(b)
    da, db = yaml.safe_load(a["metadata.yaml"]), yaml.safe_load(b["metadata.yaml"])
    for d in (da, db):
        d["simulation"].get("generator", {}).pop("git_commit", None)
    assert da == db
    assert Dataset(out).validate(simulation=False).valid


@pytest.mark.slow
def test_reference_reads_ten_thousand_episodes_we_wrote(generated, tmp_path):
    """openarm_dataset opens a 10,000-episode dataset written by our writers' path and reads the values
    ours reads (episodes of hard links; a few compared in full)."""
    od = pytest.importorskip("openarm_dataset")
    src = Dataset(generated)
    out = tmp_path / "ten_thousand"
    meta = empty_copy(generated, out)
    files = {}
    for ep in src.episodes:
        root = src.episode_path(ep)
        files[ep["id"]] = [(p.relative_to(root), p) for p in sorted(root.rglob("*")) if p.is_file()]
    n = 10_000
    log = journal_mod.episode_log(out, meta)
    for i in range(n):
        # the files: hard links put in place (the per-episode file path, fsyncs included, is what every
        # other writer test covers); the listing: the writers' commit path, journal and folds
        ep = src.episodes[i % src.num_episodes]
        dest = out / "episodes" / str(i)
        for rel, p in files[ep["id"]]:
            (dest / rel.parent).mkdir(parents=True, exist_ok=True)
            os.link(p, dest / rel)
        log.commit(dict(ep, id=str(i)))
    close_log(out, meta)
    assert (out / layout.METADATA_INDEX_FILE).is_file() and not (out / layout.JOURNAL_FILE).exists()
    theirs = od.Dataset(out)
    ours = Dataset(out)
    assert len(theirs.meta.episodes) == n == ours.num_episodes
    for i in (0, 1, 4_999, n - 1):
        a, b = theirs.load_obs(theirs.meta.episodes[i]), ours.load_obs(ours.episodes[i])
        assert list(a) == list(b)
        for k in a:
            np.testing.assert_array_equal(a[k].to_numpy(np.float32), b[k].to_numpy(np.float32))
