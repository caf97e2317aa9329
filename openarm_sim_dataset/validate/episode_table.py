"""The report turned around: per episode, what failed, what warned and how many timed findings it has, worst
first (``dataset-validate --by-episode``): which episodes to look at, drop or re-record. lerobot-doctor's
``score`` gives each episode a number from its action smoothness, coverage and length; this says which
checks an episode fails and why, so dropping it is a decision about a named fault, not a threshold on a
score."""

from __future__ import annotations

from collections import Counter

from .check import Report


def episode_table(report: Report, flags: dict[str, bool]) -> list[dict]:
    """One dict per checked episode (``flags``: valid per episode): ``episode``, ``valid``, ``failed`` and
    ``warned`` (the checks, in report order), ``findings`` (timed findings of failing or warning rows), worst
    first: failed checks, then warnings, then findings, then episode order."""
    # one pass over the rows and their findings: a big dataset's table costs its findings, not episodes x them
    failed: dict[str, list[str]] = {ep: [] for ep in flags}
    warned: dict[str, list[str]] = {ep: [] for ep in flags}
    found = Counter()
    for r in report:
        if r.failed:
            for ep in (r.episodes or flags):  # a failed row naming no episode fails them all (valid_flags)
                failed.setdefault(ep, []).append(r.check)
        elif r.status == "warn":
            for ep in r.warned:
                warned.setdefault(ep, []).append(r.check)
        if r.status in ("fail", "warn"):
            found.update(f["episode"] for f in r.findings)
    rows = [{"episode": ep, "valid": bool(valid), "failed": failed[ep], "warned": warned[ep], "findings": found[ep]}
            for ep, valid in flags.items()]
    order = {ep: i for i, ep in enumerate(flags)}
    return sorted(rows, key=lambda r: (-len(r["failed"]), -len(r["warned"]), -r["findings"], order[r["episode"]]))


def episode_lines(table: list[dict], limit: int | None = None) -> list[str]:
    """The table as text lines, worst first (``limit``: at most that many episodes, then a count)."""
    shown = table if limit is None else table[:limit]
    lines = [f"{'episode':>8}  verdict  findings  failed / warned"]
    for r in shown:
        what = ", ".join(r["failed"]) + (" / " if r["failed"] and r["warned"] else "") + ", ".join(r["warned"])
        lines.append(f"{r['episode']:>8}  {'valid' if r['valid'] else 'INVALID':<7}  {r['findings']:>8}  {what or '-'}")
    if limit is not None and len(table) > limit:
        lines.append(f"... {len(table) - limit} more episodes")
    return lines
