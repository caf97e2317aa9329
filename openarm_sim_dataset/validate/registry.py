"""The check registry: every check of the validator as a row ``(name, function)``, in the order a report
lists them. Each family keeps its rows in its own module (``FORM_CHECKS`` in :mod:`.form`, ``SIM_CHECKS`` in
:mod:`.simulation`, ...); adding a check is adding a row there. :func:`check_table` is the one place that
puts the families together."""

from __future__ import annotations

from types import ModuleType

from .camera_placement import PLACEMENT_CHECKS
from .cameras import CAMERA_CHECKS
from .check import CheckFn
from .encoding import ENCODING_CHECKS
from .form import FORM_CHECKS
from .lerobot import LEROBOT_CHECKS, LEROBOT_QUICK, OPENARM_ONLY
from .physics import PHYSICS_CHECKS
from .signals import SIGNAL_CHECKS

#: the names of the simulation checks, known once their family is loaded (no table holds one before)
_SIM_NAMES: set[str] = set()


#: The checks that cost seconds per episode (every camera frame decoded and compared, the physics replayed,
#: the cameras rendered again): under sampled validation (``--sample``) only the sampled episodes get them;
#: every other check (form, integrity, streams, JPEG headers, physical consistency, the simulation block
#: and sidecars' form) runs on every episode.
SAMPLED_CHECKS = frozenset({
    "camera_frozen", "camera_continuity", "camera_joint_timing", "camera_placement",
    "sim_geometry", "sim_reprojection", "sim_wrist_projection", "sim_replay", "sim_resume", "sim_labels",
    "sim_render", "sim_regenerate",
})


def family_of(name: str) -> str:
    """The family (``form``, ``cameras``, ..., ``simulation``) a check belongs to."""
    for family, rows, _ in families():
        if any(n == name for n, _ in rows):
            return family
    raise KeyError(name)


def simulation_family() -> ModuleType:
    """:mod:`.simulation`, the checks of simulated datasets (loaded on first use)."""
    from . import simulation  # start-up: validating a recording never imports MuJoCo and the simulator

    _SIM_NAMES.update(name for name, _ in simulation.SIM_CHECKS)
    return simulation


def is_sim_check(name: str) -> bool:
    """Whether ``name`` is a simulation check (a malformed ``simulation:`` block fails these, never crashes
    them)."""
    return name in _SIM_NAMES


def families() -> list[tuple[str, list[tuple[str, CheckFn]], str]]:
    """Every family of checks as ``(name, rows, what its rows apply to)``, in the order a report lists them:
    what :func:`check_table` draws from (the check reference of the documentation prints it). Loads the
    simulation family."""
    return [
        ("form", FORM_CHECKS, "every dataset, recorded or simulated, any layout version; also under `--quick`"),
        ("cameras", CAMERA_CHECKS + PLACEMENT_CHECKS, "every dataset with cameras (camera content, no sidecar needed); not under `--quick`"),
        ("encoding", ENCODING_CHECKS, "every dataset with JPEG cameras; not under `--quick`"),
        ("physics", PHYSICS_CHECKS,
         "every dataset (physical consistency of recorded data, no sidecar needed); not under `--quick`"),
        ("signals", SIGNAL_CHECKS, "every dataset (every dimension of every state and action vector); not under `--quick`"),
        ("lerobot", LEROBOT_CHECKS,
         "LeRobot datasets (v2.1, v3.0), in place of the OpenArm layout's own rows (episode folders, manifests, "
         "summaries, parquet schema, JPEG encoding); info, files, indices, timestamps and video windows also under "
         "`--quick`"),
        ("simulation", simulation_family().SIM_CHECKS,
         "simulated datasets (a `simulation:` block and sidecars); not under `--quick` or `--no-simulation`"),
    ]


def check_table(simulation_block: dict | None, quick: bool = False,
                simulation: bool = True, lerobot: bool = False) -> list[tuple[str, CheckFn]]:
    """The rows that apply to a dataset whose metadata has ``simulation_block`` (None: a recording):
    the form checks (incl. integrity); unless ``quick``, the camera content, JPEG encoding and physical
    consistency checks; and for a simulated dataset (unless ``simulation`` is false) the simulation
    checks its block calls for. ``lerobot``: a LeRobot dataset, whose rows replace the OpenArm
    layout's own."""
    table = list(FORM_CHECKS)
    if lerobot:
        table = [row for row in table if row[0] not in OPENARM_ONLY]
        table += [row for row in LEROBOT_CHECKS if not quick or row[0] in LEROBOT_QUICK]
    if quick:
        return table
    table += CAMERA_CHECKS + PLACEMENT_CHECKS + ENCODING_CHECKS + PHYSICS_CHECKS + SIGNAL_CHECKS
    if lerobot:
        return [row for row in table if row[0] not in OPENARM_ONLY]
    if simulation and simulation_block is not None:
        table += simulation_family().sim_checks(simulation_block)
    return table
