"""Evaluate a policy in the task environments and write every rollout as a dataset.

One loop (:func:`run_episode`) serves every policy: ``env.reset(seed, index)`` puts the scene in the
initial state and variation of episode ``index`` of the generation with that seed; the policy acts
until it says it is done (the scripted controller ended), or the time limit (or, with
``stop_on_success``, the task's success rule holds). The environment records through the generator's
:class:`~openarm_sim_dataset.sim.recorder.StepRecorder`, so a rollout has the streams, cameras and
exact-replay sidecar of a generated episode and is committed through :mod:`openarm_sim_dataset.writer`
like one (atomic, resumable). For the ``scripted`` policy the rollout *is* the generated episode:
same sidecar arrays, streams and images, bit for bit (tested).

The output is an OpenArm 0.4.0 dataset with ``operation_type: rollout``, ``model:`` (the policy's
name and a SHA-256 of its weights or source) and ``evaluation:`` (how it was run). Each episode entry
holds, besides the generator's keys, ``success_any`` (the rule held at some step boundary) and
``success`` / ``outcome`` at the end.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.cluster import (
    ClusterError,
    ConnectedOutput,
    WorkerMismatch,
    checked_worker,
    import_ray,
    ordered_results,
    window,
)
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import check_rendering
from openarm_sim_dataset.core.lock import OutputLock as _OutputLock
from openarm_sim_dataset.core.metadata import Metadata
from openarm_sim_dataset.core.stats import Z95, newcombe_paired, sign_test, wilson_interval
from openarm_sim_dataset.core.writer import (
    EpisodeData,
    close_log,
    commit_episode,
    remove_uncommitted,
    write_episode_tree,
)
from openarm_sim_dataset.sim.environment import environment
from openarm_sim_dataset.sim.episode_recorder import RecordedEpisode
from openarm_sim_dataset.sim.generate import (
    LEGACY_LOCK_FILE,
    GenerateConfig,
    check_compatible,
    config_from_simulation,
    dataset_metadata,
    episode_entry,
    params_for,
    simulation_block,
)
from openarm_sim_dataset.sim.generate_on_ray import read_tree
from openarm_sim_dataset.sim.models import load_model
from openarm_sim_dataset.sim.render import SimRenderer
from openarm_sim_dataset.sim.scene import SceneConfig
from openarm_sim_dataset.sim.tasks import DEFAULT_TASK, TASKS, resolve_tasks

from .bc import CheckpointError, read_inputs
from .policies import PolicyError, load_policy, policy_identity

__all__ = ["EvaluateError", "Job", "EpisodeOutcome", "run_episode", "evaluate", "jobs_for", "jobs_from_dataset",
           "summarize", "compare", "paired_counts", "load_rollouts"]


class EvaluateError(DatasetError):
    """Evaluation refused: bad arguments, an unusable initial-states dataset, another writer."""


class OutputLock(_OutputLock):
    error = EvaluateError


@dataclass(frozen=True)
class Job:
    """One rollout: episode ``index`` of ``task`` under seed ``seed``, written as episode ``id``."""

    task: str
    seed: int
    index: int
    id: str


@dataclass
class EpisodeOutcome:
    """What one rollout did (the entry's statistics)."""

    task: str
    seed: int
    index: int
    success: bool
    success_any: bool
    outcome: str
    knocked_over: bool
    steps: int
    #: the environment's success rule at the final state (equals ``success`` but for a policy's own outcome)
    success_rule_end: bool = False


# ----------------------------------------------------------------- the loop
def _call(policy: Any, name: str, what: str, step: int, fn: Callable, *args):
    try:
        return fn(*args)
    except Exception as e:  # a policy's bug: one line naming the policy and the step
        raise PolicyError(None, f"policy {name}: {what} raised {type(e).__name__} at step {step}: {' '.join(str(e).split())}") from None


def run_episode(env, policy: Any, seed: int, index: int, record: bool = True, record_index: int | None = None,
                stop_on_success: bool = False, name: str | None = None):
    """Run ``policy`` on episode ``index`` of seed ``seed`` in ``env`` (an :class:`~.env.OpenArmEnv`).

    Returns ``(recorded, outcome)``: the :class:`~.sim.recorder.RecordedEpisode` (None unless
    ``record``) and an :class:`EpisodeOutcome`. A policy that raises, returns something that is not 16
    finite numbers, is a :class:`PolicyError` naming it and the step (0-based control step)."""
    name = name or str(getattr(policy, "name", "policy"))
    opts = {"index": int(index), "record": bool(record)}
    if record_index is not None:
        opts["record_index"] = int(record_index)
    obs, info = env.reset(seed=int(seed), options=opts)
    priv = bool(getattr(policy, "privileged", False))
    _call(policy, name, "reset()", 0, policy.reset, *((info,) if priv else ()))
    step, terminated = 0, False
    while not getattr(policy, "done", False):
        action = _call(policy, name, "act()", step, policy.act, *((obs, info) if priv else (obs,)))
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise PolicyError(None, f"policy {name}: act() returned {type(action).__name__} at step {step}, not 16 numbers") from None
        if a.shape != (16,):
            raise PolicyError(None, f"policy {name}: act() returned shape {a.shape} at step {step}, expected (16,)")
        if not np.all(np.isfinite(a)):
            raise PolicyError(None, f"policy {name}: act() returned a non-finite value at step {step}")
        obs, _, terminated, truncated, info = env.step(a)
        step += 1
        if truncated or (terminated and stop_on_success):
            break
    # stopped at the first success, a policy's own bookkeeping (the scripted controller's "timeout": it had
    # not finished) is not the outcome: the task's rule held, the environment judges
    stopped = terminated and stop_on_success
    result = env.result(None if stopped else getattr(policy, "outcome", None))
    fields = getattr(policy, "result_fields", None)
    if callable(fields):
        result = replace(result, **fields())
    out = EpisodeOutcome(env.task.name, int(seed), int(index), bool(result.success), bool(env.success_any),
                         result.outcome, bool(result.knocked_over), int(result.steps), bool(info["success"]))
    rec = env.recorded(result) if record else None
    return rec, out


# ------------------------------------------------------------------- jobs
def jobs_for(tasks: Sequence[str], episodes: int, seed: int) -> list[Job]:
    """``episodes`` initial states per task (indices 0..episodes-1 of seed ``seed``); episode ids are
    the indices for one task (the generated dataset's ids), ``k * episodes + i`` for task ``k`` else."""
    names, _ = resolve_tasks(list(tasks) or [DEFAULT_TASK])
    if episodes < 1:
        raise EvaluateError(None, f"--episodes {episodes}: at least 1")
    one = len(names) == 1
    return [Job(t, int(seed), i, str(i if one else k * episodes + i)) for k, t in enumerate(names) for i in range(episodes)]


def jobs_from_dataset(path: str | os.PathLike, tasks: Sequence[str] = ()) -> tuple[list[Job], GenerateConfig]:
    """The initial states of a generated (or rollout) dataset's episodes, with its generation config:
    each episode's task, seed and index (``seed_inputs``), written under its own id."""
    path = Path(path)
    try:
        meta = Metadata.load(path)
    except (OSError, DatasetError) as e:
        raise EvaluateError(path, f"cannot read the initial-states dataset: {e}") from None
    sim = meta.simulation
    if not isinstance(sim, dict):
        raise EvaluateError(path / layout.METADATA_FILE, "not a simulated dataset (no simulation block)")
    try:
        scene = SceneConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in sim["scene"].items()})
        cfg = config_from_simulation(sim, scene)
    except (KeyError, TypeError, ValueError) as e:
        raise EvaluateError(path / layout.METADATA_FILE, f"unusable simulation block ({type(e).__name__}: {e})") from None
    names = list(cfg.tasks) or [DEFAULT_TASK]
    jobs = []
    for ep in meta.episodes:
        try:
            task = str(ep.get("task") or names[int(ep.get("task_index", 0))])
            index = int(ep["seed_inputs"]["index"])
        except (KeyError, TypeError, ValueError, IndexError):
            raise EvaluateError(path / layout.METADATA_FILE, f"episode {ep.get('id')}: no seed_inputs.index or task") from None
        if tasks and task not in tasks:
            continue
        jobs.append(Job(task, cfg.seed, index, str(ep["id"])))
    if not jobs:
        raise EvaluateError(path, "no episode to evaluate" + (f" of tasks {list(tasks)}" if tasks else ""))
    return jobs, replace(cfg, tasks=(), task_weights=())


