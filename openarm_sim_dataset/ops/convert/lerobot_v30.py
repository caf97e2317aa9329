"""LeRobot v3.0 export (what lerobot >= 0.4 reads): episodes packed into chunked files.

Layout::

    meta/info.json                                   codebase_version "v3.0", fps, features, paths, totals
    meta/tasks.parquet                               index "task" (prompt), column task_index
    meta/episodes/chunk-000/file-000.parquet         per episode: tasks, length, data and video file
                                                     indices, dataset_from/to_index, per-camera
                                                     from_timestamp/to_timestamp, stats/<feature>/<stat>
    meta/stats.json                                  aggregated stats
    data/chunk-XXX/file-XXX.parquet                  frames of consecutive episodes (new file past ~100 MB)
    videos/<observation.images.cam>/chunk-XXX/file-XXX.mp4   consecutive episodes (new file past ~500 MB)

In a video file, an episode's frame i is at ``from_timestamp + i / fps``; episodes follow each
other without gaps, so ``from_timestamp`` is (frames before it in the file) / fps exactly.
See :mod:`.lerobot_common` for the sampling (the fps grid, or a reference stream's frames with the
dropped ones counted in the summary's notes), vectors and stats.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.report import Summary, progress
from openarm_sim_dataset.core.writer import create_dataset_root, finish_dataset_root, remove_tree

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

CODEBASE_VERSION = "v3.0"
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 500
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"


def _next(chunk: int, file: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file == CHUNK_SIZE - 1 else (chunk, file + 1)


class _DataFiles:
    """Episode tables appended to data/chunk-XXX/file-XXX.parquet, rolling over past the size limit."""

    def __init__(self, root: Path, limit_bytes: int):
        self.root, self.limit = root, limit_bytes
        self.chunk = self.file = 0
        self.writer = None
        self.bytes = 0

    def add(self, table: pa.Table) -> tuple[int, int]:
        if self.writer is not None and self.bytes + table.nbytes > self.limit:
            self.close()
            self.chunk, self.file = _next(self.chunk, self.file)
        if self.writer is None:
            path = self.root / DATA_PATH.format(chunk_index=self.chunk, file_index=self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(path, table.schema)
            self.bytes = 0
        self.writer.write_table(table)
        self.bytes += table.nbytes
        return self.chunk, self.file

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class _VideoFiles:
    """One camera's episodes appended to videos/<key>/chunk-XXX/file-XXX.mp4, rolling over by size."""

    def __init__(self, root: Path, key: str, size: tuple[int, int], opts: LeRobotOptions, limit_bytes: int):
        self.root, self.key, self.size, self.opts, self.limit = root, key, size, opts, limit_bytes
        self.chunk = self.file = 0
        self.writer: Mp4Writer | None = None

    def start_episode(self) -> tuple[int, int, int]:
        """(chunk, file, frames already in that file) for the next episode."""
        if self.writer is not None and self.writer.bytes > self.limit:
            self.close()
            self.chunk, self.file = _next(self.chunk, self.file)
        if self.writer is None:
            path = self.root / VIDEO_PATH.format(video_key=self.key, chunk_index=self.chunk, file_index=self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            h, w = self.size
            self.writer = Mp4Writer(path, self.opts.fps, w, h, gop=self.opts.gop, crf=self.opts.crf, preset=self.opts.preset)
        return self.chunk, self.file, self.writer.count

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def write_v30(ds: Dataset, out: Path, opts: LeRobotOptions, quiet: bool = True,
              data_mb: float = DATA_FILES_SIZE_IN_MB, video_mb: float = VIDEO_FILES_SIZE_IN_MB) -> Summary:
    chosen, _remap, _prompts = plan(ds, opts)
    obs_names, act_names = vector_names(ds, opts.state, opts.arm_dynamics)
    cams = camera_size(ds, chosen[0])
    summary = Summary(f"dataset-convert (lerobot_v3.0, state {opts.state})", out)
    tmp = create_dataset_root(out)
    bar = progress(len(chosen), "lerobot v3.0", quiet)
    data = _DataFiles(tmp, int(data_mb * 1e6))
    videos = {cam: _VideoFiles(tmp, image_key(cam), size, opts, int(video_mb * 1e6)) for cam, size in cams.items()}
    try:
        rows, all_stats, used_tasks = [], [], {}
        index = 0
        drops = DropTally(opts)
        for ep in iter_episodes(ds, opts):
            chunk, file = data.add(data_table(ep, opts.fps, index))
            row = {"episode_index": ep.index, "tasks": [ep.task], "length": ep.length,
                   "data/chunk_index": chunk, "data/file_index": file,
                   "dataset_from_index": index, "dataset_to_index": index + ep.length}
            images = {}
            for cam, vf in videos.items():
                c, f, before = vf.start_episode()
                st = ImageStats()
                encode_frames(ep, cam, vf.writer, st)
                images[cam] = st.result()
                key = image_key(cam)
                row.update({f"videos/{key}/chunk_index": c, f"videos/{key}/file_index": f,
                            f"videos/{key}/from_timestamp": before / opts.fps,
                            f"videos/{key}/to_timestamp": (before + ep.length) / opts.fps})
            row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
            stats = episode_stats(ep, opts.fps, index, images)
            for feat, d in stats.items():
                for name, v in d.items():
                    row[f"stats/{feat}/{name}"] = np.asarray(v).tolist()
            rows.append(row)
            all_stats.append(stats)
            used_tasks[ep.task_index] = ep.task
            index += ep.length
            summary.episodes += 1
            summary.frames += ep.length
            drops.add(ep)
            bar.update(1)
        summary.notes += drops.notes()
        data.close()
        for vf in videos.values():
            vf.close()
        meta = tmp / "meta"
        path = tmp / EPISODES_PATH.format(chunk_index=0, file_index=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), path)
        tasks = sorted(used_tasks.items())
        pq.write_table(pa.table({"task_index": pa.array([i for i, _ in tasks], type=pa.int64()),
                                 "task": pa.array([t for _, t in tasks], type=pa.string())})
                       .replace_schema_metadata({b"pandas": json.dumps({
                           "index_columns": ["task"], "column_indexes": [],
                           "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                                        "numpy_type": "int64", "metadata": None},
                                       {"name": "task", "field_name": "task", "pandas_type": "unicode",
                                        "numpy_type": "object", "metadata": None}],
                           "creator": {"library": "pyarrow", "version": pa.__version__},
                           "pandas_version": "2.0.0"}).encode()}), meta / "tasks.parquet")
        (meta / "stats.json").write_text(json.dumps(jsonable(aggregate(all_stats)), indent=2))
        n = len(rows)
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": ROBOT_TYPE,
            "total_episodes": n,
            "total_frames": index,
            "total_tasks": len(used_tasks),
            "chunks_size": CHUNK_SIZE,
            "data_files_size_in_mb": data_mb,
            "video_files_size_in_mb": video_mb,
            "fps": opts.fps,
            "splits": splits(n, opts.train_split),
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if cams else None,
            "features": features(obs_names, act_names, cams, opts.fps, with_fps=True),
        }
        (meta / "info.json").write_text(json.dumps(info, indent=2))
        finish_dataset_root(tmp, out)
    except BaseException:
        data.close()
        for vf in videos.values():
            try:
                vf.close()
            except Exception:  # noqa: BLE001 - already failing; the temp folder goes anyway
                pass
        remove_tree(tmp)
        raise
    finally:
        bar.close()
    return summary.finish()
