#!/usr/bin/env python3
"""Count function parameters typed ``Any`` (issue 25: handler parameters typed).

    python scripts/any_params.py amqp_sansio          # the core
    python scripts/any_params.py amqp_sansio -v       # ... and list them

A parameter counts when its annotation is ``Any`` itself (``x: Any``,
``*args: Any``, ``**kw: Any``); ``dict[str, Any]`` and the like do not (a
value of any type is what such a container holds).  Generated files are
skipped, as in ``reach_ins.py``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def _is_any(ann: ast.expr | None) -> bool:
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # "Any"
        return ann.value.strip() in ("Any", "typing.Any")
    return (isinstance(ann, ast.Name) and ann.id == "Any") or (
        isinstance(ann, ast.Attribute) and ann.attr == "Any")


def any_params(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs,
                  *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
        name = getattr(node, "name", "<lambda>")
        out.extend((p.lineno, f"{name}({p.arg})") for p in params if _is_any(p.annotation))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true", help="list each parameter")
    args = ap.parse_args(argv)
    total = 0
    per: dict[Path, int] = {}
    for root in args.roots:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for f in files:
            if "_generated" in f.name or f.name == "codes.py":
                continue
            found = any_params(f)
            total += len(found)
            if found:
                per[f] = len(found)
            if args.verbose:
                for line, what in found:
                    print(f"{f}:{line}: {what}")
    if args.verbose:
        for f, k in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"{k:5d}  {f}")
    print(f"{total} parameters typed Any")
    return 0


if __name__ == "__main__":
    sys.exit(main())
