"""The signal checks: every dimension of every state and action vector, whatever the robot and whatever
the names of its features (`observation.state` or `state`, `action` or `actions`, OpenArm arms or any
other robot), in the OpenArm layout and in LeRobot datasets alike: values that are not finite, constant
dimensions, a frozen action, values pinned at a bound, outliers and jumps, drift over a task's episodes,
a joint stuck at 0.0, the action's convention against the state, rows written twice.

Each finding names the dimension by its name (the stream's column: LeRobot's `names` entry), the episode
and the time. Which features are state and action is :mod:`~openarm_sim_dataset.core.feature_roles`'s;
which streams and dimensions each row judges, :mod:`.signal_streams`'s. The rows that compare a dimension
over the whole dataset are :class:`~.check.EpisodeCheck` rows (one small summary per episode, compared at
the end), so their verdict is the dataset's also when it is validated in groups or on Ray.
"""

from __future__ import annotations

from .check import CheckFn
from .signal_action import check_action_convention, check_frozen_action
from .signal_dataset import (
    check_constant_dimensions,
    check_drift,
    check_outliers,
    check_pinned_at_bound,
    check_stuck_zero_joint,
)
from .signal_rows import check_duplicate_rows, check_nonfinite_values

SIGNAL_CHECKS: list[tuple[str, CheckFn]] = [
    ("nonfinite_values", check_nonfinite_values),
    ("constant_dimensions", check_constant_dimensions),
    ("frozen_action", check_frozen_action),
    ("pinned_at_bound", check_pinned_at_bound),
    ("outliers", check_outliers),
    ("drift", check_drift),
    ("stuck_zero_joint", check_stuck_zero_joint),
    ("action_convention", check_action_convention),
    ("duplicate_rows", check_duplicate_rows),
]
