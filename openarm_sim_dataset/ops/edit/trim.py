"""The trim operation: the window each episode keeps (an explicit ``--trim``, :func:`explicit_window`, or
its idle head and tail cut, :func:`idle_window`), and the episode's data and entry cut to it
(:func:`trimmed_data`, :func:`trimmed_entry`; a simulated episode's sidecar by
:func:`openarm_sim_dataset.window.trim_sidecar`)."""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass

import numpy as np

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.window import slice_component, trim_sidecar
from openarm_sim_dataset.core.writer import EpisodeData

from .request import VALIDITY_KEYS, EditError, IdleTrim, Trim, parse_position

#: The per-entry key recording a trim.
TRIMMED = "trimmed"
#: Sidecar arrays of a trimmed simulated episode (:mod:`openarm_sim_dataset.sidecar`).
TRIM_KEY = sidecar.TRIM_KEY
SOURCE_INITIAL_STATE = sidecar.SOURCE_INITIAL_STATE_KEY


@dataclass
class Window:
    """What a trim keeps of one episode: stamps ``[start_ns, end_ns]`` (inclusive) and, for a simulated
    episode, the sidecar frames ``k0..k1`` (inclusive); with the figures it prints."""

    start_ns: int
    end_ns: int
    first_ns: int
    last_ns: int
    frames: tuple[int, int] | None = None
    reason: str = "trim"

    @property
    def head_s(self) -> float:
        return (self.start_ns - self.first_ns) / 1e9

    @property
    def tail_s(self) -> float:
        return (self.last_ns - self.end_ns) / 1e9

    @property
    def cuts(self) -> bool:
        return self.start_ns > self.first_ns or self.end_ns < self.last_ns


def _episode_stamps(ds: Dataset, ep: dict) -> tuple[dict, dict, np.ndarray | None]:
    """``(streams {kind/key: Stream}, cameras {name: stamps}, sidecar frame stamps or None)``."""
    streams = {f"{kind}/{k}": s for kind in layout.KINDS for k, s in ds.streams(ep, kind).items()}
    cams = {name: np.asarray(c.timestamps, np.int64) for name, c in ds.load_cameras(ep).items()}
    side = layout.sim_dir(ds.root, ds.episode_id(ep)) / sidecar.SIDECAR_FILE
    ft = None
    if ds.meta.simulation is not None and side.is_file():
        ft = np.asarray(sidecar.load_npz(side, members=("frame_timestamp",))["frame_timestamp"], np.int64)
    return streams, cams, ft


def _span(streams: dict, cams: dict) -> tuple[int, int]:
    firsts = [int(s.timestamps[0]) for s in streams.values() if len(s.timestamps)]
    firsts += [int(t[0]) for t in cams.values() if len(t)]
    lasts = [int(s.timestamps[-1]) for s in streams.values() if len(s.timestamps)]
    lasts += [int(t[-1]) for t in cams.values() if len(t)]
    if not firsts:
        raise ValueError("no sample")
    return min(firsts), max(lasts)


def _frame_clock(streams: dict, cams: dict, ft: np.ndarray | None) -> tuple[np.ndarray, str]:
    if ft is not None:
        return ft, "sidecar frames"
    if cams:
        name = sorted(cams)[0]
        return cams[name], f"frames of camera {name}"
    key = sorted(k for k in streams if k.startswith("obs/"))[0] if any(k.startswith("obs/") for k in streams) else sorted(streams)[0]
    return np.asarray(streams[key].timestamps, np.int64), f"rows of {key}"


def explicit_window(ds: Dataset, ep: dict, trim: Trim) -> Window:
    """The window ``--trim ID START END`` keeps of episode ``ep`` (EditError when it lies outside it)."""
    where = ds.root / layout.METADATA_FILE
    ep_id = ds.episode_id(ep)
    streams, cams, ft = _episode_stamps(ds, ep)
    first, last = _span(streams, cams)
    clock, clock_name = _frame_clock(streams, cams, ft)
    ends = []
    for text, what in ((trim.start, "START"), (trim.end, "END")):
        v, unit = parse_position(text, f"--trim {ep_id} {what}")
        if unit == "s":
            if v < 0 or first + round(v * 1e9) > last:
                raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: {what} {v:g} s lies outside episode "
                                       f"{ep_id} (0-{(last - first) / 1e9:.3f} s)")
            ends.append(first + int(round(v * 1e9)))
        else:
            k = int(v)
            if not 0 <= k < len(clock):
                raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: {what} frame {k} lies outside episode "
                                       f"{ep_id} ({len(clock)} {clock_name}, 0-{len(clock) - 1})")
            ends.append(int(clock[k]))
    start, end = ends
    if start >= end:
        raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: START is not before END")
    frames = None
    if ft is not None:  # inward onto the sidecar's frames (the only states stored)
        k0 = int(np.searchsorted(ft, start, "left"))
        k1 = int(np.searchsorted(ft, end, "right")) - 1
        if k1 - k0 < 1:
            raise EditError(where, f"--trim {ep_id} {trim.start} {trim.end}: fewer than two sidecar frames lie inside "
                                   f"(a simulated episode is cut at its frames, {_period_s(ft):.3g} s apart)")
        frames, start, end = (k0, k1), int(ft[k0]), int(ft[k1])
    w = Window(start, end, first, last, frames, "trim")
    _check_window(ds, ep_id, streams, cams, w, f"--trim {ep_id} {trim.start} {trim.end}")
    return w


