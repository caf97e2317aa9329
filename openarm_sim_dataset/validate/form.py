"""Checks of form, for every dataset (recorded or simulated, any layout version)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.atomic import TMP_PREFIX
from openarm_sim_dataset.core.errors import CameraError

from .camera_scan import scan
from .check import (
    MAX_FINDINGS_PER_EPISODE,
    CheckFn,
    Context,
    EpisodeCheck,
    Outcome,
    finding,
    no_camera_reason,
    nothing_to_judge,
)
from .integrity import check_integrity
from .robot import joints_of, margin_in, no_profile_reason, robot_of, speed_in, vector_ranges
from .summary_json import check_episode_summary
from .timing import check_camera_coverage, check_camera_rate, check_timestamps


def check_metadata(ctx: Context) -> Outcome:
    """The dataset's metadata.yaml lists at least one task and declares a rate (a frequency, Hz) for every
    camera and for every obs and action stream that some episode stores.

    A component that no episode stores (one arm of a bimanual embodiment recorded alone) needs no rate:
    the detail lists it as not recorded. A dataset of the unversioned layout declares no rates; only its
    tasks are checked. This row reads no episode's files and runs once on the whole episode list, also
    when the dataset is validated in groups of episodes."""
    meta = ctx.ds.meta
    problems = []
    if not meta.tasks:
        problems.append("no tasks")
    for cam in meta.cameras:
        if ctx.ds.version != layout.UNVERSIONED and meta.frequency("cameras", meta.stored_camera_name(cam)) is None:
            problems.append(f"no frequency for camera {cam}")
    unrecorded = []
    for emb in meta.embodiments:
        for kind in layout.KINDS:
            for comp in emb.components or (None,):
                if ctx.ds.version != layout.UNVERSIONED and meta.frequency(kind, emb.name, comp) is None:
                    name = f"{emb.name}{'/' + comp if comp else ''}"
                    # a component no episode stores (one arm of a bimanual embodiment recorded) has no rate
                    if _stored_anywhere(ctx, kind, emb.name, comp):
                        problems.append(f"no {kind} frequency for {name}")
                    elif name not in unrecorded:
                        unrecorded.append(name)
    detail = f"version {meta.layout}, {meta.num_episodes} episodes, {len(meta.tasks)} tasks, {len(meta.cameras)} cameras"
    if unrecorded:
        detail += f"; not recorded (no stream, no frequency): {', '.join(unrecorded)}"
    return Outcome(not problems, detail + ("; " + "; ".join(problems) if problems else ""), [],
                   judged={"episodes": meta.num_episodes, "tasks": len(meta.tasks), "cameras": len(meta.cameras)})


def _stored_anywhere(ctx: Context, kind: str, embodiment: str, component: str | None) -> bool:
    """Whether any listed episode has a stream folder for this component (present, even if broken)."""
    return any(os.path.lexists(layout.component_dir(ctx.ds.root, ep, kind, embodiment, component, ctx.ds.version))
               for ep in ctx.ds.episode_ids)


def check_episode_folders(ctx: Context) -> Outcome:
    """Every episode that metadata.yaml lists has its folder under `episodes/`, everything under
    `episodes/` is a listed episode's folder, and no `.tmp-` folder of an uncommitted write is left.

    The detail names the missing, unlisted and leftover folders; an unlisted or leftover folder fails
    the row without failing any episode. Runs once on the whole episode list, also when the dataset is
    validated in groups of episodes."""
    root = ctx.ds.root / layout.EPISODES_DIR
    listed = set(ctx.ds.episode_ids)
    present = {e.name for e in os.scandir(root)} if root.is_dir() else set()
    missing = sorted(listed - present)
    leftovers = sorted(n for n in present if n.startswith(TMP_PREFIX))
    unlisted = sorted(n for n in present - listed if not n.startswith(TMP_PREFIX))
    parts = []
    if missing:
        parts.append(f"missing folders: {', '.join(missing)}")
    if unlisted:
        parts.append(f"unlisted folders: {', '.join(unlisted)}")
    if leftovers:
        parts.append(f"leftovers of uncommitted writes: {', '.join(leftovers)}")
    ok = not parts
    return Outcome(ok, f"{len(listed)} listed, {len(present)} folders" + ("; " + "; ".join(parts) if parts else ""),
                   [e for e in missing if e in ctx.episodes], judged={"episodes": len(listed), "folders": len(present)})


def _parquet_files(ctx: Context, ep: str) -> list:
    folder = layout.episode_dir(ctx.ds.root, ep)
    return sorted(p for kind in layout.KINDS for p in (folder / kind).rglob("*.parquet")) if folder.is_dir() else []


def check_parquet_schema(ctx: Context) -> Outcome:
    """Every parquet file of every episode's obs and action streams is readable, has a `timestamp`
    column of type `timestamp[ns]` and stores every other column as `list<float32>`, and every
    episode's streams load.

    The detail counts the files and names the first problem (the file, the column and the type found)."""
    bad, files, problems = set(), 0, []
    for ep in ctx.episodes:
        for path in _parquet_files(ctx, ep):
            files += 1
            try:
                schema = pq.read_schema(path)
            except (pa.ArrowException, OSError) as e:
                problems.append(f"{path.relative_to(ctx.ds.root)}: unreadable ({str(e).splitlines()[0][:80]})")
                bad.add(ep)
                continue
            ts = schema.field("timestamp").type if "timestamp" in schema.names else None
            if ts is None or not pa.types.is_timestamp(ts) or ts.unit != "ns":
                problems.append(f"{path.relative_to(ctx.ds.root)}: timestamp is {ts}, expected timestamp[ns]")
                bad.add(ep)
            for f in schema:
                if f.name == "timestamp":
                    continue
                if not (pa.types.is_list(f.type) and f.type.value_type == pa.float32()):
                    problems.append(f"{path.relative_to(ctx.ds.root)}: column {f.name} is {f.type}, expected list<float32>")
                    bad.add(ep)
        for kind in layout.KINDS:
            s = ctx.streams(ep, kind)
            if isinstance(s, str):
                problems.append(s)
                bad.add(ep)
    detail = f"{files} parquet files" + (f"; {len(problems)} problems, first: {problems[0]}" if problems else "")
    return Outcome(not bad, detail, sorted(bad), judged={"files": files})


def _each_stream(ctx: Context):
    for ep in ctx.episodes:
        for kind in layout.KINDS:
            s = ctx.streams(ep, kind)
            if isinstance(s, dict):
                for key, stream in s.items():
                    yield ep, kind, key, stream


def check_nulls(ctx: Context) -> Outcome:
    """No value of any obs or action stream is null or NaN, found by reading every value rather than
    trusting the parquet statistics.

    Each file holding a null is also reported on a line of its own (`<file>: includes null values`, in
    the words of `openarm_dataset`'s validator)."""
    bad, values, first = set(), 0, None
    for ep, kind, key, s in _each_stream(ctx):
        values += s.values.size
        n = int(np.isnan(s.values).sum())
        if n:
            bad.add(ep)
            first = first or f"episode {ep} {kind} {key}: {n} null/NaN"
            # openarm_dataset's validate reports one line per file; scripts grep for it
            line = f"{_relative(ctx, s.path)}: includes null values"
            if line not in ctx.file_lines:
                ctx.file_lines.append(line)
    if not values and not bad:
        return nothing_to_judge("no obs or action values to read", applicable=True)
    return Outcome(not bad, f"{values} values read (not trusting parquet statistics)" + (f"; {first}" if first else ""),
                   sorted(bad), judged={"values": values})


def _relative(ctx: Context, path) -> str:
    try:
        return path.relative_to(ctx.ds.root).as_posix()
    except ValueError:
        return str(path)


def _periods_spanned(kind: str, step: np.ndarray, dt: np.ndarray, med: float) -> np.ndarray:
    """Per interval of a qpos stream, the median periods over which its change is judged: the periods the
    interval spans (a gap of dropped samples, which `timestamps` counts), and for a command (action) the
    periods since it last changed (a policy's targets, stored at the state rate, change at its own)."""
    per = np.maximum(1.0, np.rint(dt / med))
    if kind == "action":
        changed = (step > 0).any(axis=1)
        idx = np.arange(len(per))
        before = np.concatenate([[-1], np.maximum.accumulate(np.where(changed, idx, -1))[:-1]])
        cum = np.concatenate([[0.0], np.cumsum(per)])
        per = cum[idx + 1] - cum[before + 1]  # from the sample after the last change (or the first sample)
    return per


def _hz(hz: float) -> str:
    return f"{hz:.3g}" if hz < 1000 else f"{hz:.0f}"


def check_qpos_jumps(ctx: Context) -> Outcome:
    """No joint of any position stream (obs and action) moves faster than `max_joint_speed` (30 rad/s by
    default) between consecutive samples: a change of more than that speed times the stream's median
    period (0.12 rad at 250 Hz, 0.3 rad at 100 Hz, 3 rad at 10 Hz) is a jump. Which dimensions are joints,
    and in which unit, the robot's profile says (`--robot`, `--robot-file`); a robot storing degrees is
    judged at the same speed in deg/s; grippers and joints in a unit with no angle (LeRobot's -100..100
    normalisation) are not judged, and a robot without a profile is a skip saying so.

    30 rad/s is beyond every OpenArm joint: the fastest, joints 5-7 (Damiao DM-J4310), turn 20.9 rad/s
    without load (the OpenArm v10 description's velocity limits: joints 1-2 16.8 rad/s, joints 3-4 5.4),
    and 30 rad/s is the DM-J4310's default velocity range (VMAX); our data moves at most 10 rad/s (the
    simulated servos after a policy's 0.2 rad steps). A smaller change is a plausible sample at that rate
    (at 10 Hz a wrist turns 2 rad between samples). `max_joint_step` (rad, 0: unused) sets a per-sample
    limit instead, whatever the rate. Across an interval of several median periods (dropped samples, which
    `timestamps` counts) the change is divided by the number of periods, and a command (action) held for
    several samples by the samples it was held (a policy's targets change at its own rate). Each jump is a
    timed finding at the sample after it, naming the joint and its speed."""
    match = robot_of(ctx)
    speed_limit, fixed = ctx.t.max_joint_speed, ctx.t.max_joint_step
    bad, worst, first, found, rates = set(), 0.0, None, [], set()
    streams, joints, samples = 0, set(), 0
    for ep, kind, key, s in _each_stream(ctx):
        cols = [(d, j) for d, j in enumerate(joints_of(match, key))
                if j is not None and j.role == "joint" and speed_in(j.unit, 1.0) is not None]
        if not cols or len(s) < 2:
            continue
        idx = [d for d, _ in cols]
        per_rad = np.array([speed_in(j.unit, 1.0) for _, j in cols])  # stored units per radian
        streams += 1
        samples += len(s)
        joints.update((key, s.columns[d]) for d in idx)
        step = np.abs(np.diff(s.values[:, idx].astype(np.float64), axis=0)) / per_rad  # radians
        dt = np.diff(np.asarray(s.timestamps, dtype=np.int64))
        med = float(np.median(dt))
        if med <= 0:  # no rate (every stamp the same): `timestamps` fails it; judged per sample if asked
            per, period = np.ones(len(step)), 0.0
        else:
            per, period = _periods_spanned(kind, step, dt, med), med / 1e9
            rates.add(1 / period)
        if fixed > 0:
            limit = fixed
        elif period > 0:
            limit = speed_limit * period
        else:
            continue
        change = step / per[:, None]  # rad per median period
        m = float(np.nanmax(change)) if np.isfinite(change).any() else 0.0
        if period > 0:
            worst = max(worst, m / period)
        if m > limit:
            bad.add(ep)
            rate = f"{m / period:.1f} rad/s, " if period > 0 else ""
            fastest = s.columns[idx[int(np.nanargmax(np.nanmax(change, axis=0)))]]
            first = first or (f"episode {ep} {kind} {key}: {fastest} {rate}{m:.3f} rad per sample "
                              f"(limit {limit:.3g} rad{f' at {_hz(1 / period)} Hz' if period > 0 else ''})")
            with np.errstate(invalid="ignore"):
                over = change > limit
            for i in np.flatnonzero(over.any(axis=1))[:MAX_FINDINGS_PER_EPISODE]:  # the sample after the jump
                j = int(np.nanargmax(change[i]))
                speed = f" ({change[i, j] / period:.1f} rad/s)" if period > 0 else ""
                found.append(finding(ep, s.timestamps[i + 1], f"{s.columns[idx[j]]} jumps "
                                     f"{step[i, j] * per_rad[j]:.3f} {cols[j][1].unit}{speed}", f"{kind} {key}"))
    if not streams:
        return nothing_to_judge(no_profile_reason(match, ctx, "joint with an angle (speed limit)"))
    # the streams' rates: one figure when they agree within 10 % (recorded rates jitter), else the extremes
    at = [max(rates), min(rates)] if rates and max(rates) > 1.1 * min(rates) else \
        [float(np.median(sorted(rates)))] if rates else []
    if fixed > 0:
        limits = f"limit {fixed:g} rad per sample (max_joint_step)" + "".join(
            f", {fixed * hz:.3g} rad/s at {_hz(hz)} Hz" for hz in at)
    else:
        limits = f"limit {speed_limit:g} rad/s" + "".join(
            f", {speed_limit / hz:.3g} rad per sample at {_hz(hz)} Hz" for hz in at)
    return Outcome(not bad, f"largest speed {worst:.2f} rad/s ({limits})" + (f"; {first}" if first else ""),
                   sorted(bad), findings=found, judged={"streams": streams, "joints": len(joints), "rows": samples})


def check_joint_limits(ctx: Context) -> Outcome:
    """Every joint of every position stream (obs and action) stays within its robot's position limits, in
    the unit the robot stores it: the limits of the profile the dataset's robot_type, names and values
    match (`--robot NAME`, `--robot-file FILE.yaml` override; the robot reference lists every profile
    and the source of each number), widened by `joint_limit_margin` (0.05 rad by default; in degrees
    for a robot storing degrees, none for a clamped normalisation such as LeRobot's -100..100).

    OpenArm's limits are its MJCF's (`openarm-mujoco`, whose limits are soft: hence the margin); a
    gripper is judged where its profile gives its range; an arm read from a LeRobot dataset is judged by
    the limits of the naming it was recorded under (LeRobot's gripper motor angle, a ROS 2 joint frame). A robot without a profile, or whose profile
    gives no limit for the joints found, is a `skip` saying so. Each excursion is a timed finding at its
    first sample, naming the joint, the value and the limit."""
    match = robot_of(ctx)
    m = ctx.t.joint_limit_margin
    bad, first, found = set(), None, []
    streams, joints, values = 0, set(), 0
    for ep, kind, key, s in _each_stream(ctx):
        cols = [(d, j) for d, j in enumerate(joints_of(match, key))
                if j is not None and j.lower is not None and j.upper is not None]
        if not cols or not len(s):
            continue
        idx = [d for d, _ in cols]
        lower = np.array([j.lower - margin_in(j.unit, m) for _, j in cols])
        upper = np.array([j.upper + margin_in(j.unit, m) for _, j in cols])
        q = s.values[:, idx].astype(np.float64)
        streams += 1
        values += q.size
        joints.update((key, s.columns[d]) for d in idx)
        with np.errstate(invalid="ignore"):
            over = (q < lower) | (q > upper)
        if not over.any():
            continue
        bad.add(ep)
        for c in np.flatnonzero(over.any(axis=0)):
            i = int(np.argmax(over[:, c]))
            j = cols[c][1]
            what = (f"{s.columns[idx[c]]} at {q[i, c]:.4g} {j.unit}, outside {j.lower:.4g}..{j.upper:.4g} "
                    f"({int(over[:, c].sum())} samples)")
            first = first or f"episode {ep} {kind} {key}: {what}"
            found.append(finding(ep, s.timestamps[i], what, f"{kind} {key}"))
    if not streams:
        return nothing_to_judge(no_profile_reason(match, ctx, "joint limit"))
    naming = f" ({match.naming.name}{', ' + match.unit_variant.name if match.unit_variant else ''})" if match.naming else ""
    verdict = f"outside their limits in {len(bad)} episode(s)" if bad else "within their limits"
    return Outcome(not bad, f"{len(joints)} joints of {match.profile.name}{naming} {verdict} +- {m} rad"
                            + (f"; {first}" if first else ""),
                   sorted(bad), findings=found, judged={"streams": streams, "joints": len(joints), "values": values})


def check_joint_units(ctx: Context) -> Outcome:
    """The joints' values fit the unit their robot's profile declares for them: radians that reach beyond
    2 pi are degrees; degrees that move (a span above 0.5 as stored) but never leave +-pi over the
    dataset's first episodes are radians; LeRobot's -100..100 normalisation passed is degrees.

    Training on a unit other than the one declared makes every joint 57 times too large or too small,
    and a converter that trusts the names converts it wrong. Judged on the dataset's first 50 episodes
    (the evidence the robot is detected from). In a LeRobot dataset, OpenArm arms read from LeRobot's
    degree names are judged on their stored values by `lerobot_units`; a robot without a profile is a
    `skip` saying so."""
    match = robot_of(ctx)
    vectors, ranges = vector_ranges(ctx)
    lerobot = ctx.ds.lerobot is not None
    # per vector, its joints (position dimensions of role joint) as the profile declares them
    joints = {k: [j for j in joints_of(match, k) if j is not None and j.role == "joint"] for k in vectors
              if not (lerobot and k.startswith("arms/"))}
    keys = [k for k, js in joints.items() if js]
    if not keys:
        if lerobot and any(k.startswith("arms/") for k in vectors):
            return nothing_to_judge("OpenArm arms read from LeRobot names: lerobot_units judges their stored values")
        return nothing_to_judge(no_profile_reason(match, ctx, "joint unit"))
    problems = match.unit_problems({k: ranges[k] for k in keys})
    dims = sum(len(joints[k]) for k in keys)
    units = sorted({j.unit for k in keys for j in joints[k]})
    detail = (f"{dims} joint dimensions of {match.profile.name} in {len(keys)} vectors fit the unit declared "
              f"({', '.join(units)})")
    if problems:
        detail = f"{len(problems)} vector(s) do not fit their declared unit: {'; '.join(problems[:4])}"
    return Outcome(not problems, detail, list(ctx.episodes) if problems else [],
                   judged={"vectors": len(keys), "dimensions": dims})


def check_pose_quaternions(ctx: Context) -> Outcome:
    """Every quaternion of every `pose` stream (the four values after the position) has unit norm within
    `quat_norm_tolerance` (0.001 by default).

    A `skip` (not applicable) when the dataset has no pose stream."""
    bad, n, worst = set(), 0, 0.0
    for ep, _kind, key, s in _each_stream(ctx):
        if not key.endswith("/pose"):
            continue
        norm = np.linalg.norm(s.values[:, 3:7].astype(np.float64), axis=1)
        n += len(norm)
        err = float(np.nanmax(np.abs(norm - 1))) if len(norm) else 0.0
        worst = max(worst, err)
        if err > ctx.t.quat_norm_tolerance:
            bad.add(ep)
    if n == 0:
        return nothing_to_judge("no pose streams")
    return Outcome(not bad, f"{n} quaternions, largest | |q|-1 | {worst:.2g} (limit {ctx.t.quat_norm_tolerance})", sorted(bad),
                   judged={"quaternions": n})


def check_episode_length(ctx: Context) -> Outcome:
    """Every episode spans at least `min_duration` (0.25 s by default), measured on its shortest stream
    (an episode of cameras alone: its shortest camera), except an attempt its metadata entry lists as unrecorded: `steps: 0` with at most one row in every
    stream.

    Such an attempt (a generated episode whose planner found no plan from the drawn start, outcome
    `ik_failed`: the arm never moved) stays listed so that success rates count it and episode ids stay
    contiguous for resume and `--episode-range` shards; the detail counts it. An entry saying
    `steps: 0` over streams that hold more than one row is judged on its length like any other."""
    bad, shortest, unrecorded, unreadable = [], None, [], []
    for ep in ctx.episodes:
        spans, rows, unread = [], [], 0
        for kind in layout.KINDS:
            s = ctx.streams(ep, kind)
            if isinstance(s, dict):
                spans += [(st.timestamps[-1] - st.timestamps[0]) / 1e9 if len(st) > 1 else 0.0 for st in s.values()]
                rows += [len(st) for st in s.values()]
            else:
                unread += 1
        if unread == len(layout.KINDS):  # missing or broken files are not a short episode: other rows name them
            unreadable.append(ep)
            continue
        if not rows:  # an episode of cameras alone: its frames span it
            cams = ctx.cameras(ep)
            spans = [(c.timestamps[-1] - c.timestamps[0]) / 1e9 for c in cams.values() if len(c.timestamps) > 1] \
                if isinstance(cams, dict) else []
        dur = min(spans) if spans else 0.0
        if ctx.ds.episode(ep).get("steps") == 0 and rows and max(rows) <= 1:
            unrecorded.append(ep)
            continue
        shortest = dur if shortest is None else min(shortest, dur)
        if dur < ctx.t.min_duration:
            bad.append(ep)
    detail = f"shortest {shortest or 0:.2f} s (minimum {ctx.t.min_duration} s)"
    if unrecorded:
        detail += (f"; {len(unrecorded)} attempt(s) listed with nothing recorded (steps: 0, one row): "
                   f"{', '.join(unrecorded[:5])}" + (" ..." if len(unrecorded) > 5 else ""))
    if bad:
        detail += f"; too short: {', '.join(bad[:5])}"
    if unreadable:
        detail += f"; {len(unreadable)} episode(s) whose streams cannot be read, not judged (the form rows name them)"
    if shortest is None and not unrecorded:
        return nothing_to_judge("no episode with readable streams", applicable=True)
    return Outcome(not bad, detail, bad, judged={"episodes": len(ctx.episodes) - len(unrecorded) - len(unreadable)})


def check_cameras_present(ctx: Context) -> Outcome:
    """Every camera the dataset declares has at least one frame in every episode, and every episode's
    cameras can be read.

    The detail counts the cameras and frames and names the first empty or unreadable camera."""
    bad, problems, frames = set(), [], 0
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        if isinstance(cams, str):
            bad.add(ep)
            problems.append(cams)
            continue
        for name, cam in cams.items():
            frames += cam.num_frames
            if cam.num_frames == 0:
                bad.add(ep)
                problems.append(f"episode {ep} camera {name}: no frames")
    if not ctx.ds.camera_names:
        return nothing_to_judge("no camera declared")
    return Outcome(not bad, f"{len(ctx.ds.camera_names)} cameras, {frames} frames" + (f"; {problems[0]}" if problems else ""),
                   sorted(bad), judged={"cameras": len(ctx.ds.camera_names), "frames": frames})


def _episode_frames(ctx: Context, ep: str, _prep) -> dict:
    """One episode's partial: frames decoded, the problems and timed findings of frames that do not
    decode, and per camera the image shapes (height, width) of the frames that do."""
    frames, problems, found, shapes = 0, [], [], {}
    for (e, name), sc in scan(ctx).items():  # scanned once for the group (the camera checks share it)
        if e != ep:
            continue
        for shp, err, t in zip(sc.shapes, sc.errors, sc.timestamps.tolist()):
            frames += 1
            if err:
                problems.append(err)
                found.append(finding(ep, t, f"frame does not decode: {err.split(': ', 1)[-1]}", f"camera {name}"))
            else:
                shapes.setdefault(name, set()).add(tuple(shp))
    return {"frames": frames, "problems": problems, "findings": found, "shapes": shapes}


def _reduce_frames(ctx: Context, _prep, parts: dict) -> Outcome:
    """Every camera frame of every episode decodes as a JPEG, and all frames of one camera have one image
    size: the one `equipment.perceptions.cameras` declares for it, where it declares one.

    Where no size is declared, the size found in the most episodes is the camera's and an episode with
    frames of another size fails; the comparison is over the whole dataset, also when it is validated in
    groups of episodes (each episode gives its cameras' sizes). Each frame that does not decode is a timed
    finding."""
    bad, problems, sizes, found, frames = set(), [], {}, [], 0
    for ep, part in parts.items():
        frames += part["frames"]
        if part["problems"]:
            bad.add(ep)
            problems += part["problems"]
            found += part["findings"]
        for name, shapes in part["shapes"].items():
            for shp in shapes:
                sizes.setdefault(name, {}).setdefault(shp, set()).add(ep)
    declared = ctx.ds.meta.equipment.perceptions.cameras
    for name, by_shape in sizes.items():
        size = _declared_size(declared, name)
        for shp, eps in by_shape.items():  # the size equipment.perceptions.cameras declares, where it does
            if size is not None and (shp[1], shp[0]) != size:
                bad |= eps
                problems.append(f"camera {name}: frames of {shp[1]}x{shp[0]}, equipment.perceptions.cameras.{name} "
                                f"declares {size[0]}x{size[1]}")
        if len(by_shape) > 1:
            common = max(by_shape, key=lambda k: len(by_shape[k]))
            for shp, eps in by_shape.items():
                if shp != common:
                    bad |= eps
                    problems.append(f"camera {name}: frames of {shp[1]}x{shp[0]} besides {common[1]}x{common[0]}")
    if frames == 0:
        return nothing_to_judge(no_camera_reason(ctx, "frame to decode"))
    return Outcome(not bad, f"{frames} frames decoded, sizes as equipment.perceptions.cameras declares them"
                   + (f"; {len(problems)} bad, first: {problems[0]}" if problems else ""),
                   sorted(bad), findings=found, judged={"frames": frames})


check_jpeg_frames = EpisodeCheck(_episode_frames, _reduce_frames)


def _declared_size(declared, name: str) -> tuple[int, int] | None:
    """``(width, height)`` that ``equipment.perceptions.cameras.<name>`` declares, or None when it declares
    none (recorded datasets may leave the mapping empty; a value that is not a positive integer is
    declared and wrong: ``(0, 0)``, which no frame has)."""
    try:
        entry = declared[name]
    except KeyError:
        return None
    if not isinstance(entry, dict) or ("width" not in entry and "height" not in entry):
        return None
    w, h = entry.get("width"), entry.get("height")
    ok = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (w, h))
    return (int(w), int(h)) if ok else (0, 0)


