#!/usr/bin/env python3
"""List import cycles among the modules of a package.

    python scripts/import_cycles.py amqp_sansio            # every import
    python scripts/import_cycles.py amqp_sansio --runtime  # not TYPE_CHECKING ones
    python scripts/import_cycles.py --all                  # every package pyproject.toml names

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


def _modules(root: Path, name: str | None = None) -> dict[str, Path]:
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = [name or root.name, *f.relative_to(root).with_suffix("").parts]
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


def graph(root: Path, runtime: bool = False, name: str | None = None) -> dict[str, set[str]]:
    """Each module of the package at ``root`` -> the package's modules it imports.

    ``name`` is the package's import name when its directory's differs
    (``adapters/asyncio`` is ``amqp_sansio_asyncio``): named by its directory,
    its ``import asyncio`` of the standard library would read as its own."""
    mods = _modules(root, name)
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


def packages(project: Path) -> dict[str, Path]:
    """pyproject.toml's packages: import name -> directory."""
    import tomllib

    conf = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    dirs: dict[str, str] = conf["tool"]["setuptools"]["package-dir"]
    return {name: project / d for name, d in dirs.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", type=Path, nargs="?")
    ap.add_argument("--runtime", action="store_true", help="leave out TYPE_CHECKING imports")
    ap.add_argument("--all", action="store_true", help="every package pyproject.toml names")
    args = ap.parse_args(argv)
    project = Path(__file__).resolve().parents[1]
    known = {d.resolve(): n for n, d in packages(project).items()}
    roots = list(packages(project).values()) if args.all else [args.package or ap.error("a package")]
    total = 0
    for root in roots:
        found = cycles(graph(root, args.runtime, known.get(Path(root).resolve())))
        for group in found:
            print(" <-> ".join(group))
        total += len(found)
    print(f"{total} import cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
