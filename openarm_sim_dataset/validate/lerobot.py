"""Checks of what the LeRobot layout adds (v2.0, v2.1, v3.0): info.json against the data, files whole, indices
contiguous, timestamps on ``1/fps``, each episode's video against its frame table, v3.0 video windows
after a merge, stats.json against the data, and units against names (constant dimensions, of every vector
whatever its name, are the signal checks' ``constant_dimensions``).

Rows apply to LeRobot datasets only (``ds.lerobot``); every check that needs no OpenArm layout (the
streams, cameras and physics families) runs on them too. Tolerances are LeRobot's own
(``tolerance_s`` = 1e-4 s) unless a threshold says otherwise.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from openarm_sim_dataset.core import lerobot_layout as lrl, sampler
from openarm_sim_dataset.core.errors import LFS_POINTER, DatasetError, is_lfs_pointer
from openarm_sim_dataset.core.lerobot import LeRobotSource

# joints in degrees that never leave +-pi while moving more than this are radians: the robot profiles' rule
from openarm_sim_dataset.core.robots.detect import RADIANS_UNDER_DEGREES_SPAN
from openarm_sim_dataset.core.streams import list_column, primitive_numpy
from openarm_sim_dataset.core.video import video_index

from .check import CheckFn, Context, Outcome, finding, nothing_to_judge

#: stats.json may differ from the recomputed figures by this much, relative to the feature's scale, at
#: the least (JSON's decimal rounding, float64 against float32 figures)
STATS_RTOL = 1e-4
#: units in the last place (of the stored float type, at the dimension's magnitude) that LeRobot's own
#: per-episode moments may be off by. LeRobot (0.4.x `RunningQuantileStats`) computes each episode's mean
#: and mean of squares in float32 with numpy's pairwise sums, its variance as `E[x^2] - E[x]^2` (which
#: cancels: a constant float32 dimension at 30 gets a std of about 0.016, at 2 about 0.0012), then pools
#: the episodes (`aggregate_stats`: count-weighted means, variances plus squared mean offsets). Bound
#: per episode: mean +-U ulps of max|x|; variance +-8U ulps of max x^2 (E[x^2] and E[x]^2 each rounded in
#: their float32 sums: on a public bimanual recording the std of stats.json were off by 1.7 to 43.8 ulps
#: of E[x^2], beyond the 3U a single rounding of each gives); pooled, the offsets' squares add 4U: +-12U,
#: each weighted by the episode's rows. A 25 % stale std is still found where the std is more than about
#: 1/250 of the magnitude; below that, LeRobot's own float32 figure holds no more.
LEROBOT_ULPS = 4


def _source(ctx: Context) -> LeRobotSource:
    return ctx.ds.lerobot


def _rel(ctx: Context, path: Path) -> str:
    try:
        return str(Path(path).relative_to(ctx.ds.root))
    except ValueError:
        return str(path)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:+.1f} ms"


def check_lerobot_info(ctx: Context) -> Outcome:
    """`meta/info.json` describes the data: every vector feature names as many dimensions as its shape
    has, and the totals (`total_episodes`, `total_frames`, `total_tasks`) equal the episodes, frames
    and tasks the episode and task tables hold (each episode's rows against its `length` are
    `lerobot_indices`' concern).

    LeRobot's reader trusts these totals (its sampler draws indices from `total_frames`); a merge or an
    edit that did not update them makes it read past the data or miss episodes."""
    src = _source(ctx)
    problems = []
    for key, feat in src.features.items():
        names = lrl.feature_names(feat.get("names"))
        shape = feat["shape"]
        if feat["dtype"] not in lrl.VISUAL_DTYPES and isinstance(names, list) and len(shape) == 1 and len(names) != shape[0]:
            problems.append(f"features.{key} names {len(names)} dimensions for shape {shape}")
    counted = {"total_episodes": len(src.episodes), "total_frames": sum(int(e["length"]) for e in src.episodes),
               "total_tasks": len(src.tasks)}
    for key, n in counted.items():
        if key in src.info and src.info[key] != n:
            problems.append(f"{key} is {src.info[key]}, the episode and task tables hold {n}")
    judged = {"features": len(src.features), "episodes": len(src.episodes)}
    if problems:
        return Outcome(False, f"{lrl.INFO_FILE}: {'; '.join(problems)}", [], judged=judged)
    return Outcome(True, f"{lrl.INFO_FILE} ({src.codebase_version}): {counted['total_episodes']} episodes, "
                         f"{counted['total_frames']} frames, {counted['total_tasks']} tasks, as the episode and task tables hold",
                   judged=judged)


#: what :func:`check_lerobot_files` caches for a file that does not exist (apart from files unusable)
MISSING = "missing"


def _parquet_problem(path: Path) -> str | None:
    try:
        pq.ParquetFile(path).metadata  # noqa: B018 - reading the footer is the check
    except (OSError, pa.ArrowException) as e:
        if is_lfs_pointer(path):
            return LFS_POINTER
        return f"not a whole parquet file ({str(e).splitlines()[0][:120]})"
    return None


def check_lerobot_files(ctx: Context) -> Outcome:
    """Every data parquet file and every MP4 an episode refers to exists and is whole: the parquet footer
    reads, the MP4 opens and demuxes to its end.

    A writer killed before LeRobot's `finalize()` leaves a parquet file without its footer ("Parquet
    magic bytes not found"); a copy cut short leaves an MP4 without its index. Each unusable file is
    named once, with what is wrong. Missing files are counted by kind, the first few named, and where
    files of those names (or of the template's name pattern) sit in the folder (one bounded scan), with
    the `info.json` template they should match: videos moved to another folder are found."""
    src = _source(ctx)
    refs, broken = src.file_refs(list(ctx.episodes))
    bad_eps: set[str] = set(broken)
    unusable: dict[str, str] = {}
    missing = []
    checked = ctx.cache.setdefault("lerobot_files", {})
    for ref in refs:
        name = _rel(ctx, ref.path)
        if name not in checked:
            if not os.path.lexists(ref.path):
                checked[name] = MISSING
            elif not ref.path.is_file():
                checked[name] = "not a regular file"
            elif ref.kind == "data":
                checked[name] = _parquet_problem(ref.path)
            else:
                try:
                    video_index(ref.path)
                    checked[name] = None
                except DatasetError as e:
                    checked[name] = e.message
        if problem := checked[name]:
            bad_eps.add(ref.episode)
            if problem == MISSING:
                missing.append(ref)
            else:
                unusable[name] = problem
    judged = {"files": (files := len({_rel(ctx, r.path) for r in refs})), "episodes": len(ctx.episodes)}
    parts = [g.describe() for g in src.locate_missing(missing)]
    if unusable:
        shown = "; ".join(f"{n}: {p}" for n, p in list(unusable.items())[:5])
        more = f" (+{len(unusable) - 5} more)" if len(unusable) > 5 else ""
        parts.append(f"{len(unusable)} file(s) unusable: {shown}{more}")
    if broken:
        ep, why = next(iter(broken.items()))
        parts.append(f"{len(broken)} episode(s) whose file paths cannot be built, e.g. episode {ep}: {why}")
    if parts:
        return Outcome(False, " | ".join(parts), sorted(bad_eps, key=int), judged=judged)
    if not files:
        return nothing_to_judge("no data or video file referred to", applicable=True)
    videos = len({_rel(ctx, r.path) for r in refs if r.kind != "data"})
    return Outcome(True, f"{files - videos} data file(s) whole (parquet footers read)"
                         + (f", {videos} MP4(s) demuxed to their end" if videos else ", no video"), judged=judged)


def _column(table: pa.Table, name: str) -> np.ndarray | None:
    if name not in table.column_names:
        return None
    values, _ = primitive_numpy(table.column(name).combine_chunks())
    return values


def check_lerobot_indices(ctx: Context) -> Outcome:
    """Indices are contiguous and agree: episodes numbered 0..N-1, each episode's rows carry its
    `episode_index`, `frame_index` runs 0..length-1, the row count equals the episode's `length`,
    `task_index` names a task, and (v3.0) the global `index` runs from `dataset_from_index` to
    `dataset_to_index`.

    An episode deleted without re-indexing leaves a hole in the numbering (LeRobot then reads the
    wrong episode's rows); the detail names the episode and the first row that disagrees."""
    src = _source(ctx)
    problems: list[str] = []
    bad: set[str] = set()
    rows = judged_eps = 0
    numbers = sorted(int(e["episode_index"]) for e in src.episodes)
    if numbers != list(range(len(numbers))):
        holes = sorted(set(range(max(numbers) + 1)) - set(numbers)) if numbers else []
        problems.append(f"episode_index not contiguous (missing {holes[:5]})")
    for ep in ctx.episodes:
        row = src.episode_row(ep)
        n = int(row["length"])
        try:
            if not src.data_path(ep).is_file():
                continue  # lerobot_files names the missing file
            table = src.rows(ep)
        except DatasetError as e:
            problems.append(f"episode {ep}: {e}")
            bad.add(ep)
            continue
        rows += table.num_rows
        judged_eps += 1
        found = []
        if table.num_rows != n:
            found.append(f"{table.num_rows} rows for length {n}")
        episode_index = _column(table, "episode_index")
        if episode_index is not None and len(episode_index) and not (episode_index == int(ep)).all():
            k = int(np.flatnonzero(episode_index != int(ep))[0])
            found.append(f"row {k} has episode_index {int(episode_index[k])}")
        frame_index = _column(table, "frame_index")
        if frame_index is None:
            found.append("no frame_index column")
        elif not np.array_equal(frame_index, np.arange(len(frame_index))):
            k = int(np.flatnonzero(frame_index != np.arange(len(frame_index)))[0])
            found.append(f"frame_index of row {k} is {int(frame_index[k])}")
        task_index = _column(table, "task_index")
        if task_index is not None and len(task_index) and not np.isin(task_index, list(src.tasks)).all():
            found.append(f"task_index {int(task_index[~np.isin(task_index, list(src.tasks))][0])} names no task")
        index = _column(table, "index")
        if src.codebase_version == "v3.0" and index is not None and "dataset_from_index" in row:
            want = np.arange(int(row["dataset_from_index"]), int(row["dataset_to_index"]))
            if not np.array_equal(index, want):
                found.append(f"index runs {int(index[0]) if len(index) else '-'}..{int(index[-1]) if len(index) else '-'}, "
                             f"the episode says {int(row['dataset_from_index'])}..{int(row['dataset_to_index']) - 1}")
        if found:
            bad.add(ep)
            problems.append(f"episode {ep}: {'; '.join(found)}")
    judged = {"episodes": judged_eps, "rows": rows}
    if problems:
        return Outcome(False, f"{len(problems)} problem(s): {' | '.join(problems[:4])}", sorted(bad, key=int),
                       judged=judged)
    if not judged_eps:
        return nothing_to_judge("no episode with a data file (lerobot_files names the missing ones)", applicable=True)
    return Outcome(True, f"{judged_eps} episodes: episode, frame, task and global indices contiguous and agreeing",
                   judged=judged)


def check_lerobot_timestamps(ctx: Context) -> Outcome:
    """Every row's `timestamp` is its frame's time `frame_index / fps`, within LeRobot's tolerance
    (1e-4 s): what LeRobot's reader demands ("timestamps unexpectedly violate the tolerance") without
    saying where.

    Each finding names the episode, the frame, the time found, the time expected and the difference in
    ms, at that frame's time on the timeline."""
    src = _source(ctx)
    tol = lrl.TOLERANCE_S
    bad, findings, worst = set(), [], 0.0
    judged_eps = rows = 0
    for ep in ctx.episodes:
        try:
            table = src.rows(ep)
        except DatasetError:
            continue  # lerobot_files / lerobot_indices name it
        ts = _column(table, "timestamp")
        if ts is None:
            continue
        judged_eps += 1
        rows += len(ts)
        ts = ts.astype(np.float64)
        expected = np.arange(len(ts)) / src.fps
        off = ts - expected
        worst = max(worst, float(np.abs(off).max()) if len(off) else 0.0)
        for k in np.flatnonzero(np.abs(off) > tol)[:20]:
            bad.add(ep)
            t_ns = int(sampler.snap_seconds(ts[k : k + 1], src.fps, tol)[0])
            findings.append(finding(ep, max(t_ns, 0), f"frame {k}: timestamp {ts[k]:.4f} s, expected {expected[k]:.4f} s "
                                                       f"({_ms(off[k])})", "timestamp"))
    judged = {"episodes": judged_eps, "rows": rows}
    if bad:
        first = findings[0]
        return Outcome(False, f"{len(findings)} frame(s) off 1/fps by more than {tol * 1e3:g} ms, e.g. episode "
                              f"{first['episode']} {first['what']}", sorted(bad, key=int), findings=findings,
                       judged=judged)
    if not rows:
        return nothing_to_judge("no readable timestamp column (lerobot_files and lerobot_indices say why)",
                                applicable=True)
    return Outcome(True, f"every row within {tol * 1e3:g} ms of frame_index/fps (worst {worst * 1e3:.3f} ms)",
                   judged=judged)


def check_lerobot_video_frames(ctx: Context) -> Outcome:
    """Each episode's video, per camera, holds one frame per row of its frame table, each at its row's
    time: the count of frames in the episode's window equals `length`, and frame k sits at `k / fps`
    within LeRobot's tolerance.

    A dropped or extra frame shifts every later one; a video encoded at a slightly wrong rate drifts.
    The finding names the first frame out of place and the drift there and at the end, in ms."""
    src = _source(ctx)
    if not src.video_keys:
        return nothing_to_judge("no video camera")
    tol = lrl.TOLERANCE_S
    bad, findings, pairs, frames = set(), [], 0, 0
    for ep in ctx.episodes:
        n = int(src.episode_row(ep)["length"])
        opened = ctx.cameras(ep)  # the cameras the other camera checks read, indexed once
        for key in src.video_keys:
            name = lrl.camera_name(key)
            try:  # one camera at a time when another of the episode does not open
                cam = opened[name] if isinstance(opened, dict) else src.camera(ep, name)
            except DatasetError:
                continue  # lerobot_files names it
            pairs += 1
            m = len(cam)
            frames += m
            expected = np.arange(m) / src.fps
            off = cam.seconds - expected
            out = np.flatnonzero(np.abs(off) > tol)
            problems = []
            if m != n:
                problems.append(f"{m} frames for {n} rows")
            if len(out):
                k = int(out[0])
                problems.append(f"frame {k} at {cam.seconds[k]:.4f} s, expected {expected[k]:.4f} s ({_ms(off[k])}; "
                                f"{_ms(off[-1])} at the last frame)")
            if problems:
                bad.add(ep)
                k = int(out[0]) if len(out) else min(m, n) - 1 if min(m, n) > 0 else 0
                t_ns = int(sampler.grid_points(0, k + 1, src.fps)[k])
                findings.append(finding(ep, t_ns, "; ".join(problems), f"camera {name}"))
    judged = {"episode_cameras": pairs, "frames": frames}
    if bad:
        f = findings[0]
        return Outcome(False, f"{len(findings)} episode-camera(s) whose video disagrees with the frame table, e.g. "
                              f"episode {f['episode']} {f['where']}: {f['what']}", sorted(bad, key=int),
                       findings=findings, judged=judged)
    if not pairs:
        return nothing_to_judge("no readable video (lerobot_files names the missing or unusable files)",
                                applicable=True)
    return Outcome(True, f"{pairs} episode-cameras: one frame per row, each within {tol * 1e3:g} ms of its row's time",
                   judged=judged)


def check_lerobot_video_ranges(ctx: Context) -> Outcome:
    """v3.0: in each MP4 that holds several episodes, their windows `[from_timestamp, to_timestamp)`
    follow each other without overlap or gap (within the tolerance, one frame period at most between
    them) and end inside the file.

    A merge that shifted the windows (LeRobot issues about video indexing broken by a merge) makes every
    later episode show another episode's frames; the detail names the file, the episodes and the
    seconds."""
    src = _source(ctx)
    if src.per_episode:
        return nothing_to_judge(f"{src.codebase_version}: one MP4 per episode, no windows")
    if not src.video_keys:
        return nothing_to_judge("no video camera")
    tol = lrl.TOLERANCE_S
    period = 1.0 / src.fps
    by_file: dict[tuple[str, Path], list[tuple[float, float, str]]] = {}
    for row in src.episodes:
        ep = str(row["episode_index"])
        for key in src.video_keys:
            try:
                path, (lo, hi) = src.video_file(ep, key)
            except DatasetError:
                continue
            by_file.setdefault((key, path), []).append((lo, hi, ep))
    problems, bad, unread = [], set(), 0
    for (_key, path), spans in by_file.items():
        spans.sort()
        try:
            index = video_index(path)
            end = float((int(index.pts[-1]) * index.time_base) + period) if len(index) else 0.0
        except DatasetError:
            end = math.inf  # lerobot_files names it
            unread += 1
        prev = None
        for lo, hi, ep in spans:
            if hi <= lo:
                problems.append(f"{_rel(ctx, path)}: episode {ep} window {lo:.4f}..{hi:.4f} s is empty")
                bad.add(ep)
            if prev is not None:
                gap = lo - prev[1]
                if gap < -tol:
                    problems.append(f"{_rel(ctx, path)}: episode {ep} starts at {lo:.4f} s, inside episode {prev[2]} "
                                    f"(ends {prev[1]:.4f} s)")
                    bad.update({ep, prev[2]})
                elif gap > period + tol:
                    problems.append(f"{_rel(ctx, path)}: {gap:.4f} s between episode {prev[2]} and {ep}")
                    bad.add(ep)
            if hi > end + tol:
                problems.append(f"{_rel(ctx, path)}: episode {ep} ends at {hi:.4f} s, the video at {end:.4f} s")
                bad.add(ep)
            prev = (lo, hi, ep)
    judged = {"files": len(by_file), "windows": sum(len(v) for v in by_file.values())}
    if problems:
        return Outcome(False, f"{len(problems)} window problem(s): {'; '.join(problems[:4])}", sorted(bad, key=int),
                       judged=judged)
    if not by_file:
        return nothing_to_judge("no episode with video windows", applicable=True)
    unread_note = f" ({unread} unreadable: their ends not checked, lerobot_files names them)" if unread else ""
    return Outcome(True, f"{len(by_file)} MP4 files: episode windows ordered, contiguous and inside each file"
                         f"{unread_note}", judged=judged)


def _feature_values(src: LeRobotSource, ep: str, key: str) -> np.ndarray | None:
    table = src.rows(ep)
    if key not in table.column_names:
        return None
    col = table.column(key)
    if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type) or pa.types.is_large_list(col.type):
        return list_column(table, key, None, src.data_path(ep)).astype(np.float64)
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
        return primitive_numpy(col.combine_chunks())[0].astype(np.float64).reshape(-1, 1)
    return None


def _numeric_features(src: LeRobotSource) -> list[str]:
    return [k for k, f in src.features.items() if f["dtype"] not in lrl.VISUAL_DTYPES and f["dtype"] != "string"]


def _moments(ctx: Context) -> dict[str, dict[str, np.ndarray]]:
    """Per numeric feature over every episode: min, max, mean, std (population) and count, in float64;
    and ``mean_tol``/``var_tol``, how far LeRobot's own way of computing the mean and the variance may
    land from them (:data:`LEROBOT_ULPS`: per episode, of its max |x| and max x^2, weighted by rows)."""
    if "lerobot_moments" in ctx.cache:
        return ctx.cache["lerobot_moments"]
    src = _source(ctx)
    acc: dict[str, list] = {}
    for row in src.episodes:
        ep = str(row["episode_index"])
        for key in _numeric_features(src):
            try:
                x = _feature_values(src, ep, key)
            except DatasetError:
                continue
            if x is None or not len(x):
                continue
            a = acc.setdefault(key, [np.full(x.shape[1], np.inf), np.full(x.shape[1], -np.inf),
                                     np.zeros(x.shape[1]), np.zeros(x.shape[1]), 0,
                                     np.zeros(x.shape[1]), np.zeros(x.shape[1])])
            if a[2].shape != (x.shape[1],):
                continue
            a[0] = np.minimum(a[0], x.min(0))
            a[1] = np.maximum(a[1], x.max(0))
            a[2] = a[2] + x.sum(0)
            a[3] = a[3] + (x * x).sum(0)
            a[4] += len(x)
            big = np.abs(x).max(0)
            a[5] = a[5] + len(x) * big  # rows x the episode's magnitude: the pooled rounding bound's weights
            a[6] = a[6] + len(x) * big * big
    out = {}
    for key, (lo, hi, s, s2, n, big, big2) in acc.items():
        mean = s / n
        # LeRobot averages float32 (and smaller) data in float32, integers and float64 in float64
        u = LEROBOT_ULPS * float(np.finfo(np.float32 if src.features[key]["dtype"] in ("float32", "float16", "bfloat16")
                                          else np.float64).eps)
        out[key] = {"min": lo, "max": hi, "mean": mean, "std": np.sqrt(np.maximum(0.0, s2 / n - mean**2)),
                    "count": np.array([n]), "mean_tol": u * big / n, "var_tol": 12 * u * big2 / n}
    ctx.cache["lerobot_moments"] = out
    return out


def _read_stats(src: LeRobotSource) -> tuple[dict | None, str | None]:
    path = src.root / lrl.STATS_JSON
    if not path.is_file():
        return None, None
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        return None, f"{lrl.STATS_JSON}: unreadable ({e})"
    return (doc, None) if isinstance(doc, dict) else (None, f"{lrl.STATS_JSON}: not a JSON object")


def check_lerobot_stats(ctx: Context) -> Outcome:
    """`meta/stats.json` holds finite statistics that equal those recomputed from the data: for every
    numeric feature, min, max, mean and std (population) per dimension, relative to the feature's
    range (`STATS_RTOL`); quantiles, where present, inside [min, max]. Image statistics are checked for
    shape (3x1x1) and range [0, 1] only (LeRobot computes them on a sample of frames).

    Training normalises with these figures: a stale entry after a merge or an edit, or a NaN, moves
    every input of the network. The detail names the feature, the statistic, the dimension and both
    values. Stale statistics of the index columns (`timestamp`, `frame_index`, `episode_index`, `index`,
    `task_index`), which LeRobot's own `delete_episodes` and merge leave behind and no training
    normalises, are a warning."""
    src = _source(ctx)
    stats, problem = _read_stats(src)
    if problem:
        return Outcome(False, problem, [], judged={"files": 1})
    if stats is None:
        why = {"v2.0": "a v2.0 dataset without it", "v2.1": "v2.1 keeps per-episode stats only"}.get(
            src.codebase_version, "v3.0 needs it")
        return nothing_to_judge(f"no {lrl.STATS_JSON} ({why})", applicable=src.codebase_version == "v3.0")
    moments = _moments(ctx)
    problems, values = [], 0
    for key, want in moments.items():
        got = stats.get(key)
        if not isinstance(got, dict):
            problems.append(f"{key}: no entry")
            continue
        scale = np.maximum(np.abs(want["max"] - want["min"]), np.maximum(np.abs(want["max"]), np.abs(want["min"])))
        scale = np.where(scale > 0, scale, 1.0)
        for stat in ("min", "max", "mean", "std"):
            try:
                value = np.asarray(got.get(stat), dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                problems.append(f"{key}.{stat}: not numbers")
                continue
            if value.shape != want[stat].shape:
                problems.append(f"{key}.{stat}: {value.size} values for {want[stat].size} dimensions")
                continue
            if not np.isfinite(value).all():
                d = int(np.flatnonzero(~np.isfinite(value))[0])
                problems.append(f"{key}.{stat}[{d}] is {value[d]}")
                continue
            tol = STATS_RTOL * scale
            if stat == "mean":
                tol = np.maximum(tol, want["mean_tol"])
            elif stat == "std":  # a variance error d moves a std s by sqrt(s^2 + d) - s (all of sqrt(d) at 0)
                tol = np.maximum(tol, np.sqrt(want["std"] ** 2 + want["var_tol"]) - want["std"])
            over = np.abs(value - want[stat]) / tol
            values += value.size
            if (over > 1).any():
                d = int(np.argmax(over))
                problems.append(f"{key}.{stat}[{d}] is {value[d]:.6g}, the data gives {want[stat][d]:.6g} "
                                f"(tolerance {tol[d]:.2g})")
        for q in ("q01", "q10", "q50", "q90", "q99"):
            if q in got:
                value = np.asarray(got[q], dtype=np.float64).reshape(-1)
                if value.shape == want["min"].shape and (
                        (value < want["min"] - STATS_RTOL * scale) | (value > want["max"] + STATS_RTOL * scale)).any():
                    problems.append(f"{key}.{q} outside [min, max]")
    for key in src.video_keys + src.image_keys:
        got = stats.get(key)
        if isinstance(got, dict):
            for stat in ("min", "max", "mean", "std"):
                value = np.asarray(got.get(stat, []), dtype=np.float64)
                if value.size != 3 or not np.isfinite(value).all() or (value < 0).any() or (value > 1).any():
                    problems.append(f"{key}.{stat}: not 3 finite values in [0, 1]")
    # the bookkeeping columns (timestamp, indices) are never normalised: LeRobot's own delete_episodes and
    # merge leave their entries stale, which misleads no training: a warning
    bookkeeping = [p for p in problems if p.split(".", 1)[0].split(":", 1)[0] in lrl.DEFAULT_FEATURES]
    problems = [p for p in problems if p not in bookkeeping]
    judged = {"features": len(moments), "values": values}
    if problems:
        return Outcome(False, f"{lrl.STATS_JSON}: {len(problems)} statistic(s) disagree with the data beyond "
                              f"LeRobot's own rounding: {'; '.join(problems[:4])}", [], judged=judged)
    if not moments:
        return nothing_to_judge("no numeric feature readable (lerobot_files names the missing data files)",
                                applicable=True)
    detail = (f"{lrl.STATS_JSON}: {len(moments)} features' min/max/mean/std equal the data's within LeRobot's "
              f"own rounding (mean {LEROBOT_ULPS} ulps of the magnitude, variance {12 * LEROBOT_ULPS} ulps of its "
              f"square, float32 data in float32; at least {STATS_RTOL:g} of the range)")
    if bookkeeping:
        return Outcome(True, f"{detail}, but for {len(bookkeeping)} statistic(s) of the index columns, which no "
                             f"training normalises: {'; '.join(bookkeeping[:3])}", warned=list(ctx.episodes),
                       judged=judged)
    return Outcome(True, detail, judged=judged)




def check_lerobot_units(ctx: Context) -> Outcome:
    """The arms' values fit the unit their names declare: names this package writes (`right_joint1.pos`)
    declare radians, so joint values beyond 2 pi are degrees; LeRobot's OpenArm names (`joint_1.pos`)
    declare degrees, so joints 1-7 that move (a span above 0.5 as stored) but never leave +-pi over the
    whole dataset were stored in radians.

    Converting silently would make every joint 57 times too large or too small. Not applicable
    without an OpenArm arm mapped, or (degree names) when no joint moves more than the span above."""
    src = _source(ctx)
    moments = _moments(ctx)
    problems, judged = [], 0
    for kind, key in (("obs", "observation.state"), ("action", "action")):
        for arm in src.arms.get(kind, []):
            if arm.attribute != "qpos" or key not in moments:
                continue
            lo, hi = moments[key]["min"][list(arm.dims[:7])], moments[key]["max"][list(arm.dims[:7])]
            judged += 1
            if not arm.degrees and max(np.abs(lo).max(), np.abs(hi).max()) > 2 * math.pi:
                problems.append(f"{key} {arm.side} arm: joints reach {max(np.abs(lo).max(), np.abs(hi).max()):.1f} "
                                f"under radian names ({arm.naming}): degrees?")
            elif arm.degrees and (hi - lo).max() > RADIANS_UNDER_DEGREES_SPAN and max(np.abs(lo).max(), np.abs(hi).max()) <= math.pi:
                problems.append(f"{key} {arm.side} arm: joints span {(hi - lo).max():.2f} within +-pi under LeRobot's "
                                f"degree names: radians?")
    if not judged:
        return nothing_to_judge("no OpenArm arm mapped from the names")
    if problems:
        return Outcome(False, f"{'; '.join(problems)}", list(ctx.episodes), judged={"streams": judged})
    return Outcome(True, f"{judged} arm position stream(s) within the range of the unit their names declare",
                   judged={"streams": judged})


LEROBOT_CHECKS: list[tuple[str, CheckFn]] = [
    ("lerobot_info", check_lerobot_info),
    ("lerobot_files", check_lerobot_files),
    ("lerobot_indices", check_lerobot_indices),
    ("lerobot_timestamps", check_lerobot_timestamps),
    ("lerobot_video_frames", check_lerobot_video_frames),
    ("lerobot_video_ranges", check_lerobot_video_ranges),
    ("lerobot_stats", check_lerobot_stats),
    ("lerobot_units", check_lerobot_units),
]
#: rows that also run under --quick (files and indices: form, not content)
LEROBOT_QUICK = ("lerobot_info", "lerobot_files", "lerobot_indices", "lerobot_timestamps", "lerobot_video_ranges")
#: rows of the OpenArm layout alone (episode folders, manifests, summaries, its parquet schema, its JPEGs)
OPENARM_ONLY = ("episode_folders", "integrity", "episode_summary", "parquet_schema", "jpeg_encoding")