def check_camera_span(ctx: Context) -> Outcome:
    """Every camera frame of every episode is stamped inside the span its state streams share (from their
    latest first sample to their earliest last one), widened at each end by the longest median interval
    of those streams.

    A camera that starts late or stops early inside that span is `camera_coverage`'s concern."""
    bad, first, judged = set(), None, 0
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        spans = []
        for kind in layout.KINDS:
            s = ctx.streams(ep, kind)
            if isinstance(s, dict):
                spans += [(st.timestamps[0], st.timestamps[-1], np.median(np.diff(st.timestamps)) if len(st) > 1 else 0)
                          for st in s.values() if len(st)]
        if not isinstance(cams, dict) or not spans:
            continue
        lo, hi = layout.camera_window(spans)
        for name, cam in cams.items():
            judged += bool(cam.num_frames)
            if cam.num_frames and (cam.timestamps[0] < lo or cam.timestamps[-1] > hi):
                bad.add(ep)
                first = first or f"episode {ep} camera {name}: frames outside the state streams' span"
    if not judged:
        return nothing_to_judge(no_camera_reason(ctx, "frames and state streams to compare"))
    return Outcome(not bad, f"{judged} episode-cameras' stamps inside the obs/action span (+- one state period)"
                   + (f"; {first}" if first else ""), sorted(bad), judged={"episode_cameras": judged})


