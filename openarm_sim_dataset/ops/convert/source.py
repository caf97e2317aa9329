"""What every converter takes from the source dataset: the episodes it converts (filtered by the
validator's ``valid`` flags, ``success`` and ``knocked_over``), the tasks they use renumbered, and the
metadata in 0.4.0 form."""

from __future__ import annotations

import copy

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.metadata import Metadata


def select_episodes(ds: Dataset, valid_only: bool = False, success_only: bool = False,
                    exclude_knocked: bool = False) -> list[dict]:
    """Episode entries kept by the filters, in metadata order.

    ``valid_only`` keeps episodes whose ``valid`` flag (written by dataset-validate) is true; an
    episode without a flag has not been validated and is dropped. ``success_only`` keeps
    ``success: true``. ``exclude_knocked`` drops lucky successes, flagged ``knocked_over: true`` by the
    generator (an object ended on another face; imitating them teaches knocking objects over).
    Raises DatasetError when nothing is left.
    """
    chosen = [ep for ep in ds.episodes
              if (not valid_only or ep.get("valid") is True) and (not success_only or ep.get("success") is True)
              and (not exclude_knocked or ep.get("knocked_over") is not True)]
    if not chosen:
        what = " and ".join(w for w, on in (("valid", valid_only), ("successful", success_only),
                                            ("not knocked-over", exclude_knocked)) if on)
        raise DatasetError(ds.root / layout.METADATA_FILE, f"no {what} episode to convert "
                           f"(of {ds.num_episodes}; valid flags are written by dataset-validate)")
    return chosen


def remap_tasks(tasks: list[dict], episodes: list[dict]) -> tuple[list[dict], dict[int, int]]:
    """Only the tasks the chosen episodes use, in their original order, and old -> new index."""
    used = sorted({ep["task_index"] for ep in episodes if ep.get("task_index") is not None})
    return [copy.deepcopy(tasks[i]) for i in used], {old: new for new, old in enumerate(used)}


def metadata_0_4_0(ds: Dataset) -> Metadata:
    """The dataset's metadata in 0.4.0 form (legacy wrist cameras renamed by ``Metadata.to_dict``),
    with the rates that old layouts did not declare measured from the data."""
    meta = ds.meta.copy()
    _fill_frequencies(ds, meta)
    return meta


def _fill_frequencies(ds: Dataset, meta: Metadata) -> None:
    """0.4.0 declares a rate per stream and camera; layouts that did not (unversioned) get the rate
    measured on the first episode: 1e9 / median interval in ns, rounded to 0.1 Hz."""
    if not ds.episodes:
        return
    freqs = meta.data.setdefault("frequencies", {}) or {}
    meta.data["frequencies"] = freqs
    ep = ds.episodes[0]

    def hz(stamps: np.ndarray) -> float | None:
        d = np.diff(stamps)
        return round(1e9 / float(np.median(d)), 1) if d.size and np.median(d) > 0 else None

    for kind in layout.KINDS:
        for key, s in ds.streams(ep, kind).items():
            prefix = key.rsplit("/", 1)[0]
            emb, _, comp = prefix.partition("/")
            if meta.frequency(kind, emb, comp or None) is not None:
                continue
            rate = hz(s.timestamps)
            if rate is None:
                continue
            group = freqs.setdefault(kind, {}) or {}
            freqs[kind] = group
            if comp:
                group.setdefault(emb, {})[comp] = rate
            else:
                group[emb] = rate
    cams = freqs.get("cameras") or {}
    for name, cam in ds.load_cameras(ep).items():
        if name not in cams:
            rate = hz(cam.timestamps)
            if rate is not None:
                cams[name] = rate
    if cams:
        freqs["cameras"] = cams
