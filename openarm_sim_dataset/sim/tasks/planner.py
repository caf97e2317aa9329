"""Shared controller machinery of the scripted tasks: planning primitives, per-arm lanes, checks.

A task's controller is a :class:`ScriptedController` with one :class:`Lane` per arm it moves. A lane
is a queue of :class:`Phase` objects (a joint-space :class:`~..trajectory.MinJerkPath` of 7 joint
targets + the gripper command, a duration in physics steps, an optional check run when the phase
ends, an optional condition that must hold before it ends). Lanes step together, in a fixed order,
once per physics step: two arms can pick at once, and one can wait for the other (``until``).

Primitives (all top-down, fingers straight down, frames: world metres, radians, wxyz):

* :meth:`Lane.plan_pick_place` -- approach (joint-space min-jerk to :data:`APPROACH_HEIGHT` above the
  *estimated* object) -> descend (straight line) -> close [grasp check] -> lift (straight line)
  [lift check] -> carry (joint-space, kept above the approach height minus :data:`CARRY_DIP`)
  [carry check] -> lower (straight line) -> release -> retreat -> optional extra phases -> settle
  [final check: the task judges when every lane has ended];
* :meth:`Lane.plan_retry` (open, rise, estimate again, plan the attempt again) and
  :meth:`Lane.abort_to` (open, rise, finish with a failure category);
* checks: :meth:`Lane.grasp_ok` (both fingers touch the object and the gripper did not close
  fully), :meth:`Lane.object_held` (off the table, touched, near the grasp point).

The pick-and-place of the red cube with the right arm (:mod:`.pick_place`, the default task) is
this machinery with one lane; it reproduces the episodes of the former single-task controller
bit for bit (tested against stored digests).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import mujoco
import numpy as np

from ..ik import IKSolver
from ..scene import CUBE_NAMES, CUBE_SIZE, ArmIndex, SceneConfig, arm_index, cube_qpos_adr
from ..trajectory import MinJerkPath

__all__ = [
    "OUTCOMES", "GRASP_DEPTH", "APPROACH_HEIGHT", "YAW_NOISE_PER_M", "GRIPPER_OPEN", "GRIPPER_CLOSED",
    "LEFT_HOME", "RIGHT_HOME", "YAW_OFFSETS", "PLACE_YAW_OFFSETS", "EpisodeParams", "EpisodeResult", "Phase",
    "Lane", "ScriptedController", "topdown_quat", "wrap_yaw_90", "yaw_of_quat", "up_vector", "ready_qpos",
    "table_height", "tray_geometry", "arm_contact_pairs",
]

#: Outcome categories shared by the tasks (a task may add its own, e.g. ``missed_target``).
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
#: Right-arm hold pose: the mirror image of :data:`LEFT_HOME` (joint2's axis is mirrored).
RIGHT_HOME = np.array([0.0, 0.3, 0.0, 1.5708, 0.0, 0.0, 0.0])

# Phase durations (s).
T_APPROACH, T_DESCEND, T_CLOSE, T_LIFT, T_CARRY, T_LOWER, T_RELEASE, T_RETREAT, T_SETTLE = (
    1.2, 0.8, 0.5, 0.8, 1.2, 0.8, 0.4, 0.6, 0.4)
T_REOPEN, T_REASCEND = 0.3, 0.6
#: Duration (s) of the joint-space move back over the arm's own side (bimanual tasks).
T_RETURN = 1.0
N_KNOTS = 6
#: Largest joint change (rad) allowed between consecutive IK knots of a Cartesian segment.
MAX_KNOT_JUMP = 0.6
#: Largest dip (m) of the ee below the approach height allowed during the joint-space carry.
CARRY_DIP = 0.09
#: Place yaw offsets (rad, relative to the grasp yaw) tried in order (the tray accepts any yaw).
PLACE_YAW_OFFSETS: Tuple[float, ...] = tuple(math.radians(a) for a in (0, 45, -45, 90, -90, 135, -135, 180))
#: Gripper yaw offsets (rad) tried in order on top of the wrapped cube yaw, per arm; all grasp the
#: cube equally (90 deg symmetry) but each arm reaches them differently (the left arm's are the
#: mirror image of the right arm's: a reflection in y maps yaw to -yaw).
YAW_OFFSETS: Dict[str, Tuple[float, ...]] = {
    "right": (math.pi / 2, math.pi, 0.0, -math.pi / 2),
    "left": (-math.pi / 2, -math.pi, 0.0, math.pi / 2),
}


@dataclass(frozen=True)
class EpisodeParams:
    """Everything that defines one episode (besides the model).

    Attributes:
        cube_poses: per cube (red, green, blue) ``(x, y, yaw)`` (world m, rad); a cube rests on the
            table unless its task places it elsewhere (e.g. in the tray).
        perception_draws: (2, 3) standard-normal draws (dx, dy, dyaw) for the first
            estimate and the retry estimate; scaled by ``sigma``.
        sigma: perception position error std (m).
        retry: act on checks, with one grasp retry (True) or run blind (False).
        ik_seed: seed of the IK restart generator.
        task: registry name of the task (:mod:`openarm_sim_dataset.sim.tasks`).
        side: the arm that acts (``"right"``/``"left"``; ``"both"`` for bimanual tasks).
        goal: task-specific values, or (): ``unload_*``: the put-down point (x, y), world m;
            ``stack_*``: the standard-normal draws (dx, dy, dyaw) of the base cube's estimate;
            ``bimanual_tray``: (+1,) when the red cube starts on the right, (-1,) on the left.
        meta: seed inputs and other JSON-able metadata (``{"seed":..,"index":..,..}``).
    """

    cube_poses: Tuple[Tuple[float, float, float], ...]
    perception_draws: Tuple[Tuple[float, float, float], ...] = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    sigma: float = 0.0
    retry: bool = False
    ik_seed: int = 0
    task: str = "pick_place"
    side: str = "right"
    goal: Tuple[float, ...] = ()
    meta: Dict[str, object] = field(default_factory=dict, hash=False, compare=False)


@dataclass
class EpisodeResult:
    """Result of :func:`~openarm_sim_dataset.sim.tasks.run_episode`.

    Attributes:
        outcome: ``"success"`` or a failure category of the task.
        knocked_over: success by luck: an object ended on another face than it started on (e.g. a
            cube knocked over, a toppled stack rebuilt by chance).
        success: ``outcome == "success"``.
        attempts: grasp attempts made (summed over the arms).
        steps: physics steps taken; ``sim_time``: final ``data.time`` (s).
        cube_final: final pose (7,) of the task's first object: position (m) + quaternion (wxyz).
        initial_state: ``mj_getState(mjSTATE_INTEGRATION)`` before the first step.
        final_qpos, final_qvel: state at the end.
        estimates: per attempt the estimated object ``(x, y, yaw)``.
        phase_log: (phase name, first step index) in order (``side:`` prefixed with two lanes).
        arm_contacts: physics steps in which a geom of one arm touched a geom of the other.
        judge_facts: what the judge read besides the judged state (:meth:`ScriptedController.judge_facts`).
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
    arm_contacts: int = 0
    judge_facts: Dict[str, object] = field(default_factory=dict)


