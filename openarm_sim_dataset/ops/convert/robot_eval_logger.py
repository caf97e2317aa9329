"""Export to the ``LocalStorage`` layout of robot-eval-logger 0.0.1 (PyPI ``robot-eval-logger``, extra
``[robot_eval_logger]``), above all for rollout datasets (``dataset-evaluate``)::

    OUT/<eval_id>/metadata.json    the logger's MetaData (MetaData.load reads it)
    OUT/<eval_id>/traj_<i>.pkl     the logger's TrajData, one per episode, i = 0..N-1 (TrajData.load)

Written by the logger's own classes (``MetaData.save``, ``TrajData.save``), so the pickles hold only
``robot_eval_logger.typing.traj_data.TrajData``, numpy arrays and built-in types, never a class of this
package. The two modules that define them are loaded from the installed package's files without its
``__init__``, which imports wandb, ``huggingface_hub.HfFolder`` (gone since huggingface_hub 1.0), cv2
and ml_collections (not declared), none of which the stored data needs.

The mapping (``docs/format/robot-eval-logger.md``):

* ``robot_type`` is ``franka``: the logger's ``RobotType`` enum knows only ``franka`` and ``widowx``
  and ``MetaData.load`` refuses any other value; an OpenArm arm is, like a Franka Panda, 7 revolute
  joints and a one-DoF parallel gripper (WidowX: 6 joints). ``robot_name`` says what it really is
  (``equipment.id`` and the arms, e.g. ``OpenArm-MuJoCo (OpenArm 2.0: right, left)``).
* One trajectory step per point of a grid at ``step_hz`` (default: a rollout's
  ``evaluation.control_hz``, the policy's steps, at most the fastest camera's rate; else the fastest
  camera's rate, else the fastest stream's) over the common range of every stream and camera, both
  ends included (a rollout's last policy step has a frame); each stream and camera gives its latest
  sample at or before the step (causal, :func:`openarm_sim_dataset.sampler.align`), values unchanged
  (float32, decoded RGB).
* ``obs``: ``{camera: uint8 (T, H, W, 3)}``; ``action``/``proprio``/``velocity``/``effort``: lists of
  T float32 vectors, the arms' ``qpos`` (action: the commanded target) / obs ``qpos`` / ``qvel`` /
  ``qtorque`` concatenated in the embodiment's order (right then left, 8 each: joint1..7, gripper; the
  lifter's elevation after them in action and proprio), names in ``action_names`` / ``proprio_names``.
* ``language_command``: the task's prompt; ``success``: the entry's (None when it has none);
  ``episode_length``: T; ``eval_duration``: the episode's span in seconds (last stamp - first stamp of
  all its streams and cameras; simulated time for generated data).
* Extra attributes (TrajData keeps any keyword): ``episode_id``, ``task_index``, ``task``,
  ``outcome``, ``success_any``, ``knocked_over`` (those present), ``step_hz``, ``timestamps_ns`` (the
  grid, int64), ``frame_timestamps_ns`` (``{camera: int64 (T,)}``: the frame each step shows),
  ``policy`` (a rollout's ``model:`` mapping) and ``source`` (``{path, metadata_sha256}``).
* metadata.json: ``eval_id`` an integer from the SHA-256 of the source's metadata.yaml, the chosen
  episode ids and the step rate (the same conversion names the same folder); ``location``;
  ``evaluator_name`` the dataset's ``operator``; ``time`` the first stamp of the first episode for
  recorded data (Unix clock), else ``SOURCE_DATE_EPOCH`` or the conversion time (a simulated clock is
  not a date), UTC.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout, sampler
from openarm_sim_dataset.core.dataset import Dataset
from openarm_sim_dataset.core.errors import DatasetError, StreamError
from openarm_sim_dataset.core.report import Summary, progress
from openarm_sim_dataset.core.writer import new_dataset

from .source import metadata_0_4_0, select_episodes

#: the package and version whose layout this writes
PACKAGE, VERSION = "robot-eval-logger", "0.0.1"
INSTALL = "pip install 'openarm-sim-dataset[robot_eval_logger]'"
#: RobotType value written: the logger's enum has only franka and widowx (see the module docstring)
ROBOT_TYPE = "franka"
_MODULES = (("robot_eval_logger.typing.eval_metadata", "typing/eval_metadata.py"),
            ("robot_eval_logger.typing.traj_data", "typing/traj_data.py"))


def logger_types() -> dict:
    """The logger's data classes ``MetaData``, ``EvalID``, ``TimeStamp``, ``RobotType``, ``TrajData``
    (and ``root``, the installed package's folder), from the installed robot-eval-logger 0.0.1: the
    imported package's when it is imported, else its two typing modules loaded from their files (kept
    here, out of ``sys.modules``; :func:`package_importable` lends them under their own names while a
    pickle is written or read). ImportError (one line naming the pip install) when it is missing or
    another version."""
    from importlib import metadata

    try:
        version = metadata.version(PACKAGE)
        spec = importlib.util.find_spec("robot_eval_logger")
    except (metadata.PackageNotFoundError, ImportError, ValueError):
        version, spec = None, None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"robot_eval_logger export needs {PACKAGE} {VERSION}: {INSTALL}")
    if version != VERSION:
        raise ImportError(f"robot_eval_logger export writes the layout of {PACKAGE} {VERSION}, "
                          f"{version} is installed: {INSTALL}")
    root = Path(list(spec.submodule_search_locations)[0])
    meta, traj = _data_modules(root)
    return {"MetaData": meta.MetaData, "EvalID": meta.EvalID, "TimeStamp": meta.TimeStamp,
            "RobotType": meta.RobotType, "TrajData": traj.TrajData, "root": root}


_LOCK = threading.RLock()
#: the logger's typing modules loaded from their files, by module name (never left in sys.modules)
_LOADED: dict = {}


def _data_modules(root: Path) -> list:
    """The modules ``robot_eval_logger.typing.eval_metadata`` and ``.traj_data``: those in sys.modules
    (the package imported the normal way), else loaded once from the installed files."""
    mods = []
    with _LOCK:
        for name, rel in _MODULES:
            mod = sys.modules.get(name) or _LOADED.get(name)
            if mod is None:
                if not (root / rel).is_file():
                    raise ImportError(f"{root / rel}: missing from the installed {PACKAGE}: {INSTALL}")
                file_spec = importlib.util.spec_from_file_location(name, root / rel)
                mod = importlib.util.module_from_spec(file_spec)
                sys.modules[name] = mod  # while it runs, as an import would (dataclasses looks it up)
                try:
                    file_spec.loader.exec_module(mod)
                finally:
                    sys.modules.pop(name, None)
                _LOADED[name] = mod
            mods.append(mod)
    return mods


@contextmanager
def package_importable(root: Path):
    """While pickling or unpickling a TrajData: ``robot_eval_logger.typing.traj_data`` (and
    ``eval_metadata``) importable under their names, with their packages, without running the
    packages' ``__init__`` (pickle imports the class's package; the logger's ``__init__`` imports
    wandb, ``huggingface_hub.HfFolder``, which huggingface_hub 1.0 removed, and the undeclared cv2 and
    ml_collections). What is already imported is left as it is; what this lends (package objects of
    the installed folders, not executed, and the modules :func:`logger_types` loaded) is removed
    afterwards."""
    added = []
    with _LOCK:
        try:
            for name, folder in (("robot_eval_logger", root), ("robot_eval_logger.typing", root / "typing")):
                if name not in sys.modules:
                    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                                  submodule_search_locations=[str(folder)])
                    sys.modules[name] = importlib.util.module_from_spec(spec)
                    added.append((name, sys.modules[name]))
            for name, _rel in _MODULES:
                if name not in sys.modules and name in _LOADED:
                    sys.modules[name] = _LOADED[name]
                    added.append((name, _LOADED[name]))
            yield
        finally:
            for name, mod in added:
                if sys.modules.get(name) is mod:
                    del sys.modules[name]


def save_trajectory(types: dict, fields: dict, path: Path) -> None:
    """``TrajData(**fields).save(path)``: the logger's own class and writer."""
    with package_importable(types["root"]):
        types["TrajData"](**fields).save(str(path))


