"""The recording session's own faults, found in the bag's times: a registry of checks (:data:`FAULTS`).

Each check looks at every mapped topic's receive times (the bag's clock) and, where the message has one,
its header stamps, and says per topic and time what went wrong: a topic that stops, a rate that sags,
header stamps that go backwards, a camera that lags the joints. Times are seconds from the bag's first
message. A check with nothing to judge (no header stamps, no camera beside a joint topic) says so.
Adding a check is adding a row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: a topic "stops" when no message comes for this many of its median periods, and at least STOP_MIN_S
STOP_PERIODS = 10
STOP_MIN_S = 0.5
#: a rate "sags" when a window of SAG_WINDOW_S holds fewer than this share of the messages its median rate gives
SAG_SHARE = 0.7
SAG_WINDOW_S = 1.0
#: a camera "lags" when its receive-minus-stamp delay exceeds the joints' by more than this
LAG_S = 0.05
#: findings quoted per topic and check
QUOTED = 3


@dataclass
class TopicTimes:
    """One topic's times (int64 ns): ``receive`` (the bag's), ``stamp`` (header stamps, None when the
    message has no header or the map takes receive times); ``role``: obs | action | camera."""

    topic: str
    role: str
    receive: np.ndarray
    stamp: np.ndarray | None


@dataclass(frozen=True)
class Finding:
    """One check's verdict: ``status`` pass | fail | skip, ``detail`` what it judged or found."""

    check: str
    status: str
    detail: str

    def line(self) -> str:
        return f"{self.status.upper():4} {self.check}: {self.detail}"


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    run: Callable[[list[TopicTimes], int], Finding]


def _s(ns: int | np.integer, t0: int) -> str:
    return f"{(int(ns) - t0) / 1e9:.3f} s"


def _period(t: np.ndarray) -> float | None:
    d = np.diff(t)
    d = d[d > 0]
    return float(np.median(d)) if d.size else None


