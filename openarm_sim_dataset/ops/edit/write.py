"""Writing an edit's plan: each output committed episode by episode under its lock, an interrupted run
resumed (:func:`edit`, what ``dataset-edit`` runs)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.atomic import remove_tree
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.lock import OutputLock
from openarm_sim_dataset.core.metadata import Metadata
from openarm_sim_dataset.core.writer import begin_episode, commit_episode, finish_episode, remove_uncommitted

from ..merge import copy_episode_tree
from .plan import EDITED_FROM, OutputPlan, plan_edit
from .request import EditError, EditSpec
from .trim import Window, trimmed_data, trimmed_entry


@dataclass
class EditSummary:
    """What an edit wrote: per output its path and episode count; episodes written now and found
    already committed (a resumed run); camera frames written; the plan's notes."""

    outputs: list[tuple[Path, int]]
    made: int = 0
    skipped: int = 0
    frames: int = 0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        outs = ", ".join(f"{p} ({n} episode(s))" for p, n in self.outputs)
        resumed = f", {self.skipped} already committed" if self.skipped else ""
        return f"dataset-edit: {self.made} episode(s) written{resumed}, {self.frames} frame(s) -> {outs}"


def _comparable(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("path", "tool")}


def _open_output(plan: OutputPlan) -> Metadata:
    """The output's metadata: written fresh (no episode), or the existing one of an interrupted run of
    the same edit (its ``edited_from`` equal, path and tool aside)."""
    path = plan.path
    meta_path = path / layout.METADATA_FILE
    if meta_path.exists():
        existing = Metadata.load(path)
        stored = existing.to_dict().get(EDITED_FROM)
        want = plan.meta.to_dict()[EDITED_FROM]
        if not isinstance(stored, dict):
            raise EditError(meta_path, "exists but is not the output of dataset-edit (no edited_from); choose a new OUT")
        if _comparable(stored) != _comparable(want):
            raise EditError(meta_path, "exists and is another edit (edited_from differs: other source content or "
                                       "operations); choose a new OUT, or rerun the same command to resume")
        return existing
    if path.exists() and any(not p.name.startswith(".tmp-") for p in path.iterdir()):
        raise EditError(path, "exists, is not empty and has no metadata.yaml")
    path.mkdir(parents=True, exist_ok=True)
    meta = Metadata(plan.meta.to_dict())
    meta.write(path)
    return meta


def edit(src: str | os.PathLike, out: str | os.PathLike, spec: EditSpec,
         progress: Callable[[str], None] | None = None) -> EditSummary:
    """Edit ``src`` into ``out`` (``out/<split>`` for every split with ``spec.split``) as
    :mod:`openarm_sim_dataset.edit` says; ``progress(line)`` is called with the plan's notes and once per
    episode written."""
    src, out = Path(src), Path(out)
    plan = plan_edit(src, out, spec)
    for n in plan.notes:
        if progress:
            progress(n)
    ds = Dataset(src)
    camera_format = spec.camera_format or _camera_format(ds)
    summary = EditSummary([(o.path, len(o.episodes)) for o in plan.outputs], notes=list(plan.notes))
    total = sum(len(o.episodes) for o in plan.outputs)
    done = 0
    for o in plan.outputs:
        lock = OutputLock(o.path)
        try:
            meta = _open_output(o)
            remove_uncommitted(o.path, meta)
            have = set(meta.episode_ids)
            for src_entry, entry, w in o.episodes:
                done += 1
                if entry["id"] in have:
                    summary.skipped += 1
                    continue
                summary.frames += write_episode(ds, src_entry, entry, w, o.path, meta, camera_format)
                summary.made += 1
                if progress:
                    progress(f"edit: {done}/{total} episode {ds.episode_id(src_entry)} -> "
                             f"{o.path.name}/{entry['id']}" + (f" (trimmed: {w.reason})" if w is not None else ""))
        finally:
            lock.release()
    return summary


def _camera_format(ds: Dataset) -> str:
    try:
        return ds.camera_format or "dir"
    except ValueError:
        return "dir"


def write_episode(ds: Dataset, src_entry: dict, entry: dict, w: Window | None, root: Path, meta: Metadata,
                   camera_format: str) -> int:
    """Commit one episode into ``root``; returns its camera frames."""
    ep = ds.episode_id(src_entry)
    cams = ds.load_cameras(src_entry)
    if w is None and ds.version == layout.FORMAT_VERSION and \
            all(c.format == camera_format for c in cams.values()):
        tmp = begin_episode(root, entry["id"])
        try:
            copy_episode_tree(ds.episode_path(src_entry), tmp, link=False)  # files checked against the source's manifest
        except BaseException:
            remove_tree(tmp)
            raise
        finish_episode(root, meta, entry, tmp, with_manifest=False)
        return sum(c.num_frames for c in cams.values())
    if w is None:
        data = ds.episode_data(src_entry)
        new = entry
    else:
        data = trimmed_data(ds, src_entry, w)
        new = trimmed_entry(entry, w, data)
    frames = [0]

    def counted(it):
        for item in it:
            frames[0] += 1
            yield item

    data.cameras = {n: counted(f) for n, f in data.cameras.items()}
    try:
        commit_episode(root, meta, new, data, camera_format)
    except DatasetError:
        raise
    except (KeyError, ValueError) as e:
        raise EditError(layout.episode_dir(ds.root, ep), f"cannot be written ({e})") from None
    return frames[0]