def load_trajectory(types: dict, path: str | os.PathLike):
    """``TrajData.load(path)``: the logger's own loader (a pickle.load)."""
    with package_importable(types["root"]):
        return types["TrajData"].load(str(path))


def step_grid(start_ns: int, end_ns: int, hz: float) -> np.ndarray:
    """Points ``start + floor(k * 1e9 / hz)`` with ``start <= t <= end`` (int64 ns; both ends included,
    unlike :func:`sampler.time_grid`'s half-open range: a rollout's last policy step is kept)."""
    if end_ns < start_ns:
        return np.empty(0, dtype=np.int64)
    p = sampler.period_ns(hz)
    n = ((end_ns - start_ns) * p.denominator) // p.numerator + 1
    return sampler.grid_points(start_ns, int(n), hz)


def default_step_hz(ds: Dataset, meta=None) -> float:
    """A rollout's ``evaluation.control_hz`` (one step per policy step), at most the fastest declared
    camera rate (the scripted policy acts at every physics step: no more steps than frames); else the
    fastest camera rate; else the fastest declared stream rate (``meta``: the metadata with measured
    rates filled in for old layouts)."""
    meta = meta or metadata_0_4_0(ds)
    evaluation = meta.data.get("evaluation") or {}
    hz = evaluation.get("control_hz") if isinstance(evaluation, dict) else None
    freqs = meta.frequencies
    cams = [float(v) for v in (freqs.cameras or {}).values() if _positive(v)]
    if meta.operation_type == "rollout" and _positive(hz):
        return min(float(hz), max(cams)) if cams else float(hz)
    if cams:
        return max(cams)
    rates = []
    for kind in layout.KINDS:
        for value in (freqs.get(kind) or {}).values():
            rates += [v for v in (value.values() if isinstance(value, dict) else [value]) if _positive(v)]
    if rates:
        return float(max(rates))
    raise DatasetError(ds.root / layout.METADATA_FILE, "declares no camera or stream rate to step at: give --step-hz")


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")


