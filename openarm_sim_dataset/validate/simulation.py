"""Checks of meaning for simulated datasets (run when metadata has a ``simulation:`` block): the table.

Each check lives in the module of its concern:

=====================  ==========================================================================
module                 checks
=====================  ==========================================================================
:mod:`.sim_model`      (shared preamble: the episode's model, the renderer, projection helpers)
:mod:`.sim_sidecar`    sim_episodes, sim_schema, sim_ranges, sim_sidecar_agrees, sim_streams_agree
:mod:`.sim_provenance` sim_provenance
:mod:`.sim_labels`     sim_identity, sim_labels
:mod:`.sim_geometry`   sim_geometry, sim_reprojection, sim_wrist_projection
:mod:`.sim_replay`     sim_replay, sim_resume
:mod:`.sim_render`     sim_render, sim_regenerate
=====================  ==========================================================================

The names other modules use (``model``, ``renderer``, ``scene_config``, ...) are re-exported here.
"""

from __future__ import annotations

from openarm_sim_dataset.core import sidecar

from .check import CheckFn, Context, Outcome
from .sim_geometry import check_sim_geometry, check_sim_reprojection, check_sim_wrist
from .sim_labels import check_sim_identity, check_sim_labels
from .sim_model import (  # noqa: F401 - re-exported: cli/replay, validate/distributed and tools import them from here
    CUBE_HALF_DIAGONAL,
    ModelProblem,
    back_project,
    built_model,
    episode_model,
    episode_variation,
    model,
    project,
    renderer,
    same_renderer,
    scene_config,
)
from .sim_provenance import check_sim_provenance
from .sim_render import check_sim_regenerate, check_sim_render
from .sim_replay import check_sim_replay, check_sim_resume
from .sim_sidecar import (
    check_sim_episodes,
    check_sim_ranges,
    check_sim_schema,
    check_sim_sidecar_agrees,
    check_sim_streams_agree,
)

SIM_CHECKS: list[tuple[str, CheckFn]] = [
    ("sim_episodes", check_sim_episodes),
    ("sim_provenance", check_sim_provenance),
    ("sim_identity", check_sim_identity),
    ("sim_schema", check_sim_schema),
    ("sim_ranges", check_sim_ranges),
    ("sim_sidecar_agrees", check_sim_sidecar_agrees),
    ("sim_geometry", check_sim_geometry),
    ("sim_reprojection", check_sim_reprojection),
    ("sim_wrist_projection", check_sim_wrist),
    ("sim_replay", check_sim_replay),
    ("sim_resume", check_sim_resume),
    ("sim_labels", check_sim_labels),  # after sim_replay: judges the state that replay left in ctx.cache
    ("sim_streams_agree", check_sim_streams_agree),
    ("sim_render", check_sim_render),
    ("sim_regenerate", check_sim_regenerate),
]

#: Checks of what only a generator records (a seed's identity, a task's judge, regeneration from the
#: seed): not applicable to a dataset recorded live in a dataflow (``simulation.source: dataflow``),
#: whose episodes a teleoperator drove. Everything else runs on it as on a generated dataset.
GENERATOR_ONLY = {"sim_identity", "sim_labels", "sim_regenerate"}


def _recorded_live(ctx: Context) -> Outcome:
    return Outcome(True, "recorded live in a dataflow (simulation.source: dataflow): no seed, task rule or "
                   "generator to check against", skipped=True, applicable=False)


def sim_checks(simulation: dict | None) -> list[tuple[str, CheckFn]]:
    """The simulation checks' table for a dataset's ``simulation:`` block."""
    if not sidecar.recorded_live(simulation):
        return list(SIM_CHECKS)
    return [(name, _recorded_live if name in GENERATOR_ONLY else fn) for name, fn in SIM_CHECKS]
