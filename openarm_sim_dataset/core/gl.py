"""MuJoCo, imported with headless rendering chosen, or a one-line error that says what to install.

MuJoCo picks its OpenGL backend once, when it is first imported, from ``MUJOCO_GL``; this package uses
EGL (``egl``, Mesa's llvmpipe on a machine without a GPU) unless the variable says otherwise. If that
backend's libraries are missing, ``import mujoco`` may fail deep inside PyOpenGL, or succeed and fail at
the first render; :func:`import_mujoco` and :func:`check_rendering` turn both into one
:class:`RenderingUnavailable` line, asked before any output is created.
"""

from __future__ import annotations

import os
import sys

from .errors import DatasetError

#: Debian/Ubuntu packages that provide each headless backend.
BACKEND_PACKAGES = {"egl": "libegl1 libegl-mesa0 libgl1-mesa-dri", "osmesa": "libosmesa6"}


class RenderingUnavailable(DatasetError):
    """MuJoCo cannot start because the OpenGL libraries of the chosen backend are missing."""


def import_mujoco():
    """The ``mujoco`` module, with ``MUJOCO_GL`` defaulting to ``egl``; :class:`RenderingUnavailable`
    (one line naming the backend and the packages to install) if its libraries cannot be loaded."""
    mod = sys.modules.get("mujoco")
    if mod is not None:
        return mod
    backend = os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import mujoco
    except Exception as e:  # PyOpenGL signals a missing library as ImportError, AttributeError or OSError
        for name in [m for m in sys.modules if m == "mujoco" or m.startswith(("mujoco.", "OpenGL"))]:
            del sys.modules[name]  # half-imported: a later attempt must start again
        raise _unavailable(backend, e) from None
    return mujoco


_RENDERING_CHECKED = False


def check_rendering() -> None:
    """Create and free a 1x1 offscreen OpenGL context with MuJoCo's backend (once per process, ~40 ms):
    :class:`RenderingUnavailable` if it cannot be made. MuJoCo imports even when the backend's libraries
    are missing and fails only at the first render; callers that will render ask here before any work."""
    global _RENDERING_CHECKED
    if _RENDERING_CHECKED:
        return
    mujoco = import_mujoco()
    try:
        ctx = mujoco.GLContext(1, 1)
        ctx.make_current()
        ctx.free()
    except Exception as e:  # ImportError (library missing), RuntimeError/FatalError (no display, no device)
        raise _unavailable(os.environ.get("MUJOCO_GL", ""), e) from None
    _RENDERING_CHECKED = True


def _unavailable(backend: str, e: BaseException) -> RenderingUnavailable:
    packages = BACKEND_PACKAGES.get(backend)
    fix = (f"install them (as root: apt-get install {packages}; tools/env.sh does this)" if packages
           else f"use MUJOCO_GL={' or '.join(BACKEND_PACKAGES)}")
    detail = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
    return RenderingUnavailable(None, f"MuJoCo cannot render: MUJOCO_GL={backend} needs OpenGL libraries that "
                                      f"cannot be loaded ({detail}); {fix}")
