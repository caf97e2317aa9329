"""What ``dataset-view`` serves, as plain JSON-ready dicts: the episode list, one episode's plots,
cameras and validator findings, a frame's bytes, and the validation report (read or run).

Lazy by construction: the list reads ``metadata.yaml`` (once, again when it changes) and the
timestamp column of one stream per episode (cached per file version) plus one folder listing per
episode; an episode's streams, camera indexes and frames are read when that episode is opened; no
image is decoded. Every episode id and camera name from a URL is checked (:func:`layout.check_name`)
and must be listed in ``metadata.yaml``; a frame is served by its exact timestamp from the camera's
index, and only from a file inside the dataset folder.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from .. import layout
from ..camera import Camera
from ..dataset import Dataset
from ..errors import DatasetError
from ..streams import read_timestamps


class NotFound(Exception):
    """A URL that names nothing in the dataset (HTTP 404); the message says what."""


#: plot series longer than this are reduced to a min/max envelope of this many points per joint
MAX_PLOT_POINTS = 4000
#: camera indexes kept open (a tar camera holds a file descriptor)
CAMERA_CACHE = 32
#: timed findings shown per episode (the report keeps at most 100 per check and episode)
MAX_EPISODE_FINDINGS = 2000


def _json_value(v: Any) -> Any:
    """A metadata value as JSON can carry it (YAML dates, numpy scalars, NaN as None)."""
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if isinstance(v, np.generic):
        return _json_value(v.item())
    return str(v)


def _rounded(a: np.ndarray, digits: int = 5) -> list:
    """Values for JSON: rounded, NaN/inf as None."""
    a = np.round(a.astype(np.float64), digits)
    out = a.tolist()
    if not np.isfinite(a).all():
        bad = ~np.isfinite(a)
        if a.ndim == 1:
            out = [None if b else x for x, b in zip(out, bad.tolist())]
        else:
            out = [[None if b else x for x, b in zip(row, brow)] for row, brow in zip(out, bad.tolist())]
    return out


def envelope(t: np.ndarray, v: np.ndarray, max_points: int = MAX_PLOT_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(indices,) of one column reduced to at most ``max_points``: the first, the minimum and the maximum
    sample of each of ``max_points // 3`` equal runs of samples, in time order, so a single-sample
    spike (a jump) survives the reduction. ``t`` is unused but kept for symmetry of the call."""
    n = len(v)
    if n <= max_points:
        return np.arange(n)
    buckets = max(max_points // 3, 1)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep = [edges[:-1]]
    with np.errstate(invalid="ignore"):
        filled = np.where(np.isfinite(v), v, np.nan)
        lo = np.where(np.isnan(filled), np.inf, filled)
        hi = np.where(np.isnan(filled), -np.inf, filled)
        keep.append(edges[:-1] + np.array([int(np.argmin(lo[a:b])) for a, b in zip(edges[:-1], edges[1:])]))
        keep.append(edges[:-1] + np.array([int(np.argmax(hi[a:b])) for a, b in zip(edges[:-1], edges[1:])]))
    keep.append(np.array([n - 1]))
    return np.unique(np.concatenate(keep))


_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


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


class ValidationRun:
    """The validator's report the viewer shows: read from a saved ``dataset-validate --json`` file, or
    produced by a ``dataset-validate DIR --json --no-update-metadata`` process it starts (never writes
    into the dataset). ``status()`` is what the page polls."""

    def __init__(self, root: Path, args: list[str] | None = None):
        self.root = root
        self.args = list(args or [])
        self.lock = threading.Lock()
        self.state = "none"  # none | running | done | error
        self.source: str | None = None
        self.report: dict | None = None
        self.message = ""
        self.started = self.finished = None
        self.proc: subprocess.Popen | None = None
        self.version = 0  # bumped whenever the report changes (the list's cache key)

    def load_file(self, path: str | os.PathLike, episode_ids: list[str]) -> None:
        """Read a saved report; refuse (DatasetError) a file that is not one, or one of another dataset
        (an episode it judges is not listed here)."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise DatasetError(path, f"cannot read ({e.strerror})") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DatasetError(path, f"not a dataset-validate --json report ({e})") from None
        if not (isinstance(doc, dict) and isinstance(doc.get("rows"), list) and isinstance(doc.get("episodes"), dict)):
            raise DatasetError(path, "not a dataset-validate --json report (no 'rows' list and 'episodes' mapping)")
        unknown = sorted(set(doc["episodes"]) - set(episode_ids))
        if unknown:
            raise DatasetError(path, f"a report of another dataset: episode {unknown[0]!r} is not in "
                                     f"{self.root / layout.METADATA_FILE}")
        with self.lock:
            self.report, self.state, self.source = _clean_report(doc), "done", f"report {path}"
            self.finished = path.stat().st_mtime
            self.version += 1

    def start(self) -> bool:
        """Start a validation process unless one runs; False if one was running."""
        with self.lock:
            if self.state == "running":
                return False
            cmd = [sys.executable, "-m", "openarm_sim_dataset.cli.validate", str(self.root), "--json",
                   "--no-update-metadata", *self.args]
            env = dict(os.environ)
            env.setdefault("MUJOCO_GL", "egl")
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                         env=env, text=True)
            self.state, self.message, self.started, self.finished = "running", "", time.time(), None
            self.source = "dataset-validate " + " ".join(["DIR", "--json", "--no-update-metadata", *self.args])
            proc = self.proc
        threading.Thread(target=self._wait, args=(proc,), daemon=True).start()
        return True

    def _wait(self, proc: subprocess.Popen) -> None:
        out, err = proc.communicate()
        with self.lock:
            if proc is not self.proc:
                return
            self.finished = time.time()
            lines = [x for x in err.splitlines() if x.strip()]
            if proc.returncode in (0, 1):
                try:
                    self.report, self.state = _clean_report(json.loads(out)), "done"
                    self.version += 1
                    return
                except (json.JSONDecodeError, TypeError, AttributeError):
                    pass
            self.state = "error"
            self.message = lines[-1] if lines else f"dataset-validate exited with status {proc.returncode}"

    def stop(self) -> None:
        """End the validation process this viewer started, if it still runs."""
        with self.lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def status(self) -> dict:
        with self.lock:
            rep = self.report
            out = {"state": self.state, "source": self.source, "message": self.message, "version": self.version,
                   "started": self.started, "finished": self.finished,
                   "elapsed_s": None if self.started is None
                   else round((self.finished or time.time()) - self.started, 1)}
            if rep is not None:
                out.update(valid=rep.get("valid"), checks=rep.get("checks"), strict=rep.get("strict"),
                           rows=[{k: r.get(k) for k in ("check", "status", "detail", "episodes", "warned")}
                                 | {"findings": len(r.get("findings") or [])} for r in rep["rows"]])
            return out


def _clean_report(doc: dict) -> dict:
    """The report with ids as strings and every row's lists present (a report of before timed findings
    has none: its verdicts still show)."""
    rows = []
    for r in doc.get("rows") or []:
        if not isinstance(r, dict):
            continue
        rows.append({"check": str(r.get("check")), "status": str(r.get("status")), "detail": str(r.get("detail", "")),
                     "episodes": [str(e) for e in r.get("episodes") or []],
                     "warned": [str(e) for e in r.get("warned") or []],
                     "findings": [f for f in r.get("findings") or [] if isinstance(f, dict) and "t_ns" in f
                                  and "episode" in f]})
    return {"valid": doc.get("valid"), "checks": doc.get("checks"), "strict": doc.get("strict"), "rows": rows,
            "episodes": {str(k): bool(v) for k, v in (doc.get("episodes") or {}).items()}}


class ViewData:
    """The dataset as the viewer reads it (thread-safe; ``metadata.yaml`` re-read when it changes)."""

    def __init__(self, root: str | os.PathLike, validation_args: list[str] | None = None):
        self.root = Path(root)
        self.real_root = self.root.resolve()
        self.lock = threading.RLock()
        self._meta_key = None
        self.ds: Dataset | None = None
        self._reload()
        self.validation = ValidationRun(self.root, validation_args)
        self._spans: dict[tuple, tuple] = {}
        self._cameras: OrderedDict[tuple[str, str], tuple[tuple, Camera]] = OrderedDict()
        self._list_cache: tuple | None = None

    # ---------------------------------------------------------------- metadata
    def _stat_key(self):
        st = (self.root / layout.METADATA_FILE).stat() if (self.root / layout.METADATA_FILE).exists() else None
        return None if st is None else (st.st_mtime_ns, st.st_size, st.st_ino)

    def _reload(self) -> None:
        key = self._stat_key()
        ds = Dataset(self.root)
        self.ds, self._meta_key = ds, key
        self._ids = {layout.check_name(e["id"], "episode id", self.root / layout.METADATA_FILE): i
                     for i, e in enumerate(ds.meta.episodes)}

    def dataset(self) -> Dataset:
        """The dataset, re-read if metadata.yaml changed since (e.g. a resumed generation appended)."""
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
            raise NotFound(f"no episode {ep_id!r} in {self.root / layout.METADATA_FILE}")
        return ds, ds.meta.episodes[i]

    # ---------------------------------------------------------------- the list
    def summary(self) -> dict:
        ds = self.dataset()
        meta = ds.meta
        return {"path": str(self.root), "name": self.real_root.name, "version": ds.version,
                "episodes": meta.num_episodes, "simulated": meta.simulation is not None,
                "operation_type": _json_value(meta.data.get("operation_type")),
                "tasks": [_json_value(t) for t in meta.tasks], "cameras": ds.camera_names,
                "frequencies": _json_value(meta.data.get("frequencies")),
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
        an unreadable stream gives (None, None, the error)."""
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

    def _camera_presence(self, ds: Dataset, ep_id: str) -> list[dict]:
        """Each declared camera of an episode: stored as a folder, a tar archive, or missing (one listing)."""
        names = ds.camera_names
        if not names:
            return []
        if ds.version == layout.FORMAT_VERSION:
            try:
                with os.scandir(layout.episode_dir(ds.root, ep_id) / layout.CAMERAS_DIR) as it:
                    present = {e.name for e in it}
            except OSError:
                present = set()
            return [{"name": n, "format": "dir" if n in present else "tar" if n + layout.TAR_SUFFIX in present
                     else None} for n in names]
        out = []
        for n in names:
            p = layout.camera_dir(ds.root, ep_id, n, ds.version, ds.meta.stored_camera_name(n))
            tar = p.with_name(p.name + layout.TAR_SUFFIX)
            out.append({"name": n, "format": "dir" if p.is_dir() else "tar" if tar.is_file() else None})
        return out

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
        cams = [self._camera_presence(ds, i) for i in ids]
        verdicts = self._verdicts(ids)
        tasks = meta.tasks
        rows = []
        for i, (ep_id, ep, (a, b, err), cam) in enumerate(zip(ids, eps, spans, cams)):
            ti = ep.get("task_index")
            if ti is None and len(tasks) == 1:
                ti = 0
            task = tasks[ti] if isinstance(ti, int) and not isinstance(ti, bool) and 0 <= ti < len(tasks) else {}
            rows.append({
                "id": ep_id, "index": i, "task_index": ti, "task": _json_value(ep.get("task")),
                "prompt": _json_value(task.get("prompt")), "success": _json_value(ep.get("success")),
                "outcome": _json_value(ep.get("outcome")), "valid": _json_value(ep.get("valid")),
                "validated_at": _json_value(ep.get("validated_at")),
                "duration_s": None if a is None else round((b - a) / 1e9, 3), "stream_error": err,
                "cameras": cam, **verdicts.get(ep_id, {"verdict": None, "checks": [], "findings": 0}),
            })
        out = {"episodes": rows, "validation": self.validation.status()}
        with self.lock:
            self._list_cache = (key, out)
        return out

    def _verdicts(self, ids: list[str]) -> dict[str, dict]:
        """Per episode: ``verdict`` (valid | warn | invalid | unchecked, from the report; None without
        one), the checks that fail or warn it, its number of timed findings."""
        rep = self.validation.report
        if rep is None:
            return {}
        out = {i: {"verdict": "unchecked", "checks": [], "findings": 0} for i in ids}
        for ep, ok in rep["episodes"].items():
            if ep in out:
                out[ep]["verdict"] = "valid" if ok else "invalid"
        for r in rep["rows"]:
            named = r["episodes"] if r["status"] == "fail" else r["warned"] if r["status"] == "warn" else []
            if r["status"] == "fail" and not r["episodes"]:
                named = list(rep["episodes"])  # a failed check naming no episode fails them all
            for ep in named:
                if ep in out:
                    out[ep]["checks"].append({"check": r["check"], "status": r["status"]})
                    if r["status"] == "warn" and out[ep]["verdict"] == "valid":
                        out[ep]["verdict"] = "warn"
            seen = set()
            for f in r["findings"]:
                # one gap seen in every attribute of a stream file is one finding (as the episode page shows it)
                k = (str(f["episode"]), f.get("t_ns"), f.get("end_ns"), f.get("what"))
                if k[0] in out and k not in seen:
                    seen.add(k)
                    out[k[0]]["findings"] += 1
        return out

    # ---------------------------------------------------------------- one episode
    def camera(self, ep_id: str, name: str) -> Camera:
        """A camera of an episode (index cached per folder/tar version; checked names; its files inside
        the dataset)."""
        ds, ep = self.entry(ep_id)
        name = layout.check_name(name, "camera name")
        if name not in ds.camera_names:
            raise NotFound(f"no camera {name!r} in {self.root / layout.METADATA_FILE} (cameras: {ds.camera_names})")
        key = (ep_id, name)
        base = layout.camera_dir(ds.root, ep_id, name, ds.version, ds.meta.stored_camera_name(name))
        version = tuple((p.stat().st_mtime_ns, p.stat().st_ino) if p.exists() else None
                        for p in (base, base.with_name(base.name + layout.TAR_SUFFIX)))
        with self.lock:
            hit = self._cameras.get(key)
            if hit is not None and hit[0] == version:
                self._cameras.move_to_end(key)
                return hit[1]
        cam = ds.load_camera(name, ep)
        real = cam.path.resolve()
        if not real.is_relative_to(self.real_root):
            raise NotFound(f"camera {name!r} of episode {ep_id!r} lies outside the dataset ({real})")
        with self.lock:
            self._cameras[key] = (version, cam)
            while len(self._cameras) > CAMERA_CACHE:
                self._cameras.popitem(last=False)[1][1].close()
        return cam

    def frame(self, ep_id: str, name: str, stamp: str) -> tuple[bytes, int]:
        """The JPEG bytes of the frame stamped ``stamp`` (decimal ns, exactly a frame of the camera) and
        its index."""
        if not (stamp.isascii() and stamp.isdigit() and 0 < len(stamp) <= 20):
            raise NotFound(f"frame {stamp!r}: not a timestamp in integer ns")
        cam = self.camera(ep_id, name)
        ts = int(stamp)
        i = int(np.searchsorted(cam.timestamps, ts))
        if i >= len(cam.timestamps) or int(cam.timestamps[i]) != ts:
            raise NotFound(f"camera {name!r} of episode {ep_id!r} has no frame stamped {ts}")
        if cam.format == "dir":
            real = cam.frame_path(i).resolve()
            if not real.is_relative_to(self.real_root):
                raise NotFound(f"frame {ts} of camera {name!r} lies outside the dataset")
        return cam.read_bytes(i), i

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

        panels = []
        # in the order the metadata declares embodiments and components (arms: right, then left)
        prefixes = list(dict.fromkeys(key.rsplit("/", 1)[0] for k in streams.values() for key in k))
        for prefix in prefixes:
            obs, act = streams["obs"], streams["action"]
            for attr, title in (("qpos", "position"), ("qvel", "velocity")):
                series = []
                for kind, label in (("obs", "obs"), ("action", "command")):
                    s = (obs if kind == "obs" else act).get(f"{prefix}/{attr}")
                    if s is None or not len(s) or (kind == "action" and attr != "qpos"):
                        continue
                    series.append(_series(s, t0, label, dashed=kind == "action"))
                if not series:
                    s_other = None
                    if attr == "qpos":  # a lifter or legacy stream: its one attribute
                        s_other = next((st for key, st in obs.items() if key.rsplit("/", 1)[0] == prefix
                                        and key.rsplit("/", 1)[1] not in ("qvel", "qtorque", "pose")), None)
                    if s_other is None or not len(s_other):
                        continue
                    series.append(_series(s_other, t0, "obs", dashed=False))
                    a = next((st for key, st in act.items() if key.rsplit("/", 1)[0] == prefix
                              and key.rsplit("/", 1)[1] == s_other.key.rsplit("/", 1)[1]), None)
                    if a is not None and len(a):
                        series.append(_series(a, t0, "command", dashed=True))
                    title = s_other.key.rsplit("/", 1)[1]
                cols = list(series[0]["columns"])
                unit = "rad" if attr == "qpos" else "rad/s"
                panels.append({"id": f"{prefix}/{attr}", "title": f"{prefix} {title} ({attr}"
                               + (" + command" if any(x["label"] == "command" for x in series) else "") + f"), {unit}",
                               "columns": cols, "series": series})
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
            "entry": _json_value(ep), "prompt": _json_value(task.get("prompt")),
            "description": _json_value(task.get("description")),
            "t0_ns": str(t0), "duration_ns": t1 - t0, "panels": panels, "cameras": cameras, "errors": errors,
            **self._episode_findings(ep_id, t0),
        }

    def _episode_findings(self, ep_id: str, t0: int) -> dict:
        rep = self.validation.report
        if rep is None:
            return {"verdict": None, "checks": [], "findings": []}
        verdict = self._verdicts([ep_id])[ep_id]
        checks = []
        for r in rep["rows"]:
            names = r["episodes"] if r["status"] == "fail" else r["warned"] if r["status"] == "warn" else []
            if ep_id in names or (r["status"] == "fail" and not r["episodes"]):
                checks.append({"check": r["check"], "status": r["status"], "detail": r["detail"]})
        merged: dict[tuple, dict] = {}
        for r in rep["rows"]:
            for f in r["findings"]:
                if str(f["episode"]) != ep_id:
                    continue
                try:
                    t, end = int(f["t_ns"]), None if f.get("end_ns") is None else int(f["end_ns"])
                except (TypeError, ValueError):
                    continue
                where = str(f.get("where", ""))
                k = (r["check"], t, end, str(f.get("what", "")), str(f.get("level", "fail")))
                if k in merged:  # one gap seen in every attribute of a stream file: one marker
                    if where not in merged[k]["where"]:
                        merged[k]["where"].append(where)
                    continue
                merged[k] = {"check": r["check"], "t_ns": t - t0, "end_ns": None if end is None else end - t0,
                             "stamp": str(t), "what": k[3], "level": k[4], "where": [where]}
        found = sorted(merged.values(), key=lambda f: (f["t_ns"], f["check"]))[:MAX_EPISODE_FINDINGS]
        for f in found:
            f["where"] = _join_where(f["where"])
        return {"verdict": verdict["verdict"], "checks": checks, "findings": found}

    def close(self) -> None:
        self.validation.stop()
        with self.lock:
            for _, cam in self._cameras.values():
                cam.close()
            self._cameras.clear()