def _vectors(ds: Dataset, streams: dict, attr: str, grid: np.ndarray) -> tuple[list[np.ndarray] | None, list[str]]:
    """Per step, ``attr`` of every component (embodiment order) concatenated; None when no component
    stores it. Names ``<side>_<joint>`` (``lifter_elevation`` style for a component-less embodiment)."""
    parts, names = [], []
    for emb in ds.meta.embodiments:
        comps = emb.components or (None,)
        if emb.id != layout.EMBODIMENT_OPENARM and attr != "qpos":
            continue  # the lifter stores its elevation only: a position, no velocity or effort
        want = attr if emb.id == layout.EMBODIMENT_OPENARM else "elevation"
        for comp in comps:
            key = f"{emb.name}/{comp}/{want}" if comp else f"{emb.name}/{want}"
            s = streams.get(key)
            if s is None:
                continue
            if len(s.timestamps) == 0:
                raise StreamError(s.path, f"{key} has no samples")
            parts.append(s.values[sampler.align(s.timestamps, grid, "previous")])
            names += [f"{comp or emb.name}_{c}" for c in s.columns]
    if not parts:
        return None, []
    rows = np.concatenate(parts, axis=1)
    return [np.array(row) for row in rows], names


def episode_fields(ds: Dataset, entry: dict, hz: float, prompts: list[str]) -> dict:
    """The TrajData keywords of one episode (plain Python and numpy values only)."""
    ep_id = ds.episode_id(entry)
    groups = {kind: ds.streams(entry, kind) for kind in layout.KINDS}
    cameras = ds.load_cameras(entry)
    for g in groups.values():
        for key, s in g.items():
            if len(s.timestamps) and not sampler.is_strictly_increasing(s.timestamps):
                raise StreamError(s.path, f"{key} timestamps are not strictly increasing")
    for name, cam in cameras.items():
        if cam.num_frames == 0:
            raise DatasetError(cam.path, f"camera {name} has no frames")
    stamps = [s.timestamps for g in groups.values() for s in g.values() if len(s.timestamps)]
    stamps += [cam.timestamps for cam in cameras.values()]
    if not stamps:
        raise StreamError(ds.episode_path(entry), "episode has no streams and no cameras")
    start, end = sampler.common_range(stamps)
    grid = step_grid(start, end, hz)
    action, action_names = _vectors(ds, groups["action"], "qpos", grid)
    proprio, proprio_names = _vectors(ds, groups["obs"], "qpos", grid)
    velocity, _ = _vectors(ds, groups["obs"], "qvel", grid)
    effort, _ = _vectors(ds, groups["obs"], "qtorque", grid)
    obs, frame_stamps = {}, {}
    for name, cam in cameras.items():
        idx = sampler.align(cam.timestamps, grid, "previous")
        used, inverse = np.unique(idx, return_inverse=True)
        decoded = [cam.get_frame(int(i)).load() for i in used]
        shape = decoded[0].shape if decoded else (0, 0, 3)
        if any(d.shape != shape for d in decoded):
            raise DatasetError(cam.path, f"camera {name}: frames of different sizes in one episode")
        frames = np.stack(decoded) if decoded else np.zeros((0, *shape), np.uint8)
        obs[name] = frames[inverse.reshape(-1)] if len(used) != len(idx) else frames
        frame_stamps[name] = cam.timestamps[idx].astype(np.int64)
    first = min(int(a[0]) for a in stamps)
    last = max(int(a[-1]) for a in stamps)
    ti = entry.get("task_index")
    prompt = prompts[ti] if isinstance(ti, int) and not isinstance(ti, bool) and 0 <= ti < len(prompts) else ""
    success = entry.get("success")
    fields = {
        "language_command": prompt,
        "obs": obs,
        "success": success if isinstance(success, bool) else None,
        "action": action,
        "episode_length": int(len(grid)),
        "eval_duration": (last - first) / 1e9,
        "proprio": proprio,
        "velocity": velocity,
        "effort": effort,
        "partial_success": None,
        "language_feedback": None,
        "episode_id": ep_id,
        "step_hz": float(hz),
        "timestamps_ns": grid.astype(np.int64),
        "frame_timestamps_ns": frame_stamps,
        "action_names": action_names,
        "proprio_names": proprio_names,
    }
    for key in ("task_index", "task", "outcome", "success_any", "knocked_over"):
        value = entry.get(key)
        if isinstance(value, (str, bool, int)):
            fields[key] = value
    return fields


