"""Replay an episode's physics from its sidecar and compare with what was stored, bit for bit.

Scope of exactness: same machine architecture, same MuJoCo build, same compiled model (hash).
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco
import numpy as np

from openarm_sim_dataset import __version__
from openarm_sim_dataset.core.camera import decode_jpeg
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.machine import cpu_identity

from .episode_recorder import encode_jpeg
from .scene import asset_hashes, model_hash

#: MuJoCo's name of the data field each mjSTATE_* component holds, where it differs from the enum's
_FIELD_NAMES = {"WARMSTART": "qacc_warmstart"}


def state_components(model: mujoco.MjModel, spec: int = int(mujoco.mjtState.mjSTATE_INTEGRATION)
                     ) -> list[tuple[str, int, int]]:
    """``(name, start, stop)`` of every non-empty component of a ``spec`` state vector, in MuJoCo's
    layout order (bit order of ``mjtState``; sizes from ``mj_stateSize`` per component): e.g. ``time``,
    ``qpos``, ``qvel``, ``act``, ``qacc_warmstart``, ``ctrl``, ... so a difference can be named."""
    out, at = [], 0
    for name, bit in mujoco.mjtState.__members__.items():
        b = int(bit)
        if b & (b - 1) or not b & int(spec) or name == "mjNSTATE":  # single components only
            continue
        n = mujoco.mj_stateSize(model, b)
        if n:
            short = name.removeprefix("mjSTATE_")
            out.append((_FIELD_NAMES.get(short, short.lower()), at, at + n))
            at += n
    return out


def differing_components(model: mujoco.MjModel, a: np.ndarray, b: np.ndarray) -> list[str]:
    """Names of the mjSTATE_INTEGRATION components in which state vectors ``a`` and ``b`` differ bitwise."""
    diff = bitwise_differ(a, b)
    return [name for name, i, j in state_components(model) if diff[i:j].any()]


def bitwise_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: whether two float64 arrays of one shape differ in any bit (NaN equals the same NaN,
    -0.0 differs from 0.0: a replay must reproduce every bit, not only every value)."""
    return np.ascontiguousarray(a, np.float64).view(np.uint64) != np.ascontiguousarray(b, np.float64).view(np.uint64)


@dataclass
class ReplayReport:
    """What a replay reproduced: frames compared; ``exact``: frames whose qpos/qvel equal the stored
    ones; ``state_exact``: frames whose whole mjSTATE_INTEGRATION vector equals the stored ``state``
    bit for bit; largest |difference| in qpos and qvel; ``first_mismatch``: the first frame where
    anything differs, ``first_parts``: the state components that differ there (see
    :func:`state_components`); ``captured``: the replayed state vectors at the steps asked for."""

    start_frame: int
    frames: int
    exact: int
    max_qpos_diff: float
    max_qvel_diff: float
    first_mismatch: int | None
    state_exact: int = 0
    first_parts: tuple[str, ...] = ()
    captured: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.frames > 0 and self.exact == self.frames and self.state_exact == self.frames


