"""Behaviour cloning with action chunks: the library function behind ``dataset-train``.

Items of the dataset at ``hz`` (the policy's control rate) through
:class:`openarm_sim_dataset.torch.TorchDataset`: both arms' joint positions (16, rad), the time since
the episode's start (s), the next ``horizon`` action rows (16 joint targets each, the action stream's
units), with ``prompt=True`` the one-hot of the episode's task prompt over the training data's prompts
(one policy for several tasks, told which by its instruction as a robot would be), and per variant:

* ``inputs="state"`` (**privileged**): the three cubes' poses (``sim.object_pose``: the sidecar's
  simulator state, metres + wxyz), which a real robot does not measure;
* ``inputs="cameras"``: the camera images (uint8 RGB as stored, JPEG decoded) and the joints only.
  With ``aux > 0`` on a simulated dataset the image encoder also learns to predict the cubes'
  positions (an auxiliary loss at training time only: the policy never reads them).

Only the episodes metadata marks successful are demonstrations. They are split into train / val by
episode; the loss is the MSE of the normalised chunk; AdamW with a cosine schedule. Deterministic from
``seed`` at a given ``threads``; a killed run resumes from ``<out>.resume`` (written atomically every
``checkpoint_every`` seconds) to the weights an uninterrupted run ends with, bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core.atomic import atomic_write_bytes
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.metadata import Metadata

from . import import_torch
from .checkpoint import FORMAT, VERSION, CheckpointError, load, to_bytes
from .model import build_model
from .policy import vector_input

#: config keys a resumed run must agree on (the rest are derived from the data or are outputs)
_RESUME_KEYS = ("inputs", "arch", "hz", "horizon", "hidden", "cameras", "seed", "steps", "batch", "lr", "shift",
                "val", "keypoints", "conv_width", "aux", "dataset_sha256", "episodes_used", "threads", "prompts")


class TrainError(DatasetError, ValueError):
    """The dataset or the arguments cannot be trained on (one line naming the file)."""


@dataclass
class TrainConfig:
    """Arguments of :func:`train` (``dataset-train``'s flags).

    ``cameras``: for ``inputs="cameras"`` the cameras to read (default: every camera of the dataset);
    ``episodes``: the first N successful episodes only; ``hz``: control rate and loader grid (Hz);
    ``horizon``/``execute``: chunk length / rows played before predicting again (control steps);
    ``ensemble``: temporal-ensembling decay stored for evaluation (None: off); ``max_step``: the
    policy's per-step joint target bound (rad); ``arch``: ``mlp`` | ``keypoints`` (default: ``mlp``
    for state, ``keypoints`` for cameras); ``shift``: random image shift (px); ``aux``: weight of the
    auxiliary cube-position loss (cameras, simulated data); ``checkpoint_every``: seconds between
    resumable states; ``threads``: torch threads (results depend on it); ``prompt``: condition on the
    episode's task prompt (the demonstrations must hold two or more)."""

    dataset: str
    inputs: str
    out: str
    cameras: list | None = None
    curve: str | None = None
    episodes: int | None = None
    hz: float = 10.0
    horizon: int = 10
    execute: int = 5
    max_step: float = 0.25
    ensemble: float | None = None
    hidden: int = 256
    steps: int = 3000
    batch: int = 256
    lr: float = 1e-3
    shift: int = 3
    val: float = 0.1
    seed: int = 0
    threads: int = 1
    arch: str | None = None
    keypoints: int = 32
    conv_width: int = 16
    aux: float = 1.0
    checkpoint_every: float = 60.0
    prompt: bool = False
    extra: dict = field(default_factory=dict)  # recorded in the checkpoint's config as given (e.g. a card's note)


@dataclass
class TrainResult:
    checkpoint: Path
    bytes: int
    wall_s: float
    cpu_s: float
    load_s: float
    threads: int
    parameters: int
    items: int
    episodes: int
    val_episodes: int
    steps: int
    resumed_from: int
    final_train: float
    final_val: float

    def as_dict(self) -> dict:
        d = asdict(self)
        d["checkpoint"] = str(self.checkpoint)
        return d


