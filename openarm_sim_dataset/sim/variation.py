"""Per-episode scene variation ("domain randomisation") that still replays exactly.

An episode's variation is drawn from its own generator, ``numpy.random.default_rng([seed, index,
VARIATION_STREAM])``, so it is independent of the pose and task draws of ``default_rng([seed,
index])`` (switching randomisation on or off never moves a cube) and of every other episode (shards
still merge into one generation). Every value is drawn in a fixed order whatever the mode, then the
mode keeps its part: episode ``i`` of ``visual`` and of ``all`` share their visual values, and
``physics`` and ``all`` their physical ones.

Modes (:data:`MODES`): ``none`` (nominal scene, nothing recorded: today's episodes byte for byte),
``visual`` (lights, colours, head camera pose), ``physics`` (cube size, mass, friction), ``all``.

Ranges (:data:`RANGES`, all uniform; lengths in metres, masses in kg):

* lights ``key`` and ``fill``: position +-0.30 m in x and y, +-0.20 m in z around the nominal one
  (direction kept); diffuse intensity 0.6-1.4 x nominal (grey); headlight ambient 0.25-0.45
  (nominal 0.35);
* table top colour: any hue, saturation 0-0.35, value 0.45-0.85 (muted: never mistaken for a cube);
  floor: the checker texture tinted by a material colour of any hue, saturation 0-0.3, value 0.6-1;
* cubes: hue within +-0.03 (+-10.8 deg) of the cube's nominal hue (red 0 deg, green 130 deg, blue
  228 deg: the bands stay 75 deg or more apart and inside the hue range people name red, green, blue),
  saturation 0.75-0.95, value 0.55-0.90, so that the colour a prompt names is never ambiguous;
* head camera: position +-0.03 m per axis and aim point +-0.03 m per axis around the nominal ones
  (about +-2.5 deg of view direction; the cube area stays in view), ``up`` kept vertical; intrinsics
  unchanged;
* each cube: edge 36-44 mm (nominal 40: +-10 %, what the gripper's opening and the grasp check allow),
  mass 0.03-0.08 kg (nominal 0.05), sliding friction 0.7-1.3 (nominal 1.0).

A :class:`Variation` round-trips through a plain dict (:meth:`Variation.to_dict`,
:meth:`Variation.from_dict`): the generator records it in the episode's metadata entry and in its
sidecar, and every consumer (replay, resume, regeneration, validation) rebuilds the episode's model
from it with :func:`openarm_sim_dataset.sim.scene.build_model` (``variation=``), which applies it to
the :class:`mujoco.MjSpec` before compiling (:meth:`Variation.apply`). Drawn values are rounded to
1e-6 so that the recorded numbers are the applied ones.
"""

from __future__ import annotations

import colorsys
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .scene import CUBE_NAMES, CUBE_RGBA, HEAD_CAMERA_POS, LIGHTS, SceneConfig, head_target, look_at_quat

__all__ = ["MODES", "VARIATION_STREAM", "VARIATION_RULE", "RANGES", "LightVariation", "CameraVariation",
           "CubeVariation", "Variation", "draw_variation", "check_mode"]

#: ``--randomize`` values.
MODES: tuple[str, ...] = ("none", "visual", "physics", "all")
#: Third seed word of the variation generator (ASCII "VARY"): a stream apart from ``default_rng([seed, i])``.
VARIATION_STREAM = 0x56415259
VARIATION_RULE = f"episode i's variation draws only from numpy.random.default_rng([seed, i, {VARIATION_STREAM:#x}])"

#: The stated ranges (uniform draws): name -> (low, high). See the module doc for what each means.
RANGES: dict[str, tuple[float, float]] = {
    "light_xy_offset_m": (-0.30, 0.30),
    "light_z_offset_m": (-0.20, 0.20),
    "light_diffuse_scale": (0.6, 1.4),
    "headlight_ambient": (0.25, 0.45),
    "table_saturation": (0.0, 0.35),
    "table_value": (0.45, 0.85),
    "floor_saturation": (0.0, 0.30),
    "floor_value": (0.6, 1.0),
    "cube_hue_offset": (-0.03, 0.03),
    "cube_saturation": (0.75, 0.95),
    "cube_value": (0.55, 0.90),
    "head_camera_offset_m": (-0.03, 0.03),
    "head_aim_offset_m": (-0.03, 0.03),
    "cube_size_m": (0.036, 0.044),
    "cube_mass_kg": (0.03, 0.08),
    "cube_friction": (0.7, 1.3),
}
#: Decimals kept of every drawn value (the recorded number is the applied one).
DECIMALS = 6

