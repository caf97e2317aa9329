"""Checks that each episode's simulation sidecar is there, well formed, in range, agrees with itself and
with the parquet streams (``sim_episodes``, ``sim_schema``, ``sim_ranges``, ``sim_sidecar_agrees``,
``sim_streams_agree``).
"""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.atomic import TMP_PREFIX
from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.sim.replay import bitwise_differ, state_components
from openarm_sim_dataset.sim.scene import CUBE_NAMES, arm_index, cube_qpos_adr

from .check import Context, EpisodeCheck, Outcome
from .sim_model import ModelProblem, listed, model, recorded_cameras, sidecar_and_model, sim_block, split_model_problems


def _sidecar_problem(ctx: Context, ep: str, prep=None) -> str | None:
    """Why episode ``ep`` has no usable sidecar, or None."""
    side = ctx.sidecar(ep)
    return None if isinstance(side, dict) else side


def _episodes_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """Every listed episode has a readable, well-formed simulation sidecar (`sim/sidecar.npz`: every array
    present with its dtype and rank, their sizes agreeing wherever they recur, `frame_timestamp` strictly
    increasing), and no unlisted episode folder holds one.

    A folder of an uncommitted write (`.tmp-`) is `episode_folders`' concern."""
    missing = [ep for ep, problem in parts.items() if problem is not None]
    root = ctx.ds.root / layout.EPISODES_DIR
    # an uncommitted write's temporary folder (pathlib's * matches dot names) is episode_folders' finding
    listed = set(ctx.ds.episode_ids)
    orphans = sorted(p.parent.parent.name for p in root.glob(f"*/{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}")
                     if p.parent.parent.name not in listed
                     and not p.parent.parent.name.startswith(TMP_PREFIX)) if root.is_dir() else []
    n = len(ctx.episodes) - len(missing)
    detail = f"{n} sidecars for {len(ctx.episodes)} episodes"
    if missing:
        detail += f"; missing/unreadable: {parts[missing[0]]}"
    if orphans:
        detail += f"; {len(orphans)} sidecar(s) of unlisted episodes: {', '.join(orphans[:5])}"
    return Outcome(not missing and not orphans, detail, missing, judged={"sidecars": n})


check_sim_episodes = EpisodeCheck(_sidecar_problem, _episodes_reduce)


def _schema_prepare(ctx: Context) -> tuple:
    mujoco = import_mujoco()

    m = model(ctx)
    cams = recorded_cameras(ctx)
    size = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION)
    shapes = sidecar.expected_shapes(cams, m.nq, m.nv, m.nu, size)
    w, h = int(sim_block(ctx)["scene"]["width"]), int(sim_block(ctx)["scene"]["height"])
    return cams, shapes, w, h


def _schema_episode(ctx: Context, ep: str, prep: tuple) -> tuple[str, str | None]:
    """``("missing", why)`` without a usable sidecar, else ``("ok", first problem or None)``."""
    cams, shapes, w, h = prep
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return "missing", side
    problems = sidecar.check_arrays(side, shapes, ctx.sim_dir(ep))
    frames = ctx.frames(ep)
    if isinstance(frames, str):
        problems.append(frames)
    else:
        nf = len(side.get("step", []))
        for cam in cams:
            for key, dtype in ((f"depth_{cam}", np.float32), (f"labels_{cam}", np.uint8)):
                a = frames.get(key)
                if a is None:
                    problems.append(f"missing {key}")
                elif a.dtype != dtype or a.shape != (nf, h, w):
                    problems.append(f"{key} is {a.dtype}{a.shape}, expected {np.dtype(dtype)}{(nf, h, w)}")
    return "ok", (problems[0] if problems else None)


