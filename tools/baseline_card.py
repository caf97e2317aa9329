#!/usr/bin/env python3
"""Ship a trained checkpoint as a baseline: copy it to baselines/NAME.pt and write its card NAME.md.

    python tools/baseline_card.py --name pick_place_cameras --checkpoint runs/A.pt \
        --physics runs/phys --generate "dataset-generate --out runs/phys ..." --generate "dataset-render ..." \
        --train "dataset-train ..." --evaluate "dataset-evaluate --policy baselines/pick_place_cameras.pt ..." \
        --rollouts runs/A_eval [--compare runs/scripted_eval]

Every figure on the card is read from the files (the checkpoint's config and cost, the physics dataset's
metadata, the rollout datasets' entries), never typed: see openarm_sim_dataset.bc.baseline for the format.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from openarm_sim_dataset import evaluate as ev  # noqa: E402
from openarm_sim_dataset.bc.baseline import BASELINES_DIR, content_sha256, write_card  # noqa: E402
from openarm_sim_dataset.bc.checkpoint import load  # noqa: E402
from openarm_sim_dataset.metadata import Metadata  # noqa: E402


def _pct(r: dict) -> str:
    lo, hi = r["wilson95"]
    return f"{r['successes']}/{r['episodes']} = {r['rate']:.1%} (95% Wilson {lo:.1%}-{hi:.1%})"


def training_block(part) -> dict:
    cfg, cost, curve = part
    return {"episodes": cfg["episodes"], "val_episodes": cfg["val_episodes"], "items": cfg["items"],
            "steps": cfg["steps"], "batch": cfg["batch"], "seed": cfg["seed"], "threads": cost["threads"],
            "cpu_minutes": round(cost["cpu_s"] / 60, 1), "wall_minutes": round(cost["wall_s"] / 60, 1),
            "parameters": cost["parameters"],
            "final_val_loss": round(float(curve["val"][-1]), 5),
            "final_train_loss": round(float(curve["train"][-1]), 5)}


def training_line(part) -> str:
    cfg, cost, curve = part
    return (f"{cfg['episodes']} episodes ({cfg['val_episodes']} held out), {cfg['items']} items, "
            f"{cfg['steps']} steps x {cfg['batch']}, {cost['parameters']:,} parameters, "
            f"{cost['cpu_s'] / 60:.1f} CPU min ({cost['wall_s'] / 60:.1f} min wall, {cost['threads']} thread(s)); "
            f"held-out loss {curve['val'][-1]:.4f}.")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--physics", required=True, action="append",
                   help="the physics-only dataset the training set was drawn from (several, in the order of "
                        "their dataset-generate commands, for a training set merged from several)")
    p.add_argument("--generate", action="append", required=True, help="a data command, in order (first: the physics one)")
    p.add_argument("--train", action="append", required=True,
                   help="a training command, in order (several for an ensemble: each dataset-train, then dataset-ensemble)")
    p.add_argument("--evaluate", required=True)
    p.add_argument("--rollouts", required=True, help="the evaluation's rollout dataset")
    p.add_argument("--compare", help="the scripted expert's rollouts on the same initial states")
    p.add_argument("--note", default="", help="a paragraph for the card's body")
    p.add_argument("--prefix", type=int, metavar="N",
                   help="also state the content SHA-256 of the first N episodes (what the slow test regenerates "
                        "for a recipe too long for CI)")
    a = p.parse_args(argv)
    gen_cmds = [g for g in a.generate if shlex.split(g)[0] == "dataset-generate"]
    if len(gen_cmds) != len(a.physics):
        p.error(f"{len(a.physics)} --physics for {len(gen_cmds)} dataset-generate commands")
    physics = [{"command": g, "content_sha256": content_sha256(d),
                **({"prefix": {"episodes": a.prefix, "content_sha256": content_sha256(d, a.prefix)}} if a.prefix else {})}
               for g, d in zip(gen_cmds, a.physics)]
    ckpt, sha = load(a.checkpoint)
    cfg, cost = ckpt["config"], ckpt["cost"]
    added_tasks = None
    if "tasks" not in cfg and cfg.get("arch") != "ensemble":
        # trained before dataset-train recorded its demonstrations' tasks (stop 32): record them as it now
        # does, from the training dataset's entries (the weights and everything else untouched)
        from openarm_sim_dataset.bc.checkpoint import to_bytes
        from openarm_sim_dataset.bc.trainer import demonstration_tasks

        data = Metadata.load(cfg["dataset"])
        if hashlib.sha256((Path(cfg["dataset"]) / "metadata.yaml").read_bytes()).hexdigest() != cfg["dataset_sha256"]:
            p.error(f"{cfg['dataset']}: not the dataset the checkpoint was trained on (metadata SHA-256 differs)")
        eps = [str(e["id"]) for e in data.episodes if e.get("success")][: int(cfg["episodes_used"])]
        tasks = demonstration_tasks(data, eps)
        if tasks:
            cfg["tasks"] = added_tasks = tasks
            raw = to_bytes(ckpt)
            a.checkpoint = str(Path(a.checkpoint).with_name(Path(a.checkpoint).stem + ".tasks.pt"))
            Path(a.checkpoint).write_bytes(raw)
            sha = hashlib.sha256(raw).hexdigest()
    ensemble = cfg.get("arch") == "ensemble"
    # an ensemble's training figures are its members' (each trained alone, then joined)
    parts = ([(m["config"], c, cv) for m, c, cv in zip(ckpt["members"], ckpt["member_costs"], ckpt["curve"])]
             if ensemble else [(cfg, cost, ckpt["curve"])])
    dest = REPO / BASELINES_DIR
    dest.mkdir(exist_ok=True)
    shutil.copyfile(a.checkpoint, dest / f"{a.name}.pt")
    assert hashlib.sha256((dest / f"{a.name}.pt").read_bytes()).hexdigest() == sha
    meta = Metadata.load(a.rollouts)
    stats = ev.summarize(meta.episodes, [str(t.get("prompt", "")) for t in meta.data.get("tasks") or []])
    ev_cmd = shlex.split(a.evaluate)
    seed = int(ev_cmd[ev_cmd.index("--seed") + 1])
    o = stats["overall"]
    evaluation = {"seed": seed, "episodes": o["end"]["episodes"], "successes": o["end"]["successes"],
                  "rate": round(o["end"]["rate"], 4), "wilson95": [round(x, 4) for x in o["end"]["wilson95"]],
                  "lucky": o["lucky"], "success_any_time": o["any_time"]["successes"], "failures": o["failures"]}
    lines = [f"- success at the end: **{_pct(o['end'])}**; lucky {o['lucky']}; at any time {_pct(o['any_time'])}; "
             f"failures: {', '.join(f'{k} {v}' for k, v in sorted(o['failures'].items())) or 'none'}"]
    if a.compare:
        c = ev.compare(ev.load_rollouts(a.rollouts), ev.load_rollouts(a.compare))
        sm = Metadata.load(a.compare)
        so = ev.summarize(sm.episodes, [str(t.get("prompt", "")) for t in sm.data.get("tasks") or []])["overall"]
        # the scripted figure on the states the policy was evaluated on: a longer scripted run pairs only
        # its first episodes, and its whole-run rate is not the one the paired table compares
        sp = ev._rate(c["both"] + c["only_b"], c["pairs"])
        whole_run = ({"successes": so["end"]["successes"], "episodes": so["end"]["episodes"]}
                     if so["end"]["episodes"] != c["pairs"] else None)
        evaluation["scripted"] = {"successes": sp["successes"], "episodes": sp["episodes"],
                                  **({"whole_run": whole_run} if whole_run else {})}
        evaluation["paired"] = {"only_policy": c["only_a"], "only_scripted": c["only_b"], "both": c["both"],
                                "neither": c["neither"], "mcnemar_exact_p": float(f"{c['mcnemar_exact_p']:.4g}"),
                                "difference": round(c["difference"], 4),
                                "newcombe95": [round(x, 4) for x in c["newcombe95"]]}
        lo, hi = c["newcombe95"]
        whole = f" (its whole run: {whole_run['successes']}/{whole_run['episodes']})" if whole_run else ""
        lines.append(f"- `scripted` on the same initial states: {_pct(sp)}{whole}; paired: only the policy "
                     f"{c['only_a']}, only scripted {c['only_b']} (both {c['both']}, neither {c['neither']}), "
                     f"exact McNemar p = {c['mcnemar_exact_p']:.3g}, difference {c['difference']:+.1%} "
                     f"(95% Newcombe {lo:+.1%} to {hi:+.1%})")
    front = {
        "checkpoint": f"{a.name}.pt", "checkpoint_sha256": sha,
        "inputs": {"kind": cfg["inputs"], "cameras": list(cfg["cameras"]),
                   "size": (f"{cfg['image_shape'][2]}x{cfg['image_shape'][1]}" if cfg["cameras"] else None),
                   "camera_hz": cfg.get("camera_hz"), "control_hz": cfg["hz"]},
        "generate": list(a.generate), "train": a.train[0] if len(a.train) == 1 else list(a.train),
        "dataset_metadata_sha256": cfg["dataset_sha256"],
        "physics_dataset": physics[0] if len(physics) == 1 else physics,
        "training": training_block(parts[0]) if not ensemble else {
            "members": [training_block(x) for x in parts],
            "cpu_minutes": round(cost["cpu_s"] / 60, 1), "parameters": cost["parameters"]},
        "evaluate": a.evaluate, "evaluation": evaluation,
    }
    body = "\n".join([
        f"# Baseline `{a.name}`",
        "",
        f"A `dataset-train --inputs {cfg['inputs']}` policy "
        + ("reading only what a robot measures: " + " + ".join(cfg["cameras"]) + f" images at "
           f"{front['inputs']['size']} and {cfg.get('camera_hz')} Hz, both arms' joint positions and the time since the start."
           if cfg["cameras"] else "reading privileged simulator state (object poses from `info`)."),
        "",
        "Reproduce (from a clone, extras `[torch,env]`):",
        "",
        "```bash",
        *a.generate, *a.train, a.evaluate,
        "```",
        "",
        *[("Training" + (f" (member {i + 1}, seed {c[0]['seed']})" if ensemble else "") + f": {training_line(c)}")
          for i, c in enumerate(parts)],
        *([f"The ensemble plays the mean of its {len(parts)} members' action chunks (`dataset-ensemble`); "
           f"{cost['cpu_s'] / 60:.1f} CPU min of training in all."] if ensemble else []),
        "",
        f"Evaluation (initial states of seed {seed}, never trained or tuned on):",
        "",
        *lines,
        "",
        a.note,
        *([f"\nThe checkpoint's `config.tasks` ({', '.join(added_tasks)}) was added at shipping, as `dataset-train` "
           "records it since it was trained (from the training dataset's entries; weights untouched), so that "
           "`dataset-evaluate` runs its task without `--tasks`."] if added_tasks else []),
    ])
    write_card(dest / f"{a.name}.md", front, body)
    print(dest / f"{a.name}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