def replay(model: mujoco.MjModel, side: dict[str, np.ndarray], from_frame: int | None = None,
           state_only: str = "integration", capture: tuple[int, ...] = (),
           watch: Callable[[int, mujoco.MjData], None] | None = None) -> ReplayReport:
    """Replay ``physics_ctrl`` and compare, at every stored frame, qpos/qvel with the stored ``qpos``/``qvel``
    and the whole mjSTATE_INTEGRATION vector with the stored ``state``, bit for bit.

    ``from_frame=None`` starts from ``initial_state``; ``from_frame=k`` resumes from the stored
    state of frame k. ``state_only="qpos_qvel"`` resumes from qpos, qvel, time and ctrl alone
    (no warm start): shown by the tests not to be exact during contact. ``capture``: physics step
    indices whose replayed state vector to return (``captured[step]``); the replay runs on past the
    last frame to reach them (at most to the end of ``physics_ctrl``). ``watch(s, data)``: called with
    ``data`` after ``s`` physics steps (before step ``s``'s control is set), for every ``s`` from the start
    to the end of ``physics_ctrl`` (the replay then runs to its end): what a caller reads of the replayed
    states (e.g. a rollout's success rule at its control steps) costs no second replay.
    """
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    data = mujoco.MjData(model)
    ctrl = side["physics_ctrl"]
    steps = side["step"].astype(np.int64)
    stored_state = side["state"]
    if from_frame is None:
        mujoco.mj_setState(model, data, side["initial_state"], spec)
        start, k0 = 0, 0
    else:
        k0 = int(from_frame)
        start = int(steps[k0])
        if state_only == "integration":
            mujoco.mj_setState(model, data, stored_state[k0], spec)
        else:
            mujoco.mj_resetData(model, data)
            data.qpos[:] = side["qpos"][k0]
            data.qvel[:] = side["qvel"][k0]
            data.time = float(side["time"][k0])
            data.ctrl[:] = ctrl[start] if start < len(ctrl) else ctrl[-1]
            mujoco.mj_forward(model, data)
    buf = np.empty(mujoco.mj_stateSize(model, spec))
    exact = state_exact = 0
    dq = dv = 0.0
    first, parts = None, ()
    frames = range(k0, len(steps))
    want = sorted({int(c) for c in capture if start <= int(c) <= len(ctrl)})
    captured: dict[int, np.ndarray] = {}
    s = start

    def advance(target: int) -> None:
        nonlocal s
        while s < target:
            if watch is not None:
                watch(s, data)
            if s in want:
                captured[s] = _state(model, data, buf).copy()
            data.ctrl[:] = ctrl[s]
            mujoco.mj_step(model, data)
            s += 1

    for k in frames:
        advance(int(steps[k]))
        # a frame's stored state is the one its step's control is applied to (the recorder reads it
        # after setting data.ctrl): so is the replayed one; the next mj_step sets the same control
        if s < len(ctrl):
            data.ctrl[:] = ctrl[s]
        eq = np.array_equal(data.qpos, side["qpos"][k]) and np.array_equal(data.qvel, side["qvel"][k])
        st = _state(model, data, buf)
        same_state = st.shape == stored_state[k].shape and not bitwise_differ(st, stored_state[k]).any()
        exact += eq
        state_exact += same_state
        if not (eq and same_state) and first is None:
            first = k
            parts = tuple(differing_components(model, st, stored_state[k])) if not same_state else ("qpos/qvel arrays",)
        dq = max(dq, float(np.max(np.abs(data.qpos - side["qpos"][k]))))
        dv = max(dv, float(np.max(np.abs(data.qvel - side["qvel"][k]))))
    if want:
        advance(min(max(want), len(ctrl)))
        if s in want:
            captured[s] = _state(model, data, buf).copy()
    if watch is not None:
        advance(len(ctrl))
        watch(s, data)
    return ReplayReport(k0, len(frames), exact, dq, dv, first, state_exact, parts, captured)


def _state(model: mujoco.MjModel, data: mujoco.MjData, buf: np.ndarray) -> np.ndarray:
    mujoco.mj_getState(model, data, buf, mujoco.mjtState.mjSTATE_INTEGRATION)
    return buf


def provenance_differences(sim: dict, model: mujoco.MjModel, sha256: str | None = None) -> list[str]:
    """What differs between a dataset's ``simulation:`` block and this build (empty: replayable).

    Names the simulator, MuJoCo version, timestep, model hash, and which asset files changed.
    ``sha256``: the model's hash if already known (see :mod:`openarm_sim_dataset.sim.models`).
    """
    diffs = []
    if sim.get("simulator") != "MuJoCo":
        diffs.append(f"simulator {sim.get('simulator')!r} recorded, MuJoCo here")
    if sim.get("mujoco_version") != mujoco.__version__:
        diffs.append(f"MuJoCo {sim.get('mujoco_version')} recorded, {mujoco.__version__} here")
    if float(sim.get("timestep_s", -1)) != float(model.opt.timestep):
        diffs.append(f"timestep {sim.get('timestep_s')} s recorded, {model.opt.timestep} s here")
    now = sha256 or model_hash(model)
    if now != sim.get("model_sha256"):
        diffs.append(f"model hash {str(sim.get('model_sha256'))[:12]} recorded, {now[:12]} built here")
        changed = sorted(k for k, v in asset_hashes().items() if (sim.get("asset_sha256") or {}).get(k) != v)
        if changed:
            diffs.append(f"asset files changed: {', '.join(changed)}")
    return diffs


