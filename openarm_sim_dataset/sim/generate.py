"""Generate a simulated dataset: episodes from seeds, recorded, committed one by one, resumable.

Episode ``i`` of seed ``S`` depends on ``numpy.random.default_rng([S, i])`` only, so any range of
episodes can be generated alone (``episode_range``) and shards merge into the same dataset as one
run. A run on an existing output resumes: leftovers of an interrupted episode are removed, listed
episodes are kept, and arguments that contradict the stored ``simulation:`` block are refused.
One process at a time may write an output: an ``flock`` (released by the kernel if its holder dies)
on a hidden file *beside* the output, ``<parent>/.<name>.lock``, removed by its holder when it ends,
so the dataset folder holds only the dataset (see :class:`OutputLock`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import mujoco
import numpy as np

from openarm_sim_dataset import __version__
from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.cluster import ConnectedOutput
from openarm_sim_dataset.core.gl import check_rendering
from openarm_sim_dataset.core.lock import OutputLock as _OutputLock, lock_path  # noqa: F401 - lock_path: re-exported
from openarm_sim_dataset.core.machine import cpu_identity
from openarm_sim_dataset.core.metadata import Metadata
from openarm_sim_dataset.core.stats import wilson_interval
from openarm_sim_dataset.core.writer import close_log, commit_episode, remove_uncommitted

from .config import (  # noqa: F401 - re-exported
    SEED_RULE,
    TASK_RULE,
    GenerateConfig,
    GenerateError,
    config_for_task,
    config_from_simulation,
    params_for,
)
from .environment import environment
from .episode import make_renderer, record_index
from .episode_recorder import RecordConfig, RecordedEpisode
from .generate_on_ray import record_on_ray
from .models import cached_model, load_model
from .render import SimRenderer
from .scene import SceneConfig, asset_hashes
from .tasks import get_task
from .tasks.base import TASK_STREAM
from .variation import RANGES, VARIATION_RULE, check_mode

#: The lock file older versions left inside the output; removed (under the lock) when a run resumes.
LEGACY_LOCK_FILE = ".lock"


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def simulation_block(cfg: GenerateConfig, model: mujoco.MjModel, renderer: SimRenderer | None) -> dict:
    """The ``simulation:`` block of metadata.yaml: everything needed to replay and to judge replay.

    ``renderer`` None: a physics-only dataset (no camera; ``gl_renderer`` null; ``camera_hz`` is then
    the rate of the sidecar's per-frame states, the frames a later ``dataset-render`` draws)."""
    sc, rc = cfg.scene, cfg.record
    cams = _camera_block(sc, renderer)
    block = {
        "schema_version": sidecar.SCHEMA_VERSION,
        **_model_identity(cached_model(cfg.scene).sha256),
        "seed": int(cfg.seed),
        "seed_rule": SEED_RULE,
        "sigma_m": float(cfg.sigma),
        "retry": bool(cfg.retry),
        # written only when randomised: a nominal dataset's block stays as before, key for key
        **({"randomization": cfg.randomize, "randomization_rule": VARIATION_RULE,
            "randomization_ranges": {k: list(v) for k, v in RANGES.items()}} if cfg.randomize != "none" else {}),
        "timestep_s": float(model.opt.timestep),
        "state_hz": float(rc.state_hz),
        "camera_hz": float(rc.camera_hz),
        "jpeg_quality": int(rc.jpeg_quality),
        "max_time_s": float(cfg.max_time),
        "scene": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(sc).items()},
        "cameras": cams,
        "labels": {int(k): v for k, v in sidecar.LABELS.items()},
        "depth_unit": "metres along the optical axis (float32)",
        "sidecar": f"episodes/<id>/{layout.SIM_DIR}/{sidecar.SIDECAR_FILE} and {sidecar.FRAMES_FILE}",
        "timestamps": "episode_base_ns(index) + step * timestep_ns; base = 1.9e18 + index * 1e12",
        **_provenance(),
        "gl_renderer": renderer.gl_renderer if renderer is not None else None,
    }
    if cfg.tasks:  # absent for the default task alone: such a block is the one of before the task library
        block["tasks"] = {"names": list(cfg.tasks), "weights": [float(w) for w in cfg.task_weights] or [1.0] * len(cfg.tasks),
                          "stream": TASK_STREAM, "rule": TASK_RULE}
    return block


def _model_identity(model_sha256: str) -> dict:
    """The keys of a simulation block that say which simulator and model ran (versions, hashes)."""
    return {"simulator": "MuJoCo", "mujoco_version": mujoco.__version__, "model_sha256": model_sha256,
            "model_sha256_of": "the compiled model saved as MJB (mj_saveModel)", "asset_sha256": asset_hashes()}


def _provenance() -> dict:
    """The keys of a simulation block that say which software and machine wrote it."""
    return {"generator": {"name": "openarm_sim_dataset", "version": __version__, "git_commit": _git_commit()},
            "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
            "machine": platform.machine(), "cpu": cpu_identity()}