def checkpoint_inputs(spec: str):
    """What the checkpoint ``spec`` reads (:class:`openarm_sim_dataset.bc.PolicyInputs`), or None when
    ``spec`` is not a checkpoint file (a built-in or ``module:factory`` policy)."""
    if Path(spec).suffix not in (".pt", ".pth"):
        return None
    try:
        return read_inputs(spec)
    except CheckpointError as e:
        raise PolicyError(spec, e.message) from None


def _fmt_size(size) -> str:
    return f"{size[0]}x{size[1]}"


def recording_for(spec: str, cameras: Sequence[str] | None, size: tuple[int, int] | None,
                  camera_hz: float | None) -> tuple[tuple[str, ...], tuple[int, int], float]:
    """The recorded cameras, image size (W, H) and camera rate of an evaluation of policy ``spec``.

    A checkpoint says what its policy reads: its cameras, size and camera rate are the defaults, and a
    value given that contradicts it (a camera it reads left out, another size or rate) is an
    :class:`EvaluateError` naming both. Other policies: head + wrist_right, 160x120, 10 Hz."""
    need = checkpoint_inputs(spec)
    if need is None:
        return (tuple(cameras) if cameras is not None else ("head", "wrist_right"),
                tuple(size) if size is not None else (160, 120), float(camera_hz) if camera_hz is not None else 10.0)
    if cameras is None:
        cameras = need.cameras
    missing = [c for c in need.cameras if c not in cameras]
    if missing:
        raise EvaluateError(spec, f"--cameras {' '.join(cameras) or 'none'} contradicts the checkpoint, which reads "
                                  f"{' '.join(need.cameras)} (missing: {' '.join(missing)})")
    if need.size is not None:
        if size is not None and tuple(size) != tuple(need.size):
            raise EvaluateError(spec, f"--size {_fmt_size(size)} contradicts the checkpoint's {_fmt_size(need.size)}")
        size = need.size
    if need.camera_hz is not None:
        if camera_hz is not None and float(camera_hz) != need.camera_hz:
            raise EvaluateError(spec, f"--camera-hz {float(camera_hz):g} contradicts the checkpoint's "
                                      f"{need.camera_hz:g} Hz")
        camera_hz = need.camera_hz
    return (tuple(cameras), tuple(size) if size is not None else (160, 120),
            float(camera_hz) if camera_hz is not None else float(need.control_hz))


