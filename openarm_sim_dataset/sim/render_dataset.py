"""Render a simulated dataset's cameras from its stored physics: ``dataset-render SRC OUT``.

An episode's sidecar holds its initial integration state and the command of every physics step, which
replay it bit for bit (:mod:`.replay`). :func:`render_dataset` replays every episode of ``SRC`` on the
model of the output's scene (the source's scene with the new cameras and size) and draws the new cameras
at the new frame times (``camera_hz``: the physics is replayed from the initial state, so any rate whose
frames fall on physics steps works), through the same code as generation (:class:`.recorder.CameraFrames`,
:func:`.recorder.episode_arrays`). What is written:

* ``obs/`` and ``action/`` (and any other file that is not a camera or a ``sim/`` array file) copied byte
  for byte from the source;
* the camera files, ``sim/sidecar.npz`` (per-frame states at the new frame steps, ``cam_pos_*``/``cam_mat_*``
  of the new cameras) and ``sim/frames.npz`` (depth and labels of the new cameras);
* metadata.yaml: the source's, with the cameras, camera rate and ``simulation:`` block of the output
  (what a generation with these cameras writes) plus ``simulation.render``: the source dataset (path,
  SHA-256 of its metadata.yaml and of every episode's manifest) and the render settings.

So ``dataset-generate --cameras X`` equals ``dataset-generate --cameras none`` followed by ``dataset-render
--cameras X``, file for file, ``simulation.render`` aside (tests/test_render_dataset.py).

Every replayed state at a step the source recorded must equal the stored one bit for bit, else the
episode is refused (:class:`RenderError`: the model here is not the one recorded). Episodes are committed
one by one with the commit protocol of :mod:`..writer`; a run on an existing output resumes it (arguments
that contradict its ``simulation.render`` block are refused).

Visual variants (``visual_variants=K``): K renderings of every episode, episode ``<id>-v<k>``, each with
its own visual variation (:func:`.variation.visual_variant`, reproducible from ``seed``), the physics the
source's bit for bit; the entry's ``render_source`` says which source episode and variant it is.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.cluster import (  # renamed: ``window`` is a frame-time span here
    MAX_RETRIES,
    ClusterError,
    ConnectedOutput,
    WorkerMismatch,
    checked_worker,
    import_ray,
    lost_task_message,
    node_name,
    ordered_results,
    window as ray_window,
)
from openarm_sim_dataset.core.dataset import folder_problem
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import check_rendering
from openarm_sim_dataset.core.lock import OutputLock
from openarm_sim_dataset.core.metadata import Metadata
from openarm_sim_dataset.core.writer import CAMERA_FORMATS, EpisodeData, close_log, commit_episode, remove_uncommitted

from .environment import environment
from .episode_recorder import CameraFrames, RecordConfig, episode_arrays
from .generate import config_from_simulation, dataflow_simulation_block, simulation_block
from .models import cached_model, episode_model, load_model
from .render import SimRenderer
from .replay import provenance_differences
from .scene import CUBE_NAMES, SceneConfig, cube_qpos_adr
from .variation import VARIANT_RULE, Variation, visual_variant

#: simulation keys that describe where the physics was computed: kept from the source (the render
#: replays that physics; the rest of the block is the output's).
PHYSICS_PROVENANCE = ("generator", "python", "numpy", "platform", "machine", "cpu")
#: The metadata key naming the render step (``simulation.render``) and an episode's source (``render_source``).
RENDER_KEY = "render"
SOURCE_KEY = "render_source"


class RenderError(DatasetError):
    """The source cannot be rendered (no sidecar, model not as recorded) or the output refuses the run."""


@dataclass(frozen=True)
class RenderConfig:
    """What to render. ``camera_hz`` None: the source's rate; ``visual_variants`` 0: one rendering per
    episode with the source's own scene (else K variants, ``seed`` their render seed)."""

    cameras: tuple[str, ...] = ("head", "wrist_right")
    width: int = 160
    height: int = 120
    camera_hz: float | None = None
    camera_format: str = "dir"
    visual_variants: int = 0
    seed: int = 0

    def settings(self, camera_hz: float) -> dict:
        """The render settings as ``simulation.render.settings`` records them."""
        out = {"cameras": list(self.cameras), "width": int(self.width), "height": int(self.height),
               "camera_hz": float(camera_hz), "camera_format": self.camera_format}
        if self.visual_variants:
            out["visual_variants"] = {"count": int(self.visual_variants), "seed": int(self.seed), "rule": VARIANT_RULE}
        return out


