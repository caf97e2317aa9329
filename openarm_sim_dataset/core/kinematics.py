"""Arm state representations computed on the fly: qpos <-> pose, rot6d (files are never modified).

Conventions (those of ``openarm-control`` and ``openarm_dataset``):

* ``qpos``  (8,): joint1..joint7 in radians, gripper (finger joint, metres).
* ``pose``  (8,): x, y, z in metres, qw, qx, qy, qz (unit quaternion), gripper — the pose of the
  ``{side}_ee_control_point`` site expressed in the ``arm_origin`` site frame of the OpenArm cell
  model (``openarm_mujoco.v2.openarm_cell_xml()``), other joints at the ``home`` keyframe.
* ``rot6d`` (10,): x, y, z, r11, r21, r31, r12, r22, r32 (first two columns of the rotation matrix
  of the pose), gripper.

Forward kinematics runs ``mj_kinematics`` on that MuJoCo model, one row at a time (about 10 us a
row). Inverse kinematics is damped least squares on ``mj_jacSite``, seeded from the recorded qpos and
then from the previous row's solution; rows it cannot solve keep the best iterate and are counted
(the caller warns). The gripper passes through unchanged.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import numpy as np

from . import layout
from .dataframe import stream_dataframe
from .gl import import_mujoco
from .streams import Stream

STATES = ("qpos", "pose", "rot6d")
ROT6D_JOINTS = ("x", "y", "z", "r11", "r21", "r31", "r12", "r22", "r32", "gripper")
STATE_JOINTS = {"qpos": layout.ARM_JOINTS, "pose": layout.POSE_JOINTS, "rot6d": ROT6D_JOINTS}
SIDES = layout.ARM_SIDES

_lock = threading.Lock()
_instance: ArmKinematics | None = None


def quat_to_rot6d(pose: np.ndarray) -> np.ndarray:
    """(N, 8) pose rows -> (N, 10) rot6d rows (vectorised; quaternions normalised first)."""
    pose = np.asarray(pose, dtype=np.float64)
    q = pose[:, 3:7] / np.linalg.norm(pose[:, 3:7], axis=1, keepdims=True)
    w, x, y, z = q.T
    out = np.empty((len(pose), 10), dtype=np.float64)
    out[:, :3] = pose[:, :3]
    out[:, 3] = 1 - 2 * (y * y + z * z)
    out[:, 4] = 2 * (x * y + w * z)
    out[:, 5] = 2 * (x * z - w * y)
    out[:, 6] = 2 * (x * y - w * z)
    out[:, 7] = 1 - 2 * (x * x + z * z)
    out[:, 8] = 2 * (y * z + w * x)
    out[:, 9] = pose[:, 7]
    return out.astype(np.float32)


@dataclass
class IKResult:
    qpos: np.ndarray  # (N, 8) float32
    unsolved: np.ndarray  # (N,) bool: rows outside the tolerances after max_iters
    pos_error: np.ndarray  # (N,) metres
    rot_error: np.ndarray  # (N,) radians


def _mujoco_warning(message: str) -> None:
    if "empty prefix" not in message:  # known and harmless for the packaged model
        warnings.warn(f"MuJoCo: {message.strip()}", stacklevel=2)


class ArmKinematics:
    """FK/IK for both OpenArm arms on the MuJoCo cell model (see the module docstring)."""

    def __init__(self, xml: str | None = None):
        import openarm_mujoco.v2 as om  # MuJoCo's model package: heavy, only when FK/IK is first asked for

        mujoco = import_mujoco()

        self._mj = mujoco
        # the packaged cell model attaches with an empty prefix: MuJoCo's default handler would
        # append that warning to MUJOCO_LOG.TXT in the caller's folder; route warnings to Python
        previous = mujoco.get_mju_user_warning()
        mujoco.set_mju_user_warning(_mujoco_warning)
        try:
            self.model = mujoco.MjModel.from_xml_path(xml or om.openarm_cell_xml())
        finally:
            mujoco.set_mju_user_warning(previous)
        self.data = mujoco.MjData(self.model)
        key = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_KEY, "home")
        if key >= 0:
            mujoco.mj_resetDataKeyframe(self.model, self.data, key)
        self.home_qpos = self.data.qpos.copy()
        self.resolver = om.JointResolver(self.model)
        self.origin = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, "arm_origin")
        self.site = {s: mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, f"{s}_ee_control_point") for s in SIDES}
        if self.origin < 0 or min(self.site.values()) < 0:
            raise ValueError("the OpenArm model lacks the arm_origin or *_ee_control_point sites")
        self.dofs = {}
        self.qadr = {}
        for s in SIDES:
            jids = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, f"openarm_{s}_joint{i}") for i in range(1, 8)]
            self.dofs[s] = np.array([self.model.jnt_dofadr[j] for j in jids])
            self.qadr[s] = np.array([self.model.jnt_qposadr[j] for j in jids])
        self.lower = {s: self.model.jnt_range[[self._jid(s, i) for i in range(1, 8)], 0] for s in SIDES}
        self.upper = {s: self.model.jnt_range[[self._jid(s, i) for i in range(1, 8)], 1] for s in SIDES}
        self._lock = threading.Lock()

    def _jid(self, side: str, i: int) -> int:
        return self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_JOINT, f"openarm_{side}_joint{i}")

    # --------------------------------------------------------------------- FK
    def _site_pose(self, side: str) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), rotation (3,3)) of the EE site in the arm_origin frame (after kinematics)."""
        d = self.data
        ro = d.site_xmat[self.origin].reshape(3, 3)
        p = ro.T @ (d.site_xpos[self.site[side]] - d.site_xpos[self.origin])
        r = ro.T @ d.site_xmat[self.site[side]].reshape(3, 3)
        return p, r

    def qpos_to_pose(self, side: str, qpos: np.ndarray) -> np.ndarray:
        """(N, 8) qpos rows -> (N, 8) pose rows (float32; see the module docstring for frames)."""
        mj = self._mj
        qpos = np.asarray(qpos, dtype=np.float64)
        out = np.empty((len(qpos), 8), dtype=np.float64)
        quat = np.empty(4)
        with self._lock:
            self.data.qpos[:] = self.home_qpos
            for i, row in enumerate(qpos):
                self.resolver.set_qpos(self.data.qpos, row, side)
                mj.mj_kinematics(self.model, self.data)
                p, r = self._site_pose(side)
                mj.mju_mat2Quat(quat, r.reshape(-1))
                out[i, :3] = p
                out[i, 3:7] = quat
            out[:, 7] = qpos[:, 7] if len(qpos) else 0
        return out.astype(np.float32)

    # --------------------------------------------------------------------- IK
    def pose_to_qpos(self, side: str, pose: np.ndarray, seed: np.ndarray | None = None, max_iters: int = 200,
                     pos_tol: float = 1e-4, rot_tol: float = 1e-3, damping: float = 1e-4) -> IKResult:
        """(N, 8) pose rows -> IKResult; row k starts from row k-1's solution (row 0 from ``seed``,
        a qpos row, else the home keyframe). Tolerances in metres and radians."""
        mj = self._mj
        pose = np.asarray(pose, dtype=np.float64)
        n = len(pose)
        out = np.empty((n, 8), dtype=np.float64)
        unsolved = np.zeros(n, dtype=bool)
        perr = np.zeros(n)
        rerr = np.zeros(n)
        jacp = np.zeros((3, self.model.nv))
        jacr = np.zeros((3, self.model.nv))
        cols = self.dofs[side]
        qadr = self.qadr[side]
        lo, hi = self.lower[side], self.upper[side]
        with self._lock:
            self.data.qpos[:] = self.home_qpos
            q0 = self.home_qpos[qadr].copy() if seed is None else np.asarray(seed, dtype=np.float64)[:7].copy()
            last_good = q0
            q = q0
            for k in range(n):
                target_p = pose[k, :3]
                tq = pose[k, 3:7] / np.linalg.norm(pose[k, 3:7])
                target_r = np.empty(9)
                mj.mju_quat2Mat(target_r, tq)
                target_r = target_r.reshape(3, 3)
                best = (np.inf, q.copy(), np.inf, np.inf)
                # start from the previous row's solution; if that fails, from the last solved row
                # and from the seed (an unreachable row must not derail the rows after it)
                for start in _unique_starts(q, last_good, q0):
                    q = start.copy()
                    for _ in range(max_iters):
                        self.data.qpos[qadr] = q
                        mj.mj_kinematics(self.model, self.data)
                        mj.mj_comPos(self.model, self.data)
                        p, r = self._site_pose(side)
                        ro = self.data.site_xmat[self.origin].reshape(3, 3)
                        e_p = target_p - p
                        angle_axis = _log_so3(target_r @ r.T)
                        ep, er = float(np.linalg.norm(e_p)), float(np.linalg.norm(angle_axis))
                        score = ep + 0.1 * er
                        if score < best[0]:
                            best = (score, q.copy(), ep, er)
                        if ep < pos_tol and er < rot_tol:
                            break
                        mj.mj_jacSite(self.model, self.data, jacp, jacr, self.site[side])
                        j = np.vstack([ro.T @ jacp[:, cols], ro.T @ jacr[:, cols]])
                        e = np.concatenate([e_p, angle_axis])
                        dq = j.T @ np.linalg.solve(j @ j.T + damping * np.eye(6), e)
                        q = np.clip(q + dq, lo, hi)
                    if best[2] < pos_tol and best[3] < rot_tol:
                        break
                _score, q, ep, er = best
                out[k, :7] = q
                out[k, 7] = pose[k, 7]
                perr[k], rerr[k] = ep, er
                unsolved[k] = not (ep < pos_tol and er < rot_tol)
                if unsolved[k]:
                    q = last_good
                else:
                    last_good = q
        return IKResult(out.astype(np.float32), unsolved, perr, rerr)


