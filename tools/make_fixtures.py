"""Write the small per-layout fixtures under tests/fixture/ (run once; the output is committed).

    python tools/make_fixtures.py [--out tests/fixture]

Each layout (unversioned, 0.1.0, 0.2.0, 0.3.0, 0.4.0 with camera folders, 0.4.0 with tar cameras)
holds the same two episodes ("0" and "7"): 0.4 s of 250 Hz obs/action for both arms, 4 frames of
two cameras (16x12 JPEG, ~30 Hz), and for 0.3.0 a lifter. Legacy writers live here, not in the
package: the package only writes 0.4.0.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openarm_sim_dataset import layout  # noqa: E402
from openarm_sim_dataset.synthetic import synthetic_episode  # noqa: E402
from openarm_sim_dataset.writer import ComponentStreams, write_episode_tree  # noqa: E402

IDS = ("0", "7")
CAMS_NEW = ("wrist_left", "head")  # names in 0.2.0+
CAMS_OLD = ("left_wrist", "head")  # names in 0.1.0 and unversioned (renamed on read)


def value_table(ts: np.ndarray, values: np.ndarray, column: str) -> pa.Table:
    flat = pa.array(values.astype(np.float32).reshape(-1))
    offsets = pa.array(np.arange(0, values.size + 1, values.shape[1], dtype=np.int32))
    return pa.table({"timestamp": pa.array(ts, type=pa.timestamp("ns")), column: pa.ListArray.from_arrays(offsets, flat)})


def episodes():
    for i, ep_id in enumerate(IDS):
        ep = synthetic_episode(i, 0.4, 250.0, 30.0, CAMS_NEW, (16, 12), seed=5, jitter_ns=300_000, quality=80)
        ts = ep.obs[("arms", "right")].timestamps
        elevation = (0.1 + 0.01 * np.arange(len(ts)) / len(ts)).astype(np.float32)[:, None]
        ep.obs[("lifter", None)] = ComponentStreams(ts, {"elevation": elevation})
        ep.action[("lifter", None)] = ComponentStreams(ts, {"elevation": elevation})
        yield ep_id, ep


def base_meta(version: str, cams, lifter: bool) -> dict:
    emb = {"arms": {"id": "OpenArm", "version": "2.0"}}
    freqs = {"obs": {"arms": {"left": 250.0, "right": 250.0}}, "action": {"arms": {"left": 250.0, "right": 250.0}},
             "cameras": {c: 30.0 for c in cams}}
    if lifter:
        emb["lifter"] = {"id": "OpenArmCellLifter", "version": "1.0", "unit": "mm"}
        freqs["obs"]["lifter"] = freqs["action"]["lifter"] = 250.0
    return {
        "version": version, "location": "Fixture", "operator": "make_fixtures", "operation_type": "teleop",
        "tasks": [{"prompt": "Pick the cube.", "description": "Fixture task."}],
        "episodes": [{"id": e, "success": e == "7", "task_index": 0, "custom_note": f"kept {e}"} for e in IDS],
        "equipment": {"id": "Fixture", "version": "1.0", "embodiments": emb,
                      "perceptions": {"cameras": {c: {} for c in cams}}},
        "frequencies": freqs,
        "custom_top_level": {"survives": True},
    }


def write_legacy(root: Path, version: str) -> None:
    column = "positions" if version in ("unversioned", "0.1.0") else "value"
    cams = CAMS_OLD if version in ("unversioned", "0.1.0") else CAMS_NEW
    lifter = version == "0.3.0"
    for ep_id, ep in episodes():
        ep_dir = root / "episodes" / ep_id
        for kind, groups in (("obs", ep.obs), ("action", ep.action)):
            for (emb, comp), streams in groups.items():
                if emb == "lifter":
                    if lifter:
                        d = ep_dir / kind / "lifter"
                        d.mkdir(parents=True, exist_ok=True)
                        pq.write_table(value_table(streams.timestamps, streams.attributes["elevation"], "value"), d / "elevation.parquet")
                    continue
                d = ep_dir / kind / (f"{comp}_arm" if version == "unversioned" else f"arms/{comp}")
                d.mkdir(parents=True, exist_ok=True)
                if version == "0.3.0" and kind == "obs":
                    write_episode_tree(ep_dir, type(ep)(obs={(emb, comp): streams}))
                else:
                    pq.write_table(value_table(streams.timestamps, streams.attributes["qpos"], column), d / "qpos.parquet")
        for new, old in zip(CAMS_NEW, cams):
            if version == "unversioned":
                d = ep_dir / f"{old.removesuffix('_wrist')}_image"
            else:
                d = ep_dir / "cameras" / old
            d.mkdir(parents=True)
            for ts, data in ep.cameras[new]:
                (d / layout.frame_name(ts)).write_bytes(data)
    meta = base_meta(version, cams, lifter)
    if version == "unversioned":
        doc = {"meta": {
            "location": meta["location"], "operator": meta["operator"], "tasks": meta["tasks"],
            "equipment": {
                "equipment_id": "Fixture", "equipment_version": "1.0",
                "leader": {"arms": {"right_arm": {"name": "OpenArm-R1", "hardware_version": "1.2"},
                                    "left_arm": {"name": "OpenArm-R1", "hardware_version": "1.2"}}},
                "follower": {"arms": {}, "cameras": {f"cam_{c}": {} for c in cams}, "sensors": {}},
            },
        }}
        (root / "episodes.jsonl").write_text("".join(json.dumps({"id": e["id"], "success": e["success"], "task_index": 0}) + "\n" for e in meta["episodes"]))
    else:
        doc = meta
    (root / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def write_current(root: Path, camera_format: str) -> None:
    for ep_id, ep in episodes():
        ts = ep.obs[("arms", "right")].timestamps
        # a recorded Cartesian pose: unit quaternions, metres
        ang = np.linspace(0, 0.5, len(ts))
        pose = np.stack([0.3 + 0 * ang, -0.2 + 0.1 * ang, 0.1 * ang, np.cos(ang / 2), 0 * ang, 0 * ang, np.sin(ang / 2), 0.02 + 0 * ang], 1)
        ep.obs[("arms", "right")].attributes["pose"] = pose.astype(np.float32)
        write_episode_tree(root / "episodes" / ep_id, ep, camera_format)
    (root / "metadata.yaml").write_text(yaml.safe_dump(base_meta("0.4.0", CAMS_NEW, True), sort_keys=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "tests" / "fixture")
    args = ap.parse_args()
    for name, fn in (
        ("dataset_unversioned", lambda r: write_legacy(r, "unversioned")),
        ("dataset_0.1.0", lambda r: write_legacy(r, "0.1.0")),
        ("dataset_0.2.0", lambda r: write_legacy(r, "0.2.0")),
        ("dataset_0.3.0", lambda r: write_legacy(r, "0.3.0")),
        ("dataset_0.4.0", lambda r: write_current(r, "dir")),
        ("dataset_0.4.0_tar", lambda r: write_current(r, "tar")),
    ):
        root = args.out / name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        fn(root)
        print("wrote", root)


if __name__ == "__main__":
    main()