@dataclass(frozen=True)
class RenderJob:
    """Everything a worker needs besides the episode (picklable: sent once to each worker)."""

    source_scene: SceneConfig
    source_sha256: str
    scene: SceneConfig
    record: RecordConfig
    cfg: RenderConfig
    live: bool = False  # the source was recorded live in a dataflow (simulation.source: dataflow)


@dataclass
class RenderedEpisode:
    """One rendered episode: its metadata entry, camera streams and ``sim/`` files."""

    entry: dict
    cameras: dict[str, list[tuple[int, bytes]]]
    files: dict[str, bytes]


@dataclass
class RenderSummary:
    """Outcome of a render: the output's entries (found + made), how many were rendered now and found
    already committed, and the camera frames drawn now."""

    episodes: list[dict]
    made: int
    skipped: int
    frames: int = 0


# ----------------------------------------------------------------------------- source
def _scene(sim: dict, where: Path) -> SceneConfig:
    stored = dict(sim.get("scene") or {})
    names = {f.name for f in dataclasses.fields(SceneConfig)}
    unknown = sorted(set(stored) - names)
    if unknown or not stored:
        raise RenderError(where, f"simulation.scene {'has keys unknown to this version: ' + ', '.join(unknown) if unknown else 'is missing'}")
    return SceneConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})


def output_scene(source: SceneConfig, cfg: RenderConfig) -> SceneConfig:
    """The output's scene: the source's with the new cameras and size (``wrist_left`` as generation sets
    it: the camera is in the model when it is rendered)."""
    return dataclasses.replace(source, cameras=tuple(cfg.cameras), width=int(cfg.width), height=int(cfg.height),
                               wrist_left="wrist_left" in cfg.cameras)


def _sidecar_path(root: Path, ep: str) -> Path:
    return layout.episode_dir(root, ep) / layout.SIM_DIR / sidecar.SIDECAR_FILE


def _episode_index(entry: dict, position: int) -> int:
    seed_inputs = entry.get("seed_inputs")
    if isinstance(seed_inputs, dict) and isinstance(seed_inputs.get("index"), int):
        return int(seed_inputs["index"])
    return position


def _frame_window(src: Path, ep: str) -> tuple[int, int] | None:
    """The stamps (ns) a dataflow-recorded episode's frames must lie within: its state streams' span
    (``layout.camera_window``), read from the timestamp columns of its 0.4.0 streams; None without any."""
    import pyarrow.parquet as pq

    spans = []
    for path in sorted(layout.episode_dir(src, ep).glob(f"*/**/{layout.STATE_FILE}")):
        ts = pq.read_table(path, columns=[layout.TIMESTAMP_COLUMN]).column(0).cast("int64").to_numpy()
        if len(ts):
            spans.append((int(ts[0]), int(ts[-1]), float(np.median(np.diff(ts))) if len(ts) > 1 else 0.0))
    if not spans:
        return None
    lo, hi = layout.camera_window(spans)
    return int(np.ceil(lo)), int(np.floor(hi))


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- one episode
_WORKER: dict = {}


def _worker_state(job: RenderJob):
    """This process's (output nominal model, renderer) for ``job`` (a GL context is made once)."""
    if _WORKER.get("job") != job:
        if _WORKER.get("renderer") is not None:
            _WORKER["renderer"].close()
        model = load_model(job.scene)
        _WORKER.update(job=job, renderer=SimRenderer(model, job.scene))
    return _WORKER["renderer"]


