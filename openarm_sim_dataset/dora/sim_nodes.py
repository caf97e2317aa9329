"""Simulated dora nodes on this package's MuJoCo OpenArm, for running a data-collection dataflow on a CPU.

``follower`` (``python -m openarm_sim_dataset.dora.sim_nodes follower --side right``): the ids and
Arrow types of ``dora-openarm`` 1.3.0's follower. Inputs ``request_state`` / ``request_position``
(one reply per request), ``move_position`` (``[{"qpos": [8 x float32]}]`` or a flat float32 array:
the 8 position targets, joint1..7 then gripper, rad), ``command`` (``start``/``stop``). Outputs
``state`` (a length-1 struct: qpos, qvel, qtorque list<float32> of 8, tmos/trotor list<int32>,
motor_status list<string>, bus counters), ``position`` (``[{"qpos": ...}]``) and ``status``
(``STARTED``/``STOPPED``), with metadata ``observation_timestamp`` (Unix ns, taken when the state
is read) and ``start_epoch``. The arm is the generator's model (position servos with gravity
compensation, the scene's timestep): each request advances the physics to the wall clock, so the
simulation runs in real time (capped at 50 ms per request when the machine falls behind).

``arms`` (``... arms --hz 250``): **one** simulation of both arms that this node owns, so that it
records each episode's sidecar. It takes the per-arm ids with a side suffix: inputs ``tick`` (the
state timer: each tick samples both arms, then integrates one state period; the simulation is locked
to the wall clock), ``request_position``, ``move_position_{right,left}``, ``command``
(``start``/``success``/``fail``/``cancel``/``quit`` with ``episode_number``, the UI's); outputs
``state_{right,left}``, ``action_{right,left}`` (the targets the servos track during that period,
float32 x 8), ``position_{right,left}``, ``status``, all stamped ``observation_timestamp`` = the
simulated time of the sample as Unix ns (the episode's start + step x timestep, exactly), and
``sim_file``: at ``success``/``fail`` the episode's ``sim/sidecar.npz`` and ``sim/frames.npz`` (UInt8,
metadata ``episode_number``, ``path``, ``files``, ``simulation``: the JSON of the dataset's
``simulation:`` block, ``source: dataflow``). Wire ``sim_file`` to the recording node's ``sim_file``
and the states and actions to its ``arm_*`` inputs: the episodes then replay bit for bit and the
validator checks the recorded streams against the physics (``sim_replay``, ``sim_streams_agree``).

``camera`` (``... camera --name head``): renders the scene's camera ``name`` on every ``tick`` as
JPEG (UInt8, metadata ``encoding``/``width``/``height``), the arms posed as the followers report
them. Wired as the follower's API intends, it asks for the pose at its own rate: output
``request_position`` (to the followers' ``request_position``), inputs ``position_{right,left}``
(their ``position`` replies); the frame is rendered once every side has answered that tick's
request (or at the next tick, with the newest pose, if an answer was lost). It also takes the
followers' ``state`` as ``state_{right,left}`` (then it renders at the tick with the newest state);
that costs the camera one event per state (500/s for two arms at 250 Hz) where the request costs
one per frame and side, and with dora 1.1.0's ingress channel (sized from the sum of the node's
input queue sizes, shared by every input) a busy camera then drops its own ticks.
With ``--replay-frames K`` it renders K frames of the arms in motion before ``Node()`` and sends
them in turn at every tick (``--view``: the model's camera that renders them, when ``--name`` is
not one): the load a hardware JPEG camera puts on a recorder, at sizes and rates a CPU could not
render live beside the followers.

``leader`` (``... leader --seconds 1 --episodes 2``): a scripted stand-in for a leader and the web
UI: on every ``tick`` it sends ``move_position_{right,left}`` (a slow sine about a resting pose) and
``action_{right,left}`` (the same targets, what a recorder records as actions), and ``command``
(``start`` with ``episode_number``/``task_index``, ``success`` after ``--seconds``, ..., ``quit``).

Every node loads its model (and the camera its renderer, with one warm-up frame) **before** it calls
``dora.Node()``: dora starts the dataflow's timers once every node has, so the nodes' start-up (a
second or more of CPU on a 2-core machine) is over when the first tick comes, instead of starving
the nodes that already run.
"""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    """The console script's options: one sub-command per simulated node (environment variables as defaults)."""
    ap = argparse.ArgumentParser(prog="openarm-sim-dataset-dora-sim", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="node", required=True)
    f = sub.add_parser("follower")
    f.add_argument("--side", choices=("right", "left"), default=os.getenv("SIDE", "right"))
    a = sub.add_parser("arms", help="one simulation of both arms that records each episode's sidecar")
    a.add_argument("--hz", type=float, default=float(os.getenv("STATE_HZ", "0")) or None,
                   help="the state rate (default: its tick timer's, read from the dataflow; else 250)")
    a.add_argument("--frame-hz", type=float, default=10.0, help="rate of the sidecar's full states")
    c = sub.add_parser("camera")
    c.add_argument("--name", default=os.getenv("CAMERA", "head"))
    c.add_argument("--size", default=os.getenv("SIZE", "160x120"))
    c.add_argument("--quality", type=int, default=80)
    c.add_argument("--view", default=None, help="the model's camera to render (default: --name)")
    c.add_argument("--replay-frames", type=int, default=0,
                   help="render this many frames at start and send them in turn (a JPEG camera's load)")
    ld = sub.add_parser("leader")
    ld.add_argument("--seconds", type=float, default=float(os.getenv("EPISODE_SECONDS", "1.0")))
    ld.add_argument("--episodes", type=int, default=int(os.getenv("EPISODES", "2")))
    ld.add_argument("--cancel-first", action="store_true")
    ld.add_argument("--warmup", type=float, default=float(os.getenv("WARMUP_SECONDS", "1.0")),
                    help="seconds between every node being live and the first command")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        from dora import Node
    except ImportError:
        print("the simulated dora nodes need dora-rs: pip install 'openarm-sim-dataset[dora]'", file=sys.stderr)
        return 2
    # the heavy set-up first: dora starts the timers once every node has called Node()
    if args.node in ("follower", "camera"):
        from . import sim_devices  # start-up: mujoco (0.25 s), pyarrow and PIL only for a node that simulates

        if args.node == "follower":
            arm = sim_devices.SimArm(args.side)
            sim_devices.follower(Node(), args.side, arm)
        else:
            w, h = (int(v) for v in args.size.lower().split("x"))
            cam = sim_devices.SimCamera(args.name, w, h, args.quality, view=args.view, replay=args.replay_frames)
            try:
                sim_devices.camera(Node(), cam)
            finally:
                cam.close()
    elif args.node == "arms":
        from . import sim_arms  # start-up: mujoco (0.25 s), pyarrow and PIL only for a node that simulates

        sim = sim_arms.SimArms(args.hz or sim_arms.tick_hz() or 250.0, args.frame_hz)
        sim.simulation_block()  # its model hash and asset hashes computed before Node(), not at an episode's end
        sim_arms.arms(Node(), sim)
    else:
        from . import sim_leader  # start-up: pyarrow and PIL only once a leader runs, not for --help

        sim_leader.leader(Node(), args.seconds, args.episodes, cancel_first=args.cancel_first, warmup=args.warmup)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
