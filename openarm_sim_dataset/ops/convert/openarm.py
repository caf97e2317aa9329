"""Convert any readable layout (unversioned, 0.1.0-0.3.0, 0.4.0) to a 0.4.0 dataset.

Values are carried unchanged (float32 streams, int64 ns timestamps, JPEG bytes as stored); camera
frames go to folders of ``<ns>.jpeg`` or one tar per camera (``camera_format``); simulation
sidecars (``episodes/<id>/sim/``) are copied. Episode ids are kept; with a filter, tasks no chosen
episode uses are dropped and ``task_index`` remapped. Built in a temporary folder, then renamed.
"""

from __future__ import annotations

import os
from pathlib import Path

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.report import Summary, progress
from openarm_sim_dataset.core.writer import CAMERA_FORMATS, new_dataset, write_episode_tree

from .source import metadata_0_4_0, remap_tasks, select_episodes


def _counted(frames, summary: Summary):
    for item in frames:
        summary.frames += 1
        yield item


def to_openarm(ds: Dataset, out: str | os.PathLike, camera_format: str = "dir", valid_only: bool = False,
               success_only: bool = False, quiet: bool = True, exclude_knocked: bool = False) -> Summary:
    """Write ``ds`` (or the episodes the filters keep) as a new 0.4.0 dataset at ``out``."""
    if camera_format not in CAMERA_FORMATS:
        raise ValueError(f"camera_format must be one of {CAMERA_FORMATS}, not {camera_format!r}")
    out = Path(out)
    chosen = select_episodes(ds, valid_only, success_only, exclude_knocked)
    summary = Summary(f"dataset-convert (openarm, cameras {camera_format})", out)
    bar = progress(len(chosen), "convert", quiet)
    try:
        with new_dataset(out) as tmp:
            for ep in chosen:
                ep_id = ds.episode_id(ep)
                data = ds.episode_data(ep)
                data.cameras = {name: _counted(frames, summary) for name, frames in data.cameras.items()}
                write_episode_tree(layout.episode_dir(tmp, ep_id), data, camera_format)
                summary.episodes += 1
                bar.update(1)
            meta = metadata_0_4_0(ds)
            chosen_ids = {ds.episode_id(e) for e in chosen}
            episodes = [dict(ep) for ep in meta.episodes if layout.check_name(ep["id"], "episode id") in chosen_ids]
            if len(chosen) != ds.num_episodes and meta.tasks:
                tasks, remap = remap_tasks(meta.tasks, episodes)
                for ep in episodes:
                    if ep.get("task_index") is not None:
                        ep["task_index"] = remap[ep["task_index"]]
                meta.data["tasks"] = tasks
            meta.data["episodes"] = episodes
            meta.write(tmp)
    finally:
        bar.close()
    return summary.finish()