# ------------------------------------------------------------------------------ geometry helpers
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


def yaw_of_quat(q: Sequence[float]) -> float:
    """Yaw (rad, about world z) of a wxyz quaternion."""
    w, qx, qy, qz = q
    return math.atan2(2 * (w * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))


def up_vector(q: Sequence[float]) -> np.ndarray:
    """The body's local +z axis in world coordinates, from its wxyz quaternion (third matrix column)."""
    w, x, y, z = q
    return np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])


def table_height(model: mujoco.MjModel) -> float:
    """World z (m) of the table top, read from the model."""
    table = model.geom("table_top")
    return float(model.geom_pos[table.id][2] + model.geom_size[table.id][2] + model.body("table").pos[2])


def tray_geometry(model: mujoco.MjModel) -> Tuple[np.ndarray, np.ndarray]:
    """Tray centre (x, y) and inner half extents (x, y), world m, read from the model."""
    return np.array(model.body("tray").pos[:2], float), np.array(model.site("tray_center").size[:2], float)


_READY_CACHE: Dict[Tuple[str, str], np.ndarray] = {}


def ready_qpos(model: mujoco.MjModel, cfg: Optional[SceneConfig] = None, side: str = "right") -> np.ndarray:
    """Start pose (7,) of arm ``side``: fingers down, yaw ``YAW_OFFSETS[side][0]``, 15 cm above a grasp at
    the centre of that arm's cube area (the right arm's area is site ``cube_area_center``; the left
    arm's is its mirror image in y). ``cfg`` is accepted for API symmetry and ignored.
    """
    key = (side, hashlib.sha256(model.body_pos.tobytes() + model.site_pos.tobytes() + model.geom_size.tobytes()
                                + model.jnt_range.tobytes()).hexdigest())
    if key in _READY_CACHE:
        return _READY_CACHE[key].copy()
    ik = IKSolver(model, side, restarts=30)
    cx, cy, th = model.site("cube_area_center").pos
    if side == "left":
        cy = -cy
    z = th + CUBE_SIZE / 2 + GRASP_DEPTH + APPROACH_HEIGHT
    seed = np.array([0.5, 0.3, 0.0, 1.5, 0.0, 0.0, 0.0])
    if side == "left":
        seed = np.array([-0.5, -0.3, 0.0, 1.5, 0.0, 0.0, 0.0])
    q, ok, err = ik.solve([cx, cy, z], topdown_quat(YAW_OFFSETS[side][0]), seed, np.random.default_rng(0))
    if not ok:
        raise RuntimeError(f"ready pose of the {side} arm unreachable (err {err:.4f})")
    _READY_CACHE[key] = q
    return q.copy()


