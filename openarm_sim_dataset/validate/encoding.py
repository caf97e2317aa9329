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

import hashlib
import io
import struct
from collections import Counter

import numpy as np
from PIL import Image, JpegImagePlugin, UnidentifiedImageError

from openarm_sim_dataset.core.errors import DatasetError

from .check import CheckFn, Context, EpisodeCheck, Outcome, no_camera_reason, nothing_to_judge

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


def _signature(data: bytes) -> tuple:
    """The small, comparable form of a frame's encoding: (size, mode, subsampling, a digest of the
    quantisation tables, the IJG quality they come closest to). Partials of 10,000 episodes stay small."""
    size, mode, sampling, tables = encoding(data)
    digest = hashlib.blake2b(repr(tables).encode(), digest_size=8).hexdigest()
    return size, mode, sampling, digest, (round(quality_estimate(tables[0])) if tables else None)


def _describe(sig: tuple) -> str:
    (w, h), mode, sampling, _, quality = sig
    sub = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}.get(sampling, f"subsampling {sampling}")
    return f"{w}x{h} {mode} {sub}" + (f", quality ~{quality}" if quality is not None else "")


def _differs(sig: tuple, ref: tuple) -> str:
    names = ("size", "colour mode", "subsampling", "quantisation tables")
    return ", ".join(n for n, a, b in zip(names, sig[:4], ref[:4]) if a != b)


def _episode_encodings(ctx: Context, ep: str, _prep) -> dict | None:
    """One episode's partial: per camera, ``{signature: [frames, first frame]}`` (None: no cameras)."""
    cams = ctx.cameras(ep)
    if not isinstance(cams, dict):
        return None
    known: dict[bytes, tuple] = {}  # header bytes (up to the scan) -> signature: PIL parses each distinct header once
    out: dict[str, dict[tuple, list[int]]] = {}
    for name, cam in cams.items():
        for i in range(cam.num_frames):
            try:
                data = cam.get_frame(i).read_bytes()
                head = data[: data.find(b"\xff\xda") + 1 or len(data)]
                sig = known.get(head)
                if sig is None:
                    sig = known[head] = _signature(data)
            except HEADER_ERRORS:
                continue  # an unreadable or non-JPEG frame is jpeg_frames' finding
            seen = out.setdefault(name, {}).setdefault(sig, [0, i])
            seen[0] += 1
    return out


def _reduce_encodings(ctx: Context, _prep, parts: dict) -> Outcome:
    """Every camera's JPEG frames are encoded one way across its frames and episodes: one image size, one
    colour mode, one chroma subsampling and one set of quantisation tables (one quality).

    Only the headers are read, no pixel is decoded. The encoding most of a camera's frames share is the
    camera's; an episode holding a frame encoded otherwise fails, naming the frame and what differs. A
    camera whose encoder varies from frame to frame (more distinct encodings than 2 or than 10 % of its
    frames, whichever is more, as some hardware MJPEG cameras adapt their tables to the scene) is a
    `warn` for all its episodes: no frame stands out. Frames are compared across the whole dataset, also
    when it is validated in groups of episodes (each episode gives its few encodings and their counts). A
    frame whose headers cannot be read is `jpeg_frames`' concern; a `skip` (not applicable) when no frame
    is readable."""
    totals: dict[str, Counter] = {}
    frames_of: dict[str, int] = {}
    for part in parts.values():
        for name, sigs in (part or {}).items():
            c = totals.setdefault(name, Counter())
            for sig, (count, _) in sigs.items():
                c[sig] += count
                frames_of[name] = frames_of.get(name, 0) + count
    if not totals:
        return nothing_to_judge(no_camera_reason(ctx, "JPEG frame with readable headers"))
    bad, warned, findings, notes = set(), set(), [], []
    common_of = {name: c.most_common(1)[0][0] for name, c in totals.items()}
    for name, c in totals.items():
        common = common_of[name]
        if len(c) > max(2, 0.1 * frames_of[name]):
            warned |= {ep for ep, part in parts.items() if part and name in part}
            notes.append(f"camera {name}: {len(c)} distinct encodings over {frames_of[name]} frames "
                         f"(an adaptive encoder; most common {_describe(common)})")
            continue
        for ep, part in parts.items():  # episode order
            others = [(first, sig) for sig, (_, first) in (part or {}).get(name, {}).items() if sig != common]
            if others and ep not in bad:
                first, sig = min(others)
                bad.add(ep)
                findings.append(f"episode {ep} camera {name} frame {first}: {_describe(sig)} where the camera's "
                                f"other frames are {_describe(common)} ({_differs(sig, common)} differ: re-encoded)")
    cams = "; ".join(f"{n} {_describe(common_of[n])}" for n in sorted(totals))
    detail = f"{sum(frames_of.values())} frame headers, {len(totals)} cameras ({cams})"
    if findings:
        detail += f"; {len(findings)} episode(s) failed, first: {findings[0]}"
    if notes:
        detail += f"; warned: {notes[0]}"
    return Outcome(not bad, detail, sorted(bad), warned=sorted(warned - bad),
                   judged={"cameras": len(totals), "frames": sum(frames_of.values())})


check_jpeg_encoding = EpisodeCheck(_episode_encodings, _reduce_encodings)


#: Checks of how camera files are encoded, for every dataset (not run by ``--quick``).
ENCODING_CHECKS: list[tuple[str, CheckFn]] = [
    ("jpeg_encoding", check_jpeg_encoding),
]
