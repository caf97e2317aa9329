"""Opening a big dataset in constant time: a JSON index of metadata.yaml, keyed by its SHA-256.

Parsing YAML costs ~0.35 ms per episode entry even with libyaml (37 s at 100,000 episodes); JSON of
the same document loads ~40x faster and hashing the YAML file costs ~1 ms per MB. So a
metadata.yaml of at least :data:`INDEX_MIN_BYTES` is read through an index: a JSON file holding the
document it parses to and the SHA-256 of its bytes, used only when that hash matches the file as it
is now (any edit of metadata.yaml, by hand or by a tool that does not know the index, makes it stale
and the YAML is parsed again). Two places are searched:

- ``<dataset>/metadata.index.json``: written by this package's writers when they end (the dataset is
  theirs); ``openarm_dataset`` never opens it;
- ``$OPENARM_SIM_INDEX_CACHE`` (default ``$XDG_CACHE_HOME/openarm_sim_dataset/metadata``, ``off``
  disables): written when a reader had to parse a big metadata.yaml, so a dataset this package does
  not own (a source of merge or convert, a read-only copy) is never modified and still opens fast
  the second time. The newest :data:`CACHE_KEEP` indexes are kept.

The index holds the entries as JSON and the rest of the document (a few kB) as its YAML text. An
index is only written when JSON represents every entry exactly (checked by a round trip: YAML
timestamps, non-string keys or NaN would not survive, and such a document is simply not indexed).
The document an index holds was validated when it was written, so a hit skips the per-entry checks.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import layout
from .atomic import atomic_write_bytes
from .cache import cache_folder
from .yaml_codec import dump_yaml, load_yaml_document

if TYPE_CHECKING:
    from .metadata import Metadata

FORMAT = "openarm-sim-metadata-index"
VERSION = 1
#: metadata.yaml smaller than this is parsed directly (an index would not be faster).
INDEX_MIN_BYTES = 128 * 1024
CACHE_KEEP = 32


def cache_dir() -> Path | None:
    """The per-user index cache, or None when ``OPENARM_SIM_INDEX_CACHE=off``."""
    return cache_folder("OPENARM_SIM_INDEX_CACHE", "metadata")


def sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def lookup(root: Path, digest: str) -> dict | None:
    """The document of an index whose metadata_sha256 is ``digest`` (beside the dataset, then in the
    cache), or None."""
    cache = cache_dir()
    for path in (Path(root) / layout.METADATA_INDEX_FILE, cache / f"{digest}.json" if cache else None):
        if path is None:
            continue
        try:
            with open(path, "rb") as f:
                index = json.load(f)
        except (OSError, ValueError):
            continue
        if (isinstance(index, dict) and index.get("format") == FORMAT and index.get("version") == VERSION
                and index.get("metadata_sha256") == digest):
            doc = _document(index)
            if doc is not None:
                return doc
    return None


def encode(digest: str, doc: dict) -> bytes | None:
    """The index of ``doc`` (the document of a metadata.yaml whose SHA-256 is ``digest``), or None
    when JSON cannot hold its entries exactly. The rest of the document (a few kB, with keys JSON
    would change, e.g. the integer keys of ``simulation.labels``) is kept as its YAML text."""
    head = {k: v for k, v in doc.items() if k != "episodes"}
    episodes = doc.get("episodes") or []
    try:
        text = json.dumps(episodes, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_refuse)
    except (TypeError, ValueError):
        return None
    if json.loads(text) != episodes:  # e.g. integer keys, which JSON turns into strings
        return None
    try:
        header = dump_yaml(head).decode("utf-8") if head else ""
    except Exception:  # noqa: BLE001 - a value YAML cannot dump: no index
        return None
    prefix = json.dumps({"format": FORMAT, "version": VERSION, "metadata_sha256": digest, "header": header},
                        ensure_ascii=False)[:-1]
    return (prefix + ',"episodes":' + text + "}").encode("utf-8")


def _document(index: dict) -> dict | None:
    header = index.get("header")
    episodes = index.get("episodes")
    if not isinstance(header, str) or not isinstance(episodes, list):
        return None
    try:
        doc = load_yaml_document(Path(layout.METADATA_INDEX_FILE), header.encode("utf-8")) if header else {}
    except Exception:  # noqa: BLE001 - a damaged index is a miss
        return None
    if not isinstance(doc, dict):
        return None
    doc["episodes"] = episodes
    return doc


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def remember(digest: str, data: bytes) -> None:
    """Cache an index (:func:`encode`) of a big metadata.yaml a reader parsed (best effort: a full or
    read-only cache is not an error)."""
    cache = cache_dir()
    if cache is None:
        return
    try:
        cache.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(cache / f"{digest}.json", data)
        kept = sorted(cache.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[CACHE_KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def write_index(root: Path, meta: Metadata, raw: bytes | None = None) -> bool:
    """Write ``<root>/metadata.index.json`` for the metadata.yaml now in ``root`` (a writer's own
    dataset, when it ends; ``raw``: its bytes, when the caller just wrote them); a small one gets none
    (and loses a stale one). True when written."""
    root = Path(root)
    path = root / layout.METADATA_INDEX_FILE
    if raw is None:
        try:
            raw = (root / layout.METADATA_FILE).read_bytes()
        except OSError:
            return False
    data = encode(sha256(raw), meta.to_dict()) if len(raw) >= INDEX_MIN_BYTES else None
    if data is None:
        path.unlink(missing_ok=True)
        return False
    atomic_write_bytes(path, data)
    return True