def _unique_starts(*starts: np.ndarray) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for st in starts:
        if not any(np.array_equal(st, o) for o in out):
            out.append(st)
    return out


def _log_so3(r: np.ndarray) -> np.ndarray:
    """Rotation vector (axis * angle, radians) of a rotation matrix."""
    c = np.clip((np.trace(r) - 1) / 2, -1.0, 1.0)
    angle = np.arccos(c)
    v = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if angle < 1e-9:
        return v / 2
    if np.pi - angle < 1e-6:
        # 180 degrees: axis from the diagonal
        axis = np.sqrt(np.maximum((np.diag(r) + 1) / 2, 0))
        axis *= np.sign(v + (v == 0))
        return axis * angle
    return v * angle / (2 * np.sin(angle))


def arm_kinematics() -> ArmKinematics:
    """The process-wide ArmKinematics (the MuJoCo model is built once, on first use)."""
    global _instance
    with _lock:
        if _instance is None:
            _instance = ArmKinematics()
        return _instance


def convert_rows(side: str, rows: dict[str, np.ndarray], state: str, seed: np.ndarray | None = None,
                 what: str = "") -> np.ndarray:
    """One arm's rows in the ``state`` representation from the recorded attributes ``rows``
    (``qpos`` and/or ``pose``, each (N, 8)). IK (pose -> qpos) warns about rows it cannot solve."""
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, not {state!r}")
    if state in rows:
        return np.asarray(rows[state], dtype=np.float32)
    if state == "qpos":
        if "pose" not in rows:
            raise KeyError(f"{what}: neither qpos nor pose is recorded")
        res = arm_kinematics().pose_to_qpos(side, rows["pose"], seed=seed)
        if res.unsolved.any():
            warnings.warn(f"{what}: inverse kinematics did not reach 0.1 mm / 1 mrad for {int(res.unsolved.sum())} "
                          f"of {len(res.unsolved)} sample(s) (largest error {res.pos_error.max() * 1000:.2f} mm, "
                          f"{res.rot_error.max():.4f} rad); best iterate kept", stacklevel=2)
        return res.qpos
    pose = rows.get("pose")
    if pose is None:
        if "qpos" not in rows:
            raise KeyError(f"{what}: neither qpos nor pose is recorded")
        pose = arm_kinematics().qpos_to_pose(side, rows["qpos"])
    return np.asarray(pose, dtype=np.float32) if state == "pose" else quat_to_rot6d(pose)


