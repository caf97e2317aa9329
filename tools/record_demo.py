"""Record a simulated OpenArm into a dataset in real time with the live recorder, as a robot would.

The scripted pick-and-place controller drives the MuJoCo OpenArm (the generator's scene and task);
the loop is paced to the wall clock: every 4 ms (250 Hz) it reads both arms (qpos, qvel, actuator
torque) and the commanded targets and hands them to ``Episode.add_obs``/``add_action`` stamped with
``time.time_ns()``; at ``--camera-hz`` a render thread (its own MjData and GL context, as a camera
driver would be) renders each camera from a snapshot of the state and hands the RGB array to
``Episode.add_frame``, which encodes it off the loop. Nothing in the loop waits for the disk.

    python tools/record_demo.py --out out/demo [--episodes 2] [--cameras head wrist_right]
                                [--size 160x120] [--camera-hz 10] [--camera-format dir|tar]
                                [--state-hz 250] [--speed 1]

``--state-hz`` reads the arms at another rate (a robot logging at 10 Hz); ``--speed K`` runs the
simulation K times faster than the wall clock, so the recorded arm moves K times faster than the
scripted one (its qvel recorded in wall-clock rad/s, as a real arm's encoder would report it).

It prints, per episode, the loop's lateness as the validator counts it (stamp intervals > 1.5
periods of the measured rate: dropped samples) and the recorder's figures (rows, frames, dropped
samples, measured rates), then ``dataset-validate --quick`` of the result. Run it again on the same
folder to append episodes (the ids continue); Ctrl-C discards the episode being recorded.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MUJOCO_GL", "egl")

from openarm_sim_dataset import Dataset, layout  # noqa: E402
from openarm_sim_dataset.gl import check_rendering, import_mujoco  # noqa: E402
from openarm_sim_dataset.record import EpisodeDiscarded, Recorder  # noqa: E402
from openarm_sim_dataset.validate.core import validate  # noqa: E402

STATE_HZ = 250


def metadata(cameras: list[str], size: tuple[int, int]) -> dict:
    w, h = size
    return {
        "location": "simulation (tools/record_demo.py, real time)",
        "operator": "scripted controller",
        "operation_type": "teleop",
        "tasks": [{"prompt": "Put the red cube in the tray.",
                   "description": "Scripted top-down pick-and-place of the red cube, recorded live."}],
        "equipment": {"id": "OpenArm-MuJoCo", "version": "openarm_bimanual v2",
                      "embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM, "version": "2.0"}},
                      "perceptions": {"cameras": {c: {"width": w, "height": h} for c in cameras}}},
    }


class CameraThread(threading.Thread):
    """Renders every camera from the latest state snapshot at ``hz`` and hands the frames over."""

    def __init__(self, model, scene_cfg, hz: float):
        super().__init__(name="demo-cameras", daemon=True)
        self.model, self.cfg, self.period = model, scene_cfg, 1.0 / hz
        self.snapshot: tuple[int, np.ndarray] | None = None  # (stamp ns, qpos)
        self.episode = None
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.render_s: list[float] = []
        self.last_stamp = 0  # a state already drawn is not drawn again (a loop paused, the episode's end)

    def run(self) -> None:
        mujoco = import_mujoco()
        from openarm_sim_dataset.sim.render import SimRenderer

        data = mujoco.MjData(self.model)
        renderer = SimRenderer(self.model, self.cfg)  # GL context made in this thread
        self.ready.set()
        next_t = time.perf_counter()
        while not self.stop.is_set():
            next_t += self.period
            snap, ep = self.snapshot, self.episode
            if snap is not None and ep is not None and not ep.discarded and snap[0] != self.last_stamp:
                self.last_stamp = snap[0]
                stamp, qpos = snap
                data.qpos[:] = qpos
                mujoco.mj_kinematics(self.model, data)
                mujoco.mj_camlight(self.model, data)
                t0 = time.perf_counter()
                for cam in renderer.cameras:
                    rgb = renderer.render(data, cam, depth=False, labels=False)["rgb"]
                    ep.add_frame(cam, stamp, rgb)
                self.render_s.append(time.perf_counter() - t0)
            time.sleep(max(0.0, next_t - time.perf_counter()))
        renderer.close()


def stamp_gaps(stamps_ns, hz: float = STATE_HZ, periods: float = 1.5) -> tuple[int, float]:
    """What ``dataset-validate`` counts as dropped samples: intervals between consecutive stamps longer
    than ``periods`` periods; and the longest interval in ms."""
    d = np.diff(np.asarray(stamps_ns, dtype=np.int64))
    if not len(d):
        return 0, 0.0
    return int(np.sum(d > periods * 1e9 / hz)), float(d.max() / 1e6)


def run_episode_live(model, params, ep, cams: CameraThread, max_time: float, state_hz: float = STATE_HZ,
                     speed: float = 1.0):
    """The scripted episode, paced to the wall clock, recorded through ``ep``; returns (result, the
    stamps of the ticks, ns).

    The lateness that matters is the one in the stamps: ``dataset-validate`` flags an interval > 1.5
    periods as dropped samples. (The demo used to time the loop *before* its sleep, against a
    target moved to each late tick: a wake-up late from ``time.sleep`` on a loaded machine never
    counted, and 0 late ticks went with 216 gaps in the output. The stamps are what it counts now.)"""
    from openarm_sim_dataset.sim.pick_place import run_episode
    from openarm_sim_dataset.sim.scene import arm_index

    arms = {side: arm_index(model, side) for side in layout.ARM_SIDES}
    every = int(round(speed / (state_hz * model.opt.timestep)))  # physics steps per tick
    if every < 1 or abs(every * state_hz * model.opt.timestep - speed) > 1e-9:
        raise SystemExit(f"--state-hz {state_hz:g} x --speed {speed:g}: a tick must be a whole number of "
                         f"{model.opt.timestep * 1e3:g} ms physics steps")
    # the world advances in real time at least at 250 Hz (the camera thread renders its latest state),
    # whatever the rate the arms are logged at
    pace = math.gcd(every, max(1, int(round(speed / (STATE_HZ * model.opt.timestep)))))
    period = pace * model.opt.timestep / speed
    stamps: list[int] = []
    target = [None]  # perf_counter time of the next paced step

    def on_step(data, step: int, ctrl: np.ndarray) -> None:
        if step % pace:
            return
        now = time.perf_counter()
        if target[0] is None:
            target[0] = now
        if now < target[0]:
            time.sleep(target[0] - now)
            now = time.perf_counter()
        # a fixed clock; a loop a whole period behind skips ticks (a gap in the stamps, as on a
        # robot) rather than bursting to catch up, so the simulation then runs slower than the wall
        target[0] = max(target[0] + period, now + period / 2)
        t = time.time_ns()
        if step % every == 0:
            stamps.append(t)
            for side, a in arms.items():
                ep.add_obs(f"arms/{side}", t, qpos=data.qpos[a.qpos], qvel=data.qvel[a.qvel] * speed,
                           qtorque=data.actuator_force[a.actuators])
                ep.add_action(f"arms/{side}", t, qpos=ctrl[a.actuators])
        cams.snapshot = (t, data.qpos.copy())

    cams.episode = ep
    try:
        result = run_episode(model, params, on_step=on_step, max_time=max_time)
    finally:
        cams.episode = None
        cams.snapshot = None
    return result, stamps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--episodes", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0, help="cube placements: the generator's episode_params(seed, i)")
    ap.add_argument("--cameras", nargs="+", default=["head", "wrist_right"])
    ap.add_argument("--size", default="160x120", help="WxH of every camera")
    ap.add_argument("--camera-hz", type=float, default=10.0)
    ap.add_argument("--camera-format", choices=("dir", "tar"), default="dir")
    ap.add_argument("--max-time", type=float, default=12.0, help="simulated seconds per episode at most")
    ap.add_argument("--state-hz", type=float, default=STATE_HZ, help="rate of the arms' obs and action rows")
    ap.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall-clock second")
    args = ap.parse_args(argv)
    w, h = (int(v) for v in args.size.lower().split("x"))
    check_rendering()
    from openarm_sim_dataset.sim.models import load_model
    from openarm_sim_dataset.sim.randomize import episode_params
    from openarm_sim_dataset.sim.scene import SceneConfig

    cfg = SceneConfig(cameras=tuple(args.cameras), width=w, height=h, wrist_left="wrist_left" in args.cameras)
    model = load_model(cfg)
    cams = CameraThread(model, cfg, args.camera_hz)
    cams.start()
    cams.ready.wait()
    with Recorder(args.out, metadata(args.cameras, (w, h)), camera_format=args.camera_format) as rec:
        for _i in range(args.episodes):
            ep = rec.start_episode(0)
            params = episode_params(args.seed, int(ep.id), cfg=cfg)
            print(f"episode {ep.id}: recording in real time ...", flush=True)
            try:
                result, stamps = run_episode_live(model, params, ep, cams, args.max_time, args.state_hz, args.speed)
            except KeyboardInterrupt:
                ep.discard("interrupted (Ctrl-C)")
                print(f"episode {ep.id}: discarded ({ep.reason})")
                break
            try:
                res = ep.save(success=bool(result.success), outcome=result.outcome)
            except EpisodeDiscarded as e:
                print(f"episode {ep.id}: {e}")
                continue
            rs = np.array(cams.render_s or [0.0]) * 1e3
            # the validator's period: the dataset's frequency, i.e. this episode's measured rate (0.1 Hz)
            hz = round(float(res.entry.get("measured_hz", {}).get("obs", {}).get("arms", {}).get("right", args.state_hz)), 1)
            gaps, worst = stamp_gaps(stamps, hz)
            print(f"episode {ep.id}: {'success' if result.success else 'failure'} ({result.outcome}); "
                  f"{sum(res.rows.values())} rows, {sum(res.frames.values())} frames, dropped {res.dropped or 0}; "
                  f"stamp intervals > 1.5 periods of {hz:g} Hz (dataset-validate's dropped samples, per stream): "
                  f"{gaps} of {max(len(stamps) - 1, 0)}, longest {worst:.1f} ms; render {np.median(rs):.1f} ms per {len(cfg.cameras)} cameras; "
                  f"save {res.seconds:.2f} s; measured_hz {res.entry.get('measured_hz')}")
    cams.stop.set()
    cams.join()
    report = validate(Dataset(args.out), quick=True)
    print(f"dataset-validate --quick {args.out}: {report.summary()}")
    for r in report:
        if r.failed:
            print(f"  [FAIL] {r.check}: {r.detail}")
    return 0 if report.valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
