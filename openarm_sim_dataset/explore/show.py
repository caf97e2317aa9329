"""Pictures of stored data (``dataset-show``): a frame per camera, an episode's joints over time, a
contact sheet. Nothing is simulated again: images, depth and labels are what the dataset stores.

Needs matplotlib (extra ``[viz]``). Image panels are placed pixel for pixel (``figimage``, each
source pixel an integer block of output pixels), so a panel of labels holds exactly the label
colours of the frame and the functions return where each panel is (:class:`Layout`).
Palettes are colour-blind safe: Okabe-Ito for labels and joints, viridis for depth.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout, sampler
from openarm_sim_dataset.core.atomic import atomic_write_with
from openarm_sim_dataset.core.dataset import Dataset, EpisodeRef
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.lerobot import MissingVideo
from openarm_sim_dataset.core.palette import LABEL_COLOURS, OKABE_ITO, label_palette, label_table  # noqa: F401 - re-exported

DEPTH_CMAP = "viridis"
MIN_PANEL_HEIGHT = 240  # px: small images are enlarged by an integer factor up to this
_DPI = 100


def _mpl():
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("dataset-show needs matplotlib: pip install 'openarm-sim-dataset[viz]'") from None
    return matplotlib, plt


@dataclass
class Layout:
    """Where a written PNG's image panels are: ``panels[(camera, column)] = (x0, y0, x1, y1)`` in
    output pixels (origin top-left, x1/y1 exclusive), ``scale`` output pixels per source pixel."""

    path: Path
    size: tuple[int, int]
    scale: int
    panels: dict[tuple[str, str], tuple[int, int, int, int]] = field(default_factory=dict)
    timestamp: int | None = None
    frame: int | None = None


def _meta_file(ds: Dataset) -> Path:
    """The file a dataset's metadata comes from (``metadata.yaml``; a LeRobot dataset's ``meta/info.json``)."""
    return ds.meta.path if ds.lerobot is not None else ds.root / layout.METADATA_FILE


def select_frame(ds: Dataset, episode: EpisodeRef, frame: int | None = None, time_s: float | None = None) -> tuple[int, int]:
    """(frame index, timestamp ns) in the first camera's frames: ``frame`` K, or the last frame at or
    before ``time_s`` seconds after the episode's first frame, or the middle frame."""
    names = ds.camera_names
    if not names:
        raise DatasetError(_meta_file(ds), "the dataset has no camera: nothing to show")
    cam = ds.load_camera(names[0], episode)
    n = cam.num_frames
    if n == 0:
        raise DatasetError(cam.path, "no frames")
    if frame is not None:
        if not 0 <= frame < n:
            raise DatasetError(cam.path, f"no frame {frame}: camera {names[0]} has frames 0..{n - 1}")
        k = frame
    elif time_s is not None:
        span = (cam.timestamps[-1] - cam.timestamps[0]) / 1e9
        if not 0 <= time_s <= span:
            raise DatasetError(cam.path, f"time {time_s:g} s is outside the episode's frames (0..{span:.3f} s)")
        t = int(cam.timestamps[0]) + int(round(time_s * 1e9))
        k = int(sampler.align(cam.timestamps, np.array([t], np.int64), "previous")[0])
    else:
        k = n // 2
    return k, int(cam.timestamps[k])


def _at(stamps: np.ndarray, t: int) -> int:
    return int(sampler.align(stamps, np.array([t], np.int64), "previous")[0])


def _scale(h: int) -> int:
    return max(1, math.ceil(MIN_PANEL_HEIGHT / max(h, 1)))


def _save(fig, out: Path) -> None:
    _, plt = _mpl()
    try:
        atomic_write_with(out, lambda tmp: fig.savefig(tmp, format="png", dpi=_DPI))
    finally:
        plt.close(fig)


