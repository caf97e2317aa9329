"""MuJoCo scene for the simulated OpenArm pick-and-place task.

Conventions used throughout :mod:`openarm_sim_dataset.sim`:

* lengths in metres, angles in radians, time in seconds;
* quaternions are ``(w, x, y, z)`` (MuJoCo order);
* the world frame has ``z`` up; the robot faces ``+x``; the right arm is on ``-y``.

The bimanual OpenArm MJCF shipped by ``openarm-mujoco`` is attached with
:meth:`mujoco.MjSpec.attach` under the prefix :data:`ROBOT_PREFIX`, so every robot
name becomes e.g. ``"robot/openarm_right_joint1"``.  Use the helpers here instead
of hard-coding names.

Layout (defaults of :class:`SceneConfig`): shoulders (attach frame) at
``z = 0.79``; table top at ``z = 0.30``; the cube area is a 20 x 20 cm square
centred at ``(0.13, -0.23)`` in front of the right arm; the tray (12 x 12 cm
inside) is centred at ``(0.18, 0.01)``; a visual-only stand below the shoulders.

Reachability (measured with :class:`openarm_sim_dataset.sim.ik.IKSolver`, see
``tests/test_sim_ik.py`` and ``tools/sim_reach.py``): see :data:`REACH_NOTE`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

__all__ = [
    "ROBOT_PREFIX",
    "SIDES",
    "LABELS",
    "CUBE_NAMES",
    "CUBE_SIZE",
    "CUBE_RGBA",
    "LIGHTS",
    "HEAD_CAMERA_POS",
    "TABLE_RGBA",
    "head_target",
    "look_at_quat",
    "cube_half_size",
    "REACH_NOTE",
    "SceneConfig",
    "build_spec",
    "build_model",
    "model_hash",
    "model_bytes",
    "asset_hashes",
    "asset_files",
    "geom_labels",
    "ArmIndex",
    "arm_index",
    "robot_name",
    "cube_body_names",
    "cube_qpos_adr",
    "HOME_ARM_QPOS",
]

#: Prefix applied to every name of the attached OpenArm model.
ROBOT_PREFIX = "robot/"
#: Arm sides, in the order used by per-arm arrays.
SIDES: tuple[str, str] = ("right", "left")
#: Edge length of each cube (m).
CUBE_SIZE = 0.04
#: Cube colours in label order; the red cube is the pick target.
CUBE_NAMES: tuple[str, str, str] = ("cube_red", "cube_green", "cube_blue")
#: Nominal RGBA of each cube (:mod:`~openarm_sim_dataset.sim.variation` keeps each hue near its own).
CUBE_RGBA: dict[str, tuple[float, float, float, float]] = {
    "cube_red": (0.85, 0.1, 0.1, 1.0), "cube_green": (0.1, 0.7, 0.2, 1.0), "cube_blue": (0.1, 0.25, 0.85, 1.0)}
#: Nominal scene lights (no shadows: cheap headless rendering): position (world, m), direction,
#: diffuse and specular colour.
LIGHTS: dict[str, dict[str, tuple[float, float, float]]] = {
    "key": {"pos": (0.6, -0.6, 2.0), "dir": (-0.25, 0.25, -1.0), "diffuse": (0.45, 0.45, 0.45),
            "specular": (0.1, 0.1, 0.1)},
    "fill": {"pos": (-0.5, 0.5, 2.0), "dir": (0.3, -0.3, -1.0), "diffuse": (0.3, 0.3, 0.3),
             "specular": (0.0, 0.0, 0.0)},
}
#: Nominal head camera: position (world, m); it looks at :func:`head_target` (0.02 m above the table).
HEAD_CAMERA_POS: tuple[float, float, float] = (0.80, -0.12, 0.95)
#: Nominal table top colour (RGBA).
TABLE_RGBA: tuple[float, float, float, float] = (0.78, 0.68, 0.52, 1.0)

#: Segmentation label table: label value -> name.
LABELS: dict[int, str] = {
    0: "background",
    1: "floor",
    2: "table",
    3: "robot",
    4: "cube_red",
    5: "cube_green",
    6: "cube_blue",
    7: "tray",
}

#: Home joint positions (joint1..7, rad) of each arm: elbow bent 90 deg, hand in
#: front of the body, well clear of the table.
HOME_ARM_QPOS: dict[str, np.ndarray] = {
    "right": np.array([0.0, 0.0, 0.0, 1.5708, 0.0, 0.0, 0.0]),
    "left": np.array([0.0, 0.0, 0.0, 1.5708, 0.0, 0.0, 0.0]),
}

#: Measured reachability of top-down (fingers straight down, any yaw in
#: [-45, 45] deg) grasp poses over the cube area; filled in from
#: ``tools/sim_reach.py`` output.
REACH_NOTE = (
    "Full pick-and-place plan (every IK knot of approach, descent, lift, carry, lowering; position "
    "tol 1 mm, orientation tol 0.01 rad, fingers straight down) over an 11 x 11 grid of the 20 x 20 cm "
    "cube area x 3 cube yaws (-45, 0, +44 deg): 363/363 = 100 % (tools/sim_reach.py --n 11, ~0.2 s/plan). "
    "Top-down grasps are only reachable in a narrow band: shoulders 0.49 m above the table, area "
    "0.03-0.23 m in front of the shoulders and 0.0-0.2 m outboard of the right shoulder; gripper yaws "
    "of about 90-180 deg are the reachable ones, hence the yaw offsets tried by the controller."
)


@dataclass(frozen=True)
class SceneConfig:
    """Parameters of the scene (all lengths in metres, angles in radians).

    Attributes:
        timestep: physics step (s).
        cameras: cameras rendered by :class:`~openarm_sim_dataset.sim.render.SimRenderer`.
            Valid names: ``"head"``, ``"wrist_right"``, ``"wrist_left"``. Default: all three, so that
            every arm a task can use (an episode's ``arms``: right, left or both) has its wrist view.
        width, height: image size (pixels) of every camera.
        arm_height: world z of the bimanual attach frame (the shoulders).
        table_height: world z of the table top.
        table_center_xy, table_half_xy: table top footprint (world x, y).
        cube_area_center: world (x, y) of the centre of the square cube area.
        cube_area_half: half edge of the square cube area (0.10 -> 20 x 20 cm).
        tray_center_xy: world (x, y) of the tray centre.
        tray_half_xy: inner half extents of the tray floor.
        tray_wall_height: height of the tray walls above the table.
        cube_mass: mass of each cube (kg).
        cube_friction: sliding friction coefficient of the cubes.
        head_fovy: vertical field of view of the head camera (deg).
        wrist_left: add a ``wrist_left`` camera to the model (default True, with the default cameras;
            False: the model of datasets made before it was the default, whose metadata records it).
        impratio, cone, integrator: physics options (set explicitly).
    """

    timestep: float = 0.002
    cameras: tuple[str, ...] = ("head", "wrist_right", "wrist_left")
    width: int = 160
    height: int = 120
    arm_height: float = 0.79
    table_height: float = 0.30
    table_center_xy: tuple[float, float] = (0.225, -0.10)
    table_half_xy: tuple[float, float] = (0.275, 0.45)
    cube_area_center: tuple[float, float] = (0.13, -0.23)
    cube_area_half: float = 0.10
    tray_center_xy: tuple[float, float] = (0.18, 0.01)
    tray_half_xy: tuple[float, float] = (0.06, 0.06)
    tray_wall_height: float = 0.03
    cube_mass: float = 0.05
    cube_friction: float = 1.0
    head_fovy: float = 60.0
    wrist_left: bool = True
    impratio: float = 10.0
    cone: str = "elliptic"
    integrator: str = "implicitfast"
    offscreen_size: tuple[int, int] = (1280, 960)


def _openarm_xml() -> Path:
    import openarm_mujoco.v2 as oav2

    return Path(oav2.openarm_bimanual_xml())


def robot_name(name: str) -> str:
    """Full (prefixed) name of an element of the attached OpenArm model."""
    return ROBOT_PREFIX + name


def _mat_to_quat(mat: np.ndarray) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.asarray(mat, dtype=float).reshape(9))
    return q


def look_at_quat(pos, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """Quaternion (wxyz) of a MuJoCo camera at ``pos`` looking at ``target``.

    MuJoCo cameras look along their local -z with +y up.
    """
    pos = np.asarray(pos, float)
    fwd = np.asarray(target, float) - pos
    fwd /= np.linalg.norm(fwd)
    zc = -fwd
    xc = np.cross(np.asarray(up, float), zc)
    xc /= np.linalg.norm(xc)
    yc = np.cross(zc, xc)
    return _mat_to_quat(np.stack([xc, yc, zc], axis=1))


def head_target(cfg: SceneConfig) -> tuple[float, float, float]:
    """World point (m) the nominal head camera looks at: above the table, in front of the robot."""
    return (0.14, -0.12, cfg.table_height + 0.02)


#: xml path -> (asset hashes, {side: (pos, quat, fovy)}): the OpenArm wrist camera poses, resolved by a
#: compilation of the OpenArm model alone (its MJCF gives them as euler angles); once per process.
_WRIST_CAMERAS: dict[str, tuple] = {}


def _wrist_cameras(child: mujoco.MjSpec, xml: Path) -> dict[str, tuple]:
    assets = tuple(sorted(asset_hashes().items()))
    hit = _WRIST_CAMERAS.get(str(xml))
    if hit is not None and hit[0] == assets:
        return hit[1]
    child_model = child.compile()
    poses = {}
    for cam in child.cameras:
        cid = child_model.camera(cam.name).id
        poses[cam.name] = (child_model.cam_pos[cid].tolist(), child_model.cam_quat[cid].tolist(),
                           float(child_model.cam_fovy[cid]))
    _WRIST_CAMERAS[str(xml)] = (assets, poses)
    return poses


def build_spec(cfg: SceneConfig = SceneConfig(), variation=None) -> mujoco.MjSpec:
    """Build the (uncompiled) scene spec.

    Contents: floor, table, three 40 mm free cubes (red/green/blue), a tray,
    two lights, the fixed ``head`` camera, the bimanual OpenArm (16 position
    actuators, arm bodies with ``gravcomp=1``) and wrist cameras ``wrist_right``
    (and ``wrist_left`` if ``cfg.wrist_left``).  Sites are in group 5, which the
    renderer does not draw.

    ``variation``: an episode's :class:`~openarm_sim_dataset.sim.variation.Variation` (lights,
    colours, head camera pose, cube size/mass/friction), applied to the spec last; None: nominal.
    """
    spec = mujoco.MjSpec()
    spec.modelname = "openarm_sim_pick_place"
    opt = spec.option
    opt.timestep = cfg.timestep
    opt.cone = {"elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC, "pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL}[cfg.cone]
    opt.impratio = cfg.impratio
    opt.integrator = {
        "euler": mujoco.mjtIntegrator.mjINT_EULER,
        "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
        "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
        "rk4": mujoco.mjtIntegrator.mjINT_RK4,
    }[cfg.integrator]
    opt.gravity = [0.0, 0.0, -9.81]
    opt.iterations = 100
    opt.tolerance = 1e-8
    spec.compiler.degree = False

    vis = spec.visual
    vis.quality.offsamples = 0
    vis.quality.shadowsize = 0
    vis.global_.offwidth = max(cfg.offscreen_size[0], cfg.width)
    vis.global_.offheight = max(cfg.offscreen_size[1], cfg.height)
    vis.headlight.ambient = [0.35, 0.35, 0.35]
    vis.headlight.diffuse = [0.4, 0.4, 0.4]
    vis.headlight.specular = [0.0, 0.0, 0.0]
    vis.map.znear = 0.01
    vis.map.zfar = 50.0

    spec.add_texture(
        name="grid", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=[0.35, 0.37, 0.40], rgb2=[0.28, 0.30, 0.33], width=256, height=256,
    )
    spec.add_material(name="floor_mat", textures=["", "grid"], texrepeat=[8, 8], texuniform=True)

    wb = spec.worldbody
    wb.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[3, 3, 0.05], material="floor_mat")

    for name, light in LIGHTS.items():
        wb.add_light(name=name, castshadow=False, **{k: list(v) for k, v in light.items()})

    # Table: a box whose top is at table_height.
    th = cfg.table_height
    tx, ty = cfg.table_center_xy
    thx, thy = cfg.table_half_xy
    table = wb.add_body(name="table", pos=[tx, ty, th / 2])
    table.add_geom(name="table_top", type=mujoco.mjtGeom.mjGEOM_BOX, size=[thx, thy, th / 2],
                   rgba=list(TABLE_RGBA), friction=[1.0, 0.01, 0.001])

    # Tray: floor plate + 4 low walls, fixed to the table.
    cx, cy = cfg.tray_center_xy
    hx, hy = cfg.tray_half_xy
    wt, wh, bt = 0.005, cfg.tray_wall_height, 0.004
    tray = wb.add_body(name="tray", pos=[cx, cy, th])
    tray_rgba = [0.25, 0.35, 0.75, 1.0]
    tray_rgba = [0.85, 0.85, 0.85, 1.0]
    tray.add_geom(name="tray_floor", type=mujoco.mjtGeom.mjGEOM_BOX, size=[hx + wt, hy + wt, bt / 2],
                  pos=[0, 0, bt / 2], rgba=tray_rgba)
    for i, (px, py, sx, sy) in enumerate([
        (hx + wt / 2, 0, wt / 2, hy + wt), (-hx - wt / 2, 0, wt / 2, hy + wt),
        (0, hy + wt / 2, hx + wt, wt / 2), (0, -hy - wt / 2, hx + wt, wt / 2),
    ]):
        tray.add_geom(name=f"tray_wall{i}", type=mujoco.mjtGeom.mjGEOM_BOX, size=[sx, sy, wh / 2],
                      pos=[px, py, wh / 2], rgba=tray_rgba)
    # Site size = inner half extents of the tray (x, y) and wall height: read back by the controller.
    tray.add_site(name="tray_center", pos=[0, 0, bt], size=[hx, hy, wh], group=5)
    # Centre of the cube area on the table top (read back by the controller's start pose).
    wb.add_site(name="cube_area_center", pos=[cfg.cube_area_center[0], cfg.cube_area_center[1], th],
                size=[cfg.cube_area_half, cfg.cube_area_half, 0.001], group=5)

    # Cubes: free bodies; their initial pose comes from qpos (set per episode).
    h = CUBE_SIZE / 2
    ax, ay = cfg.cube_area_center
    for k, name in enumerate(CUBE_NAMES):
        b = wb.add_body(name=name, pos=[ax, ay - 0.3 + 0.1 * k, th + h])
        b.add_freejoint(name=name + "_joint")
        b.add_geom(name=name + "_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=[h, h, h], rgba=list(CUBE_RGBA[name]),
                   mass=cfg.cube_mass, friction=[cfg.cube_friction, 0.01, 0.001], condim=4, priority=2,
                   solref=[0.005, 1.0])
        b.add_site(name=name + "_site", size=[0.005, 0.005, 0.005], group=5)

    # Robot stand: visual-only column under the shoulders (label "robot").
    wb.add_geom(name="robot_stand", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.05, 0.12, cfg.arm_height / 2],
                pos=[-0.12, 0.0, cfg.arm_height / 2], rgba=[0.25, 0.25, 0.27, 1.0], contype=0, conaffinity=0)

    # Head camera: fixed, above and behind/left of the table, looking at the workspace.
    wb.add_camera(name="head", pos=list(HEAD_CAMERA_POS), quat=look_at_quat(HEAD_CAMERA_POS, head_target(cfg)),
                  fovy=cfg.head_fovy)

    # Robot: match options before attaching so that no attach conflict is reported.
    xml = _openarm_xml()
    child = _openarm_spec()
    child.option.cone = spec.option.cone
    child.option.impratio = spec.option.impratio
    child.option.timestep = spec.option.timestep
    child.option.integrator = spec.option.integrator
    child.option.iterations = spec.option.iterations
    child.option.tolerance = spec.option.tolerance
    child.option.gravity = spec.option.gravity
    for body in child.bodies:
        if body.name.startswith("openarm_"):
            body.gravcomp = 1.0
    for site in child.sites:
        site.group = 5
    # Wrist cameras: keep the OpenArm camera placement, under our names.
    poses = _wrist_cameras(child, xml)
    for cam in list(child.cameras):
        side = "right" if "right" in cam.name else "left"
        if side == "left" and not cfg.wrist_left:
            continue
        pos, quat, fovy = poses[cam.name]
        cam.parent.add_camera(name=f"wrist_{side}", pos=pos, quat=quat, fovy=fovy)
    frame = wb.add_frame(pos=[0.0, 0.0, cfg.arm_height])
    spec.attach(child, frame=frame, prefix=ROBOT_PREFIX)
    # After attach the cameras added to the child carry the prefix: rename them.
    for cam in spec.cameras:
        if cam.name.startswith(ROBOT_PREFIX + "wrist_"):
            cam.name = cam.name[len(ROBOT_PREFIX):]
    if variation is not None:
        variation.apply(spec)
    return spec


def build_model(cfg: SceneConfig = SceneConfig(), variation=None) -> mujoco.MjModel:
    """Compile :func:`build_spec` (with an episode's ``variation``, if any) into an :class:`mujoco.MjModel`."""
    return build_spec(cfg, variation).compile()


def cube_half_size(model: mujoco.MjModel, name: str = CUBE_NAMES[0]) -> float:
    """Half edge (m) of cube body ``name`` in ``model`` (episodes may vary it: never assume 0.02)."""
    return float(model.geom_size[model.body(name).geomadr[0]][0])


def model_bytes(model: mujoco.MjModel) -> bytes:
    """The compiled model serialised as MJB (``mj_saveModel``): what :func:`model_hash` hashes."""
    buf = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buf)
    return buf.tobytes()


