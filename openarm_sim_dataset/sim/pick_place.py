"""Scripted pick-and-place of the red cube into the tray with the right arm.

The controller is a deterministic, step-wise state machine: it depends only on
the model, the initial state and an :class:`EpisodeParams`.  A recorder drives it::

    model = build_model(cfg)
    ctl = PickPlace(model, params)
    data = mujoco.MjData(model)
    set_initial_state(model, data, params)
    ctl.reset(data)
    while not ctl.done:
        data.ctrl[:] = ctl.command(data)     # full nu-vector for this physics step
        mujoco.mj_step(model, data)
    ctl.outcome, ctl.knocked_over

:func:`run_episode` does exactly this (with a time bound and an ``on_step`` hook).

Phases (right arm; the left arm holds :data:`LEFT_HOME`): ``approach`` (joint-space
min-jerk to 15 cm above the *estimated* cube, gripper opening) -> ``descend``
(straight Cartesian line, fingers down) -> ``close`` -> [grasp check] -> ``lift``
(straight line) -> [lift check] -> ``carry`` (joint-space min-jerk to 15 cm above
the tray, checked not to dip more than 9 cm below that height) -> [carry check] -> ``lower``
(straight line) -> ``release`` -> ``retreat`` -> ``settle`` -> judge.  The estimated cube pose is the true pose
plus ``sigma`` times a standard-normal draw stored in the params (x, y in m; yaw
error = ``sigma * YAW_NOISE_PER_M`` rad per unit draw); the grasp yaw is the
estimated yaw wrapped to [-45, 45) deg using the cube's 90 deg symmetry.

Modes: ``params.retry = False`` ("blind"): checks are only observed, never acted
on; ``retry = True``: a failed grasp check opens, rises, re-estimates with the
second perception draw and tries once more; a second failure aborts with
``grasp_missed``; failed lift/carry checks abort with ``dropped_*``.

Outcomes: ``success``, ``ik_failed``, ``grasp_missed``, ``dropped_lifting``,
``dropped_carrying``, ``missed_tray``, ``never_picked``; plus ``knocked_over``
(success, but the cube rests on another face than at the start).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import mujoco
import numpy as np

from .ik import IKSolver
from .scene import (
    CUBE_NAMES,
    CUBE_SIZE,
    ArmIndex,
    SceneConfig,
    arm_index,
    cube_half_size,
    cube_qpos_adr,
)
from .trajectory import MinJerkPath

__all__ = [
    "OUTCOMES",
    "GRASP_DEPTH",
    "APPROACH_HEIGHT",
    "YAW_NOISE_PER_M",
    "GRIPPER_OPEN",
    "GRIPPER_CLOSED",
    "LEFT_HOME",
    "EpisodeParams",
    "EpisodeResult",
    "PickPlace",
    "topdown_quat",
    "wrap_yaw_90",
    "ready_qpos",
    "set_initial_state",
    "run_episode",
]

OUTCOMES: Tuple[str, ...] = (
    "success", "ik_failed", "grasp_missed", "dropped_lifting", "dropped_carrying", "missed_tray", "never_picked",
)

#: Height (m) of the ee control point above the cube centre when grasping (finger pads span 0.15-0.17 m below it).
GRASP_DEPTH = 0.152
#: Approach / carry height above the grasp pose (m).
APPROACH_HEIGHT = 0.15
#: Yaw perception error (rad) per metre of position sigma (10 mm sigma -> 0.05 rad = 2.9 deg).
YAW_NOISE_PER_M = 5.0
#: Gripper commands (finger_joint1, rad) per side: open and closed.
GRIPPER_OPEN: Dict[str, float] = {"right": -0.5, "left": 0.5}
GRIPPER_CLOSED: Dict[str, float] = {"right": 0.0, "left": 0.0}
#: Left-arm hold pose (joint1..7, rad): upper arm down (slightly abducted), elbow 90 deg, forearm forward.
LEFT_HOME = np.array([0.0, -0.3, 0.0, 1.5708, 0.0, 0.0, 0.0])

# Phase durations (s).
T_APPROACH, T_DESCEND, T_CLOSE, T_LIFT, T_CARRY, T_LOWER, T_RELEASE, T_RETREAT, T_SETTLE = (
    1.2, 0.8, 0.5, 0.8, 1.2, 0.8, 0.4, 0.6, 0.4)
T_REOPEN, T_REASCEND = 0.3, 0.6
N_KNOTS = 6
#: Largest joint change (rad) allowed between consecutive IK knots of a Cartesian segment.
MAX_KNOT_JUMP = 0.6
#: Largest dip (m) of the ee below the approach height allowed during the joint-space carry.
CARRY_DIP = 0.09
#: Place yaw offsets (rad, relative to the grasp yaw) tried in order (the tray accepts any yaw).
PLACE_YAW_OFFSETS: Tuple[float, ...] = tuple(math.radians(a) for a in (0, 45, -45, 90, -90, 135, -135, 180))
#: Gripper yaw offsets (rad) tried in order on top of the wrapped cube yaw; all grasp the
#: cube equally (90 deg symmetry) but the right arm reaches them differently.
YAW_OFFSETS: Tuple[float, ...] = (math.pi / 2, math.pi, 0.0, -math.pi / 2)


@dataclass(frozen=True)
class EpisodeParams:
    """Everything that defines one episode (besides the model).

    Attributes:
        cube_poses: per cube (red, green, blue) ``(x, y, yaw)`` on the table (world m, rad).
        perception_draws: (2, 3) standard-normal draws (dx, dy, dyaw) for the first
            estimate and the retry estimate; scaled by ``sigma``.
        sigma: perception position error std (m).
        retry: act on checks, with one grasp retry (True) or run blind (False).
        ik_seed: seed of the IK restart generator.
        meta: seed inputs and other JSON-able metadata (``{"seed":..,"index":..,..}``).
    """

    cube_poses: Tuple[Tuple[float, float, float], ...]
    perception_draws: Tuple[Tuple[float, float, float], ...] = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    sigma: float = 0.0
    retry: bool = False
    ik_seed: int = 0
    meta: Dict[str, object] = field(default_factory=dict, hash=False, compare=False)


@dataclass
class EpisodeResult:
    """Result of :func:`run_episode`.

    Attributes:
        outcome: one of :data:`OUTCOMES`.
        knocked_over: success with the cube on another face.
        success: ``outcome == "success"``.
        attempts: grasp attempts made (1 or 2).
        steps: physics steps taken; ``sim_time``: final ``data.time`` (s).
        cube_final: final red-cube pose (7,): position (m) + quaternion (wxyz).
        initial_state: ``mj_getState(mjSTATE_INTEGRATION)`` before the first step.
        final_qpos, final_qvel: state at the end.
        estimates: per attempt the estimated cube ``(x, y, yaw)``.
        phase_log: (phase name, first step index) in order.
    """

    outcome: str
    knocked_over: bool
    success: bool
    attempts: int
    steps: int
    sim_time: float
    cube_final: np.ndarray
    initial_state: np.ndarray
    final_qpos: np.ndarray
    final_qvel: np.ndarray
    estimates: List[Tuple[float, float, float]]
    phase_log: List[Tuple[str, int]]


def topdown_quat(yaw: float) -> np.ndarray:
    """World quaternion (wxyz) of the ee control point with fingers straight down, rotated ``yaw`` about +z.

    At zero joint angles the ee frame is world-aligned with the fingers along -z,
    so a top-down grasp is a pure rotation about z.  The fingers close along the
    frame's y axis.
    """
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def wrap_yaw_90(yaw: float) -> float:
    """Wrap ``yaw`` (rad) to [-pi/4, pi/4) using the cube's 90 deg symmetry."""
    q = math.pi / 2
    return (yaw + math.pi / 4) % q - math.pi / 4


