"""The reference pages of the documentation site, generated from the code so that they cannot drift:

- ``cli_page()``: every console script of pyproject.toml, from its own argument parser (``build_parser``);
- ``checks_page()``: every check of the validator's registry (what it proves: the first paragraph of the
  check's docstring; what it applies to: its family; its thresholds with their flags and defaults: the
  ``Thresholds`` fields its code reads; the planted faults the tests show it catches: the fault -> check
  tables of ``tests/``);
- ``tasks_page()``: the task registry (prompt, arms, success rule) and the randomisation ranges;
- ``robots_page()``: the robot profiles (names per naming, units, limits with their sources);
- ``baseline_pages()``: one page per shipped baseline card;
- ``modules_page()``: every public module, layer by layer, with the first sentence of its docstring.

``tools/docs_pages.py`` writes them into the site at build time (mkdocs-gen-files); ``tests/test_docs.py``
compares their lists with the code's. Run it alone to print a page: ``python tools/docs_reference.py checks``.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import inspect
import re
import sys
import textwrap
import tokenize
from dataclasses import dataclass, field, fields
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]



def scripts() -> dict[str, str]:
    """``[project.scripts]`` of pyproject.toml: console script -> ``module:function`` (Python 3.10, without
    tomllib: the installed package's entry points)."""
    try:
        import tomllib
    except ImportError:
        from importlib.metadata import distribution

        return {e.name: e.value for e in distribution("openarm-sim-dataset").entry_points if e.group == "console_scripts"}
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def parser_of(script: str) -> argparse.ArgumentParser:
    """The argument parser of console script ``script``: ``build_parser()`` of its module, or of the module
    its ``main`` comes from (the dora recorder's lives beside its configuration)."""
    module = importlib.import_module(scripts()[script].split(":")[0])
    build = getattr(module, "build_parser", None)
    if build is None:
        raise LookupError(f"{module.__name__} (console script {script}) has no build_parser()")
    parser = build()
    parser.prog = script
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            for name, sub in a.choices.items()}


