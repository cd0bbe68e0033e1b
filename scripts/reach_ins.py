#!/usr/bin/env python3
"""Count reach-ins: code that uses another module's private attributes.

    python scripts/reach_ins.py amqp_sansio            # the core
    python scripts/reach_ins.py adapters -v            # ... and list them

A reach-in is ``obj._name`` (``obj`` not ``self``/``cls``) in a module that
does not itself define ``_name`` -- as a function, a class attribute or a
``self._name`` assignment -- so the private belongs to some other module's
object.  Accesses of a module's own privates on another instance of its
class (``other._ranges`` inside SequenceSet) are not counted.  Generated
files are skipped.  A module-level alias of a private module (``_c.x``) is
not a reach-in either: the pattern needs a private *attribute*.  Named
tuples' ``_replace``/``_asdict``/``_make``/``_fields`` are their documented
public API, not privates.

A reach-in kept on purpose says why in a comment starting ``reach-in:``,
on its line or the line above; those are counted apart ("justified") and
listed with ``-v``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def _own_privates(tree: ast.AST) -> set[str]:
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    for node in ast.walk(tree):  # __slots__ entries are the class's own
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            own.update(c.value for c in ast.walk(node.value)
                       if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return own


#: namedtuple's public methods (underscored so as not to clash with fields).
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_make", "_fields", "_field_defaults"})


def reach_ins(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _own_privates(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if name in own or name in NAMEDTUPLE_API:
            continue
        out.append((node.lineno, f"{ast.unparse(node.value)}.{name}"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true", help="list each reach-in")
    args = ap.parse_args(argv)
    total = justified = 0
    for root in args.roots:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for f in files:
            if "_generated" in f.name or f.name == "codes.py":
                continue
            lines = f.read_text(encoding="utf-8").splitlines()
            for line, what in reach_ins(f):
                why = any("# reach-in:" in x for x in lines[max(0, line - 2):line])
                justified += why
                total += not why
                if args.verbose:
                    print(f"{f}:{line}: {what}{'  (justified)' if why else ''}")
    print(f"{total} reach-ins ({justified} more justified in a comment)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