def _models(job: RenderJob, variation_doc, recorded_sha: str | None, out_variation, where: str):
    """``(output model, its sha256)`` of an episode: the source model is rebuilt as recorded first
    (:class:`~.models.ModelMismatchError` otherwise), the output's is the same model when the two scenes
    compile alike (same nominal hash), else the output scene with ``out_variation``."""
    src_var = None
    if variation_doc is not None:
        try:
            src_var = Variation.from_dict(variation_doc)
        except ValueError as e:
            raise RenderError(where, str(e)) from None
        if not isinstance(recorded_sha, str):
            raise RenderError(where, "has a variation but no model_sha256")
    src = episode_model(job.source_scene, src_var, recorded_sha if src_var is not None else job.source_sha256, where)
    same_scene = cached_model(job.scene).sha256 == cached_model(job.source_scene).sha256
    if same_scene and out_variation == src_var:
        return src.model, src.sha256
    built = episode_model(job.scene, out_variation)
    return built.model, built.sha256


def render_episode(job: RenderJob, entry: dict, position: int, variant: int | None,
                   side: dict[str, np.ndarray] | str, where: str,
                   window: tuple[int, int] | None = None) -> RenderedEpisode:
    """Replay one source episode (sidecar arrays ``side``, or the path of its sidecar) on the output's
    model and draw the output's cameras at the output's frame steps. ``variant``: the visual variant
    number (None: the source's own scene). ``where`` names the source episode in errors. ``window``:
    the stamps (ns) the frames must lie within (a dataflow recording's streams span less than its
    sidecar when the recorder began or ended off the simulation node: ``layout.camera_window``)."""
    if isinstance(side, str):
        side = sidecar.load_npz(side)
    for key in ("initial_state", "physics_ctrl", "step", "frame_timestamp", "state"):
        if key not in side:
            raise RenderError(where, f"sidecar has no {key!r} array")
    doc = entry.get(sidecar.VARIATION_KEY)
    src_var = None
    if doc is not None:
        try:
            src_var = Variation.from_dict(doc)
        except ValueError as e:
            raise RenderError(where, str(e)) from None
    index = _episode_index(entry, position)
    out_var = src_var if variant is None else visual_variant(job.cfg.seed, index, variant, src_var, job.scene)
    model, sha = _models(job, doc, entry.get(sidecar.MODEL_SHA256_KEY), out_var, where)
    renderer = _worker_state(job)
    renderer.use_model(model)

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    nstate = mujoco.mj_stateSize(model, spec)
    ctrl = np.asarray(side["physics_ctrl"], np.float64)
    init = np.asarray(side["initial_state"], np.float64)
    if init.shape != (nstate,) or ctrl.ndim != 2 or ctrl.shape[1] != model.nu:
        raise RenderError(where, f"sidecar initial_state {init.shape} / physics_ctrl {ctrl.shape} do not fit the model "
                                 f"(state size {nstate}, {model.nu} actuators): not the model recorded")
    dt = float(model.opt.timestep)
    dt_ns = int(round(dt * 1e9))
    _, every = job.record.every(dt)
    steps_total = len(ctrl)
    src_steps = np.asarray(side["step"]).astype(np.int64)
    src_ts = np.asarray(side["frame_timestamp"], np.int64)
    if len(src_steps) == 0 or len(src_ts) != len(src_steps):
        raise RenderError(where, "sidecar has no frames (step/frame_timestamp)")
    base = int(src_ts[0]) - int(src_steps[0]) * dt_ns  # the dataset clock of the episode, as recorded
    stored = {int(s): k for k, s in enumerate(src_steps)}
    src_state = side["state"]

    frame_steps = np.arange(0, steps_total + 1, every, dtype=np.int64)
    if window is not None:
        at = base + frame_steps * dt_ns
        frame_steps = frame_steps[(at >= window[0]) & (at <= window[1])]
        if not len(frame_steps):
            raise RenderError(where, "no frame time of the sidecar lies within the recorded streams' span")
    cube_adr = _cube_adr(model)
    frames = CameraFrames(model, renderer, job.scene.cameras, job.record.jpeg_quality)
    states = np.empty((len(frame_steps), nstate))
    qpos = np.empty((len(frame_steps), model.nq))
    qvel = np.empty((len(frame_steps), model.nv))
    obj = np.empty((len(frame_steps), len(cube_adr), 7))
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, init, spec)
    s = 0
    for k, target in enumerate(frame_steps):
        while s < target:
            data.ctrl[:] = ctrl[s]
            mujoco.mj_step(model, data)
            s += 1
        if s < steps_total:  # the generator records a frame after setting the control of its step
            data.ctrl[:] = ctrl[s]
        mujoco.mj_getState(model, data, states[k], spec)
        j = stored.get(int(s))
        if j is not None and not np.array_equal(states[k], src_state[j]):
            raise RenderError(where, f"replayed physics differs from the stored state at step {s} (frame {j}): "
                                     f"the model here is not the one recorded")
        qpos[k] = data.qpos
        qvel[k] = data.qvel
        for c, a in enumerate(cube_adr):
            obj[k, c] = data.qpos[a:a + 7]
        frames.add(data)
    ts = base + frame_steps * dt_ns
    # the episode's identity and judge facts (schema 2) are of its physics: carried over as recorded
    identity = {k: side[k] for k in (sidecar.EPISODE_KEY, sidecar.JUDGE_KEY) if k in side}
    side_arrays, frame_arrays = episode_arrays(init, ctrl, frame_steps, dt, ts, states, qpos, qvel, obj, frames,
                                               out_var, sha, identity)
    new = copy.deepcopy(entry)
    if variant is not None:
        new["id"] = f"{layout.check_name(entry['id'], 'episode id')}-v{int(variant)}"
    if out_var is not None:
        new[sidecar.VARIATION_KEY] = out_var.to_dict()
        new[sidecar.MODEL_SHA256_KEY] = sha
    if variant is not None:
        new[SOURCE_KEY] = {"episode": layout.check_name(entry["id"], "episode id"), "variant": int(variant),
                           "seed": int(job.cfg.seed), "index": int(index)}
    return RenderedEpisode(new, frames.streams(ts), sidecar.sim_files(side_arrays, frame_arrays))