def option_strings(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    """Every flag and positional of ``parser`` and its sub-commands, as ``[SUB ]--flag`` / ``[SUB ]NAME``."""
    out = set()
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        out.update(prefix + s for s in (a.option_strings or [a.dest]))
    for name, sub in _subparsers(parser).items():
        out |= option_strings(sub, f"{prefix}{name} ")
    return out


def _prose(text: str) -> str:
    """Help text as Markdown that shows it verbatim: brackets and angle brackets escaped."""
    return re.sub(r"([\[\]<>*])", r"\\\1", str(text))


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(a: argparse.Action) -> str:
    if a.default in (None, argparse.SUPPRESS) or isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return ""
    if isinstance(a.default, (list, tuple)) and not a.default:
        return ""
    return f"`{a.default}`"


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    groups = [(g.title, g._group_actions) for g in parser._action_groups if g._group_actions]
    for title, actions in groups:
        rows = [a for a in actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if not rows:
            continue
        lines += ["", f"**{title}**", "", "| option | default | meaning |", "|---|---|---|"]
        for a in rows:
            names = list(a.option_strings) or [a.dest]
            if a.option_strings and a.nargs != 0:
                metavar = a.metavar if a.metavar is not None else a.dest.upper()
                names[-1] += " " + (" ".join(metavar) if isinstance(metavar, tuple) else metavar)
            name = ", ".join(f"`{_cell(n)}`" for n in names)
            meaning = argparse.HelpFormatter(parser.prog)._expand_help(a) if a.help else ""
            if a.choices and not isinstance(a, argparse._SubParsersAction):
                meaning += f" (one of: {', '.join(map(str, a.choices))})"
            lines.append(f"| {name} | {_cell(_default(a))} | {_cell(_prose(meaning))} |")
    return lines


def _script_section(parser: argparse.ArgumentParser, level: int = 2) -> list[str]:
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
    lines = ["", "#" * level + f" `{parser.prog}`", ""]
    if parser.description:
        lines += [_prose(parser.description.strip()), ""]
    lines += ["```text", textwrap.fill(usage, 100, subsequent_indent="    ", break_on_hyphens=False), "```"]
    lines += _options_table(parser)
    for name, sub in _subparsers(parser).items():
        sub.prog = f"{parser.prog} {name}"
        lines += _script_section(sub, level + 1)
    return lines


def cli_page() -> str:
    """The command-line reference: one section per console script, from its parser."""
    names = list(scripts())
    lines = ["# Command-line reference", "",
             "Generated from each console script's own argument parser when the site is built. "
             "Every command prints the same with `--help`. Exit codes: 0 success, 1 a dataset that fails "
             "validation (or a failed job), 2 unusable input (one line naming the file and what is wrong).", "",
             " · ".join(f"[`{n}`](#{n})" for n in names)]
    for n in names:
        lines += _script_section(parser_of(n))
    return "\n".join(lines) + "\n"



@dataclass
class CheckDoc:
    """One check as the reference shows it."""

    name: str
    family: str
    applies: str
    proves: str
    more: str
    thresholds: list[tuple[str, str, object]] = field(default_factory=list)  # (field, flag, default)
    faults: list[tuple[str, str, str]] = field(default_factory=list)  # (fault, what it is, test file)


def _threshold_fields() -> dict[str, object]:
    from openarm_sim_dataset.validate.thresholds import Thresholds

    return {f.name: f.default for f in fields(Thresholds)}


@functools.cache
def _source(path: str) -> tuple[ast.Module, dict[int, str], dict[str, ast.AST]]:
    """A Python file parsed once: its syntax tree, the comment of each line that has one, its functions by name."""
    text = Path(path).read_text()
    with open(path, "rb") as f:
        comments = {tok.start[0]: tok.string.lstrip("#").strip()
                    for tok in tokenize.tokenize(f.readline) if tok.type == tokenize.COMMENT}
    tree = ast.parse(text)
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return tree, comments, funcs


def _parts(fn) -> list:
    """The functions a registry row runs: the function itself, or an EpisodeCheck's parts."""
    parts = [getattr(fn, n, None) for n in ("prepare", "episode", "reduce", "select")]
    return [inspect.unwrap(p) for p in parts if callable(p)] if any(parts) else [inspect.unwrap(fn)]


def thresholds_read(fn) -> list[str]:
    """The ``Thresholds`` fields that ``fn`` (an EpisodeCheck: its parts) and the functions of its modules
    it calls (transitively) read: attribute reads named like a field (``ctx.t.gap_periods``, ``t.gap_periods``)."""
    known = _threshold_fields()
    found: set[str] = set()
    for part in _parts(fn):
        tree, _, funcs = _source(inspect.getsourcefile(part))
        if part.__name__ in funcs:
            roots = [funcs[part.__name__]]
        else:  # a lambda: the lambdas of its line
            roots = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == part.__code__.co_firstlineno]
        seen: set[int] = set()
        while roots:
            node = roots.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and sub.attr in known:
                    found.add(sub.attr)
                elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in funcs:
                    roots.append(funcs[sub.func.id])
    return [f for f in known if f in found]


def _string(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _opening_string(node) -> str | None:
    """A string constant, or the string a tuple opens with."""
    return _string(node.elts[0]) if isinstance(node, ast.Tuple) and node.elts else _string(node)


def planted_faults(check_names: set[str]) -> dict[str, list[tuple[str, str, str]]]:
    """check -> ``(fault, what it is, test file)`` from the module-level tables of ``tests/`` that plant
    faults into real files and assert a check fails on each: ``{fault: check}`` (what it is: the comment on
    the fault's line there, else on its line in any table of the tests, e.g. corrupt.py's lists) and
    ``{check: (the fault in words, ...)}``."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    tests = REPO / "tests"
    notes: dict[str, str] = {}
    tables = []
    for path in sorted(tests.glob("*.py")):
        tree, comments, _ = _source(str(path))
        for node in tree.body:
            value = getattr(node, "value", None)
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(value, (ast.Dict, ast.Tuple)):
                continue
            for key in value.keys if isinstance(value, ast.Dict) else value.elts:
                if (name := _string(key)) and key.lineno in comments:
                    notes.setdefault(name, comments[key.lineno])
            if isinstance(value, ast.Dict):
                tables.append((f"tests/{path.name}", value, comments))
    for test, table, comments in tables:
        pairs = [(_string(k), _opening_string(v), k.lineno) for k, v in zip(table.keys, table.values)]
        pairs = [p for p in pairs if p[0] and p[1]]
        if pairs and {k for k, _, _ in pairs} <= check_names and all(isinstance(v, ast.Tuple) for v in table.values):
            # (a table of reasons keyed by check, e.g. the expected skips, is no table of faults)
            entries = [(check, (what, "", test)) for check, what, _ in pairs]
        elif pairs and {v for _, v, _ in pairs} <= check_names:
            entries = [(check, (fault, comments.get(line) or notes.get(fault, ""), test)) for fault, check, line in pairs]
        else:
            continue
        for check, entry in entries:
            if entry[0] not in [e[0] for e in out.get(check, [])]:
                out.setdefault(check, []).append(entry)
    return out


def _first_paragraph(doc: str) -> tuple[str, str]:
    parts = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)
    return " ".join(parts[0].split()), (parts[1].strip() if len(parts) > 1 else "")


def registry_rows() -> list[tuple[str, str, object]]:
    """``(check, what its family applies to, function)`` for every check of the registry, in report order."""
    from openarm_sim_dataset.validate.registry import families

    return [(name, applies, fn) for _, rows, applies in families() for name, fn in rows]


def check_docs() -> list[CheckDoc]:
    from openarm_sim_dataset.validate.simulation import GENERATOR_ONLY

    defaults = _threshold_fields()
    rows = registry_rows()
    faults = planted_faults({n for n, _, _ in rows})
    out = []
    for name, applies, fn in rows:
        proves, more = _first_paragraph(inspect.getdoc(fn) or "")
        if name in GENERATOR_ONLY:
            applies += "; generated datasets only (a recording of a live simulation: not applicable)"
        ths = [(f, "--" + f.replace("_", "-"), defaults[f]) for f in thresholds_read(fn)]
        out.append(CheckDoc(name, fn.__module__.rsplit(".", 1)[-1], applies, proves, more, ths, faults.get(name, [])))
    return out


def checks_page() -> str:
    """The check reference: every check of the registry, in the order a report lists them."""
    docs = check_docs()
    lines = ["# Validation checks", "",
             "Generated from the validator's check registry when the site is built: the checks "
             "`dataset-validate` runs, in the order its report lists them. *Proves* is the first paragraph "
             "of the check's docstring; *thresholds* are the `Thresholds` fields its code reads, each set "
             "by the flag of the same name; *shown to catch* lists the faults the tests plant into real "
             "files of a copy and assert this check fails on.", "",
             "A check with nothing to measure is a `skip` with its reason, never a pass; `--strict` fails a "
             "skip of a check that applies, and a `warn` (a finding that leaves the episode usable).", "",
             "| check | proves |", "|---|---|"]
    lines += [f"| [`{d.name}`](#{d.name}) | {_cell(d.proves)} |" for d in docs]
    for d in docs:
        lines += ["", f"## `{d.name}`", "", d.proves, ""]
        if d.more:
            lines += [d.more, ""]
        lines += [f"- **Applies to:** {d.applies}."]
        if d.thresholds:
            lines += ["- **Thresholds:** " + "; ".join(f"`{flag}` (default `{default}`)" for _, flag, default in d.thresholds)
                      + "."]
        if d.faults:
            lines += ["- **Shown to catch:**", ""]
            lines += [f"    - {f'`{fault}`' if fault.isidentifier() else _cell(_prose(fault))}"
                      + (f": {_cell(_prose(what))}" if what else "") + f" (`{test}`)" for fault, what, test in d.faults]

    return "\n".join(lines) + "\n"



def tasks_page() -> str:
    """The task reference: every registered task, then the randomisation of `--randomize`."""
    from openarm_sim_dataset.sim import variation
    from openarm_sim_dataset.sim.tasks import DEFAULT_TASK, TASKS

    arms = {"right": "the right arm", "either": "the arm on the object's side (drawn per episode)",
            "both": "both arms"}
    lines = ["# Tasks", "", "Generated from the task registry (`openarm_sim_dataset.sim.tasks.TASKS`) when the site "
             "is built. `dataset-generate --tasks NAME [NAME ...] [--task-weights W ...]` mixes them (`all`: every "
             f"task); without `--tasks` a generation runs `{DEFAULT_TASK}`. The prompt is written into "
             "`metadata.yaml` `tasks:`; each episode's entry names its task.", "",
             "| task | arms | prompt |", "|---|---|---|"]
    lines += [f"| [`{t.name}`](#{t.name}) | {t.arms} | {_cell(t.prompt)} |" for t in TASKS.values()]
    for t in TASKS.values():
        lines += ["", f"## `{t.name}`", "", f"**Prompt:** {t.prompt}", "", f"**Arms:** {arms.get(t.arms, t.arms)}.",
                  "", t.description]
    lines += ["", "## Randomisation (`--randomize`)", "",
              f"Modes: {', '.join(f'`{m}`' for m in variation.MODES)}. {variation.VARIATION_RULE[0].upper()}"
              f"{variation.VARIATION_RULE[1:]}. Every value is drawn uniformly in its range and recorded "
              f"(rounded to {variation.DECIMALS} decimals: the recorded number is the applied one).", "",
              "| parameter | low | high |", "|---|---|---|"]
    lines += [f"| `{k}` | {lo} | {hi} |" for k, (lo, hi) in variation.RANGES.items()]
    return "\n".join(lines) + "\n"



def _number(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


def robots_page() -> str:
    """The robot reference: every shipped profile of the registry, its namings and their units and limits."""
    from openarm_sim_dataset.core.robots import UNITS, profiles

    known = profiles()
    lines = ["# Robots", "",
             "Generated from the robot registry (`openarm_sim_dataset.core.robots`: one YAML file per robot "
             "under `core/robots/data/`) when the site is built. A profile names the robot's joints, how each "
             "recorder writes them (a *naming*: `<prefix><name><suffix>`, the prefix saying the side and the "
             "suffix the attribute), and per naming the units and limits each version of the recorder writes "
             "(a *unit variant*), with the source of every number. A number no source gives is left empty, and "
             "the note says why.", "",
             "`detect()` decides from the `robot_type` a dataset declares, then from the names of its "
             "dimensions (a naming matches when it covers one whole arm), then from the values: a value past a "
             "*hard* limit (a normalisation LeRobot clamps) rules that variant out; among the others the first "
             "listed whose limits hold every value is taken, and the reason says which others fit too. Nothing "
             "matching, the `generic` profile matches and every check that needs units or limits skips. A "
             "profile file of the same shape (`load_profile_file`) describes a robot not shipped here.", "",
             "Units: " + "; ".join(f"`{u}` {what}" for u, what in UNITS.items()) + ".", "",
             "| robot | robot_type | namings |", "|---|---|---|"]
    for p in known.values():
        types = ", ".join(f"`{t}`" for t in p.robot_types) or "any (matched last)"
        lines.append(f"| [`{p.name}`](#{p.name}) | {types} | {', '.join(n.name for n in p.namings) or '—'} |")
    for p in known.values():
        lines += ["", f"## `{p.name}`", "", _cell(_prose(p.description)) + ".", ""]
        if p.robot_types:
            lines += [f"**robot_type:** {', '.join(f'`{t}`' for t in p.robot_types)}.", ""]
        if not p.namings:
            lines += ["No names, units or limits: whatever the dataset holds is kept as stored, and checks of "
                      "units, limits and speeds skip with \"robot ... has no profile\".", ""]
        short = {text: key for key, text in p.sources.items()}
        for naming in p.namings:
            lines += ["", f"### `{p.name}`: naming `{naming.name}`", "", _cell(_prose(naming.written_by)) + ".", ""]
            sides = ", ".join(f"`{pre or '(none)'}` {side}" for pre, side in naming.prefixes)
            attrs = ", ".join(f"`{suf or '(none)'}` {attr}" for suf, attr in naming.suffixes)
            lines += [f"- **Prefixes:** {sides}.", f"- **Suffixes:** {attrs}.",
                      "- **Names:** " + ", ".join(f"`{n}`" for n in naming.example()) + "."]
            if naming.mimic:
                lines += ["- **Mimic** (kept as stored, beside the arm): "
                          + ", ".join(f"`{n}` follows {j}" for n, j in naming.mimic) + "."]
            for variant in naming.variants:
                lines += ["", f"**Unit variant `{variant.name}`:** {_cell(_prose(variant.description))}.", "",
                          "| side | joint | role | unit | lower | upper | velocity /s | source | note |",
                          "|---|---|---|---|---|---|---|---|---|"]
                for joint, _ in p.joints:
                    rows = [variant.limit(side, joint) for side in p.sides]
                    same = all((r.lower, r.upper, r.velocity) == (rows[0].lower, rows[0].upper, rows[0].velocity)
                               for r in rows)
                    for side, lim in ([("all", rows[0])] if same else zip(p.sides, rows)):
                        source = lim.source
                        for text, key in short.items():
                            source = source.replace(text, f"[{key}]")
                        lines.append(f"| {side} | `{joint}` | {lim.role} | `{lim.unit}` | {_number(lim.lower)} | "
                                     f"{_number(lim.upper)} | {_number(lim.velocity)} | {_cell(_prose(source)) or '—'} | "
                                     f"{_cell(_prose(lim.note)) + (' (hard)' if lim.hard else '') if lim.note or lim.hard else ''} |")
        if p.sources:
            lines += ["", "**Sources:**", ""]
            lines += [f"- `[{key}]` {_cell(_prose(text))}" for key, text in p.sources.items()]
    return "\n".join(lines) + "\n"


def baseline_pages() -> dict[str, str]:
    """``{file name: page}``: each shipped baseline card (baselines/*.md) as a page of the model zoo, and
    an index of them with their checkpoint and training data."""
    from openarm_sim_dataset.learn.bc.baseline import shipped

    pages, rows = {}, []
    for path, front in shipped(REPO):
        body = path.read_text()
        body = body[body.index("\n---\n", 4) + 5:] if body.startswith("---\n") else body
        title = next((ln.lstrip("# ").strip() for ln in body.splitlines() if ln.startswith("# ")), path.stem)
        facts = "\n".join(f"| `{k}` | {_cell(v if not isinstance(v, (list, dict)) else '(see the card)')} |"
                          for k, v in front.items() if not isinstance(v, (list, dict)))
        pages[f"{path.stem}.md"] = (body.rstrip() + "\n\n## The card's front matter\n\n| key | value |\n|---|---|\n"
                                    + facts + f"\n\nThe checkpoint is `baselines/{front['checkpoint']}` in the repository.\n")
        rows.append(f"| [{_cell(title)}]({path.stem}.md) | `baselines/{front['checkpoint']}` |")
    pages["index.md"] = ("# Model zoo: the shipped baselines\n\nOne page per card of `baselines/`, generated when "
                         "the site is built. Each card names its checkpoint's SHA-256, the command that made its "
                         "training data and the evaluation that scored it.\n\n| card | checkpoint |\n|---|---|\n"
                         + "\n".join(rows) + "\n")
    return pages


PACKAGE = REPO / "openarm_sim_dataset"


def layers() -> list[list[str]]:
    """The package's layers, top first, as the import-linter contract of pyproject.toml states (and tests):
    each a list of the sub-packages that share it."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layer_contract = next(c for c in contracts if c["id"] == "layers")
    return [re.split(r"\s*[|:]\s*", layer) for layer in layer_contract["layers"]]


def public_modules(package: str) -> list[Path]:
    """Every module and sub-package of ``openarm_sim_dataset.<package>`` whose dotted path has no part
    starting with ``_`` (``__init__.py`` stands for its package), in path order."""
    root = PACKAGE / package
    out = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if any(part.startswith("_") and part != "__init__.py" for part in parts):
            continue
        out.append(path)
    return out


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _markdown_inline(text: str) -> str:
    """reStructuredText inline markup of a docstring as Markdown: ``x`` and :role:`x` become `x`."""
    return re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"`\1`", text.replace("``", "`"))


def _docstring(path: Path) -> str:
    return ast.get_docstring(_source(str(path))[0]) or ""


def _summary(path: Path) -> str:
    """The first sentence of a module's docstring ("" when it has none); a command's usage line as code."""
    doc = _docstring(path)
    if doc.startswith("dataset-"):
        return f"`{doc.splitlines()[0].rstrip(':. ')}`"
    first = _first_paragraph(doc)[0] if doc else ""
    m = re.match(r"(.+?[.:;])(\s|$)", first)
    sentence = (m.group(1)[:-1] + "." if m else first)
    return _markdown_inline(sentence)


def modules_page() -> str:
    """Where a change goes: every public module, layer by layer (top first, as the import contract has them),
    with the first sentence of its docstring and the names each layer package exports (``__all__``)."""
    lines = ["# Modules by layer", "",
             "Generated from the source when the site is built. The package is layered; a module imports only "
             "from its own layer and the layers below it (the import-linter contract in pyproject.toml; "
             "[Architecture](../architecture.md) says why). To find where a change goes, find the concept here: "
             "the format in `core`, making data in `sim`/`record`/`dora`, judging it in `validate`, data from "
             "data in `ops`, learning and looking in `learn`/`explore`, and the commands in `cli`.", ""]
    contract = layers()
    for depth, layer in enumerate(contract, 1):
        for package in layer:
            init = PACKAGE / package / "__init__.py"
            doc = _docstring(init)
            lines += [f"## `openarm_sim_dataset.{package}` (layer {depth} of {len(contract)}, top first)", ""]
            if doc:
                lines += [_markdown_inline(_first_paragraph(doc)[0]), ""]
            exported = _exported(init)
            if exported:
                lines += ["Exports: " + ", ".join(f"`{n}`" for n in exported) + ".", ""]
            lines += ["| module | what it is |", "|---|---|"]
            lines += [f"| `{module_name(p)}` | {_cell(_summary(p))} |" for p in public_modules(package)
                      if p != init]
            lines.append("")
    top = _first_paragraph(_docstring(PACKAGE / "__init__.py"))[0]
    lines += ["## `openarm_sim_dataset`", "", _markdown_inline(top), "",
              "Exports: " + ", ".join(f"`{n}`" for n in _exported(PACKAGE / "__init__.py")) + "."]
    return "\n".join(lines) + "\n"


def _exported(init: Path) -> list[str]:
    """The names of ``__all__`` in a package's ``__init__.py`` (read, not imported), [] without one."""
    for node in _source(str(init))[0].body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "checks"
    print({"cli": cli_page, "checks": checks_page, "tasks": tasks_page, "robots": robots_page,
           "modules": modules_page}[which]())


def rosbag_page() -> str:
    """The ROS bag reference: the message types the converter reads and the recording faults it names,
    both from their registries (``openarm_sim_dataset.ops.convert.rosbag``)."""
    from openarm_sim_dataset.ops.convert.rosbag.faults import FAULTS
    from openarm_sim_dataset.ops.convert.rosbag.messages import MESSAGES

    lines = ["# ROS bags", "",
             "Generated from the converter's registries (`openarm_sim_dataset.ops.convert.rosbag`) when the site is "
             "built. `dataset-convert BAG OUT` reads a rosbag2 folder (MCAP or SQLite3 storage), a lone `.mcap` or "
             "`.db3` file, or a ROS 1 `.bag` with `rosbags` (no ROS installed); how to use it is in "
             "[Curate](../guides/curate.md#convert-a-ros-bag).", "",
             "## Message types", "",
             "A topic of another type is listed by `--inspect` as not mapped. `joints`: values named by joint "
             "(through the OpenArm profile's namings, see [Robots](robots.md)); `vector`: unnamed values whose arm "
             "and joints the map gives; `camera`: a picture. *Header*: the message carries a stamp, used unless "
             "the map says `stamp: receive`; without one the bag's receive time is the stream's time.", "",
             "| type | role | header | converted |", "|---|---|---|---|"]
    for m in MESSAGES:
        lines.append(f"| `{m.msgtype}` | {m.role} | {'yes' if m.header else 'no'} | {_cell(m.note)} |")
    lines += ["", "## Faults of the recording", "",
              "Every conversion checks each mapped topic's receive times and header stamps and names what the "
              "recording session got wrong, by topic and time (seconds from the bag's first message). A check "
              "with nothing to judge skips and says why; a fault makes `dataset-convert` exit 1 (the output is "
              "kept).", "", "| check | fails on |", "|---|---|"]
    for f in FAULTS:
        lines.append(f"| `{f.name}` | {_cell(f.description)} |")
    return "\n".join(lines) + "\n"
