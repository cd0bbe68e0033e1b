"""A package's submodules imported when first read, not with the package.

The Trio and socket adapters load their protocols' clients this way: a
program loads the cores and codecs of the protocol it speaks (a 0-10 Spark
worker, a one-message ``amqp-sansio send --protocol 1.0``), not all three --
most of an adapter's import time.  The names stay attributes of the package
and in its ``dir()``; a ``TYPE_CHECKING`` import beside the call types them.
The package passes the imports (literal names: nothing is imported by a
computed name, see tests/project/test_purity.py).  Adapter plumbing, not
protocol: it lives beside the adapters, not in the core.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def on_first_use(namespace: dict[str, Any], loaders: Mapping[str, Callable[[], Any]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the module whose globals are
    ``namespace``: reading a name of ``loaders`` calls its loader (which
    imports a submodule, or a submodule's name)."""

    def getattr_(name: str) -> Any:
        if name in loaders:
            return loaders[name]()
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")

    def dir_() -> list[str]:
        return sorted({*namespace, *loaders})

    return getattr_, dir_
