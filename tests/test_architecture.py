"""The package's shape is tested, not hoped for (docs/architecture.md): the import-linter contracts of
pyproject.toml (layers, no cycles) and ruff hold, and each is shown to fail on a planted fault in a copy of
the package; tools/import_graph.py's figures (cycles, private names imported across modules, imports
inside functions, the largest module) stay within the bounds the architecture sets."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "openarm_sim_dataset"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "tools"))
import import_graph  # noqa: E402

#: imports of the package's own modules inside functions: each pays (an optional extra or start-up cost)
MAX_FUNCTION_IMPORTS = 60
MAX_MODULE_LINES = 600


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return str(path)


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """lint-imports on the package under ``root`` with this repository's contracts."""
    return subprocess.run([_tool("lint-imports"), str(REPO / "pyproject.toml"), "--no-cache"],
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)


@pytest.fixture
def package_copy(tmp_path) -> Path:
    """The package's sources copied to ``tmp_path`` (a fault is planted there, never in the checkout)."""
    shutil.copytree(PACKAGE, tmp_path / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return tmp_path


def test_the_contracts_hold():
    r = lint_imports(REPO)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "3 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_layers(package_copy):
    # the bottom layer reaching for the command line: the layers contract names the import
    target = package_copy / PACKAGE.name / "core" / "layout.py"
    target.write_text(target.read_text() + "\nfrom ..cli import Parser  # planted\n")
    r = lint_imports(package_copy)
    assert r.returncode != 0
    assert "openarm_sim_dataset.core is not allowed to import openarm_sim_dataset.cli" in r.stdout, r.stdout[-3000:]


def test_a_cycle_within_one_layer_breaks_the_acyclic_contract(package_copy):
    # layout and errors share the bottom layer, so only the no-cycle contract can catch this one
    target = package_copy / PACKAGE.name / "core" / "errors.py"
    target.write_text(target.read_text() + "\nfrom . import layout  # planted\n")
    r = lint_imports(package_copy)
    assert r.returncode != 0
    assert "No import cycles between sibling modules" in r.stdout and "BROKEN" in r.stdout, r.stdout[-3000:]
    assert "Layers: cli" in r.stdout and r.stdout.count(" KEPT") == 2


def test_ruff_is_clean_and_catches_a_private_import(tmp_path):
    ruff = _tool("ruff")
    r = subprocess.run([ruff, "check", "--no-cache", "openarm_sim_dataset", "tests", "tools"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:]
    # ruff's rule covers code outside the package (tests, tools, users); inside it, import_graph does (below)
    planted = tmp_path / "uses_a_private_name.py"
    planted.write_text("from openarm_sim_dataset.camera import _tar_index\n\nprint(_tar_index)\n")
    r = subprocess.run([ruff, "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(planted)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "import-private-name" in r.stdout, r.stdout[-2000:]


def test_the_shape_is_within_its_bounds():
    files, edges, private, local = import_graph.analyse(PACKAGE)
    assert import_graph.cycles(files, edges) == []
    assert private == []
    assert len({where for where, _ in local}) < MAX_FUNCTION_IMPORTS
    sizes = {m: len(p.read_text().splitlines()) for m, p in files.items()}
    assert max(sizes.values()) <= MAX_MODULE_LINES, max(sizes, key=sizes.get)


def test_the_graph_sees_a_planted_cycle_and_private_import(package_copy):
    root = package_copy / PACKAGE.name
    errors = root / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef f():\n    from .layout import _x\n")
    files, edges, private, local = import_graph.analyse(root)
    assert any({"openarm_sim_dataset.core.errors", "openarm_sim_dataset.core.layout"} <= set(c)
               for c in import_graph.cycles(files, edges))
    assert ("openarm_sim_dataset/core/errors.py", "openarm_sim_dataset.core.layout._x") in {
        (w.rsplit(":", 1)[0], n) for w, n in private}
    assert any(w.startswith("openarm_sim_dataset/core/errors.py:") for w, _ in local)


def test_old_import_paths_name_the_same_modules():
    """Every path that moved imports as the module at its new path (one object: a class, registry or
    monkeypatch is the same through either name), with its own spec; submodules of a moved package too."""
    import importlib

    from openarm_sim_dataset import moved_modules as moved

    pairs = dict(moved.MOVED, **{"openarm_sim_dataset.bc.trainer": "openarm_sim_dataset.learn.bc.trainer",
                                  "openarm_sim_dataset.view.server": "openarm_sim_dataset.explore.view.server",
                                  "openarm_sim_dataset.torch.stats": "openarm_sim_dataset.learn.torch.normalization"})
    for old, new in pairs.items():
        module = importlib.import_module(old)
        target = importlib.import_module(new)
        while module.__name__ != target.__name__ and moved.new_path(target.__name__):  # renamed twice
            target = importlib.import_module(moved.new_path(target.__name__))
        assert module is target, old
        assert module.__spec__.name == module.__name__, old
        assert hasattr(module, "__path__") == (module.__file__.endswith("__init__.py")), old
    import openarm_sim_dataset

    assert openarm_sim_dataset.smoothing is importlib.import_module("openarm_sim_dataset.core.smoothing")
