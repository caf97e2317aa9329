"""LeRobot-side helpers for the LeRobot benchmarks. Run this file with the LeRobot venv's python, not ours.

    /tmp/lr044/bin/python tools/lerobot_bench_support.py rewrite SRC OUT [--vcodec libsvtav1]
    /tmp/lr044/bin/python tools/lerobot_bench_support.py epoch ROOT WORKERS BATCH BACKEND
    /tmp/lr044/bin/python tools/lerobot_bench_support.py probe MP4_OR_DATASET [...]

``rewrite`` re-encodes a LeRobot v3.0 dataset with LeRobot's own writer (``LeRobotDataset.create`` /
``add_frame`` / ``save_episode`` / ``finalize``). LeRobot's default video settings are kept (0.4.4: libsvtav1,
g=2, crf=30, yuv420p) unless ``--vcodec`` names another codec that LeRobot accepts (h264, hevc, libsvtav1, ...).
It is skipped when ``OUT/meta/info.json`` already exists. Afterwards the MP4s' codec and GOP are printed.

``epoch`` runs one shuffled epoch of ``LeRobotDataset("local/bench", root=ROOT, video_backend=BACKEND)``
through a ``torch.utils.data.DataLoader`` and prints one JSON line (items, seconds, items_per_s, versions,
backend, peak RSS of the main process and of the workers).

``probe`` prints codec and GOP (keyframe count/interval) of MP4 files, or of every MP4 under a dataset folder.

Imports only lerobot, torch, numpy, PIL and av (never openarm_sim_dataset). No network: Hugging Face Hub and
datasets are put offline before anything imports them.
"""
from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

# --------------------------------------------------------------------------- probe

