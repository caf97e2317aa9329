"""A bag (or a folder of bags) to an OpenArm 0.4.0 dataset, in one pass over each bag.

Each mapped topic's messages are read once, in receive order. Joint and command values go to scratch files
as they come (:mod:`.values`; only their times stay in memory) and camera frames straight to their
episode's folder or tar, so a bag larger than memory streams through; an arm's rows are then merged and
written a chunk at a time. Each stream keeps its own rate (no resampling):
an arm's rows are its messages' times, or, where its joints come from several topics, every time one of
them changed (:mod:`.merge`). A stream's time is its header stamp where the map says ``header`` (a message
with an unset stamp falls back to its receive time, counted), else the bag's receive time; the summary says
which per topic. A stamp not after the one before it is dropped (counted; :mod:`.faults` names it).

One bag is one episode; a folder of bags, one per bag; ``split_on`` a topic: an episode begins at each of
its messages (what comes before the first is left out, counted). The output is built in a temporary
folder and renamed into place: a failure leaves nothing.
"""

from __future__ import annotations

import os
import shutil
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from openarm_sim_dataset.core import layout, manifest
from openarm_sim_dataset.core.frame_writer import FrameWriter
from openarm_sim_dataset.core.metadata import Metadata
from openarm_sim_dataset.core.report import Summary
from openarm_sim_dataset.core.writer import CAMERA_FORMATS, new_dataset, stream_path, stream_table

from .bag import Bag, BagError, bag_paths
from .faults import Finding, TopicTimes, find_faults
from .mapping import BagMap, TopicMap, auto_map, load_map, resolve_joints
from .merge import Column, merge_arm
from .messages import ImageError, message_type, stamp_ns
from .values import TopicValues

EMBODIMENT = "arms"
#: the folder of the output's temporary root where episodes are built, then renamed to their ids
STAGING = ".segments"
#: the folder of the output's temporary root where the episodes' values wait for the merge
SCRATCH = ".values"
#: what a converted dataset's metadata says about its source
OPERATION_TYPE = "teleop"


@dataclass
class BagReport:
    """What one bag gave: its episodes' ids, the findings of :mod:`.faults`, and notes (counts of what was
    dropped and why, the time source per topic)."""

    bag: Path
    episodes: list[str]
    findings: list[Finding]
    notes: list[str]


@dataclass
class BagConversion:
    summary: Summary
    reports: list[BagReport]
    map: BagMap


class _Camera:
    """One camera's frames of one episode, written as they come."""

    def __init__(self, ep_dir: Path, name: str, camera_format: str):
        base = ep_dir / layout.CAMERAS_DIR
        path = base / name if camera_format == "dir" else base / (name + layout.TAR_SUFFIX)
        self.writer = FrameWriter(path, camera_format)
        self.last: int | None = None

    @property
    def stamps(self) -> np.ndarray:
        return self.writer.stamps


def bag_map(bag: Bag, map_file: str | os.PathLike | None) -> BagMap:
    """The map of ``bag``: the file's, checked against the bag, or :func:`auto_map`'s."""
    m = load_map(map_file, bag) if map_file is not None else auto_map(bag)
    if not m.topics:
        why = "; ".join(f"{t}: {w}" for t, w in list(m.unmapped.items())[:4]) or "no topics"
        raise BagError(bag.path, f"no topic maps to a stream ({why}); give a map (dataset-convert --inspect "
                                 "prints one to edit)")
    return m


def _segment_starts(bag: Bag, topic: str | None) -> list[int] | None:
    if topic is None:
        return None
    starts = sorted(bag.times(topic))
    if not starts:
        raise BagError(bag.path, f"split_on: topic {topic} has no message, so no episode begins")
    return starts


def _staging(tmp: Path, seg: int) -> Path:
    """Where a segment's episode is built before it has its id (an empty segment takes none)."""
    return tmp / STAGING / str(seg)


