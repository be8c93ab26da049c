"""Module figures of a seqjudge source tree: modules, top-level modules, modules over 500 lines, and import
cycles counting the imports inside functions.

    python scripts/module_figures.py [SRC]        # SRC holds seqjudge/ (default: src)

For a before/after, export the other revision first: git archive main src | tar -x -C /tmp/before
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for f in (root / "seqjudge").rglob("*.py"):
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = f
    return found


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the seqjudge modules it imports, at module level or inside a function."""
    out: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        package = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m:
                    out[m].add(t)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    mods = modules(root)
    top = [m for m, f in mods.items() if f.parent == root / "seqjudge" and f.name != "__init__.py"]
    sizes = {m: len(f.read_text(encoding="utf-8").splitlines()) for m, f in mods.items()}
    big = sorted(((n, m) for m, n in sizes.items() if n > 500), reverse=True)
    print(f"modules: {len(mods)}; top-level modules: {len(top)}; over 500 lines: {len(big)}")
    for n, m in big:
        print(f"  {n:5d} {m}")
    found = cycles(edges(mods))
    print(f"import cycles (imports inside functions included): {len(found)}")
    for comp in found:
        print("  " + " <-> ".join(comp))


if __name__ == "__main__":
    main()