def _cube_adr(model) -> list[int]:
    return [cube_qpos_adr(model, name)[0] for name in CUBE_NAMES]


def _run_local(args) -> RenderedEpisode | str:
    job, entry, position, variant, path, where, window = args
    try:
        return render_episode(job, entry, position, variant, path, where, window)
    except DatasetError as e:  # sent back as its one line (the driver raises it)
        return f"{e}"


# ----------------------------------------------------------------------------- the dataset
def _source(src: Path) -> tuple[Metadata, dict]:
    meta_path = src / layout.METADATA_FILE
    if not src.is_dir():
        raise RenderError(src, folder_problem(src))
    if not meta_path.is_file():
        raise RenderError(src, "is not a dataset (no metadata.yaml)")
    meta = Metadata.load(src)
    sim = meta.simulation
    if not isinstance(sim, dict):
        raise RenderError(meta_path, "is not a simulated dataset (no simulation block): nothing to replay")
    if not meta.episodes:
        raise RenderError(meta_path, "lists no episode")
    for ep in meta.episode_ids:
        if not _sidecar_path(src, ep).is_file():
            raise RenderError(_sidecar_path(src, ep), f"missing: episode {ep} has no simulation sidecar to replay")
    return meta, sim


def _check_model(src: Path, sim: dict, scene: SceneConfig) -> str:
    built = cached_model(scene)
    recorded = sim.get("model_sha256")
    if built.sha256 != recorded:
        why = "; ".join(provenance_differences(sim, built.model, built.sha256)) or "model hash differs"
        raise RenderError(src / layout.METADATA_FILE, f"model cannot be rebuilt as recorded ({why})")
    return built.sha256