def show_frame(ds: Dataset, episode: EpisodeRef, out: str | os.PathLike, frame: int | None = None,
               time_s: float | None = None) -> Layout:
    """Write one PNG: a row per camera; columns RGB, depth (viridis, scale bar in metres) and labels
    (fixed colour per label, legend of the labels present) for simulated data, RGB only otherwise."""
    matplotlib, plt = _mpl()
    from matplotlib.patches import Patch

    out = Path(out)
    ep_id = ds.episode_id(episode)
    k, t = select_frame(ds, episode, frame, time_s)
    sim = {} if ds.lerobot is not None else ds.sim_streams(episode)  # LeRobot: no sidecar
    table = label_table(ds)
    pal = label_palette(table)
    rows = []
    for name in ds.camera_names:
        cam = ds.load_camera(name, episode)
        i = _at(cam.timestamps, t)
        rgb = cam.get_frame(i).load()
        depth = labels = None
        if f"depth/{name}" in sim:
            ts, arr = sim[f"depth/{name}"]
            depth = arr[_at(ts, t)]
        if f"labels/{name}" in sim:
            ts, arr = sim[f"labels/{name}"]
            labels = arr[_at(ts, t)]
        rows.append((name, rgb, depth, labels, int(cam.timestamps[i])))
    h = max(r[1].shape[0] for r in rows)
    w = max(r[1].shape[1] for r in rows)
    s = _scale(h)
    pw, ph = w * s, h * s
    has_depth = any(r[2] is not None for r in rows)
    has_labels = any(r[3] is not None for r in rows)
    gap, top, row_title, left = 24, 56, 24, 16
    bar_w, legend_w = 90, 150
    cols = [("rgb", pw)] + ([("depth", pw + bar_w)] if has_depth else []) + ([("labels", pw + legend_w)] if has_labels else [])
    W = max(left + sum(c[1] for c in cols) + gap * (len(cols) - 1) + 16, 760)  # room for the title
    H = top + len(rows) * (row_title + ph) + (len(rows) - 1) * 12 + 16
    fig = plt.figure(figsize=(W / _DPI, H / _DPI), dpi=_DPI)
    t0 = int(ds.load_camera(ds.camera_names[0], episode).timestamps[0])
    fig.text(left / W, 1 - 18 / H, f"{ds.root.name}: episode {ep_id}, frame {k}, t = {(t - t0) / 1e9:.3f} s "
             f"({t} ns)", fontsize=12, weight="bold", va="center")
    fig.text(left / W, 1 - 40 / H, "stored data (not re-simulated); depth in metres along the optical axis"
             if has_depth else "stored data", fontsize=9, color="#444444", va="center")
    result = Layout(out, (W, H), s, timestamp=t, frame=k)
    cmap = matplotlib.colormaps[DEPTH_CMAP]
    for r, (name, rgb, depth, labels, t_cam) in enumerate(rows):
        y_top = top + r * (row_title + ph + 12) + row_title
        x = left
        for col, width in cols:
            if col == "rgb":
                img, title = rgb, f"{name}: RGB" + ("" if t_cam == t else f" (frame at {t_cam} ns)")
            elif col == "depth":
                img, title = None, f"{name}: depth"
                if depth is not None:
                    finite = depth[np.isfinite(depth)]
                    lo, hi = (np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0))
                    hi = hi if hi > lo else lo + 1e-3
                    img = (cmap(np.clip((depth - lo) / (hi - lo), 0, 1))[..., :3] * 255).round().astype(np.uint8)
                    cax = fig.add_axes(((x + pw + 12) / W, 1 - (y_top + ph) / H, 14 / W, ph / H))
                    sm = matplotlib.cm.ScalarMappable(norm=matplotlib.colors.Normalize(lo, hi), cmap=cmap)
                    cb = fig.colorbar(sm, cax=cax)
                    cb.set_label("depth (m)", fontsize=8)
                    cb.ax.tick_params(labelsize=8)
            else:
                img, title = None, f"{name}: labels"
                if labels is not None:
                    img = pal[labels]
                    present = [int(v) for v in np.unique(labels)]
                    handles = [Patch(facecolor=np.array(pal[v]) / 255, edgecolor="#777777", label=f"{v} {table.get(v, '?')}")
                               for v in present]
                    fig.legend(handles=handles, loc="upper left", fontsize=8, frameon=False, title="labels present",
                               title_fontsize=8, bbox_to_anchor=((x + pw + 8) / W, 1 - y_top / H))
            fig.text(x / W, 1 - (y_top - 8) / H, title, fontsize=9, va="center")
            if img is not None:
                big = np.repeat(np.repeat(img, s, axis=0), s, axis=1)
                fig.figimage(big, xo=x, yo=H - y_top - big.shape[0], origin="upper")
                result.panels[(name, col)] = (x, y_top, x + big.shape[1], y_top + big.shape[0])
            x += width + gap
    _save(fig, out)
    return result


