"""Kept for the import path ``openarm_sim_dataset.sim.randomize``: the default task's per-episode draws live
in :mod:`openarm_sim_dataset.sim.tasks.pick_place_draws`, beside the task."""

from .tasks.pick_place_draws import MIN_DIST_OTHER, MIN_DIST_TARGET, episode_params

__all__ = ["MIN_DIST_OTHER", "MIN_DIST_TARGET", "episode_params"]