Vec3 = tuple[float, float, float]
Vec4 = tuple[float, float, float, float]


@dataclass(frozen=True)
class LightVariation:
    """A light's world position (m) and diffuse colour (RGB, 0-1); its direction stays nominal."""

    pos: Vec3
    diffuse: Vec3


@dataclass(frozen=True)
class CameraVariation:
    """A fixed camera's world position (m) and orientation (wxyz quaternion, MuJoCo camera axes)."""

    pos: Vec3
    quat: Vec4


@dataclass(frozen=True)
class CubeVariation:
    """A cube's edge length (m), mass (kg) and sliding friction coefficient."""

    size: float
    mass: float
    friction: float


@dataclass(frozen=True)
class Variation:
    """One episode's scene variation; ``None`` parts are nominal.

    Attributes:
        mode: the ``--randomize`` mode it was drawn for (``visual``, ``physics`` or ``all``).
        lights: light name -> :class:`LightVariation` (visual).
        headlight_ambient: grey level of the headlight's ambient term (visual).
        rgba: ``table`` / ``floor`` / cube body name -> RGBA (visual; the floor's multiplies its texture).
        cameras: fixed camera name -> :class:`CameraVariation` (visual).
        cubes: cube body name -> :class:`CubeVariation` (physics).
    """

    mode: str
    lights: Mapping[str, LightVariation] | None = None
    headlight_ambient: float | None = None
    rgba: Mapping[str, Vec4] | None = None
    cameras: Mapping[str, CameraVariation] | None = None
    cubes: Mapping[str, CubeVariation] | None = field(default=None)

    # ------------------------------------------------------------------ plain dicts
    def to_dict(self) -> dict[str, Any]:
        """A plain dict (str keys, floats and lists): what metadata.yaml and the sidecar record."""
        out: dict[str, Any] = {"mode": self.mode}
        visual: dict[str, Any] = {}
        if self.lights is not None:
            visual["lights"] = {n: {"pos": list(v.pos), "diffuse": list(v.diffuse)} for n, v in self.lights.items()}
        if self.headlight_ambient is not None:
            visual["headlight_ambient"] = self.headlight_ambient
        if self.rgba is not None:
            visual["rgba"] = {n: list(v) for n, v in self.rgba.items()}
        if self.cameras is not None:
            visual["cameras"] = {n: {"pos": list(v.pos), "quat": list(v.quat)} for n, v in self.cameras.items()}
        if visual:
            out["visual"] = visual
        if self.cubes is not None:
            out["physics"] = {"cubes": {n: {"size": v.size, "mass": v.mass, "friction": v.friction}
                                        for n, v in self.cubes.items()}}
        return out

    @classmethod
    def from_dict(cls, doc: object) -> Variation:
        """Parse :meth:`to_dict`'s output (untrusted: e.g. read from metadata.yaml).

        Raises ValueError naming the first key that is missing, unknown, of the wrong type or out of
        the physically meaningful range (sizes and masses > 0, colours in [0, 1], ...)."""
        d = _mapping(doc, "variation", {"mode"}, {"visual", "physics"})
        mode = d["mode"]
        if mode not in MODES or mode == "none":
            raise ValueError(f"variation.mode must be one of visual, physics, all, not {mode!r}")
        kw: dict[str, Any] = {"mode": mode}
        if "visual" in d:
            v = _mapping(d["visual"], "variation.visual", set(), {"lights", "headlight_ambient", "rgba", "cameras"})
            if "lights" in v:
                lights = {}
                for n, x in _items(v["lights"], "variation.visual.lights"):
                    lv = _mapping(x, f"variation.visual.lights.{n}", {"pos", "diffuse"})
                    lights[_name(n, "variation.visual.lights")] = LightVariation(
                        _vec(lv["pos"], 3, f"variation.visual.lights.{n}.pos"),
                        _vec(lv["diffuse"], 3, f"variation.visual.lights.{n}.diffuse", 0.0, 1.0))
                kw["lights"] = lights
            if "headlight_ambient" in v:
                kw["headlight_ambient"] = _num(v["headlight_ambient"], "variation.visual.headlight_ambient", 0.0, 1.0)
            if "rgba" in v:
                kw["rgba"] = {_name(n, "variation.visual.rgba"): _vec(x, 4, f"variation.visual.rgba.{n}", 0.0, 1.0)
                              for n, x in _items(v["rgba"], "variation.visual.rgba")}
            if "cameras" in v:
                cams = {}
                for n, x in _items(v["cameras"], "variation.visual.cameras"):
                    c = _mapping(x, f"variation.visual.cameras.{n}", {"pos", "quat"})
                    quat = _vec(c["quat"], 4, f"variation.visual.cameras.{n}.quat", -1.0, 1.0)
                    if not 0.5 < math.sqrt(sum(q * q for q in quat)) < 1.5:
                        raise ValueError(f"variation.visual.cameras.{n}.quat is not a rotation (norm far from 1)")
                    cams[_name(n, "variation.visual.cameras")] = CameraVariation(
                        _vec(c["pos"], 3, f"variation.visual.cameras.{n}.pos"), quat)
                kw["cameras"] = cams
        if "physics" in d:
            p = _mapping(d["physics"], "variation.physics", {"cubes"})
            cubes = {}
            for n, x in _items(p["cubes"], "variation.physics.cubes"):
                c = _mapping(x, f"variation.physics.cubes.{n}", {"size", "mass", "friction"})
                where = f"variation.physics.cubes.{n}"
                cubes[_name(n, "variation.physics.cubes")] = CubeVariation(
                    _num(c["size"], f"{where}.size", 1e-3, 0.2, open_low=True),
                    _num(c["mass"], f"{where}.mass", 1e-4, 10.0, open_low=True),
                    _num(c["friction"], f"{where}.friction", 0.0, 10.0, open_low=True))
            kw["cubes"] = cubes
        return cls(**kw)

    def key(self) -> str:
        """Canonical JSON of :meth:`to_dict` (sorted keys): equal variations, equal keys (cache keys)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def to_json_bytes(self) -> bytes:
        """UTF-8 JSON of :meth:`to_dict` as the sidecar stores it."""
        return self.key().encode()

    # ------------------------------------------------------------------ the model
    def apply(self, spec) -> None:
        """Set this variation's values on a scene :class:`mujoco.MjSpec` (before it is compiled).

        Raises ValueError if the spec lacks a light, camera, geom or material the variation names."""

        def find(kind: str, name: str):
            el = getattr(spec, kind)(name)
            if el is None:
                raise ValueError(f"the variation names {kind} {name!r}, which the scene does not have")
            return el

        for name, lv in (self.lights or {}).items():
            light = find("light", name)
            light.pos = list(lv.pos)
            light.diffuse = list(lv.diffuse)
        if self.headlight_ambient is not None:
            spec.visual.headlight.ambient = [self.headlight_ambient] * 3
        for name, rgba in (self.rgba or {}).items():
            if name == "floor":
                find("material", "floor_mat").rgba = list(rgba)
            elif name == "table":
                find("geom", "table_top").rgba = list(rgba)
            else:
                find("geom", f"{name}_geom").rgba = list(rgba)
        for name, cv in (self.cameras or {}).items():
            cam = find("camera", name)
            cam.pos = list(cv.pos)
            cam.quat = list(cv.quat)
        for name, cube in (self.cubes or {}).items():
            geom = find("geom", f"{name}_geom")
            h = cube.size / 2
            geom.size = [h, h, h]
            geom.mass = cube.mass
            geom.friction = [cube.friction, float(geom.friction[1]), float(geom.friction[2])]


# ---------------------------------------------------------------------------- drawing
def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else ValueError naming them."""
    if mode not in MODES:
        raise ValueError(f"randomize must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def _r(x: float) -> float:
    return round(float(x), DECIMALS)


def _hsv(h: float, s: float, v: float) -> Vec4:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, s, v)
    return (_r(r), _r(g), _r(b), 1.0)