def eval_id(ds: Dataset, chosen: list[dict], hz: float) -> int:
    """A positive 63-bit integer (as the logger's ``abs(hash(...))``) from the SHA-256 of the source's
    metadata.yaml, the chosen episode ids and the step rate."""
    h = hashlib.sha256((ds.root / layout.METADATA_FILE).read_bytes())
    h.update(("\n".join(ds.episode_id(e) for e in chosen) + f"\n{Fraction(hz).limit_denominator(1_000_000)}").encode())
    return int.from_bytes(h.digest()[:8], "big") & ((1 << 63) - 1)


def eval_time(ds: Dataset, chosen: list[dict]) -> datetime:
    """UTC time of the evaluation: recorded data's first stamp (Unix clock); for simulated data (whose
    clock is not a date) ``SOURCE_DATE_EPOCH`` when set, else now."""
    if ds.meta.simulation is None and chosen:
        firsts = [int(s.timestamps[0]) for kind in layout.KINDS for s in ds.streams(chosen[0], kind).values()
                  if len(s.timestamps)]
        firsts += [int(c.timestamps[0]) for c in ds.load_cameras(chosen[0]).values() if c.num_frames]
        if firsts:
            ns = min(firsts)
            return datetime.fromtimestamp(ns // 10**9, timezone.utc).replace(microsecond=(ns % 10**9) // 1000)
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.strip().isdigit():
        return datetime.fromtimestamp(int(epoch), timezone.utc)
    return datetime.now(timezone.utc).replace(microsecond=0)


def robot_name(ds: Dataset) -> str:
    """What the robot is, since ``robot_type`` cannot say it: ``equipment.id`` and the embodiments."""
    eq = ds.meta.data.get("equipment") or {}
    parts = []
    for emb in ds.meta.embodiments:
        what = f"{emb.id} {emb.version}" if emb.version else emb.id
        parts.append(f"{what}: {', '.join(emb.components)}" if emb.components else what)
    name = str(eq.get("id") or "OpenArm")
    return f"{name} ({'; '.join(parts)})" if parts else name


def to_robot_eval_logger(ds: Dataset, out: str | os.PathLike, step_hz: float | None = None,
                         valid_only: bool = False, success_only: bool = False, exclude_knocked: bool = False,
                         quiet: bool = True) -> Summary:
    """Write ``ds`` (or the episodes the filters keep) as robot-eval-logger 0.0.1 ``LocalStorage`` at
    ``out`` (a new folder holding ``<eval_id>/``; refused if it exists). Returns the summary."""
    types = logger_types()  # before anything is read or written: a missing extra is one line
    out = Path(out)
    if step_hz is not None and not _positive(step_hz):
        raise ValueError(f"step_hz must be a positive finite number, not {step_hz!r}")
    meta = metadata_0_4_0(ds)
    hz = float(step_hz) if step_hz is not None else default_step_hz(ds, meta)
    sampler.period_ns(hz)
    chosen = select_episodes(ds, valid_only, success_only, exclude_knocked)
    prompts = [str(t.get("prompt") or t.get("description") or "") for t in ds.meta.tasks]
    source = {"path": str(ds.root.resolve()),
              "metadata_sha256": hashlib.sha256((ds.root / layout.METADATA_FILE).read_bytes()).hexdigest()}
    model = ds.meta.data.get("model")
    policy = None
    if isinstance(model, dict):  # a rollout's model: name, source, sha256, sha256_of (strings)
        policy = {str(k): str(v) for k, v in model.items() if isinstance(v, (str, int, float))}
    summary = Summary(f"dataset-convert (robot_eval_logger {VERSION}, {hz:g} Hz steps)", out)
    ident = eval_id(ds, chosen, hz)
    when = eval_time(ds, chosen)
    bar = progress(len(chosen), "robot_eval_logger", quiet)
    try:
        with new_dataset(out) as tmp:
            run_dir = tmp / str(ident)
            run_dir.mkdir()
            stamp = types["TimeStamp"]()
            stamp.timestamp = when
            types["MetaData"](eval_id=types["EvalID"](id=ident), location=str(ds.meta.location or ""),
                              robot_name=robot_name(ds), robot_type=types["RobotType"](ROBOT_TYPE), time=stamp,
                              evaluator_name=str(ds.meta.operator or "")).save(str(run_dir / "metadata.json"))
            for i, entry in enumerate(chosen):
                fields = episode_fields(ds, entry, hz, prompts)
                fields["source"] = dict(source)
                if policy is not None:
                    fields["policy"] = dict(policy)
                save_trajectory(types, fields, run_dir / f"traj_{i}.pkl")
                summary.episodes += 1
                summary.frames += fields["episode_length"]
                bar.update(1)
    finally:
        bar.close()
    summary.notes.append(f"eval_id {ident}")
    return summary.finish()