def model_hash(model: mujoco.MjModel) -> str:
    """SHA-256 (hex) of the compiled model serialised as MJB (``mj_saveModel``)."""
    return hashlib.sha256(model_bytes(model)).hexdigest()


def _openarm_spec() -> mujoco.MjSpec:
    """The OpenArm MJCF as a spec whose meshes come from an assets dict keyed by their paths relative to
    the ``openarm_mujoco`` folder. Loaded with ``from_file``, MuJoCo keeps each mesh's absolute path in
    the compiled model (``MjModel.paths``, part of the MJB), so the model hash would depend on where the
    package is installed (another venv, a CI clone): a dataset made in one checkout would then be refused
    in every other. Mesh data are the same bytes either way."""
    xml = _openarm_xml()
    _root, files = asset_files()
    meshdir = xml.parent / (mujoco.MjSpec.from_file(str(xml)).compiler.meshdir or "")
    assets = {Path(f).relative_to(meshdir.resolve()).as_posix(): Path(f).read_bytes()
              for f in files if Path(f) != xml}
    return mujoco.MjSpec.from_string(xml.read_text(), assets=assets)


def asset_files() -> tuple[Path, list]:
    """The ``openarm_mujoco`` ``v2`` folder and every file the scene reads (the MJCF and its meshes)."""
    xml = _openarm_xml()
    root = xml.parent
    child = mujoco.MjSpec.from_file(str(xml))
    meshdir = root / (child.compiler.meshdir or "")
    files = {xml}
    for mesh in child.meshes:
        if mesh.file:
            files.add((meshdir / mesh.file).resolve())
    return root, sorted(files)