def _gather(bag: Bag, m: BagMap, tmp: Path, camera_format: str, notes: list[str]):
    """One pass over the bag: per episode segment, per topic :class:`.values.TopicValues`, camera frames
    written. Returns (segments {index: {topic: TopicValues}}, cameras {index: {name: _Camera}}, topic times for the
    fault checks, how many segments began)."""
    starts = _segment_starts(bag, m.split_on)
    topics = list(m.topics)
    rows = {t: message_type(bag.topics[t].msgtype) for t in topics}
    segments: dict[int, dict[str, TopicValues]] = {}
    cameras: dict[int, dict[str, _Camera]] = {}
    all_recv = {t: array("q") for t in topics}
    all_stamp = {t: array("q") for t in topics}
    unset: dict[str, int] = {}
    before_first = 0
    stale: dict[str, int] = {}
    bad_images: dict[str, tuple[int, str]] = {}
    for topic, recv, msg in bag.messages(topics):
        tm: TopicMap = m.topics[topic]
        row = rows[topic]
        t = recv
        if row.header:
            s = stamp_ns(msg)
            if tm.stamp == "header":
                all_stamp[topic].append(s if s else recv)
                if s:
                    t = s
                else:
                    unset[topic] = unset.get(topic, 0) + 1
        all_recv[topic].append(recv)
        seg = 0
        if starts is not None:
            seg = bisect_right(starts, recv) - 1
            if seg < 0:
                before_first += 1
                continue
        if tm.to == "camera":
            cams = cameras.setdefault(seg, {})
            cam = cams.get(tm.name)
            if cam is None:
                cam = cams[tm.name] = _Camera(_staging(tmp, seg), tm.name, camera_format)
            if cam.last is not None and t <= cam.last:
                stale[topic] = stale.get(topic, 0) + 1  # the fault check names where (stamps_backwards)
                continue
            try:
                data = row.decode(msg)
            except ImageError as e:
                n, first = bad_images.get(topic, (0, str(e)))
                bad_images[topic] = (n + 1, first)
                continue
            cam.writer.write(t, data)
            cam.last = t
            continue
        g = segments.setdefault(seg, {}).get(topic)
        if g is None:
            g = segments[seg][topic] = TopicValues(tmp / SCRATCH / str(seg) / str(topics.index(topic)))
        value = row.decode(msg)
        if row.role == "joints":
            if g.names is None:
                g.names = value.names
            elif value.names != g.names:
                raise BagError(bag.path, f"topic {topic}: the joint names change at {(recv - (bag.start_ns or 0)) / 1e9:.3f} s "
                                         f"({len(g.names)} names before, {len(value.names)} now): map such a topic by hand")
            g.add(t, value.values)
        else:
            if len(value) != len(tm.joints):
                raise BagError(bag.path, f"topic {topic}: a message of {len(value)} values at "
                                         f"{(recv - (bag.start_ns or 0)) / 1e9:.3f} s for the map's {len(tm.joints)} joints "
                                         f"({', '.join(tm.joints)})")
            g.add(t, {"qpos": value})
    if before_first:
        notes.append(f"{before_first} messages before the first {m.split_on} message: not in an episode")
    for topic, n in unset.items():
        notes.append(f"{topic}: {n} messages with an unset header stamp took their receive time")
    for topic, n in stale.items():
        notes.append(f"{topic}: {n} frames whose time was not after the one before dropped")
    for topic, (n, first) in bad_images.items():
        notes.append(f"{topic}: {n} images not stored ({first})")
    times = [TopicTimes(t, m.topics[t].to, np.frombuffer(all_recv[t], np.int64),
                        np.frombuffer(all_stamp[t], np.int64) if m.topics[t].stamp == "header" and rows[t].header else None)
             for t in topics if all_recv[t]]
    for gathered in segments.values():
        for g in gathered.values():
            g.finish()
    return segments, cameras, times, 1 if starts is None else len(starts)