def probe_mp4(path: str | Path) -> dict:
    """Codec, frame count and keyframe layout of the first video stream of ``path`` (PyAV demux, no decode)."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        codec = s.codec_context.codec.canonical_name  # "av1", "h264" (codec_context.name is the decoder)
        decoder = s.codec_context.name
        profile = s.codec_context.profile
        pix_fmt = s.codec_context.pix_fmt
        size = (s.codec_context.width, s.codec_context.height)
        key_pos, n = [], 0
        for pkt in c.demux(s):
            if pkt.size == 0:  # flush packet
                continue
            if pkt.is_keyframe:
                key_pos.append(n)
            n += 1
    gaps = [b - a for a, b in zip(key_pos, key_pos[1:])] + ([n - key_pos[-1]] if key_pos else [])
    return {
        "file": str(path),
        "codec": codec,
        "profile": profile,
        "decoder": decoder,
        "pix_fmt": pix_fmt,
        "size": list(size),
        "frames": n,
        "keyframes": len(key_pos),
        "gop_mean": round(n / len(key_pos), 2) if key_pos else None,
        "gop_max": max(gaps) if gaps else None,
    }


def _mp4s(target: str | Path) -> list[Path]:
    target = Path(target)
    return sorted(target.rglob("*.mp4")) if target.is_dir() else [target]


def cmd_probe(args) -> int:
    for t in args.paths:
        for p in _mp4s(t):
            print(json.dumps(probe_mp4(p)))
    return 0


# --------------------------------------------------------------------------- rewrite

_DEFAULT_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


def _writer_features(features: dict) -> dict:
    """The user features of a source dataset, as ``LeRobotDataset.create`` wants them: LeRobot's default
    features dropped (it adds them itself), per-feature ``fps`` dropped, and the video ``info`` block dropped so
    that LeRobot fills it from the newly encoded file (otherwise the source codec would stay in info.json)."""
    out = {}
    for key, ft in features.items():
        if key in _DEFAULT_KEYS:
            continue
        clean = {"dtype": ft["dtype"], "shape": tuple(ft["shape"]), "names": ft.get("names")}
        out[key] = clean
    return out


def _to_hwc_uint8(img) -> np.ndarray:  # noqa: F821
    """LeRobot returns video frames as float32 CxHxW in [0, 1] (uint8 / 255); back to HxWxC uint8 exactly."""
    import numpy as np
    import torch

    if isinstance(img, torch.Tensor):
        t = img
        if t.dtype.is_floating_point:
            t = (t * 255.0).round().clamp(0, 255).to(torch.uint8)
        if t.ndim == 3 and t.shape[0] in (1, 3, 4) and t.shape[-1] not in (1, 3, 4):
            t = t.permute(1, 2, 0)
        return np.ascontiguousarray(t.numpy())
    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        arr = (arr.astype(np.float32) * 255.0).round().clip(0, 255).astype(np.uint8)
    return arr


def cmd_rewrite(args) -> int:
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    src, out = Path(args.src), Path(args.out)
    if (out / "meta" / "info.json").exists():
        print(f"skip: {out}/meta/info.json exists")
        for p in _mp4s(out / "videos"):
            print(json.dumps(probe_mp4(p)))
        return 0
    if out.exists():
        if any(out.iterdir()):
            print(f"error: {out} exists, is not empty and has no meta/info.json (a failed run?); remove it",
                  file=sys.stderr)
            return 2
        out.rmdir()  # LeRobotDatasetMetadata.create wants to create the folder itself

    t0 = time.perf_counter()
    ds = LeRobotDataset("local/src", root=src, video_backend="pyav")
    meta = ds.meta
    video_keys = list(meta.video_keys)
    image_keys = [k for k in meta.camera_keys if k not in video_keys]
    features = _writer_features(meta.features)
    # images of the source are written back as videos
    for k in image_keys:
        features[k]["dtype"] = "video"
    create_kw = dict(repo_id="local/av1", root=out, fps=meta.fps, features=features,
                     robot_type=meta.robot_type, use_videos=True)
    if args.vcodec:
        create_kw["vcodec"] = args.vcodec
    dst = LeRobotDataset.create(**create_kw)
    print(f"source: {src} ({meta.total_episodes} episodes, {meta.total_frames} frames, fps {meta.fps}, "
          f"codec {[meta.features[k].get('info', {}).get('video.codec') for k in video_keys]})")
    print(f"writer: vcodec={dst.vcodec} (LeRobot default settings: g=2, crf=30, pix_fmt=yuv420p)")

    keys = [k for k in features]
    eps = meta.episodes
    total = 0
    for e in range(meta.total_episodes):
        start, stop = int(eps[e]["dataset_from_index"]), int(eps[e]["dataset_to_index"])
        for i in range(start, stop):
            item = ds[i]
            frame = {}
            for k in keys:
                v = item[k]
                if features[k]["dtype"] in ("video", "image"):
                    frame[k] = _to_hwc_uint8(v)
                else:
                    arr = v.numpy() if hasattr(v, "numpy") else np.asarray(v)
                    frame[k] = arr.astype(features[k]["dtype"], copy=False).reshape(features[k]["shape"])
            frame["task"] = item["task"]
            dst.add_frame(frame)
            total += 1
        dst.save_episode()
        print(f"  episode {e}: {stop - start} frames")
    dst.finalize()
    print(f"wrote {out}: {total} frames in {time.perf_counter() - t0:.1f}s")

    # re-open to check that LeRobot reads its own output, then report the MP4s
    chk = LeRobotDataset("local/av1", root=out, video_backend="pyav")
    assert chk.num_frames == total and chk.num_episodes == meta.total_episodes, (chk.num_frames, total)
    _ = chk[0], chk[len(chk) - 1]
    print(f"re-opened: {chk.num_episodes} episodes, {chk.num_frames} frames; "
          f"info codec {[chk.meta.features[k]['info'].get('video.codec') for k in chk.meta.video_keys]}")
    for p in _mp4s(out / "videos"):
        print(json.dumps(probe_mp4(p)))
    return 0


# --------------------------------------------------------------------------- epoch

def _maxrss_mib(who) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024.0, 1)  # Linux: KiB


def cmd_epoch(args) -> int:
    import gc

    import lerobot
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    t0 = time.perf_counter()
    ds = LeRobotDataset("local/bench", root=args.root, video_backend=args.backend)
    open_s = time.perf_counter() - t0
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         generator=torch.Generator().manual_seed(0))
    items = 0
    t0 = time.perf_counter()
    it = iter(loader)
    for batch in it:
        items += len(batch["index"])
    seconds = time.perf_counter() - t0
    # make sure the workers have exited and been reaped, so that RUSAGE_CHILDREN covers them
    if hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    del it, batch
    gc.collect()
    print(json.dumps({
        "root": str(args.root),
        "backend": args.backend,
        "workers": args.workers,
        "batch": args.batch,
        "items": items,
        "seconds": round(seconds, 3),
        "items_per_s": round(items / seconds, 1) if seconds else None,
        "open_seconds": round(open_s, 3),
        "lerobot": getattr(lerobot, "__version__", None),
        "torch": torch.__version__,
        "peak_rss_main_mib": _maxrss_mib(resource.RUSAGE_SELF),
        # max over reaped children (DataLoader workers); 0 when workers == 0
        "peak_rss_worker_mib": _maxrss_mib(resource.RUSAGE_CHILDREN),
    }))
    return 0


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rewrite", help="re-encode a LeRobot v3.0 dataset with LeRobot's writer (default AV1)")
    r.add_argument("src")
    r.add_argument("out")
    r.add_argument("--vcodec", default=None,
                   help="LeRobot vcodec (h264, hevc, libsvtav1, auto, ...); default: LeRobot's own (libsvtav1)")
    r.set_defaults(func=cmd_rewrite)
    e = sub.add_parser("epoch", help="one shuffled DataLoader epoch, one JSON line")
    e.add_argument("root")
    e.add_argument("workers", type=int)
    e.add_argument("batch", type=int)
    e.add_argument("backend", choices=("pyav", "torchcodec", "video_reader"))
    e.set_defaults(func=cmd_epoch)
    q = sub.add_parser("probe", help="codec and GOP of MP4s (files or dataset folders)")
    q.add_argument("paths", nargs="+")
    q.set_defaults(func=cmd_probe)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
