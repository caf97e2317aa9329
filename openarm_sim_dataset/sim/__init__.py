"""MuJoCo simulation core: scene, IK, trajectories, scripted pick-and-place, randomisation, rendering.

Importing this package sets ``MUJOCO_GL=egl`` (unless already set) before MuJoCo is imported.

Units and frames everywhere: metres, radians, seconds, quaternions ``(w, x, y, z)``, world z up.

Recorder entry points::

    from openarm_sim_dataset.sim import (SceneConfig, build_model, episode_params, run_episode,
                                         PickPlace, set_initial_state, SimRenderer, arm_index)
"""
from openarm_sim_dataset.core.gl import import_mujoco as _import_mujoco

_import_mujoco()  # MUJOCO_GL=egl unless set; a missing GL stack is one line (RenderingUnavailable), not a traceback

from .ik import IKSolver, solve_ik  # noqa: E402
from .pick_place import OUTCOMES, EpisodeParams, EpisodeResult, PickPlace, run_episode, set_initial_state  # noqa: E402
from .randomize import episode_params  # noqa: E402
from .render import SimRenderer  # noqa: E402
from .scene import (  # noqa: E402
    CUBE_NAMES,
    CUBE_SIZE,
    LABELS,
    REACH_NOTE,
    SIDES,
    ArmIndex,
    SceneConfig,
    arm_index,
    asset_hashes,
    build_model,
    build_spec,
    cube_body_names,
    cube_qpos_adr,
    geom_labels,
    model_hash,
)
from .tasks import TASKS, get_task, make_controller  # noqa: E402
from .trajectory import MinJerkPath, min_jerk_s  # noqa: E402

__all__ = [
    "CUBE_NAMES", "CUBE_SIZE", "LABELS", "REACH_NOTE", "SIDES", "ArmIndex", "SceneConfig", "arm_index",
    "asset_hashes", "build_model", "build_spec", "cube_body_names", "cube_qpos_adr", "geom_labels", "model_hash",
    "IKSolver", "solve_ik", "MinJerkPath", "min_jerk_s", "OUTCOMES", "EpisodeParams", "EpisodeResult",
    "PickPlace", "run_episode", "set_initial_state", "episode_params", "SimRenderer", "TASKS", "get_task",
    "make_controller",
]
