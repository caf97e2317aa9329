"""The simulation sidecar: exact float64 physics stream of an episode, plus lossless depth/labels.

Files (per episode, under ``episodes/<id>/sim/``, never opened by openarm_dataset):

``sidecar.npz`` (float64 unless noted)
    ``initial_state``   (S,)        mjSTATE_INTEGRATION before the first physics step
    ``physics_ctrl``    (T, nu)     the control applied at every physics step
    ``step``            (F,)        physics step index of each camera frame (state before that step)
    ``time``            (F,)        simulated time of each frame, seconds
    ``frame_timestamp`` (F,) int64  dataset timestamp of each frame, nanoseconds
    ``state``           (F, S)      mjSTATE_INTEGRATION at each frame
    ``qpos`` / ``qvel`` (F, nq/nv)  full generalized state (objects included)
    ``object_pose``     (F, 3, 7)   red/green/blue cube: position (m, world) + quaternion (wxyz)
    ``cam_pos_<cam>``   (F, 3)      camera position, world, metres
    ``cam_mat_<cam>``   (F, 9)      camera orientation, row-major 3x3 world-from-camera rotation
                                    (MuJoCo convention: camera looks along its -z, +y is image up)
    ``variation``       (N,) uint8  randomised episodes only: UTF-8 JSON of the episode's scene variation
                                    (:class:`openarm_sim_dataset.sim.variation.Variation`), as in its
                                    metadata entry
    ``model_sha256``    (64,) uint8 randomised episodes only: ASCII hex SHA-256 of the MJB of the
                                    model the episode ran on (its variation applied)
    ``episode``         (N,) uint8  schema 2: UTF-8 JSON of the episode's identity as the generator
                                    knew it: ``{"task", "arms", "seed_inputs": {"seed", "index"}}``
                                    (must equal its metadata entry; see ``EPISODE_KEY``)
    ``judge``           (N,) uint8  schema 2: UTF-8 JSON of what the task's success rule read besides
                                    the judged state: ``{"step": physics step of the judged state or
                                    null (timeout), "lanes": [{"outcome", "lost_phase", "lifted"}]}``
                                    (:meth:`~openarm_sim_dataset.sim.tasks.planner.ScriptedController.judge_facts`)
    ``trim``            (N,) uint8  episodes trimmed by ``dataset-edit`` only: UTF-8 JSON ``{"first_step":
                                    the untrimmed episode's physics step that is step 0 here,
                                    "source_steps": its number of physics steps, "frames": [first, last]
                                    of its frames kept]}`` (:mod:`openarm_sim_dataset.edit`)
    ``source_initial_state`` (S,)   trimmed episodes only: the untrimmed episode's ``initial_state``
                                    (its seed's, which ``sim_identity`` and the task's judge read)
``frames.npz``
    ``depth_<cam>``     (F, H, W) float32  metres along the optical axis
    ``labels_<cam>``    (F, H, W) uint8    see ``LABELS``

Schema versions (``simulation.schema_version`` in metadata.yaml): 1, the arrays above without
``episode`` and ``judge``; 2 adds them. A schema-1 sidecar still reads; the checks that need the
facts it lacks skip its episodes, saying so.

npz files are written with fixed zip timestamps so that regeneration is byte-identical, and read
with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from collections.abc import Collection
from pathlib import Path

import numpy as np

from . import layout
from .atomic import atomic_write_bytes
from .errors import DatasetError

SCHEMA_VERSION = 2
#: The first schema whose sidecars hold ``episode`` and ``judge``.
FACTS_SCHEMA = 2
SIDECAR_FILE = "sidecar.npz"
FRAMES_FILE = "frames.npz"
LABELS = {0: "background", 1: "floor", 2: "table", 3: "robot", 4: "red_cube", 5: "green_cube", 6: "blue_cube", 7: "tray"}
OBJECTS = ("red_cube", "green_cube", "blue_cube")
#: Sidecar arrays (and metadata entry keys) of a randomised episode; absent when nothing was varied.
VARIATION_KEY = "variation"
MODEL_SHA256_KEY = "model_sha256"
#: Sidecar arrays of schema 2 (JSON text): the episode's identity, and its judge's history facts.
EPISODE_KEY = "episode"
JUDGE_KEY = "judge"
#: ``simulation.source`` of a dataset recorded live from a simulation node in a dora dataflow
#: (:mod:`openarm_sim_dataset.dora.sim_nodes`): physics-only sidecars with no task identity or judge
#: (a teleoperator, not a seed, drove it); a generated dataset has no ``source`` key.
SOURCE_DATAFLOW = "dataflow"


def recorded_live(simulation: dict | None) -> bool:
    """Whether a ``simulation:`` block is one of a dataflow recording (see :data:`SOURCE_DATAFLOW`)."""
    return isinstance(simulation, dict) and simulation.get("source") == SOURCE_DATAFLOW


#: Sidecar arrays of an episode trimmed by ``dataset-edit`` (:mod:`openarm_sim_dataset.edit`): the cut
#: (JSON) and the untrimmed episode's initial state. ``initial_state`` is then the state of the first frame
#: kept, ``step`` counts from it, and ``time`` stays the simulated time (``(step + first_step) x timestep``).
TRIM_KEY = "trim"
SOURCE_INITIAL_STATE_KEY = "source_initial_state"


def first_step(arrays: dict[str, np.ndarray], path: str | os.PathLike = "sidecar") -> int:
    """The untrimmed episode's physics step that is step 0 of these sidecar arrays (0 when untrimmed)."""
    rec = read_json(arrays, TRIM_KEY, path) if TRIM_KEY in arrays else None
    step = (rec or {}).get("first_step", 0)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise SidecarError(path, f"{TRIM_KEY}.first_step {step!r} is not a physics step")
    return step


