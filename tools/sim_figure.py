"""Write a PNG contact sheet of one simulated frame: RGB, depth and labels for every camera.

Usage: PYTHONPATH=. python tools/sim_figure.py [--out sim_frame.png] [--seed 10 --index 0]
       [--step 1150] [--width 320 --height 240] [--wrist-left]

Runs the scripted episode up to ``--step`` (default: while the gripper closes on the
cube) and renders every camera there.  Also prints render timings (ms per
camera for RGB, depth, labels) and the GL renderer string.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
import struct

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from openarm_sim_dataset.sim.pick_place import run_episode  # noqa: E402
from openarm_sim_dataset.sim.randomize import episode_params  # noqa: E402
from openarm_sim_dataset.sim.render import SimRenderer  # noqa: E402
from openarm_sim_dataset.sim.scene import LABELS, SceneConfig, build_model  # noqa: E402

PALETTE = np.array([
    [0, 0, 0], [90, 90, 110], [200, 170, 120], [230, 230, 230], [230, 30, 30], [30, 200, 60], [40, 80, 240],
    [240, 200, 0],
], dtype=np.uint8)


def write_png(path: str, img: np.ndarray) -> None:
    """Minimal RGB PNG writer (no extra dependency)."""
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def depth_to_rgb(d: np.ndarray, lo: float = 0.0, hi: float = 2.0) -> np.ndarray:
    x = np.clip((d - lo) / (hi - lo), 0, 1)
    g = (255 * (1 - x)).astype(np.uint8)
    return np.stack([g, g, g], axis=-1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="sim_frame.png")
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--step", type=int, default=1150)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--wrist-left", action="store_true")
    a = ap.parse_args()
    cams = ("head", "wrist_right") + (("wrist_left",) if a.wrist_left else ())
    cfg = SceneConfig(width=a.width, height=a.height, cameras=cams, wrist_left=a.wrist_left)
    model = build_model(cfg)
    renderer = SimRenderer(model, cfg)
    frames = {}

    def on_step(data, i, ctrl):
        if i == a.step:
            frames.update(renderer.render_all(data))
            t = {"rgb": 0.0, "depth": 0.0, "labels": 0.0}
            n = 10
            for _ in range(n):
                for c in cams:
                    for k in t:
                        t0 = time.perf_counter()
                        renderer.render(data, c, rgb=k == "rgb", depth=k == "depth", labels=k == "labels")
                        t[k] += time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(n):
                renderer.render_all(data)
            tall = (time.perf_counter() - t0) / n
            print(f"render {a.width}x{a.height}, per camera: " + ", ".join(
                f"{k} {1e3 * v / (n * len(cams)):.1f} ms" for k, v in t.items())
                + f"; all cameras x (rgb+depth+labels) {1e3 * tall:.1f} ms/frame")

    res = run_episode(model, episode_params(a.seed, a.index), on_step=on_step)
    print("episode outcome:", res.outcome, "| GL:", renderer.gl_renderer)
    rows = []
    for c in cams:
        f = frames[c]
        rows.append(np.concatenate([f["rgb"], depth_to_rgb(f["depth"]), PALETTE[f["labels"]]], axis=1))
    write_png(a.out, np.concatenate(rows, axis=0))
    print("wrote", a.out, "rows:", cams, "cols: rgb, depth (0-2 m, white=near), labels", LABELS)
    renderer.close()


if __name__ == "__main__":
    main()
