"""The on-disk contract of the OpenArm Dataset layout: versions, paths, column names, name checks.

Everything that builds a path inside a dataset or names a column asks this module; nothing else
spells ``"episodes"`` or ``"state.parquet"``.

Layouts (recognised from content, never from the folder's name):

=============  ===========================================================================
``unversioned``  top-level ``meta:`` key; ``episodes.jsonl``; ``obs/<side>_arm/<attr>.parquet``
                 with a ``positions`` list column; cameras in ``<name>_image/``, ``cam_`` prefix
``0.1.0``        ``version: 0.1.0``; ``obs|action/arms/<side>/qpos.parquet`` (``positions``)
``0.2.0``        as 0.1.0 with a ``value`` list column
``0.3.0``        obs in ``obs/arms/<side>/state.parquet`` (list columns per attribute), action in
                 ``action/arms/<side>/qpos.parquet``; ``lifter/elevation.parquet``
``0.4.0``        obs and action in ``state.parquet`` (qpos/qvel/qtorque/pose); cameras as folders of
                 ``<ns>.jpeg`` or ``<name>.tar``
=============  ===========================================================================
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import UnsafeNameError

FORMAT_VERSION = "0.4.0"
UNVERSIONED = "unversioned"
KNOWN_VERSIONS = (UNVERSIONED, "0.1.0", "0.2.0", "0.3.0", "0.4.0")

METADATA_FILE = "metadata.yaml"
#: Entries committed since metadata.yaml was last rewritten, one JSON object per line (``journal.py``);
#: present only while a writer runs or after it was killed. openarm_dataset never opens it.
JOURNAL_FILE = "metadata.journal"
#: metadata.yaml's parsed document as JSON, keyed by the YAML's SHA-256 (``metadata_index.py``).
METADATA_INDEX_FILE = "metadata.index.json"
EPISODES_JSONL = "episodes.jsonl"  # unversioned layout only
EPISODES_DIR = "episodes"
CAMERAS_DIR = "cameras"
STATE_FILE = "state.parquet"
TAR_SUFFIX = ".tar"
JPEG_SUFFIX = ".jpeg"
SIM_DIR = "sim"  # per-episode folder for simulation-only files, never opened by openarm_dataset
#: Per-episode integrity manifest (SHA-256 and size of every file of the episode; see ``manifest.py``),
#: beside the streams, a path openarm_dataset never opens.
MANIFEST_FILE = "manifest.sha256"
#: Per-episode summary (row counts and stamps of each stream, each camera's format, frames, span and
#: frame size, bytes by kind; see ``episode_summary.py``), written with the manifest, never opened by
#: openarm_dataset: ``dataset-info`` reads it instead of the episode's files.
SUMMARY_FILE = "summary.json"

KINDS = ("obs", "action")
ARM_SIDES = ("right", "left")

EMBODIMENT_OPENARM = "OpenArm"
EMBODIMENT_LIFTER = "OpenArmCellLifter"
EMBODIMENT_IDS = (EMBODIMENT_OPENARM, EMBODIMENT_LIFTER)

TIMESTAMP_COLUMN = "timestamp"
#: Attributes that may appear as list columns of a ``state.parquet`` (0.3.0+).
STATE_ATTRIBUTES = ("qpos", "qvel", "qtorque", "pose")
#: The single list column of a per-attribute parquet file in older layouts.
LEGACY_VALUE_COLUMNS = ("positions", "value")
ARM_JOINTS = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "joint7", "gripper")
#: Pose layout: position in metres (arm_origin frame), orientation as a wxyz unit quaternion.
POSE_JOINTS = ("x", "y", "z", "qw", "qx", "qy", "qz", "gripper")
LIFTER_JOINTS = ("elevation",)
ARM_DOF = len(ARM_JOINTS)

#: Camera renames applied when reading 0.1.0 and unversioned datasets.
LEGACY_CAMERA_RENAMES = {"left_wrist": "wrist_left", "right_wrist": "wrist_right"}


def wrist_side(camera: str) -> str | None:
    """The arm a wrist camera rides on (``right``/``left``), or None for any other camera: ``wrist_<side>``
    as this layout names it, or ``<side>_wrist`` as older layouts and LeRobot's bimanual OpenArm do."""
    for side in ARM_SIDES:
        if camera in (f"wrist_{side}", f"{side}_wrist"):
            return side
    return None

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def check_name(name: object, what: str, source: str | Path | None = None) -> str:
    """Return ``name`` as a string that is safe as one path component, or raise UnsafeNameError.

    Integers (episode ids written unquoted in YAML) are normalised to their decimal string.
    Allowed: 1-128 characters of ``[A-Za-z0-9._-]``, not starting with ``.`` or ``-`` — so no
    ``..``, no separators, no absolute paths, no NUL, no hidden names.
    """
    if isinstance(name, bool):
        raise UnsafeNameError(source, f"{what} {name!r} is a boolean, not a name")
    if isinstance(name, int):
        name = str(name)
    if not isinstance(name, str):
        raise UnsafeNameError(source, f"{what} {name!r} is a {type(name).__name__}, not a string")
    if not _SAFE_NAME.fullmatch(name):
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise UnsafeNameError(
            source, f"{what} {shown!r} is not a safe name (1-128 of A-Z a-z 0-9 . _ -, no leading . or -)"
        )
    return name