def _schema_reduce(ctx: Context, prep: tuple, parts: dict) -> Outcome:
    """Every episode's sidecar holds every array with its dtype (float64, `frame_timestamp` int64) and the
    shape the dataset's model gives (`qpos` nq wide, `qvel` nv, `physics_ctrl` nu, `state` and
    `initial_state` the size of MuJoCo's integration state, a pose per camera and frame), and its
    `frames.npz` holds, for every camera, `depth_<camera>` (float32) and `labels_<camera>` (uint8) as one
    image of the scene's size per frame.

    An episode without a usable sidecar fails."""
    shapes = prep[1]
    bad, first = [], None
    for ep, (kind, problem) in parts.items():
        if kind == "ok" and problem is not None:
            bad.append(ep)
            first = first or f"episode {ep}: {problem}"
    n = sum(kind == "ok" for kind, _ in parts.values())
    missing = [ep for ep, (kind, _) in parts.items() if kind == "missing"]
    if missing and not first:
        first = f"episode {missing[0]}: {parts[missing[0]][1]}"
    return Outcome(not bad and not missing and n > 0, f"{n} sidecars, {len(shapes)} arrays each" + (f"; {first}" if first else ""),
                   bad + missing, judged={"sidecars": n})


check_sim_schema = EpisodeCheck(_schema_episode, _schema_reduce, _schema_prepare)


def _rates_prepare(ctx: Context) -> tuple[int | None, list[str]]:
    """``(physics steps per frame that camera_hz and timestep_s make, what the block's rates contradict)``:
    ``timestep_s`` against the scene's ``timestep`` (the model's); a generated dataset's ``state_hz``
    against every declared obs/action arm rate and its ``camera_hz`` against every declared camera rate
    (``timestamps`` and ``camera_rate`` hold those to the stored stamps). A dataflow recording declares
    the rates its recorder measured: only its per-frame interval is checked."""
    sim = sim_block(ctx)
    problems = []
    try:
        dt, hz = float(sim["timestep_s"]), float(sim["camera_hz"])
    except (KeyError, TypeError, ValueError):
        return None, ["simulation.timestep_s / camera_hz missing or not numbers"]
    scene_dt = (sim.get("scene") or {}).get("timestep")
    if scene_dt is not None and scene_dt != dt:
        problems.append(f"simulation.timestep_s {dt!r} is not the scene's timestep {scene_dt!r}")
    every = round(1.0 / (hz * dt)) if hz > 0 and dt > 0 else None
    if not sidecar.recorded_live(sim):
        meta = ctx.ds.meta
        for kind in layout.KINDS:
            for side_ in layout.ARM_SIDES:
                got = meta.frequency(kind, "arms", side_)
                if got is not None and got != sim.get("state_hz"):
                    problems.append(f"frequencies.{kind}.arms.{side_} {got!r} is not simulation.state_hz "
                                    f"{sim.get('state_hz')!r}")
        for cam in recorded_cameras(ctx):
            got = meta.frequency("cameras", meta.stored_camera_name(cam)) if cam in meta.cameras else None
            if got is not None and got != hz:
                problems.append(f"frequencies.cameras.{cam} {got!r} is not simulation.camera_hz {hz!r}")
    return every, problems


def _ranges_episode(ctx: Context, ep: str, prep=None) -> tuple[int, str | None] | None:
    """(frames with object poses, first problem or None); None without a usable sidecar."""
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return None
    known = np.array(sorted(sidecar.LABELS), dtype=np.uint8)
    problems, frames = [], 0
    steps = side.get("step")
    every = prep[0] if prep else None
    if steps is not None and len(steps) > 1 and len(np.unique(np.diff(steps))) != 1:
        problems.append("frame interval not constant")
    elif steps is not None and len(steps) > 1 and every is not None and int(steps[1] - steps[0]) != every:
        problems.append(f"frames {int(steps[1] - steps[0])} physics steps apart, simulation.camera_hz and "
                        f"timestep_s make {every}")
    pose = side.get("object_pose")
    if pose is not None and pose.size:
        frames += len(pose)
        err = np.abs(np.linalg.norm(pose[..., 3:7], axis=-1) - 1)
        if np.max(err) > 1e-6:
            problems.append(f"object quaternions off unit norm by {np.max(err):.2g}")
    fr = ctx.frames(ep)
    if isinstance(fr, dict):
        for key, a in fr.items():
            if key.startswith("depth_") and not (np.all(np.isfinite(a)) and np.all(a > 0)):
                problems.append(f"{key}: non-finite or non-positive depth")
            if key.startswith("labels_") and not np.all(np.isin(np.unique(a), known)):
                problems.append(f"{key}: unknown labels {sorted(set(np.unique(a)) - set(known))}")
    return frames, (problems[0] if problems else None)