def _period_s(ft: np.ndarray) -> float:
    return float(np.median(np.diff(ft))) / 1e9 if len(ft) > 1 else float("nan")


def idle_window(ds: Dataset, ep: dict, idle: IdleTrim) -> Window | None:
    """The window ``--trim-idle`` keeps of episode ``ep``: from ``margin_s`` before the first sample at
    which an obs joint has moved more than ``threshold_rad`` from its first value, to ``margin_s`` after
    the last one at which it is more than that from its last value. None when nothing moves."""
    streams, cams, ft = _episode_stamps(ds, ep)
    first, last = _span(streams, cams)
    onsets, offsets = [], []
    for key, s in streams.items():
        if not key.startswith("obs/") or key.rsplit("/", 1)[1] not in ("qpos", "elevation") or len(s.timestamps) < 2:
            continue
        v = np.asarray(s.values, np.float64).reshape(len(s.timestamps), -1)
        moved = np.flatnonzero(np.any(np.abs(v - v[0]) > idle.threshold_rad, axis=1))
        still = np.flatnonzero(np.any(np.abs(v - v[-1]) > idle.threshold_rad, axis=1))
        if moved.size:
            onsets.append(int(s.timestamps[moved[0]]))
        if still.size:
            offsets.append(int(s.timestamps[still[-1]]))
    if not onsets or not offsets:
        return None
    margin = int(round(idle.margin_s * 1e9))
    start, end = max(first, min(onsets) - margin), min(last, max(offsets) + margin)
    frames = None
    if ft is not None:  # outward onto the sidecar's frames
        k0 = max(int(np.searchsorted(ft, start, "right")) - 1, 0)
        k1 = min(int(np.searchsorted(ft, end, "left")), len(ft) - 1)
        frames, start, end = (k0, k1), int(ft[k0]), int(ft[k1])
    w = Window(start, end, first, last, frames, "idle")
    if not w.cuts:
        return w
    _check_window(ds, ds.episode_id(ep), streams, cams, w, "--trim-idle")
    return w


def _check_window(ds: Dataset, ep_id: str, streams: dict, cams: dict, w: Window, what: str) -> None:
    where = ds.root / layout.METADATA_FILE
    for key, s in streams.items():
        n = int(np.count_nonzero((s.timestamps >= w.start_ns) & (s.timestamps <= w.end_ns)))
        if n < 2:
            raise EditError(where, f"{what}: the window leaves {n} row(s) of {key} in episode {ep_id} (at least 2)")
    for name, ts in cams.items():
        if len(ts) and not np.any((ts >= w.start_ns) & (ts <= w.end_ns)):
            raise EditError(where, f"{what}: the window leaves no frame of camera {name} in episode {ep_id}")


def trimmed_data(ds: Dataset, ep: dict, w: Window) -> EpisodeData:
    """Episode ``ep``'s content cut to window ``w`` (a simulated episode's sidecar with
    :func:`trim_sidecar`)."""
    data = ds.episode_data(ep)
    data.obs = {k: slice_component(c, w.start_ns, w.end_ns) for k, c in data.obs.items()}
    data.action = {k: slice_component(c, w.start_ns, w.end_ns) for k, c in data.action.items()}
    data.cameras = {name: ((t, b) for t, b in frames if w.start_ns <= t <= w.end_ns) for name, frames in data.cameras.items()}
    side_rel = f"{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}"
    if w.frames is not None and side_rel in data.files:
        frames_rel = f"{layout.SIM_DIR}/{sidecar.FRAMES_FILE}"
        side = sidecar.load_npz(data.files[side_rel])
        fr = sidecar.load_npz(data.files[frames_rel]) if frames_rel in data.files else {}
        new_side, new_frames = trim_sidecar(side, fr, *w.frames)
        data.files.update(sidecar.sim_files(new_side, new_frames))
    return data


def trimmed_entry(entry: dict, w: Window, data: EpisodeData) -> dict:
    new = copy.deepcopy(entry)
    prev = entry.get(TRIMMED) if isinstance(entry.get(TRIMMED), dict) else None
    first = int(prev["source_first_ns"]) if prev else int(w.first_ns)  # the untrimmed episode's first stamp
    rec = {"reason": w.reason, "start_s": round((w.start_ns - first) / 1e9, 9), "end_s": round((w.end_ns - first) / 1e9, 9),
           "start_ns": int(w.start_ns), "end_ns": int(w.end_ns), "source_first_ns": first,
           "source_last_ns": int(prev["source_last_ns"]) if prev else int(w.last_ns)}
    if w.frames is not None:
        side = data.files.get(f"{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}")
        if isinstance(side, bytes):
            arrays = dict(np.load(io.BytesIO(side), allow_pickle=False))
            t = sidecar.read_json(arrays, TRIM_KEY, "sidecar") or {}
            rec["first_step"] = int(t.get("first_step", 0))
            rec["frames"] = list(t.get("frames") or [])
            if "steps" in new:
                new["steps"] = int(len(arrays["physics_ctrl"]))
    if prev and prev.get("reason") != w.reason:
        rec["reason"] = f"{prev.get('reason')}+{w.reason}"
    new[TRIMMED] = rec
    for k in VALIDITY_KEYS:
        new.pop(k, None)
    return new
