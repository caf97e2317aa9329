"""``dora-openarm`` 1.3.0's messages as the simulated nodes (:mod:`.sim_nodes`) send and take them:
the Arrow types of an arm's ``state`` and ``position`` (:func:`state_type`, :func:`qpos_type`), the
``status`` values, and the targets of a ``move_position`` (:func:`targets`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

STATUS_STARTED, STATUS_STOPPED = "STARTED", "STOPPED"


def state_type():
    """The Arrow type of an arm's ``state`` message (a length-1 struct)."""
    bus = pa.struct([("carrier", pa.bool_()), ("bus_off", pa.int64()), ("error_passive", pa.int64()),
                     ("error_warning", pa.int64()), ("ack_error", pa.int64()), ("tx_overflow", pa.int64()),
                     ("rx_overflow", pa.int64()), ("net_down", pa.int64())])
    return pa.struct([("qpos", pa.list_(pa.float32())), ("qvel", pa.list_(pa.float32())),
                      ("qtorque", pa.list_(pa.float32())), ("tmos", pa.list_(pa.int32())),
                      ("trotor", pa.list_(pa.int32())), ("motor_status", pa.list_(pa.string())), ("bus", bus)])


def qpos_type():
    """The Arrow type of an arm's ``position`` and ``move_position`` messages (a length-1 struct)."""
    return pa.struct([("qpos", pa.list_(pa.float32()))])


BUS = {"carrier": True, "bus_off": 0, "error_passive": 0, "error_warning": 0, "ack_error": 0,
       "tx_overflow": 0, "rx_overflow": 0, "net_down": 0}


def targets(value) -> np.ndarray:
    """The 8 targets of a ``move_position`` message (struct with qpos, or a flat array)."""
    if isinstance(value, pa.StructArray):
        value = value.field("qpos")[0].values
    v = np.asarray(value.to_numpy(zero_copy_only=False) if hasattr(value, "to_numpy") else value, dtype=np.float64)
    if v.shape != (8,) or not np.all(np.isfinite(v)):
        raise ValueError(f"move_position: expected 8 finite targets, got shape {v.shape}")
    return v