def output_metadata(meta: Metadata, sim: dict, out_sim: dict) -> Metadata:
    """The output's metadata (no episode yet): the source's, its cameras, rates and simulation block replaced."""
    data = meta.to_dict()
    data["episodes"] = []
    cams = out_sim["cameras"]
    equipment = data.setdefault("equipment", {})
    equipment.setdefault("perceptions", {})["cameras"] = {c: {"width": v["width"], "height": v["height"]}
                                                         for c, v in cams.items()}
    data.setdefault("frequencies", {})["cameras"] = {c: float(out_sim["camera_hz"]) for c in cams}
    data["simulation"] = out_sim
    return Metadata(data)


def render_dataset(src: str | os.PathLike, out: str | os.PathLike, cfg: RenderConfig = RenderConfig(),
                   workers: int = 1, progress: Callable[[str, dict], None] | None = None, ray=None,
                   ray_gpus_per_task: float | None = None) -> RenderSummary:
    """Render ``src``'s episodes into ``out`` (created, or resumed) with ``cfg`` (module doc).

    ``ray``: a :class:`~openarm_sim_dataset.cluster.RayOptions` to render the episodes as Ray tasks,
    each asking for ``ray_gpus_per_task`` GPUs when given (render tasks on GPU nodes). ``src`` is never
    modified."""
    src, out = Path(src), Path(out)
    if cfg.camera_format not in CAMERA_FORMATS:
        raise ValueError(f"camera format must be one of {', '.join(CAMERA_FORMATS)}, not {cfg.camera_format!r}")
    if not cfg.cameras:
        raise ValueError("--cameras: at least one camera to render")
    if cfg.visual_variants < 0:
        raise ValueError("--visual-variants must be >= 0")
    if src.resolve() == out.resolve():
        raise RenderError(out, "is the source: the output must be another folder")
    meta, sim = _source(src)
    source_scene = _scene(sim, src / layout.METADATA_FILE)
    source_sha = _check_model(src, sim, source_scene)
    scene = output_scene(source_scene, cfg)
    camera_hz = float(sim["camera_hz"]) if cfg.camera_hz is None else float(cfg.camera_hz)
    live = sidecar.recorded_live(sim)
    if live:  # a dataflow recording: no generator's seed keys, only its rates
        base_cfg = None
        try:
            record = RecordConfig(float(sim["state_hz"]), camera_hz, int(sim.get("jpeg_quality", RecordConfig.jpeg_quality)))
        except (KeyError, TypeError, ValueError) as e:
            raise RenderError(src / layout.METADATA_FILE, f"simulation block unusable ({type(e).__name__}: {e})") from None
    else:
        try:
            base_cfg = config_from_simulation(sim, scene)
        except (KeyError, TypeError, ValueError) as e:
            raise RenderError(src / layout.METADATA_FILE, f"simulation block unusable (missing or bad {e})") from None
        record = dataclasses.replace(base_cfg.record, camera_hz=camera_hz)
    try:
        record.every(scene.timestep)
    except ValueError as e:
        raise ValueError(f"--camera-hz: {e}: frame times must fall on physics steps") from None
    out_model = load_model(scene)
    missing = [c for c in cfg.cameras if mujoco.mj_name2id(out_model, mujoco.mjtObj.mjOBJ_CAMERA, c) < 0]
    if missing:
        names = [out_model.camera(i).name for i in range(out_model.ncam)]
        raise ValueError(f"--cameras: {', '.join(missing)} not a camera of the model (it has {', '.join(names)})")
    check_rendering()
    gen_cfg = None if live else dataclasses.replace(base_cfg, record=record, camera_format=cfg.camera_format)
    job = RenderJob(source_scene, source_sha, scene, record, cfg, live)

    output = ConnectedOutput(ray, lambda: OutputLock(out))
    renderer = None
    try:
        renderer = _worker_state(job)  # this process's renderer (also the one a local run draws with)
        out_sim = dataflow_simulation_block(scene, record, renderer) if live else simulation_block(gen_cfg, out_model, renderer)
        for key in PHYSICS_PROVENANCE:
            if key in sim:
                out_sim[key] = sim[key]
            elif key == "cpu":  # a source from before simulation.cpu: its physics' CPU is unknown, not this one
                out_sim.pop(key, None)
        out_sim[RENDER_KEY] = {
            "source": {"path": str(src.resolve()), "metadata_sha256": _file_sha256(src / layout.METADATA_FILE),
                       "episodes": {ep: _file_sha256(layout.episode_dir(src, ep) / layout.MANIFEST_FILE)
                                    if (layout.episode_dir(src, ep) / layout.MANIFEST_FILE).is_file() else None
                                    for ep in meta.episode_ids}},
            "settings": cfg.settings(camera_hz),
        }
        out_meta = _open_output(out, meta, sim, out_sim)
        remove_uncommitted(out, out_meta)
        have = {e: ep for e, ep in zip(out_meta.episode_ids, out_meta.episodes)}
        todo = []  # (position, entry, variant, output id)
        for position, (ep, entry) in enumerate(zip(meta.episode_ids, meta.episodes)):
            for variant in (range(cfg.visual_variants) if cfg.visual_variants else (None,)):
                oid = ep if variant is None else f"{ep}-v{variant}"
                todo.append((position, ep, entry, variant, oid))
        summary = RenderSummary([have[t[4]] for t in todo if t[4] in have], 0, 0)
        summary.skipped = len(summary.episodes)
        todo = [t for t in todo if t[4] not in have]
        if ray is None:
            results = _render_all(src, todo, job, workers)
        else:
            results = _render_on_ray(src, todo, job, ray, ray_gpus_per_task)
        for (_position, ep, _entry, _variant, oid), rendered in results:
            files: dict[str, bytes | Path] = dict(_carried_files(layout.episode_dir(src, ep)))
            files.update(rendered.files)
            commit_episode(out, out_meta, rendered.entry, EpisodeData(cameras=rendered.cameras, files=files),
                           cfg.camera_format)
            summary.episodes.append(rendered.entry)
            summary.made += 1
            summary.frames += sum(len(v) for v in rendered.cameras.values())
            if progress:
                progress(oid, rendered.entry)
        close_log(out, out_meta)
        order = {t: i for i, t in enumerate(out_meta.episode_ids)}
        summary.episodes.sort(key=lambda e: order.get(str(e["id"]), len(order)))
        return summary
    finally:
        if renderer is not None:
            renderer.close()
            _WORKER.clear()
        output.close()