_READY_CACHE: Dict[int, np.ndarray] = {}


def ready_qpos(model: mujoco.MjModel, cfg: Optional[SceneConfig] = None) -> np.ndarray:
    """Right-arm start pose (7,): fingers down, yaw YAW_OFFSETS[0], 15 cm above a grasp at the cube-area centre.

    The cube-area centre and table height are read from the model (site ``cube_area_center``);
    ``cfg`` is accepted for API symmetry and ignored.
    """
    key = hashlib.sha256(model.body_pos.tobytes() + model.site_pos.tobytes() + model.geom_size.tobytes()
                         + model.jnt_range.tobytes()).hexdigest()
    if key in _READY_CACHE:
        return _READY_CACHE[key].copy()
    ik = IKSolver(model, "right", restarts=30)
    cx, cy, th = model.site("cube_area_center").pos
    z = th + CUBE_SIZE / 2 + GRASP_DEPTH + APPROACH_HEIGHT  # nominal cube: the start pose never varies
    seed = np.array([0.5, 0.3, 0.0, 1.5, 0.0, 0.0, 0.0])
    q, ok, err = ik.solve([cx, cy, z], topdown_quat(YAW_OFFSETS[0]), seed, np.random.default_rng(0))
    if not ok:
        raise RuntimeError(f"ready pose unreachable (err {err:.4f})")
    _READY_CACHE[key] = q
    return q.copy()