def _join_where(places: list[str]) -> str:
    """``obs arms/right/qpos``, ``obs arms/right/qvel`` -> ``obs arms/right (qpos, qvel)``."""
    groups: dict[str, list[str]] = {}
    for p in places:
        head, _, attr = p.rpartition("/")
        if head and " " in head:
            groups.setdefault(head, []).append(attr)
        else:
            groups.setdefault(p, [])
    return "; ".join(f"{h} ({', '.join(a)})" if len(a) > 1 else f"{h}/{a[0]}" if a else h for h, a in groups.items())


def _series(s, t0: int, label: str, dashed: bool) -> dict:
    """One stream as a plot series: times in s from ``t0``; each column reduced to a min/max envelope
    when longer than :data:`MAX_PLOT_POINTS` (then with its own times)."""
    t = (s.timestamps - t0) / 1e9
    v = np.asarray(s.values)
    cols = list(s.columns)[: v.shape[1]] if v.ndim == 2 else ["value"]
    if v.ndim == 1:
        v = v[:, None]
    out = {"label": label, "dashed": dashed, "columns": cols, "n": int(len(t))}
    if len(t) <= MAX_PLOT_POINTS:
        out["t"] = _rounded(t, 6)
        out["v"] = [_rounded(v[:, j]) for j in range(v.shape[1])]
        return out
    out["t"] = None
    out["tc"], out["v"] = [], []
    for j in range(v.shape[1]):
        keep = envelope(t, v[:, j])
        out["tc"].append(_rounded(t[keep], 6))
        out["v"].append(_rounded(v[keep, j]))
    return out
