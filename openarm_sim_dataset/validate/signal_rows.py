"""The signal checks of single rows: values that are not finite numbers, and rows written twice."""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import layout

from .check import MAX_FINDINGS_PER_EPISODE, Context, Outcome, finding, nothing_to_judge
from .signal_streams import stream_labels


def check_nonfinite_values(ctx: Context) -> Outcome:
    """No value of any obs or action stream (every vector of every role, whatever its name) is NaN,
    +Inf or -Inf: training normalises, sums and backpropagates through them, and one such value poisons a
    whole batch. `nulls` counts NaN (and nulls) per file; this row also finds infinities, and names
    the dimension, the episode and the first time. A failure."""
    bad, found, counts = set(), [], {}
    eps, keys, dims, rows = 0, set(), {}, 0
    for ep in ctx.episodes:
        seen = False
        for kind in layout.KINDS:
            streams = ctx.streams(ep, kind)
            if isinstance(streams, str):
                continue
            for key, s in streams.items():
                x = s.values
                if x.ndim != 2 or not x.size:
                    continue
                seen = True
                keys.add((kind, key))
                dims[(kind, key)] = x.shape[1]
                rows += len(x)
                finite = np.isfinite(x)
                if finite.all():
                    continue
                bad.add(ep)
                nan, pos = np.isnan(x), np.isposinf(x)
                neg = ~finite & ~nan & ~pos
                first = np.argmax(~finite, axis=0)
                labels = stream_labels(ctx, kind, key, s)
                for d in np.flatnonzero(~finite.all(axis=0)):
                    tally = counts.setdefault(labels[d], np.zeros(3, dtype=np.int64))
                    here = np.array([nan[:, d].sum(), pos[:, d].sum(), neg[:, d].sum()])
                    tally += here
                    found.append(finding(ep, int(s.timestamps[first[d]]), f"{labels[d]}: {_kinds(here)}", f"{kind} {key}"))
        eps += seen
    if not keys:
        return nothing_to_judge("no obs or action stream")
    judged = {"episodes": eps, "streams": len(keys), "dimensions": sum(dims.values()), "rows": rows}
    if bad:
        shown = "; ".join(f"{n}: {_kinds(c)}" for n, c in list(counts.items())[:6])
        return Outcome(False, f"{int(sum(c.sum() for c in counts.values()))} value(s) NaN or infinite in {len(bad)} "
                              f"episode(s): {shown}",
                       sorted(bad), findings=found, judged=judged)
    return Outcome(True, f"every value finite ({sum(dims.values())} dimensions of {len(keys)} streams)", judged=judged)


def _kinds(counts: np.ndarray) -> str:
    """``2 NaN, 1 +Inf`` from the counts of NaN, +Inf and -Inf."""
    return ", ".join(f"{int(n)} {name}" for name, n in zip(("NaN", "+Inf", "-Inf"), counts) if n)


def _same_rows(blocks: list[np.ndarray]) -> np.ndarray:
    """Per row after the first: every value of every block equals the row before (NaN equals NaN)."""
    same = np.ones(len(blocks[0]) - 1, dtype=bool)
    for x in blocks:
        a, b = x[1:], x[:-1]
        same &= ((a == b) | (np.isnan(a) & np.isnan(b))).all(axis=1)
    return same


def check_duplicate_rows(ctx: Context) -> Outcome:
    """No row of an episode is written twice: two consecutive rows of a file with the same timestamp and
    every value of every stream in it (state and action alike) equal, a recorder that wrote a frame twice;
    and no timestamp repeats with different values (two states at one time: a reader picks one).

    Streams read from one file with the same stamps are one table (LeRobot's frame table; an arm's
    state file). A repeated timestamp with different values fails (which row is the truth is unknown);
    an exact duplicate row warns (it is the same frame, weighted twice in training). Per episode the
    counts; each row a finding at its time."""
    failed, warned, found, counts = set(), set(), [], {"duplicate": 0, "conflicting": 0}
    eps, tables, rows, widths = 0, 0, 0, {}
    for ep in ctx.episodes:
        groups: dict[tuple[str, int], list] = {}
        for kind in layout.KINDS:
            streams = ctx.streams(ep, kind)
            if isinstance(streams, str):
                continue
            for key, s in streams.items():
                if s.values.ndim == 2 and len(s) > 1:
                    groups.setdefault((str(s.path), len(s)), []).append((kind, key, s))
        if not groups:
            continue
        eps += 1
        for members in groups.values():
            # one table per distinct stamps array among the streams of one file
            tabs: list[list] = []
            for m in members:
                for t in tabs:
                    if np.array_equal(t[0][2].timestamps, m[2].timestamps):
                        t.append(m)
                        break
                else:
                    tabs.append([m])
            for tab in tabs:
                tables += 1
                ts = np.asarray(tab[0][2].timestamps, dtype=np.int64)
                rows += len(ts)
                widths.update({(k, key): s.values.shape[1] for k, key, s in tab})
                repeat = ts[1:] == ts[:-1]
                if not repeat.any():
                    continue
                same = _same_rows([s.values for _, _, s in tab]) & repeat
                conflict = repeat & ~same
                counts["duplicate"] += int(same.sum())
                counts["conflicting"] += int(conflict.sum())
                where = ", ".join(f"{k} {key}" for k, key, _ in tab[:3]) + (" ..." if len(tab) > 3 else "")
                for i in np.flatnonzero(repeat)[:MAX_FINDINGS_PER_EPISODE]:
                    found.append(finding(ep, int(ts[i + 1]), "row written twice (stamp and every value repeat)" if same[i]
                                         else "timestamp repeats with different values", where,
                                         level="warn" if same[i] else "fail"))
                (failed if conflict.any() else warned).add(ep)
    if not tables:
        return nothing_to_judge("no obs or action stream of two rows or more")
    judged = {"episodes": eps, "streams": len(widths), "dimensions": sum(widths.values()), "rows": rows}
    figures = f"{counts['duplicate']} duplicate row(s), {counts['conflicting']} repeated stamp(s) with different values"
    if failed or warned:
        return Outcome(not failed, f"{figures} in {len(failed | warned)} episode(s) of {tables} tables",
                       sorted(failed), warned=sorted(warned - failed), findings=found, judged=judged)
    return Outcome(True, f"{tables} tables of {rows} rows: no row written twice, no timestamp repeated", judged=judged)
