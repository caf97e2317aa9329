"""Export to one Rerun recording (``.rrd``) that a person opens in the Rerun viewer (extra ``[rerun]``).

Everything is on one ``timestamp`` timeline (the dataset's int64 ns stamps). Per episode ``<id>``:

``/episode/<id>/<obs|action>/<arms>/<side>/<attr>``  Scalars, 8 per row (joint1..7, gripper; pose: x..qz,
                                                      gripper), series named by column
``/episode/<id>/world/<cam>``                         simulated: Pinhole (K from ``simulation.cameras``, OpenCV
                                                      axes RDF) with a Transform3D per frame (``cam_pos``,
                                                      ``cam_mat``), so wrist frusta move with the wrist
``/episode/<id>/world/<cam>/rgb``                     EncodedImage: the stored JPEG bytes (not decoded)
``/episode/<id>/world/<cam>/depth``                   simulated: DepthImage, metres (``meter=1``)
``/episode/<id>/world/<cam>/labels``                  simulated: SegmentationImage; the label table is the
                                                      AnnotationContext of ``/episode/<id>/world``
``/episode/<id>/world/<cube>``                        simulated: Transform3D per frame + a 40 mm Boxes3D
``/episode/<id>/cameras/<cam>/rgb``                   recorded datasets: EncodedImage (no pose known)

The world frame is MuJoCo's (z up). The file is written to a temporary sibling and renamed.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.atomic import tmp_name
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import OutputExistsError
from openarm_sim_dataset.core.palette import LABEL_COLOURS, label_palette, label_table
from openarm_sim_dataset.core.report import Summary, progress

#: MuJoCo camera axes (x right, y up, looking along -z) to OpenCV axes (x right, y down, z forward).
MUJOCO_TO_OPENCV = np.diag([1.0, -1.0, -1.0])
CUBE_HALF_SIZE = 0.02  # m


def _cube_half_size(entry: dict, name: str) -> float:
    """Half edge (m) of cube ``name`` in a (randomised) episode: its recorded variation's, else nominal."""
    size = entry
    for key in ("variation", "physics", "cubes", name, "size"):
        size = size.get(key) if isinstance(size, dict) else None
    ok = isinstance(size, (int, float)) and not isinstance(size, bool) and 0 < size < 1
    return float(size) / 2 if ok else CUBE_HALF_SIZE
TIMELINE = "timestamp"


def _rr():
    try:
        import rerun as rr
    except ImportError:
        raise ImportError("rrd export needs rerun-sdk: pip install 'openarm-sim-dataset[rerun]'") from None
    return rr


