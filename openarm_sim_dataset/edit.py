"""Edit a dataset into a new one, its provenance kept: ``dataset-edit SRC OUT``.

The source is never modified. Operations, applied in this order to the source's episode entries:

* **select**: ``keep`` (only these ids), ``drop`` (not these), ``where`` (``KEY=VALUE`` / ``KEY!=VALUE``
  on an entry's keys: ``success``, ``valid``, ``knocked_over``, ``outcome``, ``task`` (the registry name),
  ``task_index``, ``prompt`` (its task's), ``operation_type`` (the entry's own, else the dataset's), or
  any other scalar key of an entry); all clauses must hold. Selection reads the source's labels, before
  any relabel.
* **relabel**: a task's ``prompt`` and ``description``; an episode's ``task_index``, ``success`` or
  ``outcome``. A simulated episode's labels are judged again by ``dataset-validate`` (``sim_labels``:
  its task's rule on the replayed state; ``sim_identity``: the task index its seed draws), so a relabel
  that contradicts them is refused (:class:`EditError`) unless ``force``. Every relabelled entry records
  ``relabelled: {<key>: {from, to, by: hand}}``; the validator accepts a label that differs from the
  rule's only where this mark says so, and reports it.
* **trim**: an explicit window per episode (:class:`Trim`: seconds ``1.5s`` from the episode's first
  stamp, or frame numbers ``15``: of the sidecar's frames in a simulated episode, else of its first
  camera, else rows of its first obs stream; both ends inclusive), or ``trim_idle``: the head and tail
  in which no obs joint moves more than ``threshold_rad`` from its first (last) value, cut with
  ``margin_s`` kept before the first and after the last motion (episodes with an explicit trim are
  not idle-trimmed). Streams and cameras keep the samples inside the window. A **simulated** episode is
  cut at its sidecar frames (explicit trims inward, idle trims outward) and still replays bit for bit:
  the frame's stored integration state becomes ``initial_state``, ``physics_ctrl`` keeps the commands
  from that step to the end of the episode's physics (the step its task was judged at lies there, so
  its labels stay verifiable), the per-frame arrays keep the frames inside; ``step`` and the judge's
  step count from the new first step; ``trim`` (JSON: ``first_step``, ``source_steps``, ``frames``) and
  ``source_initial_state`` record what was cut (:func:`trim_sidecar`). The entry records ``trimmed``.
* **split**: ``{name: fraction}`` (``val=0.1``): each output ``OUT/<name>`` gets that fraction of each
  task's episodes (largest remainders, drawn with ``numpy.random.default_rng(seed)``), ``OUT/train``
  the rest.
* ids are renumbered ``0..N-1`` in source order per output (``keep_ids`` keeps them); every entry
  records ``source: {dataset, id}``.

Every output's metadata.yaml records ``edited_from``: the source's path, the SHA-256 of its
metadata.yaml and of every kept episode's ``manifest.sha256`` (null without one), the operations, the
tool; a source that was itself edited keeps its record under ``edited_from.previous``. Episodes whose
files or labels changed lose their ``valid``/``validated_at`` flags (validate the output).

Writing: each output is committed episode by episode with :mod:`.writer`'s protocol (an episode folder
is complete, its manifest sealed anew, before it is listed) under the output's lock; running the same
edit again on an interrupted output resumes it (an output whose ``edited_from`` differs, path aside,
is refused). Everything that can be refused (unknown ids, a trim outside its episode, an empty result,
an output inside the source, a relabel the judge contradicts) is refused before anything is written.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import layout, manifest, sidecar
from .dataset import Dataset, folder_problem
from .errors import DatasetError
from .metadata import Metadata
from .writer import CAMERA_FORMATS, ComponentStreams, EpisodeData, begin_episode, check_output, commit_episode, \
    finish_episode, remove_uncommitted

#: The metadata key naming an edit's source (top level) and the per-entry keys an edit writes.
EDITED_FROM = "edited_from"
RELABELLED = "relabelled"
TRIMMED = "trimmed"
#: Sidecar arrays of a trimmed simulated episode (:mod:`.sidecar`).
TRIM_KEY = sidecar.TRIM_KEY
SOURCE_INITIAL_STATE = sidecar.SOURCE_INITIAL_STATE_KEY
#: The output of a split that takes the episodes no named split takes.
TRAIN = "train"
#: Entry keys a relabel may set, with their parser.
LABEL_KEYS = ("task_index", "success", "outcome")
#: Entry keys of the validator: dropped from an entry whose files or labels changed.
VALIDITY_KEYS = ("valid", "validated_at")


class EditError(DatasetError):
    """An edit that cannot be made (bad id, trim outside an episode, empty result, refused relabel ...)."""


# ----------------------------------------------------------------------------- the request
@dataclass(frozen=True)
class Trim:
    """An explicit trim of episode ``episode`` (a source id): ``start``/``end`` as given (``1.5s`` seconds
    from the episode's first stamp, ``15`` a frame number; see the module doc), both inclusive."""

    episode: str
    start: str
    end: str


@dataclass(frozen=True)
class IdleTrim:
    """Cut each episode's head and tail in which no obs joint moves more than ``threshold_rad`` from its
    value at the episode's first (last) sample, keeping ``margin_s`` before the first and after the
    last motion."""

    threshold_rad: float = 0.01
    margin_s: float = 0.2


@dataclass(frozen=True)
class EditSpec:
    """What ``dataset-edit`` does (module doc). Relabels are ``(target, value)`` pairs: ``prompts`` and
    ``descriptions`` target a task index, ``tasks``/``successes``/``outcomes`` a source episode id."""

    keep: tuple[str, ...] | None = None
    drop: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    keep_ids: bool = False
    prompts: tuple[tuple[int, str], ...] = ()
    descriptions: tuple[tuple[int, str], ...] = ()
    tasks: tuple[tuple[str, int], ...] = ()
    successes: tuple[tuple[str, bool], ...] = ()
    outcomes: tuple[tuple[str, str], ...] = ()
    force: bool = False
    trims: tuple[Trim, ...] = ()
    trim_idle: IdleTrim | None = None
    split: tuple[tuple[str, float], ...] = ()
    seed: int = 0
    camera_format: str | None = None

    def operations(self) -> list[dict]:
        """The operations as ``edited_from.operations`` records them (only those asked for)."""
        ops: list[dict] = []
        if self.keep is not None:
            ops.append({"keep": list(self.keep)})
        if self.drop:
            ops.append({"drop": list(self.drop)})
        if self.where:
            ops.append({"where": list(self.where)})
        for key, pairs in (("prompt", self.prompts), ("description", self.descriptions)):
            for t, text in pairs:
                ops.append({"relabel_task": {"task_index": int(t), key: text}})
        for key, pairs in (("task_index", self.tasks), ("success", self.successes), ("outcome", self.outcomes)):
            for ep, value in pairs:
                ops.append({"relabel": {"episode": str(ep), key: value}})
        if self.force:
            ops.append({"force": True})
        for t in self.trims:
            ops.append({"trim": {"episode": t.episode, "start": t.start, "end": t.end}})
        if self.trim_idle is not None:
            ops.append({"trim_idle": {"threshold_rad": float(self.trim_idle.threshold_rad),
                                      "margin_s": float(self.trim_idle.margin_s)}})
        if self.split:
            ops.append({"split": {**{n: float(f) for n, f in self.split}, "seed": int(self.seed)}})
        ops.append({"ids": "kept" if self.keep_ids else "renumbered"})
        return ops


# ----------------------------------------------------------------------------- parsing helpers
_RANGE = re.compile(r"^(\d+)-(\d+)$")


def parse_ids(specs: Sequence[str]) -> tuple[str, ...]:
    """Episode ids from ``"0,3 5-7"``-style specs (commas or separate arguments; ``a-b`` an inclusive
    range of integer ids). Each id is checked as :func:`layout.check_name` does."""
    out: list[str] = []
    for spec in specs:
        for part in str(spec).replace(",", " ").split():
            m = _RANGE.match(part)
            if m and int(m.group(1)) <= int(m.group(2)):
                out += [str(i) for i in range(int(m.group(1)), int(m.group(2)) + 1)]
            else:
                out.append(layout.check_name(part, "episode id"))
    return tuple(dict.fromkeys(out))


def parse_bool(text: str, what: str) -> bool:
    t = str(text).strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise ValueError(f"{what}: {text!r} is not true or false")


def parse_position(text: str, what: str) -> tuple[float, str]:
    """``(value, "s")`` for ``1.5s`` (seconds), ``(value, "frame")`` for ``15`` (a frame number)."""
    t = str(text).strip()
    try:
        if t.endswith("s"):
            v = float(t[:-1])
            if not np.isfinite(v):
                raise ValueError
            return v, "s"
        if not re.fullmatch(r"-?\d+", t):
            raise ValueError
        return float(int(t)), "frame"
    except ValueError:
        raise ValueError(f"{what}: {text!r} is neither seconds (1.5s) nor a frame number (15)") from None


def parse_split(specs: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """``["val=0.1", "test=0.1"]`` -> ``(("val", 0.1), ("test", 0.1))``; fractions in (0, 1), summing
    below 1 (the rest is ``train``)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, frac = str(spec).partition("=")
        if not sep:
            raise ValueError(f"--split {spec!r}: expected NAME=FRACTION (val=0.1)")
        name = layout.check_name(name.strip(), "split name")
        if name == TRAIN or name in out:
            raise ValueError(f"--split {spec!r}: {name!r} is {'the rest' if name == TRAIN else 'given twice'}")
        try:
            f = float(frac)
        except ValueError:
            raise ValueError(f"--split {spec!r}: {frac!r} is not a fraction") from None
        if not 0 < f < 1:
            raise ValueError(f"--split {spec!r}: the fraction must lie between 0 and 1")
        out[name] = f
    if sum(out.values()) >= 1:
        raise ValueError(f"--split: fractions sum to {sum(out.values()):g}, leaving nothing for {TRAIN}")
    return tuple(out.items())


# ----------------------------------------------------------------------------- selection
@dataclass(frozen=True)
class Where:
    key: str
    value: str
    negate: bool

    @classmethod
    def parse(cls, text: str) -> "Where":
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
                                       f"{_id_summary(ds.episode_ids)})")
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


def _id_summary(ids: list[str]) -> str:
    if not ids:
        return "no episode"
    if all(i.isdigit() for i in ids) and [int(i) for i in ids] == list(range(int(ids[0]), int(ids[0]) + len(ids))):
        return f"ids {ids[0]}-{ids[-1]}"
    return "ids " + ", ".join(ids[:8]) + (" ..." if len(ids) > 8 else "")


# ----------------------------------------------------------------------------- labels of simulated episodes
def _judges(ds: Dataset) -> bool:
    """Whether the validator judges this dataset's labels again (generated or rollout simulated data)."""
    return ds.meta.simulation is not None and not sidecar.recorded_live(ds.meta.simulation)


def judged_labels(ds: Dataset, ep_id: str) -> dict | str:
    """``{"outcome", "success", "knocked_over", "task_index"}`` that ``dataset-validate`` judges for a
    simulated episode (its task's rule on the replayed judged state; the task index its seed draws), or
    why it cannot (a str)."""
    from .validate.core import Context
    from .validate.sim_labels import _labels_episode, _params
    from .validate.sim_model import ModelProblem

    ctx = Context(ds, [ep_id])
    try:
        part = _labels_episode(ctx, ep_id)
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
        out["task_index"] = _params(ctx, ep_id)[1]
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
                                           f"(the dataset has {_id_summary(ds.episode_ids)})")
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


# ----------------------------------------------------------------------------- windows
@dataclass
class Window:
    """What a trim keeps of one episode: stamps ``[start_ns, end_ns]`` (inclusive) and, for a simulated
    episode, the sidecar frames ``k0..k1`` (inclusive); with the figures it prints."""

    start_ns: int
    end_ns: int
    first_ns: int
    last_ns: int
    frames: tuple[int, int] | None = None
    reason: str = "trim"

    @property
    def head_s(self) -> float:
        return (self.start_ns - self.first_ns) / 1e9

    @property
    def tail_s(self) -> float:
        return (self.last_ns - self.end_ns) / 1e9

    @property
    def cuts(self) -> bool:
        return self.start_ns > self.first_ns or self.end_ns < self.last_ns


def _episode_stamps(ds: Dataset, ep: dict) -> tuple[dict, dict, np.ndarray | None]:
    """``(streams {kind/key: Stream}, cameras {name: stamps}, sidecar frame stamps or None)``."""
    streams = {f"{kind}/{k}": s for kind in layout.KINDS for k, s in ds.streams(ep, kind).items()}
    cams = {name: np.asarray(c.timestamps, np.int64) for name, c in ds.load_cameras(ep).items()}
    side = layout.sim_dir(ds.root, ds.episode_id(ep)) / sidecar.SIDECAR_FILE
    ft = None
    if ds.meta.simulation is not None and side.is_file():
        ft = np.asarray(sidecar.load_npz(side, members=("frame_timestamp",))["frame_timestamp"], np.int64)
    return streams, cams, ft


def _span(streams: dict, cams: dict) -> tuple[int, int]:
    firsts = [int(s.timestamps[0]) for s in streams.values() if len(s.timestamps)]
    firsts += [int(t[0]) for t in cams.values() if len(t)]
    lasts = [int(s.timestamps[-1]) for s in streams.values() if len(s.timestamps)]
    lasts += [int(t[-1]) for t in cams.values() if len(t)]
    if not firsts:
        raise ValueError("no sample")
    return min(firsts), max(lasts)


def _frame_clock(streams: dict, cams: dict, ft: np.ndarray | None) -> tuple[np.ndarray, str]:
    if ft is not None:
        return ft, "sidecar frames"
    if cams:
        name = sorted(cams)[0]
        return cams[name], f"frames of camera {name}"
    key = sorted(k for k in streams if k.startswith("obs/"))[0] if any(k.startswith("obs/") for k in streams) else sorted(streams)[0]
    return np.asarray(streams[key].timestamps, np.int64), f"rows of {key}"


def explicit_window(ds: Dataset, ep: dict, trim: Trim) -> Window:
    """The window ``--trim ID START END`` keeps of episode ``ep`` (EditError when it lies outside it)."""
    where = ds.root / layout.METADATA_FILE
    ep_id = ds.episode_id(ep)
    streams, cams, ft = _episode_stamps(ds, ep)
    first, last = _span(streams, cams)
    clock, clock_name = _frame_clock(streams, cams, ft)
    ends = []
    for text, what in ((trim.start, "START"), (trim.end, "END")):
        v, unit = parse_position(text, f"--trim {ep_id} {what}")
        if unit == "s":
            if v < 0 or first + round(v * 1e9) > last:
                raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: {what} {v:g} s lies outside episode "
                                       f"{ep_id} (0-{(last - first) / 1e9:.3f} s)")
            ends.append(first + int(round(v * 1e9)))
        else:
            k = int(v)
            if not 0 <= k < len(clock):
                raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: {what} frame {k} lies outside episode "
                                       f"{ep_id} ({len(clock)} {clock_name}, 0-{len(clock) - 1})")
            ends.append(int(clock[k]))
    start, end = ends
    if start >= end:
        raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: START is not before END")
    frames = None
    if ft is not None:  # inward onto the sidecar's frames (the only states stored)
        k0 = int(np.searchsorted(ft, start, "left"))
        k1 = int(np.searchsorted(ft, end, "right")) - 1
        if k1 - k0 < 1:
            raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: fewer than two sidecar frames lie inside "
                                   f"(a simulated episode is cut at its frames, {_period_s(ft):.3g} s apart)")
        frames, start, end = (k0, k1), int(ft[k0]), int(ft[k1])
    w = Window(start, end, first, last, frames, "trim")
    _check_window(ds, ep_id, streams, cams, w, f"--trim {ep_id} {trim.start} {trim.end}")
    return w