def draw_variation(seed: int, index: int, mode: str, cfg: SceneConfig = SceneConfig(),
                   stream: tuple[int, ...] = (VARIATION_STREAM,)) -> Variation | None:
    """The variation of episode ``index`` of ``seed`` under ``mode`` (None for ``none``).

    Draws from ``default_rng([seed, index, *stream])`` (``stream``: :data:`VARIATION_STREAM`; a visual
    variant's is :func:`variant_stream`) in a fixed order (lights, headlight, table, floor, cube colours,
    head camera, then per cube size, mass, friction), whatever the mode."""
    check_mode(mode)
    if mode == "none":
        return None
    rng = np.random.default_rng([int(seed), int(index), *(int(w) for w in stream)])

    def u(name: str, size=None):
        lo, hi = RANGES[name]
        return rng.uniform(lo, hi, size)

    lights = {}
    for name, nominal in LIGHTS.items():
        off = np.concatenate([u("light_xy_offset_m", 2), [u("light_z_offset_m")]])
        scale = u("light_diffuse_scale")
        lights[name] = LightVariation(tuple(_r(p + o) for p, o in zip(nominal["pos"], off)),
                                      tuple(_r(c * scale) for c in nominal["diffuse"]))
    ambient = _r(u("headlight_ambient"))
    rgba = {"table": _hsv(rng.uniform(), u("table_saturation"), u("table_value")),
            "floor": _hsv(rng.uniform(), u("floor_saturation"), u("floor_value"))}
    for name in CUBE_NAMES:
        hue = colorsys.rgb_to_hsv(*CUBE_RGBA[name][:3])[0]
        rgba[name] = _hsv(hue + u("cube_hue_offset"), u("cube_saturation"), u("cube_value"))
    pos = tuple(_r(p + o) for p, o in zip(HEAD_CAMERA_POS, u("head_camera_offset_m", 3)))
    aim = tuple(_r(p + o) for p, o in zip(head_target(cfg), u("head_aim_offset_m", 3)))
    cameras = {"head": CameraVariation(pos, tuple(float(q) for q in look_at_quat(pos, aim)))}
    cubes = {name: CubeVariation(_r(u("cube_size_m")), _r(u("cube_mass_kg")), _r(u("cube_friction")))
             for name in CUBE_NAMES}
    visual = mode in ("visual", "all")
    physics = mode in ("physics", "all")
    return Variation(mode=mode,
                     lights=lights if visual else None,
                     headlight_ambient=ambient if visual else None,
                     rgba=rgba if visual else None,
                     cameras=cameras if visual else None,
                     cubes=cubes if physics else None)


