"""Benchmark the render floor: cost per camera frame (RGB + depth + labels), against the old path.

    python tools/bench_render.py [--size 160x120] [--frames 40] [--repeats 5]

The states are those of one scripted episode (seed 10, episode 0; every 50th physics step, i.e. the
10 Hz camera frames of a generation), rendered for each camera of the default scene (head,
wrist_right) in the same process, on one renderer, paths interleaved frame by frame so that machine
load hits all alike:

* three passes (the path before labels were read from the depth pass): RGB pass, depth pass,
  segmentation pass (``mujoco.Renderer`` modes), labels from the segmentation ids;
* two passes via ``mujoco.Renderer``'s modes (the path before this one): RGB mode, depth mode (drawn
  with the segmentation flags), then the colour buffer of that pass read again for the labels;
* current (``SimRenderer.render``): the RGB pass, then one pass with the segmentation flags whose depth
  and colour buffers come out of one ``mjr_readPixels`` call, without the modes' per-call overhead;
* current without frustum culling (``SimRenderer(cull=False)``, the floor before issue 20 item 4);
* parts of the current path: the RGB pass alone, the depth+labels pass alone.

Then (``--breakdown``, on by default) where one camera frame's CPU goes, stage by stage, culled and not:
scene update (``mjv_updateScene``), the culling itself, each pass's draw (``mjr_render``: with llvmpipe
the vertex work happens here), each ``mjr_readPixels`` (which waits for the rasterizer threads), the
depth conversion, the label lookup and the JPEG encoding (quality 90) that recording adds.

Every path's images are compared for bit identity with the three-pass path's. Reports the median
wall and CPU ms per camera frame of each (median over repeats of the mean over frames; CPU time counts
every thread of this process, llvmpipe's included, and is the figure to trust on a loaded machine)
and the ratios of the earlier paths to the current one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from openarm_sim_dataset.sim.models import load_model  # noqa: E402
from openarm_sim_dataset.sim.pick_place import run_episode  # noqa: E402
from openarm_sim_dataset.sim.randomize import episode_params  # noqa: E402
from openarm_sim_dataset.sim.render import SimRenderer  # noqa: E402
from openarm_sim_dataset.sim.scene import SceneConfig  # noqa: E402


def three_passes(r: SimRenderer, data: mujoco.MjData, camera: str) -> dict[str, np.ndarray]:
    """RGB, depth and segmentation each from a pass of its own."""
    rr = r.renderer
    rr.update_scene(data, camera=r._cam_ids[camera], scene_option=r.option)
    out = {"rgb": rr.render().copy()}
    rr.enable_depth_rendering()
    out["depth"] = rr.render().astype(np.float32, copy=True)
    rr.disable_depth_rendering()
    rr.enable_segmentation_rendering()
    seg = rr.render()
    rr.disable_segmentation_rendering()
    ids = np.where(seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), seg[..., 0], -1)
    out["labels"] = r._lut[ids]
    return out


def two_passes_via_modes(r: SimRenderer, data: mujoco.MjData, camera: str) -> dict[str, np.ndarray]:
    """The path this replaced: mujoco.Renderer's RGB mode, then its depth mode (which draws with the
    segmentation flags), then a second mjr_readPixels of that pass's colour buffer for the labels."""
    rr = r.renderer
    rr.update_scene(data, camera=r._cam_ids[camera], scene_option=r.option)
    out = {"rgb": rr.render().copy()}
    rr.enable_depth_rendering()
    out["depth"] = rr.render().astype(np.float32, copy=True)
    rr.disable_depth_rendering()
    rr._gl_context.make_current()
    buf = np.empty((r.height, r.width, 3), dtype=np.uint8)
    mujoco.mjr_readPixels(buf, None, rr._rect, rr._mjr_context)
    out["labels"] = r._lut[r._geom_ids(buf[::-1])]
    return out