def check_prompts(spec: str, tasks: Sequence[str]) -> None:
    """Refuse to evaluate a prompt-conditioned checkpoint on a task whose prompt it was not trained on
    (one line naming the task, its prompt and the checkpoint's)."""
    need = checkpoint_inputs(spec)
    if need is None or not need.prompts:
        return
    for name in tasks:
        prompt = TASKS[name].prompt
        if prompt not in need.prompts:
            raise EvaluateError(spec, f"task {name}'s prompt {prompt!r} is not one the checkpoint was trained on "
                                      f"({'; '.join(map(repr, need.prompts))})")


def check_recording(spec: str, cfg: GenerateConfig, source: str) -> None:
    """Refuse an evaluation config (e.g. an ``--initial-states`` dataset's) whose cameras, size or rate
    contradict what the checkpoint ``spec`` reads (one line naming both)."""
    need = checkpoint_inputs(spec)
    if need is None or not need.cameras:
        return
    sc = cfg.scene
    missing = [c for c in need.cameras if c not in sc.cameras]
    if missing:
        raise EvaluateError(source, f"records cameras {' '.join(sc.cameras) or 'none'}; the checkpoint {spec} reads "
                                    f"{' '.join(need.cameras)}")
    if need.size is not None and (sc.width, sc.height) != tuple(need.size):
        raise EvaluateError(source, f"records {sc.width}x{sc.height} images; the checkpoint {spec} reads "
                                    f"{_fmt_size(need.size)}")
    if need.camera_hz is not None and float(cfg.record.camera_hz) != need.camera_hz:
        raise EvaluateError(source, f"records cameras at {float(cfg.record.camera_hz):g} Hz; the checkpoint {spec} "
                                    f"reads {need.camera_hz:g} Hz")


# ------------------------------------------------------------------ workers
_WORKER: dict = {}


