"""The runner: :func:`validate` builds the check table from the registry, runs it (here, on groups of
episodes, in worker processes or on Ray) and returns a :class:`~.check.Report`; the valid flags it writes."""

from __future__ import annotations

import os
from datetime import datetime, timezone

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import check_rendering, import_mujoco
from openarm_sim_dataset.core.lock import OutputLock
from openarm_sim_dataset.core.metadata import Metadata

from . import groups
from .check import (
    BLOCK_ERRORS,
    MAX_FINDINGS_PER_EPISODE,
    NO_EPISODES,
    CheckResult,
    Context,
    EpisodeCheck,
    Outcome,
    RemoteCheckError,
    Report,
    block_error_text,
    no_episodes_detail,
)
from .registry import check_table, is_sim_check
from .robot import ROBOT_ROWS, robot_of
from .thresholds import Thresholds


def _is_simulated(ds: Dataset) -> bool:
    return ds.meta.simulation is not None


def validate(ds: Dataset, episodes: list[str] | None = None, thresholds: Thresholds | None = None,
             simulation: bool = True, regenerate: list[str] | None = None,
             checks: list[str] | None = None, quick: bool = False, strict: bool = False, ray=None,
             workers: int = 1, robot=None) -> Report:
    """Run every applicable check and return one row per check (form checks incl. integrity, camera
    content checks, JPEG encoding and physical consistency (any dataset), then sim checks) as a
    :class:`Report`.

    ``episodes`` restricts the per-episode checks; ``regenerate`` lists episodes to generate again
    and compare array for array (slow); ``checks`` restricts to the named checks; ``quick`` runs
    only the form and integrity checks; ``robot``: a :class:`~openarm_sim_dataset.core.robots.RobotProfile`
    (``--robot``, ``--robot-file``) the robot-aware checks judge by instead of the one detected; ``strict`` turns a skip of a check that applies to the
    dataset, and a warning (``warn`` row), into a failure. ``ray``: a :class:`~openarm_sim_dataset.cluster.RayOptions`: the per-episode
    simulation checks (:class:`EpisodeCheck` rows) run as Ray tasks reading the dataset from the same
    path (:mod:`.distributed`); the rows are the same as a local run's.

    Above :data:`.groups.GROUP_SIZE` episodes, or with ``workers`` > 1, the table runs on groups of
    episodes, each in a fresh Context (memory flat in the number of episodes), in ``workers`` processes
    or, with ``ray``, as Ray tasks (:mod:`.groups`: what a row then shows of the groups).
    """
    if episodes is None and not ds.meta.episodes:
        # nothing to check: one verdict, not rows of per-episode checks that read like faults
        return Report([CheckResult(NO_EPISODES, False, no_episodes_detail(ds), [])])
    ids = ds.episode_ids if episodes is None else [ds.episode_id(e) for e in episodes]
    ctx = Context(ds, ids, thresholds or Thresholds(), regenerate, robot)
    if not quick and simulation and _is_simulated(ds):
        # a machine without its GL libraries is unusable (exit 2), not a dataset to flag invalid
        renders = bool(regenerate) or checks is None or "sim_render" in checks
        check_rendering() if renders else import_mujoco()
    table = check_table(ds.meta.simulation, quick, simulation, lerobot=ds.lerobot is not None)
    table = [(name, fn) for name, fn in table if checks is None or name in checks]
    remote: dict[str, dict] = {}
    grouped: dict = {}
    if len(ids) > groups.GROUP_SIZE or workers > 1:  # read at call time: tests set a small group size
        grouped = groups.grouped_outcomes(ctx, table, simulation, workers, ray)
    elif ray is not None:
        from .checks_on_ray import run_episode_checks  # optional extra: ray

        remote = run_episode_checks(ctx, [(n, fn) for n, fn in table if isinstance(fn, EpisodeCheck) and is_sim_check(n)],
                                    ray)
    rows = Report()
    rows.file_lines = ctx.file_lines
    if any(name in ROBOT_ROWS for name, _ in table):
        match = robot_of(ctx)
        rows.robot = {"profile": match.profile.name, "naming": match.naming.name if match.naming else None,
                      "unit_variant": match.unit_variant.name if match.unit_variant else None, "why": match.why}
    for name, fn in table:
        try:
            if grouped:
                out = grouped[name]()
            else:
                out = fn.from_parts(ctx, remote[name]) if name in remote else fn(ctx)
        except RemoteCheckError as e:
            if e.kind == "crash":
                raise RuntimeError(f"check {name} failed in a Ray task: {e.text}") from None
            out = Outcome(False, e.text if e.kind == "dataset" else _block_unusable(ds, e.text), list(ids))
        except DatasetError as e:
            out = Outcome(False, str(e), list(ids))
        except BLOCK_ERRORS as e:
            if not is_sim_check(name):
                raise
            # the simulation: block is untrusted input: a malformed one fails the check, naming the file
            out = Outcome(False, _block_unusable(ds, block_error_text(e)), list(ids))
        out = _no_pass_without_judging(out)
        if strict and out.skipped and out.applicable:
            out = Outcome(False, f"skipped, a failure under strict: {out.detail}", out.episodes, judged=out.judged)
        if strict and out.warned and not out.skipped:
            out = Outcome(False, f"warning, a failure under strict: {out.detail}", [*out.episodes, *out.warned],
                          findings=[dict(f, level="fail") for f in out.findings])
        rows.append(CheckResult(name, bool(out.passed) and not out.skipped, out.detail,
                                sorted(set(out.episodes), key=episode_order), out.skipped, out.applicable,
                                sorted(set(out.warned), key=episode_order), _kept_findings(out.findings),
                                out.judged))
    return rows


