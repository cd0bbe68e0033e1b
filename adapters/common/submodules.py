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

import importlib
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


def clients(package: str) -> dict[str, Callable[[], Any]]:
    """The loaders both client adapters (``package``: the adapter's
    ``__name__``) give :func:`on_first_use`: each protocol's client module,
    the 0-10 client's classes under the package's own names, and
    ``SessionStore`` (0-10's resume) -- each imported when first read."""

    def client_0_10() -> Any:
        return importlib.import_module(".client_0_10", package)

    def session_store() -> Any:
        from amqp_sansio.v0_10.session import SessionStore

        return SessionStore

    return {
        "client_0_10": client_0_10,
        "client_0_9_1": lambda: importlib.import_module(".client_0_9_1", package),
        "client_1_0": lambda: importlib.import_module(".client_1_0", package),
        "Connection": lambda: client_0_10().Connection,
        "Session": lambda: client_0_10().Session,
        "Subscription": lambda: client_0_10().Subscription,
        "Delivery": lambda: client_0_10().Delivery,
        "SessionStore": session_store,
    }


#: What :func:`clients` loads, for an adapter's ``__all__``.
CLIENT_NAMES = ["client_0_10", "client_0_9_1", "client_1_0", "Connection", "Session",
                "Subscription", "Delivery", "SessionStore"]
