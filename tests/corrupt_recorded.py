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
    "action_in_degrees": "action_follows_obs",  # the action qpos of both arms written in degrees
    "episode_duplicated": "duplicate_episodes",  # episode 0 copied under the new id 2
    "jpeg_reencoded_quality": "jpeg_encoding",  # episode 1's head camera re-encoded at quality 60 (frames 10..)
    "jpeg_resized": "jpeg_encoding",  # episode 1's head camera re-encoded at half the size (frames 10..)
}


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
    elif fault == "arms_swapped_in_obs":
        left = eps / "0/obs/arms/left/state.parquet"
        tmp = left.with_name("swap.tmp")
        left.rename(tmp)
        obs_right.rename(left)
        tmp.rename(obs_right)
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
    else:
        raise ValueError(f"unknown fault {fault!r}")
    reseal(dst)
    return ep
