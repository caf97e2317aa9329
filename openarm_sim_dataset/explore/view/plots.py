"""An episode's joint plots as the viewer draws them: per embodiment component a position panel (qpos,
with the command) and a velocity panel (qvel), each stream a series in seconds from the episode's first
stamp; a series longer than :data:`MAX_PLOT_POINTS` is reduced to a min/max envelope per joint.

A LeRobot dataset's features that are no OpenArm arm (``lerobot/<feature>`` streams, values as stored)
each get a panel of their own, ``observation.state`` with ``action`` as its command when their
dimensions are the same."""

from __future__ import annotations

import numpy as np

from .json_values import rounded

#: plot series longer than this are reduced to a min/max envelope of this many points per joint
MAX_PLOT_POINTS = 4000


def envelope(t: np.ndarray, v: np.ndarray, max_points: int = MAX_PLOT_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(indices,) of one column reduced to at most ``max_points``: the first, the minimum and the maximum
    sample of each of ``max_points // 3`` equal runs of samples, in time order, so a single-sample
    spike (a jump) survives the reduction. ``t`` is unused but kept for symmetry of the call."""
    n = len(v)
    if n <= max_points:
        return np.arange(n)
    buckets = max(max_points // 3, 1)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep = [edges[:-1]]
    with np.errstate(invalid="ignore"):
        filled = np.where(np.isfinite(v), v, np.nan)
        lo = np.where(np.isnan(filled), np.inf, filled)
        hi = np.where(np.isnan(filled), -np.inf, filled)
        keep.append(edges[:-1] + np.array([int(np.argmin(lo[a:b])) for a, b in zip(edges[:-1], edges[1:])]))
        keep.append(edges[:-1] + np.array([int(np.argmax(hi[a:b])) for a, b in zip(edges[:-1], edges[1:])]))
    keep.append(np.array([n - 1]))
    return np.unique(np.concatenate(keep))


def plot_panels(streams: dict[str, dict], t0: int) -> list[dict]:
    """The panels of an episode's streams (``{kind: {key: stream}}``, as :meth:`Dataset.streams` gives
    per kind): qpos with the command, then qvel, per component; a component with neither (a lifter or
    legacy stream) plots its one attribute."""
    panels = []
    generic = {kind: {k: s for k, s in streams[kind].items() if k.startswith(GENERIC_PREFIX)} for kind in streams}
    streams = {kind: {k: s for k, s in streams[kind].items() if not k.startswith(GENERIC_PREFIX)} for kind in streams}
    # in the order the metadata declares embodiments and components (arms: right, then left)
    prefixes = list(dict.fromkeys(key.rsplit("/", 1)[0] for k in streams.values() for key in k))
    obs, act = streams["obs"], streams["action"]
    for prefix in prefixes:
        for attr, title in (("qpos", "position"), ("qvel", "velocity")):
            series = []
            for kind, label in (("obs", "obs"), ("action", "command")):
                s = (obs if kind == "obs" else act).get(f"{prefix}/{attr}")
                if s is None or not len(s) or (kind == "action" and attr != "qpos"):
                    continue
                series.append(_series(s, t0, label, dashed=kind == "action"))
            if not series:
                s_other = None
                if attr == "qpos":  # a lifter or legacy stream: its one attribute
                    s_other = next((st for key, st in obs.items() if key.rsplit("/", 1)[0] == prefix
                                    and key.rsplit("/", 1)[1] not in ("qvel", "qtorque", "pose")), None)
                if s_other is None or not len(s_other):
                    continue
                series.append(_series(s_other, t0, "obs", dashed=False))
                a = next((st for key, st in act.items() if key.rsplit("/", 1)[0] == prefix
                          and key.rsplit("/", 1)[1] == s_other.key.rsplit("/", 1)[1]), None)
                if a is not None and len(a):
                    series.append(_series(a, t0, "command", dashed=True))
                title = s_other.key.rsplit("/", 1)[1]
            cols = list(series[0]["columns"])
            unit = "rad" if attr == "qpos" else "rad/s"
            panels.append({"id": f"{prefix}/{attr}", "title": f"{prefix} {title} ({attr}"
                           + (" + command" if any(x["label"] == "command" for x in series) else "") + f"), {unit}",
                           "columns": cols, "series": series})
    return panels + _generic_panels(generic.get("obs", {}), generic.get("action", {}), t0)


#: the reader's key prefix of a LeRobot feature that is no OpenArm arm (``lerobot/observation.state``)
GENERIC_PREFIX = "lerobot/"
#: a LeRobot observation feature plotted with an action feature as its command
GENERIC_COMMANDS = {"lerobot/observation.state": "lerobot/action"}


def _generic_panels(obs: dict, act: dict, t0: int) -> list[dict]:
    """One panel per LeRobot feature (values as stored: no unit is known), each observation with its
    command when the action has the same dimensions; an action feature left over is a panel alone."""
    panels, used = [], set()
    for key, s in obs.items():
        if not len(s):
            continue
        series = [_series(s, t0, "obs", dashed=False)]
        a = act.get(GENERIC_COMMANDS.get(key, ""))
        if a is not None and len(a) and tuple(a.columns) == tuple(s.columns):
            series.append(_series(a, t0, "command", dashed=True))
            used.add(a.key)
        feature = key.removeprefix(GENERIC_PREFIX)
        panels.append({"id": key, "title": f"{feature}" + (" + command" if len(series) > 1 else "") + ", as stored",
                       "columns": list(series[0]["columns"]), "series": series})
    for key, a in act.items():
        if key in used or not len(a):
            continue
        series = [_series(a, t0, "command", dashed=True)]
        panels.append({"id": key, "title": f"{key.removeprefix(GENERIC_PREFIX)} (command), as stored",
                       "columns": list(series[0]["columns"]), "series": series})
    return panels


def _series(s, t0: int, label: str, dashed: bool) -> dict:
    """One stream as a plot series: times in s from ``t0``; each column reduced to a min/max envelope
    when longer than :data:`MAX_PLOT_POINTS` (then with its own times)."""
    t = (s.timestamps - t0) / 1e9
    v = np.asarray(s.values)
    cols = list(s.columns)[: v.shape[1]] if v.ndim == 2 else ["value"]
    if v.ndim == 1:
        v = v[:, None]
    out = {"label": label, "dashed": dashed, "columns": cols, "n": int(len(t))}
    if len(t) <= MAX_PLOT_POINTS:
        out["t"] = rounded(t, 6)
        out["v"] = [rounded(v[:, j]) for j in range(v.shape[1])]
        return out
    out["t"] = None
    out["tc"], out["v"] = [], []
    for j in range(v.shape[1]):
        keep = envelope(t, v[:, j])
        out["tc"].append(rounded(t[keep], 6))
        out["v"].append(rounded(v[keep, j]))
    return out
