"""Faults of meaning in the recorded streams and camera files (tests of the physical-consistency and
encoding checks), planted the way a buggy tool would write them, manifests re-sealed afterwards.

``strip_to_recorded(src, dst)`` turns a generated dataset into what a real robot records: every
``sim/`` folder removed, the ``simulation:`` block removed from metadata.yaml, manifests re-sealed.
``plant(src, dst, fault)`` copies ``src`` (generated or stripped) and plants ``fault``; the manifests
are re-sealed so that ``integrity`` passes and only a check of meaning can catch it. :data:`FAULTS`
names the check that must fail.
"""

from __future__ import annotations

import copy
import io
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from PIL import Image

from openarm_sim_dataset import manifest

#: fault -> the check that must fail on it
FAULTS = {
    "qvel_in_degrees": "qvel_consistency",  # obs qvel written in deg/s
    "qvel_sign_flipped": "qvel_consistency",  # obs qvel with the opposite sign
    "obs_columns_swapped": "action_follows_obs",  # joints 2 and 4 swapped in the obs stream (qpos, qvel, qtorque)
    "arms_swapped_in_obs": "action_follows_obs",  # the obs files of the two arms exchanged
    "idle_arm_moves_on_its_own": "action_follows_obs",  # the held left arm's obs joint 1 away 0.2 rad for 2 s
    "action_in_degrees": "action_follows_obs",  # the action qpos of both arms written in degrees
    "obs_joint_inverted": "action_follows_obs",  # the right arm's obs joint 2 read with the opposite sign (qpos, qvel)
    "episode_duplicated": "duplicate_episodes",  # episode 0 copied under the new id 2
    "jpeg_reencoded_quality": "jpeg_encoding",  # episode 1's head camera re-encoded at quality 60 (frames 10..)
    "jpeg_resized": "jpeg_encoding",  # episode 1's head camera re-encoded at half the size (frames 10..)
}


#: camera faults (issue 26 items 1-3) -> the check that must fail on them (simulated data; recorded: see
#: CAMERA_FAULTS_RECORDED); each concerns episode 0's head camera unless said otherwise
CAMERA_FAULTS = {
    "camera_stops_early": "camera_coverage",  # the last 60 % of its frames removed
    "camera_starts_late": "camera_coverage",  # its first 4 frames removed (a warn on recorded data)
    "foreign_frame": "camera_continuity",  # one frame replaced by the wrist_right camera's frame
    "mirrored_frame": "camera_continuity",  # one frame mirrored left-right by some tool, re-encoded
    "frame_out_of_place": "camera_continuity",  # two frames of wrist_right 1 s apart exchanged
    "pictures_early": "camera_joint_timing",  # frame i shows frame i+N's picture (N frames = 1.4 s)
    "pictures_late": "camera_joint_timing",  # frame i shows frame i-N's picture (recorded: a latency, warn)
    # (both rolled: the N frames that fall off one end come back at the other, so no frame is held still)
}
#: the verdict each camera fault gets on recorded data (no sidecar): 4 missing first frames are within the
#: dropped-sample budget (a warn); pictures 1.4 s late are a camera latency, allowed up to 0.3 s and a warn
#: beyond it where the lead is clear: on the 34 frames of a 5 Hz episode it is not (the lag is reported)
CAMERA_FAULTS_RECORDED = {f: "fail" for f in CAMERA_FAULTS} | {"camera_starts_late": "warn", "pictures_late": "pass"}
#: the frame the one-frame continuity faults concern (the arm moves there in episode 0 of seed 10)
ODD_FRAME = 14


def _camera_frames(cam_dir: Path) -> list[Path]:
    return sorted(cam_dir.iterdir(), key=lambda p: int(p.stem))


def _plant_camera(eps: Path, fault: str, hz: float) -> None:
    head = _camera_frames(eps / "0/cameras/head")
    k = ODD_FRAME
    if fault == "camera_stops_early":
        for f in head[int(len(head) * 0.4):]:
            f.unlink()
    elif fault == "camera_starts_late":
        for f in head[:4]:
            f.unlink()
    elif fault == "foreign_frame":
        head[k].write_bytes(_camera_frames(eps / "0/cameras/wrist_right")[k].read_bytes())
    elif fault == "mirrored_frame":
        with Image.open(head[k]) as im:
            out = io.BytesIO()
            im.convert("RGB").transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(out, "JPEG", quality=90)
        head[k].write_bytes(out.getvalue())
    elif fault == "frame_out_of_place":
        wrist = _camera_frames(eps / "0/cameras/wrist_right")  # the acting arm's camera: its view moves
        j = k + max(int(round(hz)), 2)
        a, b = wrist[k].read_bytes(), wrist[j].read_bytes()
        wrist[k].write_bytes(b)
        wrist[j].write_bytes(a)
    elif fault in ("pictures_early", "pictures_late"):
        n = max(int(round(1.4 * hz)), 1)
        data = [f.read_bytes() for f in head]
        for i, f in enumerate(head):
            f.write_bytes(data[(i + n if fault == "pictures_early" else i - n) % len(head)])  # one cut, no held frame
    else:
        raise ValueError(f"unknown fault {fault!r}")


def reseal(root: Path) -> None:
    """Rewrite every episode's manifest from its files as they are now."""
    for ep_dir in sorted((root / "episodes").iterdir()):
        if ep_dir.is_dir() and manifest.read(ep_dir) is not None:
            manifest.write(ep_dir)


