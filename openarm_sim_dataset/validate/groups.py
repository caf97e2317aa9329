"""Validation of a big dataset in groups of episodes: memory flat in N, on ``workers`` processes or on Ray.

A validation :class:`~.core.Context` keeps every file it read (each is read once for all the checks),
so one Context over 10,000 episodes would hold every stream of every episode. Above
:data:`GROUP_SIZE` episodes (or with ``workers`` > 1, or Ray and no per-episode simulation rows alone),
:func:`~.core.validate` runs the table on groups of :data:`GROUP_SIZE` episodes instead, each group in a
fresh Context (in this process, in ``workers`` spawned processes, or as Ray tasks), and keeps of each
group only what a row needs:

* a plain row (a function of the Context): the group's :class:`~.core.Outcome` is folded into a
  :class:`RowFold` at once (verdict, counts of groups, the episodes it fails or warns about, their
  timed findings, the first failing group's detail): nothing per passing episode;
* an :class:`~.core.EpisodeCheck` row: each episode's small partial, reduced once at the end (as a
  Ray run of the simulation checks always did);
* :data:`WHOLE_ROWS` (the metadata and the folder listing) run once on the whole episode list: they
  read no episode's files.

The row of a passing check then shows the figures of the first group and says how many groups were
checked alike; a failing row shows the first failing group's detail and how many groups fail. The
rows that compare episodes with each other are :class:`~.core.EpisodeCheck` rows, so they compare across
the whole dataset: each episode gives a small digest (``duplicate_episodes`` the SHA-256 of its streams,
``jpeg_frames`` its cameras' frame sizes, ``jpeg_encoding`` its cameras' few encodings with their counts)
and the driver compares them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from openarm_sim_dataset.core import layout, lerobot_layout
from openarm_sim_dataset.core.cluster import (
    MAX_RETRIES,
    ClusterError,
    checked_worker,
    connect,
    disconnect,
    import_ray,
    lost_task_message,
    ordered_results,
    window,
)
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError

from .check import BLOCK_ERRORS, Context, EpisodeCheck, Outcome, RemoteCheckError, block_error_text
from .registry import check_table, is_sim_check
from .robot import ROBOT_ROWS, robot_of

#: Episodes per group (a group's streams, ~1 MB per default episode, are held at once).
GROUP_SIZE = 50
#: Rows that read no episode's files, or compare the whole dataset: run once over the whole episode list.
WHOLE_ROWS = ("metadata", "episode_folders", "lerobot_info", "lerobot_video_ranges", "lerobot_stats",
              "lerobot_units", "joint_units")
#: Timed findings kept per row over the whole run (the detail counts every one).
MAX_FINDINGS = 10_000


@dataclass
class RowFold:
    """What a plain row keeps of the groups' outcomes, folded one at a time."""

    groups: int = 0
    failing: int = 0
    skipped_groups: int = 0
    applicable: bool = False
    first: Outcome | None = None      # the first group that was not skipped (or the first at all)
    first_failing: Outcome | None = None
    episodes: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    error: tuple[str, str] | None = None  # the first group's error (kind, text): the row's outcome
    judged: dict[str, int] | None = None  # the groups' counts summed (None: no group said)

    def add(self, out: Outcome) -> None:
        self.groups += 1
        if out.judged is not None:
            self.judged = self.judged or {}
            for unit, n in out.judged.items():
                self.judged[unit] = self.judged.get(unit, 0) + int(n)
        self.applicable |= out.applicable
        if out.skipped:
            self.skipped_groups += 1
        elif self.first is None or self.first.skipped:
            self.first = out
        if self.first is None:
            self.first = out
        if not out.passed and not out.skipped:
            self.failing += 1
            if self.first_failing is None:
                self.first_failing = out
        self.episodes += out.episodes
        self.warned += out.warned
        room = MAX_FINDINGS - len(self.findings)
        if room > 0:
            self.findings += out.findings[:room]

    def outcome(self, group_size: int) -> Outcome:
        if self.error is not None:
            raise RemoteCheckError(*self.error)
        if self.groups == 1:
            return self.first
        skipped = self.skipped_groups == self.groups
        lead = self.first_failing or self.first
        if self.failing:
            note = f"{self.failing} of {self.groups} groups of {group_size} episodes fail; the first shown"
        elif skipped:
            note = f"every group of {group_size} episodes skipped alike; the first shown"
        else:
            note = (f"figures of the first group of {group_size} episodes; {self.groups - self.skipped_groups} "
                    f"of {self.groups} groups checked alike")
        return Outcome(self.failing == 0, f"{lead.detail} [{note}]", self.episodes, skipped=skipped,
                       applicable=self.applicable, warned=self.warned, findings=self.findings, judged=self.judged)