def _ranges_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """Every episode's sidecar is in range: its camera frames are a constant number of physics steps apart,
    the number `simulation.camera_hz` and `simulation.timestep_s` make; every cube quaternion of
    `object_pose` has unit norm within 1e-6; every depth pixel is finite and positive; every label pixel
    is a known label (0 to 7: background, floor, table, robot, red, green and blue cube, tray).

    The simulation block's rates must agree as well: `timestep_s` is the scene's timestep and, in a
    generated dataset, every declared obs and action arm rate is `state_hz` and every declared camera
    rate is `camera_hz` (a contradiction fails every episode). A dataset recorded live in a dataflow
    declares the rates its recorder measured: only its frame interval is checked. Episodes without a
    usable sidecar are `sim_episodes`' concern."""
    bad, first, frames = [], None, 0
    if prep and prep[1]:  # the rates every episode is read with
        return Outcome(False, "simulation block's rates contradict: " + "; ".join(prep[1][:3]), list(ctx.episodes))
    for ep, part in parts.items():
        if part is None:
            continue
        frames += part[0]
        if part[1] is not None:
            bad.append(ep)
            first = first or f"episode {ep}: {part[1]}"
    return Outcome(not bad, f"{frames} frames: constant interval of camera_hz, rates as declared, unit quaternions, "
                   "finite positive depth, known labels"
                   + (f"; {first}" if first else ""), bad, judged={"frames": frames})


check_sim_ranges = EpisodeCheck(_ranges_episode, _ranges_reduce, _rates_prepare)


def _streams_prepare(ctx: Context) -> tuple:
    # the arms' joint and actuator indices: a variation changes no joint or actuator, only cubes and looks
    m = model(ctx)
    dt_ns = int(round(float(sim_block(ctx)["timestep_s"]) * 1e9))
    return dt_ns, {s: arm_index(m, s) for s in layout.ARM_SIDES}, sidecar.recorded_live(sim_block(ctx))


def _streams_episode(ctx: Context, ep: str, prep: tuple) -> tuple[int, bool, int, int] | None:
    """(values compared, all equal, sidecar frames without their obs row, action rows outside the
    sidecar's steps) of episode ``ep``'s parquet streams against its sidecar. A generated episode has
    a row at every frame and no action outside; a dataflow recording may lack rows (the dataflow lost
    them: the timestamps check counts such gaps) and begin or end a few samples off the simulation
    node's episode, but every row it has at a frame's stamp or a step of the sidecar must equal the
    physics."""
    dt_ns, arms, live = prep
    side = ctx.sidecar(ep)
    if not isinstance(side, dict):
        return None
    compared = missing = outside = 0
    obs, act = ctx.streams(ep, "obs"), ctx.streams(ep, "action")
    if not isinstance(obs, dict) or not isinstance(act, dict):
        return 0, False, 0, 0
    ft = side["frame_timestamp"]
    base = int(ft[0]) - int(side["step"][0]) * dt_ns
    ok = True
    for s, a in arms.items():
        o = obs.get(f"arms/{s}/qpos")
        ac = act.get(f"arms/{s}/qpos")
        if o is None or ac is None:
            ok = False
            continue
        idx = np.searchsorted(o.timestamps, ft)
        found = (idx < len(o)) & (o.timestamps[np.minimum(idx, len(o) - 1)] == ft)
        expected = side["qpos"][found][:, a.qpos].astype(np.float32)
        missing += int((~found).sum())
        ok &= bool(found.all() or live) and np.array_equal(o.values[idx[found]], expected)
        steps = (ac.timestamps - base) // dt_ns
        inside = (steps >= 0) & (steps < len(side["physics_ctrl"]))
        tracked = side["physics_ctrl"][steps[inside]][:, a.actuators].astype(np.float32)
        # a dataflow's recorder and simulation node get start/end at different moments: its rows
        # outside the sidecar's steps are not the physics' to check
        outside += int((~inside).sum())
        ok &= bool(inside.sum() >= len(ac) - 1 or live) and np.array_equal(ac.values[inside], tracked)
        compared += len(expected) + int(inside.sum())
    return compared, bool(ok), missing, outside


