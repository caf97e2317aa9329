"""The package's shape, measured from its source (an ``ast`` walk; nothing is imported).

  python tools/import_graph.py [--root openarm_sim_dataset] [--list cycles|private|local|sizes]

Prints: modules and lines; import cycles among the package's own modules (every import counts, at
module level or inside a function; ``if TYPE_CHECKING`` blocks do not, they never run); private names
(``_x``) imported from another module; imports of the package's own modules inside functions; the
largest modules. ``--list`` prints each item of one kind, with its file and line.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    """The absolute module a ``from ... import`` names (``level`` dots relative to ``mod``)."""
    if level == 0:
        return target or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def walk_imports(tree: ast.AST):
    """Yield (node, in_function) for each import statement outside ``if TYPE_CHECKING`` blocks."""

    def visit(node, in_fn):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for c in child.orelse:
                    yield from visit_one(c, in_fn)
                continue
            yield from visit_one(child, in_fn)

    def visit_one(child, in_fn):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_fn
        fn = in_fn or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from visit(child, fn)

    yield from visit(tree, False)


def analyse(root: Path):
    files = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    pkg = root.name
    edges: dict[str, set[str]] = defaultdict(set)
    private, local = [], []
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node, in_fn in walk_imports(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [(a.name, None) for a in node.names]
            else:
                base = resolve(mod, is_pkg, node.level, node.module)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append((sub, None) if sub in files else (base, a.name))
            for target, name in targets:
                if not (target == pkg or target.startswith(pkg + ".")):
                    continue
                # an import of a.b.c imports a and a.b too, but the edge that matters is to the module named
                t = target
                while t not in files and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t != mod:
                    edges[mod].add(t)
                where = f"{path.relative_to(root.parent)}:{node.lineno}"
                if in_fn:
                    local.append((where, t + (f".{name}" if name else "")))
                if name and name.startswith("_") and not name.startswith("__") and t != mod:
                    private.append((where, f"{t}.{name}"))
    return files, edges, private, local


def cycles(nodes, edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def strong(v):
        work = [(v, iter(sorted(edges.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return sorted(out, key=len, reverse=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=REPO / "openarm_sim_dataset")
    ap.add_argument("--list", choices=("cycles", "private", "local", "sizes"))
    args = ap.parse_args(argv)
    files, edges, private, local = analyse(args.root)
    # a package's __init__ importing its own submodules is not a cycle of meaning; the edge from a
    # submodule to its package's __init__ is (it runs the __init__); both are kept, as Python runs them
    cyc = cycles(files, edges)
    sizes = sorted(((len(p.read_text().splitlines()), m) for m, p in files.items()), reverse=True)
    print(f"modules: {len(files)}, lines: {sum(s for s, _ in sizes)}")
    print(f"import cycles: {len(cyc)} (largest {max((len(c) for c in cyc), default=0)} modules)")
    print(f"private names imported across modules: {len(private)} ({len({p for _, p in private})} distinct)")
    print(f"imports of the package's own modules inside functions: {len({w for w, _ in local})} statements")
    print(f"largest module: {sizes[0][1]} ({sizes[0][0]} lines); over 600 lines: "
          f"{sum(1 for s, _ in sizes if s > 600)}")
    if args.list == "cycles":
        for c in cyc:
            print(f"- {len(c)}: " + " ".join(c))
    elif args.list == "private":
        for where, name in private:
            print(f"{where} {name}")
    elif args.list == "local":
        for where, name in local:
            print(f"{where} {name}")
    elif args.list == "sizes":
        for s, m in sizes[:30]:
            print(f"{s:6d} {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
