"""Offscreen rendering of the scene cameras (RGB, depth, segmentation labels).

One :class:`mujoco.Renderer` per process, reused for every camera and frame, and for every
per-episode model of the scene (:meth:`SimRenderer.use_model`: an episode's variation changes colours,
lights, the head camera and cube sizes, which are read from the model at each frame; the GL context
holds only meshes, textures and buffers, which no variation changes).
Sites are hidden (all site groups off) and only geom groups 0-2 are drawn (the
robot's visual meshes; its collision meshes, group 3, are hidden).

Conventions:

* ``rgb``: (H, W, 3) uint8; ``depth``: (H, W) float32 metres along the camera's
  optical axis (not the ray length); ``labels``: (H, W) uint8 values of
  :data:`~openarm_sim_dataset.sim.scene.LABELS` (0 where no geom is hit).
* Pixel coordinates: origin at the top-left image corner, ``u`` to the right,
  ``v`` down, pixel centres at integer coordinates (the top-left pixel's centre
  is (0, 0)).
* :meth:`SimRenderer.intrinsics` gives ``K = [[f, 0, cx], [0, f, cy], [0, 0, 1]]``
  with ``f = (H / 2) / tan(fovy / 2)``, ``cx = (W - 1) / 2``, ``cy = (H - 1) / 2``,
  for a camera frame with x right, y down, z forward (OpenCV).
* Camera pose: ``cam_pos`` (3,) world position (m); ``cam_mat`` (9,) row-major
  world-from-camera rotation in MuJoCo's camera convention (camera x right, y up,
  looking along -z).  A point ``p_w`` maps to MuJoCo camera coordinates
  ``c = R.T @ (p_w - pos)`` and to OpenCV coordinates ``(c_x, -c_y, -c_z)``.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from .scene import SceneConfig, geom_labels  # noqa: E402

__all__ = ["SimRenderer", "intrinsics"]


class SimRenderer:
    """Renders the cameras of ``cfg.cameras`` at ``cfg.width`` x ``cfg.height``."""

    def __init__(self, model: mujoco.MjModel, cfg: SceneConfig = SceneConfig(), cull: bool = True) -> None:
        self.model = model
        #: leave out of each draw the geoms whose bounding sphere lies wholly outside the camera's view
        #: frustum (:func:`cull_scene`): the same images bit for bit (they draw no pixel), fewer vertices
        #: through the CPU rasterizer; ``cull=False`` draws every geom as before
        self.cull = bool(cull)
        #: the culling margin (m); None: :data:`CULL_MARGIN_M`
        self.cull_margin: float | None = None
        self.cfg = cfg
        self.width, self.height = int(cfg.width), int(cfg.height)
        self.cameras = tuple(cfg.cameras)
        self._cam_ids = {c: model.camera(c).id for c in self.cameras}
        self.renderer = mujoco.Renderer(model, height=self.height, width=self.width)
        self.option = mujoco.MjvOption()
        self.option.sitegroup[:] = 0
        self.option.geomgroup[:] = 0
        self.option.geomgroup[:3] = 1
        self._labels = geom_labels(model)
        # label lookup with a slot for "no geom" (-1 -> index ngeom).
        self._lut = np.concatenate([self._labels, np.zeros(1, np.uint8)])
        self._context_key = _context_key(model)
        self.gl_renderer = self._gl_string()

    def use_model(self, model: mujoco.MjModel) -> None:
        """Render ``model`` from now on: another episode's model of the same scene (its variation
        applied). The GL context is kept when everything it was made from (meshes, textures, visual
        options, labels) is unchanged, and made again otherwise."""
        if model is self.model:
            return
        key = _context_key(model)
        labels = geom_labels(model)
        if key == self._context_key and np.array_equal(labels, self._labels) and hasattr(self.renderer, "_model"):
            self.renderer._model = model  # what update_scene and the depth conversion read
        else:
            self.renderer.close()
            self.renderer = mujoco.Renderer(model, height=self.height, width=self.width)
            self._context_key = key
            self._labels = labels
            self._lut = np.concatenate([labels, np.zeros(1, np.uint8)])
        self.model = model
        self._cam_ids = {c: model.camera(c).id for c in self.cameras}

    def _gl_string(self) -> str:
        """OpenGL renderer string (e.g. llvmpipe) if cheaply available, else the MUJOCO_GL value."""
        backend = os.environ.get("MUJOCO_GL", "")
        try:
            ctx = getattr(self.renderer, "_gl_context", None)
            if ctx is not None:
                ctx.make_current()
            from OpenGL import GL  # type: ignore

            s = GL.glGetString(GL.GL_RENDERER)
            v = GL.glGetString(GL.GL_VERSION)
            if s:
                return f"{backend}: {s.decode()} | {v.decode() if v else ''}".strip()
        except Exception:  # pragma: no cover - best effort only
            pass
        return backend

    def render(self, data: mujoco.MjData, camera: str, rgb: bool = True, depth: bool = True,
               labels: bool = True) -> dict[str, np.ndarray]:
        """Render one camera; returns a dict with the requested ``rgb``/``depth``/``labels`` arrays.

        Two scene draws at most: the RGB pass, and one pass with MuJoCo's segmentation flags whose
        depth and colour buffers come out of one ``mjr_readPixels`` call (depth in metres, the colour
        holding each pixel's segmentation id). Bit for bit what ``mujoco.Renderer``'s RGB, depth and
        segmentation modes give (its depth mode draws with the same flags)."""
        r = self.renderer
        r.update_scene(data, camera=self._cam_ids[camera], scene_option=self.option)
        if not self._shared_pass or r._scene.camera[0].orthographic:
            return self._render_by_modes(rgb, depth, labels)
        if r._gl_context:
            r._gl_context.make_current()
        rect, scene, context = r._rect, r._scene, r._mjr_context
        seg_lut = self._segid_lut() if labels else None  # of the whole scene, before any geom is left out
        if self.cull:
            cull_scene(scene, self.width / self.height, CULL_MARGIN_M if self.cull_margin is None else self.cull_margin)
        h, w = self.height, self.width
        out: dict[str, np.ndarray] = {}
        if rgb:
            mujoco.mjr_render(rect, scene, context)
            buf = np.empty((h, w, 3), dtype=np.uint8)
            mujoco.mjr_readPixels(buf, None, rect, context)
            out["rgb"] = self._upright(buf)
        if depth or labels:
            flags = scene.flags.copy()
            scene.flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = True
            scene.flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = True
            try:
                mujoco.mjr_render(rect, scene, context)
            finally:
                np.copyto(scene.flags, flags)
            colour = np.empty((h, w, 3), dtype=np.uint8) if labels else None
            z = np.empty((h, w), dtype=np.float32) if depth else None
            mujoco.mjr_readPixels(colour, z, rect, context)
            if depth:
                out["depth"] = self._upright(self._metric_depth(z))
            if labels:
                out["labels"] = self._lut[self._geom_ids(self._upright(colour), seg_lut)]
        return out

    def _upright(self, img: np.ndarray) -> np.ndarray:
        """EGL/OSMesa/GLFW images come bottom row first (a contiguous copy, as mujoco.Renderer returns)."""
        return np.ascontiguousarray(img[::-1]) if self.renderer._gl_context else img

    def _metric_depth(self, z: np.ndarray) -> np.ndarray:
        """Depth-buffer values (reversed Z) to metres along the optical axis, float32: mujoco.Renderer's
        conversion step for step (float32 clip planes, float64 division), so that the result is identical."""
        model = self.model
        extent = model.stat.extent
        zfar = np.float32(model.vis.map.zfar * extent)
        znear = np.float32(model.vis.map.znear * extent)
        c_coef = -(zfar + znear) / (zfar - znear)
        d_coef = -(np.float32(2) * zfar * znear) / (zfar - znear)
        c_coef = np.float32(-0.5) * c_coef - np.float32(0.5)
        d_coef = np.float32(-0.5) * d_coef
        return (d_coef / (z.astype(np.float64) + c_coef)).astype(np.float32)

    def _segid_lut(self) -> np.ndarray:
        """segid + 1 -> geom id (-1: not a geom) of the current scene; the last slot is "none"."""
        scene = self.renderer._scene
        lut = np.full(scene.ngeom + 2, -1, dtype=np.int32)
        for g in scene.geoms[:scene.ngeom]:
            if g.segid != -1 and g.objtype == int(mujoco.mjtObj.mjOBJ_GEOM):
                lut[g.segid + 1] = g.objid
        return lut

    def _geom_ids(self, colour: np.ndarray, lut: np.ndarray | None = None) -> np.ndarray:
        """(H, W) geom id under each pixel (-1: none) from a segmentation colour buffer (segid + 1 in RGB)."""
        segid = colour[..., 0].astype(np.int32) | (colour[..., 1].astype(np.int32) << 8) | (colour[..., 2].astype(np.int32) << 16)
        lut = self._segid_lut() if lut is None else lut
        return lut[np.minimum(segid, len(lut) - 1)]

    def _render_by_modes(self, rgb: bool, depth: bool, labels: bool) -> dict[str, np.ndarray]:
        """The same images through mujoco.Renderer's modes (when its internals are not as expected):
        one pass per image, three per camera frame."""
        r = self.renderer
        out: dict[str, np.ndarray] = {}
        if rgb:
            out["rgb"] = r.render().copy()
        if depth:
            r.enable_depth_rendering()
            out["depth"] = r.render().astype(np.float32, copy=True)
            r.disable_depth_rendering()
        if labels:
            r.enable_segmentation_rendering()
            seg = r.render()
            r.disable_segmentation_rendering()
            ids = np.where(seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), seg[..., 0], -1)
            out["labels"] = self._lut[ids]
        return out

    @property
    def _shared_pass(self) -> bool:
        """Whether the two passes can be drawn here (needs the mujoco.Renderer internals they use)."""
        return all(hasattr(self.renderer, a) for a in ("_rect", "_mjr_context", "_scene", "_gl_context", "_model"))

    def render_all(self, data: mujoco.MjData) -> dict[str, dict[str, np.ndarray]]:
        """Render every configured camera: ``{camera: {"rgb", "depth", "labels"}}``."""
        return {c: self.render(data, c) for c in self.cameras}

    def intrinsics(self, camera: str) -> np.ndarray:
        """3x3 pinhole matrix (pixels) of ``camera`` at this renderer's resolution (see module doc)."""
        return intrinsics(self.model, camera, self.width, self.height)

    def cam_pos(self, data: mujoco.MjData, camera: str) -> np.ndarray:
        """World position (3,) of ``camera`` (m)."""
        return data.cam_xpos[self._cam_ids[camera]].copy()

    def cam_mat(self, data: mujoco.MjData, camera: str) -> np.ndarray:
        """Row-major (9,) world-from-camera rotation (MuJoCo camera axes: x right, y up, looks along -z)."""
        return data.cam_xmat[self._cam_ids[camera]].copy()

    def close(self) -> None:
        """Free the GL context."""
        self.renderer.close()


#: Fields of a :class:`mujoco.MjvGeom` (what :func:`cull_scene` moves when it compacts the geom list).
_GEOM_FIELDS = tuple(a for a in dir(mujoco.MjvGeom) if not a.startswith("_") and not callable(getattr(mujoco.MjvGeom, a)))
#: Extra radius (m) of every bounding sphere in the frustum test: a geom within it of the view is drawn.
CULL_MARGIN_M = 0.01


def cull_scene(scene: mujoco.MjvScene, aspect: float, margin: float = CULL_MARGIN_M) -> int:
    """Leave out of ``scene`` (in place, before ``mjr_render``) every geom whose bounding sphere
    (``modelrbound`` around its position, plus ``margin``) lies wholly outside the view frustum that
    ``mjr_render`` draws (the eyes' average camera, perspective; ``aspect`` = width / height of the viewport); geoms without a bound
    (planes, decor: ``modelrbound`` 0) are kept. Returns how many were left out.

    Such a geom produces no fragment, so the image, depth and segmentation buffers are the same bit for
    bit (tests compare whole episodes with and without); the CPU rasterizer (llvmpipe) no longer
    transforms and lights its vertices: the robot's visual meshes are 217k triangles, most of them out
    of a wrist camera's view. The kept geoms keep their order and their ``segid``."""
    n = scene.ngeom
    if n == 0:
        return 0
    # mjr_render (mono) draws from the average of the two eyes (each offset by half the ipd sideways)
    cam = mujoco.mjv_averageCamera(scene.camera[0], scene.camera[1])
    pos, fwd, up = np.asarray(cam.pos, np.float64), np.asarray(cam.forward, np.float64), np.asarray(cam.up, np.float64)
    right = np.cross(fwd, up)
    geoms = scene.geoms
    centres = np.array([geoms[i].pos for i in range(n)], dtype=np.float64)
    bound = np.array([geoms[i].modelrbound for i in range(n)], dtype=np.float64)
    d = centres - pos
    x, y, z = d @ right, d @ up, d @ fwd
    near, far = float(cam.frustum_near), float(cam.frustum_far)
    # mjr_render widens a zero frustum_width to the viewport's aspect: take the wider of the two
    half = max(float(cam.frustum_width), 0.5 * aspect * (float(cam.frustum_top) - float(cam.frustum_bottom)))
    r = bound + margin
    out = (z < near - r) | (z > far + r)
    centre = float(cam.frustum_center)
    for k, sign, coord in (((centre + half) / near, 1.0, x), ((centre - half) / near, -1.0, x),
                           (float(cam.frustum_top) / near, 1.0, y), (float(cam.frustum_bottom) / near, -1.0, y)):
        out |= sign * (coord - k * z) / np.sqrt(1.0 + k * k) > r  # beyond a side plane by more than r
    out &= bound > 0
    if not out.any():
        return 0
    keep = np.flatnonzero(~out)
    for dst, src in enumerate(keep.tolist()):
        if dst != src:
            g, s = geoms[dst], geoms[src]
            for f in _GEOM_FIELDS:
                setattr(g, f, getattr(s, f))
    scene.ngeom = len(keep)
    return n - len(keep)


def intrinsics(model: mujoco.MjModel, camera: str, width: int, height: int) -> np.ndarray:
    """3x3 pinhole matrix (pixels) of ``model``'s ``camera`` in a ``width`` x ``height`` image (module doc)."""
    fovy = np.deg2rad(float(model.cam_fovy[model.camera(camera).id]))
    f = 0.5 * height / np.tan(0.5 * fovy)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def _context_key(model: mujoco.MjModel) -> str:
    """Digest of what a GL context (``mjr_makeContext``) and the depth conversion take from a model:
    meshes, textures, height fields, skins, the visual options and the extent. Two models with one key
    render alike on one context."""
    import hashlib

    h = hashlib.sha256()
    for name in ("mesh_vert", "mesh_normal", "mesh_texcoord", "mesh_face", "mesh_facenormal", "mesh_facetexcoord",
                 "mesh_vertadr", "mesh_faceadr", "tex_data", "tex_adr", "tex_height", "tex_width", "tex_nchannel",
                 "tex_type", "hfield_data", "hfield_size", "skin_vert", "skin_face", "geom_type", "geom_dataid",
                 "mat_texid"):
        a = getattr(model, name, None)
        if a is not None:
            h.update(name.encode() + np.ascontiguousarray(a).tobytes())
    vis = model.vis
    for group in (vis.global_, vis.quality, vis.map, vis.scale):
        h.update(repr(group).encode())
    h.update(np.float64(model.stat.extent).tobytes())
    return h.hexdigest()
