"""What a check is: the per-run :class:`Context` (each file read once), the :class:`Outcome` a check
returns, the :class:`CheckResult` row and the :class:`Report` of a run, and :class:`EpisodeCheck` (a check
computed episode by episode). Every check module builds on this one; the runner (:mod:`.runner`) sits above."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.camera import Camera
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.streams import Stream

from .thresholds import Thresholds


@dataclass
class Outcome:
    """What one check found: ``passed``, a detail with figures, and the episodes it fails.

    ``skipped``: nothing was verified (the detail says why). ``applicable`` tells a skip of a check
    that applies to the dataset (it could not verify, e.g. no manifest to check against: a failure
    under ``strict``) from one that does not (e.g. no wrist camera, nothing requested).

    ``warned``: episodes with a finding that is kept (counted in the detail) but leaves them usable,
    e.g. dropped samples within the budget of a recorded stream: a passed row with warnings has status
    ``warn``; under ``strict`` it is a failure naming those episodes.

    ``findings``: the findings that happen at a time of an episode (a gap, a jump, a frozen run, a frame
    out of place), each a :func:`finding` dict; the detail still counts them all.

    ``judged``: how much the check looked at, by unit (``{"episodes": 3, "streams": 8, "rows": 1200}``;
    units are plural nouns: episodes, streams, rows, dimensions, joints, frames, cameras, files, values).
    A row that passes having judged nothing (every count 0) is turned into a ``skip`` by the runner:
    no pass without judging. None: the check does not say (its detail does)."""

    passed: bool
    detail: str
    episodes: list[str] = field(default_factory=list)
    skipped: bool = False
    applicable: bool = True
    warned: list[str] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    judged: dict[str, int] | None = None


def nothing_to_judge(reason: str, applicable: bool = False) -> Outcome:
    """The outcome of a check that found nothing to judge: a ``skip`` saying why (no arm mapped, robot
    without a profile, no camera readable, no rows). ``applicable``: the check applies to the dataset
    but could not judge it (a failure under ``--strict``)."""
    return Outcome(True, reason, skipped=True, applicable=applicable, judged={})


def no_camera_reason(ctx: Context, what: str) -> str:
    """Why no camera was judged: none declared; declared but unreadable in every episode (the first
    error); or none ``what`` (e.g. ``with two or more frames``)."""
    if not ctx.ds.camera_names:
        return "no camera declared"
    errors = [c for ep in ctx.episodes if isinstance(c := ctx.cameras(ep), str)]
    if ctx.episodes and len(errors) == len(ctx.episodes):
        return f"no camera readable ({len(ctx.ds.camera_names)} declared; {errors[0]})"
    return f"no camera {what}"


def judged_text(judged: dict[str, int] | None) -> str:
    """``3 episodes, 8 streams, 1,200 rows`` (units with a count of 0 left out; empty: nothing)."""
    return ", ".join(f"{n:,} {unit}" for unit, n in (judged or {}).items() if n)


#: a row keeps at most this many timed findings per episode (the first in time; its detail counts them all)
MAX_FINDINGS_PER_EPISODE = 100


def finding(episode: str, t_ns: int, what: str, where: str = "", end_ns: int | None = None,
            level: str = "fail") -> dict:
    """One finding at a time of an episode: ``t_ns`` the dataset stamp (int ns) where it happens (a gap:
    the last sample before it; a jump: the sample after it; a frozen run: its first frame; a frame out
    of place: that frame), ``end_ns`` where it ends (a gap, a run) or None, ``where`` the stream
    (``obs arms/right/qpos``) or camera (``camera head``), ``what`` in words, ``level`` ``fail`` or
    ``warn`` (the episode stays usable)."""
    return {"episode": str(episode), "t_ns": int(t_ns), "end_ns": None if end_ns is None else int(end_ns),
            "where": where, "what": what, "level": level}


STATUSES = ("pass", "warn", "fail", "skip")


@dataclass
class CheckResult:
    """One row of the report: ``status`` is ``pass``, ``warn``, ``fail`` or ``skip``; a skipped row is
    never ``passed``; a ``warn`` row is ``passed`` (its ``warned`` episodes stay usable) with a finding
    kept in its detail. ``episodes``: the episodes it fails."""

    check: str
    passed: bool
    detail: str
    episodes: list[str]
    skipped: bool = False
    applicable: bool = True
    warned: list[str] = field(default_factory=list)
    #: timed findings (:func:`finding` dicts), in episode order then time
    findings: list[dict] = field(default_factory=list)
    #: what the check judged, by unit (:attr:`Outcome.judged`); None where the check does not say
    judged: dict[str, int] | None = None

    @property
    def status(self) -> str:
        if self.skipped:
            return "skip"
        if not self.passed:
            return "fail"
        return "warn" if self.warned else "pass"

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict:
        return dict(asdict(self), status=self.status)


class Report(list):
    """The rows of one validation run (a list of :class:`CheckResult`) with passed, warned, failed and
    skipped counted apart (a warned row does not make the verdict invalid). Its truth value is the verdict (``valid``), as openarm_dataset's
    ``validate()`` returns a bool; ``file_lines`` holds openarm_dataset's per-file messages
    (``<file>: includes null values``, paths relative to the dataset)."""

    file_lines: list[str]
    #: a sampled run's :class:`~.sampling.SampleReport` (what was sampled, the bounds); None otherwise
    sample = None
    #: the robot the robot-aware rows judged by: ``{"profile", "naming", "unit_variant", "why"}``; None when
    #: no such row ran
    robot: dict | None = None

    def __init__(self, rows=(), file_lines: list[str] | None = None):
        super().__init__(rows)
        self.file_lines = list(file_lines or [])

    def __bool__(self) -> bool:
        return self.valid

    def tally(self, status: str) -> int:
        """How many rows have ``status`` (``pass``, ``warn``, ``fail`` or ``skip``)."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
        return sum(r.status == status for r in self)

    @property
    def counts(self) -> dict[str, int]:
        """``{"passed": n, "warned": n, "failed": n, "skipped": n}``."""
        return {"passed": self.tally("pass"), "warned": self.tally("warn"), "failed": self.tally("fail"),
                "skipped": self.tally("skip")}

    @property
    def valid(self) -> bool:
        return self.tally("fail") == 0

    def summary(self) -> str:
        """E.g. ``20 passed, 1 warned, 0 failed, 2 skipped of 23 checks``."""
        c = self.counts
        return (f"{c['passed']} passed, {c['warned']} warned, {c['failed']} failed, {c['skipped']} skipped "
                f"of {len(self)} checks")

    def judged_summary(self, limit: int = 6) -> str:
        """What the run judged and what it did not, in one line: ``21 checks judged; 9 skipped: no OpenArm
        arm mapped (joint_limits, qpos_jumps), no camera (camera_frozen, ...)``. Skips are grouped by
        their reason (the detail up to its first ``;`` or ``(``), the most frequent first."""
        judged = sum(r.status != "skip" for r in self)
        skips: dict[str, list[str]] = {}
        for r in self:
            if r.status == "skip":
                reason = r.detail.split(";", 1)[0].split(" (", 1)[0].split(" [", 1)[0].strip() or "no reason given"
                skips.setdefault(reason, []).append(r.check)
        line = f"{judged} checks judged"
        if skips:
            ordered = sorted(skips.items(), key=lambda kv: -len(kv[1]))
            shown = [f"{reason} ({', '.join(names[:3])}{' ...' if len(names) > 3 else ''})"
                     for reason, names in ordered[:limit]]
            more = f"; {len(ordered) - limit} other reasons" if len(ordered) > limit else ""
            line += f"; {sum(map(len, skips.values()))} skipped: {'; '.join(shown)}{more}"
        return line