def _streams_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """The parquet streams are the physics the sidecar recorded: each arm's obs `qpos` row at a frame's
    stamp equals, as float32, the sidecar's `qpos` of that arm's joints, and each action `qpos` row
    equals, as float32, the control applied (`physics_ctrl`) to that arm's actuators at the physics step
    its stamp falls in.

    In a generated dataset every frame has its obs row and at most one action row lies outside the
    sidecar's steps. A dataset recorded live in a dataflow may lack rows (the dataflow lost them:
    `timestamps` counts the gaps) and begin or end a few samples off the simulation node's episode; the
    detail counts such rows, and every row it has must still equal the physics. Episodes without a
    usable sidecar are `sim_episodes`' concern."""
    bad, compared, first, missing, outside = [], 0, None, 0, 0
    for ep, part in parts.items():
        if part is None:
            continue
        compared += part[0]
        missing += part[2]
        outside += part[3]
        if not part[1]:
            bad.append(ep)
            first = first or f"episode {ep}: parquet streams differ from the sidecar"
    lost = f"; {missing} sidecar frame(s) without their obs row (lost by the dataflow)" if missing and prep[2] else ""
    if outside and prep[2]:
        lost += f"; {outside} action row(s) outside the sidecar's steps (recorded before or after the simulation node's episode)"
    return Outcome(not bad and compared > 0, f"{compared} obs frames and action samples equal the sidecar's float32"
                   + lost + (f"; {first}" if first else ""), bad, judged={"samples": compared})


check_sim_streams_agree = EpisodeCheck(_streams_episode, _streams_reduce, _streams_prepare)


#: The state vector's time (MuJoCo's running sum of timesteps) may differ from ``step x timestep`` (the
#: sidecar's ``time``) by rounding: 1e-9 s (measured: < 1e-11 s over 12 s episodes).
TIME_TOLERANCE_S = 1e-9