def package_differences(sim: dict) -> list[str]:
    """Package versions and the CPU where they differ from the recorded provenance (explain a drifting
    replay: bit-exact physics is promised on the CPU that computed it, :mod:`openarm_sim_dataset.machine`;
    datasets from before ``simulation.cpu`` existed do not say theirs)."""
    now = {"python": platform.python_version(), "numpy": np.__version__, "generator": __version__,
           "machine": platform.machine(), "cpu": cpu_identity()}
    rec = {"python": sim.get("python"), "numpy": sim.get("numpy"),
           "generator": (sim.get("generator") or {}).get("version"), "machine": sim.get("machine"),
           "cpu": sim.get("cpu")}
    return [f"{k} {rec[k]!s} recorded, {now[k]} here" if rec[k] is not None else f"{k} not recorded ({now[k]} here)"
            for k in now if rec[k] != now[k]]


@dataclass
class RerenderReport:
    """Stored frames rendered again: depth and labels must match exactly; RGB is re-encoded with the
    recorded JPEG quality and compared byte for byte (exact on the same GL implementation), and its
    PSNR against the decoded stored JPEG is measured (dB; infinite when equal).

    ``first_jpeg_mismatch`` / ``worst_psnr_at``: ``(camera, frame index, frame timestamp ns)``."""

    frames: int
    depth_exact: int
    labels_exact: int
    jpeg_exact: int
    min_psnr_db: float
    depth_labels: bool = True
    first_jpeg_mismatch: tuple[str, int, int] | None = None
    worst_psnr_at: tuple[str, int, int] | None = None

    def differences(self, same_renderer: bool, psnr_floor_db: float) -> list[str]:
        """What differs from the stored episode: depth, labels; on the recording's GL renderer the JPEG
        bytes, elsewhere (approximate: the renderer differs) a PSNR below ``psnr_floor_db``."""
        out = []
        if self.depth_labels and self.depth_exact != self.frames:
            out.append(f"depth ({self.frames - self.depth_exact} frames)")
        if self.depth_labels and self.labels_exact != self.frames:
            out.append(f"labels ({self.frames - self.labels_exact} frames)")
        if same_renderer and self.jpeg_exact != self.frames:
            out.append(f"JPEG bytes ({self.frames - self.jpeg_exact} frames)")
        if not same_renderer and self.min_psnr_db < psnr_floor_db:
            out.append(f"PSNR {self.min_psnr_db:.1f} dB below the {psnr_floor_db:g} dB floor")
        return out


def psnr_db(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio (dB) of two uint8 images of one shape (inf when equal)."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0**2 / mse) if mse > 0 else float("inf")


def rerender(model: mujoco.MjModel, side: dict[str, np.ndarray], frames: dict[str, np.ndarray] | None,
             stored_jpegs, quality: int, renderer, stride: int = 1, depth_labels: bool = True,
             psnr_always: bool = True) -> RerenderReport:
    """Render every ``stride``-th stored frame state again and compare with the stored depth, labels
    (``depth_labels``) and JPEGs (``stored_jpegs[camera][k]`` -> bytes; may be lazy).

    Images depend on the GL implementation (llvmpipe here): on another renderer depth/labels may
    still match while RGB bytes differ. ``psnr_always=False`` decodes a stored JPEG only when the
    re-encoded bytes differ (where equal bytes are expected: the cost stays that of rendering)."""
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    renderer.use_model(model)  # the episode's own model (its variation) is the one rendered
    data = mujoco.MjData(model)
    n = depth_ok = labels_ok = jpeg_ok = 0
    min_psnr = float("inf")
    first = worst = None
    stamps = side["frame_timestamp"]
    for k in range(0, len(side["state"]), max(1, int(stride))):
        mujoco.mj_setState(model, data, side["state"][k], spec)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_camlight(model, data)
        for cam in renderer.cameras:
            img = renderer.render(data, cam, depth=depth_labels, labels=depth_labels)
            n += 1
            if depth_labels:
                depth_ok += np.array_equal(img["depth"], frames[f"depth_{cam}"][k])
                labels_ok += np.array_equal(img["labels"], frames[f"labels_{cam}"][k])
            stored = stored_jpegs[cam][k]
            same = encode_jpeg(img["rgb"], quality) == stored
            jpeg_ok += same
            where = (cam, k, int(stamps[k]))
            if not same and first is None:
                first = where
            if psnr_always or not same:
                try:
                    decoded = decode_jpeg(stored)
                    p = psnr_db(img["rgb"], decoded) if decoded.shape == img["rgb"].shape else 0.0
                except DatasetError:
                    p = 0.0  # undecodable stored frame: nothing in common
                if worst is None or p < min_psnr:
                    worst = where
                min_psnr = min(min_psnr, p)
    return RerenderReport(n, depth_ok, labels_ok, jpeg_ok, min_psnr, depth_labels, first, worst)