def _scene_cfg_from_model(model: mujoco.MjModel) -> Tuple[float, np.ndarray, np.ndarray]:
    # Scene geometry the controller needs, read back from the model (robust to SceneConfig changes).
    table = model.geom("table_top")
    th = float(model.geom_pos[table.id][2] + model.geom_size[table.id][2] + model.body("table").pos[2])
    tray = model.body("tray")
    return th, np.array(tray.pos[:2], float), np.array(model.site("tray_center").size[:2], float)


def set_initial_state(model: mujoco.MjModel, data: mujoco.MjData, params: EpisodeParams,
                      cfg: Optional[SceneConfig] = None) -> None:
    """Reset ``data`` and set the episode's initial state (arms at start poses, cubes on the table)."""
    mujoco.mj_resetData(model, data)
    th, _, _ = _scene_cfg_from_model(model)
    right, left = arm_index(model, "right"), arm_index(model, "left")
    qr = ready_qpos(model, cfg)
    data.qpos[right.qpos[:7]] = qr
    data.qpos[left.qpos[:7]] = LEFT_HOME
    data.ctrl[right.actuators[:7]] = qr
    data.ctrl[left.actuators[:7]] = LEFT_HOME
    data.ctrl[right.actuators[7]] = GRIPPER_CLOSED["right"]
    data.ctrl[left.actuators[7]] = GRIPPER_CLOSED["left"]
    for name, (x, y, yaw) in zip(CUBE_NAMES, params.cube_poses):
        a, _ = cube_qpos_adr(model, name)
        data.qpos[a:a + 3] = (x, y, th + cube_half_size(model, name))
        data.qpos[a + 3:a + 7] = topdown_quat(yaw)
    mujoco.mj_forward(model, data)


class _Phase:
    __slots__ = ("name", "path", "steps", "check")

    def __init__(self, name: str, path: MinJerkPath, steps: int, check: Optional[str] = None) -> None:
        self.name, self.path, self.steps, self.check = name, path, steps, check