def _columns(bag: Bag, m: BagMap, gathered: dict[str, TopicValues], notes: list[str]):
    """({(kind, side): {joint: Column}}, {(kind, side): a joint of the topic giving most of them}) of one
    episode; a joint that two topics give is a BagError."""
    out: dict[tuple[str, str], dict[str, Column]] = {}
    origin: dict[tuple[str, str, str], str] = {}
    for topic, g in gathered.items():
        tm = m.topics[topic]
        if g.dropped:
            notes.append(f"{topic}: {g.dropped} messages whose time was not after the one before dropped")
        if tm.arm is not None:
            picks = [(i, tm.arm, j) for i, j in enumerate(tm.joints)]
        else:
            picks = resolve_joints(g.names or (), m.ignore_joints, topic, bag.path)
        for i, side, joint in picks:
            key = (tm.to, side, joint)
            if key in origin and origin[key] != topic:
                raise BagError(bag.path, f"{tm.to} {side} {joint} comes from two topics: {origin[key]} and {topic} "
                                         "(map one of them, or list the joint under ignore_joints)")
            origin[key] = topic
            out.setdefault((tm.to, side), {})[joint] = Column(g, i)
    primary = {}
    for (kind, side), cols in out.items():
        by_topic: dict[str, list[str]] = {}
        for joint in cols:
            by_topic.setdefault(origin[(kind, side, joint)], []).append(joint)
        best = max(by_topic.values(), key=len)
        primary[(kind, side)] = best[0]
    return out, primary


def _rate(times: np.ndarray) -> float | None:
    d = np.diff(times)
    d = d[d > 0]
    return round(1e9 / float(np.median(d)), 1) if d.size else None


def _write_stream(path: Path, side: str, merged) -> None:
    """An arm's ``state.parquet``, a row group per chunk of the merge (one for up to
    :data:`.merge.CHUNK_ROWS` rows: then the bytes ``pq.write_table`` writes)."""
    writer = None
    try:
        for times, attributes in merged.chunks():
            table = stream_table(side, times, attributes)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def _write_episode(ep_dir: Path, ep_id: str, bag: Bag, m: BagMap, gathered, cams, notes: list[str],
                   freqs: dict) -> int:
    """Write one episode's streams and trim its cameras (written already) to the streams' common span;
    returns its number of stream rows."""
    rows = 0
    spans = []
    columns, primary = _columns(bag, m, gathered, notes)
    for (kind, side), cols in sorted(columns.items()):
        merged = merge_arm(cols, primary[(kind, side)])
        if merged is None:
            missing = [j for j in layout.ARM_JOINTS if j not in cols]
            notes.append(f"{kind} {side}: no topic gives {', '.join(missing)}: the arm's {kind} is not stored")
            continue
        if merged.before:
            notes.append(f"{kind} {side}: {merged.before} rows before every joint had a value left out")
        if not len(merged.times):
            continue
        path = stream_path(ep_dir, kind, EMBODIMENT, side)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_stream(path, side, merged)
        rows += len(merged.times)
        spans.append((int(merged.times[0]), int(merged.times[-1])))
        rate = _rate(merged.times)
        if rate is not None:
            freqs.setdefault(kind, {}).setdefault(EMBODIMENT, {}).setdefault(side, rate)
    for name, cam in cams.items():
        if spans:
            # the arms' common span, as the validator's camera_span wants the frames
            gone = cam.writer.trim(max(a for a, _ in spans), min(b for _, b in spans))
            if gone:
                notes.append(f"episode {ep_id} camera {name}: {gone} frames outside the arm streams' common "
                             "span left out")
        cam.writer.close()
        rate = _rate(cam.stamps)
        if rate is not None:
            freqs.setdefault("cameras", {}).setdefault(name, rate)
    return rows


def _stamp_notes(bag: Bag, m: BagMap) -> list[str]:
    header = sorted(t for t, tm in m.topics.items() if tm.stamp == "header")
    receive = sorted(t for t, tm in m.topics.items() if tm.stamp != "header")
    out = []
    if header:
        out.append(f"header stamps: {', '.join(header)}")
    if receive:
        out.append(f"receive times: {', '.join(receive)}")
    return out