def _period_s(ft: np.ndarray) -> float:
    return float(np.median(np.diff(ft))) / 1e9 if len(ft) > 1 else float("nan")


def idle_window(ds: Dataset, ep: dict, idle: IdleTrim) -> Window | None:
    """The window ``--trim-idle`` keeps of episode ``ep``: from ``margin_s`` before the first sample at
    which an obs joint has moved more than ``threshold_rad`` from its first value, to ``margin_s`` after
    the last one at which it is more than that from its last value. None when nothing moves."""
    streams, cams, ft = _episode_stamps(ds, ep)
    first, last = _span(streams, cams)
    onsets, offsets = [], []
    for key, s in streams.items():
        if not key.startswith("obs/") or key.rsplit("/", 1)[1] not in ("qpos", "elevation") or len(s.timestamps) < 2:
            continue
        v = np.asarray(s.values, np.float64).reshape(len(s.timestamps), -1)
        moved = np.flatnonzero(np.any(np.abs(v - v[0]) > idle.threshold_rad, axis=1))
        still = np.flatnonzero(np.any(np.abs(v - v[-1]) > idle.threshold_rad, axis=1))
        if moved.size:
            onsets.append(int(s.timestamps[moved[0]]))
        if still.size:
            offsets.append(int(s.timestamps[still[-1]]))
    if not onsets or not offsets:
        return None
    margin = int(round(idle.margin_s * 1e9))
    start, end = max(first, min(onsets) - margin), min(last, max(offsets) + margin)
    frames = None
    if ft is not None:  # outward onto the sidecar's frames
        k0 = max(int(np.searchsorted(ft, start, "right")) - 1, 0)
        k1 = min(int(np.searchsorted(ft, end, "left")), len(ft) - 1)
        frames, start, end = (k0, k1), int(ft[k0]), int(ft[k1])
    w = Window(start, end, first, last, frames, "idle")
    if not w.cuts:
        return w
    _check_window(ds, ds.episode_id(ep), streams, cams, w, "--trim-idle")
    return w


