"""Write (and optionally run) the simulated data-collection dataflow: two simulated followers on the
MuJoCo OpenArm, a rendered camera, a scripted leader/UI, and recording nodes side by side.

    python tools/dora_sim_dataflow.py --out out/flow [--reference] [--seconds 1] [--episodes 2] [--arms] [--run]

``--arms``: one simulation node for both arms (``sim_nodes arms``) instead of the two followers; it
owns the physics, so the recording node stores each episode's sidecar (its ``sim_file`` input) and
records the targets the servos tracked as the actions.

Writes ``<out>/dataflow.yml``; with ``--run`` runs it (``dora run``) and prints, per recorder, the
episodes it kept, the samples stored and the inputs dora dropped at the default queue sizes
("event channel full; dropping ... input" lines of the dataflow's log).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: ``--load``: five cameras (output name: the model's camera it renders)
LOAD_CAMERAS = {"head": "head", "wrist_right": "wrist_right", "wrist_left": "wrist_left", "chest": "head",
                "side": "head"}


def dataflow(out: Path, python: str = sys.executable, reference: bool = False, seconds: float = 1.0,
             episodes: int = 2, camera_hz: int = 10, size: str = "64x48", command_queue: int = 100,
             arm_hz: int = 250, load: bool = False, arms: bool = False) -> str:
    """The dataflow YAML. Every input keeps dora's default queue size except ``command`` (a command
    dropped by a full channel would leave both recorders out of step with the UI: not what is compared).
    ``load``: instead of the live-rendered head camera, the issue's recording load: five 640x480 JPEG
    cameras at 30 Hz, each replaying frames rendered at its start (what a hardware JPEG camera sends)."""
    env = {"PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl"}

    def node(id_, args, inputs, outputs=(), extra_env=None, path=python):
        return {"id": id_, "path": path, **({"args": args} if args else {}), "env": {**env, **(extra_env or {})},
                "inputs": inputs, **({"outputs": list(outputs)} if outputs else {})}

    sim = "-m openarm_sim_dataset.dora.sim_nodes"
    command = {"source": "leader/command", "queue_size": command_queue}
    arm_inputs = ({f"arm_{side}_{kind}": f"arms/{out_}_{side}" for side in ("right", "left")
                   for kind, out_ in (("observation", "state"), ("action", "action"))} if arms else
                  {"arm_right_observation": "right/state", "arm_left_observation": "left/state",
                   "arm_right_action": "leader/action_right", "arm_left_action": "leader/action_left"})
    rec_inputs = {"command": command, **arm_inputs,
                  **{f"camera_{c}": f"{c}/image" for c in (LOAD_CAMERAS if load else ("head",))}}
    asks = {} if load else {"request_position": "head/request_position"}
    if arms:
        simulated = [node("arms", f"{sim} arms --hz {arm_hz}",
                          {"tick": f"dora/timer/millis/{1000 // arm_hz}", "command": command, **asks,
                           **{f"move_position_{side}": f"leader/move_position_{side}" for side in ("right", "left")}},
                          [f"{o}_{side}" for o in ("state", "action", "position") for side in ("right", "left")]
                          + ["status", "sim_file"])]
    else:
        simulated = [node(side, f"{sim} follower --side {side}",
                          {"request_state": f"dora/timer/millis/{1000 // arm_hz}",
                           "move_position": f"leader/move_position_{side}", **asks},
                          ["state", "position", "status"]) for side in ("right", "left")]
    nodes = [
        node("leader", f"{sim} leader --seconds {seconds} --episodes {episodes}",
             {"tick": f"dora/timer/millis/{1000 // arm_hz}"},
             ["move_position_right", "move_position_left", "action_right", "action_left", "command"]),
        *simulated,
        *((node(c, f"{sim} camera --name {c} --view {LOAD_CAMERAS[c]} --size 640x480 --replay-frames 8",
                {"tick": "dora/timer/millis/33", "leader": {"source": "leader/command", "queue_size": 100}}, ["image"])
          for c in LOAD_CAMERAS) if load else
          [node("head", f"{sim} camera --name head --size {size}",
                {"tick": f"dora/timer/millis/{1000 // camera_hz}",
                 **{f"position_{side}": f"arms/position_{side}" if arms else f"{side}/position"
                    for side in ("right", "left")}}, ["image", "request_position"])]),
        node("recorder", "-m openarm_sim_dataset.dora.recorder_node",
             {**rec_inputs, **({"sim_file": "arms/sim_file"} if arms else {})},
             extra_env={"DIRECTORY": str(out / "data"), "NAME": "ours"}),
    ]
    if reference:
        ref = str(Path(python).with_name("dora-openarm-dataset-recorder"))
        nodes.append(node("reference", None, rec_inputs, extra_env={"DIRECTORY": str(out / "data"), "NAME": "reference"},
                          path=ref))
    return json.dumps({"nodes": nodes}, indent=1)  # JSON is YAML


def drops(log: str) -> dict[str, int]:
    """Inputs dora dropped per node, from the dataflow's log (its counters are cumulative per input)."""
    out: dict[tuple[str, str], int] = {}
    for m in re.finditer(r"^[0-9:]+ stdout (\w+): (\{.*\"drops\".*\})\s*$", log, re.M):
        try:
            fields = json.loads(m.group(2))["fields"]
        except (ValueError, KeyError):
            continue
        key = (m.group(1), fields.get("input", "?"))
        out[key] = max(out.get(key, 0), int(fields.get("drops", 0)))
    per: dict[str, int] = {}
    for (nid, _inp), n in out.items():
        per[nid] = per.get(nid, 0) + n
    return per


