"""Committing an episode in constant time: metadata.yaml plus an append-only journal of entries.

Listing an episode used to rewrite the whole metadata.yaml, so the cost of one commit grew with the
number already committed (4 s of YAML at 10,000 episodes). Instead, for a writer:

1. the episode folder is renamed into place (as before: files first);
2. its entry is appended to ``metadata.journal`` as one JSON line and fsynced: from here on the episode
   is committed (this package's readers list metadata.yaml's entries, then the journal's);
3. now and then (a *fold*) metadata.yaml is rewritten atomically from bytes this writer keeps in memory,
   then the journal is removed. metadata.yaml writes ``episodes:`` last, so a fold is the header's YAML
   plus the YAML already rendered for every earlier entry plus the new ones: a copy of bytes, not a
   re-rendering of 10,000 entries. Folds happen after every commit while the dataset is small (under
   :data:`FOLD_ALWAYS_BELOW` entries), then when the journal holds an eighth of the listed entries or is
   :data:`FOLD_SECONDS` old, and always when the writer ends (``OPENARM_SIM_FOLD_EVERY=K``: every K
   commits instead, so tests see the journal's regime in a small dataset;
   ``OPENARM_SIM_FOLD_ALWAYS_BELOW=N``: the production rules with N in place of
   :data:`FOLD_ALWAYS_BELOW`, so a test reaches them with fewer episodes).

What a reader that only knows metadata.yaml (``openarm_dataset``) sees at any moment is a complete,
valid dataset listing every episode committed up to the last fold; this package's readers also see
the journal's. A process killed mid-append leaves a last line without its newline (or not JSON):
it is ignored, its folder is an unlisted leftover that the next run of the writer removes, as for a
kill between the rename and the listing before. Only one writer appends (the writers' locks), and
each writer folds a journal it finds before appending, so a torn line is always the last one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import layout
from .atomic import atomic_write_bytes, fsync_dir
from .errors import MetadataError
from .metadata_index import write_index
from .yaml_codec import dump_yaml

if TYPE_CHECKING:
    from .metadata import Metadata

#: While fewer entries than this are listed, every commit folds (the rewrite is cheap, and
#: metadata.yaml stays exactly as current as before the journal existed).
FOLD_ALWAYS_BELOW = 256
#: Fold when the journal holds this fraction of the listed entries (amortised constant per commit) ...
FOLD_FRACTION = 1 / 8
#: ... or its oldest entry is this old (seconds), so metadata.yaml lags a long run by little.
FOLD_SECONDS = 10.0


def journal_path(root: Path) -> Path:
    return Path(root) / layout.JOURNAL_FILE


def read_journal(root: Path) -> list[dict]:
    """Entries of ``<root>/metadata.journal`` in order ([] when there is none). A last line without its
    newline or that is not a JSON object (a kill mid-append) is ignored; a bad line before the last
    one is an error (the file was damaged after it was written)."""
    path = journal_path(root)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise MetadataError(path, f"cannot read: {e.strerror}") from None
    complete = raw.split(b"\n")[:-1]  # the bytes after the last newline (b"" normally) are a torn append
    out: list[dict] = []
    for n, line in enumerate(complete, 1):
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            entry = None
        if not isinstance(entry, dict):
            if n == len(complete):
                break
            raise MetadataError(path, f"line {n}: not a JSON object (a damaged journal)")
        out.append(entry)
    return out


def merge_journal(doc: dict, root: Path, entries: list[dict] | None = None) -> int:
    """Append to ``doc['episodes']`` the journal's entries it does not list yet (by id); the count.

    ``entries``: the journal as read *before* metadata.yaml (what readers pass). Read after it, a fold
    and a commit in between give a listing with a gap (the old metadata.yaml, then a journal holding
    only the newest entry: seen on a live 2,000-episode run). Read before, metadata.yaml is at least
    as new as that journal, and the two together always list a prefix of the committed episodes."""
    if entries is None:
        entries = read_journal(root)
    if not entries:
        return 0
    episodes = doc.get("episodes")
    if episodes is None:
        episodes = doc["episodes"] = []
    listed = {str(ep.get("id")) for ep in episodes if isinstance(ep, dict)}
    added = 0
    for entry in entries:
        if str(entry.get("id")) not in listed:
            episodes.append(entry)
            listed.add(str(entry.get("id")))
            added += 1
    return added


def _entry_yaml(entry: dict) -> bytes:
    return dump_yaml([entry])


class EpisodeLog:
    """The commit state of one writer of one dataset: the YAML of every listed entry (rendered once),
    the open journal and when to fold. Made by :func:`episode_log`; the Metadata it serves keeps it."""

    def __init__(self, root: Path, meta: Metadata):
        self.root = Path(root)
        self.meta = meta
        self.pending = 0  # entries in the journal, not yet in metadata.yaml
        self.oldest: float | None = None
        existing = read_journal(self.root)
        self.episodes_yaml = bytearray()
        meta._episode_log = self  # so that Metadata.write below hands this log the rendered entries
        if existing or not self._adopt_file():
            # a journal left by a killed writer (or a metadata.yaml in another form): one full rewrite
            meta.write(self.root)

    def _adopt_file(self) -> bool:
        """Take the YAML of the listed entries from metadata.yaml itself when it is in the form a fold
        writes (header, then ``episodes:`` last) and lists exactly ``meta``'s entries; else False."""
        try:
            raw = (self.root / layout.METADATA_FILE).read_bytes()
        except OSError:
            return False
        head, _ = self.meta.dump_parts(episodes=False)
        if raw.startswith(head) and raw[len(head):].startswith(b"episodes:"):
            rest = raw[len(head):]
            if rest == b"episodes: []\n" and not self.meta.episodes:
                return True
            if rest.startswith(b"episodes:\n"):
                body = rest[len(b"episodes:\n"):]
                # one "- " at the start of a line per entry (nested lists are indented)
                if body.count(b"\n- ") + body.startswith(b"- ") == len(self.meta.episodes):
                    self.episodes_yaml = bytearray(body)
                    return True
        return False

    def reset(self, episodes_yaml: bytes) -> None:
        """metadata.yaml was just written whole (``Metadata.write``) with these entries' YAML."""
        self.episodes_yaml = bytearray(episodes_yaml)
        self.pending = 0
        self.oldest = None

    def commit(self, entry: dict) -> None:
        """List ``entry`` (its folder already in place): journal line, fsync; fold when due."""
        self.episodes_yaml += _entry_yaml(entry)
        self.meta.episodes.append(entry)
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        path = journal_path(self.root)
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.root)
        self.pending += 1
        if self.oldest is None:
            self.oldest = time.monotonic()
        if self.due():
            self.fold()

    def due(self) -> bool:
        every = os.environ.get("OPENARM_SIM_FOLD_EVERY")
        if every:  # tests and benchmarks: the journal's regime without 256 committed episodes first
            return self.pending >= int(every)
        n = len(self.meta.episodes)
        always_below = int(os.environ.get("OPENARM_SIM_FOLD_ALWAYS_BELOW", FOLD_ALWAYS_BELOW))
        return (n < always_below or self.pending >= FOLD_FRACTION * n
                or (self.oldest is not None and time.monotonic() - self.oldest >= FOLD_SECONDS))

    def fold(self) -> None:
        """metadata.yaml := header + every listed entry (atomic), then the journal goes."""
        head, _ = self.meta.dump_parts(episodes=False)
        body = b"episodes:\n" + bytes(self.episodes_yaml) if self.meta.episodes else b"episodes: []\n"
        atomic_write_bytes(self.root / layout.METADATA_FILE, head + body)
        self._drop_journal()

    def _drop_journal(self) -> None:
        path = journal_path(self.root)
        if path.exists():
            path.unlink()
            fsync_dir(self.root)
        self.pending = 0
        self.oldest = None

    def close(self) -> None:
        """Fold what the journal holds and write the open index (the writer ends)."""
        if self.pending or journal_path(self.root).exists():
            self.fold()
        write_index(self.root, self.meta)


def episode_log(root: Path, meta: Metadata) -> EpisodeLog:
    """The :class:`EpisodeLog` of ``meta`` for writing into ``root`` (made on the first commit)."""
    log = getattr(meta, "_episode_log", None)
    if log is None or log.root != Path(root):
        log = EpisodeLog(Path(root), meta)
        meta._episode_log = log
    return log


def close_log(root: Path, meta: Metadata) -> None:
    """End of a writer: fold the journal into metadata.yaml (also one a killed writer left, when this
    run committed nothing) and write the index."""
    log = getattr(meta, "_episode_log", None)
    if log is not None and log.root == Path(root):
        log.close()
    elif journal_path(Path(root)).exists():  # a run with nothing left to commit still folds a killed one's journal
        episode_log(Path(root), meta).close()
