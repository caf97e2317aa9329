"""Writing 0.4.0 episodes: the episode tree, and the commit protocol of a recorder.

Commit protocol (as a teleop recorder does it): an episode is written into ``episodes/.tmp-<id>...``,
fsynced, renamed to ``episodes/<id>``, and only then listed: appended to metadata.yaml's journal, which
is folded into ``metadata.yaml`` (atomically) often and when the writer ends (:mod:`.journal`: a commit
costs the same at the 10,000th episode as at the 10th). Every writer ends with :func:`close_log`.
Every episode tree ends with its integrity manifest (``manifest.sha256``: SHA-256 and size of every
file, see :mod:`.manifest`), written inside the temporary folder, so it exists before the episode is
renamed into place and listed.
A process killed at any point leaves a dataset whose listed episodes are all complete; leftovers
(temporary folders, or an episode folder renamed but never listed) are removed by
:func:`remove_uncommitted` before the next run, and never consume an index.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import layout, manifest
from .atomic import TMP_PREFIX, commit_dir, remove_stale_tmp, remove_tree, tmp_name
from .errors import OutputExistsError
from .frame_writer import write_camera_dir, write_camera_tar
from .journal import close_log, episode_log  # noqa: F401 - close_log: part of the writer's protocol
from .metadata import Metadata
from .streams import legacy_value_table, state_table

CAMERA_FORMATS = ("dir", "tar")


@dataclass
class ComponentStreams:
    """All attributes of one embodiment component sharing one timestamp array (int64 ns)."""

    timestamps: np.ndarray
    attributes: dict[str, np.ndarray]  # attribute -> (N, width) float32; "elevation" for the lifter


@dataclass
class EpisodeData:
    """Everything one episode stores. Keys of ``obs``/``action`` are ``(embodiment, component)``,
    component None for the lifter. ``cameras`` map a name to ``(timestamp_ns, jpeg_bytes)`` pairs.
    ``files`` are extra files (relative path inside the episode -> bytes or a source Path),
    e.g. the simulation sidecar under ``sim/``. ``tree``: instead of all that, a temporary folder
    ``episodes/.tmp-...`` of the output that another process already filled with the whole episode, its
    manifest included (e.g. a Ray worker writing to a shared filesystem): committed by renaming it."""

    obs: dict[tuple[str, str | None], ComponentStreams] = field(default_factory=dict)
    action: dict[tuple[str, str | None], ComponentStreams] = field(default_factory=dict)
    cameras: dict[str, Iterable[tuple[int, bytes]]] = field(default_factory=dict)
    files: dict[str, bytes | Path] = field(default_factory=dict)
    tree: Path | None = None


def stream_path(ep_dir: Path, kind: str, embodiment: str, component: str | None, attribute: str | None = None) -> Path:
    """File of one obs/action component inside an episode folder: ``<kind>/<embodiment>/<component>/state.parquet``
    for an arm, ``<kind>/<embodiment>/<attribute>.parquet`` for a component-less embodiment (the lifter)."""
    if kind not in layout.KINDS:
        raise ValueError(f"kind must be one of {layout.KINDS}, not {kind!r}")
    base = Path(ep_dir) / kind / layout.check_name(embodiment, "embodiment name")
    if component is not None:
        return base / layout.check_name(component, "component") / layout.STATE_FILE
    return base / f"{layout.check_name(attribute, 'attribute')}.parquet"


def stream_table(component: str | None, timestamps: np.ndarray, attributes: Mapping[str, np.ndarray]) -> pa.Table:
    """The table stored for one component: a ``state.parquet`` table (one list column per attribute),
    or for a component-less embodiment its single attribute as a ``value`` column."""
    if component is not None:
        return state_table(timestamps, attributes)
    ((_attr, values),) = attributes.items()
    return legacy_value_table(timestamps, values)


def write_episode_tree(ep_dir: Path, data: EpisodeData, camera_format: str = "dir", with_manifest: bool = True) -> None:
    """Write an episode's files under ``ep_dir`` (a temporary folder: nothing here is atomic), then its
    manifest (``with_manifest=False``: the caller adds files and writes it with :func:`manifest.write`)."""
    if camera_format not in CAMERA_FORMATS:
        raise ValueError(f"camera_format must be one of {CAMERA_FORMATS}, not {camera_format!r}")
    for kind, groups in (("obs", data.obs), ("action", data.action)):
        for (embodiment, component), comp in groups.items():
            attr = None if component is not None else next(iter(comp.attributes))
            path = stream_path(ep_dir, kind, embodiment, component, attr)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(stream_table(component, comp.timestamps, comp.attributes), path)
    for name, frames in data.cameras.items():
        cam_dir = ep_dir / layout.CAMERAS_DIR
        cam_dir.mkdir(parents=True, exist_ok=True)
        name = layout.check_name(name, "camera name")
        if camera_format == "dir":
            write_camera_dir(cam_dir / name, frames)
        else:
            write_camera_tar(cam_dir / (name + layout.TAR_SUFFIX), frames)
    for rel, content in data.files.items():
        parts = Path(rel).parts
        for part in parts:
            layout.check_name(part, "file name")
        dest = ep_dir.joinpath(*parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, dest)
        else:
            dest.write_bytes(content)
    if with_manifest:
        manifest.write(ep_dir)


class StreamWriter:
    """One obs/action component written as rows come, one parquet row group per :meth:`write`
    (the schema and file :func:`write_episode_tree` writes; readers see one table). The file lies in
    an episode's temporary folder: it is complete only after :meth:`close`."""

    def __init__(self, ep_dir: Path, kind: str, embodiment: str, component: str | None, attributes: tuple[str, ...]):
        if component is None and len(attributes) != 1:
            raise ValueError(f"{embodiment}: a component-less embodiment stores one attribute, not {attributes}")
        self.component = component
        self.attributes = tuple(attributes)
        self.path = stream_path(ep_dir, kind, embodiment, component, attributes[0] if component is None else None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None

    def write(self, timestamps: np.ndarray, attributes: Mapping[str, np.ndarray]) -> None:
        """Append rows: int64 ns stamps (N,) and each attribute as (N, width) float32, as one row group."""
        table = stream_table(self.component, timestamps, attributes)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema)
        self._writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> None:
        """Write the footer (a stream that received no row writes no file)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def begin_episode(root: Path, episode_id: str) -> Path:
    """Create and return the temporary folder ``episodes/.tmp-<id>...`` in which episode ``episode_id``
    of ``root`` is written: the first step of the commit protocol (:func:`finish_episode` is the second)."""
    root = Path(root)
    final = layout.episode_dir(root, episode_id)
    if final.exists():
        raise OutputExistsError(final, "episode folder already exists")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(final)
    tmp.mkdir()
    return tmp


def finish_episode(root: Path, meta: Metadata, entry: Mapping, tmp: Path, with_manifest: bool = True,
                   known: manifest.Entries | None = None) -> None:
    """Commit a completely written temporary episode folder: its manifest (``with_manifest``; files in
    ``known`` were hashed by the caller as it wrote them, see :func:`manifest.compute`), fsync, rename
    to ``episodes/<id>``, and only then list ``entry`` in metadata.yaml (atomically). On failure
    before the rename the temporary folder is removed and nothing is listed."""
    root = Path(root)
    episode_id = layout.check_name(entry["id"], "episode id", root / layout.METADATA_FILE)
    final = layout.episode_dir(root, episode_id)
    try:
        if with_manifest:
            manifest.write(tmp, known=known)
        commit_dir(tmp, final)
    except BaseException:
        remove_tree(tmp)
        raise
    episode_log(root, meta).commit(dict(entry, id=episode_id))


def commit_episode(root: Path, meta: Metadata, entry: Mapping, data: EpisodeData, camera_format: str = "dir") -> None:
    """Write one episode into ``root`` and list it in metadata.yaml (in that order).

    ``entry`` is the metadata entry (``id`` required); ``meta`` is updated in memory and on disk.
    """
    root = Path(root)
    episode_id = layout.check_name(entry["id"], "episode id", root / layout.METADATA_FILE)
    if data.tree is not None:
        # written in place by a worker on a shared filesystem (manifest included): only committed here
        final = layout.episode_dir(root, episode_id)
        tmp = Path(data.tree)
        if tmp.parent.resolve() != final.parent.resolve() or not tmp.name.startswith(f"{TMP_PREFIX}{final.name}.") or not tmp.is_dir():
            raise ValueError(f"{tmp}: not a temporary episode folder of {final.parent}")
        if final.exists():
            raise OutputExistsError(final, "episode folder already exists")
    else:
        tmp = begin_episode(root, episode_id)
        try:
            write_episode_tree(tmp, data, camera_format)
        except BaseException:
            remove_tree(tmp)
            raise
    finish_episode(root, meta, entry, tmp, with_manifest=False)


def remove_uncommitted(root: Path, meta: Metadata) -> list[Path]:
    """Remove temporary episode folders and episode folders that metadata.yaml does not list.

    Returns what was removed. Only names this package could have created are touched.
    """
    root = Path(root)
    episodes = root / layout.EPISODES_DIR
    removed: list[Path] = []
    if not episodes.is_dir():
        return removed
    listed = set(meta.episode_ids)
    for entry in os.scandir(episodes):
        p = Path(entry.path)
        if entry.name.startswith(TMP_PREFIX) or (entry.is_dir(follow_symlinks=False) and entry.name not in listed):
            remove_tree(p)
            removed.append(p)
    for leftover in root.glob(f"{TMP_PREFIX}{layout.METADATA_FILE}*"):
        leftover.unlink(missing_ok=True)
        removed.append(leftover)
    return removed


def check_output(out: str | os.PathLike, inputs=(), *, folder: bool = True) -> None:
    """Refuse an output before anything is written: one that is, or lies inside, one of ``inputs`` (an
    input is never modified: an output inside it would add files its dataset does not list), and, with
    ``folder``, one that exists as something other than a folder (``--out FILE``). Symbolic links and
    ``..`` are resolved first. ``inputs`` that are None are ignored."""
    out = Path(out)
    if folder and (out.exists() or out.is_symlink()) and not out.is_dir():
        what = "a file" if out.is_file() else "not a folder"
        raise OutputExistsError(out, f"exists and is {what}, not a folder (the output is a dataset folder: "
                                     "give a new folder's path)")
    out_real = out.resolve()
    for given in inputs:
        if given is None:
            continue
        real = Path(given).resolve()
        if out_real == real:
            raise OutputExistsError(out, f"is the input {given} itself (inputs are never modified)")
        if real in out_real.parents:
            raise OutputExistsError(out, f"lies inside the input {given} (inputs are never modified)")


def create_dataset_root(out: Path) -> Path:
    """A fresh temporary sibling of ``out`` in which a whole dataset is built before its rename."""
    out = Path(out)
    if out.exists():
        raise OutputExistsError(out, "already exists (refusing to overwrite)")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_tmp(out)
    tmp = tmp_name(out)
    tmp.mkdir()
    return tmp


@contextmanager
def new_dataset(out: str | os.PathLike) -> Iterator[Path]:
    """Build a whole dataset in a temporary sibling of ``out`` and rename it into place on success.

    ``with new_dataset(out) as tmp: ...`` — on any exception the temporary folder is removed and
    ``out`` never appears; an existing ``out`` is refused before anything is written.
    """
    tmp = create_dataset_root(Path(out))
    try:
        yield tmp
        finish_dataset_root(tmp, Path(out))
    except BaseException:
        remove_tree(tmp)
        raise


def finish_dataset_root(tmp: Path, out: Path) -> None:
    """Rename a completely written dataset into place (refusing if ``out`` appeared meanwhile)."""
    if Path(out).exists():
        remove_tree(tmp)
        raise OutputExistsError(out, "already exists (refusing to overwrite)")
    commit_dir(tmp, Path(out))
