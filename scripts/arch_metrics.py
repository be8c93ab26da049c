"""Print the package's architecture figures: import cycles (imports inside functions included), imports that
point back up the data flow, top-level modules, and modules over 500 lines.

    python scripts/arch_metrics.py                 # this checkout's src/seqjudge
    python scripts/arch_metrics.py --src PATH      # another tree, e.g. `git archive main` unpacked
    python scripts/arch_metrics.py --json          # the same, as one JSON object

The graph is built with ``ast`` from every ``import``/``from ... import`` in the package, at any depth
(module level, inside functions and classes), except those under ``if TYPE_CHECKING:``, which never run.
``from a.b import c`` is an edge to the module ``a.b.c`` when there is one, else to ``a.b``; importing a
module is not counted as importing its parent packages (every module would then import the package root).
A cycle is a strongly connected component of more than one module, or a module that imports itself.

The flow is trace -> rules -> report -> judge -> crosscheck -> store -> outputs/views -> cli, with the
package root (the public API that re-exports from all of them) after cli. An import "points back up" when
a module imports one that comes later in the flow. Modules outside the flow (errors, config, runner, ...)
are not ranked and never count as pointing back.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from seqjudge.rules.lint import strong_components

PACKAGE = "seqjudge"
BIG = 500

# Module name prefix -> place in the flow (first match wins; longer prefixes first).
FLOW: list[tuple[str, int, str]] = [
    ("seqjudge.trace", 0, "trace"),
    ("seqjudge.ingest", 0, "trace"),
    ("seqjudge.rules", 1, "rules"),
    ("seqjudge.report", 2, "report"),
    ("seqjudge.judge", 3, "judge"),
    ("seqjudge.crosscheck", 4, "crosscheck"),
    ("seqjudge.store", 5, "store"),
    ("seqjudge.outputs", 6, "outputs/views"),
    ("seqjudge.html", 6, "outputs/views"),
    ("seqjudge.textview", 6, "outputs/views"),
    ("seqjudge.ci_outputs", 6, "outputs/views"),
    ("seqjudge.alerts", 6, "outputs/views"),
    ("seqjudge.calibrate_plot", 6, "outputs/views"),
    ("seqjudge.cli", 7, "cli"),
]
ROOT_RANK = 8


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def rank(module: str) -> tuple[int, str] | None:
    if module == PACKAGE:
        return ROOT_RANK, "package root"
    for prefix, place, label in FLOW:
        if module == prefix or module.startswith(prefix + "."):
            return place, label
    return None


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that runs, with whether it sits inside a function."""

    def walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for other in child.orelse:
                    yield from walk(other, in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, in_function
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from walk(child, inner)

    yield from walk(tree, False)


def graph(src: Path) -> tuple[dict[str, Path], list[dict[str, Any]]]:
    files = {module_name(p, src): p for p in sorted(src.rglob("*.py"))}
    packages = {module_name(p, src) for p in src.rglob("__init__.py")}
    edges: list[dict[str, Any]] = []
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        here = name if name in packages else name.rpartition(".")[0]
        for node, in_function in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in files else base)
            for target in dict.fromkeys(targets):
                while target and target not in files and target.startswith(PACKAGE):
                    target = target.rpartition(".")[0]  # `import a.b.c` of a name inside a module
                if target in files and target != name or (target == name and target in files):
                    edges.append(
                        {
                            "from": name,
                            "to": target,
                            "line": node.lineno,
                            "in_function": in_function,
                        }
                    )
    return files, edges


def sccs(nodes: list[str], edges: list[dict[str, Any]]) -> list[list[str]]:
    """Strongly connected components of more than one module (lint's Tarjan), plus self-loops."""
    adj: dict[str, list[str]] = {}
    loops = {e["from"] for e in edges if e["from"] == e["to"]}
    for e in edges:
        if e["from"] != e["to"]:
            adj.setdefault(e["from"], []).append(e["to"])
    return sorted([sorted(c) for c in strong_components(nodes, adj)] + [[m] for m in loops])


def measure(src: Path) -> dict[str, Any]:
    files, edges = graph(src)
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in files.items()}
    total = sum(lines.values())
    cycles = sccs(sorted(files), edges)
    cycle_edges = []
    for comp in cycles:
        members = set(comp)
        cycle_edges.append(
            [
                f"{e['from']}:{e['line']} -> {e['to']}" + (" (in a function)" if e["in_function"] else "")
                for e in edges
                if e["from"] in members and e["to"] in members
            ]
        )
    module_level = [e for e in edges if not e["in_function"]]
    back = []
    for e in edges:
        a, b = rank(e["from"]), rank(e["to"])
        if a is not None and b is not None and b[0] > a[0]:
            back.append(f"{e['from']}:{e['line']} ({a[1]}) -> {e['to']} ({b[1]})")
    top = [n for n in files if n.count(".") == 1 or n == PACKAGE]
    top = [n for n in top if files[n].parent == src]
    big = sorted(((lines[n], n) for n in files if lines[n] > BIG), reverse=True)
    return {
        "files": len(files),
        "lines": total,
        "internal_edges": len(edges),
        "edges_in_functions": len(edges) - len(module_level),
        "cycles": len(cycles),
        "cycles_module_level": len(sccs(sorted(files), module_level)),
        "cycle_members": cycles,
        "cycle_edges": cycle_edges,
        "back_imports": len(back),
        "back_import_list": back,
        "top_level_modules": len(top),
        "top_level_share": round(sum(lines[n] for n in top) / total, 3) if total else 0.0,
        "modules_over_500": len(big),
        "modules_over_500_list": [f"{n} ({k} lines)" for k, n in big],
        "biggest_share": round(big[0][0] / total, 3) if big else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src" / PACKAGE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    m = measure(args.src.resolve())
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    print(f"{args.src}: {m['files']} files, {m['lines']} lines, {m['internal_edges']} internal import edges")
    print(f"  ({m['edges_in_functions']} of them inside functions)")
    print(
        f"import cycles (function-level imports counted): {m['cycles']}   module level only: "
        f"{m['cycles_module_level']}"
    )
    for members, found in zip(m["cycle_members"], m["cycle_edges"], strict=True):
        print(f"  {' <-> '.join(members)}")
        for edge in found:
            print(f"      {edge}")
    print(f"imports pointing back up the flow: {m['back_imports']}")
    for edge in m["back_import_list"]:
        print(f"  {edge}")
    print(f"top-level modules: {m['top_level_modules']} ({m['top_level_share']:.0%} of the lines)")
    print(f"modules over {BIG} lines: {m['modules_over_500']}")
    for item in m["modules_over_500_list"]:
        print(f"  {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
