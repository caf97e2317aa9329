"""The ``integrity`` check: every episode's files against its manifest (SHA-256 and size).

A dataset written by another tool has no manifests: the check is skipped, saying so. When some
episodes have one, an episode without one fails (its manifest was lost or the episode was added
by another tool). A file added to, missing from or changed in an episode fails, naming the file.
"""

from __future__ import annotations

import time

from openarm_sim_dataset.core import layout, manifest

from .check import Context, Outcome


def check_integrity(ctx: Context) -> Outcome:
    """Every file of every episode is the one its manifest (`manifest.sha256`) lists, by SHA-256 and by
    size: no file changed, missing or added since the episode was committed.

    A `skip` when no episode has a manifest (a dataset written by another tool: nothing to verify
    against); that skip is one of a check that applies, a failure under `--strict`. When some episodes
    have one, an episode without one fails, as does a manifest that cannot be read. A missing episode
    folder is `episode_folders`' concern. Runs under `--quick` too."""
    root = ctx.ds.root
    have, without, problems, bad = [], [], [], set()
    for ep in ctx.episodes:
        ep_dir = layout.episode_dir(root, ep)
        if not ep_dir.is_dir():
            continue  # episode_folders reports it
        try:
            entries = manifest.read(ep_dir)
        except manifest.ManifestError as e:
            bad.add(ep)
            problems.append(str(e))
            continue
        if entries is None:
            without.append(ep)
        else:
            have.append((ep, ep_dir, entries))
    if not have and not problems:
        return Outcome(True, f"no {layout.MANIFEST_FILE} in any episode (written by another tool): nothing to verify "
                             "against", skipped=True, judged={})
    t0 = time.perf_counter()
    results = manifest.verify_many(have)
    seconds = time.perf_counter() - t0
    for ep, v in results.items():
        if not v.ok:
            bad.add(ep)
            problems.append(f"{root / layout.EPISODES_DIR / ep / v.first()}")
    for ep in without:
        bad.add(ep)
        problems.append(f"{layout.episode_dir(root, ep) / layout.MANIFEST_FILE}: missing (other episodes have one)")
    files = sum(v.files for v in results.values())
    mb = sum(v.bytes for v in results.values()) / 1e6
    detail = (f"{files} files, {mb:.1f} MB of {len(results)} episodes equal their manifest "
              f"({mb / seconds if seconds > 0 else 0:.0f} MB/s)")
    if problems:
        detail += f"; {len(problems)} episode(s) differ, first: {problems[0]}"
    return Outcome(not bad, detail, sorted(bad), judged={"episodes": len(results) + len(without), "files": files})
