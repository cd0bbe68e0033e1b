"""Cheap static checks that pyproject.toml's packaging tables match the
source tree (the expensive end-to-end check is ``scripts/wheel_check.py``).

``[tool.setuptools] packages`` is an explicit list (the adapters live under
``adapters/<name>/`` but install as ``amqp_sansio_<name>``), so a new
subpackage or adapter that is not listed would silently be left out of the
wheel.  These tests catch that before a build.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
ST = PYPROJECT["tool"]["setuptools"]
PACKAGES: list[str] = ST["packages"]
PACKAGE_DIR: dict[str, str] = ST.get("package-dir", {})


def _dir_of(package: str) -> Path:
    """Where setuptools will look for ``package`` given package-dir."""
    parts = package.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in PACKAGE_DIR:
            return ROOT / PACKAGE_DIR[prefix] / Path(*parts[i:])
    base = ROOT / PACKAGE_DIR[""] if "" in PACKAGE_DIR else ROOT
    return base / Path(*parts)


def _packages_on_disk(top: str, directory: Path) -> set[str]:
    found = set()
    for init in directory.rglob("__init__.py"):
        if "__pycache__" in init.parts:
            continue
        rel = init.parent.relative_to(directory)
        found.add(".".join((top, *rel.parts)) if rel.parts else top)
    return found


def _adapter_dirs() -> dict[str, Path]:
    adapters = ROOT / "adapters"
    if not adapters.is_dir():
        return {}
    return {
        f"amqp_sansio_{d.name}": d
        for d in sorted(adapters.iterdir())
        if d.is_dir() and (d / "__init__.py").is_file()
    }


def test_every_listed_package_exists() -> None:
    missing = [p for p in PACKAGES if not (_dir_of(p) / "__init__.py").is_file()]
    assert not missing, (
        f"listed in [tool.setuptools] packages but no __init__.py on disk: {missing}"
    )


def test_every_core_subpackage_is_listed() -> None:
    on_disk = _packages_on_disk("amqp_sansio", ROOT / "amqp_sansio")
    unlisted = sorted(on_disk - set(PACKAGES))
    assert not unlisted, (
        "packages on disk missing from pyproject [tool.setuptools] packages "
        f"(they would not be in the wheel): {unlisted}"
    )


def test_every_adapter_is_mapped_and_listed() -> None:
    problems = []
    for name, directory in _adapter_dirs().items():
        want = directory.relative_to(ROOT).as_posix()
        if PACKAGE_DIR.get(name) != want:
            problems.append(f'[tool.setuptools.package-dir] needs {name} = "{want}"')
        for pkg in sorted(_packages_on_disk(name, directory) - set(PACKAGES)):
            problems.append(f'[tool.setuptools] packages needs "{pkg}"')
    assert not problems, "adapters not packaged:\n  " + "\n  ".join(problems)


def test_typed_marker_for_every_top_level_package() -> None:
    tops = sorted({p.split(".")[0] for p in PACKAGES})
    data = ST.get("package-data", {})
    problems = []
    for top in tops:
        if "py.typed" not in data.get(top, []):
            problems.append(f'[tool.setuptools.package-data] {top} lacks "py.typed"')
        if not (_dir_of(top) / "py.typed").is_file():
            problems.append(f"{_dir_of(top).relative_to(ROOT)}/py.typed missing on disk")
    assert not problems, "\n".join(problems)


def test_core_depends_on_attrs_only() -> None:
    deps = PYPROJECT["project"]["dependencies"]
    names = {re.match(r"\s*([A-Za-z0-9._-]+)", d).group(1).lower() for d in deps}  # type: ignore[union-attr]
    assert names == {"attrs"}, f"core runtime dependencies must be attrs only, got {deps}"


def test_console_scripts_point_at_packaged_modules() -> None:
    for script, target in PYPROJECT["project"].get("scripts", {}).items():
        module = target.split(":")[0]
        top = module.split(".")[0]
        assert any(p == top or p.startswith(top + ".") for p in PACKAGES), (script, target)
        path = _dir_of(module)
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), (
            f"console script {script} -> {target}: {module} not found at {path}"
        )
