"""No package of the project imports itself around a loop (issue 25's measure),
typing-only imports included: the core and every adapter package, each named
as it is imported (scripts/import_cycles.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles",
                                                  ROOT / "scripts" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


IC = _script()
PACKAGES = IC.packages(ROOT)


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_no_import_cycle(name: str) -> None:
    edges = IC.graph(PACKAGES[name], name=name)
    assert edges  # (the package was read)
    assert IC.cycles(edges) == []


def test_a_package_named_like_the_standard_library_is_read_by_its_import_name(
        tmp_path: Path) -> None:
    pkg = tmp_path / "asyncio"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from ._rt import X\n")
    (pkg / "_rt.py").write_text("import asyncio\nX = 1\n")  # the standard library's
    assert IC.cycles(IC.graph(pkg)) == [["asyncio", "asyncio._rt"]]  # misread by its directory
    assert IC.cycles(IC.graph(pkg, name="amqp_sansio_asyncio")) == []