def to_rrd(ds: Dataset, out: str | os.PathLike, quiet: bool = False, episodes: list[dict] | None = None) -> Summary:
    """Write ``ds`` (or ``episodes``) as one ``.rrd`` file at ``out`` (refused if it exists)."""
    rr = _rr()
    out = Path(out)
    if out.exists():
        raise OutputExistsError(out, "already exists (refusing to overwrite)")
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = Summary("rrd", out)
    rid = uuid.uuid5(uuid.NAMESPACE_URL, str(ds.root.resolve()))
    rec = rr.RecordingStream("openarm_sim_dataset", recording_id=rid)
    tmp = tmp_name(out)
    rec.save(tmp)
    try:
        table = label_table(ds)
        pal = label_palette(table)
        sim_meta = ds.meta.simulation or {}
        chosen = episodes if episodes is not None else ds.episodes
        bar = progress(len(chosen), "rrd", quiet)
        for ep in chosen:
            ep_id = ds.episode_id(ep)
            base = f"/episode/{ep_id}"
            for kind in layout.KINDS:
                for key, s in ds.streams(ep, kind).items():
                    path = f"{base}/{kind}/{key}"
                    rec.log(path, rr.SeriesLines(names=list(s.columns)), static=True)
                    n, width = s.values.shape
                    rec.send_columns(path, indexes=[rr.TimeColumn(TIMELINE, timestamp=s.timestamps.view("datetime64[ns]"))],
                                     columns=rr.Scalars.columns(scalars=s.values.astype(np.float64).reshape(-1)).partition([width] * n))
                    summary.frames += n
            sim = ds.sim_streams(ep)
            cams = ds.load_cameras(ep)
            if sim:
                rec.log(f"{base}/world", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
                rec.log(f"{base}/world", rr.AnnotationContext(
                    [rr.AnnotationInfo(id=v, label=name, color=tuple(int(c) for c in pal[v])) for v, name in sorted(table.items())]),
                    static=True)
                ts, poses = sim["object_pose"]
                for c in range(poses.shape[1]):
                    name = f"cube_{('red', 'green', 'blue')[c]}" if poses.shape[1] == 3 else f"object_{c}"
                    colour = LABEL_COLOURS.get(name, "#999999").lstrip("#")
                    half = _cube_half_size(ds.episode(ep_id), name)
                    rec.log(f"{base}/world/{name}", rr.Boxes3D(half_sizes=[[half] * 3],
                                                              colors=[tuple(int(colour[i:i + 2], 16) for i in (0, 2, 4))]), static=True)
                    wxyz = poses[:, c, 3:7]
                    rec.send_columns(f"{base}/world/{name}", indexes=[rr.TimeColumn(TIMELINE, timestamp=ts.view("datetime64[ns]"))],
                                     columns=rr.Transform3D.columns(translation=poses[:, c, :3],
                                                                    quaternion=wxyz[:, [1, 2, 3, 0]]))  # rerun: xyzw
            for name, cam in cams.items():
                cam_path = f"{base}/world/{name}" if sim else f"{base}/cameras/{name}"
                stamps = cam.timestamps.view("datetime64[ns]")
                if sim and f"cam_pos/{name}" in sim and name in (sim_meta.get("cameras") or {}):
                    info = sim_meta["cameras"][name]
                    rec.log(cam_path, rr.Pinhole(image_from_camera=np.asarray(info["K"], dtype=np.float64),
                                                 resolution=[int(info["width"]), int(info["height"])],
                                                 camera_xyz=rr.ViewCoordinates.RDF), static=True)
                    pts, pos = sim[f"cam_pos/{name}"]
                    _, mat = sim[f"cam_mat/{name}"]
                    rot = mat.reshape(-1, 3, 3) @ MUJOCO_TO_OPENCV  # world-from-OpenCV-camera
                    rec.send_columns(cam_path, indexes=[rr.TimeColumn(TIMELINE, timestamp=pts.view("datetime64[ns]"))],
                                     columns=rr.Transform3D.columns(translation=pos, mat3x3=rot))
                blobs = [f.read_bytes() for f in cam.frames()]
                rec.send_columns(f"{cam_path}/rgb", indexes=[rr.TimeColumn(TIMELINE, timestamp=stamps)],
                                 columns=rr.EncodedImage.columns(blob=blobs, media_type=["image/jpeg"] * len(blobs)))
                summary.frames += len(blobs)
                for key, make in (("depth", lambda a: rr.DepthImage(a, meter=1.0)), ("labels", rr.SegmentationImage)):
                    if f"{key}/{name}" not in sim:
                        continue
                    fts, arr = sim[f"{key}/{name}"]
                    for t, img in zip(fts.tolist(), arr):
                        rec.set_time(TIMELINE, timestamp=np.datetime64(t, "ns"))
                        rec.log(f"{cam_path}/{key}", make(img))
                    summary.frames += len(arr)
            summary.episodes += 1
            bar.update(1)
        bar.close()
        rec.flush()
        rec.disconnect()
        os.replace(tmp, out)
    except BaseException:
        rec.disconnect()
        tmp.unlink(missing_ok=True)
        raise
    summary.finish()
    summary.bytes = out.stat().st_size
    return summary
