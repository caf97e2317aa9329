#!/usr/bin/env python3
"""Behaviour cloning with action chunks on an OpenArm dataset: the baseline of issue 19.

    python tools/train_bc.py DATASET --inputs state   --out bc_state.pt   [--curve curve.png]
    python tools/train_bc.py DATASET --inputs cameras --out bc_cameras.pt
    dataset-evaluate --policy bc_state.pt --out rollouts --episodes 100 --seed 1000 --compare scripted

Training data is read through :class:`openarm_sim_dataset.torch.TorchDataset` at ``--hz`` (the
policy's control rate): the item's state (both arms' joint positions, rad: 16 values), the next
``--horizon`` action rows (16 joint position targets each, the action stream's units), and per variant:

* ``--inputs state`` (**privileged**): also the three cubes' poses (``sim.object_pose``, the sidecar's
  simulator state: metres + wxyz), which a real robot does not measure. At evaluation the policy reads
  them from the environment's ``info["object_pose"]`` (so it is ``privileged`` to the evaluator and
  its name says so).
* ``--inputs cameras``: the dataset's camera images (uint8 RGB, normalised with the loader's image
  statistics) and the joint positions only: what the robot measures.

Both also see the time since the episode started (s, clipped to the longest training episode): the
policy counts its own calls, nothing privileged. The network predicts the whole chunk (normalised with
the loader's mean/std); the policy executes its first ``--execute`` rows, one per control step, then
predicts again (receding horizon).

The checkpoint (``--out``, written atomically) holds the config, the normalisation statistics and the
weights (tensors, lists and numbers only: it loads with ``torch.load(weights_only=True)``);
:func:`load_policy` turns it into a policy for ``dataset-evaluate``. Deterministic from ``--seed``
(split, initialisation, batches; ``torch.use_deterministic_algorithms``) at a given ``--threads``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

FORMAT = "openarm-sim-bc"
VERSION = 1
ARM_SIDES = ("right", "left")  # the action's order (openarm_sim_dataset.layout.ARM_SIDES)


def _torch():
    try:
        import torch
    except ImportError:
        raise SystemExit("train_bc.py needs PyTorch: pip install 'openarm-sim-dataset[torch]'") from None
    return torch


# --------------------------------------------------------------------------- model
def build_model(cfg: dict):
    """The network of ``cfg``: vector inputs (and images) -> ``horizon x 16`` normalised actions."""
    torch = _torch()
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            hidden = int(cfg["hidden"])
            self.cams = list(cfg["cameras"])
            feat = 0
            if self.cams:
                # a small CNN per camera (shared weights), spatial features flattened
                c, h, w = cfg["image_shape"]
                self.cnn = nn.Sequential(
                    nn.Conv2d(c, 32, 5, stride=2, padding=2), nn.ReLU(),
                    nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                    nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                    nn.AdaptiveAvgPool2d((3, 4)), nn.Flatten())
                feat = 64 * 12 * len(self.cams)
            self.mlp = nn.Sequential(
                nn.Linear(int(cfg["vector_dim"]) + feat, hidden), nn.ReLU(),
                nn.Linear(hidden, hidden), nn.ReLU(),
                nn.Linear(hidden, hidden), nn.ReLU(),
                nn.Linear(hidden, int(cfg["horizon"]) * int(cfg["action_dim"])))

        def forward(self, vec, images: Optional[list] = None):
            parts = [vec]
            if self.cams:
                parts += [self.cnn(im) for im in images]
            out = self.mlp(torch.cat(parts, dim=1))
            return out.view(vec.shape[0], int(cfg["horizon"]), int(cfg["action_dim"]))

    return Net()


def _vector(cfg: dict, stats: dict, qpos: np.ndarray, t: np.ndarray, pose: Optional[np.ndarray]) -> np.ndarray:
    """The network's vector input (N, D) float32: normalised joint positions, time (s / t_max) and,
    privileged, the cubes' poses (positions normalised, quaternions as they are)."""
    s = stats["state"]
    parts = [(qpos - s["mean"]) / s["std"], (np.minimum(t, cfg["t_max"]) / cfg["t_max"])[:, None]]
    if cfg["inputs"] == "state":
        p = np.asarray(pose, np.float64).reshape(len(qpos), -1, 7)
        o = stats["object"]
        parts.append(((p[..., :3] - o["mean"]) / o["std"]).reshape(len(qpos), -1))
        parts.append(p[..., 3:].reshape(len(qpos), -1))
    return np.concatenate(parts, axis=1).astype(np.float32)