def arm_contact_pairs(model: mujoco.MjModel) -> Tuple[np.ndarray, np.ndarray]:
    """Boolean masks (ngeom,) of the geoms of the right arm and of the left arm (any robot body of that side)."""
    right = np.zeros(model.ngeom, bool)
    left = np.zeros(model.ngeom, bool)
    for g in range(model.ngeom):
        body = model.body(model.geom_bodyid[g]).name
        if "openarm_right_" in body:
            right[g] = True
        elif "openarm_left_" in body:
            left[g] = True
    return right, left


# ------------------------------------------------------------------------------------- phases
class Phase:
    """One segment of a lane: ``path`` sampled for ``steps`` physics steps, then ``check`` (a name the
    lane or task interprets). ``until``: the phase also lasts until this returns True (held at its end)."""

    __slots__ = ("name", "path", "steps", "check", "until")

    def __init__(self, name: str, path: MinJerkPath, steps: int, check: Optional[str] = None,
                 until: Optional[Callable[[], bool]] = None) -> None:
        self.name, self.path, self.steps, self.check, self.until = name, path, steps, check, until


@dataclass
class PlaceTarget:
    """Where a lane puts its object down: centre (x, y) in world m, the ee height (m) at release and
    the gripper yaw offsets (rad, relative to the grasp yaw) tried in order."""

    xy: Tuple[float, float]
    z_ee: float
    yaw_offsets: Tuple[float, ...] = PLACE_YAW_OFFSETS
    #: absolute gripper yaws (rad) tried before ``yaw_offsets`` (e.g. fingers closing along world x)
    yaws: Tuple[float, ...] = ()


