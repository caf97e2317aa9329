"""What a recording cannot show (issue 26 item 5): the smallest fault of each class that dataset-validate
finds in recorded data (no sidecar), measured by planting faults of decreasing size.

    python tools/measure_recording_limits.py [--dataset DIR] [--classes NAME ...] [--json OUT]

``--dataset``: a recorded dataset (no ``sim/``, no ``simulation:`` block) with a moving right arm and
cameras ``head`` and ``wrist_right``; default: ``dataset-generate --episodes 2 --seed 10 --size 128x96
--camera-hz 5`` stripped of its sidecars (what a robot records of those episodes: the data the default
test fixtures are made of). Each class plants its fault into episode 0 of a copy, at sizes of a
decreasing ladder, re-seals the manifests (so ``integrity`` cannot be what finds it), runs every check
and records which check failed or warned; the ladder stops after two sizes in a row that nothing found.
Prints a Markdown table (docs/guarantees/recordings.md, "What a recording cannot show") and, with ``--json``, the
figures. :func:`plant` is what tests/test_recording_limits.py plants.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from PIL import Image

from openarm_sim_dataset import Dataset, manifest

#: the episode every fault is planted into, and the frame of the one-frame camera faults (the right arm
#: moves there in episode 0 of seed 10)
EPISODE, FRAME = "0", 14


@dataclass(frozen=True)
class FaultClass:
    """A class of fault: what is planted, in what unit, at which sizes (largest first)."""

    name: str
    what: str
    unit: str
    sizes: tuple


def _ladder(top: float, n: int, factor: float = 2 ** -0.5, digits: int = 3) -> tuple:
    return tuple(float(f"{top * factor ** k:.{digits}g}") for k in range(n))


CLASSES = {c.name: c for c in (
    FaultClass("joint_offset_up", "a constant added to every joint of the right arm's obs qpos (a calibration "
               "offset)", "rad", _ladder(1.0, 14)),
    FaultClass("joint_offset_down", "the same, subtracted", "rad", _ladder(1.0, 14)),
    FaultClass("joint_gain", "the right arm's obs qpos scaled about its episode mean by 1 + x (a gear ratio; "
               "qvel unchanged)", "x", _ladder(4.0, 14)),
    FaultClass("joint_spike", "one obs qpos sample of the right arm's joint 2 moved by x (a glitch)", "rad",
               _ladder(1.0, 12)),
    FaultClass("command_delay", "both arms' action stamps later by x (the command clock behind the state's)",
               "ms", (2000, 1000, 700, 500, 250, 100, 20, 4)),
    FaultClass("camera_clock_late", "the head camera's stamps later by x (its pictures lag the joints: a latency)", "ms",
               (1500, 1000, 700, 500, 400, 300, 250, 200, 150, 100, 50)),
    FaultClass("camera_clock_early", "the head camera's stamps earlier by x (its pictures lead the "
               "joints)", "ms", (1500, 1000, 700, 500, 400, 300, 250, 200, 150, 100, 50)),
    FaultClass("frame_brightness", f"one head frame (frame {FRAME}) brighter by x grey levels (re-encoded)",
               "grey levels", (128, 96, 64, 48, 32, 24, 16, 12, 8, 6, 4)),
    FaultClass("camera_brightness", "every head frame brighter by x grey levels (re-encoded)", "grey levels",
               (128, 64)),
    FaultClass("frames_exchanged", f"wrist_right frames {FRAME} and {FRAME} + x exchanged", "frames",
               (16, 12, 8, 6, 5, 4, 3, 2, 1)),
    FaultClass("camera_starts_late", "the head camera's first x frames removed", "frames",
               (20, 16, 12, 8, 6, 5, 4, 3, 2, 1)),
    # all or nothing (size 1: planted)
    FaultClass("camera_mirrored", "every head frame mirrored left-right (re-encoded)", "", (1,)),
    FaultClass("cameras_exchanged", "the head and wrist_right folders exchanged (names swapped)", "", (1,)),
    FaultClass("success_flipped", "the episode's success label negated in metadata.yaml", "", (1,)),
    FaultClass("task_changed", "the episode's task_index another task's (a second task added)", "", (1,)),
)}


# ------------------------------------------------------------------ planting
def _edit_qpos(path: Path, fn) -> None:
    t = pq.read_table(path)
    i = t.schema.get_field_index("qpos")
    v = np.array(t.column("qpos").to_pylist(), dtype=np.float64)
    v = np.asarray(fn(v), dtype=np.float32)
    col = pa.ListArray.from_arrays(pa.array(np.arange(0, v.size + 1, v.shape[1], dtype=np.int32)),
                                   pa.array(v.reshape(-1)))
    pq.write_table(t.set_column(i, "qpos", col), path)


def _shift_stamps(path: Path, ns: int) -> None:
    t = pq.read_table(path)
    i = t.schema.get_field_index("timestamp")
    stamps = pa.array(t.column("timestamp").cast(pa.int64()).to_numpy() + ns).cast(t.schema.field(i).type)
    pq.write_table(t.set_column(i, t.schema.field(i), stamps), path)


def _frames(cam: Path) -> list[Path]:
    return sorted(cam.iterdir(), key=lambda p: int(p.stem))


def _brighter(data: bytes, grey: float) -> bytes:
    with Image.open(io.BytesIO(data)) as im:
        a = np.asarray(im.convert("RGB"), dtype=np.float64)
    out = io.BytesIO()
    Image.fromarray(np.clip(a + grey, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    return out.getvalue()


def plant(src: Path, dst: Path, fault: str, size: float) -> None:
    """Copy the recorded dataset ``src`` to ``dst`` with ``fault`` of ``size`` (its class's unit) in
    episode 0, the manifests re-sealed."""
    shutil.copytree(src, dst)
    ep = dst / "episodes" / EPISODE
    obs = ep / "obs/arms/right/state.parquet"
    if fault in ("joint_offset_up", "joint_offset_down"):
        sign = 1 if fault == "joint_offset_up" else -1
        _edit_qpos(obs, lambda v: np.c_[v[:, :7] + sign * size, v[:, 7:]])
    elif fault == "joint_gain":
        _edit_qpos(obs, lambda v: np.c_[v[:, :7].mean(0) + (1 + size) * (v[:, :7] - v[:, :7].mean(0)), v[:, 7:]])
    elif fault == "joint_spike":
        def spike(v):
            v = v.copy()
            v[len(v) // 2, 1] += size
            return v
        _edit_qpos(obs, spike)
    elif fault == "command_delay":
        for f in (ep / "action").glob("arms/*/state.parquet"):
            _shift_stamps(f, int(size * 1e6))
    elif fault in ("camera_clock_late", "camera_clock_early"):
        ns = int(size * 1e6) * (1 if fault == "camera_clock_late" else -1)
        frames = _frames(ep / "cameras/head")
        for f in frames:
            f.rename(f.with_name(f"tmp-{f.name}"))
        for f in frames:
            f.with_name(f"tmp-{f.name}").rename(f.with_name(f"{int(f.stem) + ns}{f.suffix}"))
    elif fault == "frame_brightness":
        f = _frames(ep / "cameras/head")[FRAME]
        f.write_bytes(_brighter(f.read_bytes(), size))
    elif fault == "camera_brightness":
        for f in _frames(ep / "cameras/head"):
            f.write_bytes(_brighter(f.read_bytes(), size))
    elif fault == "frames_exchanged":
        frames = _frames(ep / "cameras/wrist_right")
        a, b = frames[FRAME], frames[FRAME + int(size)]
        da, db = a.read_bytes(), b.read_bytes()
        a.write_bytes(db)
        b.write_bytes(da)
    elif fault == "camera_starts_late":
        for f in _frames(ep / "cameras/head")[: int(size)]:
            f.unlink()
    elif fault == "camera_mirrored":
        for f in _frames(ep / "cameras/head"):
            with Image.open(f) as im:
                out = io.BytesIO()
                im.convert("RGB").transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(out, "JPEG", quality=90)
            f.write_bytes(out.getvalue())
    elif fault == "cameras_exchanged":
        cams = ep / "cameras"
        (cams / "head").rename(cams / "tmp")
        (cams / "wrist_right").rename(cams / "head")
        (cams / "tmp").rename(cams / "wrist_right")
    elif fault in ("success_flipped", "task_changed"):
        path = dst / "metadata.yaml"
        doc = yaml.safe_load(path.read_text())
        entry = next(e for e in doc["episodes"] if str(e["id"]) == EPISODE)
        if fault == "success_flipped":
            entry["success"] = not entry.get("success")
        else:
            doc["tasks"].append({"prompt": "Another task.", "description": "Planted."})
            entry["task_index"] = len(doc["tasks"]) - 1
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    else:
        raise ValueError(f"unknown fault class {fault!r}")
    for d in sorted((dst / "episodes").iterdir()):
        if d.is_dir() and manifest.read(d) is not None:
            manifest.write(d)


def findings(root: Path) -> dict[str, str]:
    """Every check that failed or warned on ``root``: {check: status}."""
    return {r.check: r.status for r in Dataset(root).validate() if r.status in ("fail", "warn")}


# ------------------------------------------------------------------ the default recorded dataset
def default_dataset(work: Path) -> Path:
    """Episodes 0 and 1 of seed 10 at 128x96, cameras at 5 Hz (the tests' ``generated`` dataset, as
    ``dataset-generate --episodes 2 --seed 10 --size 128x96 --camera-hz 5`` writes it) stripped to what a
    robot records (no sim/ folders, no simulation block), manifests re-sealed."""
    from openarm_sim_dataset.sim.generate import GenerateConfig, generate
    from openarm_sim_dataset.sim.recorder import RecordConfig
    from openarm_sim_dataset.sim.scene import SceneConfig

    gen = work / "generated"
    cfg = GenerateConfig(seed=10, scene=SceneConfig(width=128, height=96), record=RecordConfig(camera_hz=5.0))
    assert generate(gen, range(2), cfg).made == 2
    return strip_sidecars(gen, work / "recorded")


def strip_sidecars(src: Path, dst: Path) -> Path:
    """A copy of a simulated dataset as a robot records it (no sim/ folders, no ``simulation:`` block)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("sim"))
    path = dst / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    doc.pop("simulation", None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    for d in sorted((dst / "episodes").iterdir()):
        if d.is_dir() and manifest.read(d) is not None:
            manifest.write(d)
    return dst


# ------------------------------------------------------------------ the ladder
def measure(src: Path, work: Path, cls: FaultClass, clean: dict[str, str]) -> dict:
    """Plant ``cls`` at each size of its ladder (largest first) until two sizes in a row find nothing;
    returns every size's new findings, the smallest size found and the largest not found below it."""
    tried, misses = [], 0
    for size in cls.sizes:
        dst = work / f"{cls.name}-{size}"
        plant(src, dst, cls.name, size)
        new = {k: v for k, v in findings(dst).items() if clean.get(k) != v}
        shutil.rmtree(dst)
        tried.append({"size": size, "found": new})
        print(f"  {cls.name} {_size(size, cls.unit)}: {new or 'nothing'}", flush=True)
        misses = 0 if new else misses + 1
        if misses == 2:
            break
    found = [t for t in tried if t["found"]]
    smallest = min(found, key=lambda t: t["size"]) if found else None
    below = [t["size"] for t in tried if not t["found"] and smallest and t["size"] < smallest["size"]]
    by_check: dict[str, tuple] = {}  # check -> (smallest size it found, its status there)
    for t in tried:
        for check, status in t["found"].items():
            if check not in by_check or t["size"] < by_check[check][0]:
                by_check[check] = (t["size"], status)
    return {"class": cls.name, "what": cls.what, "unit": cls.unit, "tried": tried,
            "smallest_found": smallest and smallest["size"], "by_check": by_check,
            "largest_missed_below": max(below) if below else None,
            "monotonic": all(t["found"] for t in tried if smallest and t["size"] >= smallest["size"])}


def _size(size: float, unit: str) -> str:
    return "planted" if not unit else f"{size:g} {unit}"


def table(results: list[dict]) -> str:
    """Markdown: per class the smallest size found, by which checks from which size, and the largest
    size below it that nothing found."""
    lines = ["| fault class (planted in episode 0) | smallest found | found by (from size) | not found at |",
             "|---|---|---|---|"]
    for r in results:
        unit = r["unit"]
        if r["smallest_found"] is None:
            size = "not found" + (f" at {_size(r['tried'][0]['size'], unit)}" if unit else "")
        else:
            size = _size(r["smallest_found"], unit) + ("" if r["monotonic"] else " (not monotonic)")
        by = ", ".join(f"`{k}` {v[1]} from {_size(v[0], unit)}" for k, v in
                       sorted(r["by_check"].items(), key=lambda kv: kv[1][0])) or "-"
        miss = "-" if r["largest_missed_below"] is None else _size(r["largest_missed_below"], unit)
        lines.append(f"| {r['what']} | {size} | {by} | {miss} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", type=Path, help="a recorded dataset (default: generated and stripped)")
    p.add_argument("--classes", nargs="+", choices=sorted(CLASSES), default=list(CLASSES))
    p.add_argument("--json", type=Path, help="write the figures here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="recording-limits-") as tmp:
        work = Path(tmp)
        src = args.dataset or default_dataset(work)
        clean = findings(src)
        print(f"clean {src}: {clean or 'no finding'}", flush=True)
        results = [measure(src, work, CLASSES[name], clean) for name in args.classes]
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps({"dataset": str(args.dataset or "default"), "clean": clean,
                                         "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