def _carried_files(ep_dir: Path) -> Iterator[tuple[str, Path]]:
    """Files of a source episode carried over byte for byte: all but its cameras, its sidecar and frames
    arrays and its manifest (those are the output's own)."""
    skip = {f"{layout.SIM_DIR}/{sidecar.SIDECAR_FILE}", f"{layout.SIM_DIR}/{sidecar.FRAMES_FILE}", layout.MANIFEST_FILE}
    for p in sorted(ep_dir.rglob("*")):
        rel = p.relative_to(ep_dir).as_posix()
        if p.is_file() and rel not in skip and not rel.startswith(layout.CAMERAS_DIR + "/"):
            yield rel, p


def _open_output(out: Path, meta: Metadata, sim: dict, out_sim: dict) -> Metadata:
    meta_path = out / layout.METADATA_FILE
    if meta_path.exists():
        existing = Metadata.load(out)
        stored = (existing.simulation or {}).get(RENDER_KEY)
        if not isinstance(stored, dict):
            raise RenderError(meta_path, "exists but is not the output of dataset-render (no simulation.render block)")
        for key in ("settings", "source"):
            a, b = stored.get(key), out_sim[RENDER_KEY][key]
            if key == "source":  # the source may be reached by another path: its content decides
                a = {k: v for k, v in (a or {}).items() if k != "path"}
                b = {k: v for k, v in b.items() if k != "path"}
            if a != b:
                raise RenderError(meta_path, f"arguments contradict the existing render ({key} differs: "
                                             f"stored {a!r:.200} vs now {b!r:.200})")
        return existing
    if out.exists() and any(not p.name.startswith(".tmp-") for p in out.iterdir()):
        raise RenderError(out, "exists, is not empty and has no metadata.yaml")
    out.mkdir(parents=True, exist_ok=True)
    new = output_metadata(meta, sim, out_sim)
    new.write(out)
    return new


