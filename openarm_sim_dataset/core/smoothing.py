"""Low-pass smoothing of obs/action streams: a 4th-order Butterworth filter, as openarm_dataset applies
with ``cutoff=`` (scipy's ``butter`` + ``filtfilt``), or causally (``lfilter``).

``filtfilt`` runs the filter forward and backward: zero phase lag, but every value depends on samples
*after* it (look-ahead), like openarm_dataset's smoothing. ``lfilter`` runs it forward only: each
value depends on the samples at or before it (no look-ahead; a phase lag instead), started from the
steady state of the first sample so that it does not ramp up from zero.

scipy is an optional dependency (extra ``[smoothing]``): only smoothing needs it.
"""

from __future__ import annotations

import math

import numpy as np

MODES = ("filtfilt", "lfilter")
#: Butterworth order (openarm_dataset's).
ORDER = 4
#: Streams this short are returned unfiltered (openarm_dataset's rule: filtfilt needs > 3 * (order + 1) samples).
MIN_SAMPLES = 16
#: Rate assumed for a stream whose rate metadata.yaml does not declare (openarm_dataset's fixed value).
DEFAULT_RATE_HZ = 250.0


def _signal():
    try:
        import scipy.signal as signal
    except ImportError:
        raise ImportError("smoothing (cutoff=) needs scipy: pip install 'openarm-sim-dataset[smoothing]'") from None
    return signal


def check(cutoff: float | None, mode: str = "filtfilt") -> None:
    """Raise ValueError unless ``cutoff`` (Hz) is None or a positive finite number and ``mode`` is known."""
    if cutoff is not None and (isinstance(cutoff, bool) or not isinstance(cutoff, (int, float))
                               or not math.isfinite(cutoff) or cutoff <= 0):
        raise ValueError(f"cutoff must be a positive number of Hz, not {cutoff!r}")
    if mode not in MODES:
        raise ValueError(f"smoothing must be one of {MODES}, not {mode!r}")


def coefficients(cutoff: float, rate_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """(b, a) of the low-pass: normalised cutoff ``cutoff / (rate / 2)`` clipped to [0.01, 0.99] as
    openarm_dataset clips it."""
    wn = min(0.99, max(0.01, cutoff / (0.5 * rate_hz)))
    return _signal().butter(ORDER, wn, btype="low")


def lowpass(values: np.ndarray, cutoff: float, rate_hz: float = DEFAULT_RATE_HZ, mode: str = "filtfilt") -> np.ndarray:
    """``values`` (N, W) filtered along time, as float64; fewer than :data:`MIN_SAMPLES` rows are
    returned unchanged (openarm_dataset's rule)."""
    check(cutoff, mode)
    if len(values) < MIN_SAMPLES:
        return values
    signal = _signal()
    b, a = coefficients(cutoff, rate_hz)
    if mode == "filtfilt":
        return signal.filtfilt(b, a, values, axis=0)
    x = np.asarray(values, dtype=np.float64)
    zi = signal.lfilter_zi(b, a)[:, None] * x[0][None, :]
    y, _ = signal.lfilter(b, a, x, axis=0, zi=zi)
    return y


def renormalize(attribute: str, values: np.ndarray) -> np.ndarray:
    """Project smoothed orientations back onto rotations (in place): the wxyz quaternion of ``pose``
    rows to unit norm, the two columns of ``rot6d`` rows to an orthonormal pair (Gram-Schmidt), as
    openarm_dataset does after smoothing. Other attributes are returned unchanged."""
    if attribute == "pose":
        q = values[:, 3:7]
        n = np.linalg.norm(q, axis=1, keepdims=True)
        values[:, 3:7] = np.divide(q, n, out=q.copy(), where=n > 0)
    elif attribute == "rot6d":
        a, b = values[:, 3:6], values[:, 6:9]
        na = np.linalg.norm(a, axis=1, keepdims=True)
        a = np.divide(a, na, out=a.copy(), where=na > 0)
        b = b - np.sum(a * b, axis=1, keepdims=True) * a
        nb = np.linalg.norm(b, axis=1, keepdims=True)
        values[:, 3:6] = a
        values[:, 6:9] = np.divide(b, nb, out=b.copy(), where=nb > 0)
    return values
