# Sourced by tools/*.sh from the repository root: the system packages headless MuJoCo needs, then .venv
# with the package installed (editable) with the extra named by ENV_EXTRA (default test: every extra
# the tests use, ~2.5 GB with torch and Ray; tools/quickstart.sh sets viz: the core and matplotlib for
# dataset-show), then a 1x1 render to prove the GL stack works.
# As root with apt-get (CI, a fresh container) missing packages are installed; otherwise one line names
# the command to run and the script stops before any work.
_env_missing() {
  local pkgs=() p
  command -v dpkg >/dev/null || return 0  # not Debian/Ubuntu: nothing we can check by package
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p"); done
  echo "${pkgs[@]}"
}
case "${MUJOCO_GL:-egl}" in
  osmesa) _env_pkgs="$(_env_missing libosmesa6)" ;;
  *) _env_pkgs="$(_env_missing libegl1 libegl-mesa0 libgl1-mesa-dri)" ;;
esac
python3 -c "import ensurepip, venv" 2>/dev/null || _env_pkgs="$_env_pkgs python3-venv"
# dataset-view's browser tests (tests/test_view.py, slow set) drive a real headless Chromium: CI asks for it
# (.ci/run sets OPENARM_TEST_BROWSER=1, and then those tests fail rather than skip without it); any other
# run leaves it out, and the tests skip, saying so (OPENARM_CHROMIUM=PATH names another browser binary)
if [ "${OPENARM_TEST_BROWSER:-0}" = 1 ] && [ -z "${OPENARM_CHROMIUM:-}" ]; then
  _env_pkgs="$_env_pkgs $(_env_missing chromium)"
fi
# the recorder's compiled frame put (setup.py; optional: without a compiler the package runs it in Python)
if ! command -v cc >/dev/null && ! command -v gcc >/dev/null && [ "$(id -u)" = 0 ]; then
  _env_pkgs="$_env_pkgs gcc"
fi
_env_pkgs="$(echo $_env_pkgs)"
if [ -n "$_env_pkgs" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "tools/env.sh: installing $_env_pkgs (headless rendering / venv / browser tests)" >&2
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $_env_pkgs >/dev/null
  else
    echo "tools/env.sh: missing system packages: $_env_pkgs; run: sudo apt-get install -y $_env_pkgs" >&2
    return 1 2>/dev/null || exit 1
  fi
fi
# (find_spec: checks the modules of the extra, without paying their import time; a venv that already
# holds more, e.g. the test extra when the quick start asks for viz, is used as it is)
_env_extra="${ENV_EXTRA:-test}"
case "$_env_extra" in
  test) _env_mods="'openarm_sim_dataset', 'pytest', 'xdist', 'openarm_dataset', 'matplotlib', 'rerun', 'ray', 'torch', 'gymnasium', 'dora', 'robot_eval_logger', 'importlinter', 'ruff', 'sybil', 'mkdocs', 'material', 'mkdocstrings_handlers.python', 'mkdocs_gen_files'" ;;
  viz) _env_mods="'openarm_sim_dataset', 'matplotlib'" ;;
  *) echo "tools/env.sh: ENV_EXTRA must be test or viz, not '$_env_extra'" >&2; return 1 2>/dev/null || exit 1 ;;
esac
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ($_env_mods)))" 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  # (-c: the locked versions of tools/constraints.txt, which the golden values were made with)
  .venv/bin/python -m pip install -q -c tools/constraints.txt -e ".[$_env_extra]"
  # robot-eval-logger 0.0.1 pins numpy<2 (rerun-sdk needs numpy>=2): without its dependencies, for
  # tests/test_convert_robot_eval_logger.py (the export needs only its data classes)
  [ "$_env_extra" != test ] || .venv/bin/python -m pip install -q --no-deps robot-eval-logger==0.0.1
fi
# a venv made before the compiled put existed (or before a compiler was installed): build it in place
# (only where it can build: a compiler and the venv's Python headers, or every run would reinstall)
if command -v cc >/dev/null && .venv/bin/python -c "import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" 2>/dev/null \
   && ! .venv/bin/python -c "import openarm_sim_dataset._ringput" 2>/dev/null; then
  .venv/bin/python -m pip install -q -c tools/constraints.txt --no-deps -e . || echo "tools/env.sh: the recorder's compiled put did not build; the Python one runs" >&2
fi
export MUJOCO_GL="${MUJOCO_GL:-egl}"
export PYOPENGL_PLATFORM="${PYOPENGL_PLATFORM:-$MUJOCO_GL}"
if ! _env_err="$(.venv/bin/python -c "from openarm_sim_dataset.gl import check_rendering as c
from openarm_sim_dataset.errors import DatasetError
try:
    c()
except DatasetError as e:
    raise SystemExit(str(e))" 2>&1)"; then
  echo "tools/env.sh: ${_env_err}" >&2
  return 1 2>/dev/null || exit 1
fi
unset _env_pkgs _env_err _env_extra _env_mods