# ----------------------------------------------------------------------- Dataset wrappers
_ARM_STATE_ATTRS = ("qpos", "pose")


def represent_streams(ds, episode, kind: str, streams: dict, state: str) -> dict:
    """``streams`` (from ``ds.streams(episode, kind)``) with each arm's ``qpos``/``pose`` replaced by one
    ``<arms>/<side>/<state>`` stream (recorded if present, else converted). Other streams unchanged."""
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, not {state!r}")
    arms = {e.name for e in ds.meta.embodiments if e.id == layout.EMBODIMENT_OPENARM}
    out, groups = {}, {}
    for key, s in streams.items():
        prefix, attr = key.rsplit("/", 1)
        if prefix.split("/", 1)[0] in arms and attr in _ARM_STATE_ATTRS:
            groups.setdefault(prefix, {})[attr] = s
        else:
            out[key] = s
    obs = streams if kind == "obs" else None
    for prefix, rec in groups.items():
        side = prefix.rsplit("/", 1)[1]
        # a recorded pose is the source of rot6d (as in openarm_dataset and in the sampling path's
        # convert_rows); FK only when no pose was recorded
        src = rec.get(state) or (rec.get("pose") or rec.get("qpos") if state != "qpos" else rec.get("pose"))
        if state in rec:
            values = rec[state].values
        else:
            seed = None
            if state == "qpos":
                obs = obs if obs is not None else ds.streams(episode, "obs")
                q = obs.get(f"{prefix}/qpos")
                if q is not None and len(q.timestamps):
                    seed = q.values[min(int(np.searchsorted(q.timestamps, src.timestamps[0])), len(q.timestamps) - 1)]
            values = convert_rows(side, {src.key.rsplit("/", 1)[1]: src.values}, state, seed=seed,
                                  what=f"{src.path} ({kind} {prefix})")
        key = f"{prefix}/{state}"
        out[key] = Stream(key, src.path, src.timestamps, np.asarray(values, dtype=np.float32), STATE_JOINTS[state])
    return out