def _camera_block(sc: SceneConfig, renderer: SimRenderer | None) -> dict:
    """``simulation.cameras``: each rendered camera's intrinsics and conventions."""
    cams = {}
    for c in sc.cameras:
        cams[c] = {
            "K": renderer.intrinsics(c).round(12).tolist(),
            "width": sc.width,
            "height": sc.height,
            "pixel_convention": "origin top-left, u right, v down, pixel centres at integer coordinates",
            "K_frame": "OpenCV camera frame: x right, y down, z forward",
            "cam_mat": "row-major 3x3 world-from-camera rotation, MuJoCo camera axes (x right, y up, looks along -z)",
            "cam_pos": "camera position in the world frame, metres",
        }
    return cams


def dataflow_simulation_block(scene: SceneConfig, record: RecordConfig, renderer: SimRenderer | None = None) -> dict:
    """The ``simulation:`` block of a dataset recorded live from a simulation node in a dora dataflow
    (``source: dataflow``, :data:`~openarm_sim_dataset.sidecar.SOURCE_DATAFLOW`): what replaying its
    physics-only sidecars needs (versions, model, scene, rates) and none of a generator's seed keys.
    No camera as recorded (the dataflow's cameras are other nodes; their images are not in the
    sidecar); ``renderer``: the cameras ``dataset-render`` drew later from its physics (then with
    ``jpeg_quality``)."""
    built = cached_model(scene)
    drawn = {"jpeg_quality": int(record.jpeg_quality)} if renderer is not None else {}
    return {
        "schema_version": sidecar.SCHEMA_VERSION,
        "source": sidecar.SOURCE_DATAFLOW,
        **_model_identity(built.sha256),
        "timestep_s": float(built.model.opt.timestep),
        "state_hz": float(record.state_hz),
        "camera_hz": float(record.camera_hz),
        **drawn,
        "scene": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(scene).items()},
        "cameras": _camera_block(scene, renderer) if renderer is not None else {},
        "labels": {int(k): v for k, v in sidecar.LABELS.items()},
        "sidecar": f"episodes/<id>/{layout.SIM_DIR}/{sidecar.SIDECAR_FILE} and {sidecar.FRAMES_FILE}",
        "timestamps": "episode start (Unix ns, the wall clock when the simulation node began the episode's "
                      "state period) + step * timestep_ns; camera_hz: the rate of the sidecar's per-frame states",
        **_provenance(),
        "gl_renderer": renderer.gl_renderer if renderer is not None else None,
    }


#: Keys of the simulation block that a resumed run must match exactly.
IDENTITY_KEYS = ("simulator", "mujoco_version", "model_sha256", "seed", "sigma_m", "retry", "timestep_s",
                 "state_hz", "camera_hz", "jpeg_quality", "max_time_s", "scene", "tasks", "randomization",
                 "randomization_ranges")


def dataset_metadata(cfg: GenerateConfig, sim: dict) -> Metadata:
    sc, rc = cfg.scene, cfg.record
    data = {
        "version": layout.FORMAT_VERSION,
        "location": "simulation",
        "operator": "openarm_sim_dataset.sim",
        "operation_type": "simulation",
        "tasks": [{"prompt": t.prompt, "description": t.description}
                  for t in (get_task(n) for n in (cfg.tasks or ("pick_place",)))],
        "episodes": [],
        "equipment": {
            "id": "OpenArm-MuJoCo",
            "version": "openarm_bimanual v2",
            "embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM, "version": "2.0"}},
            "perceptions": {"cameras": {c: {"width": sc.width, "height": sc.height} for c in sc.cameras}},
        },
        "frequencies": {
            "obs": {"arms": {s: float(rc.state_hz) for s in layout.ARM_SIDES}},
            "action": {"arms": {s: float(rc.state_hz) for s in layout.ARM_SIDES}},
            "cameras": {c: float(rc.camera_hz) for c in sc.cameras},
        },
        "simulation": sim,
    }
    return Metadata(data)


def check_compatible(existing: dict | None, wanted: dict, path: Path) -> None:
    """Refuse to extend a dataset whose simulation block contradicts this run, naming what differs."""
    if existing is None:
        raise GenerateError(path, "exists but is not a simulated dataset (no simulation block)")
    diffs = [k for k in IDENTITY_KEYS if existing.get(k) != wanted.get(k)]
    if existing.get("cameras", {}).keys() != wanted.get("cameras", {}).keys():
        diffs.append("cameras")
    if diffs:
        detail = "; ".join(f"{k}: stored {existing.get(k)!r} vs now {wanted.get(k)!r}" for k in diffs if k not in ("scene", "cameras"))
        if "scene" in diffs:
            detail += ("; " if detail else "") + "scene configuration differs"
        if "cameras" in diffs:
            detail += ("; " if detail else "") + f"cameras: stored {sorted(existing.get('cameras', {}))} vs now {sorted(wanted.get('cameras', {}))}"
        raise GenerateError(path, f"arguments contradict the existing dataset ({detail})")


# --------------------------------------------------------------------- workers
_WORKER: dict = {}


def _worker_init(cfg: GenerateConfig) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    model = load_model(cfg.scene)
    _WORKER.update(cfg=cfg, model=model, renderer=make_renderer(model, cfg.scene))