def _no_pass_without_judging(out: Outcome) -> Outcome:
    """A row that passes (or warns) having judged nothing, by its own count, is a skip saying so: a
    verdict with nothing behind it is not a pass. A failure stands (it found something)."""
    if out.skipped or not out.passed or out.judged is None or any(out.judged.values()):
        return out
    return Outcome(True, f"judged nothing: {out.detail}", [], skipped=True, applicable=out.applicable, judged=out.judged)


def _kept_findings(findings: list[dict]) -> list[dict]:
    """The findings sorted by episode and time, at most :data:`MAX_FINDINGS_PER_EPISODE` per episode."""
    out, per = [], {}
    for f in sorted(findings, key=lambda f: (episode_order(f["episode"]), f["t_ns"], f["where"])):
        per[f["episode"]] = per.get(f["episode"], 0) + 1
        if per[f["episode"]] <= MAX_FINDINGS_PER_EPISODE:
            out.append(f)
    return out


def _block_unusable(ds: Dataset, what: str) -> str:
    return f"{ds.root / layout.METADATA_FILE}: simulation block unusable ({what})"


def episode_order(ep: str) -> tuple:
    """Sort key of episode ids: numeric ids in numeric order first, then the others by name."""
    return (0, int(ep), ep) if ep.isdigit() else (1, 0, ep)


def valid_flags(ds: Dataset, rows: list[CheckResult], episodes: list[str] | None = None) -> dict[str, bool]:
    """``valid`` per checked episode: false if any failed check names it (or names no episode); a
    ``warn`` row leaves its episodes valid (usable, the finding kept in the report)."""
    ids = ds.episode_ids if episodes is None else [ds.episode_id(e) for e in episodes]
    bad: set[str] = set()
    for r in rows:
        if r.failed:
            bad.update(r.episodes if r.episodes else ids)
    return {ep: ep not in bad for ep in ids}


def validation_time() -> str:
    """UTC time written next to the valid flags, ISO 8601 to the second (``2026-03-01T12:00:00Z``).

    ``SOURCE_DATE_EPOCH`` (integer Unix seconds, the reproducible-builds convention) replaces the
    clock when set, so that two runs can write byte-identical documents."""
    fixed = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    t = datetime.fromtimestamp(int(fixed), timezone.utc) if fixed.isdigit() else datetime.now(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def write_valid_flags(ds: Dataset, flags: dict[str, bool], when: str | None = None,
                      sample: dict | None = None) -> None:
    """Write ``valid: true|false`` and ``validated_at`` (``when``, default :func:`validation_time`)
    into metadata.yaml for the given episodes (atomic write). A LeRobot dataset is never written into:
    nothing happens.

    ``sample``: a sampled run's record (:meth:`.sampling.SampleReport.to_dict`): each flagged episode also
    gets ``checked: full`` (sampled: every check) or ``checked: form`` (the cheap checks only), and the
    top-level ``validation:`` mapping keeps the seed, the sampled ids and the bounds, so the sample can be
    drawn again. A run without it removes both from the episodes it flags (its verdict replaces theirs).

    Written under the writers' lock into metadata.yaml as it is at that moment (episodes committed during
    the validation kept, unflagged); raises :class:`~openarm_sim_dataset.core.lock.LockHeldError` when a
    writer holds the dataset (nothing written)."""
    if ds.lerobot is not None:
        return
    # a writer (dataset-generate, dataset-evaluate, the recorder) may be committing episodes: the verdict is
    # written under the writers' lock into the document as it is now, never into the one read when the
    # validation began (its write would drop entries committed since, and their journal)
    lock = OutputLock(ds.root)
    try:
        _write_flags(ds.root, flags, when or validation_time(), sample)
    finally:
        lock.release()


def _write_flags(root, flags: dict[str, bool], when: str, sample: dict | None) -> None:
    meta = Metadata.load(root)
    drawn = set(sample["sampled"]) if sample else set()
    for ep in meta.episodes:
        ep_id = layout.check_name(ep["id"], "episode id")
        if ep_id in flags:
            ep["valid"] = bool(flags[ep_id])
            ep["validated_at"] = when
            if sample:
                ep["checked"] = "full" if ep_id in drawn else "form"
            else:
                ep.pop("checked", None)
    if sample:
        meta.data["validation"] = {"validated_at": when, "seed": int(sample["seed"]),
                                   "population": int(sample["population"]), "sampled": list(sample["sampled"]),
                                   "bounds": [dict(b) for b in sample["bounds"]]}
    elif set(flags) >= set(meta.episode_ids):  # the whole dataset judged again: the sampled record is stale
        meta.data.pop("validation", None)
    meta.write(root)