class Lane:
    """One arm moving one object: its phase queue, checks and failure category.

    ``ctl`` is the owning controller (shared IK restart generator, step counter, phase log).
    ``obj``: cube body name; ``pick_zc``: world z (m) of the object's centre where it is grasped;
    ``place``: a function of the estimated object pose returning a :class:`PlaceTarget`
    (re-evaluated at every attempt); ``after_retreat``: builds extra phases after the retreat (e.g.
    move back over the arm's own side).
    """

    def __init__(self, ctl: "ScriptedController", side: str, obj: str, pick_zc: float,
                 place: Callable[["Lane", Tuple[float, float, float]], PlaceTarget],
                 after_retreat: Optional[Callable[["Lane", np.ndarray], List[Phase]]] = None,
                 before_carry: Optional[Callable[["Lane", np.ndarray], List[Phase]]] = None,
                 log_prefix: str = "") -> None:
        model = ctl.model
        self.ctl, self.side, self.obj = ctl, side, obj
        self.arm: ArmIndex = arm_index(model, side)
        self.ik = IKSolver(model, side)
        self.pick_zc, self.place = float(pick_zc), place
        self.after_retreat, self.before_carry = after_retreat, before_carry
        self.prefix = log_prefix
        body = model.body(obj).id
        self.obj_geom = int(np.flatnonzero(model.geom_bodyid == body)[0])
        self.qadr, _ = cube_qpos_adr(model, obj)
        self.inner = {int(g) for g in self.arm.finger_geoms if "inner" in model.body(model.geom_bodyid[g]).name}
        self.outer = {int(g) for g in self.arm.finger_geoms} - self.inner
        self.go, self.gc = GRIPPER_OPEN[side], GRIPPER_CLOSED[side]
        self.yaw_offsets = YAW_OFFSETS[side]

    # ------------------------------------------------------------------ state
    def reset(self, data: mujoco.MjData) -> None:
        self.finished = False
        self.outcome: Optional[str] = None  # forced outcome (ik_failed, abort) or None: judged
        self.attempts = 0
        self.estimates: List[Tuple[float, float, float]] = []
        self.max_z = float(data.qpos[self.qadr + 2])
        self.lost_phase: Optional[str] = None  # blind mode: phase at whose end the object was not held
        self.lifted = False
        self.start_up = up_vector(data.qpos[self.qadr + 3:self.qadr + 7])
        self.phases: List[Phase] = []
        self.pi = 0
        self.k = 0

    @property
    def phase(self) -> str:
        return self.phases[self.pi].name if not self.finished and self.phases else "done"

    def _log(self, name: str) -> None:
        self.ctl.phase_log.append((self.prefix + name, self.ctl.step_index))

    def finish(self, outcome: Optional[str] = None) -> None:
        """End this lane (``outcome`` forces the category; None: the task judges from the final state)."""
        self.finished = True
        if outcome is not None:
            self.outcome = outcome
        self.ctl._lane_finished(self)

    # --------------------------------------------------------------- planning
    def estimate(self, data: mujoco.MjData) -> Tuple[float, float, float]:
        """Perceived (x, y, yaw) of the object: true pose + sigma-scaled draw of this attempt."""
        a = self.qadr
        x, y = float(data.qpos[a]), float(data.qpos[a + 1])
        yaw = yaw_of_quat(data.qpos[a + 3:a + 7])
        p = self.ctl.params
        k = min(self.attempts - 1, len(p.perception_draws) - 1)  # attempts already counts this one
        dx, dy, dyaw = p.perception_draws[k]
        s = p.sigma
        return x + s * dx, y + s * dy, yaw + s * YAW_NOISE_PER_M * dyaw

    def line(self, p0, p1, yaw0, q_seed, yaw1=None) -> Optional[np.ndarray]:
        """IK knots (N_KNOTS, 7) along the straight segment p0 -> p1, top-down, yaw linear yaw0 -> yaw1.

        Returns None if a knot fails or consecutive knots jump by more than :data:`MAX_KNOT_JUMP` rad.
        """
        yaw1 = yaw0 if yaw1 is None else yaw1
        out = []
        q = np.asarray(q_seed, float)
        rng = self.ctl.rng
        for s in np.linspace(0.0, 1.0, N_KNOTS):
            p = (1 - s) * np.asarray(p0) + s * np.asarray(p1)
            qn, ok, _ = self.ik.solve(p, topdown_quat((1 - s) * yaw0 + s * yaw1), q, rng)
            if not ok or (out and np.max(np.abs(qn - q)) > MAX_KNOT_JUMP):
                return None
            out.append(qn)
            q = qn
        return np.array(out)

    def high_enough(self, q0: np.ndarray, q1: np.ndarray, z_min: float, n: int = 12) -> bool:
        """True if the ee control point stays above ``z_min`` (m) along the joint-space segment q0 -> q1."""
        for s in np.linspace(0.0, 1.0, n):
            p, _ = self.ik.site_pose((1 - s) * q0 + s * q1)
            if p[2] < z_min:
                return False
        return True

    def steps(self, t: float) -> int:
        return max(1, int(round(t / self.ctl.dt)))

    def yaw_of(self, q7: np.ndarray) -> float:
        _, R = self.ik.site_pose(q7)
        return math.atan2(R[1, 0], R[0, 0])

    def plan_pick_place(self, data: mujoco.MjData, q_now: np.ndarray) -> None:
        """Plan every phase of one grasp attempt from arm target ``q_now`` (8,) (see module doc)."""
        self.attempts += 1
        ex, ey, eyaw = self.estimate(data)
        self.estimates.append((ex, ey, eyaw))
        w = wrap_yaw_90(eyaw)
        p_grasp = np.array([ex, ey, self.pick_zc + GRASP_DEPTH])
        p_pre = p_grasp + [0, 0, APPROACH_HEIGHT]
        tgt = self.place(self, (ex, ey, eyaw))
        tx, ty = tgt.xy
        p_above = np.array([tx, ty, p_pre[2]])
        p_place = np.array([tx, ty, tgt.z_ee])
        go, gc = self.go, self.gc
        rng = self.ctl.rng

        plan = None
        for off in self.yaw_offsets:
            yaw = w + off
            q_pre, ok, _ = self.ik.solve(p_pre, topdown_quat(yaw), q_now[:7], rng)
            descend = self.line(p_pre, p_grasp, yaw, q_pre) if ok else None
            if descend is None:
                # Fallback: chain upward from a grasp-pose solution and reverse it.
                q_g, ok_g, _ = self.ik.solve(p_grasp, topdown_quat(yaw), q_now[:7], rng)
                up = self.line(p_grasp, p_pre, yaw, q_g) if ok_g else None
                if up is None:
                    continue
                descend = up[::-1].copy()
                q_pre = descend[0]
            lift = descend[::-1].copy()
            if not self.high_enough(q_now[:7], q_pre, p_pre[2] - CARRY_DIP):
                continue  # joint-space approach would sweep too low over the table
            for poff in tuple(a - yaw for a in tgt.yaws) + tuple(tgt.yaw_offsets):
                q_at, ok_at, _ = self.ik.solve(p_above, topdown_quat(yaw + poff), lift[-1], rng)
                if not ok_at or not self.high_enough(lift[-1], q_at, p_pre[2] - CARRY_DIP):
                    continue
                lower = self.line(p_above, p_place, yaw + poff, q_at)
                if lower is not None:
                    plan = (yaw, q_pre, [descend, lift, np.vstack([lift[-1], q_at]), lower])
                    break
            if plan is not None:
                break
        if plan is None:
            self.finish("ik_failed")
            return
        self.grasp_yaw = plan[0]
        q_pre, segs = plan[1], plan[2]
        descend, lift, carry, lower = segs
        self.q_pre = q_pre

        def k8(qs, g):
            qs = np.atleast_2d(qs)
            return np.hstack([qs, np.full((len(qs), 1), g)])

        def hold(q7, g0, g1):
            return np.vstack([np.concatenate([q7, [g0]]), np.concatenate([q7, [g1]])])

        st = self.steps
        ph = [
            Phase("approach", MinJerkPath(np.vstack([q_now, np.concatenate([q_pre, [go]])]), T_APPROACH),
                  st(T_APPROACH)),
            Phase("descend", MinJerkPath(k8(descend, go), T_DESCEND), st(T_DESCEND)),
            Phase("close", MinJerkPath(hold(descend[-1], go, gc), T_CLOSE * 0.6), st(T_CLOSE), "grasp"),
            Phase("lift", MinJerkPath(k8(lift, gc), T_LIFT), st(T_LIFT), "lift"),
        ]
        if self.before_carry is not None:
            ph += self.before_carry(self, k8(lift[-1:], gc)[0])
        ph += [
            Phase("carry", MinJerkPath(k8(carry, gc), T_CARRY), st(T_CARRY), "carry"),
            Phase("lower", MinJerkPath(k8(lower, gc), T_LOWER), st(T_LOWER)),
            Phase("release", MinJerkPath(hold(lower[-1], gc, go), T_RELEASE * 0.7), st(T_RELEASE)),
            Phase("retreat", MinJerkPath(k8(lower[::-1], go), T_RETREAT), st(T_RETREAT)),
        ]
        end = k8(lower[0], go)[0]
        if self.after_retreat is not None:
            extra = self.after_retreat(self, end)
            ph += extra
            if extra:
                end = extra[-1].path.end
        ph.append(Phase("settle", MinJerkPath(np.vstack([end, end]) if self.after_retreat else k8(lower[0], go),
                                              T_SETTLE), st(T_SETTLE), "final"))
        self.phases = ph
        self.pi = 0
        self.k = 0
        self._log(ph[0].name)

    def plan_retry(self, data: mujoco.MjData) -> None:
        """After a failed grasp: open, rise back to the approach height, then re-plan."""
        cur = self.phases[self.pi].path.end
        p, _ = self.ik.site_pose(cur[:7])
        up = self.line(p, p + [0, 0, APPROACH_HEIGHT], self.yaw_of(cur[:7]), cur[:7])
        if up is None:
            self.finish("ik_failed")
            return
        go = self.go
        reopen = Phase("reopen", MinJerkPath(np.vstack([cur, np.concatenate([cur[:7], [go]])]), T_REOPEN),
                       self.steps(T_REOPEN))
        rise = Phase("reascend", MinJerkPath(np.hstack([up, np.full((len(up), 1), go)]), T_REASCEND),
                     self.steps(T_REASCEND), "replan")
        self.phases = [reopen, rise]
        self.pi = 0
        self.k = 0
        self._log("reopen")

    def abort_to(self, outcome: str) -> None:
        """Open the gripper, retreat upward and finish with ``outcome``."""
        cur = self.phases[self.pi].path.end
        go = self.go
        p, _ = self.ik.site_pose(cur[:7])
        up = self.line(p, p + [0, 0, 0.10], self.yaw_of(cur[:7]), cur[:7])
        if up is None:
            up = np.vstack([cur[:7], cur[:7]])
        self.phases = [
            Phase("abort_open", MinJerkPath(np.vstack([cur, np.concatenate([cur[:7], [go]])]), T_REOPEN),
                  self.steps(T_REOPEN)),
            Phase("abort_retreat", MinJerkPath(np.hstack([up, np.full((len(up), 1), go)]), T_RETREAT),
                  self.steps(T_RETREAT), "abort:" + outcome),
        ]
        self.pi = 0
        self.k = 0
        self._log("abort_open")

    # ----------------------------------------------------------------- checks
    def finger_contacts(self, data: mujoco.MjData) -> Tuple[bool, bool]:
        n = data.ncon
        if n == 0:
            return False, False
        geoms = data.contact.geom[:n]
        cg = self.obj_geom
        other = np.where(geoms[:, 0] == cg, geoms[:, 1], np.where(geoms[:, 1] == cg, geoms[:, 0], -1))
        other = set(int(o) for o in other if o >= 0)
        return bool(other & self.inner), bool(other & self.outer)

    def grasp_ok(self, data: mujoco.MjData) -> bool:
        """Grasp check: both fingers touch the object and the gripper did not close fully."""
        inner, outer = self.finger_contacts(data)
        g = abs(float(data.qpos[self.arm.finger_qpos[0]]))
        return inner and outer and g > 0.08

    def object_held(self, data: mujoco.MjData) -> bool:
        """Held: 2 cm above where it was picked, touched by a finger, within 6 cm of the grasp point."""
        site = self.arm.site
        p = data.qpos[self.qadr:self.qadr + 3]
        grasp_pt = data.site_xpos[site] - GRASP_DEPTH * data.site_xmat[site].reshape(3, 3)[:, 2]
        near = float(np.linalg.norm(p - grasp_pt)) < 0.06
        up = p[2] > self.pick_zc + 0.02
        inner, outer = self.finger_contacts(data)
        return bool(near and up and (inner or outer))

    def on_phase_end(self, data: mujoco.MjData, check: Optional[str]) -> bool:
        """Run the check attached to the finished phase; returns False if the phase list was replaced
        or the lane ended."""
        retry = self.ctl.params.retry
        if check == "grasp":
            if not self.grasp_ok(data) and retry:
                if self.attempts < 2:
                    self.plan_retry(data)
                else:
                    self.abort_to("grasp_missed")
                return False
        elif check in ("lift", "carry"):
            held = self.object_held(data)
            if check == "lift" and held and data.qpos[self.qadr + 2] > self.pick_zc + 0.05:
                self.lifted = True
            if not held and self.lost_phase is None:
                self.lost_phase = "never_picked" if (check == "lift" and not self.lifted and
                                                     self.max_z < self.pick_zc + 0.03) \
                    else ("dropped_lifting" if check == "lift" else "dropped_carrying")
                if retry:
                    self.abort_to(self.lost_phase)
                    return False
        elif check == "replan":
            cur = self.phases[self.pi].path.end
            self.plan_pick_place(data, cur)
            return False
        elif check == "final":
            self.finish()
            return False
        return True

    def failure(self) -> str:
        """The lane's failure category when its object is not where the task wants it."""
        if self.outcome is not None:
            return self.outcome
        if self.lost_phase is not None:
            return self.lost_phase
        if not self.lifted:
            return "never_picked"
        return "missed_tray"

    # ------------------------------------------------------------------- step
    def step(self, data: mujoco.MjData, ctrl: np.ndarray, targets: Dict[str, np.ndarray]) -> None:
        """Advance one physics step: end-of-phase checks, then this step's target into ``ctrl``."""
        z = float(data.qpos[self.qadr + 2])
        if z > self.max_z:
            self.max_z = z
        ph = self.phases[self.pi]
        if self.k >= ph.steps and (ph.until is None or ph.until()):
            check = ph.check
            cont = True
            if check is not None and check.startswith("abort:"):
                self.finish(check[6:])
                cont = False
            else:
                cont = self.on_phase_end(data, check)
            if cont:
                self.pi += 1
                self.k = 0
                self._log(self.phases[self.pi].name)
        if not self.finished and not self.ctl.done:
            ph = self.phases[self.pi]
            tgt = ph.path.at(self.k * self.ctl.dt)
            self.k += 1
            targets[self.side] = tgt
            ctrl[self.arm.actuators] = tgt


