"""A scripted stand-in for a leader and the web UI (:mod:`.sim_nodes` ``leader``): slow sine targets
for both arms on every ``tick``, and the recording commands of a planned session."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from openarm_sim_dataset.core.synthetic import MID_QPOS

from .openarm_messages import qpos_type


def leader(node, seconds: float, episodes: int, gap: float = 0.3, cancel_first: bool = False,
           warmup: float = 1.0) -> None:
    """Scripted leader + UI: episodes of ``seconds``, ``gap`` s apart; the first cancelled and
    restarted under the same number if ``cancel_first``; then ``quit``. The plan's clock starts
    ``warmup`` s after the first ``tick``: what a human operator waits before pressing start, and what
    lets a timer's first backlog pass."""
    q_type = qpos_type()
    plan: list[tuple[float, str, dict]] = []
    t = gap
    number = 0
    if cancel_first:
        plan += [(t, "start", {"episode_number": 0, "task_index": 0}), (t + seconds / 2, "cancel", {})]
        t += seconds / 2 + gap
    for k in range(episodes):
        plan += [(t, "start", {"episode_number": number, "task_index": 0}),
                 (t + seconds, "success" if k % 2 == 0 else "fail", {})]
        number += 1
        t += seconds + gap
    plan.append((t, "quit", {}))
    t0 = None
    i = 0
    for event in node:
        if event["type"] != "INPUT" or event["id"] != "tick":
            continue
        if t0 is None:
            t0 = time.perf_counter() + warmup
        now = time.perf_counter() - t0
        for side in ("right", "left"):
            q = (MID_QPOS[side] + 0.15 * np.sin(2 * np.pi * 0.5 * now + np.arange(8))).astype(np.float32)
            q[7] = MID_QPOS[side][7]
            node.send_output(f"move_position_{side}", pa.array([{"qpos": q}], type=q_type))
            node.send_output(f"action_{side}", pa.array(q, type=pa.float32()))
        while i < len(plan) and plan[i][0] <= now:
            _, c, md = plan[i]
            node.send_output("command", pa.array([c]), md)
            i += 1
        if i == len(plan) and now > plan[-1][0] + 0.5:
            break
