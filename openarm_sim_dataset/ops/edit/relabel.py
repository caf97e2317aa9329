"""The relabel operation: tasks' prompts and descriptions, episodes' ``task_index``, ``success`` and
``outcome``; a simulated episode's label is checked against what ``dataset-validate`` judges
(:func:`judged_labels`) and refused where it contradicts it, unless forced."""

from __future__ import annotations

import copy

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.validate.check import Context
from openarm_sim_dataset.validate.sim_labels import drawn_params, labels_episode
from openarm_sim_dataset.validate.sim_model import ModelProblem

from .request import VALIDITY_KEYS, EditError, EditSpec
from .selection import id_summary

#: The per-entry key recording labels set by hand.
RELABELLED = "relabelled"


def _judges(ds: Dataset) -> bool:
    """Whether the validator judges this dataset's labels again (generated or rollout simulated data)."""
    return ds.meta.simulation is not None and not sidecar.recorded_live(ds.meta.simulation)


def judged_labels(ds: Dataset, ep_id: str) -> dict | str:
    """``{"outcome", "success", "knocked_over", "task_index"}`` that ``dataset-validate`` judges for a
    simulated episode (its task's rule on the replayed judged state; the task index its seed draws), or
    why it cannot (a str)."""
    ctx = Context(ds, [ep_id])
    try:
        part = labels_episode(ctx, ep_id)
    except (DatasetError, KeyError, TypeError, ValueError) as e:
        return f"episode {ep_id}: its labels cannot be judged again ({e})"
    if part is None:
        return f"episode {ep_id}: no usable sidecar"
    if isinstance(part, ModelProblem):
        return part.text
    if part[0] != "ok" or not part[1]:
        return part[1] if part[0] == "old" else "; ".join(part[2]) or f"episode {ep_id}: not judged"
    _task, outcome, knocked = part[1]
    out = {"outcome": outcome, "success": outcome == "success", "knocked_over": knocked}
    try:
        out["task_index"] = drawn_params(ctx, ep_id)[1]
    except (KeyError, TypeError, ValueError):
        pass
    return out


def relabel_entries(ds: Dataset, entries: list[dict], spec: EditSpec, tasks: list[dict]) -> tuple[list[dict], list[str]]:
    """The kept entries with the episode relabels applied (``relabelled`` marks added) and lines saying
    what each relabel did. Raises :class:`EditError` for an episode not kept, a task index out of range,
    or (without ``force``) a simulated episode's label that its judge contradicts."""
    meta_file = ds.root / layout.METADATA_FILE
    by_id = {ds.episode_id(e): e for e in entries}
    all_ids = set(ds.episode_ids)
    changes: dict[str, dict[str, object]] = {}
    for key, pairs in (("task_index", spec.tasks), ("success", spec.successes), ("outcome", spec.outcomes)):
        for ep, value in pairs:
            ep = str(ep)
            if ep not in all_ids:
                raise EditError(meta_file, f"--set-{key.replace('_index', '')} {ep}: no episode {ep} "
                                           f"(the dataset has {id_summary(ds.episode_ids)})")
            if ep not in by_id:
                raise EditError(meta_file, f"--set-{key.replace('_index', '')} {ep}: episode {ep} is not kept by the selection")
            if key == "task_index" and not (isinstance(value, int) and 0 <= value < len(tasks)):
                raise EditError(meta_file, f"--set-task {ep} {value}: no task {value} (the dataset has "
                                           f"{len(tasks)} task(s), 0-{len(tasks) - 1})")
            changes.setdefault(ep, {})[key] = value
    out, notes = [], []
    judges = _judges(ds)
    for entry in entries:
        ep = ds.episode_id(entry)
        new = copy.deepcopy(entry)
        todo = {k: v for k, v in changes.get(ep, {}).items() if entry.get(k) != v}
        if todo:
            judged = judged_labels(ds, ep) if judges else None
            marks = dict(new.get(RELABELLED) or {})
            for key, value in todo.items():
                rule = judged.get(key) if isinstance(judged, dict) else None
                contradicts = judges and (not isinstance(judged, dict) or (key in judged and value != rule))
                if contradicts and not spec.force:
                    why = (f"its task's rule judges {rule!r}" if isinstance(judged, dict) else
                           f"its label cannot be judged again ({judged})")
                    what = "the task index its seed draws is" if key == "task_index" else "dataset-validate's sim_labels judges"
                    raise EditError(meta_file, f"episode {ep}: {key} {value!r} contradicts its simulation ({why}; "
                                               f"{what} it from the replayed physics); --force relabels it by hand "
                                               f"(marked '{RELABELLED}' in its entry)")
                prev = marks.get(key)
                mark = {"from": prev["from"] if isinstance(prev, dict) and "from" in prev else entry.get(key),
                        "to": value, "by": "hand"}
                if mark["from"] == value:
                    marks.pop(key, None)  # back to what it was before an earlier relabel
                else:
                    marks[key] = mark
                new[key] = value
                notes.append(f"episode {ep}: {key} {entry.get(key)!r} -> {value!r}"
                             + (f" (against its rule's {rule!r}: --force)" if contradicts else ""))
            if marks:
                new[RELABELLED] = marks
            else:
                new.pop(RELABELLED, None)
            for k in VALIDITY_KEYS:
                new.pop(k, None)
        out.append(new)
    return out, notes


def relabel_tasks(ds: Dataset, spec: EditSpec) -> tuple[list[dict], list[str]]:
    """The task list with prompts and descriptions replaced (task indices unchanged)."""
    tasks = copy.deepcopy(ds.meta.tasks)
    notes = []
    for key, pairs in (("prompt", spec.prompts), ("description", spec.descriptions)):
        for t, text in pairs:
            if not (isinstance(t, int) and 0 <= t < len(tasks)):
                raise EditError(ds.root / layout.METADATA_FILE, f"--set-{key} {t}: no task {t} (the dataset has "
                                                                f"{len(tasks)} task(s))")
            if not str(text).strip():
                raise EditError(ds.root / layout.METADATA_FILE, f"--set-{key} {t}: empty {key}")
            notes.append(f"task {t}: {key} {tasks[t].get(key)!r} -> {text!r}")
            tasks[t][key] = str(text)
    return tasks, notes
