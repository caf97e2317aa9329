"""Decoding the recording node's dora messages (Arrow) into what the recorder stores: timestamps
(:func:`stamp_ns`), encoded bytes (:func:`uint8`), an arm's joint values (:func:`arm_values`), and
:func:`warm_up`, which runs each conversion once before the dataflow starts."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa

ARM_FIELDS = ("qpos", "qvel", "qtorque", "pose")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def stamp_ns(value) -> int | None:
    """A metadata timestamp as int Unix ns: an integer as is, a ``datetime`` (what dora adds, µs
    resolution) exactly (the reference rounds it through a float: ``ceil(ts.timestamp() * 1e9)``)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return (value - _EPOCH) // datetime.timedelta(microseconds=1) * 1000
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return None


def uint8(value) -> memoryview:
    """The encoded bytes of a UInt8 array (zero copy: the recorder copies them into its ring)."""
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Array):
        if value.type != pa.uint8() or value.null_count:
            raise ValueError(f"expected a UInt8 array of encoded bytes, got {value.type}")
        return memoryview(value.to_numpy(zero_copy_only=True))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return memoryview(value)
    raise ValueError(f"expected a UInt8 array of encoded bytes, got {type(value).__name__}")


def flat(value):
    """A flat Arrow array's values as numpy (a null raises), anything else as it is."""
    if isinstance(value, pa.Array):
        if value.null_count:
            raise ValueError("null values")
        return value.to_numpy(zero_copy_only=False)
    return value


def arm_values(value) -> dict[str, np.ndarray]:
    """qpos/qvel/qtorque/pose of an arm message: a length-1 struct (an action's may hold them under
    ``new_position``) or a flat float32 array (qpos)."""
    if isinstance(value, pa.StructArray) and "new_position" in value.type.names:
        value = value.field("new_position")
    if isinstance(value, pa.StructArray):
        if len(value) != 1:
            raise ValueError(f"expected a length-1 struct, got {len(value)} rows")
        out = {}
        for name in value.type.names:
            if name in ARM_FIELDS:
                cell = value.field(name)[0]
                if not cell.is_valid:
                    raise ValueError(f"{name} is null")
                out[name] = np.asarray(cell.values.to_numpy(zero_copy_only=False), dtype=np.float32)
        if not out:
            raise ValueError(f"struct without any of {', '.join(ARM_FIELDS)} (fields: {', '.join(value.type.names)})")
        return out
    return {"qpos": np.asarray(flat(value), dtype=np.float32)}


def warm_up() -> None:
    """Run each message conversion once on dummy data, so that what it loads lazily is loaded before
    the dataflow starts: pyarrow imports pandas (0.7 s on a loaded 2-core machine) at the first
    struct scalar, and in a live dataflow that was the first sample of the first episode, while dora
    dropped the episode's inputs (a 1 s episode kept a quarter of its rows)."""
    z = np.zeros(8, np.float32)
    arm_values(pa.array([{f: z for f in ARM_FIELDS}]))
    arm_values(pa.array(z))
    uint8(pa.array(np.zeros(4, np.uint8)))
