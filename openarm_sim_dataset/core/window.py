"""An episode's recorded data cut to a window: a stream component to a span of stamps
(:func:`slice_component`), a simulated episode's sidecar to a run of its frames (:func:`trim_sidecar`,
replayable bit for bit), and the ``trim`` record such a cut leaves (:func:`trim_record`).

``dataset-edit`` cuts episodes with these (:mod:`openarm_sim_dataset.edit`); ``dataset-validate``'s
``sim_regenerate`` cuts a regenerated episode the same way to compare it with a trimmed one.
"""

from __future__ import annotations

import numpy as np

from . import sidecar
from .writer import ComponentStreams


def slice_component(c: ComponentStreams, lo: int, hi: int) -> ComponentStreams:
    """The rows of ``c`` stamped within ``[lo, hi]`` (int ns, both inclusive)."""
    keep = (c.timestamps >= lo) & (c.timestamps <= hi)
    return ComponentStreams(np.asarray(c.timestamps)[keep], {k: np.asarray(v)[keep] for k, v in c.attributes.items()})


def trim_sidecar(side: dict[str, np.ndarray], frames: dict[str, np.ndarray], k0: int, k1: int
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The sidecar and frames arrays of a simulated episode cut to its frames ``k0..k1``: the state of
    frame ``k0`` becomes ``initial_state``, ``physics_ctrl`` keeps the commands from its step to the end,
    per-frame arrays keep the frames inside, ``step`` and the judge's step count from the new first step.
    ``trim`` (JSON ``{first_step, source_steps, frames: [first, last] of the original frames}``) and
    ``source_initial_state`` record the cut (accumulated over repeated trims). Replaying the result from
    its ``initial_state`` reproduces every kept frame's state bit for bit."""
    n = len(side["step"])
    if not 0 <= k0 < k1 < n:
        raise ValueError(f"frames {k0}..{k1} are not inside the episode's {n} frames")
    s0 = int(side["step"][k0])
    prev = sidecar.read_json(side, sidecar.TRIM_KEY, "sidecar") or {}
    per_frame = {k for k, a in side.items() if getattr(a, "ndim", 0) >= 1 and len(a) == n
                 and (k in ("step", "time", "frame_timestamp", "state", "qpos", "qvel", "object_pose")
                      or k.startswith(("cam_pos_", "cam_mat_")))}
    out: dict[str, np.ndarray] = {}
    for k, a in side.items():
        if k == "initial_state":
            out[k] = np.array(side["state"][k0], np.float64)
        elif k == "physics_ctrl":
            out[k] = np.array(a[s0:])
        elif k == "step":
            out[k] = np.array(a[k0:k1 + 1] - s0, np.float64)
        elif k in per_frame:
            out[k] = np.array(a[k0:k1 + 1])
        elif k == sidecar.JUDGE_KEY:
            facts = sidecar.read_json(side, k, "sidecar") or {}
            if isinstance(facts.get("step"), int) and not isinstance(facts.get("step"), bool):
                facts["step"] = int(facts["step"]) - s0
            out[k] = sidecar.json_array(facts)
        elif k in (sidecar.TRIM_KEY, sidecar.SOURCE_INITIAL_STATE_KEY):
            continue
        else:
            out[k] = a
    first = int(prev.get("first_step", 0))
    frames_before = prev.get("frames") or [0, n - 1]
    source_steps = int(prev.get("source_steps", len(side["physics_ctrl"])))
    out[sidecar.TRIM_KEY] = sidecar.json_array({"first_step": first + s0, "source_steps": source_steps,
                                                "frames": [int(frames_before[0]) + k0, int(frames_before[0]) + k1]})
    out[sidecar.SOURCE_INITIAL_STATE_KEY] = np.array(side.get(sidecar.SOURCE_INITIAL_STATE_KEY, side["initial_state"]),
                                                     np.float64)
    return out, {k: np.array(a[k0:k1 + 1]) for k, a in frames.items()}


def trim_record(side: dict[str, np.ndarray], path) -> dict | None:
    """The ``trim`` record of a trimmed episode's sidecar (None for an untrimmed one)."""
    return sidecar.read_json(side, sidecar.TRIM_KEY, path)
