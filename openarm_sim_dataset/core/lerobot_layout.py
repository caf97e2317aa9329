"""The on-disk contract of LeRobot datasets (``codebase_version`` v2.0, v2.1 and v3.0), as far as
reading them needs: where ``info.json`` is, the versions read, the columns every frame table has, the
paths its templates build (refused when they would leave the dataset folder), a bounded scan of the
folder that finds files a template does not point at (:func:`scan_files`; :class:`MissingFiles` says
where the missing ones sit), and the bytes of the folder by kind (:func:`disk_bytes`).

=========  =====================================================================================
``v2.0``   as v2.1 without ``meta/episodes_stats.jsonl`` (``meta/stats.json`` holds the dataset's
           statistics; NVIDIA's GR00T data adds ``meta/modality.json``)
``v2.1``   ``data/chunk-XXX/episode_XXXXXX.parquet`` per episode; ``meta/episodes.jsonl``,
           ``meta/tasks.jsonl``, ``meta/episodes_stats.jsonl``; one MP4 per episode and camera
           (``videos/chunk-XXX/<key>/episode_XXXXXX.mp4``)
``v3.0``   ``data/chunk-XXX/file-XXX.parquet`` holding many episodes; ``meta/episodes/chunk-XXX/
           file-XXX.parquet`` (one row per episode: lengths, index ranges, the chunk/file of its
           data and videos, each video's ``from_timestamp``/``to_timestamp``); ``meta/tasks.parquet``;
           ``meta/stats.json``; MP4 files concatenating episodes (``videos/<key>/chunk-XXX/file-XXX.mp4``)
=========  =====================================================================================
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from .errors import MetadataError

INFO_FILE = "meta/info.json"
CODEBASE_VERSIONS = ("v2.0", "v2.1", "v3.0")
#: versions with one data file per episode and one MP4 per episode and camera (JSONL metadata)
PER_EPISODE_VERSIONS = ("v2.0", "v2.1")
#: ``Dataset.version`` of a LeRobot dataset: this prefix and its codebase_version
LAYOUT_PREFIX = "lerobot_"

#: Columns of every frame table, whatever the robot (LeRobot's ``DEFAULT_FEATURES``)
DEFAULT_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
#: Camera features are ``observation.images.<camera>`` (or any feature of dtype video/image)
IMAGE_PREFIX = "observation.images."
VISUAL_DTYPES = ("video", "image")

EPISODES_JSONL = "meta/episodes.jsonl"  # v2.1
TASKS_JSONL = "meta/tasks.jsonl"  # v2.1
EPISODES_STATS_JSONL = "meta/episodes_stats.jsonl"  # v2.1 (v2.0 has none)
EPISODES_DIR = "meta/episodes"  # v3.0
TASKS_PARQUET = "meta/tasks.parquet"  # v3.0
STATS_JSON = "meta/stats.json"
MODALITY_JSON = "meta/modality.json"  # GR00T's (NVIDIA) description of the state and action vectors

#: LeRobot's ``tolerance_s``: how far a stamp may sit from k/fps and still be frame k (seconds)
TOLERANCE_S = 1e-4


def is_lerobot(root: Path) -> bool:
    """True when ``root`` holds a LeRobot dataset and no OpenArm ``metadata.yaml`` (which wins)."""
    return (root / INFO_FILE).is_file() and not (root / "metadata.yaml").exists()


def layout_name(codebase_version: str) -> str:
    return LAYOUT_PREFIX + codebase_version


def feature_names(names: object) -> object:
    """A feature's ``names`` as the list it means: LeRobot's own ``[...]``, older hub data's
    ``{"motors": [...]}`` (any one key: ``axes``, ...), and a list holding the list (``[[...]]``), as some
    recorders write it; anything else as given (the caller judges it)."""
    if isinstance(names, dict) and len(names) == 1:
        names = next(iter(names.values()))
    if isinstance(names, list) and len(names) == 1 and isinstance(names[0], list):
        names = names[0]
    return names


def camera_name(feature: str) -> str:
    """The camera of a visual feature: ``observation.images.head`` -> ``head``."""
    return feature.removeprefix(IMAGE_PREFIX)


def template_path(root: Path, template: object, info_path: Path, **fields: object) -> Path:
    """``root / template.format(**fields)``, refusing a template that is not a string, names an unknown
    field, or builds a path outside ``root`` (absolute, or through ``..``)."""
    if not isinstance(template, str) or not template:
        raise MetadataError(info_path, f"path template {template!r} is not a string")
    names = {f for _, f, _, _ in string.Formatter().parse(template) if f}
    if not names <= set(fields):
        raise MetadataError(info_path, f"path template {template!r} uses {', '.join(sorted(names - set(fields)))}, "
                                       f"not one of {', '.join(sorted(fields))}")
    rel = template.format(**fields)
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts or "\\" in rel:
        raise MetadataError(info_path, f"path template {template!r} leaves the dataset folder ({rel!r})")
    return root / rel


#: entries (files and folders) a scan of a dataset folder looks at before it stops: a dataset folder
#: that is a whole disk is not walked for ever
SCAN_LIMIT = 200_000


def scan_files(root: Path, suffixes: tuple[str, ...], limit: int = SCAN_LIMIT) -> tuple[dict[str, list[str]], bool]:
    """The files under ``root`` whose names end in one of ``suffixes``: ``{file name: [paths relative to
    root, posix]}``, and whether the scan stopped after ``limit`` entries. Hidden entries are skipped and
    symbolic links to folders are not followed (a link cannot make the walk leave the folder or loop)."""
    found: dict[str, list[str]] = {}
    stack, seen = [""], 0
    while stack:
        rel = stack.pop()
        try:
            it = os.scandir(root / rel if rel else root)
        except OSError:
            continue  # unreadable folder: nothing found there
        with it:
            for entry in it:
                seen += 1
                if seen > limit:
                    return found, True
                if entry.name.startswith("."):
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(child)
                    elif entry.name.endswith(suffixes):
                        found.setdefault(entry.name, []).append(child)
                except OSError:
                    continue
    return found, False


def name_pattern(template: str) -> re.Pattern:
    """The file names a path template builds, as a regular expression: ``file-{file_index:03d}.mp4`` ->
    ``file-\\d+\\.mp4`` (index fields are digits, any other field any name)."""
    parts = []
    for literal, name, _spec, _conv in string.Formatter().parse(template.rsplit("/", 1)[-1]):
        parts.append(re.escape(literal))
        if name is not None:
            parts.append(r"\d+" if name.endswith(("index", "chunk")) else r"[^/]+")
    return re.compile("".join(parts) + r"\Z")


@dataclass
class MissingFiles:
    """Files of one kind (``data`` or ``video``) that the templates point at and that do not exist.

    ``template_key``/``template``: info.json's ``data_path`` or ``video_path`` and its value; ``paths``
    the missing files (relative, posix, in episode order); ``episodes`` the episodes referring to them;
    ``found`` ``[(folder, count)]``: folders (relative, ending ``/``) holding files of the missing names
    (``matched == "names"``) or, when none, files matching the template's name pattern (``"pattern"``),
    the fullest first; ``truncated``: the scan stopped at :data:`SCAN_LIMIT` entries."""

    kind: str
    template_key: str
    template: str
    paths: list[str]
    episodes: list[str]
    found: list[tuple[str, int]] = field(default_factory=list)
    matched: str = ""
    truncated: bool = False

    def describe(self, shown: int = 3) -> str:
        """One line: ``2 video files missing (a, b); files of these names sit under videos/top/chunk-000/
        (2); meta/info.json video_path is '...'`` (:func:`missing_line`)."""
        return missing_line(self.to_dict(), shown)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "count": len(self.paths), "paths": self.paths, "episodes": self.episodes,
                "template_key": self.template_key, "template": self.template,
                "found": [{"folder": f, "files": n} for f, n in self.found], "matched": self.matched or None,
                "scan_truncated": self.truncated}


def missing_line(group: dict, shown: int = 3) -> str:
    """A :meth:`MissingFiles.to_dict` in words, on one line: how many files, the first ``shown``, where
    files of those names (or of the template's name pattern) sit, and the template they should match."""
    n, paths = group["count"], group["paths"]
    line = f"{n} {group['kind']} file{'s' if n != 1 else ''} missing ({', '.join(paths[:shown])}{', ...' if n > shown else ''})"
    found = group["found"]
    if found:
        what = "files of these names" if group["matched"] == "names" else "files named like the template's"
        more = f" and {len(found) - shown} more folders" if len(found) > shown else ""
        line += f"; {what} sit under " + ", ".join(f"{f['folder']} ({f['files']})" for f in found[:shown]) + more
    else:
        line += "; no file of these names in the dataset folder" + (
            f" (the scan stopped after {SCAN_LIMIT:,} entries)" if group["scan_truncated"] else "")
    return line + f"; {INFO_FILE} {group['template_key']} is {group['template']!r}"


#: :func:`disk_bytes` kinds of a LeRobot dataset's files, by top folder
DISK_KINDS = {"data": "parquet", "videos": "video", "meta": "metadata"}


def disk_bytes(root: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Bytes by kind of a LeRobot dataset's files (each inode once), and the number of data and video
    files."""
    out = {"parquet": 0, "images": 0, "video": 0, "sidecar": 0, "metadata": 0, "other": 0}
    files = {"data_files": 0, "video_files": 0}
    seen: set[tuple[int, int]] = set()
    for dirpath, _dirnames, names in os.walk(root):
        rel = Path(os.path.relpath(dirpath, root)).parts
        top = rel[0] if rel and rel[0] != "." else None
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            kind = DISK_KINDS.get(top, "other")
            if kind == "parquet" and not name.endswith(".parquet") or kind == "video" and not name.endswith(".mp4"):
                kind = "other"
            out[kind] += st.st_size
            if kind == "parquet":
                files["data_files"] += 1
            elif kind == "video":
                files["video_files"] += 1
    return out, files
