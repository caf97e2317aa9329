"""The recording node's configuration: its options (the reference's, environment variables as
defaults: :func:`options`) and the dataset metadata it declares from its inputs and the dataflow's
timers (:func:`build_metadata`, :func:`timer_frequencies`)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

from openarm_sim_dataset.core import layout

from .dataflow_config import timer_hz

#: task used when METADATA_FILE gives none (the recorder needs one for task_index 0)
DEFAULT_TASK = {"prompt": "unspecified", "description": "No tasks were given in METADATA_FILE."}


def timer_frequencies(descriptor: Mapping | None, node_config: Mapping | None) -> dict:
    """``frequencies:`` from the dataflow's timers (:func:`timer_hz` of each input)."""
    freq: dict = {"action": {"arms": {}}, "obs": {"arms": {}}, "cameras": {}}
    for name, source in ((node_config or {}).get("inputs") or {}).items():
        hz = timer_hz(source, descriptor)
        if not hz:
            continue
        if name.startswith("arm_") and name.count("_") >= 2:
            side, kind = name.split("_")[1:3]
            freq["obs" if kind == "observation" else kind]["arms"][side] = hz
        elif name.startswith("camera_"):
            freq["cameras"][name.removeprefix("camera_")] = hz
        elif name.startswith("elevation_"):
            kind = name.removeprefix("elevation_")
            freq.setdefault("obs" if kind == "observation" else kind, {})["lifter"] = hz
    return freq


def build_metadata(metadata: Mapping | None, input_names, operation_type: str = "teleop",
                   docker_image: str | None = None, frequencies: Mapping | None = None) -> dict:
    """The dataset metadata: METADATA_FILE's content plus what the reference adds (operation type,
    docker image, timer frequencies), and what this recorder needs declared up front: embodiments
    (``arms`` OpenArm from ``arm_*`` inputs, ``lifter`` OpenArmCellLifter from ``elevation_*``),
    cameras (from ``camera_*`` inputs) and at least one task."""
    meta = json.loads(json.dumps(dict(metadata or {}), default=str))  # a plain deep copy
    meta["operation_type"] = operation_type
    if operation_type == "rollout" and docker_image:
        meta.setdefault("model", {})["docker_image"] = docker_image
    names = list(input_names)
    eq = meta.setdefault("equipment", {})
    eq.setdefault("id", "OpenArm")
    eq.setdefault("version", "unknown")
    emb = eq.get("embodiments")
    if not isinstance(emb, dict):
        emb = eq["embodiments"] = {}
    if any(n.startswith("arm_") for n in names) and "arms" not in emb:
        emb["arms"] = {"id": layout.EMBODIMENT_OPENARM, "version": "unknown"}
    if any(n.startswith("elevation_") for n in names) and "lifter" not in emb:
        emb["lifter"] = {"id": "OpenArmCellLifter", "version": "unknown"}
    cams = eq.setdefault("perceptions", {}).setdefault("cameras", {})
    for n in names:
        if n.startswith("camera_") and n.removeprefix("camera_") not in cams:
            cams[n.removeprefix("camera_")] = {}
    if not meta.get("tasks"):
        meta["tasks"] = [dict(DEFAULT_TASK)]
    if frequencies is not None:
        meta["frequencies"] = json.loads(json.dumps(frequencies))
    return meta


def build_parser() -> argparse.ArgumentParser:
    """The console script's options: the reference's, with its environment variables as defaults."""
    ap = argparse.ArgumentParser(prog="openarm-sim-dataset-dora-recorder",
                                 description="Record a dora dataflow as an OpenArm 0.4.0 dataset (crash-safe).")
    # (the working directory is resolved when the options are parsed, not when the parser is built)
    ap.add_argument("--directory", type=Path, default=Path(os.environ["DIRECTORY"]) if "DIRECTORY" in os.environ else None,
                    help="the dataset folder (default: $DIRECTORY, else the working directory)")
    ap.add_argument("--docker-image", default=os.getenv("DOCKER_IMAGE", os.getenv("IMAGE")))
    ap.add_argument("--metadata-file", type=Path, default=os.getenv("METADATA_FILE"))
    ap.add_argument("--name", default=os.getenv("NAME", "dataset"))
    ap.add_argument("--operation-type", choices=("teleop", "rollout"), default=os.getenv("OPERATION_TYPE", "teleop"))
    ap.add_argument("--camera-format", choices=("dir", "tar"), default=os.getenv("CAMERA_FORMAT", "dir"))
    ap.add_argument("--stale-after-s", type=float, default=float(os.getenv("STALE_AFTER_S", "1.0")),
                    help="discard an episode whose camera is silent or frozen this long (0: never)")
    return ap


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed options of :func:`build_parser` (environment variables as defaults)."""
    args = build_parser().parse_args(argv)
    if args.directory is None:
        args.directory = Path(os.getcwd())
    return args
