"""mkdocs-gen-files script (mkdocs.yml): writes the generated pages into the site being built, from
tools/docs_reference.py (the command line, the checks, the tasks, the robots, the modules, the model zoo) and the changelog. Nothing is
written into docs/: the pages exist only in the build, so they cannot go stale in the repository."""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_reference as ref  # noqa: E402

PAGES = {
    "reference/cli.md": ref.cli_page,
    "reference/checks.md": ref.checks_page,
    "reference/tasks.md": ref.tasks_page,
    "reference/robots.md": ref.robots_page,
    "reference/rosbag.md": ref.rosbag_page,
    "reference/modules.md": ref.modules_page,
}

for path, make in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as f:
        f.write(make())
for name, page in ref.baseline_pages().items():
    with mkdocs_gen_files.open(f"results/baselines/{name}", "w") as f:
        f.write(page)
with mkdocs_gen_files.open("changelog.md", "w") as f:
    f.write((ref.REPO / "CHANGELOG.md").read_text())
