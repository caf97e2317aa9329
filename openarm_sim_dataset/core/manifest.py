"""Per-episode integrity manifest: the SHA-256 and size of every file of an episode.

Every writer of this package (generation, ``Dataset.write``, convert, merge, repair, synthetic)
records ``episodes/<id>/manifest.sha256`` when it commits an episode: written atomically inside the
episode's temporary folder, so it exists before the episode is renamed into place and listed. The
file lies outside every path ``openarm_dataset`` opens. Its format is ``sha256sum``'s, so
``cd episodes/<id> && sha256sum -c --strict manifest.sha256`` verifies an episode without this
package (coreutils skips the ``#`` lines, which carry each file's size)::

    # openarm_sim_dataset manifest 1: sha256sum format, paths relative to the episode folder
    <64 hex digits>  cameras/head/1900000000000000000.jpeg
    ...
    # size 4711 cameras/head/1900000000000000000.jpeg
    ...

Every file under the episode folder is listed (the manifest itself excepted), hidden files
included: anything extra, missing or changed is found by :func:`verify`. Sizes are compared first
(no read); only files of the recorded size are hashed, several at a time in threads (hashlib
releases the GIL).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import episode_summary, layout
from .atomic import atomic_write_bytes
from .errors import DatasetError

HEADER = "# openarm_sim_dataset manifest 1: sha256sum format, paths relative to the episode folder"
#: Files up to this size are read in one call; larger ones in chunks of this size.
CHUNK = 1 << 20

#: relative path -> (sha256 hex digest, size in bytes)
Entries = dict[str, tuple[str, int]]


class ManifestError(DatasetError):
    """A manifest that cannot be parsed, or an episode that cannot be hashed."""


def episode_files(ep_dir: Path) -> list[str]:
    """Every file under ``ep_dir`` as a '/'-separated relative path (sorted), the manifest excepted.

    Symbolic links and special files are listed too (as entries :func:`hash_file` refuses).
    """
    ep_dir = Path(ep_dir)
    out = []
    for dirpath, dirnames, filenames in os.walk(ep_dir):
        rel_dir = Path(dirpath).relative_to(ep_dir)
        # a symlinked folder is not walked into; it is listed, so that it shows up as extra
        for d in [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            dirnames.remove(d)
            filenames.append(d)
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if rel != layout.MANIFEST_FILE:
                out.append(rel)
    return sorted(out)


def hash_file(path: Path) -> tuple[str, int]:
    """(sha256 hex digest, size in bytes) of a regular file; ManifestError for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ManifestError(path, f"cannot be read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ManifestError(path, "is not a regular file")
        h = hashlib.sha256()
        size = 0
        buf = bytearray(min(CHUNK, st.st_size + 1))  # small files: one read, then the EOF read
        view = memoryview(buf)
        while n := os.readv(fd, [buf]):
            h.update(view[:n])
            size += n
        return h.hexdigest(), size
    finally:
        os.close(fd)


def _threads(n: int) -> int:
    return max(1, min(n, 2 * (os.cpu_count() or 1)))


def hash_files(paths: list[Path]) -> list[tuple[str, int] | ManifestError]:
    """:func:`hash_file` of each path (in order), in threads; errors are returned, not raised."""

    def one(p: Path):
        try:
            return hash_file(p)
        except ManifestError as e:
            return e

    if len(paths) < 4:
        return [one(p) for p in paths]
    with ThreadPoolExecutor(max_workers=_threads(len(paths))) as pool:
        return list(pool.map(one, paths, chunksize=16))


def compute(ep_dir: Path, known: Entries | None = None) -> Entries:
    """Hash every file of an episode folder (raises ManifestError for a link or special file).

    ``known``: entries of files whose bytes the caller hashed as it wrote them (a recorder's frames);
    those files are listed from it without being read again (a file not present is not listed)."""
    ep_dir = Path(ep_dir)
    rels = episode_files(ep_dir)
    known = known or {}
    todo = [r for r in rels if r not in known]
    out: Entries = {r: known[r] for r in rels if r in known}
    for rel, res in zip(todo, hash_files([ep_dir / r for r in todo])):
        if isinstance(res, ManifestError):
            raise res
        out[rel] = res
    return out


def format_entries(entries: Entries) -> bytes:
    """The manifest file's bytes (sorted: the same files give the same bytes)."""
    for rel in entries:
        if "\n" in rel or "\\" in rel or rel.startswith("/"):
            raise ManifestError(rel, "file name cannot be recorded in a manifest (newline, backslash or absolute)")
    keys = sorted(entries)
    lines = [HEADER]
    lines += [f"{entries[k][0]}  {k}" for k in keys]
    lines += [f"# size {entries[k][1]} {k}" for k in keys]
    return ("\n".join(lines) + "\n").encode()


def parse(data: bytes, path: Path) -> Entries:
    """Entries of a manifest file's bytes; ManifestError naming ``path`` and the line otherwise."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise ManifestError(path, "is not UTF-8 text") from None
    hashes: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for no, line in enumerate(text.splitlines(), 1):
        if line.startswith("# size "):
            size, _, rel = line[len("# size "):].partition(" ")
            if not size.isdigit() or not rel or rel in sizes:
                raise ManifestError(path, f"line {no}: malformed or repeated size line")
            sizes[rel] = int(size)
        elif line.startswith("#") or not line:
            continue
        else:
            digest, sep, rel = line.partition("  ")
            if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not rel or rel in hashes:
                raise ManifestError(path, f"line {no}: expected '<64 hex digits>  <path>' (once per path)")
            hashes[rel] = digest
    if hashes.keys() != sizes.keys():
        odd = sorted(hashes.keys() ^ sizes.keys())[0]
        raise ManifestError(path, f"{odd}: has a hash but no size line, or a size but no hash")
    return {k: (hashes[k], sizes[k]) for k in hashes}


def path_of(ep_dir: Path) -> Path:
    return Path(ep_dir) / layout.MANIFEST_FILE


def read(ep_dir: Path) -> Entries | None:
    """The episode's manifest, or None when it has none."""
    p = path_of(ep_dir)
    if not os.path.lexists(p):
        return None
    if p.is_symlink() or not p.is_file():
        raise ManifestError(p, "is not a regular file")
    if p.stat().st_size > 256 << 20:
        raise ManifestError(p, "is larger than 256 MiB")
    return parse(p.read_bytes(), p)


def write(ep_dir: Path, source: Path | None = None, known: Entries | None = None, summary: bool = True) -> Entries:
    """Write the episode's summary (``summary.json``, :mod:`.episode_summary`), then hash every file of
    ``ep_dir`` and write its manifest (atomically); returns the entries.

    ``source``: the episode folder these files were copied from verbatim. When it has a manifest,
    every copied file must match it: a file that changed since its manifest was written is refused
    (ManifestError naming the source file) rather than blessed by a new manifest; a summary that
    manifest lists, of exactly the same files, is kept (a hard link stays one). ``known``: see
    :func:`compute`. ``summary=False``: the summary is left as it is (tests re-sealing a planted fault).
    """
    ep_dir = Path(ep_dir)
    entries = compute(ep_dir, known)
    before = read(source) if source is not None else None
    for rel, (digest, size) in (before or {}).items():
        if rel in entries and entries[rel] != (digest, size):
            raise ManifestError(Path(source) / rel, "differs from its episode's manifest (changed since it was "
                                                   "written); run dataset-validate --checks integrity")
    carried = before is not None and layout.SUMMARY_FILE in before and before.keys() == entries.keys()
    if summary and not carried:
        _rewrite_summary(ep_dir, entries)
    atomic_write_bytes(path_of(ep_dir), format_entries(entries))
    return entries


def _rewrite_summary(ep_dir: Path, entries: Entries) -> None:
    """Derive the episode's summary from its files and record it in ``entries`` (or drop it)."""
    entries.pop(layout.SUMMARY_FILE, None)
    if episode_summary.write(ep_dir) is not None:
        entries[layout.SUMMARY_FILE] = hash_file(episode_summary.path_of(ep_dir))


def update(ep_dir: Path, changed: dict[str, bytes]) -> bool:
    """Record new contents for some files of an episode that has a manifest (the others keep their
    recorded entries, so damage elsewhere stays visible). Returns False when it has none."""
    entries = read(ep_dir)
    if entries is None:
        return False
    for rel, data in changed.items():
        entries[rel] = (hashlib.sha256(data).hexdigest(), len(data))
    atomic_write_bytes(path_of(ep_dir), format_entries(entries))
    return True


def refresh_summary(ep_dir: Path) -> bool:
    """After files of an episode changed in place (``dataset-repair``): derive its summary again and
    record the new summary in its manifest (the other entries kept). False when it has no summary."""
    ep_dir = Path(ep_dir)
    if not os.path.lexists(ep_dir / layout.SUMMARY_FILE):
        return False
    entries = read(ep_dir)
    _rewrite_summary(ep_dir, entries if entries is not None else {})
    if entries is not None:
        atomic_write_bytes(path_of(ep_dir), format_entries(entries))
    return True


@dataclass
class Verification:
    """What :func:`verify_many` found in one episode (paths relative to the episode folder)."""

    files: int = 0
    bytes: int = 0
    extra: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # content (or size) differs, or unreadable

    @property
    def ok(self) -> bool:
        return not (self.extra or self.missing or self.changed)

    def first(self) -> str | None:
        for what, items in (("changed", self.changed), ("missing", self.missing), ("extra (not in the manifest)", self.extra)):
            if items:
                return f"{items[0]} {what}" + (f" (+{len(items) - 1} more)" if len(items) > 1 else "")
        return None


def verify_many(episodes: Iterable[tuple[str, Path, Entries]]) -> dict[str, Verification]:
    """Check episode folders against their entries: listing, sizes (stat), then hashes in threads
    across all episodes at once."""
    results: dict[str, Verification] = {}
    jobs: list[tuple[str, str, Path, str]] = []
    for ep, ep_dir, entries in episodes:
        v = results[ep] = Verification()
        present = episode_files(ep_dir)
        have = set(present)
        v.extra = [r for r in present if r not in entries]
        v.missing = sorted(r for r in entries if r not in have)
        for rel in present:
            if rel not in entries:
                continue
            digest, size = entries[rel]
            p = Path(ep_dir) / rel
            try:
                st = os.lstat(p)
            except OSError:
                v.changed.append(rel)
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                v.changed.append(rel)
            else:
                jobs.append((ep, rel, p, digest))
    for (ep, rel, _p, digest), res in zip(jobs, hash_files([j[2] for j in jobs])):
        v = results[ep]
        if isinstance(res, ManifestError) or res[0] != digest:
            v.changed.append(rel)
        else:
            v.files += 1
            v.bytes += res[1]
    for v in results.values():
        v.changed.sort()
    return results
