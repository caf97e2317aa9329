"""The documentation: the README stays short; every example of README.md and docs/ runs (Sybil, page by
page) and parses; the generated reference lists exactly what the code has (every console script and
flag, every check the validator runs, every task); (slow) the site builds strictly and offline, and a
real headless browser shows its pages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SUBPROCESS_ENV
from docs_examples import blocks, doc_files, run_page, syntax_errors

sys.path.insert(0, str(REPO / "tools"))
import docs_reference as ref  # noqa: E402

BLOCKS = {p: blocks(p) for p in doc_files()}  # (each page parsed once, at collection)
PAGES = [p for p, bs in BLOCKS.items() if any(not b.skipped for b in bs)]
SLOW_PAGES = [p for p in PAGES if any(b.slow for b in BLOCKS[p])]
#: commands that simulate (seconds to minutes each): a page that runs one runs in the slow set
SIMULATES = re.compile(r"\bdataset-(generate|render|evaluate|train)\b|\bgenerate\(")


def _simulates(page: Path) -> bool:
    return any(SIMULATES.search(b.code) for b in BLOCKS[page] if not b.skipped and not b.slow)


def _page_params(pages):
    # (a simulating page with slow blocks runs once, whole, in test_page_examples_run_with_their_slow_blocks)
    simulating = {p for p in pages if _simulates(p)}
    return [pytest.param(p, id=_id(p), marks=[pytest.mark.slow] if p in simulating else [])
            for p in pages if not (p in simulating and p in SLOW_PAGES)]


def _id(p: Path) -> str:
    return str(p.relative_to(REPO))


def test_readme_fits_on_a_few_screens_and_its_links_resolve():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert targets and [t for t in targets if "://" not in t and not (REPO / t).exists()] == []
    # what a new user looks for first: validating a recording, cameras later, what a check proves
    for words in ("dataset-validate DIR", "dataset-render SRC OUT", "camera_joint_timing"):
        assert words in text, words


@pytest.mark.parametrize("page", doc_files(), ids=_id)
def test_every_block_parses(page):
    """Skipped blocks included: a block that cannot run here is still valid Python or bash."""
    assert syntax_errors(page) == []


@pytest.mark.parametrize("page", _page_params(PAGES))
def test_page_examples_run(page, tmp_path):
    """The page's blocks in order, in one scratch directory (its slow blocks, and what follows them, in
    the slow set; a page that simulates runs in the slow set whole)."""
    run = run_page(page, tmp_path / "scratch", slow=False)
    assert run.ran + len(run.skipped) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW_PAGES, ids=_id)
def test_page_examples_run_with_their_slow_blocks(page, tmp_path):
    run = run_page(page, tmp_path / "scratch", slow=True)
    assert not any("slow set" in s for s in run.skipped)


def test_a_failing_example_fails_its_page(tmp_path):
    """The runner is shown to fail: a page whose second block exits 1, and one whose Python raises."""
    page = tmp_path / "page.md"
    page.write_text("# p\n\n```bash\necho one > a\n```\n\n```bash\ntest \"$(cat a)\" = two\n```\n")
    with pytest.raises(Exception, match="exit 1"):
        run_page(page, tmp_path / "s1", slow=False)
    page.write_text("# p\n\n```python\nassert 1 + 1 == 3, 'arithmetic'\n```\n")
    with pytest.raises(AssertionError, match="arithmetic"):
        run_page(page, tmp_path / "s2", slow=False)
    page.write_text("# p\n\n<!-- skip: next \"a robot\" -->\n```python\ndef broken(:\n```\n")
    assert syntax_errors(page) and run_page(page, tmp_path / "s3", slow=False).skipped == ['line 4: a robot']


def test_cli_reference_lists_every_console_script_and_flag():
    page = ref.cli_page()
    for script in ref.scripts():
        assert f"## `{script}`" in page or f"# `{script}`" in page, script
        parser = ref.parser_of(script)
        for option in ref.option_strings(parser):
            flag = option.split()[-1]
            assert f"`{flag}" in page, f"{script}: {option} missing from the CLI reference"


def test_cli_reference_comes_from_the_parsers(monkeypatch):
    """A flag added to a parser appears in the page (shown with a parser changed in place)."""
    from openarm_sim_dataset.cli import sample

    original = sample.build_parser

    def more():
        p = original()
        p.add_argument("--brand-new-flag", help="nothing")
        return p

    monkeypatch.setattr(sample, "build_parser", more)
    assert "`--brand-new-flag" in ref.cli_page()


def _module_rows(page: str) -> dict[str, str]:
    return dict(re.findall(r"^\| `(openarm_sim_dataset[\w.]*)` \| (.*) \|$", page, flags=re.M))


def _every_module(package_dir: Path) -> set[str]:
    """Every module of the package outside a private part, from the files (not from the page's own walk)."""
    out = set()
    for path in package_dir.rglob("*.py"):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            out.add(".".join(("openarm_sim_dataset", *parts)))
    return out


def test_module_reference_lists_every_module_with_what_it_is(tmp_path, monkeypatch):
    """Every public module below the layer packages has a row on the page, with the first sentence of its
    docstring; shown on a copy of the package with a module added with a docstring and one without."""
    page = ref.modules_page()
    rows = _module_rows(page)
    layer_packages = {f"openarm_sim_dataset.{p}" for layer in ref.layers() for p in layer}
    # (the rows: what lives inside a layer package; the layer packages are the page's headings)
    assert set(rows) == {m for m in _every_module(ref.PACKAGE) if m.count(".") > 1}
    assert [m for m, what in rows.items() if not what.strip()] == []
    assert all(f"## `{p}` (layer" in page for p in layer_packages)

    import shutil

    copy = tmp_path / "openarm_sim_dataset"
    shutil.copytree(ref.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    (copy / "core" / "planted.py").write_text('"""A planted module: found by its path. More words."""\n')
    (copy / "core" / "bare.py").write_text("X = 1\n")
    monkeypatch.setattr(ref, "PACKAGE", copy)
    planted = _module_rows(ref.modules_page())
    assert planted["openarm_sim_dataset.core.planted"] == "A planted module."  # (its first sentence)
    assert planted["openarm_sim_dataset.core.bare"].strip() == ""


def _headings(page: str) -> list[str]:
    return re.findall(r"^## `(\w+)`$", page, flags=re.M)


def test_check_reference_lists_every_check_the_runner_runs():
    """The page's checks, in family order, are the tables the runner builds for a generated dataset and for a
    LeRobot dataset (every family)."""
    from openarm_sim_dataset.validate.registry import check_table, families

    page = _headings(ref.checks_page())
    assert page == [n for _, rows, _ in families() for n, _ in rows]
    runner = [n for n, _ in check_table({}, quick=False)] + [n for n, _ in check_table(None, lerobot=True)]
    assert set(page) == set(runner) and len(page) == len(set(page))


def test_every_check_says_what_it_proves_and_every_threshold_has_its_flag():
    from openarm_sim_dataset.cli.validate import build_parser

    flags = ref.option_strings(build_parser())
    docs = ref.check_docs()
    assert [d.name for d in docs if not d.proves] == []
    # every check names a fault the tests plant and assert it fails on (a fault -> check table of tests/)
    assert [d.name for d in docs if not d.faults] == []
    for d in docs:
        for _, flag, _ in d.thresholds:
            assert flag in flags, (d.name, flag)
    # every threshold is read by some check (a field no check reads is dead, or the scan is blind)
    read = {f for d in docs for f, _, _ in d.thresholds}
    assert read == set(ref._threshold_fields()), set(ref._threshold_fields()) - read


@pytest.mark.slow
def test_check_reference_lists_the_checks_a_real_validation_runs(tiny_generated):
    """The rows `dataset-validate --json` prints for a generated dataset are the page's checks."""
    r = subprocess.run([sys.executable, "-m", "openarm_sim_dataset.cli.validate", str(tiny_generated["path"]),
                        "--json", "--no-update-metadata"], capture_output=True, text=True, env=SUBPROCESS_ENV,
                       timeout=1200)
    rows = [row["check"] for row in json.loads(r.stdout)["rows"]]
    assert rows and set(rows) <= set(_headings(ref.checks_page()))


def test_task_reference_lists_every_task():
    from openarm_sim_dataset.sim.tasks import TASKS

    page = ref.tasks_page()
    assert _headings(page)[:len(TASKS)] == list(TASKS)
    assert all(t.prompt in page for t in TASKS.values())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built by `bash tools/docs.sh` (strict: a broken link or anchor, a page missing from the nav, a
    failed generated page is an error)."""
    out = tmp_path_factory.mktemp("docs") / "site"
    r = subprocess.run(["bash", "tools/docs.sh", str(out)], cwd=REPO, capture_output=True, text=True,
                       env=SUBPROCESS_ENV, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


@pytest.mark.slow
def test_site_builds_strictly_and_offline(site):
    """The built HTML, CSS and scripts load nothing from the network (hyperlinks a reader may follow aside)."""
    html = list(site.rglob("*.html"))
    assert len(html) >= 30
    remote = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//|@import\s+url\(\s*["']?https?:|url\(\s*["']?https?://""")
    loaded = []
    for f in html + list(site.rglob("*.css")) + list(site.rglob("*.js")):
        text = f.read_text(errors="replace")
        for m in remote.finditer(text):
            if f.suffix == ".html" and re.search(r"<a\s[^>]*$", text[max(0, m.start() - 300):m.start()]):
                continue  # a hyperlink the reader may follow, not a resource the page loads
            loaded.append(f"{f.relative_to(site)}: {text[max(0, m.start() - 80):m.end() + 80]!r}")
    assert loaded == []
    for page in ("reference/checks.html", "reference/cli.html", "reference/tasks.html", "reference/api.html",
                 "results/baselines/index.html", "changelog.html"):
        assert (site / page).is_file(), page


@pytest.mark.slow
def test_site_in_a_real_browser(site):
    """Headless Chromium opens the home page, a guide and the check reference from the files (no server,
    no network): each shows its title and content, and is kept as a picture (docs/images/site_*.png; the
    README shows the check reference's)."""
    import io

    from browser import Browser, require_chromium
    from PIL import Image, ImageStat

    require_chromium()

    b = Browser(1280, 900)
    try:
        for page, title, name in (("index.html", "openarm_sim_dataset", "site_home.png"),
                                  ("guides/validate.html", "Validate", "site_guide.png"),
                                  ("reference/checks.html", "Validation checks", "site_checks.png")):
            b.goto((site / page).as_uri())
            b.wait("document.readyState === 'complete' && !!document.querySelector('article h1')")
            assert title.lower() in b.js("document.querySelector('article h1').textContent").lower(), page
            # the theme's stylesheet applied (a page without its CSS has no sidebar layout)
            assert b.js("getComputedStyle(document.querySelector('.md-sidebar')).position") in ("sticky", "fixed"), page
            png = b.screenshot()
            stat = ImageStat.Stat(Image.open(io.BytesIO(png)).convert("L"))
            assert stat.stddev[0] > 10, f"{page}: a blank page"
            (REPO / "docs" / "images" / name).write_bytes(png)
    finally:
        b.close()
