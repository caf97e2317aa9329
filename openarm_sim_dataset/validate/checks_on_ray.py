"""The per-episode simulation checks as Ray tasks (``dataset-validate --ray``).

One task per episode opens the dataset at the driver's path (from the driver's working directory, so
every message names files exactly as a local run does; the path must be readable on every node),
builds a validation :class:`~.core.Context` for that episode alone (each file read once) and runs the
``episode`` part of every selected :class:`~.core.EpisodeCheck` row; it answers with the partials, or
with the exception each raised, as text. The driver runs ``prepare`` and ``reduce`` of each row itself,
in the table's order, raising the first error in episode order as a local run would: rows and exit
code equal a local run's. Every worker first compares its environment with the driver's
(:func:`openarm_sim_dataset.cluster.checked_worker`) and refuses to check anything if it differs.
"""

from __future__ import annotations

import os
import traceback

from openarm_sim_dataset.core.cluster import (
    MAX_RETRIES,
    ClusterError,
    RayOptions,
    WorkerMismatch,
    checked_worker,
    connect,
    disconnect,
    import_ray,
    lost_task_message,
    node_name,
    ordered_results,
    window,
)
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import check_rendering, import_mujoco
from openarm_sim_dataset.sim.environment import environment

from .check import BLOCK_ERRORS, Context, EpisodeCheck, block_error_text
from .simulation import SIM_CHECKS, scene_config

#: Checks whose outcome depends on the GL implementation (their workers must render like the driver).
RENDERING = ("sim_render",)
_GL: dict = {}


def gl_renderer_string() -> str:
    """This process's OpenGL renderer and version as MuJoCo's backend reports them (once per process)."""
    if "s" not in _GL:
        check_rendering()
        mujoco = import_mujoco()
        ctx = mujoco.GLContext(1, 1)
        try:
            ctx.make_current()
            from OpenGL import GL  # type: ignore

            parts = [GL.glGetString(GL.GL_RENDERER), GL.glGetString(GL.GL_VERSION)]
            _GL["s"] = f"{os.environ.get('MUJOCO_GL', '')}: " + " | ".join(p.decode() for p in parts if p)
        finally:
            ctx.free()
    return _GL["s"]


def worker_environment(ctx: Context, names: list[str]) -> dict:
    """What a worker must share with the driver to give the same rows (versions, assets, the GL renderer of
    the rendering checks), for :func:`~openarm_sim_dataset.cluster.checked_worker`."""
    try:
        scene = scene_config(ctx)
    except BLOCK_ERRORS:
        scene = None  # a malformed block: the checks say so; versions and assets are still compared
    gl = gl_renderer_string() if any(n in RENDERING for n in names) else None
    return environment(scene, gl)


def _checks() -> dict[str, EpisodeCheck]:
    return {name: fn for name, fn in SIM_CHECKS if isinstance(fn, EpisodeCheck)}


def check_task(root: str, cwd: str, ep: str, names: list[str], thresholds, regenerate: list[str],
               expected_env: dict):
    """Body of one Ray task: the ``episode`` parts of checks ``names`` for episode ``ep``. Returns
    ``("ok", {name: ("ok", partial) | ("err", kind, text)})`` or ``("refused", message)``."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        os.chdir(cwd)
        ctx = Context(Dataset(root), [ep], thresholds, [ep] if ep in regenerate else [])
        checked_worker(expected_env, lambda: worker_environment(ctx, names))
    except WorkerMismatch as e:
        return ("refused", str(e))
    except (DatasetError, OSError) as e:
        return ("refused", f"worker {node_name()}: {e}")
    table = _checks()
    answers = {}
    for name in names:
        check = table[name]
        try:
            prep = check.prepare(ctx) if check.prepare else None
            answers[name] = ("ok", check.episode(ctx, ep, prep))
        except DatasetError as e:
            answers[name] = ("err", "dataset", str(e))
        except BLOCK_ERRORS as e:
            answers[name] = ("err", "block", block_error_text(e))
        except Exception:  # a bug: carried as text, raised by the driver
            answers[name] = ("err", "crash", traceback.format_exc()[-2000:])
    return ("ok", answers)


def run_episode_checks(ctx: Context, rows: list[tuple[str, EpisodeCheck]], opts: RayOptions) -> dict[str, dict]:
    """``{check: {episode: answer}}`` for the rows given, computed by Ray tasks (one per episode, at most
    :func:`~openarm_sim_dataset.cluster.window` in flight)."""
    ray = import_ray()
    if not rows:
        return {}
    selected = {name: check.select(ctx) for name, check in rows}
    episodes = list(dict.fromkeys(ep for eps in selected.values() for ep in eps))
    if not episodes:
        return {name: {} for name, _ in rows}
    started = connect(opts)
    try:
        names = [name for name, _ in rows]
        expected = worker_environment(ctx, names)
        options = dict(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)
        if opts.runtime_env:
            options["runtime_env"] = opts.runtime_env
        task = ray.remote(check_task).options(**options)
        env_ref = ray.put(expected)
        root, cwd = str(ctx.ds.root), os.getcwd()

        def submit(ep: str):
            wanted = [name for name in names if ep in selected[name]]
            return task.remote(root, cwd, ep, wanted, ctx.t, list(ctx.regenerate), env_ref)

        out: dict[str, dict] = {name: {} for name in names}
        try:
            for ep, answer in ordered_results(submit, episodes, window(opts)):
                if answer[0] == "refused":
                    raise ClusterError(None, f"episode {ep} refused: {answer[1]}")
                for name, value in answer[1].items():
                    out[name][ep] = value
        except ray.exceptions.RayError as e:
            raise ClusterError(None, f"a Ray task failed beyond its {MAX_RETRIES} retries: {lost_task_message(e)}") from None
        return out
    finally:
        disconnect(started)
