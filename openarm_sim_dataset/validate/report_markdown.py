"""A validation report as Markdown (``dataset-validate --markdown FILE``): the verdict, the robot judged by,
what was judged and what was skipped and why, one table row per check, and the timed findings of the
rows that fail or warn. Meant for a pull request, a dataset card or a CI summary."""

from __future__ import annotations

from .check import Report, judged_text
from .episode_table import episode_table

_STATUS = {"pass": "pass", "warn": "**warn**", "fail": "**FAIL**", "skip": "skip"}
#: timed findings listed per failing or warning row (the row's detail counts them all)
MAX_FINDINGS_SHOWN = 10
#: episodes listed in the worst-first table
MAX_EPISODES_SHOWN = 20


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _ms(ns: int) -> str:
    return f"{ns / 1e9:.3f} s"


def markdown(report: Report, dataset: str, flags: dict[str, bool]) -> str:
    """The report of ``dataset`` (its path as the user gave it) with ``flags`` (valid per episode)."""
    c = report.counts
    bad = sum(not v for v in flags.values())
    verdict = "valid" if report.valid else "INVALID"
    lines = [f"# Validation of `{dataset}`", "",
             f"**{verdict}**: {c['passed']} passed, {c['warned']} warned, {c['failed']} failed, {c['skipped']} skipped "
             f"of {len(report)} checks; {len(flags) - bad}/{len(flags)} episodes valid.", ""]
    if report.robot is not None:
        lines += [f"**Robot:** `{report.robot['profile']}` ({_cell(report.robot['why'])}).", ""]
    lines += [f"**Judged:** {_cell(report.judged_summary(limit=20))}.", ""]
    if report.sample is not None:
        lines += [f"- {_cell(line)}" for line in report.sample.lines()] + [""]
    lines += ["| status | check | judged | detail | episodes |", "|---|---|---|---|---|"]
    for r in report:
        named = r.episodes if r.failed else r.warned if r.status == "warn" else []
        eps = ", ".join(named[:10]) + (" ..." if len(named) > 10 else "")
        lines.append(f"| {_STATUS[r.status]} | `{r.check}` | {_cell(judged_text(r.judged))} | {_cell(r.detail)} | {eps} |")
    worst = [e for e in episode_table(report, flags) if e["failed"] or e["warned"]]
    if worst:
        lines += ["", "## Episodes, worst first", "", "| episode | verdict | failed | warned | findings |",
                  "|---|---|---|---|---|"]
        lines += [f"| {e['episode']} | {'valid' if e['valid'] else '**INVALID**'} | {', '.join(e['failed'])} | "
                  f"{', '.join(e['warned'])} | {e['findings']} |" for e in worst[:MAX_EPISODES_SHOWN]]
        if len(worst) > MAX_EPISODES_SHOWN:
            lines.append(f"\n{len(worst) - MAX_EPISODES_SHOWN} more episodes with a failure or a warning.")
    timed = [r for r in report if r.findings and r.status in ("fail", "warn")]
    if timed:
        lines += ["", "## Findings", ""]
        for r in timed:
            lines += [f"### `{r.check}` ({r.status})", ""]
            lines += [f"- episode {f['episode']} at {_ms(f['t_ns'])}"
                      + (f"..{_ms(f['end_ns'])}" if f.get("end_ns") is not None else "")
                      + f", {_cell(f['where'])}: {_cell(f['what'])}" for f in r.findings[:MAX_FINDINGS_SHOWN]]
            if len(r.findings) > MAX_FINDINGS_SHOWN:
                lines.append(f"- ... {len(r.findings) - MAX_FINDINGS_SHOWN} more")
            lines.append("")
    if report.file_lines:
        lines += ["", "## Files", ""] + [f"- {_cell(line)}" for line in report.file_lines]
    return "\n".join(lines).rstrip() + "\n"
