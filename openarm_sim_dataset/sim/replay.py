"""Replay an episode's physics from its sidecar and compare with what was stored, bit for bit.

Scope of exactness: same machine architecture, same MuJoCo build, same compiled model (hash).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass
class ReplayReport:
    """What a replay reproduced: frames compared/exact, largest |difference| in qpos and qvel."""

    start_frame: int
    frames: int
    exact: int
    max_qpos_diff: float
    max_qvel_diff: float
    first_mismatch: int | None

    @property
    def ok(self) -> bool:
        return self.frames > 0 and self.exact == self.frames


def replay(model: mujoco.MjModel, side: dict[str, np.ndarray], from_frame: int | None = None,
           state_only: str = "integration") -> ReplayReport:
    """Replay ``physics_ctrl`` and compare qpos/qvel at every stored frame.

    ``from_frame=None`` starts from ``initial_state``; ``from_frame=k`` resumes from the stored
    state of frame k. ``state_only="qpos_qvel"`` resumes from qpos, qvel, time and ctrl alone
    (no warm start): shown by the tests not to be exact during contact.
    """
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    data = mujoco.MjData(model)
    ctrl = side["physics_ctrl"]
    steps = side["step"].astype(np.int64)
    if from_frame is None:
        mujoco.mj_setState(model, data, side["initial_state"], spec)
        start, k0 = 0, 0
    else:
        k0 = int(from_frame)
        start = int(steps[k0])
        if state_only == "integration":
            mujoco.mj_setState(model, data, side["state"][k0], spec)
        else:
            mujoco.mj_resetData(model, data)
            data.qpos[:] = side["qpos"][k0]
            data.qvel[:] = side["qvel"][k0]
            data.time = float(side["time"][k0])
            data.ctrl[:] = ctrl[start] if start < len(ctrl) else ctrl[-1]
            mujoco.mj_forward(model, data)
    exact = 0
    dq = dv = 0.0
    first = None
    frames = range(k0, len(steps))
    s = start
    for k in frames:
        target = int(steps[k])
        while s < target:
            data.ctrl[:] = ctrl[s]
            mujoco.mj_step(model, data)
            s += 1
        eq = np.array_equal(data.qpos, side["qpos"][k]) and np.array_equal(data.qvel, side["qvel"][k])
        exact += eq
        if not eq and first is None:
            first = k
        dq = max(dq, float(np.max(np.abs(data.qpos - side["qpos"][k]))))
        dv = max(dv, float(np.max(np.abs(data.qvel - side["qvel"][k]))))
    return ReplayReport(k0, len(frames), exact, dq, dv, first)
