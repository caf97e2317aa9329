"""Per-arm lanes: a :class:`Lane` is one arm moving one object through a queue of :class:`Phase`
objects (a joint-space :class:`~...trajectory.MinJerkPath` of 7 joint targets + the gripper command,
a duration in physics steps, an optional check run when the phase ends, an optional condition that
must hold before it ends); :class:`PlaceTarget` says where the lane puts its object down.

Primitives (all top-down, fingers straight down, frames: world metres, radians, wxyz):

* :meth:`Lane.plan_pick_place` -- approach (joint-space min-jerk to :data:`.params.APPROACH_HEIGHT`
  above the *estimated* object) -> descend (straight line) -> close [grasp check] -> lift (straight
  line) [lift check] -> carry (joint-space, kept above the approach height minus
  :data:`.params.CARRY_DIP`) [carry check] -> lower (straight line) -> release -> retreat -> optional
  extra phases -> settle [final check: the task judges when every lane has ended];
* :meth:`Lane.plan_retry` (open, rise, estimate again, plan the attempt again) and
  :meth:`Lane.abort_to` (open, rise, finish with a failure category);
* checks: :meth:`Lane.grasp_ok` (both fingers touch the object and the gripper did not close
  fully), :meth:`Lane.object_held` (off the table, touched, near the grasp point).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from ...ik import IKSolver
from ...scene import ArmIndex, arm_index, cube_qpos_adr
from ...trajectory import MinJerkPath
from .geometry import topdown_quat, up_vector, wrap_yaw_90, yaw_of_quat
from .params import (
    APPROACH_HEIGHT,
    CARRY_DIP,
    GRASP_DEPTH,
    GRIPPER_CLOSED,
    GRIPPER_OPEN,
    MAX_KNOT_JUMP,
    N_KNOTS,
    PLACE_YAW_OFFSETS,
    T_APPROACH,
    T_CARRY,
    T_CLOSE,
    T_DESCEND,
    T_LIFT,
    T_LOWER,
    T_REASCEND,
    T_RELEASE,
    T_REOPEN,
    T_RETREAT,
    T_SETTLE,
    YAW_NOISE_PER_M,
    YAW_OFFSETS,
)

if TYPE_CHECKING:
    from .controller import ScriptedController


class Phase:
    """One segment of a lane: ``path`` sampled for ``steps`` physics steps, then ``check`` (a name the
    lane or task interprets). ``until``: the phase also lasts until this returns True (held at its end)."""

    __slots__ = ("name", "path", "steps", "check", "until")

    def __init__(self, name: str, path: MinJerkPath, steps: int, check: str | None = None,
                 until: Callable[[], bool] | None = None) -> None:
        self.name, self.path, self.steps, self.check, self.until = name, path, steps, check, until


@dataclass
class PlaceTarget:
    """Where a lane puts its object down: centre (x, y) in world m, the ee height (m) at release and
    the gripper yaw offsets (rad, relative to the grasp yaw) tried in order."""

    xy: tuple[float, float]
    z_ee: float
    yaw_offsets: tuple[float, ...] = PLACE_YAW_OFFSETS
    #: absolute gripper yaws (rad) tried before ``yaw_offsets`` (e.g. fingers closing along world x)
    yaws: tuple[float, ...] = ()


class Lane:
    """One arm moving one object: its phase queue, checks and failure category.

    ``ctl`` is the owning controller (shared IK restart generator, step counter, phase log).
    ``obj``: cube body name; ``pick_zc``: world z (m) of the object's centre where it is grasped;
    ``place``: a function of the estimated object pose returning a :class:`PlaceTarget`
    (re-evaluated at every attempt); ``after_retreat``: builds extra phases after the retreat (e.g.
    move back over the arm's own side).
    """

    def __init__(self, ctl: ScriptedController, side: str, obj: str, pick_zc: float,
                 place: Callable[[Lane, tuple[float, float, float]], PlaceTarget],
                 after_retreat: Callable[[Lane, np.ndarray], list[Phase]] | None = None,
                 before_carry: Callable[[Lane, np.ndarray], list[Phase]] | None = None,
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

    def reset(self, data: mujoco.MjData) -> None:
        self.finished = False
        self.outcome: str | None = None  # forced outcome (ik_failed, abort) or None: judged
        self.attempts = 0
        self.estimates: list[tuple[float, float, float]] = []
        self.max_z = float(data.qpos[self.qadr + 2])
        self.lost_phase: str | None = None  # blind mode: phase at whose end the object was not held
        self.lifted = False
        self.start_up = up_vector(data.qpos[self.qadr + 3:self.qadr + 7])
        self.phases: list[Phase] = []
        self.pi = 0
        self.k = 0

    @property
    def phase(self) -> str:
        return self.phases[self.pi].name if not self.finished and self.phases else "done"

    def _log(self, name: str) -> None:
        self.ctl.phase_log.append((self.prefix + name, self.ctl.step_index))

    def finish(self, outcome: str | None = None) -> None:
        """End this lane (``outcome`` forces the category; None: the task judges from the final state)."""
        self.finished = True
        if outcome is not None:
            self.outcome = outcome
        self.ctl.lane_finished(self)

    def estimate(self, data: mujoco.MjData) -> tuple[float, float, float]:
        """Perceived (x, y, yaw) of the object: true pose + sigma-scaled draw of this attempt."""
        a = self.qadr
        x, y = float(data.qpos[a]), float(data.qpos[a + 1])
        yaw = yaw_of_quat(data.qpos[a + 3:a + 7])
        p = self.ctl.params
        k = min(self.attempts - 1, len(p.perception_draws) - 1)  # attempts already counts this one
        dx, dy, dyaw = p.perception_draws[k]
        s = p.sigma
        return x + s * dx, y + s * dy, yaw + s * YAW_NOISE_PER_M * dyaw

    def line(self, p0, p1, yaw0, q_seed, yaw1=None) -> np.ndarray | None:
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

    def finger_contacts(self, data: mujoco.MjData) -> tuple[bool, bool]:
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

    def on_phase_end(self, data: mujoco.MjData, check: str | None) -> bool:
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

    def step(self, data: mujoco.MjData, ctrl: np.ndarray, targets: dict[str, np.ndarray]) -> None:
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
