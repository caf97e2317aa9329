"""Behaviour cloning on OpenArm datasets (extra ``[torch]``): the trainer behind ``dataset-train`` and
the policies ``dataset-evaluate --policy X.pt`` runs.

    from openarm_sim_dataset.bc import TrainConfig, train, load_policy
    result = train(TrainConfig("runs/cams", inputs="cameras", out="runs/bc.pt", steps=8000))
    policy = load_policy("runs/bc.pt")          # reset() / act(observation[, info]) -> 16 targets
    policy.inputs                               # cameras, size, camera rate, control rate it was trained with

Modules: :mod:`.model` (the networks), :mod:`.checkpoint` (the file, and what a policy reads),
:mod:`.trainer` (data, optimisation, resume), :mod:`.policy` (a checkpoint as an evaluator policy),
:mod:`.ensemble` (several checkpoints as one policy playing the mean of their chunks).
"""

from __future__ import annotations

from openarm_sim_dataset.core.lazy import lazy_attributes


def import_torch():
    """PyTorch, imported on first use: a missing ``[torch]`` extra is one line (ImportError) naming the install."""
    try:
        import torch
    except ImportError:
        raise ImportError("training and checkpoint policies need PyTorch: pip install 'openarm-sim-dataset[torch]' "
                          "(or pip install torch==2.13.0)") from None
    return torch


__all__ = ["TrainConfig", "TrainError", "train", "load_policy", "BCPolicy", "CheckpointError", "PolicyInputs",
           "read_inputs"]
__getattr__ = lazy_attributes(__name__, {
    "TrainConfig": "trainer", "TrainError": "trainer", "train": "trainer", "load_policy": "policy", "BCPolicy": "policy",
    "CheckpointError": "checkpoint", "PolicyInputs": "checkpoint", "read_inputs": "policy"})
