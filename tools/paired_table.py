#!/usr/bin/env python3
"""Success rates with Wilson intervals for several rollout datasets, and paired comparisons between
them on their common initial states (discordant counts, exact McNemar, Newcombe): the README's tables.

    python tools/paired_table.py A_default=runs/A_def B_default=runs/B_def A_visual=runs/A_vis B_visual=runs/B_vis \
        --pair A_default:B_default --pair A_visual:B_visual [--markdown]

Every figure is read from the rollouts' metadata.yaml (``dataset-evaluate`` writes them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openarm_sim_dataset import evaluate as ev  # noqa: E402
from openarm_sim_dataset.metadata import Metadata  # noqa: E402


def _pct(r: dict) -> str:
    lo, hi = r["wilson95"]
    return f"{r['successes']}/{r['episodes']} = {r['rate']:.1%} [{lo:.1%}, {hi:.1%}]"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="LABEL=DIR")
    p.add_argument("--pair", action="append", default=[], metavar="LABEL_A:LABEL_B")
    a = p.parse_args(argv)
    runs = dict(r.split("=", 1) for r in a.runs)
    print("| run | episodes | success at the end (95% Wilson) | lucky | at any time | failures |")
    print("|---|---|---|---|---|---|")
    for label, path in runs.items():
        m = Metadata.load(path)
        o = ev.summarize(m.episodes, [str(t.get("prompt", "")) for t in m.data.get("tasks") or []])["overall"]
        fails = ", ".join(f"{k} {v}" for k, v in sorted(o["failures"].items())) or "none"
        print(f"| {label} | {o['end']['episodes']} | {_pct(o['end'])} | {o['lucky']} | {_pct(o['any_time'])} | {fails} |")
    if a.pair:
        print()
        print("| pair (A vs B) | pairs | both | only A | only B | neither | difference A - B (95% Newcombe) | exact McNemar p |")
        print("|---|---|---|---|---|---|---|---|")
    for pair in a.pair:
        la, lb = pair.split(":")
        c = ev.compare(ev.load_rollouts(runs[la]), ev.load_rollouts(runs[lb]))
        if not c["pairs"]:
            print(f"| {la} vs {lb} | 0 | no common initial state | | | | | |")
            continue
        lo, hi = c["newcombe95"]
        print(f"| {la} vs {lb} | {c['pairs']} | {c['both']} | {c['only_a']} | {c['only_b']} | {c['neither']} | "
              f"{c['difference']:+.1%} ({lo:+.1%} to {hi:+.1%}) | {c['mcnemar_exact_p']:.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