def check_dataset_name(name: object, what: str, root: str | Path) -> str:
    """:func:`check_name` for a name read from the metadata of the dataset at ``root``, whose
    ``metadata.yaml`` an error names. That path is built only for an error: the check runs several
    times per episode read."""
    if type(name) is str and _SAFE_NAME.fullmatch(name):
        return name
    return check_name(name, what, Path(root) / METADATA_FILE)


def parse_frame_name(name: str) -> int | None:
    """Return the nanosecond timestamp encoded in a frame file name ``<ns>.jpeg``, or None."""
    stem, _, ext = name.rpartition(".")
    # same rule as the regex `[0-9]{1,20}\.(jpeg|jpg)`, without its per-call cost (hot in listings)
    if ext in ("jpeg", "jpg") and 0 < len(stem) <= 20 and stem.isascii() and stem.isdigit():
        return int(stem)
    return None


def frame_name(timestamp_ns: int) -> str:
    """File name of a camera frame stamped ``timestamp_ns`` (integer nanoseconds)."""
    return f"{int(timestamp_ns)}{JPEG_SUFFIX}"


def camera_window(spans: list[tuple[int, int, float]]) -> tuple[float, float]:
    """The stamps (ns) an episode's camera frames must lie within, given ``(first_ns, last_ns,
    period_ns)`` of each of its state streams: from the latest first sample to the earliest last
    sample, widened by the longest period. The recorder trims to it and the validator checks it."""
    pad = max(p for _, _, p in spans)
    return max(a for a, _, _ in spans) - pad, min(b for _, b, _ in spans) + pad


def episode_dir(root: Path, episode_id: str) -> Path:
    """Folder of an episode (any layout). The id is checked before the path is built."""
    return Path(root, EPISODES_DIR, check_dataset_name(episode_id, "episode id", root))


def component_dir(root: Path, episode_id: str, kind: str, embodiment: str, component: str | None, version: str) -> Path:
    """Folder holding one embodiment component's streams, e.g. ``episodes/0/obs/arms/right``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    parts = [root, EPISODES_DIR, check_dataset_name(episode_id, "episode id", root), kind]  # episode_dir(...) / kind
    if version == UNVERSIONED:
        parts += [f"{component}_arm"] if component else []
    else:
        parts += [check_dataset_name(embodiment, "embodiment name", root)] + ([component] if component else [])
    return Path(*parts)  # one Path built (read per episode and kind)


def state_path(root: Path, episode_id: str, kind: str, embodiment: str, component: str | None) -> Path:
    """Path of a 0.4.0 ``state.parquet``."""
    return component_dir(root, episode_id, kind, embodiment, component, FORMAT_VERSION) / STATE_FILE


def camera_dir(root: Path, episode_id: str, camera: str, version: str, stored_name: str | None = None) -> Path:
    """Folder of a camera's JPEG frames. ``stored_name`` is the name used on disk (legacy layouts)."""
    name = check_dataset_name(stored_name or camera, "camera name", root)
    episode = check_dataset_name(episode_id, "episode id", root)
    if version == UNVERSIONED:
        return Path(root, EPISODES_DIR, episode, f"{name}_image")  # episode_dir(...) / ..., one Path built
    return Path(root, EPISODES_DIR, episode, CAMERAS_DIR, name)


def camera_tar(root: Path, episode_id: str, camera: str) -> Path:
    """Path of a camera stored as one uncompressed tar archive (0.4.0)."""
    return episode_dir(root, episode_id) / CAMERAS_DIR / (check_name(camera, "camera name") + TAR_SUFFIX)


def sim_dir(root: Path, episode_id: str) -> Path:
    """Per-episode folder of simulation-only files (sidecar, depth, labels)."""
    return episode_dir(root, episode_id) / SIM_DIR


#: The dataset card (``dataset-info --card``): at the top level, a path no reader opens.
CARD_FILE = "README.md"