class ScriptedController:
    """Step-wise controller of one task: lanes stepped in order, judged when every lane has ended.

    After :meth:`reset`, call :meth:`command` once per physics step; it returns the full ``(nu,)``
    control vector for that step.  The per-arm targets (7 joint angles + gripper command, rad) are in
    :attr:`targets` (``{"right": (8,), "left": (8,)}``), updated by each call. A subclass builds its
    lanes in :meth:`make_lanes`, starts them in :meth:`start` and judges in :meth:`judge`.
    """

    def __init__(self, model: mujoco.MjModel, params: EpisodeParams, count_arm_contacts: bool = False) -> None:
        self.model = model
        self.params = params
        self.dt = float(model.opt.timestep)
        self.table_z = table_height(model)
        self.tray_xy, self.tray_half = tray_geometry(model)
        self._ctrl = np.zeros(model.nu)
        self.targets: Dict[str, np.ndarray] = {"right": np.zeros(8), "left": np.zeros(8)}
        self.right: ArmIndex = arm_index(model, "right")
        self.left: ArmIndex = arm_index(model, "left")
        self.lanes: List[Lane] = self.make_lanes()
        self.count_arm_contacts = count_arm_contacts
        if count_arm_contacts:
            self._right_geoms, self._left_geoms = arm_contact_pairs(model)

    # -------------------------------------------------------------- subclass
    def make_lanes(self) -> List[Lane]:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self, data: mujoco.MjData) -> None:
        """Plan the first attempt of every lane (default: pick-and-place from the current arm targets)."""
        for lane in self.lanes:
            q = data.qpos[lane.arm.qpos[:7]].copy()
            g = float(data.ctrl[lane.arm.actuators[7]])
            lane.plan_pick_place(data, np.concatenate([q, [g]]))
            if self.done:
                return

    def judge(self, data: mujoco.MjData) -> Tuple[str, bool]:  # pragma: no cover - abstract
        """(outcome, knocked_over) from the final state."""
        raise NotImplementedError

    def goal_reached(self, data: mujoco.MjData) -> bool:  # pragma: no cover - abstract
        """The geometric part of the success rule, from the state alone (no lane bookkeeping): what
        :meth:`judge` calls success when no lane was aborted."""
        raise NotImplementedError

    @property
    def objects(self) -> List[str]:
        """Body names of the cubes the task moves or relies on (lanes' objects, then e.g. a stack base)."""
        names = [lane.obj for lane in self.lanes]
        base = getattr(self, "base", None)
        return names + ([base] if isinstance(base, str) and base not in names else [])

    def touched(self, data: mujoco.MjData) -> bool:
        """Whether any geom of either arm is in contact with a task object in ``data``'s contacts."""
        if not hasattr(self, "_arm_geoms"):
            r, l = arm_contact_pairs(self.model)
            self._arm_geoms = r | l
            self._obj_geoms = np.isin(self.model.geom_bodyid, [self.model.body(o).id for o in self.objects])
        n = data.ncon
        if not n:
            return False
        g = data.contact.geom[:n]
        arm, obj = self._arm_geoms, self._obj_geoms
        return bool(np.any((arm[g[:, 0]] & obj[g[:, 1]]) | (obj[g[:, 0]] & arm[g[:, 1]])))

    def success(self, data: mujoco.MjData) -> bool:
        """The task's success rule from the state alone, as an environment applies it at any step:
        :meth:`goal_reached` and no arm touching a task object (released: a cube held in the tray is
        not yet put there). At the end of a scripted episode the arm has retreated, so this equals
        :meth:`judge`'s success unless a lane was aborted."""
        return self.goal_reached(data) and not self.touched(data)

    # ------------------------------------------------------------------ state
    def reset(self, data: mujoco.MjData) -> None:
        """Start a new episode from the state in ``data`` (plans the first attempt of each lane)."""
        self.rng = np.random.default_rng(self.params.ik_seed)
        self.done = False
        self.outcome: Optional[str] = None
        self.knocked_over = False
        self.judged_step: Optional[int] = None
        self.phase_log: List[Tuple[str, int]] = []
        self.step_index = 0
        self.arm_contacts = 0
        self._ctrl[:] = data.ctrl
        for a in (self.right, self.left):
            self.targets[a.side] = data.ctrl[a.actuators].copy()
        for lane in self.lanes:
            lane.reset(data)
        self._data = data
        self.start(data)

    @property
    def attempts(self) -> int:
        return sum(lane.attempts for lane in self.lanes)

    @property
    def estimates(self) -> List[Tuple[float, float, float]]:
        return [e for lane in self.lanes for e in lane.estimates]

    @property
    def phase(self) -> str:
        """Name of the current phase of the first unfinished lane (``"done"`` when finished)."""
        for lane in self.lanes:
            if not lane.finished and not self.done:
                return lane.phase
        return "done"

    def _lane_finished(self, lane: Lane) -> None:
        if all(la.finished for la in self.lanes):
            self.judged_step = self.step_index  # data holds the state before physics step judged_step
            self.outcome, self.knocked_over = self.judge(self._data)
            self.done = True
            self.phase_log.append(("done", self.step_index))

    # ------------------------------------------------------------ judgement
    #: Lane attributes the judge reads besides the final state: what happened on the way (a forced
    #: outcome, the phase at whose end the object was lost, whether it was ever lifted).
    HISTORY = ("outcome", "lost_phase", "lifted")

    def judge_facts(self) -> Dict[str, object]:
        """What :meth:`judge` needs besides the judged state and the initial state, JSON-able:
        ``{"step": physics step of the judged state (None: never judged, a timeout), "lanes": [{outcome,
        lost_phase, lifted} per lane]}``. Stored in the sidecar so that :func:`~.rejudge` can judge again."""
        return {"step": self.judged_step,
                "lanes": [{k: getattr(lane, k) for k in self.HISTORY} for lane in self.lanes]}

    def restore(self, initial: mujoco.MjData, facts: Dict[str, object]) -> None:
        """Put the controller in the judging position of an episode that started at ``initial`` and whose
        lanes went through ``facts`` (:meth:`judge_facts`), without planning: each lane reset on the
        initial state (its start face), then its history set. Then :meth:`judge` judges a state."""
        lanes = facts.get("lanes")
        if not isinstance(lanes, list) or not all(isinstance(f, dict) for f in lanes):
            raise ValueError("lanes is not a list of objects")
        if len(lanes) != len(self.lanes):
            raise ValueError(f"{len(lanes)} lane(s) recorded, the task has {len(self.lanes)}")
        self._data = initial
        for lane, f in zip(self.lanes, lanes):
            lane.reset(initial)
            lane.outcome = None if f.get("outcome") is None else str(f["outcome"])
            lane.lost_phase = None if f.get("lost_phase") is None else str(f["lost_phase"])
            lane.lifted = bool(f.get("lifted"))
            lane.finished = True

    def _count_contacts(self, data: mujoco.MjData) -> None:
        n = data.ncon
        if n:
            g = data.contact.geom[:n]
            r, l = self._right_geoms, self._left_geoms
            if np.any((r[g[:, 0]] & l[g[:, 1]]) | (l[g[:, 0]] & r[g[:, 1]])):
                self.arm_contacts += 1

    # ---------------------------------------------------------------- command
    def command(self, data: mujoco.MjData) -> np.ndarray:
        """Control vector ``(nu,)`` to apply before the next ``mj_step`` (a copy)."""
        self._data = data
        if not self.done:
            if self.count_arm_contacts:
                self._count_contacts(data)
            for lane in self.lanes:
                if not lane.finished and not self.done:
                    lane.step(data, self._ctrl, self.targets)
        self.step_index += 1
        return self._ctrl.copy()

    # ----------------------------------------------------------------- helpers
    def in_tray(self, data: mujoco.MjData, obj: str) -> bool:
        """Object ``obj`` rests inside the tray's inner footprint, low (centre < 6 cm above the table)."""
        a, _ = cube_qpos_adr(self.model, obj)
        p = data.qpos[a:a + 3]
        d = np.abs(p[:2] - self.tray_xy)
        return bool(d[0] < self.tray_half[0] and d[1] < self.tray_half[1] and p[2] < self.table_z + 0.06)

    def turned(self, data: mujoco.MjData, lane_or_obj, start_up: Optional[np.ndarray] = None) -> bool:
        """Whether an object rests on another face than at the start (its up axis turned > ~25 deg)."""
        if isinstance(lane_or_obj, Lane):
            a, start_up = lane_or_obj.qadr, lane_or_obj.start_up
        else:
            a, _ = cube_qpos_adr(self.model, lane_or_obj)
        return float(up_vector(data.qpos[a + 3:a + 7]) @ start_up) < 0.9


def cube_index(colour_or_name: str) -> int:
    """Index in :data:`CUBE_NAMES` of ``"red"``/``"cube_red"`` etc."""
    name = colour_or_name if colour_or_name.startswith("cube_") else f"cube_{colour_or_name}"
    return CUBE_NAMES.index(name)