def load_obs(ds, episode, state: str, use_unixtime: bool = False) -> dict:
    """``ds.load_obs`` with the arm state in the ``state`` representation (DataFrames; files untouched)."""
    return {k: stream_dataframe(s, use_unixtime) for k, s in
            represent_streams(ds, episode, "obs", ds.streams(episode, "obs"), state).items()}


def load_action(ds, episode, state: str, use_unixtime: bool = False) -> dict:
    """``ds.load_action`` with the arm state in the ``state`` representation."""
    return {k: stream_dataframe(s, use_unixtime) for k, s in
            represent_streams(ds, episode, "action", ds.streams(episode, "action"), state).items()}


def sample(ds, hz: float, state: str, episode=None, align: str = "previous", decode: bool = False):
    """``ds.sample`` with ``obs``/``action`` arm entries in the ``state`` representation: the
    recorded qpos/pose rows picked at each grid point are converted per episode in one batch."""
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, not {state!r}")
    batch: list = []
    for s in ds.sample(hz, episode=episode, align=align, decode=decode):
        if batch and batch[0].episode != s.episode:
            yield from convert_batch(ds, batch, state)
            batch = []
        batch.append(s)
    if batch:
        yield from convert_batch(ds, batch, state)


def convert_batch(ds, samples: list, state: str):
    """``samples`` (consecutive samples of one episode) with each arm's ``qpos``/``pose`` entries of obs and
    action replaced by one ``<arms>/<side>/<state>`` entry, converted in one batch (the samples' dicts are
    changed in place and the samples yielded in order)."""
    arms = {e.name for e in ds.meta.embodiments if e.id == layout.EMBODIMENT_OPENARM}
    for kind in ("obs", "action"):
        keys = list(getattr(samples[0], kind))
        prefixes = {}
        for key in keys:
            prefix, attr = key.rsplit("/", 1)
            if prefix.split("/", 1)[0] in arms and attr in _ARM_STATE_ATTRS:
                prefixes.setdefault(prefix, []).append(attr)
        for prefix, attrs in prefixes.items():
            rows = {a: np.stack([getattr(s, kind)[f"{prefix}/{a}"] for s in samples]) for a in attrs}
            seed = samples[0].obs.get(f"{prefix}/qpos")
            values = convert_rows(prefix.rsplit("/", 1)[1], rows, state, seed=seed,
                                  what=f"{ds.root}: episode {samples[0].episode} {kind} {prefix}")
            for s, v in zip(samples, values):
                d = getattr(s, kind)
                for a in attrs:
                    del d[f"{prefix}/{a}"]
                d[f"{prefix}/{state}"] = v
    yield from samples
