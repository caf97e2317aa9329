"""Validation: checks of form (any dataset) and of meaning (simulated datasets), as data.

Each check is a row ``(name, function)`` in :data:`FORM_CHECKS` or :data:`SIM_CHECKS`; a function
takes a :class:`Context` and returns a :class:`Outcome` (passed, detail with figures, episodes
affected). Adding a check is adding a row. :func:`validate` runs the table and returns
:class:`CheckResult` rows; :func:`write_valid_flags` records ``valid: true|false`` per episode.
"""

from __future__ import annotations

from .core import CheckResult, Context, Outcome, Thresholds, validate, valid_flags, write_valid_flags
from .form import FORM_CHECKS
from .simulation import SIM_CHECKS

__all__ = [
    "CheckResult",
    "Context",
    "FORM_CHECKS",
    "Outcome",
    "SIM_CHECKS",
    "Thresholds",
    "validate",
    "valid_flags",
    "write_valid_flags",
]