def _env_for(task: str, base: GenerateConfig, policy: Any, stop_on_success: bool):
    from .env import OpenArmEnv  # optional extra: gymnasium ([env])

    envs = _WORKER.setdefault("envs", {})
    if task not in envs:
        hz = getattr(policy, "control_hz", None)
        shared = next(iter(envs.values())).renderer() if envs else None  # one GL context per process
        envs[task] = OpenArmEnv(task, config=base, cameras=bool(getattr(policy, "cameras", True)),
                                control_hz=hz, terminate_on_success=stop_on_success, renderer=shared)
    return envs[task]


def _worker_init(spec: str, base: GenerateConfig, stop_on_success: bool) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    _WORKER.clear()
    _WORKER.update(policy=load_policy(spec), spec=spec, base=base, stop=stop_on_success)


def _run_job(job: Job):
    w = _WORKER
    env = _env_for(job.task, w["base"], w["policy"], w["stop"])
    try:
        own = str(getattr(w["policy"], "name", "") or w["spec"])
        name = own if own == w["spec"] else f"{own} ({w['spec']})"
        rec, out = run_episode(env, w["policy"], job.seed, job.index, record=True, record_index=int(job.id),
                               stop_on_success=w["stop"], name=name)
    except PolicyError as e:
        return job, ("error", str(e))
    return job, ("ok", rec, out, env.config)


def _run_all(jobs: list[Job], spec: str, base: GenerateConfig, stop: bool, workers: int) -> Iterator:
    if not jobs:
        return
    if workers <= 1:
        _worker_init(spec, base, stop)
        for j in jobs:
            yield _run_job(j)
        return
    with mp.get_context("spawn").Pool(workers, initializer=_worker_init, initargs=(spec, base, stop)) as pool:
        yield from pool.imap(_run_job, jobs)


def _run_ray(out: Path, jobs: list[Job], spec: str, base: GenerateConfig, stop: bool, opts,
             driver_env: dict) -> Iterator:
    if not jobs:
        return
    ray = import_ray()
    options = dict(num_cpus=1, max_retries=2, retry_exceptions=False)
    if opts.runtime_env:
        options["runtime_env"] = opts.runtime_env
    task = ray.remote(_ray_task).options(**options)
    args = ray.put((spec, base, stop, driver_env))
    for job, answer in ordered_results(lambda j: task.remote(args, j), jobs, window(opts)):
        if answer[1][0] == "refused":
            raise ClusterError(None, f"episode {job.id} refused: {answer[1][1]}; nothing of it was listed")
        yield answer


def _ray_task(args, job: Job):
    spec, base, stop, driver_env = args
    try:
        if _WORKER.get("spec") != spec or _WORKER.get("base") != base or _WORKER.get("stop") != stop:
            check_rendering()
            _worker_init(spec, base, stop)
        # the same check as generation's tasks: a worker whose environment differs records nothing
        renderer = _env_for(job.task, base, _WORKER["policy"], stop).renderer()
        checked_worker(driver_env, lambda: environment(base.scene, renderer.gl_renderer))
    except (WorkerMismatch, DatasetError) as e:
        return job, ("refused", str(e))
    job, answer = _run_job(job)
    if answer[0] != "ok":
        return job, answer
    _, rec, outcome, cfg = answer
    with tempfile.TemporaryDirectory(prefix="openarm-ray-rollout-") as d:
        write_episode_tree(Path(d), rec.data, base.camera_format, with_manifest=False)
        files = read_tree(Path(d))
    return job, ("ok", RecordedEpisode(EpisodeData(files=files), rec.result, {}, {}, rec.variation, rec.model_sha256),
                 outcome, cfg)


# ----------------------------------------------------------------- evaluate
@dataclass
class EvaluationReport:
    """A finished evaluation: the rollout dataset's path and its episode entries."""

    out: Path
    episodes: list[dict]
    made: int
    skipped: int
    model: dict
    stats: dict = field(default_factory=dict)


def _output_config(base: GenerateConfig, jobs: list[Job]) -> tuple[GenerateConfig, list[str]]:
    names = list(dict.fromkeys(j.task for j in jobs))
    seeds = {j.seed for j in jobs}
    if len(seeds) != 1:
        raise EvaluateError(None, f"one seed per rollout dataset, got {sorted(seeds)}")
    tasks = () if names == [DEFAULT_TASK] else tuple(names)
    return replace(base, seed=seeds.pop(), tasks=tasks, task_weights=()), names


