"""Validation: checks of form (any dataset) and of meaning (simulated datasets), as data.

Each check is a row ``(name, function)`` in :data:`FORM_CHECKS`, :data:`CAMERA_CHECKS` or :data:`SIM_CHECKS`; a function
takes a :class:`Context` and returns a :class:`Outcome` (passed, detail with figures, episodes
affected). Adding a check is adding a row. :func:`validate` runs the table and returns
:class:`CheckResult` rows; :func:`write_valid_flags` records ``valid: true|false`` per episode.
"""

from __future__ import annotations

from .cameras import CAMERA_CHECKS
from .core import CheckResult, Context, Outcome, Report, Thresholds, validate, valid_flags, write_valid_flags
from .form import FORM_CHECKS
from .simulation import SIM_CHECKS

__all__ = [
    "CAMERA_CHECKS",
    "CheckResult",
    "Context",
    "FORM_CHECKS",
    "Outcome",
    "Report",
    "SIM_CHECKS",
    "Thresholds",
    "validate",
    "valid_flags",
    "write_valid_flags",
]