def episode_states(model: mujoco.MjModel, frames: int, every: int = 50) -> list[np.ndarray]:
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    states: list[np.ndarray] = []

    def on_step(data, s, ctrl):
        if s % every == 0 and len(states) < frames:
            st = np.empty(mujoco.mj_stateSize(model, spec))
            mujoco.mj_getState(model, data, st, spec)
            states.append(st)

    run_episode(model, episode_params(10, 0), on_step=on_step)
    return states


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="160x120")
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cameras", nargs="+", default=["head", "wrist_right"])
    ap.add_argument("--no-breakdown", dest="breakdown", action="store_false", help="skip the per-stage breakdown")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    cfg = SceneConfig(width=w, height=h, cameras=tuple(args.cameras), wrist_left="wrist_left" in args.cameras)
    model = load_model(cfg)
    r = SimRenderer(model, cfg)
    states = episode_states(model, args.frames)
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_INTEGRATION

    def current(data, cam):
        return r.render(data, cam)

    def rgb_only(data, cam):
        return r.render(data, cam, depth=False, labels=False)

    def depth_labels_only(data, cam):
        return r.render(data, cam, rgb=False)

    def no_cull(data, cam):
        r.cull = False
        try:
            return r.render(data, cam)
        finally:
            r.cull = True

    paths = {"three passes (before)": lambda d, c: three_passes(r, d, c),
             "two passes via Renderer modes": lambda d, c: two_passes_via_modes(r, d, c),
             "current without culling": no_cull, "current": current,
             "  RGB pass alone": rgb_only, "  depth+labels pass alone": depth_labels_only}
    per_frame = {name: [] for name in paths}
    cpu_frame = {name: [] for name in paths}
    mismatches = {name: 0 for name in paths}
    n = len(states) * len(cfg.cameras)
    for _ in range(args.repeats):
        spent = {name: 0.0 for name in paths}
        cpu = {name: 0.0 for name in paths}
        for st in states:
            mujoco.mj_setState(model, data, st, spec)
            mujoco.mj_kinematics(model, data)
            mujoco.mj_camlight(model, data)
            for cam in cfg.cameras:
                ref = None
                for name, fn in paths.items():
                    t, c = time.perf_counter(), time.process_time()
                    out = fn(data, cam)
                    spent[name] += time.perf_counter() - t
                    cpu[name] += time.process_time() - c
                    if ref is None:
                        ref = out
                    elif any(k in out and not np.array_equal(out[k], ref[k]) for k in ("rgb", "depth", "labels")):
                        mismatches[name] += 1
        for name in paths:
            per_frame[name].append(spent[name] / n * 1e3)
            cpu_frame[name].append(cpu[name] / n * 1e3)
    r.close()
    print(f"{n} camera frames ({len(states)} states x {len(cfg.cameras)} cameras) at {w}x{h}, {args.repeats} repeats, "
          f"GL: {r.gl_renderer}; load average {os.getloadavg()[0]:.1f}")
    med = {name: statistics.median(v) for name, v in per_frame.items()}
    cmed = {name: statistics.median(v) for name, v in cpu_frame.items()}
    for name in paths:
        print(f"{name:30s} {med[name]:7.1f} ms per camera frame (min {min(per_frame[name]):.1f}), "
              f"CPU {cmed[name]:.1f} ms (all threads of this process)"
              + (f"; depth/labels differ from the three-pass path in {mismatches[name]} frames" if mismatches[name] else ""))
    for what, m in (("wall", med), ("CPU", cmed)):
        print(f"{what}: three passes / current {m['three passes (before)'] / m['current']:.2f}x; "
              f"two passes via modes / current {m['two passes via Renderer modes'] / m['current']:.2f}x; "
              f"without culling / current {m['current without culling'] / m['current']:.2f}x")
    if args.breakdown:
        breakdown(model, cfg, states, args.repeats)


def breakdown(model, cfg, states, repeats: int) -> None:
    """CPU ms per camera frame of each stage of the current path, culled and not (module doc)."""
    from openarm_sim_dataset.sim.recorder import encode_jpeg
    from openarm_sim_dataset.sim.render import CULL_MARGIN_M, cull_scene

    r = SimRenderer(model, cfg)
    rr = r.renderer
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    h, w = r.height, r.width
    stages = ("update_scene", "cull", "RGB pass draw", "RGB readPixels", "seg pass draw", "seg readPixels",
              "depth to metres", "labels lookup", "JPEG encode")
    cpu = {c: {s: [] for s in stages} for c in (False, True)}
    left = {cam: [] for cam in cfg.cameras}
    for _ in range(repeats):
        acc = {c: dict.fromkeys(stages, 0.0) for c in (False, True)}
        n = 0
        for st in states:
            mujoco.mj_setState(model, data, st, spec)
            mujoco.mj_kinematics(model, data)
            mujoco.mj_camlight(model, data)
            for cam in cfg.cameras:
                n += 1
                for culled in (False, True):
                    a = acc[culled]

                    def timed(stage, fn):
                        c0 = time.process_time()
                        out = fn()
                        a[stage] += time.process_time() - c0
                        return out

                    timed("update_scene", lambda: rr.update_scene(data, camera=r._cam_ids[cam], scene_option=r.option))
                    lut = r._segid_lut()
                    if culled:
                        left[cam].append(timed("cull", lambda: cull_scene(rr._scene, w / h, CULL_MARGIN_M)))
                    rr._gl_context.make_current()
                    scene = rr._scene
                    timed("RGB pass draw", lambda: mujoco.mjr_render(rr._rect, scene, rr._mjr_context))
                    buf = np.empty((h, w, 3), np.uint8)
                    timed("RGB readPixels", lambda: mujoco.mjr_readPixels(buf, None, rr._rect, rr._mjr_context))
                    flags = scene.flags.copy()
                    scene.flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = True
                    scene.flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = True
                    timed("seg pass draw", lambda: mujoco.mjr_render(rr._rect, scene, rr._mjr_context))
                    np.copyto(scene.flags, flags)
                    colour, z = np.empty((h, w, 3), np.uint8), np.empty((h, w), np.float32)
                    timed("seg readPixels", lambda: mujoco.mjr_readPixels(colour, z, rr._rect, rr._mjr_context))
                    timed("depth to metres", lambda: r._metric_depth(z[::-1]))
                    timed("labels lookup", lambda: r._lut[r._geom_ids(colour[::-1], lut)])
                    timed("JPEG encode", lambda: encode_jpeg(np.ascontiguousarray(buf[::-1]), 90))
        for c in (False, True):
            for s in stages:
                cpu[c][s].append(acc[c][s] / n * 1e3)
    r.close()
    print(f"\nwhere a camera frame's CPU goes (median ms over {repeats} repeats; load average {os.getloadavg()[0]:.1f}):")
    print(f"{'stage':18s} {'all geoms':>10s} {'culled':>10s}")
    tot = {c: 0.0 for c in (False, True)}
    for s in stages:
        m = {c: statistics.median(cpu[c][s]) for c in (False, True)}
        tot = {c: tot[c] + m[c] for c in tot}
        print(f"{s:18s} {m[False]:10.2f} {m[True]:10.2f}")
    print(f"{'total':18s} {tot[False]:10.2f} {tot[True]:10.2f}")
    print("geoms left out per draw: " + ", ".join(f"{cam} {np.mean(v):.0f}" for cam, v in left.items())
          + f" of {model.ngeom} model geoms")


if __name__ == "__main__":
    main()