class Context:
    """Everything a check may look at, loaded lazily and at most once per file."""

    def __init__(self, ds: Dataset, episodes: list[str], thresholds: Thresholds | None = None,
                 regenerate: list[str] | None = None, robot_profile=None):
        self.ds = ds
        #: a :class:`~openarm_sim_dataset.core.robots.RobotProfile` the user named (``--robot``, ``--robot-file``):
        #: the robot-aware checks judge by it instead of the one detected (:mod:`.robot`)
        self.robot_profile = robot_profile
        self.episodes = episodes
        self.t = thresholds or Thresholds()
        self.regenerate = regenerate or []
        self._streams: dict[tuple[str, str], dict[str, Stream] | str] = {}
        self._cameras: dict[str, dict[str, Camera] | str] = {}
        self._sidecar: dict[str, dict | str] = {}
        self._frames: dict[str, dict | str] = {}
        self.cache: dict = {}
        #: openarm_dataset-style per-file messages found by the checks (see Report.file_lines)
        self.file_lines: list[str] = []

    # each getter returns the data or an error string (never raises for bad files)
    def streams(self, ep: str, kind: str) -> dict[str, Stream] | str:
        key = (ep, kind)
        if key not in self._streams:
            try:
                self._streams[key] = self.ds.streams(ep, kind)
            except DatasetError as e:
                self._streams[key] = str(e)
        return self._streams[key]

    def cameras(self, ep: str) -> dict[str, Camera] | str:
        if ep not in self._cameras:
            try:
                self._cameras[ep] = self.ds.load_cameras(ep)
            except DatasetError as e:
                self._cameras[ep] = str(e)
        return self._cameras[ep]

    def sim_dir(self, ep: str) -> Path:
        return layout.sim_dir(self.ds.root, ep)

    def sidecar(self, ep: str) -> dict | str:
        """The sidecar arrays, or an error string if unreadable or structurally broken (missing
        arrays, wrong dtypes or ranks, row counts that disagree): checks index it without fear."""
        if ep not in self._sidecar:
            path = self.sim_dir(ep) / sidecar.SIDECAR_FILE
            try:
                arrays = sidecar.load_npz(path)
                cams = list((self.ds.meta.simulation or {}).get("cameras") or {})
                # negative sizes: any size, but the same wherever it recurs (no model needed)
                problems = sidecar.check_arrays(arrays, sidecar.expected_shapes(cams, -3, -4, -5, -6), path)
                ts = arrays.get("frame_timestamp")
                if not problems and ts.size > 1 and not np.all(np.diff(ts) > 0):
                    problems.append("frame_timestamp is not strictly increasing")
                self._sidecar[ep] = f"{path}: {problems[0]}" if problems else arrays
            except DatasetError as e:
                self._sidecar[ep] = str(e)
        return self._sidecar[ep]

    def frames(self, ep: str) -> dict | str:
        """frames.npz arrays, or an error string (unreadable, or depth/labels not one image per frame)."""
        if ep not in self._frames:
            path = self.sim_dir(ep) / sidecar.FRAMES_FILE
            try:
                arrays = sidecar.load_npz(path)
                side = self.sidecar(ep)
                n = len(side["frame_timestamp"]) if isinstance(side, dict) else None
                bad = [k for k, a in arrays.items() if a.ndim != 3 or (n is not None and len(a) != n)]
                self._frames[ep] = f"{path}: {bad[0]} is not one HxW image per frame" if bad else arrays
            except DatasetError as e:
                self._frames[ep] = str(e)
        return self._frames[ep]

    def good_sidecars(self) -> dict[str, dict]:
        return {ep: s for ep in self.episodes if isinstance(s := self.sidecar(ep), dict)}


