"""The streams the signal checks judge, and what one episode gives them: every state and action vector of
the episode, whatever the robot or the layout, and a small per-dimension summary folded from one read.

A stream is judged when its role is ``state`` or ``action``: in the OpenArm layout every obs stream is
state and every action stream action; in a LeRobot dataset the arms mapped from the names keep their
kind, and every other vector takes the role :mod:`~openarm_sim_dataset.core.feature_roles` gives its
feature (``state``, ``actions``, ``observation.joint_positions`` ...; rewards, flags and the environment's
state are not judged). Each dimension has a quantity (``position``, ``velocity``, ``effort``): the checks
of a value's level (bounds, outliers, jumps, drift) judge positions only, a velocity or a torque spikes
and steps by nature (a contact, a start).

The :class:`StreamSummary` of an episode's stream is what the dataset-wide rows need of it (min, max and
how often each is reached, moments, the 99th-percentile step): computed once per episode and cached in
``ctx.cache``, so the rows share one read, and small, so a row compares every episode of a dataset
validated in groups or on Ray (each row keeps only the fields it needs, :func:`view`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields, replace

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.feature_roles import dimension_quantities, feature_role, state_action_pairs
from openarm_sim_dataset.core.streams import Stream

from .check import Context

#: the attributes of an arm (or a lifter) that are not positions
_ARM_QUANTITY = {"qvel": "velocity", "qtorque": "effort"}
NOTHING = "no state or action vector"


@dataclass(frozen=True)
class JudgedStream:
    """One stream of an episode as the signal checks see it: ``kind`` (obs/action), ``key``, ``role``
    (state/action), the quantity of each dimension, and ``component``: the part of the robot it belongs
    to (``arms/left`` for every stream of that arm; a LeRobot state vector and the action vector paired
    with it share one), so an arm no task uses is told from a vector that does not vary."""

    kind: str
    key: str
    role: str
    quantities: tuple[str, ...]
    component: str
    stream: Stream
    labels: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.kind} {self.key}"


def label(key: str, d: int, column: str) -> str:
    """A dimension as reports name it: ``state[3] left_wrist.pos``, ``arms/right/qpos[7] gripper``."""
    return f"{key.removeprefix('lerobot/')}[{d}] {column}"


def stream_labels(ctx: Context, kind: str, key: str, stream: Stream) -> tuple[str, ...]:
    """Each dimension of a stream as reports name it: in a LeRobot dataset the feature, its dimension and
    its ``names`` entry (``observation.state[10] right_rev3``, also for an arm mapped from it), else the
    kind, the stream, the dimension and its column (``obs arms/right/qpos[2] joint3``)."""
    src = ctx.ds.lerobot
    columns = [stream.columns[d] if d < len(stream.columns) else f"d{d}" for d in range(stream.values.shape[1])]
    if src is not None:
        if key.startswith("lerobot/") and key.removeprefix("lerobot/") in src.features:
            feature = key.removeprefix("lerobot/")
            names = src.vector_names(feature)
            return tuple(f"{feature}[{names.index(c)}] {c}" if names.count(c) == 1 else label(key, d, c)
                         for d, c in enumerate(columns))
        for arm in src.arms.get(kind, []):
            feature = "observation.state" if kind == "obs" else "action"
            if arm.key == key and feature in src.features and len(arm.dims) == len(columns):
                names = src.vector_names(feature)
                return tuple(f"{feature}[{i}] {names[i]}" for i in arm.dims)
    return tuple(f"{kind} {label(key, d, c)}" for d, c in enumerate(columns))


def _lerobot_roles(ctx: Context) -> tuple[dict, dict]:
    """Per LeRobot feature its role, and the component of each state/action feature (paired features share
    one), found once per Context."""
    if "signal_roles" not in ctx.cache:
        src = ctx.ds.lerobot
        roles = {k: feature_role(k, f) for k, f in src.features.items()}
        names = {k: src.vector_names(k) for k, r in roles.items() if r.role in ("state", "action")}
        component = {k: f"lerobot/{k}" for k in names}
        for s, a in state_action_pairs(src.features, names):
            component[a] = component[s]
        ctx.cache["signal_roles"] = (roles, component)
    return ctx.cache["signal_roles"]


def judged_streams(ctx: Context, ep: str) -> list[JudgedStream] | str:
    """The episode's state and action streams (see the module doc), or the error string of a kind that does
    not read (the ``parquet_schema`` and ``nulls`` rows name it)."""
    out = []
    for kind in layout.KINDS:
        streams = ctx.streams(ep, kind)
        if isinstance(streams, str):
            return streams
        for key, s in streams.items():
            if s.values.ndim != 2 or not s.values.shape[1]:
                continue
            if key.startswith("lerobot/") and ctx.ds.lerobot is not None:
                roles, component = _lerobot_roles(ctx)
                role = roles.get(key.removeprefix("lerobot/"))
                if role is None or role.role not in ("state", "action"):
                    continue
                out.append(JudgedStream(kind, key, role.role, dimension_quantities(role, s.columns),
                                        component.get(role.key, key), s, stream_labels(ctx, kind, key, s)))
            else:
                head, _, attr = key.rpartition("/")
                quantity = _ARM_QUANTITY.get(attr, "position")
                out.append(JudgedStream(kind, key, "state" if kind == "obs" else "action",
                                        (quantity,) * s.values.shape[1], head or key, s, stream_labels(ctx, kind, key, s)))
    return out


def rest_floor(magnitude: np.ndarray, relative: float) -> np.ndarray:
    """The range at or below which a dimension rests: ``relative`` x max(1, |value|) (any unit)."""
    return relative * np.maximum(1.0, magnitude)


@dataclass
class StreamSummary:
    """One stream of one episode, per dimension (arrays of shape (D,)); finite values only (NaN and
    infinities are the ``nonfinite_values`` row's). ``None`` for a field a row's view leaves out."""

    kind: str
    key: str
    columns: tuple[str, ...]
    labels: tuple[str, ...]
    quantities: tuple[str, ...]
    component: str
    rows: int
    t0: int  # first and last stamp (ns)
    t1: int
    moving: bool  # some position dimension's range exceeds its rest floor in this episode
    dim_moving: np.ndarray | None = None
    n: np.ndarray | None = None  # finite values
    lo: np.ndarray | None = None  # min and max (+inf/-inf where no finite value)
    hi: np.ndarray | None = None
    n_lo: np.ndarray | None = None  # samples equal to the min, the max
    n_hi: np.ndarray | None = None
    t_lo: np.ndarray | None = None  # first stamp at the min, at the max (ns)
    t_hi: np.ndarray | None = None
    s1: np.ndarray | None = None  # sum and sum of squares (float64)
    s2: np.ndarray | None = None
    zero: np.ndarray | None = None  # every sample exactly 0.0
    step_p99: np.ndarray | None = None  # 99th percentile of the nonzero |steps| (NaN: none)
    step_max: np.ndarray | None = None  # largest |step| (0: none)

    @property
    def where(self) -> str:
        return f"{self.kind} {self.key}"


#: the fields every view keeps (identity, extent, motion)
_ALWAYS = ("kind", "key", "columns", "labels", "quantities", "component", "rows", "t0", "t1", "moving", "dim_moving")


def summarise(js: JudgedStream, rest_range: float) -> StreamSummary:
    """The summary of one stream (one pass over its values, vectorised)."""
    s = js.stream
    x = s.values.astype(np.float64)
    ts = np.asarray(s.timestamps, dtype=np.int64)
    finite = np.isfinite(x)
    lo = np.where(finite, x, np.inf).min(axis=0) if len(x) else np.full(x.shape[1], np.inf)
    hi = np.where(finite, x, -np.inf).max(axis=0) if len(x) else np.full(x.shape[1], -np.inf)
    n = finite.sum(axis=0)
    at_lo, at_hi = x == lo, x == hi
    first = lambda m: np.where(m.any(axis=0), ts[np.argmax(m, axis=0)] if len(ts) else 0, 0)  # noqa: E731
    xf = np.where(finite, x, 0.0)
    has = n > 0
    span = np.where(has, hi - lo, 0.0)
    magnitude = np.where(has, np.maximum(np.abs(lo), np.abs(hi)), 0.0)
    dim_moving = span > rest_floor(magnitude, rest_range)
    step = np.abs(np.diff(x, axis=0))
    step = np.where(np.isfinite(step), step, 0.0)
    with warnings.catch_warnings():  # a dimension without a nonzero step has no percentile (NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        p99 = np.nanpercentile(np.where(step > 0, step, np.nan), 99, axis=0) if len(step) else np.full(x.shape[1], np.nan)
    # a stream moves by its positions: a still arm's velocities and torques carry servo noise
    positions = np.array([q == "position" for q in js.quantities], dtype=bool)
    return StreamSummary(
        js.kind, js.key, tuple(s.columns), js.labels, js.quantities, js.component, len(x),
        int(ts[0]) if len(ts) else 0, int(ts[-1]) if len(ts) else 0, bool((dim_moving & positions).any()), dim_moving,
        n, lo, hi, at_lo.sum(axis=0), at_hi.sum(axis=0), first(at_lo), first(at_hi),
        xf.sum(axis=0), (xf * xf).sum(axis=0), has & (n == len(x)) & (np.where(finite, x, 1.0) == 0.0).all(axis=0),
        np.asarray(p99, dtype=np.float64), step.max(axis=0) if len(step) else np.zeros(x.shape[1]))


def summaries(ctx: Context, ep: str) -> list[StreamSummary] | None:
    """The summaries of the episode's judged streams, computed once per Context (None: the episode does
    not read; the form rows say why)."""
    cache = ctx.cache.setdefault("signal_summaries", {})
    if ep not in cache:
        streams = judged_streams(ctx, ep)
        cache[ep] = None if isinstance(streams, str) else [summarise(js, ctx.t.signal_rest_range) for js in streams]
    return cache[ep]


def view(ctx: Context, ep: str, keep: tuple[str, ...]) -> list[StreamSummary] | None:
    """The episode's summaries with only the fields ``keep`` (and the identity): a row's partial."""
    full = summaries(ctx, ep)
    if full is None:
        return None
    drop = {f.name: None for f in fields(StreamSummary) if f.name not in _ALWAYS and f.name not in keep}
    return [replace(s, **drop) for s in full]


def by_stream(parts: dict[str, list[StreamSummary] | None]) -> dict[tuple[str, str], list[tuple[str, StreamSummary]]]:
    """The partials of every episode regrouped per stream ``(kind, key)``: ``[(episode, summary), ...]`` in
    episode order, skipping an episode whose stream has another width than the stream's first."""
    out: dict[tuple[str, str], list[tuple[str, StreamSummary]]] = {}
    for ep, part in parts.items():
        for s in part or ():
            items = out.setdefault((s.kind, s.key), [])
            if not items or items[0][1].columns == s.columns:
                items.append((ep, s))
    return out


def judged_counts(parts: dict[str, list[StreamSummary] | None]) -> dict[str, int]:
    """What a row over these partials judged: episodes, streams, dimensions and rows."""
    eps = [p for p in parts.values() if p]
    keys = {(s.kind, s.key): len(s.columns) for p in eps for s in p}
    return {"episodes": len(eps), "streams": len(keys), "dimensions": sum(keys.values()),
            "rows": sum(s.rows for p in eps for s in p)}


def position_dims(s: StreamSummary) -> np.ndarray:
    """Boolean mask of the stream's position dimensions."""
    return np.array([q == "position" for q in s.quantities], dtype=bool)