def plot_episode(ds: Dataset, episode: EpisodeRef, out: str | os.PathLike, hz: float = 10.0) -> Path:
    """Write a PNG of the episode's joint positions (solid: obs qpos) and commands (dashed: action
    qpos) over time, one panel per arm; dots mark the ``hz`` sampling grid (causal ``previous``
    alignment), ticks at the bottom mark each camera's frame times. A LeRobot dataset of another robot
    (no arm mapped) has a panel per ``lerobot/<feature>`` obs stream, values as stored, dashed the action
    stream with the same dimension names."""
    _, plt = _mpl()
    out = Path(out)
    obs, act = ds.streams(episode, "obs"), ds.streams(episode, "action")
    # (obs stream, action stream or None, axis label)
    panels = [(obs[key], act.get(key), f"{key.rsplit('/', 1)[0]} qpos (rad)") for key in obs if key.endswith("/qpos")]
    if not panels and ds.lerobot is not None:
        for key, o in obs.items():
            a = next((s for s in act.values() if s.columns == o.columns), None)
            panels.append((o, a, f"{key.split('/', 1)[1]} (as stored)"))
    if not panels:
        raise DatasetError(ds.episode_path(episode), "no qpos stream to plot")
    # the joints are plotted whether or not the cameras' files are there: a missing MP4 is a labelled empty row
    cams = ds.load_cameras(episode, missing_ok=True)
    gone = {name for name, c in cams.items() if isinstance(c, MissingVideo)}
    stamps = [s.timestamps for s in list(obs.values()) + list(act.values())] + \
        [c.timestamps for name, c in cams.items() if c.num_frames and name not in gone]
    start, end = sampler.common_range(stamps)
    grid = sampler.time_grid(start, end, hz)
    t0 = min(int(a[0]) for a in stamps)
    fig, axes = plt.subplots(len(panels) + 1, 1, figsize=(11, 3.2 * len(panels) + 1.2), sharex=True,
                             gridspec_kw={"height_ratios": [3] * len(panels) + [0.5]})
    for ax, (o, a, label) in zip(axes, panels):
        for j, col in enumerate(o.columns):
            colour = OKABE_ITO[j % len(OKABE_ITO)]
            ax.plot((o.timestamps - t0) / 1e9, o.values[:, j], color=colour, lw=1.3, label=col)
            if a is not None:
                ax.plot((a.timestamps - t0) / 1e9, a.values[:, j], color=colour, lw=1.0, ls="--")
            idx = sampler.align(o.timestamps, grid, "previous")
            ax.plot((grid - t0) / 1e9, o.values[idx, j], ".", color=colour, ms=3)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(ncol=8, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.suptitle(f"{ds.root.name}: episode {ds.episode_id(episode)}: joint positions, solid obs, dashed action; "
                 f"dots: the {hz:g} Hz sampling grid ({len(grid)} samples)", fontsize=10)
    rug = axes[-1]
    for r, (name, cam) in enumerate(cams.items()):
        if name not in gone:
            rug.vlines((cam.timestamps - t0) / 1e9, r + 0.1, r + 0.9, color=OKABE_ITO[(r + 5) % 8], lw=0.8)
    rug.set_yticks([r + 0.5 for r in range(len(cams))],
                   [f"{n} (video missing)" if n in gone else n for n in cams], fontsize=8)
    rug.set_ylim(0, max(len(cams), 1))
    rug.set_xlabel("time since the episode's first sample (s)")
    rug.set_title("camera frame times", fontsize=8, loc="left")
    fig.tight_layout()
    _save(fig, out)
    return out


def contact_sheet(ds: Dataset, out: str | os.PathLike, per: str = "episode", camera: str | None = None,
                  frame: int | None = None, time_s: float | None = None) -> Layout:
    """Write a grid of one RGB frame per episode (``per="task"``: the first episode of each task)
    from ``camera`` (default the first), at ``frame``/``time_s`` (default each episode's middle)."""
    _, plt = _mpl()
    out = Path(out)
    if per not in ("episode", "task"):
        raise ValueError(f"per must be 'episode' or 'task', not {per!r}")
    if not ds.camera_names:
        raise DatasetError(_meta_file(ds), "the dataset has no camera: nothing to show")
    camera = camera or ds.camera_names[0]
    if camera not in ds.camera_names and layout.LEGACY_CAMERA_RENAMES.get(camera) in ds.camera_names:
        camera = layout.LEGACY_CAMERA_RENAMES[camera]  # left_wrist -> wrist_left, as everywhere a camera is named
    if camera not in ds.camera_names:
        raise DatasetError(_meta_file(ds), f"no camera {camera!r} (have {', '.join(ds.camera_names)})")
    eps = ds.episodes
    if per == "task":
        first: dict = {}
        for ep in eps:
            first.setdefault(ep.get("task_index"), ep)
        eps = list(first.values())
    if not eps:
        raise DatasetError(_meta_file(ds), "no episodes")
    tiles = []
    for ep in eps:
        cam = ds.load_camera(camera, ep)
        if frame is not None or time_s is not None:
            k, t = select_frame(ds, ep, frame, time_s)
            k = _at(cam.timestamps, t)
        else:
            k = cam.num_frames // 2
        if cam.num_frames == 0:
            raise DatasetError(cam.path, "no frames")
        tiles.append((ds.episode_id(ep), ep, cam.get_frame(k).load()))
    h = max(t[2].shape[0] for t in tiles)
    w = max(t[2].shape[1] for t in tiles)
    s = max(1, math.ceil(120 / h))
    n = len(tiles)
    ncol = min(n, max(1, math.ceil(math.sqrt(n * 1.3))))
    nrow = math.ceil(n / ncol)
    gap, title_h, top = 8, 16, 40
    W = max(ncol * (w * s + gap) + gap, 480)
    H = top + nrow * (title_h + h * s + gap)
    fig = plt.figure(figsize=(W / _DPI, H / _DPI), dpi=_DPI)
    fig.text(gap / W, 1 - 18 / H, f"{ds.root.name}: {camera}, one frame per {per} ({n})", fontsize=11, weight="bold", va="center")
    result = Layout(out, (W, H), s)
    tasks = ds.meta.tasks
    for i, (ep_id, ep, img) in enumerate(tiles):
        r, c = divmod(i, ncol)
        x = gap + c * (w * s + gap)
        y = top + r * (title_h + h * s + gap) + title_h
        big = np.repeat(np.repeat(img, s, axis=0), s, axis=1)
        fig.figimage(big, xo=x, yo=H - y - big.shape[0], origin="upper")
        ok = ep.get("success")
        mark = {True: "success", False: "FAIL", None: "?"}.get(ok, "?")
        label = f"ep {ep_id} {mark}"
        if per == "task" and ep.get("task_index") is not None and ep["task_index"] < len(tasks):
            label = f"task {ep['task_index']}: {tasks[ep['task_index']].get('prompt', '')}"
            label = label if len(label) <= 110 else label[:109] + "\u2026"
        # a long prompt is drawn smaller rather than cut (8 pt is ~5.3 px per character at this dpi)
        size = min(8.0, max(5.0, 8.0 * big.shape[1] / (5.3 * len(label))))
        fig.text(x / W, 1 - (y - 8) / H, label, fontsize=size, va="center", color="#000000" if ok is not False else "#D55E00")
        result.panels[(ep_id, "rgb")] = (x, y, x + big.shape[1], y + big.shape[0])
    _save(fig, out)
    return result