#: Third seed word of a visual variant's generator (ASCII "VISU"), the variant number the fourth.
VARIANT_STREAM = 0x56495355
VARIANT_RULE = (f"visual variant k of source episode i (index = its seed_inputs.index) under render seed S: the visual "
                f"half of numpy.random.default_rng([S, i, {VARIANT_STREAM:#x}, k]) drawn as a variation is, its physical "
                f"half (cube size, mass, friction) stays the source episode's")


def variant_stream(variant: int) -> tuple[int, int]:
    """The ``stream`` of :func:`draw_variation` for visual variant ``variant``."""
    return (VARIANT_STREAM, int(variant))


def visual_variant(seed: int, index: int, variant: int, source: Variation | None,
                   cfg: SceneConfig = SceneConfig()) -> Variation:
    """Visual variant ``variant`` of an episode of index ``index`` that ran with variation ``source``
    (None: the nominal scene), under render seed ``seed``: new lights, colours and head camera pose
    (:data:`VARIANT_RULE`), the source's physical part unchanged, so the physics replays exactly.
    Mode ``all`` when the source varied the physics, else ``visual``."""
    drawn = draw_variation(seed, index, "visual", cfg, stream=variant_stream(variant))
    cubes = source.cubes if source is not None else None
    return Variation(mode="all" if cubes is not None else "visual", lights=drawn.lights,
                     headlight_ambient=drawn.headlight_ambient, rgba=drawn.rgba, cameras=drawn.cameras, cubes=cubes)


# ---------------------------------------------------------------------------- parsing helpers
def _mapping(doc: object, where: str, required: set, optional: set = frozenset()) -> Mapping:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where} must be a mapping, not {type(doc).__name__}")
    missing = sorted(required - set(doc))
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    unknown = sorted(str(k) for k in set(doc) - required - set(optional))
    if unknown:
        raise ValueError(f"{where} has unknown key(s) {', '.join(unknown)}")
    return doc


def _items(doc: object, where: str):
    if not isinstance(doc, Mapping) or not doc:
        raise ValueError(f"{where} must be a non-empty mapping")
    return list(doc.items())


def _name(name: object, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} has a key that is not a name: {name!r}")
    return name


def _num(x: object, where: str, lo: float = -1e3, hi: float = 1e3, open_low: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{where} must be a finite number, not {x!r}")
    if not (lo < x if open_low else lo <= x) or not x <= hi:
        raise ValueError(f"{where} = {x!r} is outside [{lo:g}, {hi:g}]")
    return float(x)


def _vec(x: object, n: int, where: str, lo: float = -1e3, hi: float = 1e3) -> tuple:
    if not isinstance(x, (list, tuple)) or len(x) != n:
        raise ValueError(f"{where} must be a list of {n} numbers")
    return tuple(_num(v, f"{where}[{i}]", lo, hi) for i, v in enumerate(x))
