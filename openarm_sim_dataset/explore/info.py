"""What a dataset holds, from its metadata and file listings: the figures of ``dataset-info`` and the card.

Fast by construction: it reads ``metadata.yaml``, the timestamp column of each parquet stream (not
the values), the folder or tar listing of each camera and one JPEG header per camera and episode; it
never decodes an image, and imports neither pandas nor MuJoCo nor matplotlib.

:func:`dataset_info` returns a plain JSON-serialisable dict (``dataset-info --json`` prints it):

``path``, ``version``, ``simulated``, ``license`` (metadata's ``license:`` or None)
``episodes``   ``count``, ``successes``, ``success_rate``, ``wilson95`` [lo, hi], ``duration_s``
               {``total``, ``min``, ``median``, ``max``}, ``valid`` {``true``, ``false``, ``unset``,
               ``validated_at`` [earliest, latest] or None}, ``per_episode`` (list below)
``per_episode`` items: ``id``, ``task_index``, ``success``, ``valid``, ``validated_at``, ``duration_s``,
               ``start_ns``, ``end_ns`` (earliest/latest obs or action stamp), ``outcome`` when recorded
``tasks``      ``index``, ``prompt``, ``description``, ``episodes``, ``successes``, ``success_rate``, ``wilson95``
``streams``    ``kind``/``prefix`` (``obs``, ``arms/right``), ``attributes`` (qpos, qvel, ...), ``columns``
               (the 8 names of a row), ``rows`` (all episodes), ``declared_hz``, ``measured_hz``
               (rows per second of the median episode, from stamps)
``cameras``    ``name``, ``format`` (dir|tar), ``size`` [W, H] (None if frames differ: see ``sizes``),
               ``frames``, ``frames_per_episode`` {min, max}, ``declared_hz``, ``measured_hz``
``disk_bytes`` ``parquet``, ``images``, ``sidecar``, ``metadata``, ``other``, ``total`` (each inode once)
``lerobot``    (LeRobot datasets only) ``codebase_version``, ``robot_type``, ``fps``, ``data_files``,
               ``video_files``, ``unmapped`` (features read as generic ``lerobot/<feature>`` streams),
               ``total_frames`` (the episodes' lengths summed), ``features`` {name: {``dtype``, ``shape``}},
               ``cameras`` (the visual features' camera names), ``modality`` (GR00T's
               ``meta/modality.json`` present)
``missing``    files the dataset refers to that do not exist, by kind (LeRobot: :class:`~.lerobot.MissingFiles`
               ``to_dict``: ``kind``, ``count``, ``paths``, ``episodes``, ``template_key``, ``template``,
               ``found`` [{``folder``, ``files``}], ``matched``, ``scan_truncated``); ``[]`` when none
``provenance`` (simulated datasets) ``simulator``, ``mujoco_version``, ``model_sha256`` (12-hex prefix),
               ``seed``, ``sigma_m``, ``retry``, ``randomization`` (if recorded), ``timestep_s``,
               ``state_hz``, ``camera_hz``, ``gl_renderer``, ``generator``
``edited_from`` the edits (``dataset-edit``) the dataset comes from, or None: :func:`edited_from`

A LeRobot dataset (``Dataset.lerobot``; read, never written into) gives the same figures from the
reader: its streams (``Dataset.streams``: rows, stamps on the fps grid, the OpenArm arms mapped and the
rest as ``lerobot/<feature>``) and video cameras (frame count and stamps from the MP4's packet index,
size from its stream header: nothing decoded). ``disk_bytes`` then holds ``parquet`` (``data/``),
``video`` (``videos/``), ``metadata`` (``meta/``) and ``other``; ``per_episode`` items gain ``bytes``
(``{parquet, video}`` of the episode's own files in v2.x; None in v3.0, whose files hold many episodes).
A LeRobot dataset with missing files is described all the same: what its metadata holds, the streams of
the episodes whose data files exist, the cameras whose MP4s exist (``missing_episodes`` counts the others),
and the ``missing`` section (``dataset-info`` then exits 1).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from openarm_sim_dataset.core import episode_summary, errors, layout, lerobot_layout as lrl
from openarm_sim_dataset.core.atomic import TMP_PREFIX
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.episode_summary import camera_figures, jpeg_size, stream_figures  # noqa: F401 (jpeg_size: public here too)
from openarm_sim_dataset.core.lerobot import MissingVideo
from openarm_sim_dataset.core.report import human_bytes
from openarm_sim_dataset.core.stats import wilson_interval
from openarm_sim_dataset.core.video_camera import DecodedCamera

#: Length of the model hash prefix shown (hex digits).
HASH_PREFIX = 12


#: From this many episodes on, the per-episode figures are gathered by worker processes.
PARALLEL_MIN = 400


def _episode_figures(ds: Dataset, ep: dict) -> dict:
    """One episode's figures from its files: its entry, its streams' and cameras' spans, and the bytes
    of its folder (files with one link summed; hard-linked ones returned by inode, counted once over
    the dataset)."""
    if ds.lerobot is not None:
        return _lerobot_episode_figures(ds, ep)
    first, last, streams, cameras = [], [], [], []
    for kind in layout.KINDS:
        for f in ds.stream_files(ep, kind):
            s = stream_figures(f.path)
            streams.append(_stream_row(kind, f.prefix, f.attribute, f.columns, s))
            if s["rows"]:
                first.append(s["min_ns"])
                last.append(s["max_ns"])
    for name in ds.camera_names:
        cameras.append(_camera_row(name, camera_figures(ds.load_camera(name, ep))))
    disk, shared = _tree_bytes(ds.root, ds.episode_path(ep))
    return {"entry": _entry(ds, ep, first, last), "streams": streams, "cameras": cameras, "disk": disk,
            "shared": shared}


def _lerobot_episode_figures(ds: Dataset, ep: dict) -> dict:
    """A LeRobot episode's figures from the reader: every stream of :meth:`Dataset.streams` (its key split
    as the reader's writers split it: ``arms/right`` + ``qpos``, ``lerobot`` + ``observation.state``) and
    every camera's packet index. Its bytes are not counted here (:func:`.lerobot_layout.disk_bytes` walks
    the folder)."""
    first, last, streams, cameras = [], [], [], []
    ep_id = ds.episode_id(ep)
    has_data = ds.lerobot.data_path(ep_id).is_file()  # a missing data file is in the ``missing`` section
    for kind in layout.KINDS if has_data else ():
        # the attributes of a component are rows of one table: counted once, as a state.parquet's rows are
        groups: dict[tuple[str, tuple[str, ...]], list] = {}
        for key, s in ds.streams(ep, kind).items():
            prefix, attribute = key.rsplit("/", 1)
            groups.setdefault((prefix, s.columns), [[], s])[0].append(attribute)
        for (prefix, columns), (attributes, s) in groups.items():
            n = len(s.timestamps)
            span = (n, int(s.timestamps[-1]) - int(s.timestamps[0])) if n else None
            streams.append((kind, prefix, attributes, list(columns), n, span))
            if n:
                first.append(int(s.timestamps.min()))
                last.append(int(s.timestamps.max()))
    for name, cam in (ds.load_cameras(ep, missing_ok=True) if has_data else {}).items():
        # a camera whose MP4 is missing is counted apart (the ``missing`` section names the files)
        cameras.append((name, "missing", 0, None, None) if isinstance(cam, MissingVideo) else
                       _camera_row(name, _video_figures(cam)))
    if not has_data:  # the span its length gives (LeRobot's frame k is at k / fps): the file says no more
        first, last = [0], [int(round((int(ep.get("length") or 1) - 1) * 1e9 / ds.lerobot.fps))]
    entry = _entry(ds, ep, first, last)
    entry["bytes"] = ds.lerobot.episode_bytes(ep_id)
    return {"entry": entry, "streams": streams, "cameras": cameras, "disk": {}, "shared": []}


def _video_figures(cam) -> dict:
    """:func:`camera_figures` of a camera decoded from another encoding: a video camera's size from its
    MP4's stream header (no frame decoded), an image camera's from its first image (no JPEG encoded)."""
    if not isinstance(cam, DecodedCamera):
        return camera_figures(cam)
    n = cam.num_frames
    if not n:
        size = None
    elif cam.format == "video":
        size = [int(cam.index.width), int(cam.index.height)]
    else:
        h, w = cam.load_frame(0).shape[:2]
        size = [int(w), int(h)]
    return {"format": cam.format, "frames": int(n), "size": size,
            "first_ns": int(cam.timestamps[0]) if n else None, "last_ns": int(cam.timestamps[-1]) if n else None}


def _stream_row(kind: str, prefix: str, attribute: str | None, columns, s: dict) -> tuple:
    attrs = [attribute] if attribute else list(s["columns"])
    span = (s["rows"], s["last_ns"] - s["first_ns"]) if s["rows"] else None
    return (kind, prefix, attrs, list(columns), s["rows"], span)


def _camera_row(name: str, c: dict) -> tuple:
    span = (c["frames"], c["last_ns"] - c["first_ns"]) if c["frames"] else None
    return (name, c["format"], c["frames"], tuple(c["size"]) if c["frames"] else None, span)


def _entry(ds: Dataset, ep: dict, first: list[int], last: list[int]) -> dict:
    start, end = (min(first), max(last)) if first else (None, None)
    entry = {
        "id": layout.check_name(ep["id"], "episode id"),
        "task_index": ep.get("task_index"),
        "success": ep.get("success"),
        "valid": ep.get("valid"),
        "validated_at": None if ep.get("validated_at") is None else str(ep.get("validated_at")),
        "duration_s": (end - start) / 1e9 if first else 0.0,
        "start_ns": start,
        "end_ns": end,
    }
    if "outcome" in ep:
        entry["outcome"] = ep["outcome"]
    return entry


class _Plan:
    """Where a 0.4.0 episode's streams and cameras are, relative to its folder (from metadata.yaml,
    once per dataset): what :func:`_summary_figures` looks up in a summary."""

    def __init__(self, ds: Dataset):
        self.streams = []  # (kind, relative path, prefix, attribute, columns), in stream_files order
        base = layout.episode_dir(Path("."), "0")
        for kind in layout.KINDS:
            for emb in ds.meta.embodiments:
                for comp in emb.components or (None,):
                    folder = layout.component_dir(Path("."), "0", kind, emb.name, comp, ds.version).relative_to(base)
                    prefix = f"{emb.name}/{comp}" if comp else emb.name
                    self.streams.append((kind, (folder / layout.STATE_FILE).as_posix(), prefix, None, emb.joints))
                    for attr in emb.legacy_attributes:
                        self.streams.append((kind, (folder / f"{attr}.parquet").as_posix(), prefix, attr, emb.joints))
        self.cameras = [(name, layout.check_name(ds.meta.stored_camera_name(name), "camera name"))
                        for name in ds.camera_names]
        self.episodes = str(ds.root / layout.EPISODES_DIR)


def _summary_figures(ds: Dataset, ep: dict, plan: _Plan) -> dict | None:
    """One episode's figures from its summary (:mod:`.episode_summary`), as :func:`_episode_figures`
    makes them from the files; None when it has no summary this version can use (then the files are read).
    Its bytes are the summary's and the manifest's: an episode whose summary file has several links
    (hard-linked copies of one episode) is counted once per summary inode."""
    ep_dir = os.path.join(plan.episodes, layout.check_name(ep["id"], "episode id"))
    got = episode_summary.read(ep_dir)
    if got is None:
        return None
    doc, st = got
    try:
        first, last, streams, cameras = [], [], [], []
        for kind, rel, prefix, attribute, columns in plan.streams:
            s = doc["streams"].get(rel)
            if s is not None:
                streams.append(_stream_row(kind, prefix, attribute, columns, s))
                if s["rows"]:
                    first.append(int(s["min_ns"]))
                    last.append(int(s["max_ns"]))
        for name, stored in plan.cameras:
            c = doc["cameras"].get(stored)
            if c is None:  # not under cameras/ when it was written: the files say how that reads now
                return None
            cameras.append(_camera_row(name, c))
        counted = {k: int(doc["bytes"][k]) for k in episode_summary.BYTE_KINDS}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    counted["metadata"] += st.st_size
    disk, shared = dict.fromkeys(episode_summary.BYTE_KINDS, 0), []
    if st.st_nlink > 1:
        shared += [(("summary", st.st_dev, st.st_ino, k), k, v) for k, v in counted.items()]
    else:
        disk = counted
    try:
        m = os.lstat(os.path.join(ep_dir, layout.MANIFEST_FILE))
    except OSError:
        m = None
    if m is not None:
        if m.st_nlink > 1:
            shared.append(((m.st_dev, m.st_ino), "metadata", m.st_size))
        else:
            disk["metadata"] += m.st_size
    return {"entry": _entry(ds, ep, first, last), "streams": streams, "cameras": cameras, "disk": disk,
            "shared": shared}


def _chunk_figures(root: str, camera_names: list[str], ids: list[str]) -> list:
    """Worker: the figures of episodes ``ids`` of ``root`` (an error comes back as a tuple, as the
    package's errors do not all survive pickling)."""
    try:
        ds = Dataset(root, camera_names=camera_names)
        return [_episode_figures(ds, ds.episode(i)) for i in ids]
    except errors.DatasetError as e:
        return [("error", type(e).__name__, str(e.path), e.message)]


def _all_figures(ds: Dataset, workers: int) -> list[dict]:
    """Every episode's figures, in order: from its summary where it has one, else from its files (by
    ``workers`` processes from :data:`PARALLEL_MIN` such episodes on)."""
    figures: list[dict | None] = [None] * ds.num_episodes
    if ds.version == layout.FORMAT_VERSION:
        plan = _Plan(ds)
        figures = [_summary_figures(ds, ep, plan) for ep in ds.episodes]
    todo = [i for i, f in enumerate(figures) if f is None]
    # a LeRobot dataset's episodes share data files that one process reads once (cached): no workers
    if workers <= 1 or len(todo) < PARALLEL_MIN or ds.lerobot is not None:
        for i in todo:
            figures[i] = _episode_figures(ds, ds.episodes[i])
        return figures
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ids = [ds.episode_id(ds.episodes[i]) for i in todo]
    size = max(50, len(ids) // (workers * 8))
    chunks = [ids[i:i + size] for i in range(0, len(ids), size)]
    done: list[dict] = []
    # spawned, never forked: a caller's GL context or threads are not inherited
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        for part in pool.map(_chunk_figures, [str(ds.root)] * len(chunks), [ds.camera_names] * len(chunks), chunks):
            if part and isinstance(part[0], tuple):
                _, name, path, message = part[0]
                raise getattr(errors, name, errors.DatasetError)(Path(path), message)
            done += part
    for i, f in zip(todo, done):
        figures[i] = f
    return figures


def dataset_info(root: str | os.PathLike | Dataset, workers: int | None = None) -> dict[str, Any]:
    """Figures of a dataset (see the module doc for the keys). Raises DatasetError naming the file
    for an unusable dataset or an unreadable stream, camera listing or JPEG header.

    ``workers``: processes for the per-episode figures (default: every core from
    :data:`PARALLEL_MIN` episodes on, given a path; one for a :class:`Dataset`, whose metadata may not
    be the stored one)."""
    ds = root if isinstance(root, Dataset) else Dataset(root)
    if workers is None:
        workers = 1 if isinstance(root, Dataset) else (os.cpu_count() or 1)
    meta = ds.meta
    per_episode, stream_acc, camera_acc = [], {}, {}
    disk = {"parquet": 0, "images": 0, "sidecar": 0, "metadata": 0, "other": 0}
    seen: set[tuple] = set()
    for fig in _all_figures(ds, workers):
        for kind, prefix, attrs, columns, rows, span in fig["streams"]:
            # by columns too: a LeRobot dataset's generic features share the prefix "lerobot"
            acc = stream_acc.setdefault((kind, prefix, tuple(columns)),
                                        {"attributes": [], "columns": columns, "rows": 0, "spans": []})
            acc["attributes"] += [a for a in attrs if a not in acc["attributes"]]
            acc["rows"] += rows
            if span is not None:
                acc["spans"].append(tuple(span))
        for name, fmt, count, size, span in fig["cameras"]:
            acc = camera_acc.setdefault(name, {"formats": set(), "sizes": set(), "counts": [], "spans": [], "missing": 0})
            if fmt == "missing":
                acc["missing"] += 1
                continue
            acc["formats"].add(fmt)
            acc["counts"].append(count)
            if size is not None:
                acc["sizes"].add(tuple(size))
                acc["spans"].append(tuple(span))
        for k, v in fig["disk"].items():
            disk[k] += v
        for key, kind, nbytes in fig["shared"]:
            if key not in seen:
                seen.add(key)
                disk[kind] += nbytes
        per_episode.append(fig["entry"])
    lerobot, missing = None, []
    if ds.lerobot is not None:
        disk, files = lrl.disk_bytes(ds.root)
        lr = ds.lerobot
        lerobot = {"codebase_version": lr.codebase_version, "robot_type": lr.info.get("robot_type"), "fps": lr.fps,
                   **files, "unmapped": sorted({a for key, acc in stream_acc.items() if key[1] == "lerobot"
                                               for a in acc["attributes"]}),
                   "total_frames": sum(int(e["length"]) for e in lr.episodes),
                   "features": {k: {"dtype": f["dtype"], "shape": list(f["shape"])} for k, f in lr.features.items()},
                   "cameras": lr.camera_names(), "modality": (ds.root / lrl.MODALITY_JSON).is_file()}
        refs, _ = lr.file_refs()
        missing = [g.to_dict() for g in lr.locate_missing([r for r in refs if not os.path.lexists(r.path)])]
    else:
        _other_bytes(ds, disk, seen)
    disk["total"] = sum(disk.values())

    durations = np.array([e["duration_s"] for e in per_episode], dtype=np.float64)
    stamps = sorted(e["validated_at"] for e in per_episode if e["validated_at"])
    episodes = {
        **_rate(per_episode),
        "duration_s": {
            "total": float(durations.sum()),
            "min": float(durations.min()) if len(durations) else 0.0,
            "median": float(np.median(durations)) if len(durations) else 0.0,
            "max": float(durations.max()) if len(durations) else 0.0,
        },
        "valid": {
            "true": sum(e["valid"] is True for e in per_episode),
            "false": sum(e["valid"] is False for e in per_episode),
            "unset": sum(e["valid"] is None for e in per_episode),
            "validated_at": [stamps[0], stamps[-1]] if stamps else None,
        },
        "per_episode": per_episode,
    }
    tasks = []
    for i, task in enumerate(meta.tasks):
        mine = [e for e in per_episode if e["task_index"] == i or (e["task_index"] is None and len(meta.tasks) == 1)]
        tasks.append({"index": i, "prompt": task.get("prompt"), "description": task.get("description"), **_rate(mine)})
    streams = []
    for (kind, prefix, _), acc in stream_acc.items():
        emb, _, comp = prefix.partition("/")
        declared = meta.frequency(kind, emb, comp or None)
        if declared is None and ds.lerobot is not None:
            declared = float(ds.lerobot.fps)  # every LeRobot feature is one value per frame
        streams.append({
            "kind": kind, "prefix": prefix, "attributes": acc["attributes"], "columns": acc["columns"],
            "rows": acc["rows"], "declared_hz": declared,
            "measured_hz": _measured_hz(acc["spans"]),
        })
    cameras = []
    for name, acc in camera_acc.items():
        sizes = sorted(acc["sizes"])
        counts = acc["counts"]
        cameras.append({
            "name": name, "format": "/".join(sorted(acc["formats"])) or None,
            "size": list(sizes[0]) if len(sizes) == 1 else None, "sizes": [list(s) for s in sizes],
            "frames": int(sum(counts)),
            "frames_per_episode": {"min": min(counts), "max": max(counts)} if counts else {"min": None, "max": None},
            "missing_episodes": acc["missing"],
            "declared_hz": meta.frequency("cameras", meta.stored_camera_name(name)),
            "measured_hz": _measured_hz(acc["spans"]),
        })
    out = {
        "path": str(ds.root),
        "version": ds.version,
        "simulated": meta.simulation is not None,
        "license": meta.data.get("license") if isinstance(meta.data.get("license"), str) else None,
        "episodes": episodes,
        "tasks": tasks,
        "streams": streams,
        "cameras": cameras,
        "disk_bytes": disk,
        "provenance": provenance(meta.simulation) if meta.simulation is not None else None,
        "edited_from": edited_from(meta.data),
        "missing": missing,
    }
    if lerobot is not None:
        out["lerobot"] = lerobot
    return out


def _other_bytes(ds: Dataset, disk: dict[str, int], seen: set[tuple]) -> None:
    """Add to ``disk`` the bytes of an OpenArm dataset's files outside its listed episodes."""
    listed = set(ds.episode_ids)
    rest, shared = _tree_bytes(ds.root, ds.root, skip=lambda rel: len(rel) == 2 and rel[0] == layout.EPISODES_DIR
                               and rel[1] in listed)
    for k, v in rest.items():
        disk[k] += v
    for key, kind, nbytes in shared:
        if key not in seen:
            seen.add(key)
            disk[kind] += nbytes


def edited_from(doc: dict) -> list[dict] | None:
    """The edits a dataset comes from (``dataset-edit``'s ``edited_from``; an edit of an edit lists the
    earlier one after it; a merge's inputs' under ``merged_from``): each ``{path, metadata_sha256
    (12-hex prefix), operations (their names), episodes (how many kept), split (its name or None),
    input (the merge input's position, or None)}``; None when the dataset is not an edit."""
    out = []

    def add(rec, where):
        while isinstance(rec, dict):
            ops = list(dict.fromkeys(next(iter(op)) for op in rec.get("operations") or [] if isinstance(op, dict) and op))
            split = rec.get("split")
            out.append({"path": rec.get("path"), "metadata_sha256": str(rec.get("metadata_sha256") or "")[:HASH_PREFIX],
                        "operations": ops, "episodes": len(rec.get("episodes") or {}),
                        "split": split.get("name") if isinstance(split, dict) else None, "input": where})
            rec = rec.get("previous")

    add(doc.get("edited_from"), None)
    for i, m in enumerate(doc.get("merged_from") or []):
        if isinstance(m, dict):
            add(m.get("edited_from"), i)
    return out or None


def _rate(entries: list[dict]) -> dict:
    n = len(entries)
    k = sum(e["success"] is True for e in entries)
    lo, hi = wilson_interval(k, n)
    return {"count": n, "successes": k, "success_rate": k / n if n else None, "wilson95": [lo, hi]}


def _measured_hz(spans: list[tuple[int, int]]) -> float | None:
    """Rate of the median episode: (samples - 1) / span, from integer-ns stamps."""
    rates = [(n - 1) * 1e9 / span for n, span in spans if n > 1 and span > 0]
    return float(np.median(rates)) if rates else None


def disk_bytes(root: Path) -> dict[str, int]:
    """Bytes on disk by kind: parquet streams, images (JPEG files and camera tars), simulation
    sidecars (``episodes/<id>/sim/``), metadata (``metadata.yaml``, ``episodes.jsonl``, the episodes'
    integrity manifests) and other
    files (the card, the generator's lock, leftovers). Each inode is counted once (hard links)."""
    out, shared = _tree_bytes(Path(root), Path(root))
    seen: set[tuple] = set()
    for key, kind, nbytes in shared:
        if key not in seen:
            seen.add(key)
            out[kind] += nbytes
    out["total"] = sum(out.values())
    return out


def _tree_bytes(root: Path, top: Path, skip=None) -> tuple[dict[str, int], list[tuple[tuple, str, int]]]:
    """Bytes by kind of the files under ``top`` (inside dataset ``root``) with a single link, and the
    ((dev, inode), kind, size) of those with several (to count once); folders whose parts relative to
    ``root`` satisfy ``skip`` are not entered."""
    out = {"parquet": 0, "images": 0, "sidecar": 0, "metadata": 0, "other": 0}
    shared = []
    root_s = str(root)
    for dirpath, dirnames, files in os.walk(top):
        rel = tuple(Path(os.path.relpath(dirpath, root_s)).parts) if dirpath != root_s else ()
        if skip is not None:
            dirnames[:] = [d for d in dirnames if not skip(rel + (d,))]
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            kind = _kind(rel, name)
            if st.st_nlink > 1:
                shared.append(((st.st_dev, st.st_ino), kind, st.st_size))
            else:
                out[kind] += st.st_size
    return out, shared


def _kind(rel: tuple[str, ...], name: str) -> str:
    if any(p.startswith(TMP_PREFIX) for p in rel) or name.startswith(TMP_PREFIX):
        return "other"
    if not rel:
        return "metadata" if name in (layout.METADATA_FILE, layout.EPISODES_JSONL) else "other"
    if rel[0] != layout.EPISODES_DIR or len(rel) < 2:
        return "other"
    return episode_summary.file_kind(rel[2:], name)


def provenance(sim: dict) -> dict[str, Any]:
    """The provenance figures of a ``simulation:`` block (missing keys are None)."""
    sha = sim.get("model_sha256")
    gen = sim.get("generator") if isinstance(sim.get("generator"), dict) else {}
    return {
        "simulator": sim.get("simulator"),
        "mujoco_version": sim.get("mujoco_version"),
        "model_sha256": sha[:HASH_PREFIX] if isinstance(sha, str) else None,
        "seed": sim.get("seed"),
        "sigma_m": sim.get("sigma_m"),
        "retry": sim.get("retry"),
        "randomization": sim.get("randomization"),
        "timestep_s": sim.get("timestep_s"),
        "state_hz": sim.get("state_hz"),
        "camera_hz": sim.get("camera_hz"),
        "gl_renderer": sim.get("gl_renderer"),
        "generator": {k: gen.get(k) for k in ("name", "version", "git_commit") if k in gen},
    }


# ------------------------------------------------------------------------------------ text
def _hz(v: float | None) -> str:
    return "-" if v is None else f"{v:g} Hz"


def _pct(rate: dict) -> str:
    if not rate["count"]:
        return "no episodes"
    lo, hi = rate["wilson95"]
    return (f"{rate['successes']}/{rate['count']} = {rate['success_rate']:.1%} "
            f"(95% Wilson interval {lo:.1%}-{hi:.1%})")


def format_info(info: dict[str, Any], per_episode: bool = False) -> str:
    """The human-readable report of :func:`dataset_info`."""
    e = info["episodes"]
    d = e["duration_s"]
    lr = info.get("lerobot")
    if lr:
        lines = [f"{info['path']}: LeRobot dataset {lr['codebase_version']}, robot_type {lr['robot_type']}, "
                 f"{lr['fps']:g} fps; {lr['data_files']} data file(s), {lr['video_files']} video file(s)"]
        for group in info.get("missing") or []:
            lines.append(f"MISSING    {lrl.missing_line(group)}")
        feats = [f"{k} {f['dtype']}{f['shape']}" for k, f in lr["features"].items()
                 if k not in lrl.DEFAULT_FEATURES]
        lines.append(f"features   {', '.join(feats)}; {lr['total_frames']} frames in the episodes' lengths"
                     + ("; meta/modality.json (GR00T)" if lr.get("modality") else ""))
        if lr["unmapped"]:
            lines.append(f"unmapped   no OpenArm arm found in {', '.join(lr['unmapped'])}: read as lerobot/<feature>")
    else:
        lines = [f"{info['path']}: OpenArm dataset, layout {info['version']}"
                 + (" (simulated)" if info["simulated"] else " (recorded)")]
    lines.append(f"episodes   {e['count']}, {d['total']:.1f} s in total; per episode min {d['min']:.2f} s, "
                 f"median {d['median']:.2f} s, max {d['max']:.2f} s")
    lines.append(f"success    {_pct(e)}")
    if len(info["tasks"]) > 1:
        for t in info["tasks"]:
            lines.append(f"  task {t['index']}: {_pct(t)}  {t['prompt']!r}")
    elif info["tasks"]:
        lines.append(f"task       {info['tasks'][0]['prompt']!r}")
    v = e["valid"]
    when = v["validated_at"]
    written = "" if not when else (f", written {when[0]}" if when[0] == when[1] else f", written {when[0]} .. {when[1]}")
    lines.append(f"valid      {v['true']} valid, {v['false']} invalid, {v['unset']} not validated{written}")
    lines.append("streams")
    for s in info["streams"]:
        lines.append(f"  {s['kind']:<6} {s['prefix']:<12} {'/'.join(s['attributes']):<22} "
                     f"{s['rows']:>9} rows x {len(s['columns'])}  declared {_hz(s['declared_hz'])}, "
                     f"measured {_hz(None if s['measured_hz'] is None else round(s['measured_hz'], 2))}")
    lines.append("cameras" if info["cameras"] else "cameras    none")
    for c in info["cameras"]:
        if not c["frames"] and c.get("missing_episodes"):
            lines.append(f"  {c['name']:<12} video missing in {c['missing_episodes']} episode(s)")
            continue
        size = f"{c['size'][0]}x{c['size'][1]}" if c["size"] else "sizes " + ", ".join(f"{w}x{h}" for w, h in c["sizes"])
        fpe = c["frames_per_episode"]
        lines.append(f"  {c['name']:<12} {size:<9} {c['format']:<4} {c['frames']:>7} frames "
                     f"({fpe['min']}-{fpe['max']} per episode)  declared {_hz(c['declared_hz'])}, "
                     f"measured {_hz(None if c['measured_hz'] is None else round(c['measured_hz'], 2))}")
    b = info["disk_bytes"]
    kinds = ("parquet", "video", "metadata", "other") if "video" in b else ("parquet", "images", "sidecar", "metadata", "other")
    lines.append("disk       " + ", ".join(f"{k} {human_bytes(b[k])}" for k in kinds)
                 + f"; total {human_bytes(b['total'])}")
    p = info["provenance"]
    if p:
        rnd = f", randomization {p['randomization']}" if p.get("randomization") is not None else ""
        gen = p.get("generator") or {}
        lines.append(f"provenance {p['simulator']} {p['mujoco_version']}, model {p['model_sha256']}, seed {p['seed']}, "
                     f"sigma {p['sigma_m']} m, retry {p['retry']}{rnd}; timestep {p['timestep_s']} s; "
                     f"{gen.get('name', '?')} {gen.get('version', '?')}; GL {p['gl_renderer']}")
    for ed in info.get("edited_from") or []:
        where = f"merge input {ed['input']}: " if ed["input"] is not None else ""
        split = f", split {ed['split']}" if ed["split"] else ""
        lines.append(f"edited     {where}from {ed['path']} (metadata {ed['metadata_sha256']}), {ed['episodes']} episode(s) "
                     f"kept{split}; {', '.join(o for o in ed['operations'] if o != 'ids') or 'copied'}")
    if per_episode:
        lines.append("per episode")
        for ep in e["per_episode"]:
            lines.append(f"  {ep['id']:>6}  {ep['duration_s']:7.2f} s  success {ep['success']!s:<5}  valid {ep['valid']!s:<5}"
                         + (f"  {ep['outcome']}" if "outcome" in ep else ""))
    return "\n".join(lines)
