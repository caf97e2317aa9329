"""What ``dataset-view`` serves, as plain JSON-ready dicts: the episode list, one episode's plots,
cameras and validator findings, a frame's bytes, and the validation report (read or run).

Lazy by construction: the list reads ``metadata.yaml`` (once, again when it changes) and the
timestamp column of one stream per episode (cached per file version) plus one folder listing per
episode; an episode's streams, camera indexes and frames are read when that episode is opened; no
image is decoded. Every episode id and camera name from a URL is checked (:func:`layout.check_name`)
and must be listed in ``metadata.yaml``; a frame is served by its exact timestamp from the camera's
index, and only from a file inside the dataset folder.

A LeRobot dataset (``ds.lerobot``) is read through the reader alone: its metadata file is
``meta/info.json`` (re-read when it or the episodes' table changes), an episode's duration comes from the
``timestamp`` and ``episode_index`` columns of its data file (read once per file version), its cameras are
decoded (:mod:`.cameras`) and its streams are the reader's (arms in radians, other features as stored).

:class:`ViewData` answers each request; beside it :mod:`.plots` makes the joint plots' series, :mod:`.cameras`
keeps the camera indexes and reads frames, :mod:`.validation` holds the report and :mod:`.findings`
turns it into verdicts and timeline markers.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout, lerobot_layout, sampler
from openarm_sim_dataset.core.camera import Camera
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError, StreamError
from openarm_sim_dataset.core.streams import read_timestamps

from .cameras import CameraCache, camera_presence, check_stamp, frame_bytes
from .errors import NotFound
from .findings import episode_findings, episode_verdicts
from .json_values import json_value
from .plots import MAX_PLOT_POINTS, envelope, plot_panels  # noqa: F401 - the first two re-exported
from .validation import ValidationRun

_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _lerobot_spans(ds: Dataset, path: Path) -> dict[int, tuple[int, int]]:
    """(first, last) row stamp (int ns from the episode's start, snapped to the fps grid as the reader
    snaps them) of every ``episode_index`` in a LeRobot data file: two columns read, nothing else."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=["episode_index", "timestamp"])
    except (OSError, ValueError, KeyError) as e:  # pyarrow's: a missing column is a KeyError or ValueError
        raise StreamError(path, f"no episode_index and timestamp columns to read ({str(e).splitlines()[0][:160]})") from None
    for name in table.column_names:
        if table.column(name).null_count:
            raise StreamError(path, f"{name} is null in {table.column(name).null_count} rows")
    ep = table.column("episode_index").to_numpy(zero_copy_only=False)
    seconds = table.column("timestamp").to_numpy(zero_copy_only=False).astype(np.float64)
    if not len(ep):
        return {}
    ns = sampler.snap_seconds(seconds, ds.lerobot.fps, lerobot_layout.TOLERANCE_S)
    order = np.argsort(ep, kind="stable")
    values, starts = np.unique(ep[order], return_index=True)
    lo = np.minimum.reduceat(ns[order], starts)
    hi = np.maximum.reduceat(ns[order], starts)
    return {int(v): (int(a), int(b)) for v, a, b in zip(values.tolist(), lo.tolist(), hi.tolist())}


