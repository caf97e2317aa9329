"""A trained checkpoint as a policy of the evaluator (:mod:`openarm_sim_dataset.evaluate`).

The policy reads what the checkpoint says it was trained on (:attr:`BCPolicy.inputs`): both arms'
joint positions (rad), the time since the episode's start (its own step count / control rate, s), for a
prompt-conditioned checkpoint the task's prompt (``observation["prompt"]``, one of those it was trained
on), and either the named camera images (``cameras`` variant: what a robot measures) or the cubes' poses from
``info["object_pose"]`` (``state`` variant: **privileged**, simulator state a robot does not have).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core.layout import ARM_SIDES

from . import import_torch
from .checkpoint import CheckpointError, PolicyInputs, inputs_of, load
from .model import build_model


def prompt_onehot(cfg: dict, prompts) -> np.ndarray:
    """(N, len(cfg["prompts"])) one-hot of each row's task prompt. Raises ValueError naming a prompt
    the checkpoint was not trained on (a conditioned policy cannot guess a task it never saw)."""
    known = list(cfg["prompts"])
    where = {p: i for i, p in enumerate(known)}
    idx = np.array([where.get(str(p), -1) for p in prompts])
    if (idx < 0).any():
        bad = str(np.asarray(prompts)[idx < 0][0])
        raise ValueError(f"prompt {bad!r} is not one the checkpoint was trained on ({'; '.join(map(repr, known))})")
    out = np.zeros((len(idx), len(known)), np.float32)
    out[np.arange(len(idx)), idx] = 1.0
    return out


def vector_input(cfg: dict, stats: dict, qpos: np.ndarray, t: np.ndarray, pose: np.ndarray | None,
                 prompts=None) -> np.ndarray:
    """The network's vector input (N, D) float32: normalised joint positions, time (s / t_max, clipped
    at 1), for a prompt-conditioned checkpoint the one-hot of each row's prompt (``prompts``: N
    strings) and, privileged, the cubes' poses (positions normalised, quaternions as they are)."""
    s = stats["state"]
    parts = [(qpos - s["mean"]) / s["std"], (np.minimum(t, cfg["t_max"]) / cfg["t_max"])[:, None]]
    if cfg.get("prompts"):
        if prompts is None:
            raise ValueError(f"the checkpoint is prompt-conditioned ({len(cfg['prompts'])} prompts): give each row's prompt")
        parts.append(prompt_onehot(cfg, prompts))
    if cfg["inputs"] == "state":
        p = np.asarray(pose, np.float64).reshape(len(qpos), -1, 7)
        o = stats["object"]
        parts.append(((p[..., :3] - o["mean"]) / o["std"]).reshape(len(qpos), -1))
        parts.append(p[..., 3:].reshape(len(qpos), -1))
    return np.concatenate(parts, axis=1).astype(np.float32)