CheckFn = Callable[[Context], Outcome]


@dataclass(frozen=True)
class EpisodeCheck:
    """A check computed episode by episode, then reduced (a row's function like any other).

    ``prepare(ctx)`` runs once and may raise (e.g. the model cannot be rebuilt); ``episode(ctx, ep, prep)``
    returns a small picklable partial for one episode (None: nothing to check there, e.g. no usable
    sidecar); ``reduce(ctx, prep, parts)`` makes the row from the partials, given in episode order.
    ``select(ctx)`` lists the episodes it looks at (default ``ctx.episodes``). Calling it runs all of it
    here; :func:`validate` with ``ray=`` runs ``episode`` as Ray tasks and the rest here, so the row is
    the same either way."""

    episode: Callable[[Context, str, object], object]
    reduce: Callable[[Context, object, dict], Outcome]
    prepare: Callable[[Context], object] | None = None
    select: Callable[[Context], list[str]] = lambda ctx: list(ctx.episodes)
    #: what the check proves, as a function's docstring would say it (the check reference prints it);
    #: default: the docstring of ``reduce``, the function that makes the row
    doc: str = ""

    def __post_init__(self):
        # the instance's own docstring, never the class's: inspect.getdoc(row) reads a row alike either kind
        object.__setattr__(self, "__doc__", inspect.cleandoc(self.doc) if self.doc else inspect.getdoc(self.reduce) or "")

    def __call__(self, ctx: Context) -> Outcome:
        prep = self.prepare(ctx) if self.prepare else None
        return self.reduce(ctx, prep, {ep: self.episode(ctx, ep, prep) for ep in self.select(ctx)})

    def from_parts(self, ctx: Context, answers: dict) -> Outcome:
        """The row from partials computed elsewhere (``{ep: ("ok", partial) | ("err", kind, text)}``):
        ``prepare`` here, then the first error in episode order is raised as a local run would."""
        prep = self.prepare(ctx) if self.prepare else None
        parts = {}
        for ep in self.select(ctx):
            answer = answers[ep]
            if answer[0] == "err":
                raise RemoteCheckError(answer[1], answer[2])
            parts[ep] = answer[1]
        return self.reduce(ctx, prep, parts)


class RemoteCheckError(Exception):
    """An exception a check raised in another process, carried as its class of failure and its text:
    ``dataset`` (a DatasetError), ``block`` (the simulation block is unusable), ``crash`` (a bug)."""

    def __init__(self, kind: str, text: str):
        super().__init__(text)
        self.kind, self.text = kind, text


#: Exceptions that a malformed ``simulation:`` block raises inside a check (it is untrusted input).
BLOCK_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError)


def block_error_text(e: BaseException) -> str:
    """What was wrong with the simulation block, from the exception a check raised."""
    return f"missing key {e.args[0]!r}" if isinstance(e, KeyError) and e.args else f"{type(e).__name__}: {e}"


#: the one row of a dataset that lists no episode (e.g. a generation interrupted before its first commit)
NO_EPISODES = "episodes"


def no_episodes_detail(ds: Dataset) -> str:
    """The verdict on a dataset whose metadata.yaml lists no episode: nothing was checked; a folder left
    under episodes/ (an interrupted writer's) is counted."""
    root = ds.root / layout.EPISODES_DIR
    left = sorted(e.name for e in os.scandir(root) if not e.name.startswith(".")) if root.is_dir() else []
    detail = f"{ds.root / layout.METADATA_FILE}: the dataset has no episodes (episodes: []), nothing to validate"
    if left:
        detail += (f"; {len(left)} unlisted folder(s) under episodes/ ({', '.join(left[:3])}"
                   f"{' ...' if len(left) > 3 else ''}): an interrupted writer's, rerun its command to resume")
    return detail


def fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


def stats(values: np.ndarray) -> str:
    if len(values) == 0:
        return "n/a"
    return f"mean {np.mean(values):.3g}, max {np.max(values):.3g}"
