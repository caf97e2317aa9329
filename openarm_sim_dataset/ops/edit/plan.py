"""Everything an edit will write, worked out and checked before anything is written (:func:`plan_edit`):
per output its folder, its metadata with the ``edited_from`` record, and each episode's source entry,
new entry and trim window."""

from __future__ import annotations

import copy
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from openarm_sim_dataset import __version__
from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.dataset import Dataset, folder_problem
from openarm_sim_dataset.core.metadata import Metadata
from openarm_sim_dataset.core.writer import CAMERA_FORMATS, check_output

from .relabel import relabel_entries, relabel_tasks
from .request import EditError, EditSpec
from .selection import id_summary, select
from .split import split_entries
from .trim import Window, explicit_window, idle_window

#: The metadata key naming an edit's source.
EDITED_FROM = "edited_from"


@dataclass
class OutputPlan:
    """One output dataset: its folder, metadata (no episode yet) and ``(source entry, new entry,
    window or None)`` per episode."""

    path: Path
    meta: Metadata
    episodes: list[tuple[dict, dict, Window | None]]


@dataclass
class EditPlan:
    outputs: list[OutputPlan]
    notes: list[str] = field(default_factory=list)


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def plan_edit(src: str | os.PathLike, out: str | os.PathLike, spec: EditSpec) -> EditPlan:
    """Everything the edit will write, checked (nothing is written): raises :class:`EditError` for
    every refusal of :mod:`openarm_sim_dataset.edit`'s doc."""
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise EditError(src, folder_problem(src))
    if not (src / layout.METADATA_FILE).is_file():
        raise EditError(src, "is not a dataset (no metadata.yaml)")
    check_output(out, [src])
    if spec.camera_format is not None and spec.camera_format not in CAMERA_FORMATS:
        raise ValueError(f"camera format must be one of {', '.join(CAMERA_FORMATS)}, not {spec.camera_format!r}")
    ds = Dataset(src)
    meta_file = src / layout.METADATA_FILE
    entries = select(ds, spec)
    tasks, notes = relabel_tasks(ds, spec)
    entries, more = relabel_entries(ds, entries, spec, tasks)
    notes += more
    kept_ids = [ds.episode_id(e) for e in entries]
    trims = {}
    for t in spec.trims:
        if t.episode not in set(ds.episode_ids):
            raise EditError(meta_file, f"--trim {t.episode}: no episode {t.episode} (the dataset has "
                                       f"{id_summary(ds.episode_ids)})")
        if t.episode not in kept_ids:
            raise EditError(meta_file, f"--trim {t.episode}: episode {t.episode} is not kept by the selection")
        if t.episode in trims:
            raise EditError(meta_file, f"--trim {t.episode}: given twice")
        trims[t.episode] = t
    windows: dict[str, Window | None] = {}
    for e in entries:
        ep = ds.episode_id(e)
        if ep in trims:
            windows[ep] = explicit_window(ds, e, trims[ep])
        elif spec.trim_idle is not None:
            w = idle_window(ds, e, spec.trim_idle)
            if w is None:
                notes.append(f"episode {ep}: no obs joint moves more than {spec.trim_idle.threshold_rad:g} rad: not trimmed")
            elif not w.cuts:
                notes.append(f"episode {ep}: idle head 0.000 s, tail 0.000 s: not trimmed")
            else:
                notes.append(f"episode {ep}: idle head {w.head_s:.3f} s, tail {w.tail_s:.3f} s cut "
                             f"({(w.last_ns - w.first_ns) / 1e9:.3f} s -> {(w.end_ns - w.start_ns) / 1e9:.3f} s)")
            windows[ep] = w if w is not None and w.cuts else None
        if ep in trims:
            w = windows[ep]
            notes.append(f"episode {ep}: trimmed to {(w.start_ns - w.first_ns) / 1e9:.3f}-{(w.end_ns - w.first_ns) / 1e9:.3f} s "
                         f"(head {w.head_s:.3f} s, tail {w.tail_s:.3f} s cut"
                         + (f"; sidecar frames {w.frames[0]}-{w.frames[1]}" if w.frames else "") + ")")
    groups = split_entries(entries, spec.split, spec.seed) if spec.split else {None: entries}
    for name, group in groups.items():
        if not group:
            raise EditError(meta_file, f"--split: the {name} split would hold no episode (of {len(entries)} kept): "
                                       "use a larger fraction or keep more episodes")
    src_doc = ds.meta.to_dict()
    base_record = {
        "path": str(src.resolve()),
        "metadata_sha256": _sha256(meta_file),
        "tool": {"name": "dataset-edit", "version": str(__version__)},
        "operations": spec.operations(),
    }
    if isinstance(src_doc.get(EDITED_FROM), dict):
        base_record["previous"] = src_doc[EDITED_FROM]
    outputs = []
    for name, group in groups.items():
        path = out if name is None else out / name
        doc = copy.deepcopy(src_doc)
        doc["tasks"] = tasks
        doc["episodes"] = []
        doc.pop(EDITED_FROM, None)
        if not spec.keep_ids:
            doc.pop("discarded_episodes", None)
        record = dict(base_record)
        record["episodes"] = {ds.episode_id(e): _sha256(layout.episode_dir(src, ds.episode_id(e)) / layout.MANIFEST_FILE)
                              for e in group}
        if name is not None:
            record["split"] = {"name": name, "of": [n for n in groups], "seed": int(spec.seed),
                               "fractions": {n: float(f) for n, f in spec.split}}
        doc[EDITED_FROM] = record
        doc["episodes"] = doc.pop("episodes")  # last, as every writer keeps it
        eps = []
        for i, e in enumerate(group):
            old = ds.episode_id(e)
            new = copy.deepcopy(e)
            new["id"] = old if spec.keep_ids else str(i)
            source = {"dataset": str(src.resolve()), "id": old}
            if "source" in e:
                source["source"] = copy.deepcopy(e["source"])
            new["source"] = source
            eps.append((e, new, windows.get(old)))
        outputs.append(OutputPlan(path, Metadata(doc), eps))
    return EditPlan(outputs, notes)
