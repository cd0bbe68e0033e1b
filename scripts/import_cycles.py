#!/usr/bin/env python3
"""List import cycles among the modules of a package.

    python scripts/import_cycles.py amqp_sansio            # every import
    python scripts/import_cycles.py amqp_sansio --runtime  # not TYPE_CHECKING ones

Reads the imports as written (``import x``, ``from .x import y``, inside
functions too) and prints each group of modules that import each other,
directly or around a loop.  With ``--runtime`` imports under ``if
TYPE_CHECKING:`` are left out (they never run).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _imports(name: str, path: Path, known: set[str], runtime: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    if runtime:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for n in ast.walk(node))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = (".".join(package[:len(package) - node.level + 1] + [node.module or ""])
                    .rstrip(".") if node.level else node.module or "")
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        found.update(t for t in targets if t in known and t != name)
    return found


def graph(root: Path, runtime: bool = False) -> dict[str, set[str]]:
    """Each module of the package at ``root`` -> the package's modules it imports."""
    mods = _modules(root)
    return {m: _imports(m, f, set(mods), runtime) for m, f in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", type=Path)
    ap.add_argument("--runtime", action="store_true", help="leave out TYPE_CHECKING imports")
    args = ap.parse_args(argv)
    found = cycles(graph(args.package, args.runtime))
    for group in found:
        print(" <-> ".join(group))
    print(f"{len(found)} import cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