def evaluate(policy: str, out: str | os.PathLike, jobs: list[Job], base: GenerateConfig = GenerateConfig(),
             workers: int = 1, ray=None, stop_on_success: bool = False,
             progress: Callable[[Job, dict], None] | None = None) -> EvaluationReport:
    """Run ``policy`` (a :func:`~.policies.load_policy` spec) on ``jobs`` and write the rollouts into
    ``out`` (created, or resumed: listed episodes are kept, arguments that contradict the stored
    dataset are refused). Raises :class:`PolicyError` (policy broken: nothing of that episode is
    listed) or :class:`EvaluateError`."""
    # optional extra: gymnasium ([env]); a missing one is one line, before the output exists
    from . import env as _env  # noqa: F401  optional extra: gymnasium

    out = Path(out)
    pol = load_policy(policy)  # a policy that cannot load fails before the output exists
    model_id = policy_identity(pol, policy)
    cfg, names = _output_config(base, jobs)
    check_prompts(policy, sorted({j.task for j in jobs}))
    check_rendering()
    output = ConnectedOutput(ray, lambda: OutputLock(out))
    try:
        out.mkdir(parents=True, exist_ok=True)
        model = load_model(cfg.scene)
        renderer = SimRenderer(model, cfg.scene)
        sim = simulation_block(cfg, model, renderer)
        if ray is not None:
            driver_env = environment(cfg.scene, renderer.gl_renderer)
        renderer.close()
        hz = getattr(pol, "control_hz", None) or float(cfg.record.camera_hz)
        evaluation = {"policy": policy, "control_hz": float(1.0 / model.opt.timestep if hz == "physics" else hz),
                      "stop_on_success": bool(stop_on_success),
                      "success": "the task's success rule (goal reached, no arm touching a task object) at the end",
                      "success_any": "the rule held at some control step"}
        meta_path = out / layout.METADATA_FILE
        if meta_path.exists():
            meta = Metadata.load(out)
            check_compatible(meta.simulation, sim, meta_path)
            if not same_policy(meta.data.get("model", {}), meta.data.get("evaluation"), model_id, evaluation):
                raise EvaluateError(meta_path, "holds rollouts of another policy or evaluation settings; use another --out")
        else:
            if out.exists() and any(p.name != LEGACY_LOCK_FILE and not p.name.startswith(".tmp-") for p in out.iterdir()):
                raise EvaluateError(out, "exists, is not empty and has no metadata.yaml")
            meta = dataset_metadata(cfg, sim)
            meta.data.update(operation_type="rollout", operator="openarm_sim_dataset.evaluate", model=model_id,
                             evaluation=evaluation)
            meta.write(out)
        remove_uncommitted(out, meta)
        have = dict(zip(meta.episode_ids, meta.episodes))
        todo = [j for j in jobs if j.id not in have]
        report = EvaluationReport(out, [have[j.id] for j in jobs if j.id in have], 0, len(jobs) - len(todo), model_id)
        source = (_run_all(todo, policy, replace(cfg, tasks=()), stop_on_success, workers) if ray is None
                  else _run_ray(out, todo, policy, replace(cfg, tasks=()), stop_on_success, ray, driver_env))
        for job, answer in source:
            if answer[0] == "error":
                raise PolicyError(None, answer[1])
            _, rec, outcome, ecfg = answer
            entry = episode_entry(job.index, rec, ecfg)
            entry["id"] = job.id
            entry["task_index"] = names.index(job.task)
            if cfg.tasks and "task" not in entry:
                entry.update(task=job.task, arms=rec_side(ecfg, job.index), arm_contacts=int(rec.result.arm_contacts))
            entry["success_any"] = bool(outcome.success_any)
            commit_episode(out, meta, entry, rec.data, cfg.camera_format)
            report.episodes.append(entry)
            report.made += 1
            if progress:
                progress(job, entry)
        close_log(out, meta)
        order = {j.id: k for k, j in enumerate(jobs)}
        report.episodes.sort(key=lambda e: order.get(str(e["id"]), len(order)))
        report.stats = summarize(report.episodes, names)
        return report
    finally:
        output.close()


