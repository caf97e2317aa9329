"""Geometry of the scripted tasks: top-down gripper orientations, yaw and up-axis of a quaternion,
the table, tray and arm geoms read from the model, the arms' ready poses (frames: world metres,
radians, wxyz)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import mujoco
import numpy as np

from ...ik import IKSolver
from ...scene import CUBE_SIZE, SceneConfig
from .params import APPROACH_HEIGHT, GRASP_DEPTH, YAW_OFFSETS


def topdown_quat(yaw: float) -> np.ndarray:
    """World quaternion (wxyz) of the ee control point with fingers straight down, rotated ``yaw`` about +z.

    At zero joint angles the ee frame is world-aligned with the fingers along -z,
    so a top-down grasp is a pure rotation about z.  The fingers close along the
    frame's y axis.
    """
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def wrap_yaw_90(yaw: float) -> float:
    """Wrap ``yaw`` (rad) to [-pi/4, pi/4) using the cube's 90 deg symmetry."""
    q = math.pi / 2
    return (yaw + math.pi / 4) % q - math.pi / 4


def yaw_of_quat(q: Sequence[float]) -> float:
    """Yaw (rad, about world z) of a wxyz quaternion."""
    w, qx, qy, qz = q
    return math.atan2(2 * (w * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))


def up_vector(q: Sequence[float]) -> np.ndarray:
    """The body's local +z axis in world coordinates, from its wxyz quaternion (third matrix column)."""
    w, x, y, z = q
    return np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])


def table_height(model: mujoco.MjModel) -> float:
    """World z (m) of the table top, read from the model."""
    table = model.geom("table_top")
    return float(model.geom_pos[table.id][2] + model.geom_size[table.id][2] + model.body("table").pos[2])


def tray_geometry(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """Tray centre (x, y) and inner half extents (x, y), world m, read from the model."""
    return np.array(model.body("tray").pos[:2], float), np.array(model.site("tray_center").size[:2], float)


_READY_CACHE: dict[tuple[str, str], np.ndarray] = {}


def ready_qpos(model: mujoco.MjModel, cfg: SceneConfig | None = None, side: str = "right") -> np.ndarray:
    """Start pose (7,) of arm ``side``: fingers down, yaw ``YAW_OFFSETS[side][0]``, 15 cm above a grasp at
    the centre of that arm's cube area (the right arm's area is site ``cube_area_center``; the left
    arm's is its mirror image in y). ``cfg`` is accepted for API symmetry and ignored.
    """
    key = (side, hashlib.sha256(model.body_pos.tobytes() + model.site_pos.tobytes() + model.geom_size.tobytes()
                                + model.jnt_range.tobytes()).hexdigest())
    if key in _READY_CACHE:
        return _READY_CACHE[key].copy()
    ik = IKSolver(model, side, restarts=30)
    cx, cy, th = model.site("cube_area_center").pos
    if side == "left":
        cy = -cy
    z = th + CUBE_SIZE / 2 + GRASP_DEPTH + APPROACH_HEIGHT
    seed = np.array([0.5, 0.3, 0.0, 1.5, 0.0, 0.0, 0.0])
    if side == "left":
        seed = np.array([-0.5, -0.3, 0.0, 1.5, 0.0, 0.0, 0.0])
    q, ok, err = ik.solve([cx, cy, z], topdown_quat(YAW_OFFSETS[side][0]), seed, np.random.default_rng(0))
    if not ok:
        raise RuntimeError(f"ready pose of the {side} arm unreachable (err {err:.4f})")
    _READY_CACHE[key] = q
    return q.copy()


def arm_contact_pairs(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (ngeom,) of the geoms of the right arm and of the left arm (any robot body of that side)."""
    right = np.zeros(model.ngeom, bool)
    left = np.zeros(model.ngeom, bool)
    for g in range(model.ngeom):
        body = model.body(model.geom_bodyid[g]).name
        if "openarm_right_" in body:
            right[g] = True
        elif "openarm_left_" in body:
            left[g] = True
    return right, left


def geoms_touch(data: mujoco.MjData, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a geom of mask ``a`` touches a geom of mask ``b`` (boolean (ngeom,) masks, e.g. the two of
    :func:`arm_contact_pairs`) in ``data``'s contacts: the one test of arm-arm contact that the scripted
    controller, the environment and the validator's replay all count with."""
    n = data.ncon
    if not n:
        return False
    g = data.contact.geom[:n]
    return bool(np.any((a[g[:, 0]] & b[g[:, 1]]) | (b[g[:, 0]] & a[g[:, 1]])))
