"""Reading a LeRobot dataset (v2.0, v2.1 or v3.0) as the reader reads any layout: metadata in the 0.4.0
shape, each episode's streams and cameras. Nothing is ever written into the dataset.

:class:`LeRobotSource` reads ``meta/info.json``, the episodes and tasks of either version, and
synthesises a :class:`~.metadata.Metadata` (tasks as prompts, episodes with ids ``"0"``, ``"1"``..
from ``episode_index``, cameras from the visual features, every rate ``fps``, the OpenArm arms that
:mod:`.lerobot_names` finds, and a ``lerobot:`` section with ``codebase_version``, ``robot_type`` and
``fps``). LeRobot keeps no wall clock: every episode starts at 0 ns, and row k's ``timestamp`` is
snapped to the ``fps`` grid when within LeRobot's tolerance of it (:func:`.sampler.snap_seconds`).

The files the episodes refer to (:meth:`LeRobotSource.file_refs`) are only opened when read: a dataset
whose videos are missing still serves its joints, and :meth:`LeRobotSource.locate_missing` says where
files of the missing names sit instead (:class:`~.lerobot_layout.MissingFiles`), from one bounded scan of the folder.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import layout, lerobot_layout as lrl, sampler
from .errors import LFS_POINTER, CameraError, DatasetError, MetadataError, StreamError, is_lfs_pointer
from .lerobot_names import map_arms
from .metadata import Metadata
from .streams import Stream, list_column, primitive_numpy, read_table
from .video_camera import DecodedCamera, ImageCamera, VideoCamera

#: Largest info.json / episodes.jsonl read (bytes): metadata, never data.
MAX_JSON_BYTES = 256 * 1024 * 1024


def _read_json_file(path: Path, info: Path) -> object:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise MetadataError(path, f"larger than {MAX_JSON_BYTES} bytes")
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise MetadataError(path, "missing (a LeRobot dataset needs it)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MetadataError(path, f"unreadable ({e})") from None
    except json.JSONDecodeError as e:
        if is_lfs_pointer(path):
            raise MetadataError(path, LFS_POINTER) from None
        raise MetadataError(path, f"not valid JSON (line {e.lineno}: {e.msg})") from None


def _read_jsonl(path: Path, version: str) -> list[dict]:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise MetadataError(path, f"larger than {MAX_JSON_BYTES} bytes")
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise MetadataError(path, f"missing (a LeRobot {version} dataset needs it)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MetadataError(path, f"unreadable ({e})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if is_lfs_pointer(path):
                raise MetadataError(path, LFS_POINTER) from None
            raise MetadataError(path, f"line {n} is not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise MetadataError(path, f"line {n} is not a JSON object")
        out.append(row)
    return out


def _int(value: object, where: str, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise MetadataError(path, f"{where} must be an integer, not {value!r}")
    return int(value)


@lru_cache(maxsize=2)
def _data_file(path: str, _mtime_ns: int, _size: int, _ino: int) -> tuple[pa.Table, dict[int, np.ndarray]]:
    table = read_table(Path(path))
    rows: dict[int, np.ndarray] = {}
    if "episode_index" in table.column_names:
        ep, _ = primitive_numpy(table.column("episode_index").combine_chunks())
        order = np.argsort(ep, kind="stable")
        values, starts = np.unique(ep[order], return_index=True)
        bounds = np.r_[starts, len(ep)]
        rows = {int(v): order[bounds[i]:bounds[i + 1]] for i, v in enumerate(values.tolist())}
    return table, rows


def data_file(path: Path) -> tuple[pa.Table, dict[int, np.ndarray]]:
    """A data parquet file, read whole once, and the rows of each ``episode_index`` in it (cached per file
    version: a v3.0 file serves many episodes, each found without scanning the file again)."""
    try:
        st = path.stat()
    except OSError:
        raise StreamError(path, "data file missing") from None
    return _data_file(str(path), st.st_mtime_ns, st.st_size, st.st_ino)


class LeRobotSource:
    """A LeRobot dataset folder: ``info`` (info.json), ``features``, ``fps``, ``episodes`` (one dict per
    episode as stored: ``episode_index``, ``tasks``, ``length`` and, in v3.0, the chunk/file and window
    columns), ``tasks`` (task strings by task_index), and :attr:`metadata`."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.info_path = self.root / lrl.INFO_FILE
        info = _read_json_file(self.info_path, self.info_path)
        if not isinstance(info, dict):
            raise MetadataError(self.info_path, "is not a JSON object")
        self.info = info
        version = info.get("codebase_version")
        if version not in lrl.CODEBASE_VERSIONS:
            raise MetadataError(self.info_path, f"codebase_version {version!r} is not read "
                                                f"(known: {', '.join(lrl.CODEBASE_VERSIONS)})")
        self.codebase_version: str = version
        fps = info.get("fps")
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps <= 10_000:
            raise MetadataError(self.info_path, f"fps must be a positive number, not {fps!r}")
        self.fps = fps
        features = info.get("features")
        if not isinstance(features, dict) or not features:
            raise MetadataError(self.info_path, "features must be a non-empty mapping")
        for key, feat in features.items():
            if not isinstance(feat, dict) or not isinstance(feat.get("dtype"), str) or not isinstance(feat.get("shape"), list):
                raise MetadataError(self.info_path, f"features.{key} must have a dtype and a shape")
        self.features: dict[str, dict] = features
        self.chunks_size = _int(info.get("chunks_size", 1000), "chunks_size", self.info_path)
        if self.chunks_size <= 0:
            raise MetadataError(self.info_path, f"chunks_size must be positive, not {self.chunks_size}")
        self.video_keys = [k for k, f in features.items() if f["dtype"] == "video"]
        self.image_keys = [k for k, f in features.items() if f["dtype"] == "image"]
        if not self.vector_keys():  # any numeric feature is read as one (``state``, ``actions`` in the wild)
            raise MetadataError(self.info_path, f"declares no state or action feature (no numeric feature besides "
                                                f"LeRobot's indices; features: {', '.join(features)}): no joints to read")
        if self.video_keys and not isinstance(info.get("video_path"), str):
            raise MetadataError(self.info_path, "has video features but no video_path")
        self.tasks = self._read_tasks()
        self.episodes = self._read_episodes()
        self._by_id = {str(e["episode_index"]): e for e in self.episodes}
        # the arm mapping of the state and action vectors, found once: streams() reads it per episode
        self._mapped = {key: map_arms(names) if (names := self.vector_names(key)) else ([], [])
                        for key in ("observation.state", "action") if key in features}
        self.arms = {kind: self._mapped.get("observation.state" if kind == "obs" else "action", ([], []))[0]
                     for kind in layout.KINDS}
        self.metadata = Metadata(self._document(), self.info_path, version=lrl.layout_name(version))
        #: the folder's scan for misplaced files (:meth:`locate_missing`), made once when first needed
        self._scan: tuple[dict[str, list[str]], bool] | None = None
        self._check_columns()

    def vector_keys(self) -> list[str]:
        """The numeric features other than LeRobot's bookkeeping columns (state, action, ...)."""
        return [k for k, f in self.features.items() if k not in lrl.DEFAULT_FEATURES
                and f["dtype"] not in lrl.VISUAL_DTYPES and f["dtype"] != "string"]

    def _check_columns(self) -> None:
        """Refuse an info.json that its frame table contradicts (a declared feature without its column, a
        vector whose length is not its declared shape), judged on the first episode's data file: every
        reader of the dataset would fail on it. A missing or unreadable file is left to the validator
        (``lerobot_files`` names it)."""
        ep = next((str(e["episode_index"]) for e in self.episodes), None)
        if ep is None:
            return
        try:
            path = self.data_path(ep)
            pf = pq.ParquetFile(path)
        except (OSError, pa.ArrowException, DatasetError):
            return
        with pf:
            names = set(pf.schema_arrow.names)
            keys = self.vector_keys()
            absent = [k for k in keys if k not in names]
            if absent:
                raise MetadataError(self.info_path, f"declares {', '.join(map(repr, absent))}, which {path} has no "
                                                    f"column for")
            lists = [k for k in keys if pa.types.is_list(t := pf.schema_arrow.field(k).type)
                     or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)]
            if not lists or not pf.metadata.num_rows:
                return
            try:
                first = next(pf.iter_batches(batch_size=1, columns=lists, use_threads=False))
            except (OSError, pa.ArrowException, StopIteration):
                return  # an unreadable file: lerobot_files names it
        for key in lists:
            want = int(np.prod(self.features[key]["shape"])) if self.features[key]["shape"] else 1
            value = first.column(key)[0]
            got = len(value) if value.is_valid else want
            if got != want:
                raise MetadataError(self.info_path, f"features.{key} has shape {self.features[key]['shape']}, "
                                                    f"{path} holds {got} values a row")

    # ---------------------------------------------------------------- metadata
    def _read_tasks(self) -> dict[int, str]:
        if self.per_episode:
            path = self.root / lrl.TASKS_JSONL
            rows = _read_jsonl(path, self.codebase_version)
            out = {}
            for n, row in enumerate(rows, 1):
                if not isinstance(row.get("task"), str):
                    raise MetadataError(path, f"line {n} has no task string")
                out[_int(row.get("task_index"), f"line {n} task_index", path)] = row["task"]
            return out
        path = self.root / lrl.TASKS_PARQUET
        if not path.is_file():
            raise MetadataError(path, "missing (a LeRobot v3.0 dataset needs it)")
        table = read_table(path)
        if "task_index" not in table.column_names:
            raise MetadataError(path, "has no task_index column")
        text = [n for n in table.column_names if n != "task_index"
                and (pa.types.is_string(table.schema.field(n).type) or pa.types.is_large_string(table.schema.field(n).type))]
        if not text:
            raise MetadataError(path, "has no column of task strings")
        return dict(zip(table.column("task_index").to_pylist(), table.column(text[0]).to_pylist()))

    def _read_episodes(self) -> list[dict]:
        if self.per_episode:
            path = self.root / lrl.EPISODES_JSONL
            rows = _read_jsonl(path, self.codebase_version)
        else:
            folder = self.root / lrl.EPISODES_DIR
            files = sorted(folder.glob("chunk-*/file-*.parquet")) if folder.is_dir() else []
            if not files:
                raise MetadataError(folder, "holds no episodes parquet file (a LeRobot v3.0 dataset needs one)")
            rows = []
            for f in files:
                table = read_table(f)
                keep = [n for n in table.column_names if not n.startswith("stats/")]
                rows.extend(table.select(keep).to_pylist())
            path = folder
        seen = set()
        for n, row in enumerate(rows):
            idx = _int(row.get("episode_index"), f"episode {n}: episode_index", path)
            if idx in seen:
                raise MetadataError(path, f"episode_index {idx} is listed twice")
            seen.add(idx)
            _int(row.get("length"), f"episode {idx}: length", path)
        return rows

    def vector_names(self, key: str) -> list[str]:
        """The names of a vector feature's dimensions (``d0``.. when info.json names none)."""
        feat = self.features[key]
        width = int(np.prod(feat["shape"])) if feat["shape"] else 1
        names = lrl.feature_names(feat.get("names"))
        if isinstance(names, list) and len(names) == width and all(isinstance(n, str) for n in names):
            return names
        return [f"d{i}" for i in range(width)]

    def camera_names(self) -> list[str]:
        return [lrl.camera_name(k) for k in self.video_keys + self.image_keys]

    def _document(self) -> dict:
        task_ids = sorted(self.tasks)
        position = {t: i for i, t in enumerate(task_ids)}
        by_text = {self.tasks[t]: position[t] for t in task_ids}
        episodes = []
        for row in self.episodes:
            entry = {"id": str(row["episode_index"]), "length": int(row["length"])}
            tasks = row.get("tasks") or []
            if tasks and isinstance(tasks[0], str) and tasks[0] in by_text:
                entry["task_index"] = by_text[tasks[0]]
            episodes.append(entry)
        sides = sorted({a.side for arms in self.arms.values() for a in arms}, key=layout.ARM_SIDES.index)
        cameras = {}
        for key in self.video_keys + self.image_keys:
            name = layout.check_name(lrl.camera_name(key), "camera name", self.info_path)
            shape = self.features[key]["shape"]
            names = self.features[key].get("names") or []
            size = dict(zip(names, shape)) if len(names) == len(shape) else {}
            cameras[name] = {k: int(size[k]) for k in ("width", "height") if k in size}
        embodiments = {"arms": {"id": layout.EMBODIMENT_OPENARM}} if sides else {}
        rate = float(self.fps)
        return {
            "version": self.metadata_version,
            "operation_type": "teleop",
            "tasks": [{"prompt": self.tasks[t]} for t in task_ids],
            "episodes": episodes,
            "equipment": {"id": str(self.info.get("robot_type") or "lerobot"), "embodiments": embodiments,
                          "perceptions": {"cameras": cameras}},
            "frequencies": {
                "obs": {"arms": {s: rate for s in sides}} if sides else {},
                "action": {"arms": {s: rate for s in sides}} if sides else {},
                "cameras": {c: rate for c in cameras},
            },
            "lerobot": {"codebase_version": self.codebase_version, "robot_type": self.info.get("robot_type"),
                        "fps": self.fps},
        }

    @property
    def metadata_version(self) -> str:
        return layout.FORMAT_VERSION

    @property
    def per_episode(self) -> bool:
        """v2.0 and v2.1: one data file per episode and one MP4 per episode and camera (v3.0 shares them)."""
        return self.codebase_version in lrl.PER_EPISODE_VERSIONS

    # ------------------------------------------------------------------- files
    def file_refs(self, episode_ids: list[str] | None = None) -> tuple[list[FileRef], dict[str, str]]:
        """The data and video files the episodes (default all) refer to, by their templates, without
        opening one; and ``{episode id: why}`` for episodes whose paths cannot be built (a v3.0 row
        without its video columns, a template naming an unknown field)."""
        ids = [str(e["episode_index"]) for e in self.episodes] if episode_ids is None else episode_ids
        refs, broken = [], {}
        for ep in ids:
            try:
                refs.append(FileRef("data", ep, None, self.data_path(ep)))
                for key in self.video_keys:
                    refs.append(FileRef("video", ep, key, self.video_file(ep, key)[0]))
            except DatasetError as e:
                broken[ep] = str(e)
        return refs, broken

    def locate_missing(self, missing: list[FileRef]) -> list[lrl.MissingFiles]:
        """The ``missing`` files grouped by kind (data, then video), each group with the folders where files
        of the missing names sit instead, or failing that files the template's name pattern matches
        (``file-000.mp4``, ``episode_000000.mp4``), outside the paths the templates build. The folder is
        scanned once per source (:func:`.lerobot_layout.scan_files`, bounded)."""
        if not missing:
            return []
        if self._scan is None:
            self._scan = lrl.scan_files(self.root, (".parquet", ".mp4"))
        found, truncated = self._scan
        refs, _ = self.file_refs()
        expected = {self._rel(r.path) for r in refs}
        groups = []
        for kind, template_key in (("data", "data_path"), ("video", "video_path")):
            mine = [r for r in missing if r.kind == kind]
            if not mine:
                continue
            template = str(self.info.get(template_key))
            paths = list(dict.fromkeys(self._rel(r.path) for r in mine))
            names = {p.rsplit("/", 1)[-1] for p in paths}
            pattern = lrl.name_pattern(template)

            def elsewhere(name_ok, kind=kind) -> dict[str, int]:
                folders: dict[str, int] = {}
                for name, rels in found.items():
                    if not name_ok(name):
                        continue
                    for rel in rels:
                        # a data file's name is also an episodes table's (meta/episodes/...): never a data file
                        if rel in expected or (kind == "data" and rel.startswith("meta/")):
                            continue
                        folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else "./"
                        folders[folder] = folders.get(folder, 0) + 1
                return folders

            by_name = elsewhere(lambda n: n in names)
            folders, matched = (by_name, "names") if by_name else (elsewhere(pattern.match), "pattern")
            groups.append(lrl.MissingFiles(kind, template_key, template, paths, sorted({r.episode for r in mine}, key=int),
                                       sorted(folders.items(), key=lambda kv: (-kv[1], kv[0])),
                                       matched if folders else "", truncated))
        return groups

    def episode_bytes(self, episode_id: str) -> dict[str, int] | None:
        """``{parquet, video}`` bytes of a v2.x episode's own data file and MP4s (a missing one counts 0);
        None in v3.0, whose files hold many episodes."""
        if not self.per_episode:
            return None
        refs, _ = self.file_refs([episode_id])
        out = {"parquet": 0, "video": 0}
        for ref in refs:
            try:
                out["parquet" if ref.kind == "data" else "video"] += os.stat(ref.path).st_size
            except FileNotFoundError:
                pass
        return out

    def _rel(self, path: Path) -> str:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    # ---------------------------------------------------------------- episodes
    def episode_row(self, episode_id: str) -> dict:
        try:
            return self._by_id[episode_id]
        except KeyError:
            raise KeyError(f"{self.info_path}: no episode {episode_id!r}") from None

    def data_path(self, episode_id: str) -> Path:
        """The parquet file holding the episode's frames."""
        row = self.episode_row(episode_id)
        ep = int(row["episode_index"])
        template = self.info.get("data_path")
        if self.per_episode:
            return lrl.template_path(self.root, template, self.info_path, episode_chunk=ep // self.chunks_size,
                                     episode_index=ep)
        return lrl.template_path(self.root, template, self.info_path,
                                 chunk_index=_int(row.get("data/chunk_index"), "data/chunk_index", self.info_path),
                                 file_index=_int(row.get("data/file_index"), "data/file_index", self.info_path))

    def rows(self, episode_id: str) -> pa.Table:
        """The episode's rows of its data file, in file order."""
        path = self.data_path(episode_id)
        table, by_episode = data_file(path)
        if "episode_index" not in table.column_names:
            raise StreamError(path, "has no episode_index column")
        if self.per_episode:
            return table  # the file is the episode's
        rows = by_episode.get(int(self.episode_row(episode_id)["episode_index"]))
        if rows is None:
            return table.slice(0, 0)
        if rows[-1] - rows[0] + 1 == len(rows):  # contiguous, as LeRobot writes them
            return table.slice(int(rows[0]), len(rows))
        return table.take(pa.array(rows))

    def row_timestamps(self, episode_id: str, table: pa.Table | None = None) -> np.ndarray:
        """The episode's row stamps in int64 ns from its start (``timestamp`` snapped to the fps grid)."""
        table = self.rows(episode_id) if table is None else table
        path = self.data_path(episode_id)
        if "timestamp" not in table.column_names:
            raise StreamError(path, "has no timestamp column")
        seconds, valid = primitive_numpy(table.column("timestamp").combine_chunks())
        if valid is not None and not valid.all():
            raise StreamError(path, f"episode {episode_id}: timestamp is null in {int((~valid).sum())} rows")
        return sampler.snap_seconds(seconds.astype(np.float64), self.fps, lrl.TOLERANCE_S)

    def streams(self, episode_id: str, kind: str) -> dict[str, Stream]:
        """The episode's obs (``observation.*`` features) or action (``action*``) streams: mapped arms as
        ``arms/<side>/<attribute>`` in radians, the rest as ``lerobot/<feature>`` values as stored."""
        table = self.rows(episode_id)
        path = self.data_path(episode_id)
        ts = self.row_timestamps(episode_id, table)
        out: dict[str, Stream] = {}
        for key, feat in self.features.items():
            if key in lrl.DEFAULT_FEATURES or feat["dtype"] in lrl.VISUAL_DTYPES:
                continue
            if (kind == "action") != key.startswith("action"):
                continue
            if key not in table.column_names:
                raise StreamError(path, f"has no column {key!r} (info.json declares it)")
            names = self.vector_names(key)
            col = table.column(key)
            if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type) or pa.types.is_large_list(col.type):
                values = list_column(table, key, len(names), path)
            elif pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
                raw, valid = primitive_numpy(col.combine_chunks())
                values = raw.astype(np.float32).reshape(-1, 1)
                if valid is not None:
                    values[~valid] = np.nan
            else:
                continue  # strings and other non-numeric columns are not streams
            arms, rest = self._mapped.get(key) or ([], list(range(len(names))))
            for arm in arms:
                out[arm.key] = Stream(arm.key, path, ts, arm.values(values), arm.columns)
            if rest:
                generic = f"lerobot/{key}"
                out[generic] = Stream(generic, path, ts, np.ascontiguousarray(values[:, rest]),
                                      tuple(names[d] for d in rest))
        return out

    # ----------------------------------------------------------------- cameras
    def video_file(self, episode_id: str, key: str) -> tuple[Path, tuple[float, float] | None]:
        """The MP4 of a video feature for an episode, and the episode's window in it (seconds; None in
        v2.x, where the file is the episode's alone)."""
        row = self.episode_row(episode_id)
        ep = int(row["episode_index"])
        template = self.info.get("video_path")
        if self.per_episode:
            return lrl.template_path(self.root, template, self.info_path, episode_chunk=ep // self.chunks_size,
                                     video_key=key, episode_index=ep), None
        prefix = f"videos/{key}/"
        missing = [c for c in ("chunk_index", "file_index", "from_timestamp", "to_timestamp") if row.get(prefix + c) is None]
        if missing:
            raise MetadataError(self.root / lrl.EPISODES_DIR, f"episode {ep} has no {prefix}{missing[0]}")
        path = lrl.template_path(self.root, template, self.info_path, video_key=key,
                                 chunk_index=_int(row[prefix + "chunk_index"], prefix + "chunk_index", self.info_path),
                                 file_index=_int(row[prefix + "file_index"], prefix + "file_index", self.info_path))
        return path, (float(row[prefix + "from_timestamp"]), float(row[prefix + "to_timestamp"]))

    def _image_camera(self, episode_id: str, name: str, key: str) -> ImageCamera:
        table = self.rows(episode_id)
        path = self.data_path(episode_id)
        if key not in table.column_names:
            raise CameraError(path, f"has no column {key!r} (info.json declares camera {name!r})")
        col = table.column(key).combine_chunks()
        if pa.types.is_struct(col.type) and col.type.get_field_index("bytes") >= 0:
            images = col.field("bytes").to_pylist()
        elif pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
            images = col.to_pylist()
        else:
            raise CameraError(path, f"column {key!r} is {col.type}, not images (struct<bytes, path> or binary)")
        return ImageCamera(name, path, self.row_timestamps(episode_id, table), images)

    def camera(self, episode_id: str, name: str, missing_ok: bool = False) -> VideoCamera | ImageCamera | MissingVideo:
        """Camera ``name`` of an episode. Its MP4 is indexed here (the frames' times come from it); when
        the MP4 is missing this raises the :class:`CameraError` naming it, or with ``missing_ok`` returns a
        :class:`MissingVideo` (frames on the rows' times; reading one raises that error)."""
        key = lrl.IMAGE_PREFIX + name if lrl.IMAGE_PREFIX + name in self.features else name
        if key in self.image_keys:
            return self._image_camera(episode_id, name, key)
        if key not in self.video_keys:
            raise KeyError(f"{self.info_path}: no camera {name!r}")
        path, window = self.video_file(episode_id, key)
        if not path.is_file():
            message = f"missing: the video of camera {name!r}, episode {episode_id}"
            if missing_ok:
                return MissingVideo(name, path, self.row_timestamps(episode_id), message)
            raise CameraError(path, message)
        return VideoCamera(name, path, self.fps, window, lrl.TOLERANCE_S)


class FileRef(NamedTuple):
    """A file an episode refers to: ``kind`` ``data`` or ``video``, the episode id, the video feature
    (None for data) and the path its template builds."""

    kind: str
    episode: str
    key: str | None
    path: Path


class MissingVideo(DecodedCamera):
    """A video camera whose MP4 is missing, as sampling sees it: one frame per row at the row's time (the
    layout's promise), so that the grid and the joints are those of the whole dataset; reading a frame
    (pixels, bytes, size) raises the :class:`CameraError` naming the missing file."""

    format = "missing"

    def __init__(self, name: str, path: Path, timestamps: np.ndarray, message: str):
        self.name, self.path, self.timestamps, self.message = name, Path(path), timestamps, message

    def _missing(self):
        raise CameraError(self.path, self.message)

    def load_frame(self, index: int) -> np.ndarray:
        return self._missing()

    def frame_size(self, index: int) -> int:
        return self._missing()

    def read_bytes(self, index: int) -> bytes:
        return self._missing()

    def frame_path(self, index: int) -> Path:
        return self.path