def _stops(topics: list[TopicTimes], t0: int) -> Finding:
    found, judged = [], 0
    for tt in topics:
        p = _period(tt.receive)
        if p is None:
            continue
        judged += 1
        limit = max(STOP_PERIODS * p, STOP_MIN_S * 1e9)
        gaps = np.diff(tt.receive)
        where = np.flatnonzero(gaps > limit)
        for i in where[:QUOTED]:
            found.append(f"{tt.topic} stops for {gaps[i] / 1e9:.3f} s at {_s(tt.receive[i], t0)}")
        if len(where) > QUOTED:
            found.append(f"{tt.topic} stops {len(where) - QUOTED} more times")
    if not judged:
        return Finding("topic_stops", "skip", "no topic has two messages")
    if found:
        return Finding("topic_stops", "fail", "; ".join(found))
    return Finding("topic_stops", "pass", f"{judged} topics: no silence longer than {STOP_PERIODS} periods "
                                          f"(at least {STOP_MIN_S:g} s)")


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of each run of True."""
    if not mask.any():
        return []
    m = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(m)
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1))


def _sags(topics: list[TopicTimes], t0: int) -> Finding:
    found, judged = [], 0
    win = int(SAG_WINDOW_S * 1e9)
    for tt in topics:
        t = tt.receive
        p = _period(t)
        if p is None or t[-1] - t[0] < 2 * win:
            continue
        judged += 1
        rate = 1e9 / p
        # windows starting at each message up to one window before the end; a stop (a gap inside) is
        # the other check's: windows that hold one are not judged here
        starts = t[t <= t[-1] - win]
        counts = np.searchsorted(t, starts + win, side="left") - np.arange(len(starts))
        gaps = np.diff(t)
        limit = max(STOP_PERIODS * p, STOP_MIN_S * 1e9)
        big = np.flatnonzero(gaps > limit)
        stop = np.zeros(len(starts), bool)
        for i in big:
            stop |= (starts <= t[i + 1]) & (starts + win >= t[i])
        low = (counts < SAG_SHARE * rate * SAG_WINDOW_S) & ~stop
        runs = _runs(low)
        for a, b in runs[:QUOTED]:
            worst = int(counts[a:b + 1].min())
            found.append(f"{tt.topic} sags to {worst / SAG_WINDOW_S:.1f} Hz (of {rate:.1f} Hz) "
                         f"from {_s(starts[a], t0)} to {_s(starts[b] + win, t0)}")
        if len(runs) > QUOTED:
            found.append(f"{tt.topic} sags {len(runs) - QUOTED} more times")
    if not judged:
        return Finding("rate_sags", "skip", f"no topic spans {2 * SAG_WINDOW_S:g} s")
    if found:
        return Finding("rate_sags", "fail", "; ".join(found))
    return Finding("rate_sags", "pass", f"{judged} topics: every {SAG_WINDOW_S:g} s window holds at least "
                                        f"{SAG_SHARE:.0%} of the topic's median rate")


def _backwards(topics: list[TopicTimes], t0: int) -> Finding:
    found, judged = [], 0
    for tt in topics:
        if tt.stamp is None or len(tt.stamp) < 2:
            continue
        judged += 1
        d = np.diff(tt.stamp)
        back = np.flatnonzero(d < 0)
        same = int(np.count_nonzero(d == 0))
        for i in back[:QUOTED]:
            found.append(f"{tt.topic} header stamp goes back {-d[i] / 1e6:.1f} ms at {_s(tt.receive[i + 1], t0)}")
        if len(back) > QUOTED:
            found.append(f"{tt.topic} goes back {len(back) - QUOTED} more times")
        if same:
            found.append(f"{tt.topic} repeats a header stamp {same} times")
    if not judged:
        return Finding("stamps_backwards", "skip", "no topic's header stamps are used")
    if found:
        return Finding("stamps_backwards", "fail", "; ".join(found) + " (those messages are dropped)")
    return Finding("stamps_backwards", "pass", f"{judged} topics: header stamps strictly increase")


def _lag(tt: TopicTimes) -> float | None:
    if tt.stamp is None or not len(tt.stamp):
        return None
    return float(np.median(tt.receive - tt.stamp))


def _camera_lags(topics: list[TopicTimes], t0: int) -> Finding:
    joints = [(tt, _lag(tt)) for tt in topics if tt.role != "camera"]
    joints = [(tt, lag) for tt, lag in joints if lag is not None]
    cams = [(tt, _lag(tt)) for tt in topics if tt.role == "camera"]
    cams = [(tt, lag) for tt, lag in cams if lag is not None]
    if not joints or not cams:
        return Finding("camera_lags", "skip", "needs a camera and a joint topic, both with header stamps")
    ref, ref_lag = min(joints, key=lambda x: x[1])
    found = []
    for tt, lag in cams:
        late = (lag - ref_lag) / 1e9
        if late > LAG_S:
            found.append(f"{tt.topic} lags {ref.topic} by {late * 1e3:.0f} ms (median receive - stamp "
                         f"{lag / 1e6:.1f} ms vs {ref_lag / 1e6:.1f} ms): aligned here by its stamps, but what went "
                         "by arrival (a live policy, a receive-time converter) saw it late")
    if found:
        return Finding("camera_lags", "fail", "; ".join(found))
    return Finding("camera_lags", "pass", f"{len(cams)} cameras within {LAG_S * 1e3:.0f} ms of {ref.topic}'s "
                                          "receive-minus-stamp delay")


FAULTS: tuple[Fault, ...] = (
    Fault("topic_stops", f"a topic silent for more than {STOP_PERIODS} of its periods (at least {STOP_MIN_S:g} s)",
          _stops),
    Fault("rate_sags", f"a {SAG_WINDOW_S:g} s window with fewer than {SAG_SHARE:.0%} of the topic's median rate",
          _sags),
    Fault("stamps_backwards", "a header stamp earlier than (or equal to) the one before it", _backwards),
    Fault("camera_lags", f"a camera whose receive-minus-stamp delay exceeds the joints' by more than "
                         f"{LAG_S * 1e3:.0f} ms", _camera_lags),
)


def find_faults(topics: list[TopicTimes], t0: int) -> list[Finding]:
    """Every check of :data:`FAULTS` over the topics' times; ``t0``: the bag's first receive ns."""
    return [f.run(topics, t0) for f in FAULTS]
