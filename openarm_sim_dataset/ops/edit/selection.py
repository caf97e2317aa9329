"""Which source episodes an edit keeps: ``keep``, ``drop`` and ``where`` clauses (:func:`select`), read
on the source's labels before any relabel."""

from __future__ import annotations

import re
from dataclasses import dataclass

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.dataset import Dataset

from .request import EditError, EditSpec, parse_bool


@dataclass(frozen=True)
class Where:
    key: str
    value: str
    negate: bool

    @classmethod
    def parse(cls, text: str) -> Where:
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(!=|==|=)\s*(.*?)\s*", str(text), re.S)
        if not m:
            raise ValueError(f"--where {text!r}: expected KEY=VALUE or KEY!=VALUE (success=true, task_index=0)")
        return cls(m.group(1), m.group(3), m.group(2) == "!=")

    def value_of(self, ds: Dataset, ep: dict):
        if self.key == "prompt":
            t = ep.get("task_index")
            return ds.meta.tasks[t].get("prompt") if isinstance(t, int) and 0 <= t < len(ds.meta.tasks) else None
        if self.key == "operation_type":
            return ep.get("operation_type", ds.meta.operation_type)
        return ep.get(self.key)

    def holds(self, ds: Dataset, ep: dict) -> bool:
        v = self.value_of(ds, ep)
        if isinstance(v, bool):
            try:
                same = v == parse_bool(self.value, f"--where {self.key}")
            except ValueError:
                same = False
        elif v is None:
            same = self.value.lower() in ("null", "none", "")
        else:
            same = str(v) == self.value
        return same != self.negate


def select(ds: Dataset, spec: EditSpec) -> list[dict]:
    """The source entries the selection keeps, in source order (raises :class:`EditError` for an id
    that does not exist, a ``where`` key no entry has, or nothing left)."""
    meta_file = ds.root / layout.METADATA_FILE
    ids = set(ds.episode_ids)
    for what, given in (("--keep", spec.keep or ()), ("--drop", spec.drop)):
        missing = [i for i in given if i not in ids]
        if missing:
            raise EditError(meta_file, f"{what}: no episode {', '.join(missing[:5])} (the dataset has "
                                       f"{id_summary(ds.episode_ids)})")
    clauses = [Where.parse(w) for w in spec.where]
    known = {"prompt", "operation_type"} | {k for ep in ds.episodes for k in ep}
    for c in clauses:
        if c.key not in known:
            raise EditError(meta_file, f"--where {c.key}: no episode entry has that key (keys: "
                                       f"{', '.join(sorted(known - {'id'}))})")
    kept = [ep for ep in ds.episodes
            if (spec.keep is None or ds.episode_id(ep) in spec.keep) and ds.episode_id(ep) not in spec.drop
            and all(c.holds(ds, ep) for c in clauses)]
    if not kept:
        raise EditError(meta_file, f"the selection leaves no episode (of {ds.num_episodes}): nothing to write")
    return kept


def id_summary(ids: list[str]) -> str:
    if not ids:
        return "no episode"
    if all(i.isdigit() for i in ids) and [int(i) for i in ids] == list(range(int(ids[0]), int(ids[0]) + len(ids))):
        return f"ids {ids[0]}-{ids[-1]}"
    return "ids " + ", ".join(ids[:8]) + (" ..." if len(ids) > 8 else "")