def _check_args(c: TrainConfig) -> None:
    if c.inputs not in ("state", "cameras"):
        raise TrainError(None, f"--inputs must be state or cameras, not {c.inputs!r}")
    for name in ("steps", "batch", "horizon", "execute", "hidden", "threads", "keypoints", "conv_width"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise TrainError(None, f"--{name.replace('_', '-')} must be an integer >= 1, not {v!r}")
    if not c.hz > 0:
        raise TrainError(None, f"--hz must be > 0, not {c.hz!r}")
    if not 0 <= c.val < 1:
        raise TrainError(None, f"--val must be in [0, 1), not {c.val!r}")
    if c.episodes is not None and c.episodes < 1:
        raise TrainError(None, f"--episodes must be >= 1, not {c.episodes!r}")
    if c.arch not in (None, "mlp", "keypoints"):
        raise TrainError(None, f"--arch must be mlp or keypoints, not {c.arch!r}")
    if c.inputs == "state" and c.arch == "keypoints":
        raise TrainError(None, "--arch keypoints is an image encoder: it needs --inputs cameras")
    if c.shift < 0 or c.aux < 0 or c.max_step < 0:
        raise TrainError(None, "--shift, --aux and --max-step must be >= 0")


def _metadata_sha256(root: Path) -> str:
    return hashlib.sha256((root / "metadata.yaml").read_bytes()).hexdigest()


def _select(c: TrainConfig):
    """The dataset's demonstrations and cameras, with every bad input as one line naming the file."""
    root = Path(c.dataset)
    if not (root / "metadata.yaml").is_file():
        raise TrainError(root, "not a dataset (no metadata.yaml)")
    meta = Metadata.load(root)
    eps = [str(e["id"]) for e in meta.episodes if e.get("success")]
    if not eps:
        raise TrainError(root / "metadata.yaml", f"no successful demonstration to learn from ({len(meta.episodes)} "
                                                 "episode(s), none with success: true)")
    if c.episodes is not None:
        eps = eps[: c.episodes]
    have = list(Dataset(root).camera_names)
    cams: list = []
    if c.inputs == "cameras":
        if not have:
            raise TrainError(root, "has no camera (physics only?): --inputs cameras needs images; draw them with "
                                   "dataset-render, or train with --inputs state")
        cams = list(c.cameras) if c.cameras else have
        missing = [x for x in cams if x not in have]
        if missing:
            raise TrainError(root, f"has no camera {', '.join(map(repr, missing))} (it has: {', '.join(have)})")
    sim = meta.data.get("simulation") if isinstance(meta.data.get("simulation"), dict) else None
    prompts = None
    if c.prompt:
        tasks = meta.tasks
        by_id = {str(e["id"]): e for e in meta.episodes}
        seen = []
        for ep in eps:
            ti = by_id[ep].get("task_index")
            p = tasks[ti].get("prompt") if isinstance(ti, int) and 0 <= ti < len(tasks) else None
            if not p:
                raise TrainError(root / "metadata.yaml", f"episode {ep} has no task prompt: --prompt needs every "
                                                         "demonstration's task (task_index into tasks with a prompt)")
            if p not in seen:
                seen.append(p)
        if len(seen) < 2:
            raise TrainError(root / "metadata.yaml", f"--prompt needs demonstrations of two or more tasks; all "
                                                     f"{len(eps)} have the prompt {seen[0]!r}")
        prompts = sorted(seen)
    return root, meta, eps, cams, sim, prompts


def demonstration_tasks(meta, eps: list) -> list:
    """The task names (sorted) of the demonstrations ``eps``, from their entries' ``task`` key ([] when
    no entry names one: data of the default task, written before tasks existed)."""
    by_id = {str(e["id"]): e for e in meta.episodes}
    return sorted({str(by_id[ep]["task"]) for ep in eps if by_id[ep].get("task")})


def _camera_hz(meta, cams: list) -> float | None:
    """The rate the training images were drawn at: metadata's frequencies.cameras (all equal)."""
    if not cams:
        return None
    rates = (meta.data.get("frequencies") or {}).get("cameras") or {}
    vals = {float(rates[c]) for c in cams if c in rates}
    if len(vals) > 1:
        raise TrainError(Path(meta.path) if hasattr(meta, "path") else None,
                         f"cameras {cams} have different rates {sorted(vals)}: train on cameras of one rate")
    return vals.pop() if vals else None


def _load_items(root: Path, c: TrainConfig, eps: list, cams: list, sim_pose: bool, progress: bool):
    """Every item at ``hz`` held in memory (numpy): images uint8 (N, 3, H, W)."""
    torch = import_torch()
    from ..torch import TorchDataset  # optional extra: torch (openarm_sim_dataset.torch imports it)

    ds = TorchDataset(root, hz=c.hz, cameras=cams, state=("qpos",), action=("qpos",), action_horizon=c.horizon,
                      sim=(["object_pose"] if sim_pose else False), episodes=eps)
    if len(ds.state_names) != 16 or len(ds.action_names) != 16:
        raise TrainError(root, f"expected 16 joint positions and 16 targets per step (both arms), got "
                               f"{len(ds.state_names)} and {len(ds.action_names)}")
    if len(ds) == 0:
        raise TrainError(root, f"no item at {c.hz:g} Hz in the {len(eps)} demonstration(s)")
    loader = torch.utils.data.DataLoader(ds, batch_size=256, shuffle=False, num_workers=0)
    cols: dict = {}
    it = loader
    if progress:
        from tqdm import tqdm

        it = tqdm(loader, desc="reading items", unit="batch", leave=False)
    for b in it:
        for k, v in b.items():
            if isinstance(v, torch.Tensor):
                cols.setdefault(k, []).append(v.numpy())
            elif k in ("episode", "task"):
                cols.setdefault(k, []).append(np.asarray(v))
    return ds, {k: np.concatenate(v) for k, v in cols.items()}


def _safe_std(std) -> np.ndarray:
    # constant features (the idle left arm) would divide by zero: they carry no information anyway
    return np.where(np.asarray(std) > 1e-6, std, 1.0)


def _rng_state(gen: np.random.Generator) -> str:
    return json.dumps(gen.bit_generator.state)


def train(c: TrainConfig, progress: bool = False, stop_after: int | None = None,
          log: Callable[[str], None] | None = None) -> TrainResult:
    """Train a policy on ``c.dataset`` and write its checkpoint to ``c.out`` (atomically).

    A ``<out>.resume`` left by a killed run with the same arguments and data is continued from its
    step (the result equals an uninterrupted run's bit for bit); one made with other arguments is
    refused naming what differs. ``stop_after`` ends the run after that many steps with only the
    resumable state written (what a kill leaves; for tests). ``progress``: a tqdm bar on stderr."""
    torch = import_torch()
    _check_args(c)
    torch.set_num_threads(c.threads)
    torch.manual_seed(c.seed)
    torch.use_deterministic_algorithms(True)
    t0, c0 = time.perf_counter(), time.process_time()
    root, meta, eps, cams, sim, prompts = _select(c)
    arch = c.arch or ("keypoints" if c.inputs == "cameras" else "mlp")
    aux = float(c.aux) if (c.inputs == "cameras" and arch == "keypoints" and sim is not None) else 0.0
    ds, items = _load_items(root, c, eps, cams, sim_pose=(c.inputs == "state" or aux > 0), progress=progress)
    t_load = time.perf_counter() - t0
    n_ep = ds.num_episodes
    # split by episode, never by frame (the loader's rule), with the seed
    val_ids = set(ds.split(c.val, seed=c.seed)[1].episode_ids) if c.val > 0 and n_ep >= 2 else set()
    is_val = np.isin(items["episode"], list(val_ids))
    full = ds.stats(images=bool(cams))
    stats = {"state": {"mean": full["observation.state"]["mean"], "std": _safe_std(full["observation.state"]["std"])},
             "action": {"mean": full["action"]["mean"], "std": _safe_std(full["action"]["std"]),
                        "min": full["action"]["min"], "max": full["action"]["max"]}}
    t = items["step"].astype(np.float64) / c.hz
    t_max = float(t.max()) if len(t) and t.max() > 0 else 1.0
    pose = items["sim.object_pose"].astype(np.float64) if "sim.object_pose" in items else None
    if pose is not None:
        xyz = pose[..., :3].reshape(-1, 3)
        stats["object"] = {"mean": xyz.mean(0), "std": _safe_std(xyz.std(0))}
    for cam in cams:
        st = full[f"observation.images.{cam}"]
        stats[f"image.{cam}"] = {"mean": st["mean"].reshape(3), "std": _safe_std(st["std"].reshape(3))}
    render = (sim or {}).get("render") if isinstance((sim or {}).get("render"), dict) else {}
    cfg = {"format": FORMAT, "version": VERSION, "inputs": c.inputs, "arch": arch, "hz": float(c.hz),
           "horizon": int(c.horizon), "execute": int(min(c.execute, c.horizon)), "hidden": int(c.hidden),
           "max_step": float(c.max_step), "ensemble": (None if c.ensemble is None else float(c.ensemble)),
           "cameras": cams, "camera_hz": _camera_hz(meta, cams), "action_dim": 16, "t_max": t_max,
           "seed": int(c.seed), "threads": int(c.threads), "dataset": str(root.resolve()),
           "dataset_sha256": _metadata_sha256(root), "episodes_used": len(eps),
           "episodes": n_ep, "val_episodes": len(val_ids), "items": int(len(t)), "steps": int(c.steps),
           "batch": int(c.batch), "lr": float(c.lr), "shift": int(c.shift), "val": float(c.val),
           "keypoints": int(c.keypoints), "conv_width": int(c.conv_width), "aux": aux,
           "jpeg_quality": (int(render.get("jpeg_quality") or sim.get("jpeg_quality") or 90) if cams and sim else None),
           "extra": dict(c.extra)}
    if prompts:  # (only then: a checkpoint without a prompt keeps the config it had before prompts existed)
        cfg["prompts"] = prompts
    tasks = demonstration_tasks(meta, eps)
    if tasks:  # what dataset-evaluate runs without --tasks
        cfg["tasks"] = tasks
    vec = vector_input(cfg, stats, items["observation.state"].astype(np.float64), t,
                       pose if c.inputs == "state" else None, items.get("task"))
    cfg["vector_dim"] = int(vec.shape[1])
    act = ((items["action"] - stats["action"]["mean"]) / stats["action"]["std"]).astype(np.float32)
    images = [items[f"observation.images.{cam}"] for cam in cams]  # uint8 (N, 3, H, W)
    if images:
        cfg["image_shape"] = [int(x) for x in images[0].shape[1:]]
        for cam, im in zip(cams, images):
            if list(im.shape[1:]) != cfg["image_shape"]:
                raise TrainError(root, f"camera {cam!r} is {im.shape[3]}x{im.shape[2]}, {cams[0]!r} "
                                       f"{cfg['image_shape'][2]}x{cfg['image_shape'][1]}: train on cameras of one size")
    aux_t = None
    if aux > 0:
        o = stats["object"]
        cfg["aux_dim"] = int(pose.shape[1] * 3)
        aux_t = torch.from_numpy(((pose[..., :3] - o["mean"]) / o["std"]).reshape(len(pose), -1).astype(np.float32))
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, c.steps))
    gen = np.random.default_rng(c.seed)
    tr_idx, va_idx = np.flatnonzero(~is_val), np.flatnonzero(is_val)
    if not len(tr_idx):
        raise TrainError(root, "no training item (every episode held out: lower --val)")
    vec_t, act_t = torch.from_numpy(vec), torch.from_numpy(act)
    im_t = [torch.from_numpy(im) for im in images]
    im_norm = [(torch.tensor(stats[f"image.{x}"]["mean"], dtype=torch.float32).view(1, 3, 1, 1),
                torch.tensor(stats[f"image.{x}"]["std"], dtype=torch.float32).view(1, 3, 1, 1)) for x in cams]

    def batch_images(rows, augment: bool):
        out = []
        for im, (m, s) in zip(im_t, im_norm):
            x = (im[rows].float() - m) / s
            if augment and c.shift > 0:
                p, (h, w) = c.shift, im.shape[2:]
                x = torch.nn.functional.pad(x, (p, p, p, p), mode="replicate")
                if arch == "mlp":
                    # one shift per batch (the first camera variant's augmentation, kept for its figures)
                    dx, dy = (int(v) for v in gen.integers(0, 2 * p + 1, 2))
                    x = x[:, :, dy:dy + h, dx:dx + w]
                else:
                    # a shift per image (random-shift augmentation, DrQ): gathered, no per-row loop
                    d = torch.from_numpy(gen.integers(0, 2 * p + 1, (len(rows), 2)))
                    ri = (d[:, 1, None] + torch.arange(h))[:, :, None]
                    ci = (d[:, 0, None] + torch.arange(w))[:, None, :]
                    x = x.permute(0, 2, 3, 1)[torch.arange(len(rows))[:, None, None], ri, ci].permute(0, 3, 1, 2)
            out.append(x.contiguous())
        return out

    def loss_on(rows, augment=False):
        ims = batch_images(rows, augment) if cams else None
        if aux_t is not None:
            pred, aux_pred = model(vec_t[rows], ims, aux=True)
            main = torch.nn.functional.mse_loss(pred, act_t[rows])
            return main + aux * torch.nn.functional.mse_loss(aux_pred, aux_t[rows]), main
        main = torch.nn.functional.mse_loss(model(vec_t[rows], ims), act_t[rows])
        return main, main

    out = Path(c.out)
    resume_path = out.with_name(out.name + ".resume")
    curve = {"step": [], "train": [], "val": []}
    start, run, spent = 0, 0.0, {"wall_s": 0.0, "cpu_s": 0.0}
    if resume_path.exists():
        try:
            st, _ = load(resume_path, kind="resumable training state")
        except CheckpointError as e:
            raise TrainError(resume_path, f"{e.message}; remove it to start over") from None
        diffs = [f"{k} {st['config'].get(k)!r} there, {cfg.get(k)!r} here" for k in _RESUME_KEYS
                 if st["config"].get(k) != cfg.get(k)]
        if diffs:
            raise TrainError(resume_path, "left by a run with other arguments or data (" + "; ".join(diffs)
                             + "): rerun that command, or remove the file to start over")
        model.load_state_dict(st["state_dict"])
        opt.load_state_dict(st["optimizer"])
        sched.load_state_dict(st["scheduler"])
        gen.bit_generator.state = json.loads(st["numpy_rng"])
        torch.set_rng_state(st["torch_rng"])
        start, run, curve = int(st["step"]), float(st["run"]), st["curve"]
        spent = {"wall_s": float(st["spent"]["wall_s"]), "cpu_s": float(st["spent"]["cpu_s"])}
        if log:
            log(f"resuming {resume_path} at step {start}/{c.steps}")

    def save_resume(step: int) -> None:
        # with the statistics, a resumable state is also a policy (copy it to a .pt to evaluate it mid-run)
        state = {"config": cfg, "stats": stats_lists, "state_dict": model.state_dict(), "optimizer": opt.state_dict(),
                 "scheduler": sched.state_dict(), "numpy_rng": _rng_state(gen), "torch_rng": torch.get_rng_state(),
                 "step": step, "run": run, "curve": curve,
                 "spent": {"wall_s": spent["wall_s"] + time.perf_counter() - t0,
                           "cpu_s": spent["cpu_s"] + time.process_time() - c0}}
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(resume_path, to_bytes(state))

    stats_lists = {g: {k: [float(x) for x in np.ravel(v)] for k, v in d.items()} for g, d in stats.items()}
    model.train()
    every = max(1, c.steps // 50)
    last_save = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=c.steps, initial=start, desc="training", unit="step", dynamic_ncols=True)
    for step in range(start + 1, c.steps + 1):
        rows = torch.from_numpy(gen.choice(tr_idx, size=min(c.batch, len(tr_idx)), replace=len(tr_idx) < c.batch))
        loss, main = loss_on(rows, augment=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        run += float(main.detach())
        if step % every == 0 or step == c.steps:
            n = every if step % every == 0 else step % every
            model.eval()
            with torch.no_grad():
                if len(va_idx):
                    vl = [float(loss_on(torch.from_numpy(r))[1]) * len(r)
                          for r in np.array_split(va_idx, max(1, len(va_idx) // 512))]
                    val = sum(vl) / len(va_idx)
                else:
                    val = float("nan")
            model.train()
            curve["step"].append(step)
            curve["train"].append(run / n)
            curve["val"].append(val)
            run = 0.0
            if bar is not None:
                bar.set_postfix_str(f"train {curve['train'][-1]:.4f} val {val:.4f}")
            if log:
                log(f"step {step}/{c.steps}: train {curve['train'][-1]:.4f} val {val:.4f}")
        if bar is not None:
            bar.update(1)
        if stop_after is not None and step - start >= stop_after:
            save_resume(step)
            if bar is not None:
                bar.close()
            raise KeyboardInterrupt(f"stopped after {stop_after} steps (resumable state in {resume_path})")
        if step < c.steps and time.perf_counter() - last_save >= c.checkpoint_every:
            save_resume(step)
            last_save = time.perf_counter()
    if bar is not None:
        bar.close()
    wall = spent["wall_s"] + time.perf_counter() - t0
    cpu = spent["cpu_s"] + time.process_time() - c0
    ckpt = {"config": cfg, "stats": stats_lists,
            "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()}, "curve": curve,
            "cost": {"wall_s": wall, "cpu_s": cpu, "load_s": t_load, "threads": c.threads,
                     "parameters": int(sum(p.numel() for p in model.parameters()))}}
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, to_bytes(ckpt))
    resume_path.unlink(missing_ok=True)
    if c.curve:
        what = "privileged object poses" if c.inputs == "state" else " + ".join(cams) + " + joints"
        if prompts:
            what += f" + prompt ({len(prompts)} tasks)"
        plot_curve(curve, Path(c.curve), f"BC {c.inputs} ({what}), {n_ep - len(val_ids)} train / "
                                         f"{len(val_ids)} val episodes, {c.steps} steps x {c.batch}")
    return TrainResult(checkpoint=out, bytes=out.stat().st_size, wall_s=wall, cpu_s=cpu, load_s=t_load,
                       threads=c.threads, parameters=ckpt["cost"]["parameters"], items=cfg["items"], episodes=n_ep,
                       val_episodes=len(val_ids), steps=c.steps, resumed_from=start,
                       final_train=curve["train"][-1], final_val=curve["val"][-1])


def plot_curve(curve: dict, path: Path, title: str) -> None:
    """The training curve as a PNG (train batch mean and held-out loss per logging interval)."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("--curve needs matplotlib: pip install 'openarm-sim-dataset[viz]'") from None
    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(curve["step"], curve["train"], label="train (batch mean)")
    if any(np.isfinite(curve["val"])):
        ax.plot(curve["step"], curve["val"], label="held-out episodes")
    ax.set_yscale("log")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("MSE of normalised action chunk")
    ax.set_title(title, fontsize=8)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
