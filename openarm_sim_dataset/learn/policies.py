"""Policies for the environments of :mod:`openarm_sim_dataset.env` and the evaluator.

A policy is an object with ``reset()`` and ``act(observation) -> action`` (16 joint position targets,
right arm's 8 then the left arm's, the action stream's units). Optional attributes:

* ``name`` (str): how rollouts name it (``model.name`` in metadata.yaml);
* ``privileged = True``: called as ``reset(info)`` and ``act(observation, info)``, ``info`` holding
  the simulator state (only the built-in ``scripted`` policy is: it is the generator's controller);
* ``control_hz`` (float, or ``"physics"``): the rate it acts at (default: the environment's, the
  camera rate); ``scripted`` acts every physics step (``"physics"``), as the generator's controller does;
* ``cameras`` (bool): whether it needs images (default True; the built-ins need none);
* ``done`` (bool): the policy has finished (the scripted controller ended: the episode ends there,
  as a generated episode does); ``outcome`` (str): its own outcome category then.

Built in: ``scripted``, ``zero`` (hold the initial pose), ``random`` (a rate-limited random walk of
the targets inside the joint and control ranges, seeded by the episode). Others load from
``module:factory`` (a callable returning a policy) or from a checkpoint file of ``dataset-train`` (a ``.pt``,
:func:`openarm_sim_dataset.bc.load_policy`: the behaviour-cloning baselines; extra ``[torch]``).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.sim.scene import arm_index
from openarm_sim_dataset.sim.tasks import make_controller

from .bc import CheckpointError, load_policy as load_checkpoint

__all__ = ["Policy", "PolicyError", "ScriptedPolicy", "ZeroPolicy", "RandomPolicy", "BUILTIN", "load_policy",
           "policy_identity"]


class PolicyError(DatasetError):
    """A policy that cannot be loaded, raises, or returns a wrong action (a one-line message)."""


class Policy(Protocol):
    def reset(self) -> None: ...

    def act(self, observation: dict) -> Any: ...


def _source_sha256(obj: Any) -> str:
    """SHA-256 of the source file of ``obj``'s class (what defines a policy without weights)."""
    try:
        path = inspect.getsourcefile(type(obj) if not inspect.isclass(obj) else obj)
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except (TypeError, OSError):
        return hashlib.sha256(type(obj).__qualname__.encode()).hexdigest()


class ScriptedPolicy:
    """The generator's scripted controller of the episode's task, stepped every physics step: in the
    environment at the physics rate it commands exactly what the generator commands."""

    name = "scripted"
    privileged = True
    cameras = False

    #: every physics step (the environment's physics rate), as the generator's loop commands
    control_hz = "physics"

    def __init__(self) -> None:
        self.ctl = None

    def reset(self, info: dict) -> None:
        sim = info["sim"]
        self.data = sim.data
        self.ctl = make_controller(sim.model, sim.params)
        self.ctl.reset(sim.data)
        self._index = np.concatenate([arm_index(sim.model, s).actuators for s in layout.ARM_SIDES]).astype(int)

    @property
    def done(self) -> bool:
        return bool(self.ctl is not None and self.ctl.done)

    @property
    def outcome(self) -> str | None:
        """The controller's outcome, ``timeout`` while it has not ended (the generator's rule)."""
        if self.ctl is None:
            return None
        return self.ctl.outcome if self.ctl.outcome is not None else "timeout"

    def result_fields(self) -> dict:
        """The controller's bookkeeping for the episode's :class:`EpisodeResult` (as the generator's)."""
        c = self.ctl
        return {"knocked_over": bool(c.knocked_over), "attempts": c.attempts, "estimates": list(c.estimates),
                "phase_log": list(c.phase_log), "arm_contacts": int(c.arm_contacts),
                "judge_facts": c.judge_facts()}

    def act(self, observation: dict, info: dict) -> np.ndarray:
        return self.ctl.command(self.data)[self._index]


class ZeroPolicy:
    """Hold the initial pose: the first observation's joint positions (and gripper) as targets."""

    name = "zero"
    cameras = False

    def reset(self) -> None:
        self.hold = None

    def act(self, observation: dict) -> np.ndarray:
        if self.hold is None:
            self.hold = np.concatenate([np.asarray(observation["arms"][s]["qpos"], np.float64)
                                        for s in layout.ARM_SIDES])
        return self.hold


