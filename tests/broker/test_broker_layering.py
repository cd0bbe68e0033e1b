"""The broker's layers (issue 25): the model knows no front end, and no two
modules of the package import each other, directly or around a loop -- at
run time or for typing (the project's own count, scripts/import_cycles.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "adapters" / "broker"
#: What speaks a protocol or drives I/O: the model must reach none of it.
FRONT = re.compile(r"broker\.(front_\d.*|listener|server|__main__|content_0_10|message_0_9)$")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles",
                                                  ROOT / "scripts" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _reached(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for m in edges[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def test_the_broker_package_has_no_import_cycle() -> None:
    ic = _script()
    edges = ic.graph(BROKER)
    assert len(edges) > 30  # (the package was read)
    assert ic.cycles(edges) == []


def test_the_model_reaches_no_front_end() -> None:
    edges = _script().graph(BROKER)
    reached = _reached(edges, "broker.model")
    assert "broker.front_ends" in reached  # (the registry the listener fills)
    assert sorted(m for m in reached if FRONT.match(m)) == []


def test_the_count_sees_a_typing_only_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from .a import A\nB = 1\n")
    ic = _script()
    assert ic.cycles(ic.graph(pkg)) == [["pkg.a", "pkg.b"]]
    assert ic.cycles(ic.graph(pkg, runtime=True)) == []
