"""The protocols this library speaks: one list that everything reads.

``url.py`` (``?protocol=``), the command line (``--protocol``), the Spark
options and the fuzzer all take their choices and their default from
:data:`PROTOCOLS`.  An entry names the protocol, the header a client opens
with, and the package that implements it -- whose connection module is
imported only when asked (:meth:`ProtocolInfo.load`), so reading the
registry costs nothing.  A new protocol plugs in by adding its entry here
(see ``docs/architecture.md``).
"""

from __future__ import annotations

__all__ = ["ProtocolInfo", "PROTOCOLS", "DEFAULT", "names", "get", "by_header"]

from collections.abc import Callable
from types import ModuleType

import attrs

from .errors import LocalProtocolError


@attrs.frozen
class ProtocolInfo:
    """One protocol: ``name`` as URLs and options spell it (``"0-10"``),
    ``title`` for people, ``header`` the 8 octets a client sends first,
    ``package`` the core package (siblings share module names:
    ``connection``, ``events``, ``messages`` ...)."""

    name: str
    title: str
    header: bytes
    package: str
    _loader: Callable[[], ModuleType] = attrs.field(repr=False, alias="loader")
    #: other headers a client of it may open with (1.0: its SASL layer's)
    also: tuple[bytes, ...] = ()

    def load(self) -> ModuleType:
        """The protocol's ``connection`` module (imported now, once)."""
        return self._loader()


# Static imports inside functions: imported when asked, and still visible to
# the purity check (which refuses imports it cannot read).
def _connection_0_10() -> ModuleType:
    from .v0_10 import connection

    return connection


def _connection_0_9_1() -> ModuleType:
    from .v0_9_1 import connection

    return connection


def _connection_0_9() -> ModuleType:
    from .v0_9 import connection

    return connection


def _connection_1_0() -> ModuleType:
    from .v1_0 import connection

    return connection


#: Every protocol, the default first.
PROTOCOLS: dict[str, ProtocolInfo] = {p.name: p for p in (
    ProtocolInfo("0-10", "AMQP 0-10", b"AMQP\x01\x01\x00\x0a", "amqp_sansio.v0_10",
                 loader=_connection_0_10),
    ProtocolInfo("0-9-1", "AMQP 0-9-1 (RabbitMQ)", b"AMQP\x00\x00\x09\x01",
                 "amqp_sansio.v0_9_1", loader=_connection_0_9_1),
    # 0-9 itself (the seed's spec): a dialect of the 0-9-1 machinery
    ProtocolInfo("0-9", "AMQP 0-9", b"AMQP\x01\x01\x00\x09", "amqp_sansio.v0_9",
                 loader=_connection_0_9),
    # the name as AMQP writes it; the adapters and the broker speak it in issue 15
    ProtocolInfo("1.0", "AMQP 1.0", b"AMQP\x00\x01\x00\x00", "amqp_sansio.v1_0",
                 loader=_connection_1_0, also=(b"AMQP\x03\x01\x00\x00",)),
)}

#: The protocol of a URL or option that names none.
DEFAULT = "0-10"


def names() -> tuple[str, ...]:
    """Every protocol name, the default first (for choices and messages)."""
    return tuple(PROTOCOLS)


def get(name: str) -> ProtocolInfo:
    """The protocol called ``name``; LocalProtocolError naming the choices."""
    try:
        return PROTOCOLS[name]
    except (KeyError, TypeError):
        raise LocalProtocolError(
            f"unknown protocol {name!r} (one of {', '.join(PROTOCOLS)})") from None


def by_header(header: bytes) -> ProtocolInfo | None:
    """The protocol whose client opens with ``header`` (a server that speaks
    several picks one this way), or None."""
    return next((p for p in PROTOCOLS.values() if header == p.header or header in p.also),
                None)
