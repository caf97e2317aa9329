"""``jpeg_encoding``: each camera's JPEGs encoded the same way across its frames and episodes.

One camera writes one kind of JPEG: one image size, one colour mode, one chroma subsampling, one set
of quantisation tables (a fixed quality). A frame or an episode encoded otherwise was re-encoded by
some tool (another quality or size), or comes from another camera. Only the headers are parsed (PIL
reads the markers up to the scan; no pixel is decoded).

Per camera, the encoding shared by most frames of all checked episodes is the camera's; every episode
holding a frame encoded otherwise fails, naming the frame and what differs. An encoder that changes
its tables from frame to frame (some hardware MJPEG cameras adapt them to the scene: more distinct
table sets than ``max(2, 10 %)`` of the camera's frames, spread over every episode) is a ``warn``:
nothing stands out as re-encoded.
"""

from __future__ import annotations

import io
import struct
from collections import Counter

import numpy as np
from PIL import Image, JpegImagePlugin, UnidentifiedImageError

from openarm_sim_dataset.core.errors import DatasetError

from .check import CheckFn, Context, Outcome

#: IJG's standard luminance table (quality 50), row by row (the order PIL reports tables in)
_STD_LUMA = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
                      14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113,
                      92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], dtype=np.float64)


#: what PIL's header parser raises on hostile bytes (the frame is then jpeg_frames' finding)
HEADER_ERRORS = (DatasetError, OSError, UnidentifiedImageError, SyntaxError, ValueError, EOFError, IndexError,
                 KeyError, TypeError, struct.error, Image.DecompressionBombError)


def quality_estimate(luma: tuple[int, ...]) -> float:
    """IJG quality (1-100) whose scaled standard table is closest to ``luma`` (approximate, for reports)."""
    scale = float(np.median(np.asarray(luma, dtype=np.float64) / _STD_LUMA)) * 100
    return (200 - scale) / 2 if scale <= 100 else 5000 / scale


def encoding(data: bytes) -> tuple:
    """(size (W, H), mode, subsampling, quantisation tables) from a JPEG's headers."""
    with Image.open(io.BytesIO(data), formats=["JPEG"]) as im:
        q = im.quantization or {}
        return im.size, im.mode, JpegImagePlugin.get_sampling(im), tuple(tuple(q[k]) for k in sorted(q))


def _describe(sig: tuple) -> str:
    (w, h), mode, sampling, tables = sig
    sub = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}.get(sampling, f"subsampling {sampling}")
    quality = f", quality ~{quality_estimate(tables[0]):.0f}" if tables else ""
    return f"{w}x{h} {mode} {sub}{quality}"


def _differs(sig: tuple, ref: tuple) -> str:
    names = ("size", "colour mode", "subsampling", "quantisation tables")
    return ", ".join(n for n, a, b in zip(names, sig, ref) if a != b)


def check_jpeg_encoding(ctx: Context) -> Outcome:
    """Every camera's JPEG frames are encoded one way across its frames and episodes: one image size, one
    colour mode, one chroma subsampling and one set of quantisation tables (one quality).

    Only the headers are read, no pixel is decoded. The encoding most of a camera's frames share is the
    camera's; an episode holding a frame encoded otherwise fails, naming the frame and what differs. A
    camera whose encoder varies from frame to frame (more distinct encodings than 2 or than 10 % of its
    frames, whichever is more, as some hardware MJPEG cameras adapt their tables to the scene) is a
    `warn` for all its episodes: no frame stands out. When the dataset is validated in groups of
    episodes, frames are compared within each group. A frame whose headers cannot be read is
    `jpeg_frames`' concern; a `skip` (not applicable) when no frame is readable."""
    per_camera: dict[str, list[tuple[str, int, tuple]]] = {}
    known: dict[bytes, tuple] = {}  # header bytes (up to the scan) -> encoding: PIL parses each distinct header once
    for ep in ctx.episodes:
        cams = ctx.cameras(ep)
        if not isinstance(cams, dict):
            continue
        for name, cam in cams.items():
            for i in range(cam.num_frames):
                try:
                    data = cam.get_frame(i).read_bytes()
                    head = data[: data.find(b"\xff\xda") + 1 or len(data)]
                    sig = known.get(head)
                    if sig is None:
                        sig = known[head] = encoding(data)
                except HEADER_ERRORS:
                    continue  # an unreadable or non-JPEG frame is jpeg_frames' finding
                per_camera.setdefault(name, []).append((ep, i, sig))
    if not per_camera:
        return Outcome(True, "no readable JPEG frames", skipped=True, applicable=False)
    bad, warned, findings, notes, frames = set(), set(), [], [], 0
    for name, items in per_camera.items():
        frames += len(items)
        counts = Counter(sig for _, _, sig in items)
        common = counts.most_common(1)[0][0]
        if len(counts) > max(2, 0.1 * len(items)):
            warned |= {ep for ep, _, _ in items}
            notes.append(f"camera {name}: {len(counts)} distinct encodings over {len(items)} frames "
                         f"(an adaptive encoder; most common {_describe(common)})")
            continue
        for ep, i, sig in items:
            if sig != common and ep not in bad:
                bad.add(ep)
                findings.append(f"episode {ep} camera {name} frame {i}: {_describe(sig)} where the camera's other "
                                f"frames are {_describe(common)} ({_differs(sig, common)} differ: re-encoded)")
    cams = "; ".join(f"{n} {_describe(Counter(s for _, _, s in it).most_common(1)[0][0])}"
                     for n, it in sorted(per_camera.items()))
    detail = f"{frames} frame headers, {len(per_camera)} cameras ({cams})"
    if findings:
        detail += f"; {len(findings)} episode(s) failed, first: {findings[0]}"
    if notes:
        detail += f"; warned: {notes[0]}"
    return Outcome(not bad, detail, sorted(bad), warned=sorted(warned - bad))


#: Checks of how camera files are encoded, for every dataset (not run by ``--quick``).
ENCODING_CHECKS: list[tuple[str, CheckFn]] = [
    ("jpeg_encoding", check_jpeg_encoding),
]
