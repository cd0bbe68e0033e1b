"""A code generator (``codegen/gen_*.py``) loaded as the module it is when run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

CODEGEN = Path(__file__).resolve().parents[2] / "codegen"


def load_generator(name: str) -> Any:
    """``codegen/<name>.py``, imported under ``name`` (the generators import
    each other and ``gen_common`` by that name)."""
    s = importlib.util.spec_from_file_location(name, CODEGEN / f"{name}.py")
    assert s is not None and s.loader is not None
    mod = importlib.util.module_from_spec(s)
    sys.modules[name] = mod
    s.loader.exec_module(mod)
    return mod
