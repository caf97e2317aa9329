"""Merge datasets: one output whose episodes are the inputs' episodes, renumbered in input order.

Rules (a refusal names the input and what differs):

* at least two inputs, each a different folder; the output must not exist and must not lie inside
  an input (an input is never modified);
* the same layout version, identical ``equipment`` and ``frequencies`` (openarm_dataset's rules;
  recordings whose rates were measured may differ by 2%: :func:`measured_rates_agree`);
* simulated datasets: the same MuJoCo version, model hash and task list (``simulation.mujoco_version``
  / ``simulation.model_sha256`` / ``simulation.tasks``); a recorded dataset does not mix with a
  simulated one. With ``allow_mixed_provenance`` such inputs are merged and every episode keeps its
  provenance (``provenance:`` in its entry: the scalar keys of its input's ``simulation:`` block and
  its ``tasks``, or ``recorded: true``);
* rollouts (``dataset-evaluate``): identical ``evaluation:`` and ``model:`` blocks (the policy, its
  checkpoint's hash, its control rate), with or without ``allow_mixed_provenance``: the dataset holds
  one of each, and its validation re-derives every episode's commands and labels from them;
* no episode of one input identical to an episode of another (the same obs/action streams, stamps and
  values, and initial state: what ``dataset-validate``'s ``duplicate_episodes`` fails, e.g. a dataset
  merged with its own copy); ``allow_duplicates`` merges them anyway (``"warn"``: with a
  :class:`DuplicateEpisodesWarning` naming them, what the drop-in :func:`merge_datasets` does, as
  openarm_dataset merges them without a word).

Tasks with the same prompt become one task (``task_index`` remapped); episodes become "0".."N-1"
in input order and each entry records ``source: {dataset: <input folder>, id: <original id>}``;
``merged_from`` lists the inputs (an input made by ``dataset-edit`` with its ``edited_from``). Files are copied (``link=True``: hard-linked; never symlinked).
This package's writers replace files by rename, so they never write through a hard link into a
source. Episodes of 0.4.0 inputs are copied file for file (simulation sidecars included); older
layouts are rewritten as 0.4.0 (``link`` then only applies to the sidecar files).

The output is built in a temporary sibling folder and renamed into place: a merge killed midway
leaves no output (its temporary folder is removed by the next merge to the same output).
"""

from __future__ import annotations

import copy
import errno
import os
import shutil
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from openarm_sim_dataset.core import layout, manifest, sidecar
from openarm_sim_dataset.core.dataset import Dataset, folder_problem
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.frequencies import dataset_frequencies, flatten
from openarm_sim_dataset.core.report import Summary, progress
from openarm_sim_dataset.core.writer import check_output, new_dataset, write_episode_tree
from openarm_sim_dataset.validate.physics import episode_digest as content_digest

from ..convert import metadata_0_4_0


class MergeError(DatasetError):
    """The inputs cannot be merged (or the output cannot be created)."""


class DuplicateEpisodesWarning(UserWarning):
    """The merged output holds an episode twice (an input's episode identical to another input's):
    :func:`merge_datasets` merges them as openarm_dataset does, and says so with this warning;
    ``dataset-validate``'s ``duplicate_episodes`` fails such an output."""


#: simulation keys that must agree unless mixed provenance is allowed (``tasks``: the task list episodes
#: were drawn from, which regeneration needs, absent for the default task alone; ``randomization``: how
#: all of a dataset's episodes were drawn, absent means none)
PROVENANCE_KEYS = ("mujoco_version", "model_sha256", "tasks", "randomization")


