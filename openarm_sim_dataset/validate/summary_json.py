"""The ``episode_summary`` check: each episode's ``summary.json`` equals the one derived from its files.

``dataset-info`` trusts the summary (:mod:`openarm_sim_dataset.episode_summary`) instead of reading the
episode's streams, cameras and file sizes; this check derives the summary again from the files, with the
function the writers use, and fails an episode whose stored summary disagrees (a file changed and
re-hashed without its summary, a summary edited or copied from another episode) or cannot be read.
An episode without a summary (an older writer, another tool) is counted, not failed: ``dataset-info``
reads its files. A summary of another version of the document is counted too, and not compared.
"""

from __future__ import annotations

import json
import os

from openarm_sim_dataset.core import episode_summary, layout
from openarm_sim_dataset.core.errors import DatasetError

from .check import Context, Outcome


def check_episode_summary(ctx: Context) -> Outcome:
    """Each episode's `summary.json`, which `dataset-info` reports from instead of reading the episode's
    files, equals the summary derived again from those files with the function the writers use.

    An episode without a summary (written by an older version or another tool) is counted, not failed:
    `dataset-info` reads its files instead. A summary of another version of the document is counted and
    not compared. A summary that cannot be read, or an episode whose files cannot be summarised, fails."""
    root = ctx.ds.root
    compared, without, other, bad, problems = 0, 0, 0, [], []
    for ep in ctx.episodes:
        ep_dir = layout.episode_dir(root, ep)
        path = episode_summary.path_of(ep_dir)
        if not ep_dir.is_dir():
            continue  # episode_folders reports it
        if not os.path.lexists(path):
            without += 1
            continue
        got = episode_summary.read(ep_dir)
        if got is None:
            if _other_version(path):
                other += 1
                continue
            bad.append(ep)
            problems.append(f"{path}: not a summary document (unreadable, not JSON, or keys missing)")
            continue
        try:
            derived = episode_summary.compute(ep_dir)
        except DatasetError as e:
            bad.append(ep)
            problems.append(f"{path}: the episode's files cannot be summarised ({e})")
            continue
        diffs = episode_summary.differences(got[0], derived)
        compared += not diffs
        if diffs:
            bad.append(ep)
            more = f" (+{len(diffs) - 1} more)" if len(diffs) > 1 else ""
            problems.append(f"{path}: {diffs[0]}{more}")
    detail = f"{compared} summaries equal their episode's files"
    if without:
        detail += f"; {without} episode(s) without {layout.SUMMARY_FILE} (an older writer or another tool: " \
                  "dataset-info reads their files)"
    if other:
        detail += f"; {other} of another summary version, not compared"
    if problems:
        detail += f"; {len(problems)} differ, first: {problems[0]}"
    if compared + len(bad) == 0:
        return Outcome(True, f"no {layout.SUMMARY_FILE} to compare: {detail}", skipped=True, applicable=False, judged={})
    return Outcome(not bad, detail, bad, judged={"episodes": compared + len(bad)})


def _other_version(path) -> bool:
    try:
        doc = json.loads(path.read_bytes()[:episode_summary.MAX_BYTES + 1])
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("summary"), int) and doc["summary"] != episode_summary.SUMMARY_VERSION