def same_policy(stored_model: dict, stored_evaluation: dict | None, model: dict, evaluation: dict) -> bool:
    """Whether a rollout folder's ``model:`` and ``evaluation:`` are those of this run. A checkpoint is the
    same by its bytes, however its path is written (relative, absolute, a copy); any other policy by its
    spec, since two built-in policies can share a source file and so a SHA-256."""
    by_bytes = model.get("sha256_of") == stored_model.get("sha256_of") == "checkpoint file"

    def settings(e: dict | None) -> dict | None:
        return {k: v for k, v in e.items() if k != "policy"} if by_bytes and isinstance(e, dict) else e

    return stored_model.get("sha256") == model["sha256"] and settings(stored_evaluation) == settings(evaluation)


def rec_side(cfg: GenerateConfig, index: int) -> str:
    return params_for(cfg, index)[0].side


# --------------------------------------------------------------- statistics
def _rate(k: int, n: int, z: float = Z95) -> dict:
    lo, hi = wilson_interval(k, n, z)
    return {"successes": int(k), "episodes": int(n), "rate": (k / n) if n else None, "wilson95": [lo, hi]}


def _task_of(entry: dict, names: Sequence[str]) -> str:
    return str(entry.get("task") or names[int(entry.get("task_index", 0))])


def summarize(entries: Sequence[dict], names: Sequence[str]) -> dict:
    """Per task and overall: success at the end (and its 95% Wilson interval), lucky successes
    (``knocked_over``) apart, success at any time, failure categories."""
    def block(es: list[dict]) -> dict:
        n = len(es)
        k = sum(bool(e.get("success")) for e in es)
        lucky = sum(bool(e.get("success")) and bool(e.get("knocked_over")) for e in es)
        anyt = sum(bool(e.get("success_any", e.get("success"))) for e in es)
        return {"end": _rate(k, n), "clean": _rate(k - lucky, n), "lucky": int(lucky), "any_time": _rate(anyt, n),
                "failures": dict(Counter(str(e.get("outcome", "unknown")) for e in es if not e.get("success")))}
    by: dict[str, list[dict]] = {}
    for e in entries:
        by.setdefault(_task_of(e, names), []).append(e)
    return {"tasks": {t: block(es) for t, es in by.items()}, "overall": block(list(entries))}


def load_rollouts(path: str | os.PathLike) -> dict[tuple[str, int, int], bool]:
    """A dataset's episodes keyed by initial state ``(task, seed, index)`` -> success at the end."""
    path = Path(path)
    try:
        meta = Metadata.load(path)
    except (OSError, DatasetError) as e:
        raise EvaluateError(path, f"cannot read the dataset to compare with: {e}") from None
    sim = meta.simulation or {}
    names = list((sim.get("tasks") or {}).get("names") or [DEFAULT_TASK])
    out = {}
    for e in meta.episodes:
        try:
            out[(_task_of(e, names), int(e["seed_inputs"]["seed"]), int(e["seed_inputs"]["index"]))] = bool(e["success"])
        except (KeyError, TypeError, ValueError, IndexError):
            raise EvaluateError(path / layout.METADATA_FILE, f"episode {e.get('id')}: no seed_inputs or success") from None
    return out


def paired_counts(a: dict, b: dict) -> dict:
    """2x2 table of two runs on their common initial states: both, only a, only b, neither."""
    keys = sorted(set(a) & set(b))
    both = sum(a[k] and b[k] for k in keys)
    only_a = sum(a[k] and not b[k] for k in keys)
    only_b = sum(b[k] and not a[k] for k in keys)
    return {"pairs": len(keys), "both": both, "only_a": only_a, "only_b": only_b,
            "neither": len(keys) - both - only_a - only_b}


def compare(a: dict, b: dict, z: float = Z95) -> dict:
    """Paired comparison of run ``a`` with run ``b`` (dicts of :func:`load_rollouts`): the discordant
    counts, the exact two-sided McNemar (sign) test on them and Newcombe's interval for the
    difference of the success rates ``rate_a - rate_b`` on the common initial states."""
    t = paired_counts(a, b)
    n = t["pairs"]
    lo, hi = newcombe_paired(t["both"], t["only_a"], t["only_b"], t["neither"], z)
    return {**t, "rate_a": (t["both"] + t["only_a"]) / n if n else None,
            "rate_b": (t["both"] + t["only_b"]) / n if n else None,
            "difference": (t["only_a"] - t["only_b"]) / n if n else None,
            "newcombe95": [lo, hi], "mcnemar_exact_p": sign_test(t["only_a"], t["only_b"]),
            "unpaired_a": len(set(a) - set(b)), "unpaired_b": len(set(b) - set(a))}
