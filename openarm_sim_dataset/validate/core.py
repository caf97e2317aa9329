"""Kept for the import path ``openarm_sim_dataset.validate.core``: what a check is lives in :mod:`.check`,
the runner in :mod:`.runner`."""

from .check import (
           BLOCK_ERRORS,
           MAX_FINDINGS_PER_EPISODE,
           NO_EPISODES,
           STATUSES,
           CheckFn,
           CheckResult,
           Context,
           EpisodeCheck,
           Outcome,
           RemoteCheckError,
           Report,
           block_error_text,
           finding,
           fmt,
           no_episodes_detail,
           stats,
)
from .runner import valid_flags, validate, validation_time, write_valid_flags
from .thresholds import Thresholds

__all__ = ["BLOCK_ERRORS", "MAX_FINDINGS_PER_EPISODE", "NO_EPISODES", "STATUSES", "CheckFn", "CheckResult", "Context",
           "EpisodeCheck", "Outcome", "RemoteCheckError", "Report", "Thresholds", "block_error_text", "finding", "fmt",
           "no_episodes_detail", "stats", "valid_flags", "validate", "validation_time", "write_valid_flags"]
