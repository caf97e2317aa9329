"""Values as the viewer's JSON carries them: metadata (YAML dates, numpy scalars) and arrays of floats
(rounded), with NaN and infinities as None."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def json_value(v: Any) -> Any:
    """A metadata value as JSON can carry it (YAML dates, numpy scalars, NaN as None)."""
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if isinstance(v, np.generic):
        return json_value(v.item())
    return str(v)


def rounded(a: np.ndarray, digits: int = 5) -> list:
    """Values for JSON: rounded, NaN/inf as None."""
    a = np.round(a.astype(np.float64), digits)
    out = a.tolist()
    if not np.isfinite(a).all():
        bad = ~np.isfinite(a)
        if a.ndim == 1:
            out = [None if b else x for x, b in zip(out, bad.tolist())]
        else:
            out = [[None if b else x for x, b in zip(row, brow)] for row, brow in zip(out, bad.tolist())]
    return out
