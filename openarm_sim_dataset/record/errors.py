"""The live recorder's exceptions."""

from __future__ import annotations

from openarm_sim_dataset.core.errors import DatasetError


class RecordError(DatasetError):
    """The recorder cannot open the output, or an episode could not be written."""


class EpisodeDiscarded(RecordError):
    """:meth:`Episode.save` of an episode that was discarded (stale camera, write failure); the
    message is the reason."""


class RecorderLockError(RecordError):
    """Another process records into (or generates) this dataset."""
