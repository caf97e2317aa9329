"""The on-disk contract of LeRobot datasets (``codebase_version`` v2.0, v2.1 and v3.0), as far as
reading them needs: where ``info.json`` is, the versions read, the columns every frame table has, the
paths its templates build (refused when they would leave the dataset folder), and a bounded scan of the
folder that finds files a template does not point at.

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
    for literal, field, _spec, _conv in string.Formatter().parse(template.rsplit("/", 1)[-1]):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(r"\d+" if field.endswith(("index", "chunk")) else r"[^/]+")
    return re.compile("".join(parts) + r"\Z")
