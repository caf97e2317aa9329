"""The step-wise controller of one task (:class:`ScriptedController`): its lanes stepped together, in
a fixed order, once per physics step (two arms can pick at once, and one can wait for the other with
a phase's ``until``), judged when every lane has ended."""

from __future__ import annotations

import mujoco
import numpy as np

from ...scene import ArmIndex, arm_index, cube_qpos_adr
from .geometry import arm_contact_pairs, geoms_touch, table_height, tray_geometry, up_vector
from .lanes import Lane
from .params import EpisodeParams


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
        self.targets: dict[str, np.ndarray] = {"right": np.zeros(8), "left": np.zeros(8)}
        self.right: ArmIndex = arm_index(model, "right")
        self.left: ArmIndex = arm_index(model, "left")
        self.lanes: list[Lane] = self.make_lanes()
        self.count_arm_contacts = count_arm_contacts
        if count_arm_contacts:
            self._right_geoms, self._left_geoms = arm_contact_pairs(model)

    def make_lanes(self) -> list[Lane]:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self, data: mujoco.MjData) -> None:
        """Plan the first attempt of every lane (default: pick-and-place from the current arm targets)."""
        for lane in self.lanes:
            q = data.qpos[lane.arm.qpos[:7]].copy()
            g = float(data.ctrl[lane.arm.actuators[7]])
            lane.plan_pick_place(data, np.concatenate([q, [g]]))
            if self.done:
                return

    def judge(self, data: mujoco.MjData) -> tuple[str, bool]:  # pragma: no cover - abstract
        """(outcome, knocked_over) from the final state."""
        raise NotImplementedError

    def goal_reached(self, data: mujoco.MjData) -> bool:  # pragma: no cover - abstract
        """The geometric part of the success rule, from the state alone (no lane bookkeeping): what
        :meth:`judge` calls success when no lane was aborted."""
        raise NotImplementedError

    @property
    def objects(self) -> list[str]:
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

    def reset(self, data: mujoco.MjData) -> None:
        """Start a new episode from the state in ``data`` (plans the first attempt of each lane)."""
        self.rng = np.random.default_rng(self.params.ik_seed)
        self.done = False
        self.outcome: str | None = None
        self.knocked_over = False
        self.judged_step: int | None = None
        self.phase_log: list[tuple[str, int]] = []
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
    def estimates(self) -> list[tuple[float, float, float]]:
        return [e for lane in self.lanes for e in lane.estimates]

    @property
    def phase(self) -> str:
        """Name of the current phase of the first unfinished lane (``"done"`` when finished)."""
        for lane in self.lanes:
            if not lane.finished and not self.done:
                return lane.phase
        return "done"

    def lane_finished(self, lane: Lane) -> None:
        if all(la.finished for la in self.lanes):
            self.judged_step = self.step_index  # data holds the state before physics step judged_step
            self.outcome, self.knocked_over = self.judge(self._data)
            self.done = True
            self.phase_log.append(("done", self.step_index))

    #: Lane attributes the judge reads besides the final state: what happened on the way (a forced
    #: outcome, the phase at whose end the object was lost, whether it was ever lifted).
    HISTORY = ("outcome", "lost_phase", "lifted")

    def judge_facts(self) -> dict[str, object]:
        """What :meth:`judge` needs besides the judged state and the initial state, JSON-able:
        ``{"step": physics step of the judged state (None: never judged, a timeout), "lanes": [{outcome,
        lost_phase, lifted} per lane]}``. Stored in the sidecar so that :func:`~.rejudge` can judge again."""
        return {"step": self.judged_step,
                "lanes": [{k: getattr(lane, k) for k in self.HISTORY} for lane in self.lanes]}

    def restore(self, initial: mujoco.MjData, facts: dict[str, object]) -> None:
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
        if geoms_touch(data, self._right_geoms, self._left_geoms):
            self.arm_contacts += 1

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

    def in_tray(self, data: mujoco.MjData, obj: str) -> bool:
        """Object ``obj`` rests inside the tray's inner footprint, low (centre < 6 cm above the table)."""
        a, _ = cube_qpos_adr(self.model, obj)
        p = data.qpos[a:a + 3]
        d = np.abs(p[:2] - self.tray_xy)
        return bool(d[0] < self.tray_half[0] and d[1] < self.tray_half[1] and p[2] < self.table_z + 0.06)

    def turned(self, data: mujoco.MjData, lane_or_obj, start_up: np.ndarray | None = None) -> bool:
        """Whether an object rests on another face than at the start (its up axis turned > ~25 deg)."""
        if isinstance(lane_or_obj, Lane):
            a, start_up = lane_or_obj.qadr, lane_or_obj.start_up
        else:
            a, _ = cube_qpos_adr(self.model, lane_or_obj)
        return float(up_vector(data.qpos[a + 3:a + 7]) @ start_up) < 0.9