# sim_sidecar_agrees: every fact the sidecar stores twice against its twin, per episode: object_pose
# against the cubes' free joints in qpos; qpos, qvel and time against the qpos/qvel/time components of
# the stored state vector (time within rounding, and exactly step x timestep); each camera pose against a kinematics pass
# of the stored state on the episode's own model; frame_timestamp against every camera's file stamps
# and against the steps (one timestep apart); the frame count against every camera's. All bitwise: the
# recorder wrote each twin from the same numbers.
def _agrees_episode(ctx: Context, ep: str, prep=None) -> tuple[int, list[str]] | ModelProblem | None:
    """(facts compared, what differs: each naming the array, the frame and its twin) of episode ``ep``."""
    mujoco = import_mujoco()

    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    size = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION)
    if side["state"].shape[1:] != (size,) or side["qpos"].shape[1:] != (m.nq,) or side["qvel"].shape[1:] != (m.nv,):
        return 0, ["state/qpos/qvel are not of the episode's model (sim_schema says which)"]
    out: list[str] = []
    compared = 0

    def first_frame(name: str, a: np.ndarray, b: np.ndarray, twin: str) -> None:
        nonlocal compared
        compared += int(a.size)
        if a.shape != b.shape:
            out.append(f"{name} has shape {a.shape}, {twin} {b.shape}")
            return
        rows = bitwise_differ(a, b).reshape(len(a), -1).any(axis=1)
        if rows.any():
            k = int(np.argmax(rows))
            out.append(f"{name} frame {k} differs from {twin}")

    state = side["state"]
    parts = {name: (i, j) for name, i, j in state_components(m)}
    for key in ("qpos", "qvel"):
        if key in parts:
            i, j = parts[key]
            first_frame(key, side[key], state[:, i:j], f"the state vector's {key}")
    try:  # a trimmed episode (dataset-edit) counts its steps from a later step of its physics
        first = sidecar.first_step(side, ctx.sim_dir(ep) / sidecar.SIDECAR_FILE)
    except sidecar.SidecarError as e:
        return 0, [str(e)]
    first_frame("time", side["time"], (side["step"] + first) * float(m.opt.timestep),
                "(step + trim first_step) x timestep" if first else "step x timestep")
    if "time" in parts:  # MuJoCo's time is a running sum of timesteps: equal to step x timestep within rounding
        i, _ = parts["time"]
        compared += len(state)
        off = np.flatnonzero(np.abs(state[:, i] - side["time"]) > TIME_TOLERANCE_S)
        if off.size:
            k = int(off[0])
            out.append(f"time frame {k} ({side['time'][k]!r} s) differs from the state vector's ({state[k, i]!r} s) "
                       f"by more than {TIME_TOLERANCE_S:g} s")
    pose = side["object_pose"]
    for c, name in enumerate(CUBE_NAMES[: pose.shape[1]]):
        a, _ = cube_qpos_adr(m, name)
        first_frame(f"object_pose[{name}]", pose[:, c], side["qpos"][:, a:a + 7], "qpos of its free joint")
    cams = recorded_cameras(ctx)
    d = mujoco.MjData(m)
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    ids = {c: m.camera(c).id for c in cams if f"cam_pos_{c}" in side}
    pos = {c: np.empty((len(state), 3)) for c in ids}
    mat = {c: np.empty((len(state), 9)) for c in ids}
    for k in range(len(state)):  # a kinematics pass: ~10 us per frame
        mujoco.mj_setState(m, d, state[k], spec)
        mujoco.mj_kinematics(m, d)
        mujoco.mj_camlight(m, d)
        for c, i in ids.items():
            pos[c][k] = d.cam_xpos[i]
            mat[c][k] = d.cam_xmat[i]
    for c in ids:
        first_frame(f"cam_pos_{c}", side[f"cam_pos_{c}"], pos[c], "the kinematics of the stored state")
        first_frame(f"cam_mat_{c}", side[f"cam_mat_{c}"], mat[c], "the kinematics of the stored state")
    ft = side["frame_timestamp"]
    dt_ns = int(round(float(m.opt.timestep) * 1e9))
    steps = side["step"].astype(np.int64)
    if len(ft):
        off = np.flatnonzero(ft - ft[0] != (steps - steps[0]) * dt_ns)
        compared += len(ft)
        if off.size:
            out.append(f"frame_timestamp frame {int(off[0])} is not {dt_ns} ns per step from frame 0")
    files = ctx.cameras(ep)
    if isinstance(files, str):
        out.append(files)
    else:
        for c in cams:
            cam = files.get(c)
            if cam is None:
                out.append(f"camera {c} has no files")
                continue
            compared += len(ft)
            if len(cam.timestamps) != len(ft):
                out.append(f"camera {c} has {len(cam.timestamps)} frames, the sidecar's per-frame arrays {len(ft)}")
            elif (bad := np.flatnonzero(np.asarray(cam.timestamps, np.int64) != ft)).size:
                k = int(bad[0])
                out.append(f"frame_timestamp frame {k} ({int(ft[k])} ns) differs from camera {c}'s file "
                           f"({int(cam.timestamps[k])} ns)")
    return compared, out


def _agrees_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """Every fact the sidecar stores twice equals its twin bit for bit: `object_pose` equals the cubes'
    free joints in `qpos`; `qpos` and `qvel` equal the stored state vector's; `time` equals `step` times
    the timestep, and the state vector's time within 1e-9 s; each camera pose (`cam_pos_*`, `cam_mat_*`)
    equals a kinematics pass of the stored state on the episode's model; `frame_timestamp` advances one
    timestep per step and equals every camera's file stamps, one frame per sidecar row.

    The state vector's time is MuJoCo's running sum of timesteps, hence its tolerance. The steps of an
    episode trimmed by `dataset-edit` count from its trim record's first step. A failure names the
    array, the first frame that differs and its twin. An episode without a usable sidecar, or whose
    model cannot be rebuilt as recorded, fails."""
    parts, bad, problems = split_model_problems(parts)
    compared, first = 0, None
    for ep, part in parts.items():
        if part is None:
            continue
        compared += part[0]
        if part[1]:
            bad.append(ep)
            first = first or listed(ep, part[1])
    missing = [ep for ep, part in parts.items() if part is None]
    detail = (f"{compared} stored values equal their twins bitwise (object_pose/qpos, qpos/qvel/time/state, camera "
              f"poses/kinematics of the stored state, frame_timestamp/steps/camera files, frame counts)"
              + (f"; first difference: {first}" if first else "")
              + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else "")
              + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else ""))
    return Outcome(not bad and not missing and compared > 0, detail, bad + missing, judged={"values": compared})


check_sim_sidecar_agrees = EpisodeCheck(_agrees_episode, _agrees_reduce)
