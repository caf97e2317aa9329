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

from openarm_sim_dataset import Dataset, Metadata, journal as journal_mod, layout, metadata_index
from openarm_sim_dataset.atomic import TMP_PREFIX
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
def test_a_fold_and_a_commit_while_a_reader_opens_leave_no_gap(generated, tmp_path, monkeypatch):
    """A reader opening while a writer folds then commits lists a prefix of the committed episodes: the
    journal is read before metadata.yaml (read after, the old metadata.yaml plus the new journal gave
    a gap: 1620 listed with folders 1619-1623 "unlisted", seen on a live run)."""
    import shutil

    from openarm_sim_dataset import metadata as metadata_mod

    root = tmp_path / "ds"
    shutil.copytree(generated, root)
    shutil.copytree(root / "episodes/1", root / "episodes/2")
    doc = yaml.safe_load((root / "metadata.yaml").read_text())
    e0, e1 = doc["episodes"]
    e2 = dict(e1, id="2")

    def state(listed: list, journaled: list) -> None:
        (root / "metadata.yaml").write_text(yaml.safe_dump(dict(doc, episodes=listed), sort_keys=False))
        (root / layout.JOURNAL_FILE).write_text("".join(json.dumps(e) + "\n" for e in journaled))

    state([e0], [e1])  # episode 1 committed into the journal, not yet folded
    real = metadata_mod.read_metadata_bytes
    calls = []

    def read_then_writer_moves_on(path):
        raw = real(path)
        if not calls:  # the writer folds episode 1 into metadata.yaml, then commits episode 2 to a new journal
            state([e0, e1], [e2])
        calls.append(path)
        return raw

    monkeypatch.setattr(metadata_mod, "read_metadata_bytes", read_then_writer_moves_on)
    assert Dataset(root).episode_ids == ["0", "1"]
    assert calls
    monkeypatch.setattr(metadata_mod, "read_metadata_bytes", real)
    assert Dataset(root).episode_ids == ["0", "1", "2"]


def big_dataset(generated: Path, out: Path, n: int) -> Metadata:
    """A metadata-only dataset of ``n`` entries (large enough for an index)."""
    meta = Dataset(generated).meta.copy()
    eps = Dataset(generated).episodes
    meta.data["episodes"] = [dict(eps[i % len(eps)], id=str(i)) for i in range(n)]
    out.mkdir(parents=True)
    meta.write(out)
    return meta


@pytest.mark.slow
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

    monkeypatch.setattr(m, "load_yaml_document", counting)  # the document
    monkeypatch.setattr(metadata_index, "load_yaml_document", counting)  # the index's header
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
def generation_cmd(out: Path, *args: str) -> list[str]:
    """``dataset-generate`` as a subprocess: physics only, seed 3 (``args``: the episodes, --workers)."""
    return [sys.executable, "-m", "openarm_sim_dataset.cli.generate", "--out", str(out), *args,
            "--seed", "3", "--cameras", "none", "--quiet"]


def listed_now(root: Path) -> int:
    """How many episodes our reader lists in ``root`` (metadata.yaml, then the journal); 0 before any."""
    try:
        return len(Metadata.load(root).episodes)
    except (MetadataError, OSError):
        return 0


def journal_holds_entries(root: Path) -> bool:
    try:
        return os.stat(root / layout.JOURNAL_FILE).st_size > 0
    except FileNotFoundError:
        return False


