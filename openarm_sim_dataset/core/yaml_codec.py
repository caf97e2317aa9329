"""The YAML codec of ``metadata.yaml``, its journal and its derived index: size-bounded safe loading that
refuses aliases (billion-laughs documents), and the one dumper (block style, keys in order, UTF-8)."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import yaml

from .errors import MetadataError

#: metadata.yaml larger than this is refused before parsing (a real one is a few kB per 100 episodes).
MAX_METADATA_BYTES = 64 * 1024 * 1024


class SafeNoAliasLoader(yaml.SafeLoader):
    """safe_load without anchors/aliases: shuts out billion-laughs documents."""

    def compose_node(self, parent, index):  # noqa: D102
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*ref) are not allowed", event.start_mark)
        return super().compose_node(parent, index)


#: An anchor (``&name``) or alias (``*name``): the indicator immediately followed by a name character.
ANCHOR_OR_ALIAS = re.compile(r"[&*][^\s\[\]{},]")


def loader_for(text: str) -> type:
    """libyaml's safe loader (5-10x faster) when the text cannot hold an anchor or alias, else the
    pure-Python loader that refuses aliases. The test is conservative: any ``&`` or ``*`` followed by a
    name character, even inside a string, takes the strict path. Both loaders construct standard tags
    only (a Python tag is an error) and resolve plain scalars alike (tests/test_metadata.py)."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None and not ANCHOR_OR_ALIAS.search(text):
        return fast
    return SafeNoAliasLoader


class NoAliasDumper(yaml.SafeDumper):
    """safe_dump that writes a repeated object out again rather than as an alias."""

    def ignore_aliases(self, data):  # noqa: D102
        return True


def dump_yaml(value: Any) -> bytes:
    """``value`` as metadata.yaml renders it (block style, keys in order, UTF-8, no aliases). A list
    renders as one ``- `` item per element at column 0, so the YAML of a list is the concatenation of
    its elements' (what :mod:`.journal` relies on to append entries)."""
    return yaml.dump(value, Dumper=NoAliasDumper, sort_keys=False, allow_unicode=True).encode("utf-8")


def read_metadata_bytes(path: Path) -> bytes:
    """The bytes of a metadata.yaml (a regular file of at most :data:`MAX_METADATA_BYTES`)."""
    try:
        st = path.stat()
        size = st.st_size
    except FileNotFoundError:
        raise MetadataError(path, "not found") from None
    except OSError as e:
        raise MetadataError(path, f"cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
        raise MetadataError(path, "is not a regular file")
    if size > MAX_METADATA_BYTES:
        raise MetadataError(path, f"{size} bytes is larger than the {MAX_METADATA_BYTES} allowed")
    try:
        return path.read_bytes()
    except OSError as e:
        raise MetadataError(path, f"cannot read: {e.strerror}") from None


def load_yaml_document(path: Path, raw: bytes | None = None) -> Any:
    """Parse a YAML file (or its ``raw`` bytes, already read) with safe_load semantics (no Python
    tags, no aliases), size-bounded."""
    if raw is None:
        raw = read_metadata_bytes(path)
    try:
        text = raw.decode("utf-8")
        return yaml.load(text, Loader=loader_for(text))  # noqa: S506 - SafeLoader (subclass) only
    except UnicodeDecodeError:
        raise MetadataError(path, "is not UTF-8 text") from None
    except RecursionError:
        raise MetadataError(path, "invalid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise MetadataError(path, f"invalid YAML{where}: {problem}") from None
