"""Convert any readable layout (unversioned, 0.1.0-0.3.0, 0.4.0, LeRobot v2.1/v3.0) to a 0.4.0 dataset.

Values are carried unchanged (float32 streams, int64 ns timestamps, JPEG bytes as stored); camera
frames go to folders of ``<ns>.jpeg`` or one tar per camera (``camera_format``); simulation
sidecars (``episodes/<id>/sim/``) are copied. Episode ids are kept; with a filter, tasks no chosen
episode uses are dropped and ``task_index`` remapped. Built in a temporary folder, then renamed.

From a LeRobot dataset (``Dataset.lerobot``) the values are those the reader gives (the OpenArm arms it
maps, radians, float32, stamps on the fps grid) and each frame (MP4 video, PNG image) is decoded and
encoded as JPEG at ``jpeg_quality``. LeRobot keeps no wall clock (the reader starts every episode at 0 ns): the output's
episodes start at :data:`LEROBOT_EPOCH_NS`, so that every stamp has 19 digits and frame files sort by
name as by time (openarm_dataset lists a camera folder or tar by name: ``1000000000.jpeg`` before
``66666666.jpeg``). A LeRobot dataset of another robot (no OpenArm arm found) is refused before
anything is written; features beside the arms that map to none are left out, and the summary says so.
"""

from __future__ import annotations

import os
from pathlib import Path

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import MetadataError
from openarm_sim_dataset.core.lerobot_layout import DEFAULT_FEATURES, VISUAL_DTYPES
from openarm_sim_dataset.core.lerobot_names import map_arms
from openarm_sim_dataset.core.report import Summary, progress
from openarm_sim_dataset.core.video_camera import JPEG_QUALITY, DecodedCamera
from openarm_sim_dataset.core.writer import (
    CAMERA_FORMATS,
    ComponentStreams,
    EpisodeData,
    new_dataset,
    write_episode_tree,
)

from .source import metadata_0_4_0, remap_tasks, select_episodes

#: The stream prefix of a LeRobot feature the reader maps to no OpenArm arm (``lerobot/<feature>``).
GENERIC_PREFIX = "lerobot"
#: Where a LeRobot episode starts in the output (ns; 2030-03-17, the simulator's clock): a clock that no
#: recording has, with as many digits as every stamp an episode of up to 3000 years reaches.
LEROBOT_EPOCH_NS = 1_900_000_000 * 10**9
#: Unmapped dimension names a refusal quotes per feature.
QUOTED_NAMES = 4


def _counted(frames, summary: Summary):
    for item in frames:
        summary.frames += 1
        yield item


def check_jpeg_quality(quality: int) -> int:
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ValueError(f"jpeg_quality must be an integer from 1 to 100, not {quality!r}")
    return quality


def unmapped_features(ds: Dataset) -> list[tuple[str, list[str]]]:
    """(feature, names of its dimensions no OpenArm arm takes) for each numeric feature of a LeRobot
    dataset that the reader serves (wholly or partly) as ``lerobot/<feature>``."""
    lr = ds.lerobot
    out = []
    for key, feat in lr.features.items():
        if key in DEFAULT_FEATURES or feat["dtype"] in VISUAL_DTYPES or feat["dtype"] == "string":
            continue
        names = lr.vector_names(key)
        rest = map_arms(names)[1] if key in ("observation.state", "action") else list(range(len(names)))
        if rest:
            out.append((key, [names[d] for d in rest]))
    return out


def _describe(unmapped: list[tuple[str, list[str]]]) -> str:
    parts = []
    for key, names in unmapped:
        more = ", ..." if len(names) > QUOTED_NAMES else ""
        parts.append(f"{key} [{', '.join(names[:QUOTED_NAMES])}{more}]")
    return "; ".join(parts) or "none"


def check_lerobot_source(ds: Dataset) -> list[tuple[str, list[str]]]:
    """Refuse (MetadataError naming ``meta/info.json``, one line) a LeRobot dataset in which the reader
    finds no OpenArm arm; else return the features left out of the conversion."""
    unmapped = unmapped_features(ds)
    if not ds.meta.embodiments:
        lr = ds.lerobot
        raise MetadataError(lr.info_path, f"robot_type {lr.info.get('robot_type')!r}: no OpenArm arm among its features, "
                                          f"nothing to convert to openarm (unmapped: {_describe(unmapped)})")
    return unmapped


def _lerobot_episode(ds: Dataset, ep: dict, quality: int) -> EpisodeData:
    """A LeRobot episode in the writer's terms: the OpenArm arms only, stamps from
    :data:`LEROBOT_EPOCH_NS`, frames encoded as JPEG at ``quality``."""
    data = ds.episode_data(ep)
    for group in (data.obs, data.action):
        for key in list(group):
            if key[0] == GENERIC_PREFIX:
                del group[key]
            else:
                group[key] = ComponentStreams(group[key].timestamps + LEROBOT_EPOCH_NS, group[key].attributes)
    cams = ds.load_cameras(ep)
    for cam in cams.values():
        if isinstance(cam, DecodedCamera):  # MP4 video, PNG images: decoded, then encoded as JPEG
            cam.jpeg_quality = quality
    data.cameras = {name: ((LEROBOT_EPOCH_NS + f.timestamp_ns, f.read_bytes()) for f in cam.frames())
                    for name, cam in cams.items()}
    return data


def to_openarm(ds: Dataset, out: str | os.PathLike, camera_format: str = "dir", valid_only: bool = False,
               success_only: bool = False, quiet: bool = True, exclude_knocked: bool = False,
               jpeg_quality: int = JPEG_QUALITY) -> Summary:
    """Write ``ds`` (or the episodes the filters keep) as a new 0.4.0 dataset at ``out``. ``jpeg_quality``
    (1-100) is the quality decoded frames (a LeRobot source's video or images) are encoded at; JPEG frames
    are copied."""
    if camera_format not in CAMERA_FORMATS:
        raise ValueError(f"camera_format must be one of {CAMERA_FORMATS}, not {camera_format!r}")
    check_jpeg_quality(jpeg_quality)
    out = Path(out)
    left_out = check_lerobot_source(ds) if ds.lerobot is not None else []
    chosen = select_episodes(ds, valid_only, success_only, exclude_knocked)
    summary = Summary(f"dataset-convert (openarm, cameras {camera_format})", out)
    if ds.lerobot is not None and ds.camera_names:
        summary.notes.append(f"frames decoded and encoded as JPEG quality {jpeg_quality}")
    if left_out:
        summary.notes.append(f"not converted (no OpenArm arm): {_describe(left_out)}")
    bar = progress(len(chosen), "convert", quiet)
    try:
        with new_dataset(out) as tmp:
            for ep in chosen:
                ep_id = ds.episode_id(ep)
                data = ds.episode_data(ep) if ds.lerobot is None else _lerobot_episode(ds, ep, jpeg_quality)
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
