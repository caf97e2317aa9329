"""The environment of a process: what decides the bytes it writes (versions, builds, the CPU, the model, the GL
renderer). A Ray worker compares its own with the driver's before it records or checks anything
(:func:`openarm_sim_dataset.cluster.checked_worker`)."""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path
from typing import Any

from openarm_sim_dataset import __version__
from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.core.machine import cpu_identity

from .models import cached_model, mujoco_library_sha256
from .scene import asset_hashes


def package_source_sha256() -> str:
    """SHA-256 over this package's Python sources (names and bytes): the code that writes the data."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()


def environment(scene=None, gl_renderer: str | None = None) -> dict[str, Any]:
    """What decides the bytes this process writes: versions, builds, the model of ``scene`` (a
    :class:`~openarm_sim_dataset.sim.scene.SceneConfig`; None leaves the model out) and the GL renderer
    (None: not rendering). Two processes with equal environments produce identical episodes."""
    import importlib.metadata as md

    import numpy
    import PIL
    import pyarrow
    from PIL import features


    mujoco = import_mujoco()

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    env = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": cpu_identity(),  # MuJoCo's physics differs in the last bits between CPUs (machine.py)
        "mujoco": mujoco.__version__,
        "mujoco_library_sha256": mujoco_library_sha256(),
        "openarm_mujoco": version("openarm-mujoco"),
        "asset_sha256": asset_hashes(),
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "pillow": PIL.__version__,
        "libjpeg": features.version("jpg"),
        "openarm_sim_dataset": __version__,
        "openarm_sim_dataset_source_sha256": package_source_sha256(),
    }
    if scene is not None:
        env["model_sha256"] = cached_model(scene).sha256
    if gl_renderer is not None:
        env["gl_renderer"] = gl_renderer
    return env