def _run_one(index: int) -> tuple[int, RecordedEpisode]:
    return index, record_index(_WORKER["cfg"], index, _WORKER["model"], _WORKER["renderer"])


def episode_entry(index: int, rec: RecordedEpisode, cfg: GenerateConfig) -> dict:
    """The episode's entry in ``metadata.yaml``; with ``--tasks`` also its task name, acting arm(s) and
    arm-arm contact steps (the default task's entry is the one of before the task library)."""
    r = rec.result
    params, task_index = params_for(cfg, index)
    varied = {} if rec.variation is None else {"variation": rec.variation, "model_sha256": rec.model_sha256}
    entry = {
        "id": str(index),
        "success": bool(r.success),
        "task_index": int(task_index),
        "outcome": r.outcome,
        "knocked_over": bool(r.knocked_over),
        "attempts": int(r.attempts),
        "seed_inputs": {"seed": int(cfg.seed), "index": int(index)},
        "initial_cubes": [[round(float(v), 6) for v in pose] for pose in params.cube_poses],
        "steps": int(r.steps),
        **varied,
    }
    if cfg.tasks:
        entry.update(task=params.task, arms=params.side, arm_contacts=int(r.arm_contacts))
    return entry


@dataclass
class GenerateSummary:
    """Outcome of a generation run over the requested range (episodes found + made)."""

    episodes: list[dict]
    made: int
    skipped: int

    @property
    def successes(self) -> int:
        return sum(bool(e.get("success")) for e in self.episodes)

    def wilson(self, z: float = 1.959964) -> tuple[float, float]:
        return wilson_interval(self.successes, len(self.episodes), z)

    def categories(self) -> Counter:
        return Counter(e.get("outcome", "unknown") for e in self.episodes)


class OutputLock(_OutputLock):
    """The output lock of :mod:`..lock`; a refusal is a :class:`GenerateError`."""

    error = GenerateError


def _open_output(out: Path, cfg: GenerateConfig, sim: dict) -> Metadata:
    """Create the output (metadata without episodes) or load and check an existing one."""
    meta_path = out / layout.METADATA_FILE
    if meta_path.exists():
        meta = Metadata.load(out)
        check_compatible(meta.simulation, sim, meta_path)
        return meta
    if out.exists() and any(p.name != LEGACY_LOCK_FILE and not p.name.startswith(".tmp-") for p in out.iterdir()):
        raise GenerateError(out, "exists, is not empty and has no metadata.yaml")
    meta = dataset_metadata(cfg, sim)
    meta.write(out)
    return meta


def generate(out: str | os.PathLike, indices: range, cfg: GenerateConfig = GenerateConfig(), workers: int = 1,
             progress: Callable[[int, dict], None] | None = None, ray=None) -> GenerateSummary:
    """Generate episodes ``indices`` into ``out`` (created, or resumed), committing each in order.

    ``ray``: a :class:`~openarm_sim_dataset.cluster.RayOptions` to record the episodes as Ray tasks
    (:mod:`.distributed`) instead of ``workers`` local processes; the output is the same file for file."""
    out = Path(out)
    check_mode(cfg.randomize)
    if cfg.scene.cameras:  # physics-only generation (no camera) never touches GL
        check_rendering()  # a machine that cannot render fails here, before the output exists
    output = ConnectedOutput(ray, lambda: OutputLock(out))
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / LEGACY_LOCK_FILE).unlink(missing_ok=True)  # a dataset folder holds only the dataset
        model = load_model(cfg.scene)
        # workers are spawned (never forked), so this process's GL context is not inherited
        renderer = make_renderer(model, cfg.scene)
        sim = simulation_block(cfg, model, renderer)
        meta = _open_output(out, cfg, sim)
        remove_uncommitted(out, meta)
        have = {e: ep for e, ep in zip(meta.episode_ids, meta.episodes)}
        todo = [i for i in indices if str(i) not in have]
        summary = GenerateSummary([have[str(i)] for i in indices if str(i) in have], 0, len(indices) - len(todo))
        if ray is None:
            source = _record_all(todo, cfg, workers, model, renderer)
        else:
            source = record_on_ray(out, todo, cfg, ray,
                                   environment(cfg.scene, renderer.gl_renderer if renderer is not None else None))
        for index, rec in source:
            entry = episode_entry(index, rec, cfg)
            commit_episode(out, meta, entry, rec.data, cfg.camera_format)
            summary.episodes.append(entry)
            summary.made += 1
            if progress:
                progress(index, entry)
        close_log(out, meta)
        if renderer is not None:
            renderer.close()
        summary.episodes.sort(key=lambda e: int(e["id"]))
        return summary
    finally:
        output.close()


def _record_all(todo: list[int], cfg: GenerateConfig, workers: int, model, renderer) -> Iterator[tuple[int, RecordedEpisode]]:
    if not todo:
        return
    if workers <= 1:
        for i in todo:
            yield i, record_index(cfg, i, model, renderer)
        return
    # spawn: a GL context must never be inherited through fork
    with mp.get_context("spawn").Pool(workers, initializer=_worker_init, initargs=(cfg,)) as pool:
        yield from pool.imap(_run_one, todo)


