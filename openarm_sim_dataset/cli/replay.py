"""dataset-replay DIR [--episode ID] [--from-frame K]: replay a simulated episode in a fresh model.

Reports the frames reproduced bit for bit and the largest difference in qpos/qvel. Refuses to
compare across a different simulator, MuJoCo version, timestep or model hash, naming what differs
(and which asset files changed). When a replay drifts, names the package versions that differ from
the recorded provenance. With --render, renders the stored states again: depth and labels must
match exactly; RGB is re-encoded with the recorded JPEG quality and compared byte for byte, and its PSNR against
the stored JPEG is reported (images depend on the GL implementation: exact only on the same one).
Exit 0: reproduced exactly; 1: drift; 2: unusable input or refused.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported

from . import EXIT_INVALID, EXIT_OK, EXIT_UNUSABLE, run  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dataset-replay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="simulated dataset folder")
    p.add_argument("--episode", help="episode id (default: every episode)")
    p.add_argument("--from-frame", type=int, help="resume from the stored state of this camera frame")
    p.add_argument("--render", action="store_true", help="also re-render stored states and compare images")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def body() -> int:
        import copy

        from .. import layout, sidecar
        from ..dataset import Dataset
        from ..errors import DatasetError
        from ..sim.replay import package_differences, provenance_differences, replay, rerender
        from ..validate.simulation import built_model
        from ..validate.core import Context, Thresholds

        ds = Dataset(args.dataset)
        if args.render:
            from ..gl import check_rendering

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
        model = copy.copy(built.model)  # hash checked above; a private copy, as replay steps on it
        episodes = [ds.episode_id(args.episode)] if args.episode is not None else ds.episode_ids
        renderer = None
        drift = False
        for ep in episodes:
            side = sidecar.load_npz(layout.sim_dir(ds.root, ep) / sidecar.SIDECAR_FILE)
            if args.from_frame is not None and not 0 <= args.from_frame < len(side["step"]):
                raise ValueError(f"episode {ep}: --from-frame {args.from_frame} not in 0..{len(side['step']) - 1}")
            r = replay(model, side, from_frame=args.from_frame)
            start = "initial state" if args.from_frame is None else f"frame {args.from_frame}"
            print(f"episode {ep}: from {start}: {r.exact}/{r.frames} frames bit-exact, largest difference "
                  f"qpos {r.max_qpos_diff:.3g}, qvel {r.max_qvel_diff:.3g}"
                  + (f", first mismatch at frame {r.first_mismatch}" if r.first_mismatch is not None else ""))
            drift |= not r.ok
            if args.render:
                from ..sim.render import SimRenderer
                from ..validate.simulation import scene_config

                renderer = renderer or SimRenderer(model, scene_config(ctx))
                frames = sidecar.load_npz(layout.sim_dir(ds.root, ep) / sidecar.FRAMES_FILE)
                cams = ds.load_cameras(ep)
                jpegs = {c: [f.read_bytes() for f in cams[c]] for c in renderer.cameras}
                rr = rerender(model, side, frames, jpegs, int(sim["jpeg_quality"]), renderer)
                print(f"episode {ep}: re-rendered {rr.frames} camera frames: depth exact {rr.depth_exact}/{rr.frames}, "
                      f"labels exact {rr.labels_exact}/{rr.frames}, JPEG bytes identical {rr.jpeg_exact}/{rr.frames}, "
                      f"render vs stored JPEG PSNR >= {rr.min_psnr_db:.1f} dB "
                      f"(GL here: {renderer.gl_renderer}; recorded: {sim.get('gl_renderer')})")
                drift |= rr.depth_exact != rr.frames or rr.labels_exact != rr.frames
        if drift:
            pk = package_differences(sim)
            print("replay drifted" + (f"; differing from the provenance: {'; '.join(pk)}" if pk else
                                      "; no package version differs from the provenance"))
        return EXIT_INVALID if drift else EXIT_OK

    return run(body, "dataset-replay")


if __name__ == "__main__":
    sys.exit(main())
