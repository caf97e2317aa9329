"""One frame per task, from real generated episodes: a contact sheet PNG.

    PYTHONPATH=. python tools/task_contact_sheet.py [-o docs/images/tasks.png] [--seed 10] [--size 320x240]
                                                  [--camera head] [--keep DIR] [--randomize MODE]

For every registered task, the first episode index of ``--seed`` whose task stream
(``default_rng([seed, i, TASK_STREAM])`` with ``--tasks all``) picks that task is generated with
``dataset-generate``'s library (so the episodes are those of a ``--tasks all`` run of that seed,
file for file), then ``dataset-show --contact-sheet task`` draws the middle frame of each
(:func:`openarm_sim_dataset.show.contact_sheet`, needs the ``[viz]`` extra). ``--randomize`` is the
generation's scene randomisation mode (each panel then shows its episode's own variation).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def first_index_per_task(seed: int, names: tuple[str, ...], limit: int = 10000) -> dict[str, int]:
    """task name -> the first episode index whose task stream picks it."""
    from openarm_sim_dataset.sim.tasks import choose_task

    found: dict[str, int] = {}
    for i in range(limit):
        found.setdefault(names[choose_task(seed, i, names)[0]], i)
        if len(found) == len(names):
            break
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", default="docs/images/tasks.png")
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--camera", default="head", choices=("head", "wrist_right", "wrist_left"))
    ap.add_argument("--keep", help="generate into this folder (kept) instead of a temporary one")
    ap.add_argument("--randomize", default="none", choices=("none", "visual", "physics", "all"),
                    help="scene randomisation mode")
    a = ap.parse_args()

    from openarm_sim_dataset import Dataset
    from openarm_sim_dataset.show import contact_sheet
    from openarm_sim_dataset.sim.generate import GenerateConfig, generate
    from openarm_sim_dataset.sim.recorder import RecordConfig
    from openarm_sim_dataset.sim.scene import SceneConfig
    from openarm_sim_dataset.sim.tasks import task_names

    names = tuple(task_names())
    picks = first_index_per_task(a.seed, names)
    w, h = (int(v) for v in a.size.split("x"))
    kw = {"randomize": a.randomize}
    cams = (a.camera,)
    cfg = GenerateConfig(seed=a.seed, scene=SceneConfig(cameras=cams, width=w, height=h,
                                                        wrist_left=a.camera == "wrist_left"),
                         record=RecordConfig(camera_hz=2.0), tasks=names, **kw)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(a.keep) if a.keep else Path(tmp) / "tasks"
        t0 = time.perf_counter()
        summary = generate(out, sorted(picks.values()), cfg)
        lay = contact_sheet(Dataset(out), a.output, per="task", camera=a.camera)
        print(f"{len(summary.episodes)} episodes ({', '.join(f'{n}: {i}' for n, i in picks.items())}) in "
              f"{time.perf_counter() - t0:.1f} s; outcomes "
              f"{[e['outcome'] for e in summary.episodes]}; {len(lay.panels)} panels written to {lay.path}")


if __name__ == "__main__":
    main()
