"""The checkpoint file of :mod:`openarm_sim_dataset.bc`: what a trained policy is and what it reads.

A checkpoint (``.pt``, written atomically) is a dict of tensors, lists, strings and numbers only, so it
loads with ``torch.load(weights_only=True)`` (no pickled code runs):

* ``config``: ``format`` / ``version``, the architecture and its sizes, and **the inputs**: ``inputs``
  (``state`` | ``cameras``), ``cameras`` (names, in the network's order), ``image_shape`` (C, H, W),
  ``camera_hz`` (the rate the training images were drawn at), ``hz`` (the control rate = the loader's
  grid), ``prompts`` (a prompt-conditioned policy's task prompts, in the order of its one-hot input;
  None: it reads none), ``tasks`` (the task names of its demonstrations, what ``dataset-evaluate`` runs
  without ``--tasks``; absent: data that names no task, i.e. the default pick_place), plus the training data's identity (``dataset_sha256``: SHA-256 of its metadata.yaml);
* ``stats``: normalisation statistics (lists of floats);
* ``state_dict``: the weights; ``curve``: the training curve; ``cost``: wall/CPU seconds, parameters.

A resumable training state (``<out>.resume``) has the same ``config`` plus the optimiser, the
scheduler and the random generators; it is removed when the run completes.
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

from openarm_sim_dataset.core.errors import DatasetError

from . import import_torch

FORMAT = "openarm-sim-bc"
#: 2: the package's trainer (``dataset-train``): camera rate and image size in the config, keypoint
#: architecture. Version 1 was ``tools/train_bc.py``'s (no camera rate recorded).
VERSION = 2


class CheckpointError(DatasetError, ValueError):
    """A file that is not a usable checkpoint of this trainer (truncated, foreign, inconsistent)."""


@dataclass(frozen=True)
class PolicyInputs:
    """What a checkpoint's policy reads, hence how it must be evaluated.

    ``cameras``: camera names (empty: none, physics-only evaluation); ``size``: (width, height) px of
    every camera image; ``camera_hz``: the rate its training images were drawn at (Hz); ``control_hz``:
    the rate it acts at (Hz); ``privileged``: it reads simulator state (object poses) from ``info``;
    ``prompts``: the task prompts a prompt-conditioned policy knows (empty: it reads no prompt);
    ``tasks``: the tasks it was trained on (empty: not recorded, the default task)."""

    cameras: tuple[str, ...]
    size: tuple[int, int] | None
    camera_hz: float | None
    control_hz: float
    privileged: bool
    prompts: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()


def inputs_of(cfg: dict) -> PolicyInputs:
    cams = tuple(str(c) for c in cfg.get("cameras") or ())
    shape = cfg.get("image_shape")
    size = (int(shape[2]), int(shape[1])) if cams and shape else None
    chz = cfg.get("camera_hz")
    return PolicyInputs(cameras=cams, size=size, camera_hz=(float(chz) if cams and chz else None),
                        control_hz=float(cfg["hz"]), privileged=cfg.get("inputs") == "state",
                        prompts=tuple(str(x) for x in cfg.get("prompts") or ()),
                        tasks=tuple(str(x) for x in cfg.get("tasks") or ()))


def to_bytes(obj: dict) -> bytes:
    buf = io.BytesIO()
    import_torch().save(obj, buf)
    return buf.getvalue()


def load(path: str | os.PathLike, kind: str = "checkpoint") -> tuple[dict, str]:
    """The checkpoint dict at ``path`` and the SHA-256 of its bytes. Raises :class:`CheckpointError`
    (one line naming the file) on anything that is not a checkpoint of this version."""
    torch = import_torch()
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(path, f"{kind} not found") from None
    except IsADirectoryError:
        raise CheckpointError(path, f"is a folder, not a {kind} file") from None
    try:
        ckpt = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, garbage, pickled code refused by weights_only
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(path, f"not a readable {kind} ({type(e).__name__}: {first[:160]})") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("config"), dict) or ckpt["config"].get("format") != FORMAT:
        raise CheckpointError(path, f"not a dataset-train {kind} (no config of format {FORMAT!r})")
    version = ckpt["config"].get("version")
    if version != VERSION:
        raise CheckpointError(path, f"{kind} version {version!r}; this package reads version {VERSION}"
                                    + (" (version 1 came from tools/train_bc.py: retrain with dataset-train)"
                                       if version == 1 else ""))
    return ckpt, hashlib.sha256(raw).hexdigest()
