"""Damped-least-squares inverse kinematics on ``mj_jacSite``.

Solves position + orientation of an arm's ``{side}_ee_control_point`` site (or
any site rigidly attached to its end effector) over that arm's joint1..7, with
joint limits (clipping) and random restarts drawn from a caller-supplied
:class:`numpy.random.Generator` (so the result is deterministic given it).

Frames/units: target position in world metres, target orientation as a world
quaternion ``(w, x, y, z)`` of the site frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from .scene import ArmIndex, arm_index

__all__ = ["IKSolver", "solve_ik"]


@dataclass
class IKSolver:
    """Reusable IK solver for one arm of ``model`` (owns a scratch MjData).

    Args:
        model: compiled scene model.
        side: ``"right"`` or ``"left"``.
        damping: DLS damping lambda (in units of the task error).
        max_iters: iterations per attempt.
        pos_tol: position tolerance (m).
        rot_tol: orientation tolerance (rad, axis-angle norm).
        restarts: number of random restarts after the first (seeded) attempt.
        posture_gain: weight of the null-space pull toward the seed posture.
    """

    model: mujoco.MjModel
    side: str = "right"
    damping: float = 1e-2
    max_iters: int = 150
    pos_tol: float = 1e-3
    rot_tol: float = 1e-2
    restarts: int = 12
    posture_gain: float = 0.02

    def __post_init__(self) -> None:
        self.data = mujoco.MjData(self.model)
        self.arm: ArmIndex = arm_index(self.model, self.side)
        self._qadr = self.arm.qpos[:7]
        self._dadr = self.arm.qvel[:7]
        self._lo = self.arm.jnt_low
        self._hi = self.arm.jnt_high
        self._jacp = np.zeros((3, self.model.nv))
        self._jacr = np.zeros((3, self.model.nv))

    def site_pose(self, q: np.ndarray, site: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) and rotation matrix (3, 3) of the site at arm joints ``q``."""
        site = self.arm.site if site is None else site
        self.data.qpos[self._qadr] = q
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[site].copy(), self.data.site_xmat[site].reshape(3, 3).copy()

    def _error(self, pos, quat, site) -> tuple[np.ndarray, float, float]:
        d = self.data
        ep = pos - d.site_xpos[site]
        cur = np.zeros(4)
        mujoco.mju_mat2Quat(cur, d.site_xmat[site])
        neg = np.zeros(4)
        mujoco.mju_negQuat(neg, cur)
        dq = np.zeros(4)
        mujoco.mju_mulQuat(dq, quat, neg)
        er = np.zeros(3)
        mujoco.mju_quat2Vel(er, dq, 1.0)
        return np.concatenate([ep, er]), float(np.linalg.norm(ep)), float(np.linalg.norm(er))

    def _attempt(self, q0, pos, quat, site):
        m, d = self.model, self.data
        q = np.clip(q0.copy(), self._lo, self._hi)
        eye = np.eye(6)
        for _ in range(self.max_iters):
            d.qpos[self._qadr] = q
            mujoco.mj_kinematics(m, d)
            e, ep, er = self._error(pos, quat, site)
            if ep < self.pos_tol and er < self.rot_tol:
                return q, True, ep, er
            mujoco.mj_comPos(m, d)
            mujoco.mj_jacSite(m, d, self._jacp, self._jacr, site)
            J = np.vstack([self._jacp[:, self._dadr], self._jacr[:, self._dadr]])
            JJt = J @ J.T + (self.damping ** 2) * eye
            dq = J.T @ np.linalg.solve(JJt, e)
            # Null-space posture pull toward the seed.
            Jp = J.T @ np.linalg.solve(JJt, J)
            dq += (np.eye(7) - Jp) @ (self.posture_gain * (q0 - q))
            n = np.linalg.norm(dq)
            if n > 0.5:
                dq *= 0.5 / n
            q = np.clip(q + dq, self._lo, self._hi)
        d.qpos[self._qadr] = q
        mujoco.mj_kinematics(m, d)
        _, ep, er = self._error(pos, quat, site)
        return q, (ep < self.pos_tol and er < self.rot_tol), ep, er

    def solve(
        self,
        pos: np.ndarray,
        quat: np.ndarray,
        q_seed: np.ndarray,
        rng: np.random.Generator | None = None,
        site: int | None = None,
    ) -> tuple[np.ndarray, bool, float]:
        """Solve for arm joints (7,) placing ``site`` at ``pos`` (world m) with orientation ``quat`` (wxyz).

        The first attempt starts from ``q_seed``; up to ``restarts`` further
        attempts start from uniform random joints drawn from ``rng`` (skipped if
        ``rng`` is None).  Returns ``(q, success, error)`` with ``error`` = position
        error (m) + orientation error (rad) of the best attempt.
        """
        site = self.arm.site if site is None else site
        pos = np.asarray(pos, float)
        quat = np.asarray(quat, float)
        quat = quat / np.linalg.norm(quat)
        best = None
        starts = [np.asarray(q_seed, float)]
        n_extra = self.restarts if rng is not None else 0
        for k in range(1 + n_extra):
            if k > 0:
                starts.append(rng.uniform(self._lo, self._hi))
            q, ok, ep, er = self._attempt(starts[k], pos, quat, site)
            err = ep + er
            if best is None or err < best[2]:
                best = (q, ok, err)
            if ok:
                break
        return best[0].copy(), bool(best[1]), float(best[2])


def solve_ik(
    model: mujoco.MjModel,
    side: str,
    pos: np.ndarray,
    quat: np.ndarray,
    q_seed: np.ndarray,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, bool, float]:
    """One-shot convenience wrapper around :class:`IKSolver` (see :meth:`IKSolver.solve`)."""
    return IKSolver(model, side).solve(pos, quat, q_seed, rng)