class PickPlace:
    """Step-wise pick-and-place controller (see module docstring).

    After :meth:`reset`, call :meth:`command` once per physics step; it returns
    the full ``(nu,)`` control vector for that step.  The per-arm targets the
    controller is tracking (7 joint angles + gripper command, rad) are exposed in
    :attr:`targets` (``{"right": (8,), "left": (8,)}``), updated by each call.
    """

    def __init__(self, model: mujoco.MjModel, params: EpisodeParams) -> None:
        self.model = model
        self.params = params
        self.dt = float(model.opt.timestep)
        self.right: ArmIndex = arm_index(model, "right")
        self.left: ArmIndex = arm_index(model, "left")
        self.ik = IKSolver(model, "right")
        self.table_z, self.tray_xy, self.tray_half = _scene_cfg_from_model(model)
        self.cube_body = model.body(CUBE_NAMES[0]).id
        self.cube_geom = int(np.flatnonzero(model.geom_bodyid == self.cube_body)[0])
        self.cube_qadr, _ = cube_qpos_adr(model, CUBE_NAMES[0])
        self.cube_half = cube_half_size(model, CUBE_NAMES[0])  # episodes may vary it: read, never assumed
        self._inner = {int(g) for g in self.right.finger_geoms
                       if "inner" in model.body(model.geom_bodyid[g]).name}
        self._outer = {int(g) for g in self.right.finger_geoms} - self._inner
        self._ctrl = np.zeros(model.nu)
        self.targets: Dict[str, np.ndarray] = {"right": np.zeros(8), "left": np.zeros(8)}

    # ------------------------------------------------------------------ state
    def reset(self, data: mujoco.MjData) -> None:
        """Start a new episode from the state in ``data`` (plans the first attempt)."""
        self.rng = np.random.default_rng(self.params.ik_seed)
        self.done = False
        self.outcome: Optional[str] = None
        self.knocked_over = False
        self.attempts = 0
        self.estimates: List[Tuple[float, float, float]] = []
        self.phase_log: List[Tuple[str, int]] = []
        self.step_index = 0
        self.max_cube_z = float(data.qpos[self.cube_qadr + 2])
        self.lost_phase: Optional[str] = None  # blind mode: phase at whose end the cube was not held
        self.lifted = False
        self.cube_start_up = self._cube_up(data)
        self.targets["left"] = np.concatenate([LEFT_HOME, [GRIPPER_CLOSED["left"]]])
        self._ctrl[:] = data.ctrl
        self._ctrl[self.left.actuators] = self.targets["left"]
        q = data.qpos[self.right.qpos[:7]].copy()
        g = float(data.ctrl[self.right.actuators[7]])
        self._phases: List[_Phase] = []
        self._plan_attempt(data, np.concatenate([q, [g]]))

    @property
    def phase(self) -> str:
        """Name of the current phase (``"done"`` when finished)."""
        return self._phases[self._pi].name if not self.done and self._phases else "done"

    # --------------------------------------------------------------- planning
    def _estimate(self, data: mujoco.MjData) -> Tuple[float, float, float]:
        a = self.cube_qadr
        x, y = float(data.qpos[a]), float(data.qpos[a + 1])
        w, qx, qy, qz = data.qpos[a + 3:a + 7]
        yaw = math.atan2(2 * (w * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))
        k = min(self.attempts - 1, len(self.params.perception_draws) - 1)  # attempts already counts this one
        dx, dy, dyaw = self.params.perception_draws[k]
        s = self.params.sigma
        return x + s * dx, y + s * dy, yaw + s * YAW_NOISE_PER_M * dyaw

    def _line(self, p0, p1, yaw0, q_seed, yaw1=None) -> Optional[np.ndarray]:
        """IK knots (N_KNOTS, 7) along the straight segment p0 -> p1, top-down, yaw linear yaw0 -> yaw1.

        Returns None if a knot fails or consecutive knots jump by more than :data:`MAX_KNOT_JUMP` rad.
        """
        yaw1 = yaw0 if yaw1 is None else yaw1
        out = []
        q = np.asarray(q_seed, float)
        for s in np.linspace(0.0, 1.0, N_KNOTS):
            p = (1 - s) * np.asarray(p0) + s * np.asarray(p1)
            qn, ok, _ = self.ik.solve(p, topdown_quat((1 - s) * yaw0 + s * yaw1), q, self.rng)
            if not ok or (out and np.max(np.abs(qn - q)) > MAX_KNOT_JUMP):
                return None
            out.append(qn)
            q = qn
        return np.array(out)

    def _high_enough(self, q0: np.ndarray, q1: np.ndarray, z_min: float, n: int = 12) -> bool:
        """True if the ee control point stays above ``z_min`` (m) along the joint-space segment q0 -> q1."""
        for s in np.linspace(0.0, 1.0, n):
            p, _ = self.ik.site_pose((1 - s) * q0 + s * q1)
            if p[2] < z_min:
                return False
        return True

    def _steps(self, t: float) -> int:
        return max(1, int(round(t / self.dt)))

    def _plan_attempt(self, data: mujoco.MjData, q_now: np.ndarray) -> None:
        """Plan all phases of one grasp attempt from arm target ``q_now`` (8,)."""
        self.attempts += 1
        ex, ey, eyaw = self._estimate(data)
        self.estimates.append((ex, ey, eyaw))
        w = wrap_yaw_90(eyaw)
        zc = self.table_z + self.cube_half
        p_grasp = np.array([ex, ey, zc + GRASP_DEPTH])
        p_pre = p_grasp + [0, 0, APPROACH_HEIGHT]
        tx, ty = self.tray_xy
        z_place = self.table_z + 0.004 + 0.008 + self.cube_half + GRASP_DEPTH
        p_above_tray = np.array([tx, ty, p_pre[2]])
        p_place = np.array([tx, ty, z_place])
        go, gc = GRIPPER_OPEN["right"], GRIPPER_CLOSED["right"]

        plan = None
        for off in YAW_OFFSETS:
            yaw = w + off
            q_pre, ok, _ = self.ik.solve(p_pre, topdown_quat(yaw), q_now[:7], self.rng)
            descend = self._line(p_pre, p_grasp, yaw, q_pre) if ok else None
            if descend is None:
                # Fallback: chain upward from a grasp-pose solution and reverse it.
                q_g, ok_g, _ = self.ik.solve(p_grasp, topdown_quat(yaw), q_now[:7], self.rng)
                up = self._line(p_grasp, p_pre, yaw, q_g) if ok_g else None
                if up is None:
                    continue
                descend = up[::-1].copy()
                q_pre = descend[0]
            lift = descend[::-1].copy()
            if not self._high_enough(q_now[:7], q_pre, p_pre[2] - CARRY_DIP):
                continue  # joint-space approach would sweep too low over the table
            for poff in PLACE_YAW_OFFSETS:
                q_at, ok_at, _ = self.ik.solve(p_above_tray, topdown_quat(yaw + poff), lift[-1], self.rng)
                if not ok_at or not self._high_enough(lift[-1], q_at, p_pre[2] - CARRY_DIP):
                    continue
                lower = self._line(p_above_tray, p_place, yaw + poff, q_at)
                if lower is not None:
                    plan = (yaw, q_pre, [descend, lift, np.vstack([lift[-1], q_at]), lower])
                    break
            if plan is not None:
                break
        if plan is None:
            self._finish("ik_failed")
            return
        self.grasp_yaw = plan[0]
        q_pre, segs = plan[1], plan[2]
        descend, lift, carry, lower = segs

        def k8(qs, g):
            qs = np.atleast_2d(qs)
            return np.hstack([qs, np.full((len(qs), 1), g)])

        def hold(q7, g0, g1):
            return np.vstack([np.concatenate([q7, [g0]]), np.concatenate([q7, [g1]])])

        ph = [
            _Phase("approach", MinJerkPath(np.vstack([q_now, np.concatenate([q_pre, [go]])]), T_APPROACH),
                   self._steps(T_APPROACH)),
            _Phase("descend", MinJerkPath(k8(descend, go), T_DESCEND), self._steps(T_DESCEND)),
            _Phase("close", MinJerkPath(hold(descend[-1], go, gc), T_CLOSE * 0.6), self._steps(T_CLOSE), "grasp"),
            _Phase("lift", MinJerkPath(k8(lift, gc), T_LIFT), self._steps(T_LIFT), "lift"),
            _Phase("carry", MinJerkPath(k8(carry, gc), T_CARRY), self._steps(T_CARRY), "carry"),
            _Phase("lower", MinJerkPath(k8(lower, gc), T_LOWER), self._steps(T_LOWER)),
            _Phase("release", MinJerkPath(hold(lower[-1], gc, go), T_RELEASE * 0.7), self._steps(T_RELEASE)),
            _Phase("retreat", MinJerkPath(k8(lower[::-1], go), T_RETREAT), self._steps(T_RETREAT)),
            _Phase("settle", MinJerkPath(k8(lower[0], go), T_SETTLE), self._steps(T_SETTLE), "final"),
        ]
        self._phases = ph
        self._pi = 0
        self._k = 0
        self.phase_log.append((ph[0].name, self.step_index))

    def _plan_retry(self, data: mujoco.MjData) -> None:
        """After a failed grasp: open, rise back to the approach height, then re-plan."""
        cur = self._phases[self._pi].path.end
        go = GRIPPER_OPEN["right"]
        p, _ = self.ik.site_pose(cur[:7])
        up = self._line(p, p + [0, 0, APPROACH_HEIGHT], self._yaw_of(cur[:7]), cur[:7])
        if up is None:
            self._finish("ik_failed")
            return
        reopen = _Phase("reopen", MinJerkPath(np.vstack([cur, np.concatenate([cur[:7], [go]])]), T_REOPEN),
                        self._steps(T_REOPEN))
        rise = _Phase("reascend", MinJerkPath(np.hstack([up, np.full((len(up), 1), go)]), T_REASCEND),
                      self._steps(T_REASCEND), "replan")
        self._phases = [reopen, rise]
        self._pi = 0
        self._k = 0
        self.phase_log.append(("reopen", self.step_index))

    def _yaw_of(self, q7: np.ndarray) -> float:
        _, R = self.ik.site_pose(q7)
        return math.atan2(R[1, 0], R[0, 0])

    # ----------------------------------------------------------------- checks
    def _finger_contacts(self, data: mujoco.MjData) -> Tuple[bool, bool]:
        n = data.ncon
        if n == 0:
            return False, False
        geoms = data.contact.geom[:n]
        cg = self.cube_geom
        other = np.where(geoms[:, 0] == cg, geoms[:, 1], np.where(geoms[:, 1] == cg, geoms[:, 0], -1))
        other = set(int(o) for o in other if o >= 0)
        return bool(other & self._inner), bool(other & self._outer)

    def grasp_ok(self, data: mujoco.MjData) -> bool:
        """Grasp check: both fingers touch the cube and the gripper did not close fully."""
        inner, outer = self._finger_contacts(data)
        g = abs(float(data.qpos[self.right.finger_qpos[0]]))
        return inner and outer and g > 0.08

    def cube_held(self, data: mujoco.MjData) -> bool:
        """Cube held: off the table (bottom >= 2 cm up), touched by a finger, within 6 cm of the grasp point."""
        site = self.right.site
        p = data.qpos[self.cube_qadr:self.cube_qadr + 3]
        grasp_pt = data.site_xpos[site] - GRASP_DEPTH * data.site_xmat[site].reshape(3, 3)[:, 2]
        near = float(np.linalg.norm(p - grasp_pt)) < 0.06
        up = p[2] > self.table_z + self.cube_half + 0.02
        inner, outer = self._finger_contacts(data)
        return bool(near and up and (inner or outer))

    def _cube_up(self, data: mujoco.MjData) -> np.ndarray:
        w, x, y, z = data.qpos[self.cube_qadr + 3:self.cube_qadr + 7]
        # third column of the rotation matrix: cube's local +z in world.
        return np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])

    def _finish(self, outcome: str, knocked: bool = False) -> None:
        self.outcome = outcome
        self.knocked_over = knocked
        self.done = True
        self.phase_log.append(("done", self.step_index))

    def _judge(self, data: mujoco.MjData) -> None:
        a = self.cube_qadr
        p = data.qpos[a:a + 3]
        d = np.abs(p[:2] - self.tray_xy)
        inside = bool(d[0] < self.tray_half[0] and d[1] < self.tray_half[1] and p[2] < self.table_z + 0.06)
        if inside:
            knocked = float(self._cube_up(data) @ self.cube_start_up) < 0.9
            self._finish("success", knocked)
        elif self.lost_phase is not None:
            self._finish(self.lost_phase)
        elif not self.lifted:
            self._finish("never_picked")
        else:
            self._finish("missed_tray")

    def _on_phase_end(self, data: mujoco.MjData, check: Optional[str]) -> bool:
        """Run the check attached to the finished phase; returns False if the phase list was replaced."""
        retry = self.params.retry
        if check == "grasp":
            if not self.grasp_ok(data) and retry:
                if self.attempts < 2:
                    self._plan_retry(data)
                else:
                    self._abort_to("grasp_missed")
                return False
        elif check in ("lift", "carry"):
            held = self.cube_held(data)
            if check == "lift" and held and data.qpos[self.cube_qadr + 2] > self.table_z + self.cube_half + 0.05:
                self.lifted = True
            if not held and self.lost_phase is None:
                self.lost_phase = "never_picked" if (check == "lift" and not self.lifted and
                                                     self.max_cube_z < self.table_z + self.cube_half + 0.03) \
                    else ("dropped_lifting" if check == "lift" else "dropped_carrying")
                if retry:
                    self._abort_to(self.lost_phase)
                    return False
        elif check == "replan":
            cur = self._phases[self._pi].path.end
            self._plan_attempt(data, cur)
            return False
        elif check == "final":
            self._judge(data)
            return False
        return True

    def _abort_to(self, outcome: str) -> None:
        """Open the gripper, retreat upward and finish with ``outcome``."""
        cur = self._phases[self._pi].path.end
        go = GRIPPER_OPEN["right"]
        p, _ = self.ik.site_pose(cur[:7])
        up = self._line(p, p + [0, 0, 0.10], self._yaw_of(cur[:7]), cur[:7])
        if up is None:
            up = np.vstack([cur[:7], cur[:7]])
        self._phases = [
            _Phase("abort_open", MinJerkPath(np.vstack([cur, np.concatenate([cur[:7], [go]])]), T_REOPEN),
                   self._steps(T_REOPEN)),
            _Phase("abort_retreat", MinJerkPath(np.hstack([up, np.full((len(up), 1), go)]), T_RETREAT),
                   self._steps(T_RETREAT), "abort:" + outcome),
        ]
        self._pi = 0
        self._k = 0
        self.phase_log.append(("abort_open", self.step_index))

    # ---------------------------------------------------------------- command
    def command(self, data: mujoco.MjData) -> np.ndarray:
        """Control vector ``(nu,)`` to apply before the next ``mj_step`` (a copy)."""
        if not self.done:
            cz = float(data.qpos[self.cube_qadr + 2])
            if cz > self.max_cube_z:
                self.max_cube_z = cz
            ph = self._phases[self._pi]
            if self._k >= ph.steps:
                check = ph.check
                cont = True
                if check is not None and check.startswith("abort:"):
                    self._finish(check[6:])
                    cont = False
                else:
                    cont = self._on_phase_end(data, check)
                if cont:
                    self._pi += 1
                    self._k = 0
                    self.phase_log.append((self._phases[self._pi].name, self.step_index))
            if not self.done:
                ph = self._phases[self._pi]
                tgt = ph.path.at(self._k * self.dt)
                self._k += 1
                self.targets["right"] = tgt
                self._ctrl[self.right.actuators] = tgt
        self.step_index += 1
        return self._ctrl.copy()


