"""Validation: checks of form (any dataset) and of meaning (simulated datasets), as data.

Each check is a row ``(name, function)`` in :data:`FORM_CHECKS`, :data:`CAMERA_CHECKS`, :data:`ENCODING_CHECKS`,
:data:`PHYSICS_CHECKS` or :data:`SIM_CHECKS`; a function
takes a :class:`Context` and returns a :class:`Outcome` (passed, detail with figures, episodes
affected). Adding a check is adding a row. :func:`validate` runs the table and returns
:class:`CheckResult` rows; :func:`write_valid_flags` records ``valid: true|false`` per episode.
"""

from __future__ import annotations

from openarm_sim_dataset.core.lazy import lazy_attributes

from .thresholds import Thresholds

# The rest on first use (PEP 562): `dataset-validate --help` needs only the thresholds.
_LAZY = {"CheckResult": "core", "Context": "core", "Outcome": "core", "validate": "core", "valid_flags": "core",
         "write_valid_flags": "core", "FORM_CHECKS": "form", "SIM_CHECKS": "simulation",
         "CAMERA_CHECKS": "cameras", "Report": "core", "ENCODING_CHECKS": "encoding", "PHYSICS_CHECKS": "physics", "NO_EPISODES": "check",
         "Sample": "sampling", "sampled_validate": "sampling"}
__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "CAMERA_CHECKS",
    "ENCODING_CHECKS",
    "CheckResult",
    "Context",
    "FORM_CHECKS",
    "NO_EPISODES",
    "Outcome",
    "PHYSICS_CHECKS",
    "Report",
    "SIM_CHECKS",
    "Sample",
    "Thresholds",
    "sampled_validate",
    "validate",
    "valid_flags",
    "write_valid_flags",
]