class RandomPolicy:
    """A random walk of the 16 targets, seeded by the episode (``default_rng([seed, index, 0x726E64])``):
    every second a new goal is drawn uniformly inside the joint and control ranges (:attr:`MARGIN` inside
    both); the targets start at the first observation's positions and move towards the goal at
    most :attr:`MAX_STEP` rad per control step (10 Hz: 2 rad/s). Rate-limited so that its rollouts
    are commands a real arm could be given (they pass the validator's jump and joint-limit checks,
    where uniform targets jump by up to 4.6 rad and overshoot the limits)."""

    name = "random"
    privileged = True  # reads from info only the episode's seed and index (its own seed) and the ranges
    cameras = False
    control_hz = 10.0
    #: rad per control step
    MAX_STEP = 0.2
    #: rad inside the joint and control ranges for the goals (a servo overshoots a little; contacts push)
    MARGIN = 0.25
    #: control steps between goals
    GOAL_EVERY = 10

    def reset(self, info: dict) -> None:
        m = info["sim"].model
        arms = [arm_index(m, s) for s in layout.ARM_SIDES]
        act = np.concatenate([a.actuators for a in arms]).astype(int)
        lo, hi = m.actuator_ctrlrange[act, 0].copy(), m.actuator_ctrlrange[act, 1].copy()
        joints = np.concatenate([[m.jnt_qposadr.tolist().index(q) for q in a.qpos] for a in arms])
        limited = m.jnt_limited[joints].astype(bool)
        lo[limited] = np.maximum(lo[limited], m.jnt_range[joints[limited], 0])
        hi[limited] = np.minimum(hi[limited], m.jnt_range[joints[limited], 1])
        self.low, self.high = lo + self.MARGIN, hi - self.MARGIN
        self.rng = np.random.default_rng([int(info["seed"]), int(info["index"]), 0x726E64])
        self.target = None
        self.k = 0

    def act(self, observation: dict, info: dict) -> np.ndarray:
        if self.target is None:
            self.target = np.concatenate([np.asarray(observation["arms"][s]["qpos"], np.float64)
                                          for s in layout.ARM_SIDES])
        if self.k % self.GOAL_EVERY == 0:
            self.goal = self.rng.uniform(self.low, self.high)
        self.k += 1
        self.target = self.target + np.clip(self.goal - self.target, -self.MAX_STEP, self.MAX_STEP)
        return self.target.copy()


BUILTIN = {"scripted": ScriptedPolicy, "zero": ZeroPolicy, "random": RandomPolicy}


def load_policy(spec: str) -> Any:
    """The policy named by ``spec``: a built-in name, ``module:factory``, or a checkpoint file
    (``*.pt``/``*.pth`` of ``dataset-train``). Raises :class:`PolicyError` (one line)."""
    if spec in BUILTIN:
        return BUILTIN[spec]()
    path = Path(spec)
    if path.suffix in (".pt", ".pth"):
        try:
            return load_checkpoint(path)
        except CheckpointError as e:
            raise PolicyError(path, e.message) from None
    if ":" not in spec:
        raise PolicyError(spec, f"unknown policy (built in: {', '.join(BUILTIN)}; or module:factory, or a .pt checkpoint)")
    mod_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise PolicyError(spec, f"cannot load the policy factory: {type(e).__name__}: {e}") from None
    try:
        policy = factory()
    except Exception as e:
        raise PolicyError(spec, f"the policy factory raised {type(e).__name__}: {e}") from None
    if not callable(getattr(policy, "act", None)) or not callable(getattr(policy, "reset", None)):
        raise PolicyError(spec, "the factory's object has no reset() and act(observation)")
    if not getattr(policy, "name", None):
        try:
            policy.name = spec
        except AttributeError:
            pass
    return policy


def policy_identity(policy: Any, spec: str) -> dict:
    """``model:`` of a rollout dataset: the policy's name, what it was loaded from, and a SHA-256 of
    its weights (a checkpoint file, or ``policy.weights_sha256``) or else of its source file."""
    path = Path(spec)
    if path.suffix in (".pt", ".pth") and path.is_file():
        return {"name": str(getattr(policy, "name", path.stem)), "source": spec,
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "sha256_of": "checkpoint file"}
    sha = getattr(policy, "weights_sha256", None)
    if sha:
        return {"name": str(getattr(policy, "name", spec)), "source": spec, "sha256": str(sha), "sha256_of": "weights"}
    return {"name": str(getattr(policy, "name", spec)), "source": spec, "sha256": _source_sha256(policy),
            "sha256_of": "source file of the policy's class"}
