"""Shipped baselines: a checkpoint beside a card that says how to make it again and what it scored.

A card (``<name>.md`` beside ``<name>.pt``) is Markdown opening with a YAML front matter block::

    ---
    checkpoint: pick_place_cameras.pt
    checkpoint_sha256: ...          # the .pt's bytes
    generate: [dataset-generate ..., dataset-render ...]   # the exact commands, in order
    train: dataset-train ...
    dataset_metadata_sha256: ...    # metadata.yaml of the training dataset, as the checkpoint records it
    physics_dataset: {command: ..., content_sha256: ...}   # reproducible on any machine of the kind
                    # (optional prefix: {episodes: N, content_sha256: ...}: of its first N episodes, what
                    # the slow test regenerates for a recipe CI cannot afford whole; a list of such
                    # blocks for a training set merged from several generations)
    evaluate: dataset-evaluate ...
    evaluation: {seed: S, episodes: N, successes: K, wilson95: [lo, hi], ...}
    ---

``content_sha256`` hashes metadata.yaml as a document without the keys that name the machine or the
checkout it was made on (``simulation.platform``: the kernel release; ``simulation.generator.git_commit``;
``simulation.render.source.path``): a fresh generation on another machine of the same kind (same MuJoCo
build, Python, numpy) gives the same value, while its raw SHA-256 would differ.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import yaml

from openarm_sim_dataset.core.atomic import atomic_write_bytes
from openarm_sim_dataset.core.errors import DatasetError

#: the folder of the repository that holds the shipped checkpoints and their cards
BASELINES_DIR = "baselines"


def content_sha256(dataset: str | os.PathLike, episodes: int | None = None) -> str:
    """SHA-256 of ``dataset``'s metadata.yaml as a document, without the machine- and checkout-naming
    keys (see the module doc): equal for the same data generated on another machine of the kind.
    ``episodes``: of its first N entries only, which is the content of the same command run with
    ``--episodes N`` (episode i of a generation depends only on the seed and i)."""
    doc = yaml.safe_load((Path(dataset) / "metadata.yaml").read_text())
    if episodes is not None and isinstance(doc, dict):
        doc["episodes"] = list(doc.get("episodes") or [])[:episodes]
    sim = doc.get("simulation") if isinstance(doc, dict) else None
    if isinstance(sim, dict):
        sim.pop("platform", None)
        sim.pop("cpu", None)  # (added at stop 32; the physics it names is what the content hashes)
        if isinstance(sim.get("generator"), dict):
            sim["generator"].pop("git_commit", None)
        src = (sim.get("render") or {}).get("source") if isinstance(sim.get("render"), dict) else None
        if isinstance(src, dict):
            src.pop("path", None)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def read_card(path: str | os.PathLike) -> dict:
    """The front matter of a card (a dict); :class:`DatasetError` naming the file if it has none."""
    path = Path(path)
    text = path.read_text()
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        raise DatasetError(path, "a baseline card opens with a YAML front matter block between --- lines")
    doc = yaml.safe_load(text[4:text.index("\n---\n", 4)])
    if not isinstance(doc, dict) or "checkpoint" not in doc:
        raise DatasetError(path, "the card's front matter names no checkpoint")
    return doc


def write_card(path: str | os.PathLike, front: dict, body: str) -> None:
    """Write a card: ``front`` as the YAML front matter, then ``body`` (Markdown)."""
    text = "---\n" + yaml.safe_dump(front, sort_keys=False, width=10_000) + "---\n\n" + body.strip() + "\n"
    atomic_write_bytes(Path(path), text.encode())


def shipped(root: str | os.PathLike) -> list[tuple[Path, dict]]:
    """Every card under ``root/baselines`` with its front matter, by name."""
    return [(p, read_card(p)) for p in sorted((Path(root) / BASELINES_DIR).glob("*.md")) if p.name != "README.md"]