def _render_all(src: Path, todo: list, job: RenderJob, workers: int) -> Iterator[tuple[tuple, RenderedEpisode]]:
    if not todo:
        return
    args = [(job, entry, position, variant, str(_sidecar_path(src, ep)), f"{src / layout.METADATA_FILE}: episode {ep}",
             _frame_window(src, ep) if job.live else None)
            for position, ep, entry, variant, _oid in todo]
    if workers <= 1:
        for t, a in zip(todo, args):
            yield t, render_episode(*a)
        return
    # spawn: a GL context must never be inherited through fork
    with mp.get_context("spawn").Pool(workers) as pool:
        for t, got in zip(todo, pool.imap(_run_local, args)):
            if isinstance(got, str):
                raise RenderError(None, got)
            yield t, got


def _ray_task(job: RenderJob, entry: dict, position: int, variant, side: dict, where: str, expected_env: dict,
              window: tuple[int, int] | None = None):
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        check_rendering()
        renderer = _worker_state(job)
        checked_worker(expected_env, lambda: environment(job.scene, renderer.gl_renderer))
        return ("ok", render_episode(job, entry, position, variant, side, where, window))
    except WorkerMismatch as e:
        return ("refused", str(e))
    except DatasetError as e:
        return ("refused", f"worker {node_name()}: {e}")


def gpu_placement(gpus: float) -> bool:
    """Whether render tasks ask for ``gpus`` GPUs each: True when some node of the connected cluster has
    that many, False (CPU rendering, the run goes on) when the cluster has no GPU at all; a request no
    GPU node can meet is refused (it would wait forever)."""
    ray = import_ray()
    per_node = [float((n.get("Resources") or {}).get("GPU", 0.0)) for n in ray.nodes() if n.get("Alive")]
    if not any(per_node):
        return False
    if max(per_node) < float(gpus):
        raise ClusterError(None, f"--ray-gpus-per-task {gpus:g}: no node has that many GPUs "
                                 f"(most on one node: {max(per_node):g})")
    return True


def _render_on_ray(src: Path, todo: list, job: RenderJob, opts, gpus: float | None) -> Iterator[tuple[tuple, RenderedEpisode]]:
    """Episodes rendered as Ray tasks (the driver reads each sidecar and sends its arrays: no shared
    filesystem needed); with ``gpus`` each task asks for that many GPUs, so Ray places it on a GPU node."""
    if not todo:
        return
    ray = import_ray()
    options = dict(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)
    if gpus and gpu_placement(gpus):
        options["num_gpus"] = float(gpus)
    if opts.runtime_env:
        options["runtime_env"] = opts.runtime_env
    task = ray.remote(_ray_task).options(**options)
    probe = SimRenderer(load_model(job.scene), job.scene)
    env_ref = ray.put(environment(job.scene, probe.gl_renderer))
    probe.close()
    job_ref = ray.put(job)

    def submit(t):
        position, ep, entry, variant, _oid = t
        side = sidecar.load_npz(_sidecar_path(src, ep))
        return task.remote(job_ref, entry, position, variant, side, f"{src / layout.METADATA_FILE}: episode {ep}", env_ref,
                           _frame_window(src, ep) if job.live else None)

    try:
        for t, answer in ordered_results(submit, todo, ray_window(opts)):
            if answer[0] == "refused":
                raise ClusterError(None, f"episode {t[4]} refused: {answer[1]}; nothing of it was listed")
            yield t, answer[1]
    except ray.exceptions.RayError as e:
        raise ClusterError(None, f"a Ray task failed beyond its {MAX_RETRIES} retries: {lost_task_message(e)}") from None
