"""The core package ``amqp_sansio`` is sans-IO: it must not pull in I/O,
concurrency or clock modules, and it must never depend on an adapter.

Three checks:

1. *Static*: every ``amqp_sansio/**/*.py`` is parsed and every ``import``,
   ``from ... import`` and literal ``__import__``/``importlib.import_module``
   call -- at any depth, including function bodies and ``TYPE_CHECKING``
   blocks -- is compared against :data:`FORBIDDEN_DIRECT` and the adapter
   prefix ``amqp_sansio_``.  Dynamic imports with a non-literal name are
   rejected too, since nothing could check them.
2. *Dynamic*: every module found in the source tree is imported in a fresh
   interpreter (``python -S``, source tree first on ``sys.path``) that records
   the import graph -- every ``__import__`` call (cache hits included) and
   every module newly found by the import system, each attributed to the
   module that asked.  A forbidden module, or any ``amqp_sansio_*`` adapter,
   reachable from the imported module fails the test, with the chain printed.
3. Edges known to be harmless (stdlib and ``attrs`` internals) are listed in
   :data:`ALLOWED_EDGES`, each with its reason.  Add to it only after checking
   that the edge cannot make the core do I/O, block, or read the clock.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest
from purity import FORBIDDEN_DIRECT, FORBIDDEN_TRANSITIVE

ROOT = Path(__file__).resolve().parents[2]
PKG = "amqp_sansio"
PKG_DIR = ROOT / PKG
ADAPTER_PREFIX = "amqp_sansio_"


#: (importer, imported) pairs that are allowed although ``imported`` is
#: forbidden.  Only stdlib and dependency internals belong here.
ALLOWED_EDGES: dict[tuple[str, str], str] = {
    ("datetime", "time"): "datetime's C/Python implementation uses time for now()/fromtimestamp()",
    ("_datetime", "time"): "C accelerator of datetime, same as above",
    ("_pydatetime", "time"): "pure-Python datetime (3.12+), same as above",
    (
        "attr._compat",
        "threading",
    ): "attrs keeps a thread-local for recursive repr; attrs is the one dependency",
}


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _is_forbidden(name: str, forbidden: frozenset[str] | set[str]) -> bool:
    return _top(name) in forbidden


def _is_adapter(name: str) -> bool:
    return _top(name).startswith(ADAPTER_PREFIX)


def source_files() -> list[Path]:
    return sorted(p for p in PKG_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> list[str]:
    return [module_name(p) for p in source_files() if p.name != "__main__.py"]


# --------------------------------------------------------------------------
# 1. static scan
# --------------------------------------------------------------------------

_DYNAMIC_IMPORTERS = {"__import__", "import_module"}


def _static_imports(path: Path) -> list[tuple[int, str | None]]:
    """(line, absolute module name) for each import in ``path``; name None
    means a dynamic import whose target is not a string literal."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                out.append((node.lineno, node.module))
                out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Call):
            f = node.func
            fname = (
                f.id
                if isinstance(f, ast.Name)
                else f.attr
                if isinstance(f, ast.Attribute)
                else None
            )
            if fname in _DYNAMIC_IMPORTERS and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.append((node.lineno, arg.value))
                else:
                    out.append((node.lineno, None))
    return out


def test_source_tree_is_found() -> None:
    mods = source_modules()
    assert PKG in mods, f"{PKG_DIR} has no __init__.py?"
    assert len(mods) >= 3, mods


def test_static_no_forbidden_or_adapter_imports() -> None:
    problems: list[str] = []
    for path in source_files():
        rel = path.relative_to(ROOT)
        for line, name in _static_imports(path):
            if name is None:
                problems.append(
                    f"{rel}:{line}: dynamic import with a non-literal name (uncheckable)"
                )
            elif _is_forbidden(name, FORBIDDEN_DIRECT):
                problems.append(f"{rel}:{line}: imports forbidden module {name!r}")
            elif _is_adapter(name):
                problems.append(
                    f"{rel}:{line}: imports adapter {name!r} (adapters depend on the core, never the reverse)"
                )
    assert not problems, "core purity violations:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------------------
# 2. dynamic import graph, one fresh interpreter per module
# --------------------------------------------------------------------------

