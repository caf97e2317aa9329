# Sourced by tools/*.sh: make .venv with the package installed (editable) and headless GL settings.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import openarm_sim_dataset, pytest, xdist, openarm_dataset" 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
fi
export MUJOCO_GL="${MUJOCO_GL:-egl}"
export PYOPENGL_PLATFORM="${PYOPENGL_PLATFORM:-egl}"