def run(out: Path, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    (out / "dataflow.yml").write_text(dataflow(out, **kw))
    dora = str(Path(sys.executable).with_name("dora"))
    return subprocess.run([dora, "run", "dataflow.yml", "--stop-after", f"{int(timeout)}s"], cwd=out,
                          capture_output=True, text=True, timeout=timeout + 60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reference", action="store_true", help="the PyPI recorder side by side")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--arm-hz", type=int, default=250, help="the followers' and leader's timer rate")
    ap.add_argument("--load", action="store_true", help="five 640x480 JPEG cameras at 30 Hz (replayed frames)")
    ap.add_argument("--arms", action="store_true",
                    help="one simulation node for both arms, whose episodes keep their sidecar")
    ap.add_argument("--run", action="store_true")
    args = ap.parse_args()
    if not args.run:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "dataflow.yml").write_text(dataflow(args.out, reference=args.reference, seconds=args.seconds,
                                                        episodes=args.episodes, arm_hz=args.arm_hz, load=args.load,
                                                        arms=args.arms))
        print(args.out / "dataflow.yml")
        return 0
    p = run(args.out, reference=args.reference, seconds=args.seconds, episodes=args.episodes, arm_hz=args.arm_hz,
            load=args.load, arms=args.arms)
    log = p.stdout + p.stderr
    (args.out / "run.log").write_text(log)
    print(f"dora run: exit {p.returncode}; inputs dropped by dora per node: {drops(log)}")
    from openarm_sim_dataset import Dataset

    for name in ("ours", "reference"):
        root = args.out / "data" / name
        if (root / "metadata.yaml").exists():
            import pyarrow.parquet as pq

            ds = Dataset(root)
            rows = {e: pq.ParquetFile(root / "episodes" / e / "obs/arms/right/state.parquet").metadata.num_rows
                    for e in ds.episode_ids}
            frames = {e: {c.name: len(list(c.glob("*.jpeg"))) for c in sorted((root / "episodes" / e / "cameras").iterdir())
                          if c.is_dir()} for e in ds.episode_ids}
            print(f"  {name}: episodes {ds.episode_ids}, obs rows (right arm) {rows}, frames per camera {frames}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