def first_difference(a: object, b: object, where: str = "") -> str | None:
    """Dotted path of the first place two YAML-like values differ (None if equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{where}.{key}".lstrip(".") + (" (missing)" if key not in b else " (extra)")
            d = first_difference(a[key], b[key], f"{where}.{key}")
            if d:
                return d
        return None
    if a != b:
        return f"{where.lstrip('.')} ({a!r} vs {b!r})" if not isinstance(a, (dict, list)) else where.lstrip(".")
    return None


def check_compatible(datasets: Sequence[Dataset], allow_mixed_provenance: bool = False) -> bool:
    """Raise MergeError naming the first input that differs from the first one.

    Returns True when the inputs' provenance differs (only possible with ``allow_mixed_provenance``).
    """
    ref = datasets[0]
    ref_doc = ref.meta.to_dict()
    mixed = False
    for i, ds in enumerate(datasets[1:], 1):
        meta_file = ds.root / layout.METADATA_FILE
        # each message starts with openarm_dataset's wording ("Dataset <i>: version mismatch. ..."),
        # which ported scripts look for, then says where and what differs
        if ds.version != ref.version:
            raise MergeError(meta_file, f"Dataset {i}: version mismatch. Expected {ref.version!r}, got {ds.version!r} "
                                        f"(format version {ds.version} differs from {ref.version} of {ref.root}; "
                                        "convert both with dataset-convert first)")
        doc = ds.meta.to_dict()
        for key in ("equipment", "frequencies"):
            d = first_difference(ref_doc.get(key) or {}, doc.get(key) or {}, key)
            if d and key == "frequencies" and measured_rates_agree(ref, ds):
                continue  # two sessions of one rig: merge() takes the rates again from all episodes
            if d:
                raise MergeError(meta_file, f"Dataset {i}: {key} configuration differs from dataset 0 "
                                            f"({key} differs from {ref.root}: {d})")
        for key in ("evaluation", "model"):  # one dataset-level block each: every episode's policy and run
            d = first_difference(ref_doc.get(key) or {}, doc.get(key) or {}, key)
            if d:
                raise MergeError(meta_file, f"Dataset {i}: rollouts of another run than dataset 0 ({d}, against "
                                            f"{ref.root}): a dataset holds one policy's rollouts under one "
                                            "evaluation: block (compare two with dataset-evaluate --compare)")
        a, b = ref.meta.simulation, ds.meta.simulation
        if (a is None) != (b is None):
            what = "simulated" if b is not None else "recorded"
            other = "simulated" if a is not None else "recorded"
            if not allow_mixed_provenance:
                raise MergeError(meta_file, f"is a {what} dataset and {ref.root} is {other} "
                                            "(use --allow-mixed-provenance to merge anyway)")
            mixed = True
        elif a is not None:
            for key in PROVENANCE_KEYS:
                if a.get(key) != b.get(key):
                    if not allow_mixed_provenance:
                        raise MergeError(meta_file, f"simulation.{key} {b.get(key)!r} differs from {a.get(key)!r} "
                                                    f"of {ref.root} (use --allow-mixed-provenance to merge anyway)")
                    mixed = True
    return mixed


#: relative difference within which two recordings' measured rates count as one rig's rate
MEASURED_RATE_TOLERANCE = 0.02


def measured_rates_agree(a: Dataset, b: Dataset) -> bool:
    """Whether ``a`` and ``b`` differ in ``frequencies:`` only as two recording sessions of one rig
    do: both recorded data (no simulation block) whose every episode carries the rates the recorder
    measured (``measured_hz``, which replace the declared ones: 249.9 Hz in one session, 250.1 in the
    next), the same streams, each rate within :data:`MEASURED_RATE_TOLERANCE`."""
    def measured(ds: Dataset) -> dict[str, float] | None:
        if ds.meta.simulation is not None or not ds.meta.episodes:
            return None
        if not all(isinstance(e.get("measured_hz"), dict) for e in ds.meta.episodes):
            return None
        return flatten(ds.meta.to_dict().get("frequencies") or {})

    fa, fb = measured(a), measured(b)
    if fa is None or fb is None or set(fa) != set(fb):
        return False
    return all(abs(fa[k] - fb[k]) <= MEASURED_RATE_TOLERANCE * max(abs(fa[k]), abs(fb[k])) for k in fa)


def merge_tasks(datasets: Sequence[Dataset]) -> tuple[list[dict], list[dict[int, int]]]:
    """Tasks of all inputs with equal prompts merged (first occurrence kept), and per input the map
    old task_index -> new task_index."""
    tasks: list[dict] = []
    by_prompt: dict[object, int] = {}
    maps: list[dict[int, int]] = []
    for ds in datasets:
        m: dict[int, int] = {}
        for i, task in enumerate(ds.meta.tasks):
            key = task.get("prompt") if task.get("prompt") is not None else repr(sorted(task.items()))
            if key not in by_prompt:
                by_prompt[key] = len(tasks)
                tasks.append(copy.deepcopy(task))
            m[i] = by_prompt[key]
        maps.append(m)
    return tasks, maps


def provenance(ds: Dataset) -> dict:
    """Compact provenance of an input: the scalar keys of its ``simulation:`` block."""
    sim = ds.meta.simulation
    if sim is None:
        return {"recorded": True}
    out = {k: v for k, v in sim.items() if not isinstance(v, (dict, list))}
    if sim.get("tasks") is not None:
        out["tasks"] = sim["tasks"]
    return out


def plan_episodes(datasets: Sequence[Dataset], task_maps: list[dict[int, int]], mixed: bool) -> list[tuple[Dataset, dict, dict]]:
    """(input, its episode entry, the new entry) for every episode, in input order."""
    plan = []
    for ds, tmap in zip(datasets, task_maps):
        prov = provenance(ds) if mixed else None
        for ep in ds.meta.episodes:
            old_id = ds.episode_id(ep)
            new = copy.deepcopy(ep)
            new["id"] = str(len(plan))
            if ep.get("task_index") is not None:
                new["task_index"] = tmap[ep["task_index"]]
            source = {"dataset": str(ds.root.resolve()), "id": old_id}
            if "source" in ep:
                source["source"] = copy.deepcopy(ep["source"])
            new["source"] = source
            if prov is not None:
                new["provenance"] = dict(prov)
            plan.append((ds, ep, new))
    return plan


def episode_digest(ds: Dataset, ep: dict) -> str | None:
    """The episode's content digest as ``dataset-validate``'s ``duplicate_episodes`` computes it (obs and
    action streams, stamps and values, a simulated episode's initial state, a visual variant's index);
    None when unreadable (the copy then reports the file) or empty."""
    ep_id = ds.episode_id(ep)

    def streams(kind: str):
        try:
            return ds.streams(ep_id, kind)
        except DatasetError as e:
            return str(e)

    def initial_state():
        path = layout.sim_dir(ds.root, ep_id) / sidecar.SIDECAR_FILE
        if not path.is_file():
            return None
        try:
            return sidecar.load_npz(path, members=("initial_state",)).get("initial_state")
        except DatasetError:
            return None

    return content_digest(streams, ep, initial_state)


class Duplicate(NamedTuple):
    """An episode of one input identical to an episode of an earlier input (their plan entries)."""

    ds: Dataset
    new: dict
    first_ds: Dataset
    first_new: dict
    digest: str


def find_duplicates(plan: list[tuple[Dataset, dict, dict]], first_only: bool = False) -> list[Duplicate]:
    """Every episode identical (the digest of :func:`episode_digest`) to an episode of an earlier input,
    in plan order (``first_only``: up to the first): the output would fail ``duplicate_episodes``.
    (Identical episodes within one input are that input's own matter, as before the merge.)"""
    seen: dict[str, tuple[Dataset, dict]] = {}
    found = []
    for ds, ep, new in plan:
        d = episode_digest(ds, ep)
        if d is None:
            continue
        first = seen.setdefault(d, (ds, new))
        if first[0] is not ds:
            found.append(Duplicate(ds, new, first[0], first[1], d))
            if first_only:
                break
    return found


def check_no_duplicates(plan: list[tuple[Dataset, dict, dict]]) -> None:
    """Raise MergeError naming the first episode of one input identical to an episode of another input
    (:func:`find_duplicates`), and that one: the output would fail ``duplicate_episodes``."""
    found = find_duplicates(plan, first_only=True)
    if found:
        raise duplicate_error(found[0])


def duplicate_error(dup: Duplicate) -> MergeError:
    return MergeError(layout.episode_dir(dup.ds.root, dup.new["source"]["id"]),
                      f"is identical to {layout.episode_dir(dup.first_ds.root, dup.first_new['source']['id'])} "
                      f"(the same obs/action streams and initial state, SHA-256 {dup.digest[:12]}): the output "
                      "would hold the episode twice and fail duplicate_episodes (--allow-duplicates merges it anyway)")


def duplicates_message(found: list[Duplicate]) -> str:
    """One line naming the duplicated episodes (their ids in the inputs and in the output), grouped by
    the pair of inputs."""
    groups: dict[tuple[Path, Path], list[Duplicate]] = {}
    for dup in found:
        groups.setdefault((dup.ds.root, dup.first_ds.root), []).append(dup)

    def ids(entries) -> str:
        return ", ".join(entries)

    parts = [f"episodes {ids(d.new['source']['id'] for d in dups)} of {root} (output "
             f"{ids(d.new['id'] for d in dups)}) are identical to episodes "
             f"{ids(d.first_new['source']['id'] for d in dups)} of {first_root} (output "
             f"{ids(d.first_new['id'] for d in dups)})"
             for (root, first_root), dups in groups.items()]
    return (f"merged {len(found)} duplicate episode(s) as openarm_dataset does: {'; '.join(parts)}; "
            "dataset-validate's duplicate_episodes fails the output (dataset-merge refuses them without "
            "--allow-duplicates)")


def _outside_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside this module (a warning points at the user's call)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    return level


def _transfer(src: Path, dest: Path, link: bool) -> None:
    """Copy (or hard-link) one regular file; refuse symlinks and special files."""
    st = os.lstat(src)
    if not os.path.isfile(src) or os.path.islink(src):
        raise MergeError(src, "is not a regular file (symbolic links and special files are not merged)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if link:
        try:
            os.link(src, dest, follow_symlinks=False)
            return
        except OSError as e:
            if e.errno == errno.EXDEV:
                raise MergeError(dest, "--link needs the output on the same filesystem as the inputs") from None
            raise
    shutil.copyfile(src, dest, follow_symlinks=False)
    os.chmod(dest, st.st_mode & 0o777)


def copy_episode_tree(src: Path, dest: Path, link: bool) -> None:
    """Copy every file of a 0.4.0 episode folder (hidden leftovers skipped), then write the copy's
    manifest; files the source's manifest records must match it (a changed file is refused)."""
    if os.path.islink(src) or not src.is_dir():
        raise MergeError(src, "episode folder is missing or is a symbolic link")
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(src)
        for name in sorted(filenames):
            if name.startswith(".") or (rel == Path(".") and name == layout.MANIFEST_FILE):
                continue
            p = Path(dirpath) / name
            _transfer(p, dest / rel / name, link)
        for d in dirnames:
            if os.path.islink(Path(dirpath) / d):
                raise MergeError(Path(dirpath) / d, "is a symbolic link (not merged)")
    manifest.write(dest, source=src)


def merge_datasets(inputs: Sequence[str | os.PathLike], output: str | os.PathLike, symlink: bool = False) -> None:
    """openarm_dataset's ``merge_datasets``: :func:`merge` with its arguments. ``symlink=True`` shares
    the inputs' files by hard links (``link``), never by symbolic links: a merged dataset stays whole
    when an input is moved or deleted, and this package's writers replace files by rename, so nothing
    writes through a link into an input.

    Episodes identical to another input's (a dataset merged with its copy) are merged, as there, with a
    :class:`DuplicateEpisodesWarning` naming them (``merge`` and ``dataset-merge`` refuse them unless
    allowed): code that ran against openarm_dataset runs here, and the warning still tells."""
    merge(inputs, output, link=symlink, allow_duplicates="warn")


def merge(inputs: Sequence[str | os.PathLike], out: str | os.PathLike, link: bool = False,
          allow_mixed_provenance: bool = False, quiet: bool = True,
          allow_duplicates: bool | Literal["warn"] = False) -> Summary:
    """Merge ``inputs`` into a new dataset ``out`` (see the module docstring for the rules).

    ``allow_duplicates``: False refuses episodes identical to another input's (MergeError naming the
    first), True merges them without looking, ``"warn"`` merges them with a
    :class:`DuplicateEpisodesWarning` naming every one once the output is written."""
    out = Path(out)
    if len(inputs) < 2:
        raise MergeError(None, "At least two input datasets are required (at least two inputs, each a different folder)")
    roots = [Path(p) for p in inputs]
    seen: dict[Path, Path] = {}
    for r in roots:
        if not r.is_dir():
            raise MergeError(r, folder_problem(r))
        real = r.resolve()
        if real in seen:
            raise MergeError(r, f"is given twice (also as {seen[real]})")
        seen[real] = r
    check_output(out, roots)  # not inside (or one of) the inputs, not an existing file
    if out.exists():
        raise MergeError(out, f"Output path {out} already exists (refusing to overwrite)")
    datasets = [Dataset(r) for r in roots]
    mixed = check_compatible(datasets, allow_mixed_provenance)
    tasks, task_maps = merge_tasks(datasets)
    plan = plan_episodes(datasets, task_maps, mixed)
    if isinstance(allow_duplicates, str) and allow_duplicates != "warn":
        raise ValueError(f"allow_duplicates must be False, True or 'warn', not {allow_duplicates!r}")
    refuse = not allow_duplicates
    duplicates = find_duplicates(plan, first_only=refuse) if refuse or allow_duplicates == "warn" else []
    if duplicates and refuse:
        raise duplicate_error(duplicates[0])

    summary = Summary("dataset-merge", out)
    bar = progress(len(plan), "merge", quiet)
    try:
        with new_dataset(out) as tmp:
            for ds, ep, new in plan:
                dest = layout.episode_dir(tmp, new["id"])
                summary.frames += sum(c.num_frames for c in ds.load_cameras(ep).values())
                if ds.version == layout.FORMAT_VERSION:
                    copy_episode_tree(ds.episode_path(ep), dest, link)
                else:
                    data = ds.episode_data(ep)
                    sim_files = data.files
                    data.files = {}
                    write_episode_tree(dest, data, "dir", with_manifest=False)
                    for rel, src in sim_files.items():
                        _transfer(Path(src), dest / rel, link)
                    manifest.write(dest)
                summary.episodes += 1
                bar.update(1)
            meta = metadata_0_4_0(datasets[0])
            meta.data["tasks"] = tasks
            meta.data["episodes"] = [new for _ds, _ep, new in plan]
            rates = [ds.meta.to_dict().get("frequencies") or {} for ds in datasets]
            if any(first_difference(rates[0], r) for r in rates[1:]):  # passed as measured_rates_agree
                # sessions whose measured rates differ slightly: the rates of all their episodes
                meta.data["frequencies"] = dataset_frequencies(meta.data.get("frequencies") or {},
                                                               meta.data["episodes"])
            # ids an input's recorder discarded name that input's episodes, not the renumbered ones here
            meta.data.pop("discarded_episodes", None)
            # an input that is an edit (dataset-edit) keeps its record with that input, not at the top
            meta.data.pop("edited_from", None)
            meta.data["merged_from"] = [
                {"dataset": str(ds.root.resolve()), "version": ds.version, "episodes": ds.num_episodes,
                 **({"provenance": provenance(ds)} if mixed else {}),
                 **({"edited_from": copy.deepcopy(ds.meta.data["edited_from"])}
                    if isinstance(ds.meta.data.get("edited_from"), dict) else {})}
                for ds in datasets
            ]
            if mixed and meta.data.get("simulation") is not None:
                meta.data["simulation"]["mixed_provenance"] = "each episode's provenance: key"
            meta.write(tmp)
    finally:
        bar.close()
    if duplicates:
        warnings.warn(duplicates_message(duplicates), DuplicateEpisodesWarning, stacklevel=_outside_stacklevel())
    return summary.finish()