def _edit_meta(root: Path, edit) -> None:
    path = root / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def strip_to_recorded(src: Path, dst: Path) -> Path:
    """A copy of a generated dataset as a real robot would record it (no sim/, no simulation block)."""
    shutil.copytree(src, dst)
    for sim in (dst / "episodes").glob("*/sim"):
        shutil.rmtree(sim)
    _edit_meta(dst, lambda doc: doc.pop("simulation", None))
    reseal(dst)
    return dst


def _list_column(values: np.ndarray) -> pa.ListArray:
    flat = pa.array(np.ascontiguousarray(values, dtype=np.float32).reshape(-1))
    offsets = pa.array(np.arange(0, values.size + 1, values.shape[1], dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, flat)


def edit_columns(path: Path, edit: dict) -> None:
    """Rewrite a state.parquet with ``edit[column](values (N, K)) -> values`` applied."""
    t = pq.read_table(path)
    for name, fn in edit.items():
        i = t.schema.get_field_index(name)
        values = np.array(t.column(name).to_pylist(), dtype=np.float64)
        t = t.set_column(i, name, _list_column(fn(values)))
    pq.write_table(t, path)


def bump(path: Path, rad: float, seconds: float, joint: int = 0):
    """An edit adding a smooth excursion of ``rad`` to ``joint`` for ``seconds`` in the middle of the
    stream at ``path`` (a knock when short, an arm moving on its own when long)."""
    t = pq.read_table(path, columns=["timestamp"]).column(0).cast("int64").to_numpy()
    s = (t - t[0]) / 1e9
    mid = s[-1] / 2
    w = np.clip((s - (mid - seconds / 2)) / seconds, 0, 1)
    shape = rad * np.sin(np.pi * w) ** 0.25  # near its peak for most of the excursion

    def fn(v: np.ndarray) -> np.ndarray:
        v = v.copy()
        v[:, joint] += shape
        return v
    return fn


def _swap(i: int, j: int):
    def fn(v: np.ndarray) -> np.ndarray:
        v = v.copy()
        v[:, [i, j]] = v[:, [j, i]]
        return v
    return fn


def _reencode(cam_dir: Path, quality: int, scale: float = 1.0, start: int = 10) -> None:
    """Frames ``start``.. of a camera re-encoded (a tool that rewrote the end of an episode): the
    camera's own encoding stays the most common one, so the copy is the odd one out."""
    for f in sorted(cam_dir.iterdir(), key=lambda p: int(p.stem))[start:]:
        with Image.open(f) as im:
            im = im.convert("RGB")
            if scale != 1.0:
                im = im.resize((max(1, int(im.width * scale)), max(1, int(im.height * scale))))
            out = io.BytesIO()
            im.save(out, "JPEG", quality=quality)
        f.write_bytes(out.getvalue())


def plant(src: Path, dst: Path, fault: str) -> str:
    """Copy ``src`` to ``dst``, plant ``fault``, re-seal the manifests; returns the episode it concerns."""
    shutil.copytree(src, dst)
    eps = dst / "episodes"
    ep = "0"
    obs_right = eps / "0/obs/arms/right/state.parquet"
    if fault == "qvel_in_degrees":
        edit_columns(obs_right, {"qvel": np.degrees})
    elif fault == "qvel_sign_flipped":
        edit_columns(obs_right, {"qvel": np.negative})
    elif fault == "obs_columns_swapped":
        names = pq.read_schema(obs_right).names
        edit_columns(obs_right, {c: _swap(1, 3) for c in ("qpos", "qvel", "qtorque") if c in names})
    elif fault == "obs_joint_inverted":
        def negate_joint_2(values):
            out = np.array(values, copy=True)
            out[:, 1] = -out[:, 1]
            return out

        edit_columns(obs_right, {"qpos": negate_joint_2, "qvel": negate_joint_2})
    elif fault == "arms_swapped_in_obs":
        left = eps / "0/obs/arms/left/state.parquet"
        tmp = left.with_name("swap.tmp")
        left.rename(tmp)
        obs_right.rename(left)
        tmp.rename(obs_right)
    elif fault == "idle_arm_moves_on_its_own":
        edit_columns(eps / "0/obs/arms/left/state.parquet", {"qpos": bump(eps / "0/obs/arms/left/state.parquet", 0.2, 2.0)})
    elif fault == "action_in_degrees":
        for side in ("right", "left"):
            edit_columns(eps / f"0/action/arms/{side}/state.parquet", {"qpos": np.degrees})
    elif fault == "episode_duplicated":
        shutil.copytree(eps / "0", eps / "2")

        def add(doc):
            entry = dict(copy.deepcopy(doc["episodes"][0]), id="2")  # no YAML aliases
            entry.pop("valid", None)
            entry.pop("validated_at", None)
            doc["episodes"].append(entry)
        _edit_meta(dst, add)
        ep = "2"
    elif fault == "jpeg_reencoded_quality":
        _reencode(eps / "1/cameras/head", quality=60)
        ep = "1"
    elif fault == "jpeg_resized":
        _reencode(eps / "1/cameras/head", quality=90, scale=0.5)
        ep = "1"
    elif fault in CAMERA_FAULTS:
        hz = yaml.safe_load((dst / "metadata.yaml").read_text())["frequencies"]["cameras"]["head"]
        _plant_camera(eps, fault, float(hz))
    else:
        raise ValueError(f"unknown fault {fault!r}")
    reseal(dst)
    return ep