def check_frame_name_order(ctx: Context) -> Outcome:
    """Every camera's frame files, sorted by name as text, are in time order. openarm_dataset 0.4.0 orders
    a camera's frames by file name, so stamps of different digit counts (`999.jpeg` after `1000.jpeg`) or a
    name with leading zeros reach its readers out of time order, while this package reads them by stamp.

    Every writer of this package stamps at a Unix-epoch magnitude (19 digits); a camera whose frames are
    not files named by stamp (a LeRobot video) is not judged. The detail names the first pair that sorts
    the wrong way."""
    bad, first, judged = set(), None, 0
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        if not isinstance(cams, dict):
            continue  # cameras_present names an unreadable camera
        for name, cam in cams.items():
            if not hasattr(cam, "frame_names"):
                continue
            try:
                names = np.asarray(cam.frame_names(), dtype=str)
            except CameraError as e:
                bad.add(ep)
                first = first or str(e)
                continue
            judged += 1
            wrong = np.flatnonzero(names[:-1] > names[1:])
            if wrong.size:
                bad.add(ep)
                i = int(wrong[0])
                first = first or (f"episode {ep} camera {name}: {names[i + 1]} sorts before {names[i]}, which is "
                                  f"earlier ({wrong.size} such pairs)")
    if not judged and not bad:
        return nothing_to_judge("no camera of frame files named by stamp")
    return Outcome(not bad, f"{judged} cameras' frame names sort in time order (as openarm_dataset reads them)"
                   + (f"; {first}" if first else ""), sorted(bad), judged={"episode_cameras": judged})


FORM_CHECKS: list[tuple[str, CheckFn]] = [
    ("metadata", check_metadata),
    ("episode_folders", check_episode_folders),
    ("integrity", check_integrity),
    ("episode_summary", check_episode_summary),
    ("parquet_schema", check_parquet_schema),
    ("nulls", check_nulls),
    ("timestamps", check_timestamps),
    ("qpos_jumps", check_qpos_jumps),
    ("joint_limits", check_joint_limits),
    ("joint_units", check_joint_units),
    ("pose_quaternions", check_pose_quaternions),
    ("episode_length", check_episode_length),
    ("cameras_present", check_cameras_present),
    ("jpeg_frames", check_jpeg_frames),
    ("camera_rate", check_camera_rate),
    ("camera_span", check_camera_span),
    ("frame_name_order", check_frame_name_order),
    ("camera_coverage", check_camera_coverage),
]
