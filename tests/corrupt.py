"""Plant one plausible fault into a copy of a simulated dataset (tests of the validator).

``plant(src, dst, fault)`` copies ``src`` to ``dst`` and corrupts the copy; it returns the
episode id the fault concerns. Faults are written the way a buggy tool would write them
(real parquet, real npz, real JPEG bytes), never by editing the validator's inputs in memory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from openarm_sim_dataset import manifest, sidecar

FAULTS = (
    "drop_frame",
    "depth_in_mm",
    "frozen_wrist_pose",
    "action_shift",
    "nan_qpos",
    "null_qpos_no_statistics",
    "model_changed",
    "truncated_jpeg",
    "missing_episode",
    "unlisted_half_written",
    "stale_frame",
    "jpeg_byte_flip",
    "file_added",
    "frozen_camera",
)
#: faults of a randomised dataset's records (``src`` generated with ``randomize="all"``)
VARIATION_FAULTS = ("variation_changed", "variation_swapped", "variation_removed")
#: faults of meaning only (issue 18): each is meant to be planted with ``reseal=True``, so that only the
#: check that knows its meaning can catch it; they concern the first or second listed episode, so any
#: simulated dataset of >= 2 episodes takes them (single-task, mixed, randomised)
MEANING_FAULTS = (
    "state_warmstart",       # one frame's stored state differs in qacc_warmstart only
    "state_qfrc_applied",    # ... in qfrc_applied only
    "object_pose_rotated",   # one frame's object_pose quaternion turned 90 deg about z (still unit)
    "cam_pose_shifted",      # one frame's head camera position moved 5 mm
    "frame_timestamp_off",   # one frame's sidecar frame_timestamp 1 ns late
    "success_flipped",       # metadata.yaml: success negated
    "outcome_relabelled",    # metadata.yaml: outcome another category, success consistent with it
    "knocked_over_flipped",  # metadata.yaml: the lucky-success flag negated
    "episode_copied",        # the first episode's folder copied over the second's
    "sidecar_task_changed",  # the sidecar's recorded task another one
    "sidecar_seed_changed",  # the sidecar's recorded seed input another one
)
#: faults of the keys metadata.yaml declares (issue 26 item 4), each caught by the check that re-derives
#: the key (see docs/guarantees/keys.md, "Every key we write"); planted with ``reseal=True`` like the above
KEY_FAULTS = (
    "K_wrong",                 # simulation.cameras.head.K: focal lengths 2 % long (the K a user projects with)
    "perception_size_wrong",   # equipment.perceptions.cameras.head: width 16 px more than the frames have
    "camera_size_wrong",       # simulation.cameras.head: height 8 px more than the scene draws
    "initial_cubes_moved",     # the second entry's initial_cubes: the red cube 1 cm further in x
    "camera_hz_wrong",         # simulation.camera_hz doubled (frequencies and frames unchanged)
    "state_hz_wrong",          # simulation.state_hz 500 (frequencies and streams at 250 Hz)
    "attempts_changed",        # the second entry's attempts one more (only a regeneration shows it)
    "head_pose_moved",         # randomised: the second entry's variation moves the head camera 1 cm in x
)
#: faults of a rollout dataset's keys (``dataset-evaluate``; issue 38 item 5), planted like KEY_FAULTS into
#: the second entry or the dataset's ``evaluation:``/``model:`` blocks (tests/test_rollout_keys.py)
ROLLOUT_KEY_FAULTS = (
    "success_any_flipped",     # the second entry's success_any negated (a success at the end says false)
    "arm_contacts_changed",    # the second entry's arm_contacts one more than the replay counts
    "policy_attempts_changed", # a policy's rollout entry says attempts 1 (a policy makes no scripted attempt)
    "stop_on_success_set",     # evaluation.stop_on_success true, the episodes run on past their first success
    "stop_on_success_cleared", # evaluation.stop_on_success false, the episodes stopped at their first success
    "control_hz_doubled",      # evaluation.control_hz doubled (each command is held twice as long)
    "model_sha256_changed",    # model.sha256: another hash than the policy's (checkpoint file or source)
    "policy_renamed",          # evaluation.policy and model.source/name another built-in policy
)
#: faults of an episode's summary.json (issue 27), planted by :func:`plant_summary` into episode 1 and
#: re-sealed without re-deriving the summary (what a tool that edits files and re-hashes them leaves):
#: only ``episode_summary`` can catch them
SUMMARY_FAULTS = (
    "summary_rows_off",        # the summary says one row fewer for a stream than its file has
    "summary_frame_removed",   # the head camera's last frame deleted, the summary left as it was
)
#: The frame of the per-frame sidecar faults above.
MEANING_FRAME = 3

#: faults planted into a recorded dataset (``src`` is e.g. tests/fixture/dataset_0.4.0)
RECORDED_FAULTS = ("frozen_camera_recorded",)

#: the frame of episode 0's wrist camera replaced by the one before it (the wrist moves there)
STALE_FRAME = 12


def _state_files(ep_dir: Path) -> list[Path]:
    return sorted(ep_dir.glob("*/arms/*/state.parquet"))


def _drop_row(table: pa.Table, i: int) -> pa.Table:
    keep = np.r_[0:i, i + 1 : table.num_rows]
    return table.take(pa.array(keep))


def frame_files(cam_dir: Path) -> list[Path]:
    return sorted(cam_dir.iterdir(), key=lambda p: int(p.stem))


def flip_entropy_byte(data: bytes) -> bytes:
    """One bit flipped in the middle of a JPEG's entropy-coded scan data: it still decodes (bit rot),
    with wrong pixels. Bytes that are or would become 0xFF (markers) are avoided."""
    sos = data.index(b"\xff\xda")
    header_len = int.from_bytes(data[sos + 2 : sos + 4], "big")
    start, end = sos + 2 + header_len, data.rindex(b"\xff\xd9")
    i = (start + end) // 2
    while data[i] in (0xFF, 0xFE) or data[i - 1] == 0xFF:
        i += 1
    return data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1 :]


def plant(src: Path, dst: Path, fault: str, reseal: bool = False) -> str:
    """Copy ``src`` to ``dst``, plant ``fault`` and return the episode id it concerns.

    ``reseal``: afterwards rewrite every episode's integrity manifest from the files as they now are
    (what a tool that edits files and re-hashes them leaves), so that ``integrity`` cannot be what
    catches the fault: only a check of meaning can."""
    ep = _plant(src, dst, fault)
    if reseal:
        for ep_dir in sorted((dst / "episodes").iterdir()):
            if ep_dir.is_dir() and manifest.read(ep_dir) is not None:
                manifest.write(ep_dir)
    return ep


def plant_summary(root: Path, fault: str, ep: str = "1") -> str:
    """Plant a :data:`SUMMARY_FAULTS` fault into ``root`` in place (episode ``ep``), re-sealing its
    manifest with the summary as it is; returns ``ep``."""
    ep_dir = root / "episodes" / ep
    if fault == "summary_rows_off":
        path = ep_dir / "summary.json"
        doc = json.loads(path.read_text())
        doc["streams"][sorted(doc["streams"])[0]]["rows"] -= 1
        path.write_text(json.dumps(doc, sort_keys=True))
    elif fault == "summary_frame_removed":
        frame_files(ep_dir / "cameras" / "head")[-1].unlink()
    else:
        raise ValueError(fault)
    manifest.write(ep_dir, summary=False)
    return ep


def _edit_meta(dst: Path, fn) -> None:
    meta_path = dst / "metadata.yaml"
    doc = yaml.safe_load(meta_path.read_text())
    fn(doc)
    meta_path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _plant_meaning(dst: Path, fault: str) -> str:
    eps = dst / "episodes"
    ids = [e["id"] for e in yaml.safe_load((dst / "metadata.yaml").read_text())["episodes"]]
    first, ep = ids[0], ids[1]
    p = eps / ep / "sim/sidecar.npz"
    side = sidecar.load_npz(p)
    k = MEANING_FRAME
    if fault in ("state_warmstart", "state_qfrc_applied"):
        from openarm_sim_dataset.sim.models import load_model
        from openarm_sim_dataset.sim.replay import state_components
        from openarm_sim_dataset.sim.scene import SceneConfig

        # the layout of every model of the scene (a variation changes no joint): from the nominal one
        parts = {n: (i, j) for n, i, j in state_components(load_model(SceneConfig()))}
        i, j = parts["qacc_warmstart" if fault == "state_warmstart" else "qfrc_applied"]
        side["state"][k, i] += 1e-3
    elif fault == "object_pose_rotated":
        w, x, y, z = side["object_pose"][k, 0, 3:7]
        h = 0.5 ** 0.5  # q * (cos 45, 0, 0, sin 45): a quarter turn about the cube's z axis
        side["object_pose"][k, 0, 3:7] = (h * (w - z), h * (x + y), h * (y - x), h * (z + w))
    elif fault == "cam_pose_shifted":
        side["cam_pos_head"][k] += (0.005, 0.0, 0.0)
    elif fault == "frame_timestamp_off":
        side["frame_timestamp"][k] += 1
    elif fault in ("sidecar_task_changed", "sidecar_seed_changed"):
        rec = sidecar.read_json(side, sidecar.EPISODE_KEY, p)
        if fault == "sidecar_task_changed":
            rec["task"] = "stack_red_on_blue" if rec["task"] != "stack_red_on_blue" else "pick_place"
        else:
            rec["seed_inputs"]["seed"] += 1
        side[sidecar.EPISODE_KEY] = sidecar.json_array(rec)
    elif fault in ("success_flipped", "outcome_relabelled", "knocked_over_flipped"):
        def edit(doc):
            e = doc["episodes"][1]
            if fault == "success_flipped":
                e["success"] = not e["success"]
            elif fault == "knocked_over_flipped":
                e["knocked_over"] = not e["knocked_over"]
            else:
                e["outcome"] = "dropped_carrying" if e["outcome"] != "dropped_carrying" else "missed_tray"
                e["success"] = False
        _edit_meta(dst, edit)
        return ep
    elif fault == "episode_copied":
        shutil.rmtree(eps / ep)
        shutil.copytree(eps / first, eps / ep)
        return ep
    else:
        raise ValueError(f"unknown fault {fault!r}")
    sidecar.save_npz(p, side)
    return ep


def _plant_key(dst: Path, fault: str) -> str:
    """A key of metadata.yaml written wrong (the episode files untouched); returns the episode it
    concerns (the second listed one, or the first for a dataset-level key)."""
    ids = [e["id"] for e in yaml.safe_load((dst / "metadata.yaml").read_text())["episodes"]]

    def edit(doc):
        sim, e = doc["simulation"], doc["episodes"][1 if len(doc["episodes"]) > 1 else 0]
        if fault == "K_wrong":
            K = sim["cameras"]["head"]["K"]
            K[0][0] *= 1.02
            K[1][1] *= 1.02
        elif fault == "perception_size_wrong":
            doc["equipment"]["perceptions"]["cameras"]["head"]["width"] += 16
        elif fault == "camera_size_wrong":
            sim["cameras"]["head"]["height"] += 8
        elif fault == "initial_cubes_moved":
            e["initial_cubes"][0][0] = round(e["initial_cubes"][0][0] + 0.01, 6)
        elif fault == "camera_hz_wrong":
            sim["camera_hz"] = sim["camera_hz"] * 2
        elif fault == "state_hz_wrong":
            sim["state_hz"] = 500.0
        elif fault == "attempts_changed":
            e["attempts"] += 1
        elif fault == "head_pose_moved":
            e["variation"]["visual"]["cameras"]["head"]["pos"][0] += 0.01
        elif fault == "success_any_flipped":
            e["success_any"] = not e["success_any"]
        elif fault == "arm_contacts_changed":
            e["arm_contacts"] = e.get("arm_contacts", 0) + 1
        elif fault == "policy_attempts_changed":
            e["attempts"] += 1
        elif fault in ("stop_on_success_set", "stop_on_success_cleared"):
            doc["evaluation"]["stop_on_success"] = fault == "stop_on_success_set"
        elif fault == "control_hz_doubled":
            doc["evaluation"]["control_hz"] *= 2
        elif fault == "model_sha256_changed":
            doc["model"]["sha256"] = "%064x" % (int(doc["model"]["sha256"], 16) ^ 1)
        elif fault == "policy_renamed":
            other = "zero" if doc["evaluation"]["policy"] != "zero" else "random"
            doc["evaluation"]["policy"] = doc["model"]["source"] = doc["model"]["name"] = other
        else:
            raise ValueError(f"unknown fault {fault!r}")

    _edit_meta(dst, edit)
    second = ("initial_cubes_moved", "attempts_changed", "head_pose_moved", "success_any_flipped",
              "arm_contacts_changed", "policy_attempts_changed")
    return ids[1] if fault in second and len(ids) > 1 else ids[0]


def _plant(src: Path, dst: Path, fault: str) -> str:
    shutil.copytree(src, dst)
    eps = dst / "episodes"
    if fault in MEANING_FAULTS:
        return _plant_meaning(dst, fault)
    if fault in KEY_FAULTS or fault in ROLLOUT_KEY_FAULTS:
        return _plant_key(dst, fault)
    if fault == "drop_frame":
        ep = eps / "0"
        side = sidecar.load_npz(ep / "sim/sidecar.npz")
        t3 = int(side["frame_timestamp"][3])
        for f in _state_files(ep):  # the state sample at camera frame 3's time
            t = pq.read_table(f)
            ts = t.column("timestamp").cast(pa.int64()).to_numpy()
            pq.write_table(_drop_row(t, int(np.flatnonzero(ts == t3)[0])), f)
        for cam in (ep / "cameras").iterdir():
            (cam / f"{t3}.jpeg").unlink()
        per_frame = {k: v for k, v in side.items() if k not in ("initial_state", "physics_ctrl")}
        side.update({k: np.delete(v, 3, axis=0) for k, v in per_frame.items()})
        sidecar.save_npz(ep / "sim/sidecar.npz", side)
        frames = sidecar.load_npz(ep / "sim/frames.npz")
        sidecar.save_npz(ep / "sim/frames.npz", {k: np.delete(v, 3, axis=0) for k, v in frames.items()}, compress=True)
        return "0"
    if fault == "depth_in_mm":
        p = eps / "1/sim/frames.npz"
        frames = sidecar.load_npz(p)
        frames["depth_head"] = (frames["depth_head"] * 1000.0).astype(np.float32)
        sidecar.save_npz(p, frames, compress=True)
        return "1"
    if fault == "frozen_wrist_pose":
        p = eps / "1/sim/sidecar.npz"
        side = sidecar.load_npz(p)
        for key in ("cam_pos_wrist_right", "cam_mat_wrist_right"):
            side[key] = np.repeat(side[key][:1], len(side[key]), axis=0)
        sidecar.save_npz(p, side)
        return "1"
    if fault == "action_shift":
        f = eps / "0/action/arms/right/state.parquet"
        t = pq.read_table(f)
        rows = t.column("qpos").to_pylist()
        shifted = rows[1:] + rows[-1:]  # each action now shows the next sample's command
        pq.write_table(t.set_column(1, "qpos", pa.array(shifted, type=pa.list_(pa.float32()))), f)
        return "0"
    if fault in ("nan_qpos", "null_qpos_no_statistics"):
        f = eps / "1/obs/arms/right/state.parquet"
        t = pq.read_table(f)
        rows = t.column("qpos").to_pylist()
        rows[10][2] = float("nan") if fault == "nan_qpos" else None
        pq.write_table(t.set_column(1, "qpos", pa.array(rows, type=pa.list_(pa.float32()))), f,
                       write_statistics=fault == "nan_qpos")
        return "1"
    if fault == "model_changed":
        meta_path = dst / "metadata.yaml"
        doc = yaml.safe_load(meta_path.read_text())
        doc["simulation"]["scene"]["cube_mass"] = doc["simulation"]["scene"]["cube_mass"] * 1.1
        meta_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return "0"
    if fault in VARIATION_FAULTS:  # metadata.yaml edited by hand, episode files untouched
        meta_path = dst / "metadata.yaml"
        doc = yaml.safe_load(meta_path.read_text())
        e0, e1 = doc["episodes"][0], doc["episodes"][1]
        if fault == "variation_changed":  # a heavier cube than the episode ran with
            e1["variation"]["physics"]["cubes"]["cube_red"]["mass"] *= 1.1
        elif fault == "variation_swapped":  # consistent with a model, but episode 0's
            for key in ("variation", "model_sha256"):
                e0[key], e1[key] = e1[key], e0[key]
        else:
            del e1["variation"], e1["model_sha256"]
        meta_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return "1"
    if fault == "truncated_jpeg":
        frames = sorted((eps / "0/cameras/head").iterdir())
        data = frames[5].read_bytes()
        frames[5].write_bytes(data[: len(data) // 2])
        return "0"
    if fault == "missing_episode":
        shutil.rmtree(eps / "1")
        return "1"
    if fault == "unlisted_half_written":
        half = eps / "2"
        shutil.copytree(eps / "0" / "obs", half / "obs")  # killed after obs, before cameras and metadata
        return "2"
    if fault == "stale_frame":  # a camera that delivered the previous frame again
        frames = frame_files(eps / "0/cameras/wrist_right")
        frames[STALE_FRAME].write_bytes(frames[STALE_FRAME - 1].read_bytes())
        return "0"
    if fault == "jpeg_byte_flip":
        f = frame_files(eps / "1/cameras/head")[8]
        f.write_bytes(flip_entropy_byte(f.read_bytes()))
        return "1"
    if fault == "file_added":
        (eps / "1/cameras/notes.txt").write_text("added by hand\n")
        return "1"
    if fault == "frozen_camera":  # 7 frames at 5 Hz (1.2 s) show frame 10's image while the arm moves
        frames = frame_files(eps / "1/cameras/wrist_right")
        for f in frames[11:17]:
            f.write_bytes(frames[10].read_bytes())
        return "1"
    if fault == "frozen_camera_recorded":  # recorded fixture (30 Hz, 0.37 s): frames 2..11 all show frame 2
        cam = eps / "0/cameras/head"
        frames = frame_files(cam)
        for f in frames[3:]:
            f.write_bytes(frames[2].read_bytes())
        return "0"
    raise ValueError(f"unknown fault {fault!r}")