def _check_window(ds: Dataset, ep_id: str, streams: dict, cams: dict, w: Window, what: str) -> None:
    where = ds.root / layout.METADATA_FILE
    for key, s in streams.items():
        n = int(np.count_nonzero((s.timestamps >= w.start_ns) & (s.timestamps <= w.end_ns)))
        if n < 2:
            raise EditError(where, f"{what}: the window leaves {n} row(s) of {key} in episode {ep_id} (at least 2)")
    for name, ts in cams.items():
        if len(ts) and not np.any((ts >= w.start_ns) & (ts <= w.end_ns)):
            raise EditError(where, f"{what}: the window leaves no frame of camera {name} in episode {ep_id}")


# ----------------------------------------------------------------------------- trimming an episode's data
def _slice_component(c: ComponentStreams, lo: int, hi: int) -> ComponentStreams:
    keep = (c.timestamps >= lo) & (c.timestamps <= hi)
    return ComponentStreams(np.asarray(c.timestamps)[keep], {k: np.asarray(v)[keep] for k, v in c.attributes.items()})


def trim_sidecar(side: dict[str, np.ndarray], frames: dict[str, np.ndarray], k0: int, k1: int
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The sidecar and frames arrays of a simulated episode cut to its frames ``k0..k1``: the state of
    frame ``k0`` becomes ``initial_state``, ``physics_ctrl`` keeps the commands from its step to the end,
    per-frame arrays keep the frames inside, ``step`` and the judge's step count from the new first step.
    ``trim`` (JSON ``{first_step, source_steps, frames: [first, last] of the original frames}``) and
    ``source_initial_state`` record the cut (accumulated over repeated trims). Replaying the result from
    its ``initial_state`` reproduces every kept frame's state bit for bit."""
    n = len(side["step"])
    if not 0 <= k0 < k1 < n:
        raise ValueError(f"frames {k0}..{k1} are not inside the episode's {n} frames")
    s0 = int(side["step"][k0])
    prev = sidecar.read_json(side, TRIM_KEY, "sidecar") or {}
    per_frame = {k for k, a in side.items() if getattr(a, "ndim", 0) >= 1 and len(a) == n
                 and (k in ("step", "time", "frame_timestamp", "state", "qpos", "qvel", "object_pose")
                      or k.startswith(("cam_pos_", "cam_mat_")))}
    out: dict[str, np.ndarray] = {}
    for k, a in side.items():
        if k == "initial_state":
            out[k] = np.array(side["state"][k0], np.float64)
        elif k == "physics_ctrl":
            out[k] = np.array(a[s0:])
        elif k == "step":
            out[k] = np.array(a[k0:k1 + 1] - s0, np.float64)
        elif k in per_frame:
            out[k] = np.array(a[k0:k1 + 1])
        elif k == sidecar.JUDGE_KEY:
            facts = sidecar.read_json(side, k, "sidecar") or {}
            if isinstance(facts.get("step"), int) and not isinstance(facts.get("step"), bool):
                facts["step"] = int(facts["step"]) - s0
            out[k] = sidecar.json_array(facts)
        elif k in (TRIM_KEY, SOURCE_INITIAL_STATE):
            continue
        else:
            out[k] = a
    first = int(prev.get("first_step", 0))
    frames_before = prev.get("frames") or [0, n - 1]
    out[TRIM_KEY] = sidecar.json_array({"first_step": first + s0,
                                        "source_steps": int(prev.get("source_steps", len(side["physics_ctrl"]))),
                                        "frames": [int(frames_before[0]) + k0, int(frames_before[0]) + k1]})
    out[SOURCE_INITIAL_STATE] = np.array(side.get(SOURCE_INITIAL_STATE, side["initial_state"]), np.float64)
    return out, {k: np.array(a[k0:k1 + 1]) for k, a in frames.items()}


def trim_record(side: dict[str, np.ndarray], path) -> dict | None:
    """The ``trim`` record of a trimmed episode's sidecar (None for an untrimmed one)."""
    return sidecar.read_json(side, TRIM_KEY, path)


def trimmed_data(ds: Dataset, ep: dict, w: Window) -> EpisodeData:
    """Episode ``ep``'s content cut to window ``w`` (a simulated episode's sidecar with
    :func:`trim_sidecar`)."""
    from .sim.recorder import sim_files

    data = ds.episode_data(ep)
    data.obs = {k: _slice_component(c, w.start_ns, w.end_ns) for k, c in data.obs.items()}
    data.action = {k: _slice_component(c, w.start_ns, w.end_ns) for k, c in data.action.items()}
    data.cameras = {name: ((t, b) for t, b in frames if w.start_ns <= t <= w.end_ns) for name, frames in data.cameras.items()}
    side_rel = f"{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}"
    if w.frames is not None and side_rel in data.files:
        frames_rel = f"{layout.SIM_DIR}/{sidecar.FRAMES_FILE}"
        side = sidecar.load_npz(data.files[side_rel])
        fr = sidecar.load_npz(data.files[frames_rel]) if frames_rel in data.files else {}
        new_side, new_frames = trim_sidecar(side, fr, *w.frames)
        data.files.update(sim_files(new_side, new_frames))
    return data


def trimmed_entry(entry: dict, w: Window, data: EpisodeData) -> dict:
    new = copy.deepcopy(entry)
    prev = entry.get(TRIMMED) if isinstance(entry.get(TRIMMED), dict) else None
    first = int(prev["source_first_ns"]) if prev else int(w.first_ns)  # the untrimmed episode's first stamp
    rec = {"reason": w.reason, "start_s": round((w.start_ns - first) / 1e9, 9), "end_s": round((w.end_ns - first) / 1e9, 9),
           "start_ns": int(w.start_ns), "end_ns": int(w.end_ns), "source_first_ns": first,
           "source_last_ns": int(prev["source_last_ns"]) if prev else int(w.last_ns)}
    if w.frames is not None:
        side = data.files.get(f"{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}")
        if isinstance(side, bytes):
            import io

            arrays = dict(np.load(io.BytesIO(side), allow_pickle=False))
            t = sidecar.read_json(arrays, TRIM_KEY, "sidecar") or {}
            rec["first_step"] = int(t.get("first_step", 0))
            rec["frames"] = list(t.get("frames") or [])
            if "steps" in new:
                new["steps"] = int(len(arrays["physics_ctrl"]))
    if prev and prev.get("reason") != w.reason:
        rec["reason"] = f"{prev.get('reason')}+{w.reason}"
    new[TRIMMED] = rec
    for k in VALIDITY_KEYS:
        new.pop(k, None)
    return new


# ----------------------------------------------------------------------------- split
def split_entries(entries: list[dict], split: Sequence[tuple[str, float]], seed: int) -> dict[str, list[dict]]:
    """``{name: entries}`` for every split name and ``train`` (the rest), each in source order: for each
    task (``task_index``; entries without one form one group), ``fraction * n`` episodes drawn with
    ``default_rng(seed)``, rounded so that each split's total is ``round(fraction * N)`` (largest
    remainders across tasks)."""
    rng = np.random.default_rng(int(seed))
    groups: dict[object, list[int]] = {}
    for i, e in enumerate(entries):
        groups.setdefault(e.get("task_index"), []).append(i)
    order = {g: list(rng.permutation(idx)) for g, idx in sorted(groups.items(), key=lambda kv: str(kv[0]))}
    taken: dict[str, list[int]] = {}
    for name, frac in split:
        total = int(round(frac * len(entries)))
        want = {g: frac * len(idx) for g, idx in groups.items()}
        n = {g: int(np.floor(w)) for g, w in want.items()}
        rest = sorted(groups, key=lambda g: (-(want[g] - n[g]), str(g)))
        for g in rest:
            if sum(n.values()) >= total:
                break
            if n[g] < len(order[g]):
                n[g] += 1
        taken[name] = []
        for g in order:
            taken[name] += order[g][:n[g]]
            order[g] = order[g][n[g]:]
    out = {name: [entries[i] for i in sorted(idx)] for name, idx in taken.items()}
    out[TRAIN] = [entries[i] for g in order for i in sorted(order[g])]
    out[TRAIN].sort(key=lambda e: entries.index(e))
    return out


# ----------------------------------------------------------------------------- the plan
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
    every refusal of the module doc."""
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
                                       f"{_id_summary(ds.episode_ids)})")
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
        "tool": {"name": "dataset-edit", "version": _version()},
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


def _version() -> str:
    try:
        from . import __version__

        return str(__version__)
    except ImportError:  # pragma: no cover
        return "unknown"


# ----------------------------------------------------------------------------- writing
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
    """Edit ``src`` into ``out`` (``out/<split>`` for every split with ``spec.split``) as the module doc
    says; ``progress(line)`` is called with the plan's notes and once per episode written."""
    from .lock import OutputLock

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
                summary.frames += _write_episode(ds, src_entry, entry, w, o.path, meta, camera_format)
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


def _write_episode(ds: Dataset, src_entry: dict, entry: dict, w: Window | None, root: Path, meta: Metadata,
                   camera_format: str) -> int:
    """Commit one episode into ``root``; returns its camera frames."""
    from .merge import copy_episode_tree

    ep = ds.episode_id(src_entry)
    cams = ds.load_cameras(src_entry)
    if w is None and ds.version == layout.FORMAT_VERSION and \
            all(c.format == camera_format for c in cams.values()):
        tmp = begin_episode(root, entry["id"])
        try:
            copy_episode_tree(ds.episode_path(src_entry), tmp, link=False)  # files checked against the source's manifest
        except BaseException:
            from .atomic import remove_tree

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
