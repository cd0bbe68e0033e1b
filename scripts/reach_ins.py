#!/usr/bin/env python3
"""Count reach-ins: code that uses another module's private attributes.

    python scripts/reach_ins.py amqp_sansio            # the core
    python scripts/reach_ins.py adapters -v            # ... and list them
    python scripts/reach_ins.py amqp_sansio --per-class -v   # cross-class reads

A reach-in is ``obj._name`` (``obj`` not ``self``/``cls``) in a module that
does not itself define ``_name`` -- as a function, a class attribute or a
``self._name`` assignment -- so the private belongs to some other module's
object.  Accesses of a module's own privates on another instance of its
class (``other._ranges`` inside SequenceSet) are not counted.  Generated
files are skipped.  A module-level alias of a private module (``_c.x``) is
not a reach-in either: the pattern needs a private *attribute*.  Named
tuples' ``_replace``/``_asdict``/``_make``/``_fields`` are their documented
public API, not privates.

``--per-class`` counts the stricter measure (issue 25): *cross-class
private reads*, ``x._name`` (``x`` not ``self``/``cls``) where the
enclosing class -- with its bases defined in the same module -- does not
define ``_name``; outside any class, every ``x._name``.  So a friend class
or a module-level function reading another class's privates counts, even
in the module that defines them.  ``module._name`` of an imported module
counts too.

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


def _class_privates(cls: ast.ClassDef) -> set[str]:
    """What a class defines: methods, class attributes, slots, and every
    ``self._name``/``cls._name`` it stores."""
    own: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Assign):
            own.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
                own.update(c.value for c in ast.walk(node.value)
                           if isinstance(c, ast.Constant) and isinstance(c.value, str))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            own.add(node.attr)
    return own


def cross_class_reads(path: Path) -> list[tuple[int, str, str]]:
    """``(line, expression, enclosing class or '<module>')`` of each
    cross-class private read (see the module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    own_cache: dict[str, set[str]] = {}

    def owns(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if name not in own_cache:
            cls = classes[name]
            got = set(_class_privates(cls))
            for b in cls.bases:
                base = b.id if isinstance(b, ast.Name) else None
                if base in classes and base not in seen:
                    got |= owns(base, seen | {name})
            own_cache[name] = got
        return own_cache[name]

    out: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, cls: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.ClassDef) else cls
            if isinstance(child, ast.Attribute):
                name = child.attr
                if (name.startswith("_") and not name.startswith("__")
                        and name not in NAMEDTUPLE_API
                        and not (isinstance(child.value, ast.Name)
                                 and child.value.id in ("self", "cls", "super"))
                        and not (isinstance(child.value, ast.Call)
                                 and isinstance(child.value.func, ast.Name)
                                 and child.value.func.id == "super")
                        and (cls is None or name not in owns(cls))):
                    out.append((child.lineno, f"{ast.unparse(child.value)}.{name}",
                                cls or "<module>"))
            visit(child, inner)

    visit(tree, None)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true", help="list each reach-in")
    ap.add_argument("--per-class", action="store_true",
                    help="count cross-class private reads (x._name the enclosing class "
                         "does not define), per class")
    args = ap.parse_args(argv)
    if args.per_class:
        return _main_per_class(args.roots, args.verbose)
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


def _main_per_class(roots: list[Path], verbose: bool) -> int:
    total = justified = 0
    per: dict[str, int] = {}
    for root in roots:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for f in files:
            if "_generated" in f.name or f.name == "codes.py":
                continue
            lines = f.read_text(encoding="utf-8").splitlines()
            for line, what, cls in cross_class_reads(f):
                why = any("# reach-in:" in x for x in lines[max(0, line - 2):line])
                justified += why
                if not why:
                    total += 1
                    key = f"{f}:{cls}"
                    per[key] = per.get(key, 0) + 1
                if verbose:
                    print(f"{f}:{line}: [{cls}] {what}{'  (justified)' if why else ''}")
    if verbose:
        for key, k in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"{k:5d}  {key}")
    print(f"{total} cross-class private reads ({justified} more justified in a comment)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