def run_and_kill(cmd: list[str], env: dict, out: Path, listed: int, journal: bool | None = None,
                 stall_seconds: float = 600) -> None:
    """Run ``cmd`` and SIGKILL it (its process group: the pool's workers too) once our reader lists at
    least ``listed`` episodes of ``out``, and then, when ``journal`` is True (False), at the first moment
    metadata.journal holds an entry (does not: just after a fold). ``stall_seconds`` without a new listed
    episode is a hung run (a guard against waiting forever, not a speed limit)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
                         start_new_session=True)
    try:
        seen, since = 0, time.monotonic()
        while p.poll() is None and seen < listed:
            time.sleep(0.1)
            now = listed_now(out)
            if now > seen:
                seen, since = now, time.monotonic()
            assert time.monotonic() - since < stall_seconds, f"nothing listed for {stall_seconds} s ({seen} listed)"
        while p.poll() is None and journal is not None and journal_holds_entries(out) != journal:
            time.sleep(0.002)
        assert p.poll() is None, f"the generation ended before its kill at {listed} listed"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def failures(report, ignore=()) -> list[tuple[str, str]]:
    """The failed rows of ``report`` (check, detail) but ``ignore``. (Attempts listed with nothing
    recorded, ``steps: 0`` e.g. outcome ``ik_failed``: 34 of seed 3's first 2,000 episodes, the first
    157, pass ``episode_length`` by its own rule.)"""
    return [(r.check, r.detail) for r in report if r.failed and r.check not in ignore]


def check_killed(out: Path, od, listed: int) -> tuple[list[str], bool]:
    """What a SIGKILLed generation left in ``out``: openarm_dataset opens it and lists a prefix of ours
    (metadata.yaml alone); ours lists at least ``listed`` episodes, each once and in order, that prefix
    plus the journal's other entries; on disk every listed folder, plus at most the episode in flight
    (renamed, not yet listed) and temporary folders; our validator passes the last two listed episodes but
    for that leftover (``episode_folders``, ``sim_episodes``).
    Returns our listed ids and whether the journal held entries metadata.yaml lacks."""
    ours = Dataset(out)
    ids = ours.episode_ids
    assert len(ids) >= listed and ids == [str(i) for i in range(len(ids))], ids[-5:]
    theirs = od.Dataset(out)
    folded = [str(e["id"]) for e in theirs.meta.episodes]
    journal = [str(e["id"]) for e in journal_mod.read_journal(out)]
    assert len(set(journal)) == len(journal), journal  # an entry is journaled once
    # (a kill between a fold's rename and the journal's removal leaves a journal metadata.yaml already lists)
    assert ids == folded + [i for i in journal if i not in folded], (folded[-3:], journal)
    for ep in theirs.meta.episodes[-1:]:  # (none listed yet before the first fold)
        assert len(theirs.load_obs(ep)) > 0
    present = {e.name for e in os.scandir(out / layout.EPISODES_DIR)}
    extra = present - set(ids)
    assert set(ids) <= present and {n for n in extra if not n.startswith(TMP_PREFIX)} <= {str(len(ids))}, extra
    report = ours.validate(simulation=True, episodes=ids[-2:])
    assert failures(report, ignore=("episode_folders", "sim_episodes")) == []
    rows = {r.check: r for r in report}
    assert rows["episode_folders"].passed == (not extra), rows["episode_folders"].detail
    # a leftover's sidecar (a folder renamed or being written) is one "of unlisted episodes"; every listed
    # episode has its own
    sim = rows["sim_episodes"]
    assert sim.passed or (extra and not sim.episodes and "of unlisted episodes" in sim.detail), sim.detail
    return ids, bool(set(journal) - set(folded))


def doc_without_commit(root: Path) -> dict:
    """``root``'s metadata.yaml document without the generator's git commit (the tree moves between runs)."""
    doc = yaml.safe_load((root / "metadata.yaml").read_bytes())
    doc["simulation"].get("generator", {}).pop("git_commit", None)
    return doc


@pytest.mark.slow
def test_generation_killed_in_the_journal_regime_resumes_with_every_episode_once(tmp_path):
    """SIGKILL a physics-only generation at several points while the journal holds entries (folds every
    4 commits): each time the reference reads metadata.yaml as a valid dataset, ours lists every committed
    episode and validates; the resumed run lists each episode once, as an uninterrupted run does."""
    od = pytest.importorskip("openarm_dataset")
    n = 14
    env = dict(SUBPROCESS_ENV, OPENARM_SIM_FOLD_EVERY="4", SOURCE_DATE_EPOCH="1800000000")
    cmd = lambda out: generation_cmd(out, "--episodes", str(n))  # noqa: E731
    ref = tmp_path / "ref"
    subprocess.run(cmd(ref), env=env, check=True, capture_output=True, cwd=REPO, timeout=600)
    out = tmp_path / "killed"
    journal_seen = 0
    for target in (2, 6, 11):
        run_and_kill(cmd(out), env, out, target)
        journal_seen += check_killed(out, od, target)[1]
    assert journal_seen >= 1, "no kill found entries in the journal"
    r = subprocess.run(cmd(out), env=env, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    ids = yaml_ids(out)
    assert ids == [str(i) for i in range(n)] and not (out / layout.JOURNAL_FILE).exists()
    assert tree_bytes(out) == tree_bytes(ref)
    assert doc_without_commit(out) == doc_without_commit(ref)
    assert Dataset(out).validate(simulation=False).valid


#: Size and kill points of the scale run: (episodes our reader lists at least, then the moment): "journal"
#: at the first moment metadata.journal holds an entry (committed episodes openarm_dataset does not see
#: yet), "folded" at the first moment it is absent (metadata.yaml just rewritten by a fold). Every kill is
#: past the always-fold threshold, in the regime of production folds (an eighth of the listed entries, or
#: 10 s). CI runs 160 episodes with that threshold at 96 (OPENARM_SIM_FOLD_ALWAYS_BELOW: physics costs ~1
#: CPU-second an episode, and CI shares its 2 cores with a second test worker);
#: OPENARM_SCALE_KILL_EPISODES=400 runs the production threshold (256; kills at 280, 330 and 375), and
#: 2000 the full-size case (kills at 300, 900 and 1,500).
SCALE_EPISODES = int(os.environ.get("OPENARM_SCALE_KILL_EPISODES", "160"))
SCALE_FOLD_ALWAYS_BELOW = 96 if SCALE_EPISODES < 400 else journal_mod.FOLD_ALWAYS_BELOW
SCALE_KILLS = (((300, "journal"), (900, "journal"), (1500, "folded")) if SCALE_EPISODES >= 2000 else
               ((280, "journal"), (330, "journal"), (375, "folded")) if SCALE_EPISODES >= 400 else
               ((110, "journal"), (130, "journal"), (150, "folded")))


@pytest.mark.slow
def test_scale_generation_killed_unforced_resumes_with_every_episode_once(tmp_path):
    """Issue 27 at scale: a real physics-only generation of SCALE_EPISODES (2 workers, folds as in production:
    after every commit below SCALE_FOLD_ALWAYS_BELOW listed entries (256 in production), then when the
    journal holds 1/8 of them or is 10 s old)
    SIGKILLed at the listed counts of SCALE_KILLS; each time as :func:`check_killed` says. The resumed run
    exits 0 and lists 0..n-1 once each, in order, with no journal left; openarm_dataset lists the same;
    the form and integrity checks pass on every episode. The episodes around each kill (the last one the
    killed run listed, the first one the next run made) equal, file for file and entry for entry, the same
    episodes generated apart with --episode-range, and pass every check, the simulation's included."""
    od = pytest.importorskip("openarm_dataset")
    n = SCALE_EPISODES
    assert SCALE_KILLS[0][0] > SCALE_FOLD_ALWAYS_BELOW and SCALE_KILLS[-1][0] < n
    env = {k: v for k, v in SUBPROCESS_ENV.items() if k != "OPENARM_SIM_FOLD_EVERY"}  # the natural regime
    if SCALE_FOLD_ALWAYS_BELOW != journal_mod.FOLD_ALWAYS_BELOW:
        env["OPENARM_SIM_FOLD_ALWAYS_BELOW"] = str(SCALE_FOLD_ALWAYS_BELOW)
    out = tmp_path / "killed"
    cmd = generation_cmd(out, "--episodes", str(n), "--workers", "2")
    around, journal_seen = [], 0
    for target, moment in SCALE_KILLS:
        run_and_kill(cmd, env, out, target, journal=moment == "journal")
        ids, journal = check_killed(out, od, target)
        journal_seen += journal
        around.append(len(ids) - 1)  # compared below with len(ids): the killed run's last, the next run's first
    assert journal_seen >= 1, "no kill found entries in the journal"
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO, timeout=7200)
    assert r.returncode == 0, r.stderr[-3000:]
    everything = [str(i) for i in range(n)]
    assert yaml_ids(out) == everything and not (out / layout.JOURNAL_FILE).exists()
    assert [str(e["id"]) for e in od.Dataset(out).meta.episodes] == everything
    final = Dataset(out)
    # every episode: the form and integrity checks (the costly ones only of the episodes compared below)
    assert failures(final.validate(quick=True)) == []
    doc = doc_without_commit(out)
    entries = {str(e["id"]): e for e in doc.pop("episodes")}
    sample = []
    for a in around:
        ref = tmp_path / f"range_{a}"
        # a kill that came after the last listing leaves no next episode to compare
        end = min(a + 2, n)
        subprocess.run(generation_cmd(ref, "--episode-range", f"{a}:{end}"), env=env, check=True,
                       capture_output=True, cwd=REPO, timeout=600)
        ref_doc = doc_without_commit(ref)
        ref_entries = ref_doc.pop("episodes")
        assert ref_doc == doc and [str(e["id"]) for e in ref_entries] == [str(i) for i in range(a, end)]
        for e in ref_entries:
            i = str(e["id"])
            assert entries[i] == e, i
            assert tree_bytes(out / "episodes" / i, skip=()) == tree_bytes(ref / "episodes" / i, skip=()), i
            sample.append(i)
    assert failures(final.validate(simulation=True, episodes=sample)) == []


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
