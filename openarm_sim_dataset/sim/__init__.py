"""MuJoCo simulation core: scene, IK, trajectories, scripted pick-and-place, randomisation, rendering.

Importing this package sets ``MUJOCO_GL=egl`` (unless already set) before MuJoCo is imported.
"""
import os as _os

_os.environ.setdefault("MUJOCO_GL", "egl")
