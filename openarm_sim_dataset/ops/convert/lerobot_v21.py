"""LeRobot v2.1 export (what lerobot 0.3.x reads), and gr00t (v2.1 plus ``meta/modality.json``).

Layout::

    meta/info.json             codebase_version "v2.1", fps, features, data_path, video_path, totals
    meta/episodes.jsonl        {"episode_index", "tasks": [prompt], "length"} per episode
    meta/tasks.jsonl           {"task_index", "task"}
    meta/episodes_stats.jsonl  {"episode_index", "stats": {feature: {min, max, mean, std, count, q..}}}
    meta/stats.json            aggregated stats
    data/chunk-XXX/episode_XXXXXX.parquet
    videos/chunk-XXX/observation.images.<cam>/episode_XXXXXX.mp4

See :mod:`.lerobot_common` for the sampling (the fps grid, or a reference stream's frames with the
dropped ones counted in the summary's notes), vectors and stats.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.kinematics import STATE_JOINTS
from openarm_sim_dataset.core.report import Summary, progress
from openarm_sim_dataset.core.writer import new_dataset

from .lerobot_common import (
    CHUNK_SIZE,
    ROBOT_TYPE,
    DropTally,
    LeRobotOptions,
    camera_size,
    data_table,
    encode_frames,
    features,
    image_key,
    iter_episodes,
    plan,
    splits,
    vector_names,
)
from .lerobot_stats import ImageStats, aggregate, episode_stats, jsonable
from .video import Mp4Writer

CODEBASE_VERSION = "v2.1"
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def write_v21(ds: Dataset, out: Path, opts: LeRobotOptions, gr00t: bool = False, quiet: bool = True) -> Summary:
    chosen, _remap, prompts = plan(ds, opts)
    obs_names, act_names = vector_names(ds, opts.state, opts.arm_dynamics)
    cams = camera_size(ds, chosen[0])
    summary = Summary(f"dataset-convert ({'gr00t' if gr00t else 'lerobot_v2.1'}, state {opts.state})", out)
    bar = progress(len(chosen), "lerobot v2.1", quiet)
    try:
        with new_dataset(out) as tmp:
            (tmp / "meta").mkdir()
            episodes, all_stats, used_tasks = [], [], {}
            index = 0
            drops = DropTally(opts)
            for ep in iter_episodes(ds, opts):
                chunk = ep.index // CHUNK_SIZE
                data_path = tmp / DATA_PATH.format(episode_chunk=chunk, episode_index=ep.index)
                data_path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(data_table(ep, opts.fps, index), data_path)
                images = {}
                for cam, (h, w) in cams.items():
                    path = tmp / VIDEO_PATH.format(episode_chunk=chunk, video_key=image_key(cam), episode_index=ep.index)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    st = ImageStats()
                    with Mp4Writer(path, opts.fps, w, h, gop=opts.gop, crf=opts.crf, preset=opts.preset) as wr:
                        encode_frames(ep, cam, wr, st)
                    images[cam] = st.result()
                stats = episode_stats(ep, opts.fps, index, images)
                all_stats.append(stats)
                episodes.append({"episode_index": ep.index, "tasks": [ep.task], "length": ep.length})
                used_tasks[ep.task_index] = ep.task
                index += ep.length
                summary.episodes += 1
                summary.frames += ep.length
                drops.add(ep)
                bar.update(1)
            summary.notes += drops.notes()
            n = len(episodes)
            _jsonl(tmp / "meta/episodes.jsonl", episodes)
            _jsonl(tmp / "meta/tasks.jsonl", [{"task_index": i, "task": t} for i, t in sorted(used_tasks.items())])
            _jsonl(tmp / "meta/episodes_stats.jsonl",
                   [{"episode_index": i, "stats": jsonable(s)} for i, s in enumerate(all_stats)])
            (tmp / "meta/stats.json").write_text(json.dumps(jsonable(aggregate(all_stats)), indent=2))
            info = {
                "codebase_version": CODEBASE_VERSION,
                "robot_type": ROBOT_TYPE,
                "total_episodes": n,
                "total_frames": index,
                "total_tasks": len(used_tasks),
                "total_videos": n * len(cams),
                "total_chunks": (n - 1) // CHUNK_SIZE + 1,
                "chunks_size": CHUNK_SIZE,
                "fps": opts.fps,
                "splits": splits(n, opts.train_split),
                "data_path": DATA_PATH,
                "video_path": VIDEO_PATH if cams else None,
                "features": features(obs_names, act_names, cams, opts.fps, with_fps=False),
            }
            (tmp / "meta/info.json").write_text(json.dumps(info, indent=2))
            if gr00t:
                (tmp / "meta/modality.json").write_text(json.dumps(modality(ds, opts, cams), indent=2))
    finally:
        bar.close()
    return summary.finish()


def modality(ds: Dataset, opts: LeRobotOptions, cams: dict) -> dict:
    """GR00T's ``meta/modality.json``: named slices of the state/action vectors (the gripper split
    into its own entry), the videos and the task annotation."""
    def ranges(dynamics: bool) -> dict:
        out, offset = {}, 0
        for emb in ds.meta.embodiments:
            base = emb.name.removesuffix("s")
            if emb.id == layout.EMBODIMENT_OPENARM:
                n = len(STATE_JOINTS[opts.state])
                for comp in emb.components:
                    out[f"{comp}_{base}"] = {"start": offset, "end": offset + n - 1}
                    out[f"{comp}_gripper"] = {"start": offset + n - 1, "end": offset + n}
                    offset += n
            else:
                out[base] = {"start": offset, "end": offset + len(emb.joints)}
                offset += len(emb.joints)
        if dynamics:
            for emb in ds.meta.embodiments:
                if emb.id == layout.EMBODIMENT_OPENARM:
                    for comp in emb.components:
                        out[f"{comp}_{emb.name.removesuffix('s')}_velocity"] = {"start": offset, "end": offset + 8}
                        out[f"{comp}_{emb.name.removesuffix('s')}_effort"] = {"start": offset + 8, "end": offset + 16}
                        offset += 16
        return out

    return {
        "state": ranges(opts.arm_dynamics),
        "action": ranges(False),
        "video": {cam: {"original_key": image_key(cam)} for cam in cams},
        "annotation": {"human.action.task_description": {"original_key": "task_index"}},
    }