def _footer_span(path: Path) -> tuple[int, int, None] | None:
    """(first, last) stamp (int ns) of a stream from its parquet footer: the min/max statistics of the
    ``timestamp`` column that every writer of the format records (~0.1 ms, no column read); None when
    the footer has none (then the caller reads the column). Only the list's durations come from here:
    the episode page, like the validator, reads the stamps themselves."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        md = pq.read_metadata(path)
        schema = md.schema.to_arrow_schema()
        i = schema.get_field_index(layout.TIMESTAMP_COLUMN)
        typ = schema.field(i).type if i >= 0 else None
        if typ is None or not pa.types.is_timestamp(typ) or md.num_rows == 0:
            return None
        lo = hi = None
        for g in range(md.num_row_groups):
            col = md.row_group(g).column(i)
            st = col.statistics
            if st is None or not st.has_min_max or not isinstance(st.min_raw, int):
                return None
            lo = st.min_raw if lo is None else min(lo, st.min_raw)
            hi = st.max_raw if hi is None else max(hi, st.max_raw)
        f = _NS_PER_UNIT[typ.unit]
        return lo * f, hi * f, None
    except (OSError, ValueError, KeyError, IndexError, TypeError):  # pyarrow's errors are OSError/ValueError
        return None


class ViewData:
    """The dataset as the viewer reads it (thread-safe; ``metadata.yaml`` re-read when it changes)."""

    def __init__(self, root: str | os.PathLike, validation_args: list[str] | None = None):
        self.root = Path(root)
        self.real_root = self.root.resolve()
        self.lock = threading.RLock()
        self._meta_key = None
        self.ds: Dataset | None = None
        self._reload()
        self.validation = ValidationRun(self.root, validation_args, self.meta_file)
        self._spans: dict[tuple, tuple] = {}
        self.camera_cache = CameraCache(self.root, self.real_root, self.lock)
        self._list_cache: tuple | None = None

    @property
    def meta_file(self) -> Path:
        """The dataset's metadata file: ``metadata.yaml``, or a LeRobot dataset's ``meta/info.json``."""
        ds = self.ds
        if ds is not None and ds.lerobot is not None:
            return ds.lerobot.info_path
        return self.root / layout.METADATA_FILE

    def _stat_key(self):
        """The version of what the dataset's metadata is read from: ``metadata.yaml``; for a LeRobot
        dataset ``meta/info.json`` and its episodes' and tasks' tables (v2.1 JSONL, v3.0 parquet)."""
        if lerobot_layout.is_lerobot(self.root):
            meta = self.root / "meta"
            files = [self.root / lerobot_layout.INFO_FILE, self.root / lerobot_layout.EPISODES_JSONL,
                     self.root / lerobot_layout.TASKS_JSONL, self.root / lerobot_layout.TASKS_PARQUET,
                     *sorted((self.root / lerobot_layout.EPISODES_DIR).glob("chunk-*/file-*.parquet"))]
            key = []
            for p in files:
                try:
                    st = p.stat()
                except OSError:
                    continue
                key.append((str(p.relative_to(meta)), st.st_mtime_ns, st.st_size, st.st_ino))
            return ("lerobot", *key)
        st = (self.root / layout.METADATA_FILE).stat() if (self.root / layout.METADATA_FILE).exists() else None
        return None if st is None else (st.st_mtime_ns, st.st_size, st.st_ino)

    def _reload(self) -> None:
        key = self._stat_key()
        ds = Dataset(self.root)
        meta_file = ds.lerobot.info_path if ds.lerobot is not None else self.root / layout.METADATA_FILE
        ids = {layout.check_name(e["id"], "episode id", meta_file): i for i, e in enumerate(ds.meta.episodes)}
        self.ds, self._meta_key, self._ids = ds, key, ids

    def dataset(self) -> Dataset:
        """The dataset, re-read if metadata.yaml changed since (e.g. a resumed generation appended; for
        a LeRobot dataset info.json or its episodes' table)."""
        with self.lock:
            try:
                key = self._stat_key()
            except OSError:
                key = self._meta_key
            if key != self._meta_key:
                self._reload()
                self._list_cache = None
            return self.ds

    def episode_list_ids(self) -> list[str]:
        """The episode ids, in metadata order."""
        self.dataset()
        return list(self._ids)

    def entry(self, ep_id: str) -> tuple[Dataset, dict]:
        """The metadata entry of a URL's episode id (checked; 404 when not listed)."""
        ep_id = layout.check_name(ep_id, "episode id")
        ds = self.dataset()
        i = self._ids.get(ep_id)
        if i is None:
            raise NotFound(f"no episode {ep_id!r} in {self.meta_file}")
        return ds, ds.meta.episodes[i]

    def summary(self) -> dict:
        ds = self.dataset()
        meta = ds.meta
        return {"path": str(self.root), "name": self.real_root.name, "version": ds.version,
                "episodes": meta.num_episodes, "simulated": meta.simulation is not None,
                "operation_type": json_value(meta.data.get("operation_type")),
                "tasks": [json_value(t) for t in meta.tasks], "cameras": ds.camera_names,
                "frequencies": json_value(meta.data.get("frequencies")),
                "metadata_file": self.meta_file.relative_to(self.root).as_posix(),
                "lerobot": json_value(meta.data.get("lerobot")) if ds.lerobot is not None else None,
                "validation": self.validation.status()}

    def _first_stream(self, ds: Dataset, ep: dict, ep_id: str) -> Path | None:
        """The episode's first obs stream (else action): for the 0.4.0 layout straight from the declared
        embodiments (string paths, one stat each: the list's hot loop), else as the reader finds it."""
        if ds.version == layout.FORMAT_VERSION:
            base = os.path.join(ds.root, layout.EPISODES_DIR, ep_id)
            for kind in layout.KINDS:
                for emb in ds.meta.embodiments:
                    for comp in emb.components or (None,):
                        parts = [base, kind, layout.check_name(emb.name, "embodiment name"), *([comp] if comp else [])]
                        p = os.path.join(*parts, layout.STATE_FILE)
                        if os.path.isfile(p):
                            return Path(p)
            return None
        files = ds.stream_files(ep, "obs") or ds.stream_files(ep, "action")
        return files[0].path if files else None

    def _span(self, ds: Dataset, ep: dict, ep_id: str) -> tuple[int | None, int | None, str | None]:
        """(first, last) stamp of the episode's first obs stream (else action), cached per file version;
        an unreadable stream gives (None, None, the error). A LeRobot episode: its rows' stamps."""
        if ds.lerobot is not None:
            return self._lerobot_span(ds, ep_id)
        try:
            path = self._first_stream(ds, ep, ep_id)
            if path is None:
                return None, None, "no obs or action stream"
            st = path.stat()
            key = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
            hit = self._spans.get(key)
            if hit is None:
                hit = _footer_span(path)
                if hit is None:  # no statistics in the footer: the column itself
                    ts, _ = read_timestamps(path)
                    hit = (int(ts[0]), int(ts[-1]), None) if len(ts) else (None, None, "empty stream")
                self._spans[key] = hit
            return hit
        except (DatasetError, OSError) as e:
            return None, None, str(e)

    def _lerobot_span(self, ds: Dataset, ep_id: str) -> tuple[int | None, int | None, str | None]:
        """(first, last) row stamp of a LeRobot episode, from its data file's stamp and episode columns
        (read once per file version: a v3.0 file serves many episodes)."""
        try:
            path = ds.episode_path(ep_id)
            st = path.stat()
            key = ("lerobot", str(path), st.st_mtime_ns, st.st_size, st.st_ino)
            spans = self._spans.get(key)
            if spans is None:
                spans = self._spans[key] = _lerobot_spans(ds, path)
            hit = spans.get(int(ds.lerobot.episode_row(ep_id)["episode_index"]))
            return (None, None, f"{path}: no rows of episode {ep_id}") if hit is None else (*hit, None)
        except FileNotFoundError as e:
            return None, None, f"{e.filename}: data file missing"
        except (DatasetError, OSError, KeyError) as e:
            return None, None, e.args[0] if isinstance(e, KeyError) and e.args else str(e)

    def episode_list(self) -> dict:
        """Every episode's row of the list (cached until metadata.yaml or the report changes)."""
        ds = self.dataset()
        key = (self._meta_key, self.validation.version)
        with self.lock:
            if self._list_cache is not None and self._list_cache[0] == key:
                return self._list_cache[1]
        meta = ds.meta
        eps = meta.episodes
        ids = list(self._ids)
        # ~0.1 ms each (a footer): threads would only add their overhead
        spans = [self._span(ds, ep, i) for ep, i in zip(eps, ids)]
        cams = [camera_presence(ds, i) for i in ids]
        verdicts = episode_verdicts(self.validation.report, ids)
        tasks = meta.tasks
        rows = []
        for i, (ep_id, ep, (a, b, err), cam) in enumerate(zip(ids, eps, spans, cams)):
            ti = ep.get("task_index")
            if ti is None and len(tasks) == 1:
                ti = 0
            task = tasks[ti] if isinstance(ti, int) and not isinstance(ti, bool) and 0 <= ti < len(tasks) else {}
            rows.append({
                "id": ep_id, "index": i, "task_index": ti, "task": json_value(ep.get("task")),
                "prompt": json_value(task.get("prompt")), "success": json_value(ep.get("success")),
                "outcome": json_value(ep.get("outcome")), "valid": json_value(ep.get("valid")),
                "validated_at": json_value(ep.get("validated_at")),
                "duration_s": None if a is None else round((b - a) / 1e9, 3), "stream_error": err,
                "cameras": cam, **verdicts.get(ep_id, {"verdict": None, "checks": [], "findings": 0}),
            })
        out = {"episodes": rows, "validation": self.validation.status()}
        with self.lock:
            self._list_cache = (key, out)
        return out

    def camera(self, ep_id: str, name: str) -> Camera:
        """A camera of an episode (index cached per folder/tar version; checked names; its files inside
        the dataset)."""
        ds, ep = self.entry(ep_id)
        return self.camera_cache.get(ds, ep, ep_id, name)

    def frame(self, ep_id: str, name: str, stamp: str) -> tuple[bytes, int]:
        """The JPEG bytes of the frame stamped ``stamp`` (decimal ns, exactly a frame of the camera) and
        its index."""
        check_stamp(stamp)
        cam = self.camera(ep_id, name)
        return frame_bytes(cam, stamp, self.real_root, ep_id, name)

    def episode(self, ep_id: str) -> dict:
        """One episode: its entry, plots (qpos with the command, qvel; per embodiment component), cameras
        (frame stamps), the validator's verdict and timed findings. Times are integer ns relative to the
        episode's first stamp (``t0_ns``, a decimal string: exact), plot times float seconds."""
        ds, ep = self.entry(ep_id)
        ep_id = layout.check_name(ep["id"], "episode id")
        errors, streams = [], {}
        for kind in layout.KINDS:
            try:
                streams[kind] = ds.streams(ep, kind)
            except DatasetError as e:
                errors.append(str(e))
                streams[kind] = {}
        cams = []
        for name in ds.camera_names:
            try:
                cams.append(self.camera(ep_id, name))
            except (DatasetError, NotFound) as e:
                errors.append(str(e))
        firsts = [int(s.timestamps[0]) for k in streams.values() for s in k.values() if len(s)]
        firsts += [int(c.timestamps[0]) for c in cams if len(c)]
        lasts = [int(s.timestamps[-1]) for k in streams.values() for s in k.values() if len(s)]
        lasts += [int(c.timestamps[-1]) for c in cams if len(c)]
        t0 = min(firsts) if firsts else 0
        t1 = max(lasts) if lasts else 0

        panels = plot_panels(streams, t0)
        cameras = [{"name": c.name, "format": c.format, "frames": len(c),
                    "t_ns": (c.timestamps - t0).tolist(), "stamps": [str(int(x)) for x in c.timestamps]} for c in cams]
        idx = self._ids[ep_id]
        ids = list(self._ids)
        ti = ep.get("task_index")
        tasks = ds.meta.tasks
        if ti is None and len(tasks) == 1:
            ti = 0
        task = tasks[ti] if isinstance(ti, int) and not isinstance(ti, bool) and 0 <= ti < len(tasks) else {}
        return {
            "id": ep_id, "index": idx, "count": len(ids), "prev": ids[idx - 1] if idx > 0 else None,
            "next": ids[idx + 1] if idx + 1 < len(ids) else None,
            "entry": json_value(ep), "prompt": json_value(task.get("prompt")),
            "description": json_value(task.get("description")),
            "t0_ns": str(t0), "duration_ns": t1 - t0, "panels": panels, "cameras": cameras, "errors": errors,
            **episode_findings(self.validation.report, ep_id, t0),
        }

    def close(self) -> None:
        self.validation.stop()
        self.camera_cache.close()