_RECORDER = r'''
import builtins, json, sys
paths, target = json.loads(sys.argv[1]), sys.argv[2]
sys.path[:] = paths + [p for p in sys.path if p]  # drop cwd
edges = set()
_orig_import = builtins.__import__
_SKIP_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_SKIP_NAMES = ("importlib", "importlib._bootstrap", "importlib._bootstrap_external",
               "_frozen_importlib", "_frozen_importlib_external")

def _resolve(name, globals, level):
    if not level:
        return name
    g = globals or {}
    pkg = g.get("__package__")
    if pkg is None:
        pkg = g.get("__name__", "")
        if "__path__" not in g:
            pkg = pkg.rpartition(".")[0]
    base = pkg.rsplit(".", level - 1)[0] if level > 1 else pkg
    return f"{base}.{name}" if name else base

def _add(importer, name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        edges.add((importer, ".".join(parts[:i])))

def _who(f):
    """Name of the module running the nearest frame outside the import system."""
    while f is not None and (
        f.f_code.co_filename in _SKIP_FILES
        or f.f_code in _HOOK_CODES
        or f.f_globals.get("__name__") in _SKIP_NAMES
    ):
        f = f.f_back
    return f.f_globals.get("__name__", "?") if f is not None else "?"

def _hooked_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "?")
    if importer in _SKIP_NAMES or importer == "?":
        # Called from the import system itself (e.g. a C extension's init):
        # charge it to the module that triggered that import.
        importer = _who(sys._getframe(1))
    try:
        full = _resolve(name, globals, level)
    except Exception:
        full = name
    _add(importer, full)
    try:
        return _orig_import(name, globals, locals, fromlist, level)
    finally:
        for item in fromlist or ():
            if item != "*" and f"{full}.{item}" in sys.modules:
                _add(importer, f"{full}.{item}")

_HOOK_CODES = {_hooked_import.__code__}

class _Recorder:
    """Sees every module the import system has to find (importlib.import_module,
    C-level imports); attributes it to the nearest non-importlib frame."""
    def find_spec(self, fullname, path=None, target=None):
        edges.add((_who(sys._getframe(1)), fullname))
        return None

_HOOK_CODES.add(_Recorder.find_spec.__code__)
sys.meta_path.insert(0, _Recorder())
builtins.__import__ = _hooked_import
error = None
try:
    exec(f"import {target}", {"__name__": "__main__"})
except BaseException as e:  # report, don't crash: the parent prints it
    error = f"{type(e).__name__}: {e}"
finally:
    builtins.__import__ = _orig_import
print("\n@@EDGES@@" + json.dumps({"edges": sorted(edges), "error": error}))
'''


def _import_graph(mod: str) -> tuple[dict[str, set[str]], str | None]:
    # Source tree first, then this interpreter's library paths (for attrs).
    paths = [str(ROOT)] + [
        p for p in sys.path if p and os.path.isdir(p) and Path(p).resolve() != ROOT
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-S", "-c", _RECORDER, json.dumps(paths), mod],
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout
    if proc.returncode != 0 or "@@EDGES@@" not in out:
        pytest.fail(f"recorder for {mod} failed (rc={proc.returncode}):\n{out}\n{proc.stderr}")
    data = json.loads(out.rsplit("@@EDGES@@", 1)[1])
    # Imports nobody could be charged with are charged to the root.
    graph: dict[str, set[str]] = {"__main__": {"?"}}
    for a, b in data["edges"]:
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph, data["error"]


def _bad_paths(graph: dict[str, set[str]], root: str) -> list[list[str]]:
    """Shortest chains from ``root`` to a forbidden or adapter module, not
    crossing an allowed edge."""
    prev: dict[str, str | None] = {root: None}
    queue = deque([root])
    bad: list[list[str]] = []
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, ())):
            if (node, nxt) in ALLOWED_EDGES or nxt in prev:
                continue
            prev[nxt] = node
            if _is_forbidden(nxt, FORBIDDEN_TRANSITIVE) or _is_adapter(nxt):
                chain = [nxt]
                cur: str | None = node
                while cur is not None:
                    chain.append(cur)
                    cur = prev[cur]
                bad.append(chain[::-1])
                continue  # report the first hop into forbidden land only
            queue.append(nxt)
    return bad


@pytest.mark.parametrize("mod", source_modules())
def test_import_graph_is_pure(mod: str) -> None:
    graph, error = _import_graph(mod)
    # The recorder's own `__import__(target)` is attributed to __main__.
    assert mod in graph.get("__main__", set()), f"recorder did not see {mod} imported"
    bad = _bad_paths(graph, "__main__")
    msgs = [" -> ".join(c[1:]) for c in bad]
    assert not msgs, (
        f"importing {mod} reaches forbidden modules:\n  "
        + "\n  ".join(msgs)
        + "\n(if an edge is a harmless stdlib/attrs internal, add it to ALLOWED_EDGES with a reason)"
    )
    assert error is None, f"importing {mod} failed in a clean interpreter: {error}"


def test_bad_path_detection_works() -> None:
    """The checker itself: a chain through a non-allowed edge is found, an
    allowed edge is not followed."""
    graph = {
        "__main__": {"amqp_sansio.x"},
        "amqp_sansio.x": {"datetime", "logging"},
        "datetime": {"time"},
        "logging": {"threading"},
    }
    assert _bad_paths(graph, "__main__") == [["__main__", "amqp_sansio.x", "logging", "threading"]]
    graph["amqp_sansio.x"].add("amqp_sansio_trio")
    assert ["__main__", "amqp_sansio.x", "amqp_sansio_trio"] in _bad_paths(graph, "__main__")


def test_static_scan_detection_works(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text(
        "import os\n"
        "def f():\n"
        "    import socket\n"
        "    from concurrent import futures\n"
        "    import importlib; importlib.import_module('ssl')\n"
        "    __import__(name)\n"
        "from amqp_sansio_trio import x\n"
        "from . import sibling\n",
        encoding="utf-8",
    )
    names = [n for _, n in _static_imports(p)]
    assert "socket" in names and "concurrent" in names and "ssl" in names
    assert None in names and "amqp_sansio_trio" in names
    assert "sibling" not in names