def _safe_std(std: np.ndarray) -> np.ndarray:
    # constant features (the idle left arm) would divide by zero: they carry no information anyway
    return np.where(np.asarray(std) > 1e-6, std, 1.0)


# ------------------------------------------------------------------------ training
def load_items(path: str, hz: float, horizon: int, inputs: str, cameras: Optional[list], episodes: Optional[int]):
    """Every item of the dataset at ``hz`` through TorchDataset, held in memory (numpy)."""
    torch = _torch()
    from openarm_sim_dataset.torch import TorchDataset

    from openarm_sim_dataset.metadata import Metadata

    # demonstrations only: an episode the expert failed (e.g. ik_failed: it may not even span one step)
    # would teach the failure; metadata's per-episode success says which (ids, metadata order)
    eps = [str(e["id"]) for e in Metadata.load(path).episodes if e.get("success")]
    if episodes is not None:
        eps = eps[:episodes]
    if not eps:
        raise SystemExit(f"{path}: no successful episode to learn from")
    ds = TorchDataset(path, hz=hz, cameras=(cameras if inputs == "cameras" else []), state=("qpos",),
                      action=("qpos",), action_horizon=horizon, sim=(["object_pose"] if inputs == "state" else False),
                      episodes=eps)
    if len(ds.state_names) != 16 or len(ds.action_names) != 16:
        raise SystemExit(f"{path}: expected 16 joint positions and 16 targets per step, got "
                         f"{len(ds.state_names)} and {len(ds.action_names)}")
    loader = torch.utils.data.DataLoader(ds, batch_size=256, shuffle=False, num_workers=0)
    cols: dict[str, list] = {}
    for b in loader:
        for k, v in b.items():
            if isinstance(v, torch.Tensor):
                cols.setdefault(k, []).append(v.numpy())
            elif k == "episode":
                cols.setdefault(k, []).append(np.asarray(v))
    items = {k: np.concatenate(v) for k, v in cols.items()}
    return ds, items


