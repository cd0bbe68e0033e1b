#!/usr/bin/env python3
"""Issue 25's structural measures of a core that the other scripts do not take.

    python scripts/engine_measures.py amqp_sansio          # this tree's core
    python scripts/engine_measures.py /tmp/old/amqp_sansio -v

* *state writers*: stores to an attribute ``state``/``_state`` outside
  ``engine.process_input`` and ``__init__`` (the scan of
  ``tests/core/test_engine.py``; a 1.0 delivery's outcome ``d.state`` is
  data, not an endpoint's state) -- each a private state engine;
* *condition literals*: string literals beginning ``amqp:`` in the
  hand-written 1.0 core (``v1_0/*.py``, not ``spec/``), docstrings left out;
* *lines per layer*: each layer module's lines, all and code (no blank,
  comment or docstring lines).

Reads the files as text; imports nothing of the tree.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path

LAYERS = ("engine.py", "transitions.py", "handshake.py", "sasl.py", "sasl_negotiator.py",
          "v0_10/connection.py", "v0_10/session.py", "v0_10/framing.py",
          "v0_9_1/connection.py", "v0_9_1/channel.py", "v0_9_1/framing.py",
          "v0_9/connection.py",
          "v1_0/connection.py", "v1_0/session.py", "v1_0/link.py", "v1_0/sasl.py",
          "v1_0/framing.py")
NOT_ENDPOINT_STATE = {("v1_0/link.py", "d.state")}


def state_writers(core: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(core.rglob("*.py")):
        rel = path.relative_to(core).as_posix()
        if "_generated" in path.name:
            continue

        def visit(node: ast.AST, func: str, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                name = child.name if isinstance(
                    child, ast.FunctionDef | ast.AsyncFunctionDef) else func
                targets: list[ast.expr] = []
                if isinstance(child, ast.Assign):
                    targets = child.targets
                elif isinstance(child, ast.AugAssign | ast.AnnAssign):
                    targets = [child.target]
                for t in targets:
                    for x in ast.walk(t):
                        if (isinstance(x, ast.Attribute) and x.attr in ("state", "_state")
                                and isinstance(x.ctx, ast.Store)
                                and func != "__init__"
                                and (rel, func) != ("engine.py", "process_input")
                                and (rel, ast.unparse(x)) not in NOT_ENDPOINT_STATE):
                            out.append(f"{rel}:{x.lineno} {func}: {ast.unparse(x)}")
                visit(child, name)

        visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if (isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)
                and isinstance(n.body[0].value.value, str)):
            out.add(id(n.body[0].value))
    return out


def condition_literals(core: Path) -> list[str]:
    out: list[str] = []
    for f in sorted((core / "v1_0").glob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        out.extend(f"v1_0/{f.name}:{c.lineno}: {c.value!r}" for c in ast.walk(tree)
                   if isinstance(c, ast.Constant) and isinstance(c.value, str)
                   and c.value.startswith("amqp:") and id(c) not in docs)
    return out


def code_lines(src: str) -> int:
    tree = ast.parse(src)
    doc_lines: set[int] = set()
    for n in ast.walk(tree):
        if (isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)
                and isinstance(n.body[0].value.value, str)):
            d = n.body[0]
            doc_lines.update(range(d.lineno, (d.end_lineno or d.lineno) + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}
    lines: set[int] = set()
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type not in skip:
            lines.update(x for x in range(t.start[0], t.end[0] + 1) if x not in doc_lines)
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("core", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true", help="list what is counted")
    a = ap.parse_args(argv)
    writers = state_writers(a.core)
    literals = condition_literals(a.core)
    if a.verbose:
        print(*writers, *literals, sep="\n")
    print(f"{len(writers)} state writers outside engine.process_input")
    print(f"{len(literals)} 'amqp:' literals in the hand-written 1.0 core")
    print(f"{'layer':24} {'lines':>6} {'code':>6}")
    for rel in LAYERS:
        p = a.core / rel
        if p.exists():
            src = p.read_text(encoding="utf-8")
            print(f"{rel:24} {src.count(chr(10)):6} {code_lines(src):6}")
        else:
            print(f"{rel:24} {'-':>6} {'-':>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
