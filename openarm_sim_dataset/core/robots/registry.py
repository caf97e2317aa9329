"""The shipped robot profiles (one YAML file each under ``data/``) and a profile read from a user's file."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import yaml

from ..errors import MetadataError
from .profile import RobotProfile, parse_profile

#: the folder of the shipped profiles, one ``<name>.yaml`` per robot
DATA_DIR = Path(__file__).resolve().parent / "data"
#: the profile that matches any robot, knowing nothing of it
GENERIC = "generic"
#: the largest profile file read (bytes): a description, never data
MAX_PROFILE_BYTES = 1024 * 1024

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_profile_file(path: str | os.PathLike) -> RobotProfile:
    """A profile from a YAML file (``--robot-file``). A file that is missing, does not parse or breaks
    the schema raises ``MetadataError(path, "<field>: what is wrong")``, one line."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            raise MetadataError(path, f"larger than {MAX_PROFILE_BYTES} bytes: not a robot profile")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MetadataError(path, "missing") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MetadataError(path, f"unreadable ({e})") from None
    try:
        doc = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise MetadataError(path, f"not valid YAML ({where}{problem})") from None
    return parse_profile(doc, path)


@functools.cache
def _shipped() -> tuple[RobotProfile, ...]:
    found = [load_profile_file(p) for p in sorted(DATA_DIR.glob("*.yaml"))]
    for p in found:
        if Path(p.path).stem != p.name:
            raise MetadataError(p.path, f"name: {p.name!r} is not the file's name")
    return tuple(sorted(found, key=lambda p: (p.precedence, p.name)))


def profiles() -> dict[str, RobotProfile]:
    """The shipped profiles by name, in detection order (``precedence``, then name); the files are read
    once, the dict is the caller's."""
    return {p.name: p for p in _shipped()}


def get_profile(name: str) -> RobotProfile:
    """The shipped profile ``name``; KeyError naming the known ones."""
    known = profiles()
    try:
        return known[name]
    except KeyError:
        raise KeyError(f"no robot profile {name!r} (known: {', '.join(known)})") from None
