"""Episodes recorded as Ray tasks: a third source behind :func:`~openarm_sim_dataset.sim.generate.generate`'s
seam (after the local loop and the process pool), committed by the driver in the same order.

A task records episode ``i`` exactly as a local worker does (same seed rule, model, renderer, writer) and
hands it back in one of two ways:

* default (no shared filesystem): it writes the episode tree into a private temporary folder on its node
  (parquet, JPEG folders or tars, sidecar; no manifest) and returns every file's bytes; the driver writes
  them with the normal commit protocol (temporary folder, manifest, fsync, rename, then listed), so the
  output is byte-identical to a local run's;
* ``shared_fs``: it writes the whole episode (manifest included) into ``episodes/.tmp-<id>...`` of the
  output, a path every node mounts; the driver fsyncs and renames it and lists it.

Before its first episode every worker compares its environment (:func:`openarm_sim_dataset.sim.environment.environment`)
with the driver's; a worker that differs records nothing and its tasks answer with what differs, which
stops the run (:class:`~openarm_sim_dataset.cluster.ClusterError`) before anything of it is listed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.atomic import TMP_PREFIX, remove_tree, tmp_name
from openarm_sim_dataset.core.cluster import (
    MAX_RETRIES,
    ClusterError,
    RayOptions,
    WorkerMismatch,
    checked_worker,
    import_ray,
    lost_task_message,
    node_name,
    ordered_results,
    window,
)
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import check_rendering
from openarm_sim_dataset.core.writer import EpisodeData, write_episode_tree

from .environment import environment
from .episode import make_renderer, record_index
from .episode_recorder import RecordedEpisode
from .models import load_model

#: Per worker process: (config) -> (model, renderer); a GL context costs 0.2-0.9 s, made once.
_WORKER: dict = {}


def _worker(cfg):
    if _WORKER.get("cfg") != cfg:
        if cfg.scene.cameras:  # a physics-only task needs no GL
            check_rendering()
        if _WORKER.get("renderer") is not None:
            _WORKER["renderer"].close()
        model = load_model(cfg.scene)
        _WORKER.update(cfg=cfg, model=model, renderer=make_renderer(model, cfg.scene))
    return _WORKER["model"], _WORKER["renderer"]


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` as ``{relative posix path: bytes}`` (an episode tree handed back by a task)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def record_task(cfg, index: int, expected_env: dict, shared_out: str | None):
    """Body of one Ray task: episode ``index`` of ``cfg``. Returns ``("files", {path: bytes}, result, varied)``,
    ``("written", tmp_folder, result, varied)`` (``shared_out``), or ``("refused", message)`` (environment
    differs, or the node cannot render); ``varied`` is the episode's ``(variation, model_sha256)``
    (both None on the nominal scene) for its metadata entry."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        model, renderer = _worker(cfg)
        checked_worker(expected_env, lambda: environment(cfg.scene, renderer.gl_renderer if renderer is not None else None))
    except (WorkerMismatch, DatasetError) as e:
        return ("refused", str(e) if isinstance(e, WorkerMismatch) else f"worker {node_name()}: {e}")
    # the same seed rule and scene variation (``cfg.randomize``) as a local worker
    rec = record_index(cfg, index, model, renderer)
    varied = (rec.variation, rec.model_sha256)
    if shared_out is not None:
        tmp = tmp_name(layout.episode_dir(Path(shared_out), str(index)))
        tmp.parent.mkdir(parents=True, exist_ok=True)
        write_episode_tree(tmp, rec.data, cfg.camera_format)
        return ("written", str(tmp), rec.result, varied)
    with tempfile.TemporaryDirectory(prefix="openarm-ray-episode-") as d:
        write_episode_tree(Path(d), rec.data, cfg.camera_format, with_manifest=False)
        return ("files", read_tree(Path(d)), rec.result, varied)


def record_on_ray(out: Path, todo: list[int], cfg, opts: RayOptions, driver_env: dict) -> Iterator[tuple[int, object]]:
    """``(index, RecordedEpisode)`` for every index of ``todo``, in that order, recorded by Ray tasks (at
    most :func:`~openarm_sim_dataset.cluster.window` in flight). The episodes carry their files (``data.files``)
    or their written folder (``data.tree``); ``sidecar``/``frames`` are left empty (already in the files)."""
    if not todo:
        return
    ray = import_ray()
    options = dict(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)
    if opts.runtime_env:
        options["runtime_env"] = opts.runtime_env
    task = ray.remote(record_task).options(**options)
    shared = str(Path(out).resolve()) if opts.shared_fs else None
    cfg_ref = ray.put(cfg)
    env_ref = ray.put(driver_env)

    def submit(index: int):
        return task.remote(cfg_ref, index, env_ref, shared)

    try:
        for index, answer in ordered_results(submit, todo, window(opts)):
            if answer[0] == "refused":
                raise ClusterError(None, f"episode {index} refused: {answer[1]}; nothing of it was listed")
            kind, payload, result, (variation, model_sha256) = answer
            data = EpisodeData(files=payload) if kind == "files" else EpisodeData(tree=Path(payload))
            yield index, RecordedEpisode(data, result, {}, {}, variation, model_sha256)
        if shared is not None:
            # every task has answered and the output is locked: a temporary folder left now is the
            # partial write of an attempt whose worker died (Ray ran the task again elsewhere)
            for leftover in (Path(out) / layout.EPISODES_DIR).glob(f"{TMP_PREFIX}*"):
                remove_tree(leftover)
    except ray.exceptions.RayError as e:
        raise ClusterError(None, f"a Ray task failed beyond its {MAX_RETRIES} retries: {lost_task_message(e)}") from None
