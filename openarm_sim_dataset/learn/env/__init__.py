"""Gymnasium environments of the task library: ``OpenArmSim/<task>-v0``, one per registered task.

Importing this module registers them (``gymnasium.make("OpenArmSim/pick_place-v0", cameras=False)``);
:func:`make` builds one directly. Needs the ``env`` extra (``pip install 'openarm-sim-dataset[env]'``).
See :mod:`.core` for the observation, action, time and ``info`` contract.
"""

from __future__ import annotations

try:
    import gymnasium
except ImportError:  # one line naming the install, never a traceback
    raise ImportError("openarm_sim_dataset.env needs gymnasium: pip install 'openarm-sim-dataset[env]'") from None

from openarm_sim_dataset.sim.tasks import task_names

from .core import PROMPT_CHARSET, OpenArmEnv, config_for_task

__all__ = ["OpenArmEnv", "PROMPT_CHARSET", "config_for_task", "env_id", "make", "register_all"]

NAMESPACE = "OpenArmSim"


def env_id(task: str) -> str:
    """Gymnasium id of ``task``'s environment."""
    return f"{NAMESPACE}/{task}-v0"


def register_all() -> list[str]:
    """Register every task of the library (idempotent); returns the ids."""
    ids = []
    for name in task_names():
        eid = env_id(name)
        if eid not in gymnasium.registry:
            gymnasium.register(id=eid, entry_point="openarm_sim_dataset.env.core:OpenArmEnv",
                               kwargs={"task": name}, disable_env_checker=False)
        ids.append(eid)
    return ids


def make(task: str, **options) -> OpenArmEnv:
    """The environment of ``task`` (options: those of :class:`OpenArmEnv`), without Gymnasium's wrappers."""
    return OpenArmEnv(task, **options)


register_all()