def groups_of(ids: list[str], size: int | None = None) -> list[list[str]]:
    size = size or GROUP_SIZE
    return [ids[i:i + size] for i in range(0, len(ids), size)]


_DATASETS: dict = {}


def _dataset(root: str):
    """The dataset at ``root``, opened once per worker process (re-opened when metadata.yaml changed)."""
    key = _key(root)
    if key not in _DATASETS:
        _DATASETS.clear()
        _DATASETS[key] = Dataset(root)
    return _DATASETS[key]


def _key(root: str) -> tuple:
    path = os.path.join(root, layout.METADATA_FILE)
    if not os.path.exists(path):  # a LeRobot dataset: its info.json
        path = os.path.join(root, lerobot_layout.INFO_FILE)
    st = os.stat(path)
    return (root, st.st_mtime_ns, st.st_size, st.st_ino)


def table_of(ds, names: list[str], simulation: bool) -> list[tuple[str, object]]:
    """The check table rows named ``names``, in the table's order (as :func:`~.runner.validate` builds it)."""
    by_name = dict(check_table(ds.meta.simulation, False, simulation, lerobot=ds.lerobot is not None))
    return [(n, by_name[n]) for n in names]


def run_group(root: str, cwd: str, ids: list[str], names: list[str], simulation: bool, thresholds,
              regenerate: list[str], robot=None, expected_env: dict | None = None):
    """Body of one group (a worker process or a Ray task): every row ``names`` on episodes ``ids``.
    ``robot``: the :class:`~openarm_sim_dataset.core.robots.RobotMatch` the driver detected (one robot per run).
    Returns ``("ok", {name: ("out", Outcome) | ("parts", {ep: answer}) | ("err", kind, text)}, file_lines)``
    or ``("refused", message)`` (a Ray worker whose environment differs from the driver's)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        os.chdir(cwd)
        ds = _dataset(root)
        ctx = Context(ds, ids, thresholds, [e for e in regenerate if e in ids])
        if robot is not None:  # the robot the driver detected: one robot per run, whatever the group
            ctx.cache["robot"] = robot
        table = table_of(ds, names, simulation)
        if expected_env is not None:
            from .checks_on_ray import worker_environment  # optional extra: ray

            checked_worker(expected_env, lambda: worker_environment(ctx, names))
    except DatasetError as e:
        return ("refused", str(e))
    except Exception as e:  # WorkerMismatch, OSError
        return ("refused", str(e))
    answers = {}
    for name, fn in table:
        try:
            if isinstance(fn, EpisodeCheck):
                prep = fn.prepare(ctx) if fn.prepare else None
                parts = {}
                for ep in fn.select(ctx):
                    parts[ep] = _answer(lambda: ("ok", fn.episode(ctx, ep, prep)), is_sim_check(name))
                answers[name] = ("parts", parts)
            else:
                answers[name] = ("out", fn(ctx))
        except Exception as e:
            answers[name] = _error(e, is_sim_check(name))
    return ("ok", answers, ctx.file_lines)


def _answer(call, sim: bool):
    try:
        return call()
    except Exception as e:
        return _error(e, sim)


def _error(e: Exception, sim: bool) -> tuple:
    import traceback

    if isinstance(e, DatasetError):
        return ("err", "dataset", str(e))
    if sim and isinstance(e, BLOCK_ERRORS):
        return ("err", "block", block_error_text(e))
    return ("err", "crash", traceback.format_exc()[-2000:])


def run_groups(ds, ids: list[str], names: list[str], simulation: bool, thresholds, regenerate: list[str],
               workers: int = 1, ray=None, robot=None) -> Iterator[tuple[list[str], tuple]]:
    """``(ids, answer)`` of every group, in order: here (``workers`` 1), in ``workers`` spawned processes,
    or as Ray tasks (``ray``: :class:`~openarm_sim_dataset.cluster.RayOptions`; the dataset path must be
    readable on every node)."""
    root, cwd = str(ds.root), os.getcwd()
    groups = groups_of(ids)
    args = (names, simulation, thresholds, list(regenerate), robot)
    if ray is not None:
        yield from _on_ray(ds, root, cwd, groups, args, ray)
    elif workers <= 1 or len(groups) == 1:
        _DATASETS.clear()
        _DATASETS[_key(root)] = ds  # in this process: the driver's dataset, not a second copy of its entries
        for g in groups:
            yield g, run_group(root, cwd, g, *args)
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # spawned, never forked: a caller's GL context or threads are not inherited
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            window = 2 * workers  # groups submitted and not yet folded: memory bounded by the window
            futures = {}
            for i, g in enumerate(groups):
                futures[i] = pool.submit(run_group, root, cwd, g, *args)
                if i >= window:
                    j = i - window
                    yield groups[j], futures.pop(j).result()
            for j in sorted(futures):
                yield groups[j], futures.pop(j).result()


def _on_ray(ds, root: str, cwd: str, groups: list[list[str]], args: tuple, opts) -> Iterator:
    from .checks_on_ray import worker_environment  # optional extra: ray

    ray = import_ray()
    names = args[0]
    started = connect(opts)
    try:
        expected = worker_environment(Context(ds, [], args[2]), names)
        options = dict(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)
        if opts.runtime_env:
            options["runtime_env"] = opts.runtime_env
        task = ray.remote(run_group).options(**options)
        env_ref = ray.put(expected)
        try:
            yield from ordered_results(lambda g: task.remote(root, cwd, g, *args, env_ref), groups, window(opts))
        except ray.exceptions.RayError as e:
            raise ClusterError(None, f"a Ray task failed beyond its {MAX_RETRIES} retries: {lost_task_message(e)}") from None
    finally:
        disconnect(started)


def grouped_outcomes(ctx: Context, table: list, simulation: bool, workers: int = 1, ray=None) -> dict:
    """``{row: () -> Outcome}`` for the rows of ``table`` on ``ctx``'s episodes, computed group by group
    (see the module doc); calling a row's function raises what a run of the row in one Context would
    (:class:`~.core.RemoteCheckError` for an error met in a group). ``ctx`` gets the groups' file lines."""
    table_names = [n for n, _ in table]
    names = [n for n in table_names if n not in WHOLE_ROWS]
    episode_rows = {n for n, fn in table if isinstance(fn, EpisodeCheck)}
    folds = {n: RowFold() for n in names if n not in episode_rows}
    parts: dict[str, dict] = {n: {} for n in episode_rows}
    failed_rows: dict[str, tuple[str, str]] = {}
    seen_lines = set(ctx.file_lines)
    # detected once here, past the driver context's cache (it holds no episode's streams), for every group
    robot = robot_of(ctx, cache_streams=False) if any(n in ROBOT_ROWS for n in table_names) else None
    for g, answer in run_groups(ctx.ds, ctx.episodes, names, simulation, ctx.t, ctx.regenerate, workers, ray, robot):
        if answer[0] == "refused":
            if ray is not None:
                raise ClusterError(None, f"episodes {g[0]}..{g[-1]} refused: {answer[1]}")
            raise DatasetError(ctx.ds.root, answer[1])
        _, answers, lines = answer
        for line in lines:
            if line not in seen_lines:
                seen_lines.add(line)
                ctx.file_lines.append(line)
        for name, a in answers.items():
            if a[0] == "out":
                folds[name].add(a[1])
            elif a[0] == "parts":
                parts[name].update(a[1])
            else:
                failed_rows.setdefault(name, (a[1], a[2]))
                if name in folds and folds[name].error is None:
                    folds[name].error = (a[1], a[2])

    def row(name, fn):
        if name in WHOLE_ROWS:
            return lambda: fn(ctx)
        if name in episode_rows:
            def reduce():
                if name in failed_rows:
                    raise RemoteCheckError(*failed_rows[name])
                return fn.from_parts(ctx, parts[name])
            return reduce
        return lambda: folds[name].outcome(GROUP_SIZE)

    return {name: row(name, fn) for name, fn in table}