def train(args) -> dict:
    torch = _torch()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    t0, c0 = time.perf_counter(), time.process_time()
    cams = list(args.cameras) if args.inputs == "cameras" else []
    ds, items = load_items(args.dataset, args.hz, args.horizon, args.inputs, cams or None, args.episodes)
    if args.inputs == "cameras":
        cams = list(ds.cameras)
        if not cams:
            raise SystemExit(f"{args.dataset}: --inputs cameras needs a dataset with cameras")
    t_load = time.perf_counter() - t0
    n_ep = ds.num_episodes
    # split by episode, never by frame (the loader's rule), with --seed
    if args.val > 0 and n_ep >= 2:
        _, val_ds = ds.split(args.val, seed=args.seed)
        val_ids = set(val_ds.episode_ids)
    else:
        val_ids = set()
    is_val = np.isin(items["episode"], list(val_ids))
    tr = ~is_val
    full = ds.stats(images=bool(cams))
    stats = {"state": {"mean": full["observation.state"]["mean"], "std": _safe_std(full["observation.state"]["std"])},
             "action": {"mean": full["action"]["mean"], "std": _safe_std(full["action"]["std"]),
                        "min": full["action"]["min"], "max": full["action"]["max"]}}
    t = items["step"].astype(np.float64) / args.hz
    t_max = float(t.max()) if len(t) else 1.0
    pose = None
    if args.inputs == "state":
        pose = items["sim.object_pose"].astype(np.float64)
        xyz = pose[..., :3].reshape(-1, 3)
        stats["object"] = {"mean": xyz.mean(0), "std": _safe_std(xyz.std(0))}
    for cam in cams:
        st = full[f"observation.images.{cam}"]
        stats[f"image.{cam}"] = {"mean": st["mean"].reshape(3), "std": _safe_std(st["std"].reshape(3))}
    cfg = {"format": FORMAT, "version": VERSION, "inputs": args.inputs, "hz": float(args.hz),
           "horizon": int(args.horizon), "execute": int(min(args.execute, args.horizon)), "hidden": int(args.hidden),
           "max_step": float(args.max_step), "ensemble": (None if args.ensemble is None else float(args.ensemble)),
           "cameras": cams, "action_dim": 16, "t_max": t_max, "seed": int(args.seed),
           "dataset": str(Path(args.dataset).resolve()), "episodes": n_ep, "val_episodes": len(val_ids),
           "items": int(len(t)), "steps": int(args.steps), "batch": int(args.batch), "lr": float(args.lr)}
    vec = _vector(cfg, stats, items["observation.state"].astype(np.float64), t, pose)
    cfg["vector_dim"] = int(vec.shape[1])
    act = ((items["action"] - stats["action"]["mean"]) / stats["action"]["std"]).astype(np.float32)
    images = []
    for cam in cams:
        im = items[f"observation.images.{cam}"]  # uint8 (N, 3, H, W), normalised per batch
        images.append(im)
        cfg["image_shape"] = [int(x) for x in im.shape[1:]]
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.steps))
    gen = np.random.default_rng(args.seed)
    tr_idx, va_idx = np.flatnonzero(tr), np.flatnonzero(is_val)
    if not len(tr_idx):
        raise SystemExit(f"{args.dataset}: no training item")
    vec_t, act_t = torch.from_numpy(vec), torch.from_numpy(act)
    im_t = [torch.from_numpy(im) for im in images]
    im_norm = [(torch.tensor(stats[f"image.{c}"]["mean"], dtype=torch.float32).view(1, 3, 1, 1),
                torch.tensor(stats[f"image.{c}"]["std"], dtype=torch.float32).view(1, 3, 1, 1)) for c in cams]

    def batch_images(rows, augment: bool):
        out = []
        for im, (m, s) in zip(im_t, im_norm):
            x = (im[rows].float() - m) / s
            if augment and args.shift > 0:
                # random shift (pad + crop), the usual augmentation for small-data visual BC
                p = args.shift
                x = torch.nn.functional.pad(x, (p, p, p, p), mode="replicate")
                dx, dy = (int(v) for v in gen.integers(0, 2 * p + 1, 2))
                x = x[:, :, dy:dy + im.shape[2], dx:dx + im.shape[3]]
            out.append(x)
        return out

    def loss_on(rows, augment=False):
        pred = model(vec_t[rows], batch_images(rows, augment) if cams else None)
        return torch.nn.functional.mse_loss(pred, act_t[rows])

    curve = {"step": [], "train": [], "val": []}
    model.train()
    run = 0.0
    every = max(1, args.steps // 50)
    for step in range(1, args.steps + 1):
        rows = torch.from_numpy(gen.choice(tr_idx, size=min(args.batch, len(tr_idx)), replace=len(tr_idx) < args.batch))
        loss = loss_on(rows, augment=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        run += float(loss.detach())
        if step % every == 0 or step == args.steps:
            n = every if step % every == 0 else step % every
            model.eval()
            with torch.no_grad():
                if len(va_idx):
                    vl = [float(loss_on(torch.from_numpy(r))) * len(r) for r in np.array_split(va_idx, max(1, len(va_idx) // 2048))]
                    val = sum(vl) / len(va_idx)
                else:
                    val = float("nan")
            model.train()
            curve["step"].append(step)
            curve["train"].append(run / n)
            curve["val"].append(val)
            run = 0.0
            if not args.quiet:
                print(f"step {step}/{args.steps}: train {curve['train'][-1]:.4f} val {val:.4f}", file=sys.stderr)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ckpt = {"config": cfg, "stats": {g: {k: [float(x) for x in np.ravel(v)] for k, v in d.items()} for g, d in stats.items()},
            "state_dict": state, "curve": curve,
            "cost": {"wall_s": wall, "cpu_s": cpu, "load_s": t_load, "threads": args.threads,
                     "parameters": int(sum(p.numel() for p in model.parameters()))}}
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    from openarm_sim_dataset.atomic import atomic_write_bytes

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, buf.getvalue())
    if args.curve:
        plot_curve(curve, Path(args.curve), f"BC {args.inputs} ({'privileged object poses' if args.inputs == 'state' else 'cameras + joints'}), "
                                             f"{n_ep - len(val_ids)} train / {len(val_ids)} val episodes")
    summary = {"checkpoint": str(out), "bytes": out.stat().st_size, **ckpt["cost"], "items": cfg["items"],
               "episodes": n_ep, "val_episodes": len(val_ids), "final_train": curve["train"][-1], "final_val": curve["val"][-1]}
    return summary


def plot_curve(curve: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from openarm_sim_dataset.atomic import atomic_write_bytes

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(curve["step"], curve["train"], label="train (batch mean)")
    if any(np.isfinite(curve["val"])):
        ax.plot(curve["step"], curve["val"], label="held-out episodes")
    ax.set_yscale("log")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("MSE of normalised action chunk")
    ax.set_title(title, fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())


# -------------------------------------------------------------------------- policy
class BCPolicy:
    """A trained checkpoint as a policy of the evaluator: ``reset()`` / ``act(observation[, info])``.

    Every ``execute`` control steps (at ``control_hz`` = the training ``hz``) it predicts a chunk of
    ``horizon`` targets from the observation and plays its first ``execute`` rows. The ``state``
    variant is ``privileged``: it reads the cubes' poses from ``info["object_pose"]``."""

    def __init__(self, ckpt: dict, sha256: str, path: str) -> None:
        torch = _torch()
        self.cfg = cfg = ckpt["config"]
        self.stats = {g: {k: np.asarray(v, np.float64) for k, v in d.items()} for g, d in ckpt["stats"].items()}
        self.model = build_model(cfg)
        self.model.load_state_dict(ckpt["state_dict"])
        self.model.eval()
        self.weights_sha256 = sha256
        self.path = path
        self.control_hz = float(cfg["hz"])
        self.privileged = cfg["inputs"] == "state"
        self.cameras = bool(cfg["cameras"])
        self.name = f"bc-{cfg['inputs']}" + (" (privileged: object poses from info)" if self.privileged else " (cameras + joints)")
        self._torch = torch
        self.reset()

    def reset(self, info: Optional[dict] = None) -> None:
        self.k = 0
        self.queue: list = []
        self.chunks: list = []  # temporal ensembling: the last ``horizon`` chunks, oldest first
        self.last: Optional[np.ndarray] = None

    def act(self, observation: dict, info: Optional[dict] = None) -> np.ndarray:
        decay = self.cfg.get("ensemble")
        if decay is not None:
            # temporal ensembling (ACT, Zhao et al. 2023): predict a chunk every step and play the
            # weighted mean of every stored chunk's row for this step, weight exp(-decay * i) with i = 0
            # the oldest chunk: smooths the switch between chunks that receding horizon makes abrupt
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
        """The safety filter a policy meant for the robot needs: targets inside the range the training
        actions spanned, joints 1-7 moving at most ``max_step`` rad per control step from the last target
        (the first from the measured position; the scripted data moves <= 0.23 rad per 0.1 s). A poorly trained network would otherwise command jumps and
        poses outside the joint limits (the validator's ``qpos_jumps`` / ``joint_limits`` flag them)."""
        a = self.stats["action"]
        target = np.clip(target, a["min"], a["max"])
        prev = self.last if self.last is not None else np.concatenate(
            [np.asarray(observation["arms"][s]["qpos"], np.float64) for s in ARM_SIDES])
        step = float(self.cfg.get("max_step", 0.0))
        if step > 0:
            # joints 1-7 of each arm (what the validator bounds); the grippers (columns 7, 15) unlimited
            lim = np.full(16, step)
            lim[[7, 15]] = np.inf
            target = prev + np.clip(target - prev, -lim, lim)
        self.last = target
        return target.copy()

    def _predict(self, observation: dict, info: Optional[dict]) -> np.ndarray:
        torch, cfg = self._torch, self.cfg
        qpos = np.concatenate([np.asarray(observation["arms"][s]["qpos"], np.float64) for s in ARM_SIDES])[None]
        t = np.array([self.k / cfg["hz"]])
        pose = None
        if self.privileged:
            pose = np.asarray(info["object_pose"], np.float64)[None]
        vec = torch.from_numpy(_vector(cfg, self.stats, qpos.astype(np.float32).astype(np.float64), t, pose))
        images = None
        if cfg["cameras"]:
            images = []
            for c in cfg["cameras"]:
                im = observation.get("cameras", {}).get(c)
                if im is None:
                    raise ValueError(f"the observation has no camera {c!r} (trained on {cfg['cameras']})")
                im = np.asarray(im)
                if list(im.shape) != [cfg["image_shape"][1], cfg["image_shape"][2], 3]:
                    raise ValueError(f"camera {c!r} image is {im.shape[1]}x{im.shape[0]}, trained on "
                                     f"{cfg['image_shape'][2]}x{cfg['image_shape'][1]} (evaluate with --size)")
                x = torch.from_numpy(np.ascontiguousarray(im.transpose(2, 0, 1))[None]).float()
                m = torch.tensor(self.stats[f"image.{c}"]["mean"], dtype=torch.float32).view(1, 3, 1, 1)
                s = torch.tensor(self.stats[f"image.{c}"]["std"], dtype=torch.float32).view(1, 3, 1, 1)
                images.append((x - m) / s)
        with torch.no_grad():
            out = self.model(vec, images)[0].numpy().astype(np.float64)
        a = self.stats["action"]
        return out * a["std"] + a["mean"]


def load_policy(path: str | os.PathLike) -> BCPolicy:
    """The policy of a checkpoint written by this tool. Raises ``ValueError`` (one line) on a file
    that is not one (truncated, corrupted, another format)."""
    torch = _torch()
    path = Path(path)
    raw = path.read_bytes()
    try:
        ckpt = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"not a readable train_bc checkpoint ({type(e).__name__}: {first[:160]})") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("config"), dict) or ckpt["config"].get("format") != FORMAT:
        raise ValueError(f"not a train_bc checkpoint (no config of format {FORMAT!r})")
    if ckpt["config"].get("version") != VERSION:
        raise ValueError(f"train_bc checkpoint version {ckpt['config'].get('version')!r}, this tool reads {VERSION}")
    try:
        return BCPolicy(ckpt, hashlib.sha256(raw).hexdigest(), str(path))
    except (KeyError, RuntimeError, TypeError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"inconsistent train_bc checkpoint ({type(e).__name__}: {first[:160]})") from None


# ----------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="OpenArm dataset to train on (generated pick_place episodes)")
    p.add_argument("--inputs", choices=["state", "cameras"], required=True,
                   help="state: joints + privileged object poses; cameras: images + joints only")
    p.add_argument("--out", required=True, help="checkpoint .pt to write")
    p.add_argument("--curve", help="training-curve PNG to write")
    p.add_argument("--cameras", nargs="+", default=["head"], help="cameras for --inputs cameras (default head)")
    p.add_argument("--episodes", type=int, help="use the first N successful episodes only (failed ones never)")
    p.add_argument("--hz", type=float, default=10.0, help="control rate = the loader's grid, Hz (default 10)")
    p.add_argument("--horizon", type=int, default=10, help="action chunk length, steps (default 10)")
    p.add_argument("--execute", type=int, default=5, help="rows of a chunk played before predicting again (default 5)")
    p.add_argument("--max-step", type=float, default=0.25,
                   help="the policy's safety filter: largest change of a joint 1-7 target per control step, rad "
                        "(default 0.25; 0: off)")
    p.add_argument("--ensemble", type=float, metavar="DECAY",
                   help="temporal ensembling at evaluation: predict every step, play the mean of the overlapping "
                        "chunks weighted exp(-DECAY * i), i = 0 the oldest (default: off, play --execute rows)")
    p.add_argument("--hidden", type=int, default=256, help="MLP width (default 256)")
    p.add_argument("--steps", type=int, default=3000, help="optimiser steps (default 3000)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--shift", type=int, default=3, help="random image shift, pixels (cameras; default 3)")
    p.add_argument("--val", type=float, default=0.1, help="fraction of episodes held out for the curve (default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1; results depend on it)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: Optional[list] = None) -> int:
    args = _parser().parse_args(argv)
    from openarm_sim_dataset.errors import DatasetError
    for name in ("steps", "batch", "horizon", "execute", "hidden", "threads"):
        if getattr(args, name) < 1:
            print(f"train_bc.py: --{name} must be >= 1", file=sys.stderr)
            return 2
    try:
        summary = train(args)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return 2
        raise
    except (OSError, ValueError, DatasetError) as e:  # DatasetError names the file
        print(f"train_bc.py: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary))
    else:
        print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