#: path -> ((size, mtime_ns, inode), sha256): asset files are hashed again only when they change.
FILE_SHA256: dict[str, tuple[tuple[int, int, int], str]] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of the file at ``path``, memoised in :data:`FILE_SHA256` by its size, mtime and inode."""
    st = path.stat()
    sig = (st.st_size, st.st_mtime_ns, st.st_ino)
    hit = FILE_SHA256.get(str(path))
    if hit is not None and hit[0] == sig:
        return hit[1]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    FILE_SHA256[str(path)] = (sig, digest)
    return digest


def asset_hashes() -> dict[str, str]:
    """SHA-256 of every file the scene reads: the OpenArm MJCF and its meshes.

    Keys are paths relative to the ``openarm_mujoco`` ``v2`` folder (``/``-separated). Each file is
    read again only when its size, mtime or inode changed since it was last hashed in this process.
    """
    root, files = asset_files()
    return {Path(os.path.relpath(f, root)).as_posix(): file_sha256(Path(f)) for f in files}


def geom_labels(model: mujoco.MjModel) -> np.ndarray:
    """Array ``(ngeom,)`` uint8 mapping geom id -> label of :data:`LABELS`."""
    lab = np.zeros(model.ngeom, dtype=np.uint8)
    by_body = {"table": 2, "tray": 7, "cube_red": 4, "cube_green": 5, "cube_blue": 6}
    for g in range(model.ngeom):
        name = model.geom(g).name
        body = model.body(model.geom_bodyid[g]).name
        if name == "robot_stand":
            lab[g] = 3
        elif name == "floor":
            lab[g] = 1
        elif body in by_body:
            lab[g] = by_body[body]
        elif body.startswith(ROBOT_PREFIX) or name.startswith(ROBOT_PREFIX):
            lab[g] = 3
    return lab


def cube_body_names() -> tuple[str, str, str]:
    """Body names of the cubes (red = pick target, green, blue)."""
    return CUBE_NAMES


def cube_qpos_adr(model: mujoco.MjModel, name: str) -> tuple[int, int]:
    """(qpos address, qvel address) of the free joint of cube body ``name``.

    qpos[adr:adr+7] = position (3, world, m) + quaternion (4, wxyz).
    """
    j = model.body(name).jntadr[0]
    return int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])


@dataclass(frozen=True)
class ArmIndex:
    """Indices of one arm in the compiled model.

    Attributes:
        side: ``"right"`` or ``"left"``.
        joint_ids: joint ids of joint1..7.
        qpos: qpos addresses of joint1..7 then the gripper (finger_joint1), shape (8,).
        qvel: qvel addresses, same order, shape (8,).
        actuators: actuator ids of joint1..7 then the gripper, shape (8,).
        finger_qpos: qpos addresses of both finger joints.
        site: site id of ``{side}_ee_control_point``.
        ee_body: body id of the end-effector base link.
        finger_geoms: ids of the collision geoms of both fingers.
        ctrl_low, ctrl_high: actuator control range (rad), shape (8,).
    """

    side: str
    joint_ids: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    actuators: np.ndarray
    finger_qpos: np.ndarray
    site: int
    ee_body: int
    finger_geoms: np.ndarray
    ctrl_low: np.ndarray
    ctrl_high: np.ndarray
    jnt_low: np.ndarray = field(default=None)
    jnt_high: np.ndarray = field(default=None)


def _find(model: mujoco.MjModel, objtype, name: str) -> int:
    for cand in (name, ROBOT_PREFIX + name):
        i = mujoco.mj_name2id(model, objtype, cand)
        if i >= 0:
            return i
    raise KeyError(f"{name!r} not found in model")


def arm_index(model: mujoco.MjModel, side: str) -> ArmIndex:
    """Index helper for arm ``side`` (``"right"`` or ``"left"``); names resolved with or without prefix."""
    if side not in SIDES:
        raise ValueError(side)
    J = mujoco.mjtObj.mjOBJ_JOINT
    jids = [_find(model, J, f"openarm_{side}_joint{i}") for i in range(1, 8)]
    f1 = _find(model, J, f"openarm_{side}_finger_joint1")
    f2 = _find(model, J, f"openarm_{side}_finger_joint2")
    A = mujoco.mjtObj.mjOBJ_ACTUATOR
    acts = [_find(model, A, f"{side}_joint{i}_ctrl") for i in range(1, 8)] + [_find(model, A, f"{side}_finger1_ctrl")]
    site = _find(model, mujoco.mjtObj.mjOBJ_SITE, f"{side}_ee_control_point")
    ee = _find(model, mujoco.mjtObj.mjOBJ_BODY, f"openarm_{side}_ee_base_link")
    fb = {_find(model, mujoco.mjtObj.mjOBJ_BODY, f"openarm_{side}_ee_inner_finger"),
          _find(model, mujoco.mjtObj.mjOBJ_BODY, f"openarm_{side}_ee_outer_finger")}
    fgeoms = [g for g in range(model.ngeom)
              if model.geom_bodyid[g] in fb and (model.geom_contype[g] or model.geom_conaffinity[g])]
    all_j = jids + [f1]
    acts_a = np.array(acts)
    return ArmIndex(
        side=side,
        joint_ids=np.array(jids),
        qpos=np.array([model.jnt_qposadr[j] for j in all_j]),
        qvel=np.array([model.jnt_dofadr[j] for j in all_j]),
        actuators=acts_a,
        finger_qpos=np.array([model.jnt_qposadr[f1], model.jnt_qposadr[f2]]),
        site=site,
        ee_body=ee,
        finger_geoms=np.array(fgeoms),
        ctrl_low=model.actuator_ctrlrange[acts_a, 0].copy(),
        ctrl_high=model.actuator_ctrlrange[acts_a, 1].copy(),
        jnt_low=model.jnt_range[jids, 0].copy(),
        jnt_high=model.jnt_range[jids, 1].copy(),
    )
