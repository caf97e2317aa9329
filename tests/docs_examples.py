"""The documentation's examples as tests, parsed by Sybil: every ```python and ```bash block of README.md
and docs/ runs, page by page, in a scratch directory the page's blocks share (a later block uses what an
earlier one made). The conventions a page's author follows (docs/development.md):

- ```bash: ``bash -euo pipefail`` with the console scripts on PATH, ``$REPO`` the checkout, ``MUJOCO_GL``
  set; ```python: one namespace per page, the scratch directory as working directory.
- ``<!-- skip: next "reason" -->`` before a block that cannot run here (a real robot, a cluster): Sybil's
  own skip; the block's syntax is still checked (:func:`syntax_errors`).
- ``<!-- slow -->`` before a block that takes more than seconds: it runs in the slow set only; in the
  default run it and every later block of its page are skipped (they may use what it makes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import SkipTest

from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

REPO = Path(__file__).resolve().parents[1]
SLOW_MARK = re.compile(r"<!--\s*slow\s*-->\s*$")


def doc_files() -> list[Path]:
    """README.md and every page under docs/ (the generated reference pages are not files)."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _bash(example) -> str | None:
    ns = example.namespace
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", example.parsed], cwd=ns["SCRATCH"], env=ns["ENV"],
                       capture_output=True, text=True, timeout=ns.get("TIMEOUT", 1200))
    if r.returncode != 0:
        return (f"exit {r.returncode}\n--- stdout (end)\n{r.stdout[-1500:]}\n--- stderr (end)\n{r.stderr[-2500:]}")
    return None


def _sybil() -> Sybil:
    return Sybil(parsers=[PythonCodeBlockParser(), CodeBlockParser(language="bash", evaluator=_bash), SkipParser()],
                 path=str(REPO))


@dataclass
class Block:
    """One fenced example: its language, code, first line, whether it is marked slow or skipped."""

    language: str
    code: str
    line: int
    slow: bool
    skipped: bool


def _marked_slow(text: str, example) -> bool:
    """Whether the line before ``example`` in ``text`` (its page) is ``<!-- slow -->``."""
    before = text[:example.region.start].rstrip("\n")
    return bool(SLOW_MARK.search(before.splitlines()[-1] if before else ""))


def blocks(path: Path) -> tuple[Block, ...]:
    """The runnable blocks of ``path`` (```python and ```bash), with their marks."""
    text = path.read_text()
    out = []
    skip_next = False
    for ex in _sybil().parse(path):
        if isinstance(ex.parsed, tuple):  # a skip directive: (action, reason)
            skip_next = ex.parsed[0] == "next"
            continue
        language = "bash" if ex.region.evaluator is _bash else "python"
        out.append(Block(language, str(ex.parsed), ex.line, _marked_slow(text, ex), skip_next))
        skip_next = False
    return tuple(out)


def syntax_errors(path: Path) -> list[str]:
    """Every block of ``path`` that does not parse (skipped ones included): python by compile(), bash by
    ``bash -n``."""
    errors = []
    for b in blocks(path):
        if b.language == "python":
            try:
                compile(b.code, f"{path.name}:{b.line}", "exec")
            except SyntaxError as e:
                errors.append(f"{path.name}:{b.line}: {e}")
        else:
            r = subprocess.run(["bash", "-n"], input=b.code, capture_output=True, text=True)
            if r.returncode:
                errors.append(f"{path.name}:{b.line}: {r.stderr.strip()}")
    return errors


def environment(scratch: Path) -> dict:
    """The environment a page's bash blocks run in."""
    bindir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), REPO=str(REPO),
                MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"), PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")


@dataclass
class PageRun:
    ran: int
    skipped: list[str]


def run_page(path: Path, scratch: Path, slow: bool) -> PageRun:
    """Run the examples of ``path`` in order in ``scratch``; ``slow``: the blocks marked slow too (else they
    and every block after them are skipped). Raises on the first failing block, naming it."""
    scratch.mkdir(parents=True, exist_ok=True)
    document = _sybil().parse(path)
    document.namespace.update(SCRATCH=scratch, ENV=environment(scratch), REPO=REPO)
    text = path.read_text()
    ran, skipped, after_slow = 0, [], False
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        for ex in document:
            if not isinstance(ex.parsed, tuple) and (after_slow or (not slow and _marked_slow(text, ex))):
                after_slow = True
                skipped.append(f"line {ex.line}: slow set")
                continue
            try:
                ex.evaluate()
            except SkipTest as e:
                skipped.append(f"line {ex.line}: {e}")
                continue
            if not isinstance(ex.parsed, tuple):
                ran += 1
    finally:
        os.chdir(cwd)
    return PageRun(ran, skipped)