def bag_to_openarm(source: str | os.PathLike, out: str | os.PathLike, map_file: str | os.PathLike | None = None,
                   split_on: str | None = None, camera_format: str = "dir", task: str = "") -> BagConversion:
    """Convert the bag(s) at ``source`` into a new 0.4.0 dataset ``out`` (see the module's docstring).
    ``split_on`` overrides the map's; ``task``: the one task's prompt. Raises BagError (one line) for a bag
    or map that cannot be used; nothing is left at ``out`` then."""
    if camera_format not in CAMERA_FORMATS:
        raise ValueError(f"camera_format must be one of {CAMERA_FORMATS}, not {camera_format!r}")
    bags = bag_paths(source)
    out = Path(out)
    summary = Summary(f"dataset-convert (bag -> openarm, cameras {camera_format})", out)
    reports: list[BagReport] = []
    episodes: list[dict] = []
    freqs: dict = {}
    camera_names: set[str] = set()
    sides: set[str] = set()
    first_map = None
    with new_dataset(out) as tmp:
        for path in bags:
            with Bag(path) as bag:
                m = bag_map(bag, map_file)
                if split_on is not None:
                    if split_on not in bag.topics:
                        raise BagError(bag.path, f"--split-on: topic {split_on} is not in the bag")
                    m.split_on = split_on
                first_map = first_map or m
                notes = _stamp_notes(bag, m)
                segments, cams, times, segments_begun = _gather(bag, m, tmp, camera_format, notes)
                ids = []
                for seg in sorted(set(segments) | set(cams)):  # an empty segment (markers back to back) takes no id
                    ep_id = str(len(episodes) + len(ids))
                    staged = _staging(tmp, seg)
                    staged.mkdir(parents=True, exist_ok=True)
                    rows = _write_episode(staged, ep_id, bag, m, segments.pop(seg, {}), cams.get(seg, {}), notes, freqs)
                    shutil.rmtree(tmp / SCRATCH / str(seg), ignore_errors=True)
                    frames = sum(c.writer.frames for c in cams.get(seg, {}).values())
                    if not rows and not frames:
                        raise BagError(bag.path, f"episode {ep_id}: no stream and no camera frame to store")
                    ep_dir = layout.episode_dir(tmp, ep_id)
                    ep_dir.parent.mkdir(parents=True, exist_ok=True)
                    staged.rename(ep_dir)
                    manifest.write(ep_dir)
                    camera_names.update(cams.get(seg, {}))
                    sides.update(p.name for k in layout.KINDS for p in (ep_dir / k / EMBODIMENT).glob("*") if p.is_dir())
                    ids.append(ep_id)
                    summary.frames += frames
                if m.split_on is not None and len(ids) < segments_begun:
                    notes.append(f"{segments_begun - len(ids)} {m.split_on} messages began an episode with no "
                                 "message: none made")
                for ep_id in ids:
                    episodes.append({"id": ep_id, "success": None, "task_index": 0})
                t0 = bag.start_ns or 0
                reports.append(BagReport(bag.path, ids, find_faults(times, t0), notes))
        for scratch in (STAGING, SCRATCH):
            if (tmp / scratch).exists():
                (tmp / scratch).rmdir()
        summary.episodes = len(episodes)
        meta = {
            "version": "0.4.0",
            "operation_type": OPERATION_TYPE,
            "operator": "dataset-convert (ROS bag)",
            "location": "unknown",
            "tasks": [{"prompt": task, "description": "converted from a ROS bag"}],
            "equipment": {"id": "OpenArm", "version": "unknown",
                          "embodiments": {EMBODIMENT: {"id": layout.EMBODIMENT_OPENARM, "version": "unknown"}} if sides else {},
                          "perceptions": {"cameras": {c: {} for c in sorted(camera_names)}}},
            "frequencies": freqs,
            "episodes": [{k: v for k, v in e.items() if v is not None} for e in episodes],
        }
        Metadata(meta, tmp / layout.METADATA_FILE).write(tmp)
    summary.notes.extend(n for r in reports for n in r.notes)
    return BagConversion(summary.finish(), reports, first_map)