def jpeg_roundtrip(rgb: np.ndarray, quality: int) -> np.ndarray:
    """``rgb`` encoded and decoded as the dataset's JPEGs were (PIL, 4:2:0), so a policy sees at
    evaluation the pixels it was trained on (a live camera node sends JPEG too)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buf, format="JPEG", quality=int(quality))
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


class _Member:
    """One trained network with its statistics: the whole policy of a checkpoint, or one member of an
    ensemble checkpoint (:mod:`.ensemble`)."""

    def __init__(self, ckpt: dict, torch) -> None:
        self.cfg = cfg = ckpt["config"]
        self.stats = {g: {k: np.asarray(v, np.float64) for k, v in d.items()} for g, d in ckpt["stats"].items()}
        self.model = build_model(cfg)
        self.model.load_state_dict(ckpt["state_dict"])
        self.model.eval()
        self.im_norm = {c: (torch.tensor(self.stats[f"image.{c}"]["mean"], dtype=torch.float32).view(1, 3, 1, 1),
                            torch.tensor(self.stats[f"image.{c}"]["std"], dtype=torch.float32).view(1, 3, 1, 1))
                        for c in cfg["cameras"]}

    def predict(self, torch, qpos: np.ndarray, t: np.ndarray, pose: np.ndarray | None, images: list | None,
                prompt: str | None = None) -> np.ndarray:
        """A chunk (horizon, 16) of joint targets in the action stream's units; ``images``: the uint8
        (1, 3, H, W) tensors of the config's cameras, in its order; ``prompt``: the task's instruction
        (read by a prompt-conditioned checkpoint only)."""
        vec = torch.from_numpy(vector_input(self.cfg, self.stats, qpos, t, pose,
                                            [prompt] if self.cfg.get("prompts") else None))
        ims = None
        if images is not None:
            ims = [(x - m) / s for x, (m, s) in ((x, self.im_norm[c]) for x, c in zip(images, self.cfg["cameras"]))]
        with torch.no_grad():
            out = self.model(vec, ims)[0].numpy().astype(np.float64)
        a = self.stats["action"]
        return out * a["std"] + a["mean"]


class BCPolicy:
    """``reset()`` / ``act(observation[, info])`` -> 16 joint targets (rad; right arm's 8, then the left's).

    Every ``execute`` control steps (at :attr:`control_hz`, the training grid) it predicts a chunk of
    ``horizon`` targets and plays its first ``execute`` rows; with ``ensemble`` (a decay) it predicts
    every step and plays the weighted mean of the overlapping chunks' rows for this step (temporal
    ensembling, ACT). An ensemble checkpoint's chunk is the mean of its members' chunks (in joint
    units). A safety filter bounds the result (see :meth:`_safe`)."""

    def __init__(self, ckpt: dict, sha256: str, path: str) -> None:
        torch = import_torch()
        self.cfg = cfg = ckpt["config"]
        self.members = [_Member(m, torch) for m in (ckpt["members"] if cfg.get("arch") == "ensemble" else [ckpt])]
        self.model = self.members[0].model
        # the safety filter's range: what any member's training actions spanned
        acts = [m.stats["action"] for m in self.members]
        self.stats = {"action": {"min": np.min([a["min"] for a in acts], axis=0),
                                 "max": np.max([a["max"] for a in acts], axis=0)}}
        self.weights_sha256 = sha256
        self.path = path
        self.inputs: PolicyInputs = inputs_of(cfg)
        self.control_hz = float(cfg["hz"])
        self.privileged = cfg["inputs"] == "state"
        self.cameras = bool(cfg["cameras"])
        self.prompts = tuple(cfg.get("prompts") or ())
        self.name = f"bc-{cfg['inputs']}" + (" (privileged: object poses from info)" if self.privileged
                                             else f" ({' + '.join(cfg['cameras'])} + joints)")
        if self.prompts:
            self.name += f", conditioned on {len(self.prompts)} prompts"
        if len(self.members) > 1:
            self.name += f", ensemble of {len(self.members)}"
        self._torch = torch
        self.reset()

    def reset(self, info: dict | None = None) -> None:
        self.k = 0
        self.queue: list = []
        self.chunks: list = []  # temporal ensembling: the last ``horizon`` chunks, oldest first
        self.last: np.ndarray | None = None

    def act(self, observation: dict, info: dict | None = None) -> np.ndarray:
        decay = self.cfg.get("ensemble")
        if decay is not None:
            # weight exp(-decay * i), i = 0 the oldest chunk: smooths the switch between chunks that a
            # receding horizon makes abrupt (it took the state policy from 69% to 90%)
            self.chunks.append(self._predict(observation, info))
            self.chunks = self.chunks[-int(self.cfg["horizon"]):]
            n = len(self.chunks)
            rows = np.stack([c[n - 1 - i] for i, c in enumerate(self.chunks)])
            w = np.exp(-float(decay) * np.arange(n))
            self.k += 1
            return self._safe((w[:, None] * rows).sum(0) / w.sum(), observation)
        if not self.queue:
            self.queue = list(self._predict(observation, info)[: self.cfg["execute"]])
        self.k += 1
        return self._safe(self.queue.pop(0), observation)

    def _safe(self, target: np.ndarray, observation: dict) -> np.ndarray:
        """Targets inside the range the training actions spanned, joints 1-7 moving at most ``max_step``
        rad per control step from the last target (the first from the measured position; the scripted
        data moves <= 0.23 rad per 0.1 s): a poorly trained network would otherwise command jumps (steps
        that move the simulated servos faster than any OpenArm joint turns) and poses outside the joint
        limits (the validator's ``qpos_jumps`` / ``joint_limits`` flag them)."""
        a = self.stats["action"]
        target = np.clip(target, a["min"], a["max"])
        prev = self.last if self.last is not None else np.concatenate(
            [np.asarray(observation["arms"][s]["qpos"], np.float64) for s in ARM_SIDES])
        step = float(self.cfg.get("max_step", 0.0))
        if step > 0:
            lim = np.full(16, step)
            lim[[7, 15]] = np.inf  # the grippers: the validator does not bound them, the data closes them fast
            target = prev + np.clip(target - prev, -lim, lim)
        self.last = target
        return target.copy()

    def image_tensor(self, cam: str, rgb: np.ndarray):
        """One camera image (H, W, 3) uint8 as a (1, 3, H, W) float tensor of the pixels the network
        was trained on (JPEG round trip at the training quality), not yet normalised."""
        torch, cfg = self._torch, self.cfg
        im = np.asarray(rgb)
        want = (cfg["image_shape"][1], cfg["image_shape"][2], 3)
        if im.shape != want:
            raise ValueError(f"camera {cam!r} image is {im.shape[1]}x{im.shape[0]}, the checkpoint was trained on "
                             f"{want[1]}x{want[0]}")
        if cfg.get("jpeg_quality"):
            im = jpeg_roundtrip(im, cfg["jpeg_quality"])
        return torch.from_numpy(np.ascontiguousarray(im.transpose(2, 0, 1))[None]).float()

    def _predict(self, observation: dict, info: dict | None) -> np.ndarray:
        cfg = self.cfg
        qpos = np.concatenate([np.asarray(observation["arms"][s]["qpos"], np.float64) for s in ARM_SIDES])[None]
        qpos = qpos.astype(np.float32).astype(np.float64)  # the dataset's float32, as trained
        t = np.array([self.k / cfg["hz"]])
        pose = np.asarray(info["object_pose"], np.float64)[None] if self.privileged else None
        images = None
        if cfg["cameras"]:
            images = []
            for c in cfg["cameras"]:
                im = observation.get("cameras", {}).get(c)
                if im is None:
                    raise ValueError(f"the observation has no camera {c!r} (trained on {', '.join(cfg['cameras'])})")
                images.append(self.image_tensor(c, im))
        prompt = None
        if self.prompts:
            prompt = observation.get("prompt")
            if not isinstance(prompt, str):
                raise ValueError("the observation has no prompt (the checkpoint is prompt-conditioned)")
        chunks = [m.predict(self._torch, qpos, t, pose, images, prompt) for m in self.members]
        return chunks[0] if len(chunks) == 1 else np.mean(chunks, axis=0)


def load_policy(path: str | os.PathLike) -> BCPolicy:
    """The policy of a checkpoint written by :func:`openarm_sim_dataset.bc.train`. Raises
    :class:`CheckpointError` (one line naming the file) on a file that is not one."""
    ckpt, sha = load(path)
    try:
        return BCPolicy(ckpt, sha, str(path))
    except (KeyError, RuntimeError, TypeError, ValueError, IndexError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(path, f"inconsistent checkpoint ({type(e).__name__}: {first[:160]})") from None


def read_inputs(path: str | os.PathLike) -> PolicyInputs:
    """What the checkpoint at ``path`` reads (cameras, size, rates), without building the network."""
    ckpt, _ = load(path)
    try:
        return inputs_of(ckpt["config"])
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise CheckpointError(Path(path), f"inconsistent checkpoint config ({type(e).__name__}: {e})") from None