def run_episode(
    model: mujoco.MjModel,
    params: EpisodeParams,
    on_step: Optional[Callable[[mujoco.MjData, int, np.ndarray], None]] = None,
    max_time: float = 12.0,
    data: Optional[mujoco.MjData] = None,
) -> EpisodeResult:
    """Run one episode to completion (or ``max_time`` s of simulated time).

    ``on_step(data, step_index, ctrl)`` is called after the controller computed
    ``ctrl`` and before ``mj_step`` (so ``data`` is the state the control is
    applied to; ``data.ctrl`` already equals ``ctrl``); ``step_index`` counts from 0
    and ``data.time == step_index * timestep``.  It is also called once more after
    the final step with ``ctrl`` = the last control (step_index = number of steps).
    """
    data = mujoco.MjData(model) if data is None else data
    set_initial_state(model, data, params)
    state = np.zeros(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    ctl = PickPlace(model, params)
    ctl.reset(data)
    max_steps = int(round(max_time / model.opt.timestep))
    step = 0
    ctrl = data.ctrl.copy()
    while not ctl.done and step < max_steps:
        ctrl = ctl.command(data)
        data.ctrl[:] = ctrl
        if on_step is not None:
            on_step(data, step, ctrl)
        mujoco.mj_step(model, data)
        step += 1
    if on_step is not None:
        on_step(data, step, ctrl)
    outcome = ctl.outcome if ctl.outcome is not None else "timeout"
    a = ctl.cube_qadr
    return EpisodeResult(
        outcome=outcome,
        knocked_over=bool(ctl.knocked_over),
        success=outcome == "success",
        attempts=ctl.attempts,
        steps=step,
        sim_time=float(data.time),
        cube_final=data.qpos[a:a + 7].copy(),
        initial_state=state,
        final_qpos=data.qpos.copy(),
        final_qvel=data.qvel.copy(),
        estimates=list(ctl.estimates),
        phase_log=list(ctl.phase_log),
    )
