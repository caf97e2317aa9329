"""dataset-replay DIR [--episode ID] [--from-frame K]: replay a simulated episode in a fresh model.

Reports the frames reproduced bit for bit and the largest difference in qpos/qvel. Refuses to
compare across a different simulator, MuJoCo version, timestep or model hash, naming what differs
(and which asset files changed). When a replay drifts, names the package versions that differ from
the recorded provenance. With --render, renders the stored states again: depth and labels must
match exactly; RGB is re-encoded with the recorded JPEG quality and compared byte for byte on the GL
renderer recorded in the provenance; on another renderer the comparison is approximate: the decoded
pixels must reach a PSNR floor (--psnr-floor). Exit 0: everything compared is equal; 1: something
differs (states, depth, labels, JPEG bytes, PSNR below the floor; the last line says which);
2: unusable input or refused.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported

from openarm_sim_dataset.core import layout  # noqa: E402
from openarm_sim_dataset.core.errors import DatasetError  # noqa: E402
from openarm_sim_dataset.core.gl import check_rendering  # noqa: E402
from openarm_sim_dataset.validate.thresholds import Thresholds  # noqa: E402

from . import EXIT_INVALID, EXIT_OK, EXIT_UNUSABLE, Parser, run  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-replay", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="simulated dataset folder")
    p.add_argument("--episode", help="episode id (default: every episode)")
    p.add_argument("--from-frame", type=int, help="resume from the stored state of this camera frame")
    p.add_argument("--render", action="store_true", help="also re-render stored states and compare images")
    p.add_argument("--psnr-floor", type=float, default=Thresholds.render_psnr_db, metavar="DB",
                   help="on another GL renderer than the recorded one: lowest PSNR (dB) of a re-rendered frame "
                        f"against the stored JPEG (default {Thresholds.render_psnr_db:g})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        # start-up: --help stays free of numpy, pyarrow and MuJoCo
        from openarm_sim_dataset.core import sidecar
        from openarm_sim_dataset.core.dataset import Dataset
        from openarm_sim_dataset.sim.replay import package_differences, provenance_differences, replay, rerender
        from openarm_sim_dataset.validate.check import Context
        from openarm_sim_dataset.validate.simulation import (
            built_model,
            episode_model,
            renderer as shared_renderer,
            same_renderer,
        )

        ds = Dataset(args.dataset)
        if args.render:
            check_rendering()
        sim = ds.meta.simulation
        if sim is None:
            raise DatasetError(ds.root / layout.METADATA_FILE, "has no simulation block: not a simulated dataset")
        ctx = Context(ds, ds.episode_ids, Thresholds())
        built = built_model(ctx)
        diffs = provenance_differences(sim, built.model, built.sha256)
        if diffs:
            print(f"dataset-replay: refused: {ds.root / layout.METADATA_FILE}: {'; '.join(diffs)}", file=sys.stderr)
            return EXIT_UNUSABLE
        episodes = [ds.episode_id(args.episode)] if args.episode is not None else ds.episode_ids
        differs: dict[str, list[str]] = {}  # what -> episodes
        for ep in episodes:
            side = sidecar.load_npz(layout.sim_dir(ds.root, ep) / sidecar.SIDECAR_FILE)
            if args.from_frame is not None and not 0 <= args.from_frame < len(side["step"]):
                raise ValueError(f"episode {ep}: --from-frame {args.from_frame} not in 0..{len(side['step']) - 1}")
            try:  # the episode's own model: the nominal one, or rebuilt from its recorded variation
                model = episode_model(ctx, ep)
            except DatasetError as e:
                print(f"dataset-replay: refused: {e}", file=sys.stderr)
                return EXIT_UNUSABLE
            r = replay(model, side, from_frame=args.from_frame)
            start = "initial state" if args.from_frame is None else f"frame {args.from_frame}"
            print(f"episode {ep}: from {start}: {r.exact}/{r.frames} frames bit-exact, largest difference "
                  f"qpos {r.max_qpos_diff:.3g}, qvel {r.max_qvel_diff:.3g}"
                  + (f", first mismatch at frame {r.first_mismatch}" if r.first_mismatch is not None else ""))
            if not r.ok:
                differs.setdefault("states", []).append(ep)
            if args.render:
                renderer = shared_renderer(ctx)
                same = same_renderer(ctx, renderer)
                frames = sidecar.load_npz(layout.sim_dir(ds.root, ep) / sidecar.FRAMES_FILE)
                cams = ds.load_cameras(ep)
                jpegs = {c: [f.read_bytes() for f in cams[c]] for c in renderer.cameras}
                rr = rerender(model, side, frames, jpegs, int(sim["jpeg_quality"]), renderer)
                mode = ("same GL renderer as recorded: JPEG bytes must be identical" if same else
                        f"approximate: GL here {renderer.gl_renderer!r}, recorded {sim.get('gl_renderer')!r}; "
                        f"PSNR floor {args.psnr_floor:g} dB")
                first = (f", first differing frame: {rr.first_jpeg_mismatch[0]} #{rr.first_jpeg_mismatch[1]} "
                         f"(t={rr.first_jpeg_mismatch[2]} ns)" if rr.first_jpeg_mismatch else "")
                print(f"episode {ep}: re-rendered {rr.frames} camera frames: depth exact {rr.depth_exact}/{rr.frames}, "
                      f"labels exact {rr.labels_exact}/{rr.frames}, JPEG bytes identical {rr.jpeg_exact}/{rr.frames}{first}, "
                      f"render vs stored JPEG PSNR >= {rr.min_psnr_db:.1f} dB ({mode})")
                for what in rr.differences(same, args.psnr_floor):
                    differs.setdefault(what.split(" (")[0].split(" below")[0], []).append(ep)
        if differs:
            what = ", ".join(f"{k} (episode{'s' if len(v) > 1 else ''} {', '.join(v)})" for k, v in differs.items())
            line = f"replay differs: {what}"
            if "states" in differs:
                pk = package_differences(sim)
                line += (f"; differing from the provenance: {'; '.join(pk)}" if pk else
                         "; no package version differs from the provenance")
            print(line)
        else:
            print("replay equal: " + ("states, depth, labels and images" if args.render else "states")
                  + f" of {len(episodes)} episode(s) as stored")
        return EXIT_INVALID if differs else EXIT_OK

    return run(body, "dataset-replay")


if __name__ == "__main__":
    sys.exit(main())