def seed_initial_state(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The episode's initial state as its seed set it: ``source_initial_state`` of a trimmed episode,
    else ``initial_state``."""
    return arrays[SOURCE_INITIAL_STATE_KEY] if SOURCE_INITIAL_STATE_KEY in arrays else arrays["initial_state"]


#: The keys of the ``episode`` JSON (each equal to the metadata entry's key of the same name).
IDENTITY_FIELDS = ("task", "arms", "seed_inputs")


class SidecarError(DatasetError):
    """A sidecar or frames npz is unreadable or breaks the schema."""


def expected_shapes(cameras: list[str], nq: int, nv: int, nu: int, state_size: int) -> dict[str, tuple]:
    """Shape of each sidecar array; -1 stands for the frame count F (or step count T)."""
    shapes: dict[str, tuple] = {
        "initial_state": (state_size,),
        "physics_ctrl": (-2, nu),
        "step": (-1,),
        "time": (-1,),
        "frame_timestamp": (-1,),
        "state": (-1, state_size),
        "qpos": (-1, nq),
        "qvel": (-1, nv),
        "object_pose": (-1, len(OBJECTS), 7),
    }
    for cam in cameras:
        shapes[f"cam_pos_{cam}"] = (-1, 3)
        shapes[f"cam_mat_{cam}"] = (-1, 9)
    return shapes


def check_arrays(arrays: dict[str, np.ndarray], shapes: dict[str, tuple], path: str | os.PathLike) -> list[str]:
    """Problems (empty list if none) of sidecar arrays against ``expected_shapes``."""
    problems = []
    sizes: dict[int, int] = {}
    for key, shape in shapes.items():
        if key not in arrays:
            problems.append(f"missing array {key!r}")
            continue
        a = arrays[key]
        want_dtype = np.int64 if key == "frame_timestamp" else np.float64
        if a.dtype != want_dtype:
            problems.append(f"{key} is {a.dtype}, expected {np.dtype(want_dtype)}")
        if a.ndim != len(shape):
            problems.append(f"{key} has shape {a.shape}, expected {shape}")
            continue
        for dim, want in zip(a.shape, shape):
            if want < 0:
                if sizes.setdefault(want, dim) != dim:
                    problems.append(f"{key} has {dim} rows, other arrays have {sizes[want]}")
            elif dim != want:
                problems.append(f"{key} has shape {a.shape}, expected {shape}")
    return problems


def text_array(text: str) -> np.ndarray:
    """A string stored in an npz without pickle: its UTF-8 bytes as a 1-D uint8 array."""
    return np.frombuffer(text.encode(), dtype=np.uint8).copy()


def json_array(value: object) -> np.ndarray:
    """A JSON-able value stored as :func:`text_array` of its canonical JSON (sorted keys: same value, same bytes)."""
    import json

    return text_array(json.dumps(value, sort_keys=True, separators=(",", ":")))


def read_json(arrays: dict[str, np.ndarray], key: str, path: str | os.PathLike) -> dict | None:
    """The JSON object stored under ``key`` by :func:`json_array`, or None when the sidecar has no
    ``key`` (an older schema). Raises :class:`SidecarError` (naming ``path``) when it is not 1-D uint8
    UTF-8 text of a JSON object."""
    import json

    if key not in arrays:
        return None
    a = arrays[key]
    if a.dtype != np.uint8 or a.ndim != 1:
        raise SidecarError(path, f"{key} is {a.dtype}{a.shape}, expected 1-D uint8 text")
    try:
        value = json.loads(a.tobytes().decode())
    except UnicodeDecodeError:
        raise SidecarError(path, f"{key} is not UTF-8 text") from None
    except ValueError as e:
        raise SidecarError(path, f"{key} is not JSON ({e})") from None
    if not isinstance(value, dict):
        raise SidecarError(path, f"{key} is not a JSON object")
    return value


def episode_variation(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> tuple[dict | None, str | None]:
    """``(variation dict, model hash)`` recorded in an episode's sidecar arrays; ``(None, None)`` for an
    episode of the nominal scene. Raises :class:`SidecarError` (naming ``path``) when one is present
    without the other or either is not what :func:`text_array` writes."""
    import json

    have = [k for k in (VARIATION_KEY, MODEL_SHA256_KEY) if k in arrays]
    if not have:
        return None, None
    if len(have) == 1:
        raise SidecarError(path, f"has {have[0]!r} without {({VARIATION_KEY, MODEL_SHA256_KEY} - set(have)).pop()!r}")
    out = []
    for key in (VARIATION_KEY, MODEL_SHA256_KEY):
        a = arrays[key]
        if a.dtype != np.uint8 or a.ndim != 1:
            raise SidecarError(path, f"{key} is {a.dtype}{a.shape}, expected 1-D uint8 text")
        try:
            out.append(a.tobytes().decode())
        except UnicodeDecodeError:
            raise SidecarError(path, f"{key} is not UTF-8 text") from None
    try:
        variation = json.loads(out[0])
    except ValueError as e:
        raise SidecarError(path, f"{VARIATION_KEY} is not JSON ({e})") from None
    if not isinstance(variation, dict):
        raise SidecarError(path, f"{VARIATION_KEY} is not a JSON object")
    sha = out[1]
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise SidecarError(path, f"{MODEL_SHA256_KEY} is not a hex SHA-256")
    return variation, sha


def save_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray], compress: bool = False) -> None:
    """Write arrays as an .npz atomically, byte-reproducibly (fixed zip member timestamps)."""
    atomic_write_bytes(path, npz_bytes(arrays, compress))


def npz_bytes(arrays: dict[str, np.ndarray], compress: bool = False) -> bytes:
    """An .npz as bytes, with fixed zip member timestamps (same input, same bytes)."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for key, value in arrays.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, np.ascontiguousarray(value), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            info.external_attr = 0o644 << 16
            zf.writestr(info, b.getvalue())
    return buf.getvalue()


def load_npz(path: str | os.PathLike, members: Collection[str] | None = None) -> dict[str, np.ndarray]:
    """Load every array of an .npz (or only those named in ``members``, when given) with
    ``allow_pickle=False``; failures name the file. Names in ``members`` that the file lacks are
    left out of the result."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block or never end
            raise SidecarError(path, "is not a regular file")
        out = {}
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    raise SidecarError(path, f"member {info.filename!r} is not an .npy array")
                if members is not None and info.filename[:-4] not in members:
                    continue
                with zf.open(info) as f:  # check the declared size before numpy allocates it
                    version = np.lib.format.read_magic(f)
                    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                    shape, _fortran, dtype = read_header(f)
                    if dtype.hasobject:
                        raise SidecarError(path, f"refused: {info.filename} holds Python objects (pickle)")
                    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if need > info.file_size - f.tell():
                        raise SidecarError(path, f"{info.filename} declares shape {shape} but holds fewer bytes")
                with zf.open(info) as f:
                    out[info.filename[:-4]] = np.lib.format.read_array(f, allow_pickle=False)
        return out
    except SidecarError:
        raise
    except FileNotFoundError:
        raise SidecarError(path, "not found") from None
    except ValueError as e:
        raise SidecarError(path, f"refused: {str(e).splitlines()[0][:160]}") from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise SidecarError(path, f"unreadable npz ({str(e).splitlines()[0][:160]})") from None


def npz_names(path: str | os.PathLike) -> list[str]:
    """Names of the arrays an .npz holds (from its zip directory; nothing is decompressed)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SidecarError(path, "is not a regular file")
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except SidecarError:
        raise
    except FileNotFoundError:
        raise SidecarError(path, "not found") from None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as e:
        raise SidecarError(path, f"unreadable npz ({str(e).splitlines()[0][:160]})") from None
    bad = [n for n in names if not n.endswith(".npy")]
    if bad:
        raise SidecarError(path, f"member {bad[0]!r} is not an .npy array")
    return [n[:-4] for n in names]


def sim_streams(sim_dir: Path, cameras: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-frame simulation streams of an episode, keyed for :class:`Sample.sim`:
    ``object_pose``, ``cam_pos/<cam>``, ``cam_mat/<cam>``, ``depth/<cam>``, ``labels/<cam>``,
    each as (frame timestamps int64 ns, array with frames on axis 0)."""
    side = load_npz(sim_dir / SIDECAR_FILE)
    if "frame_timestamp" not in side:
        raise SidecarError(sim_dir / SIDECAR_FILE, "missing array 'frame_timestamp'")
    ts = side["frame_timestamp"]
    if ts.dtype != np.int64 or ts.ndim != 1 or (ts.size > 1 and not np.all(np.diff(ts) > 0)):
        raise SidecarError(sim_dir / SIDECAR_FILE, "frame_timestamp must be strictly increasing 1-D int64 nanoseconds")
    if "object_pose" not in side:
        raise SidecarError(sim_dir / SIDECAR_FILE, "missing array 'object_pose'")
    out = {"object_pose": (ts, side["object_pose"])}
    frames_path = sim_dir / FRAMES_FILE
    frames = load_npz(frames_path) if frames_path.exists() else {}
    for cam in cameras:
        for key in ("cam_pos", "cam_mat"):
            if f"{key}_{cam}" in side:
                out[f"{key}/{cam}"] = (ts, side[f"{key}_{cam}"])
        for key in ("depth", "labels"):
            if f"{key}_{cam}" in frames:
                out[f"{key}/{cam}"] = (ts, frames[f"{key}_{cam}"])
    for key, (_ts, values) in out.items():
        if values.ndim == 0 or len(values) != len(ts):
            src = frames_path if key.startswith(("depth/", "labels/")) else sim_dir / SIDECAR_FILE
            raise SidecarError(src, f"{key.replace('/', '_')} has {values.shape[0] if values.ndim else 'no'} rows, "
                                    f"frame_timestamp has {len(ts)}")
    return out


def sim_files(side_arrays: dict[str, np.ndarray], frame_arrays: dict[str, np.ndarray]) -> dict[str, bytes]:
    """The episode's ``sim/`` files (relative path -> bytes) of its sidecar and frames arrays."""
    return {f"{layout.SIM_DIR}/{SIDECAR_FILE}": npz_bytes(side_arrays),
            f"{layout.SIM_DIR}/{FRAMES_FILE}": npz_bytes(frame_arrays, compress=True)}
