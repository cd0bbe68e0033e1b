"""The AMQP 0-9 connection: 0-9-1's, speaking 0-9's method table.

The state machines (the connection's and the channel's tables),
the handshake, tuning, heartbeats and the error rules are 0-9-1's
(:mod:`amqp_sansio.v0_9_1.connection`); only :attr:`Connection.TABLE`
differs: the header ``AMQP 1 1 0 9``, 0-9's methods (file, stream, access,
tunnel, dtx and message are decoded, checked against their chassis and
matched with their replies like any other channel method), its content
properties (file and stream content headers), a server's answer to a
protocol header it does not speak (it closes without a word), and
``connection.redirect`` (:attr:`Connection.MACHINES` add it to 0-9-1's
tables with ``Machine.with_entries``: a client receiving it reports
``ConnectionRedirected`` and is over; a server whose :class:`ServerConfig`
has ``redirect`` answers ``connection.open`` with it and closes).  What 0-9 has that the 0-9-1 machinery does not follow:
out-of-band frames (types 4-7: 501), the delivery books of the file class
(file deliveries are reported, not tracked for acknowledgement), the
``insist`` bit of ``connection.open`` (0-9-1's method, which 0-9 shares,
keeps it reserved).
"""

from __future__ import annotations

__all__ = ["PROTOCOL_HEADER", "TABLE_0_9", "Role", "ConnState", "ClientConfig", "ServerConfig",
           "Connection"]

from collections.abc import Callable
from typing import ClassVar

import attrs

from ..engine import Entry, Machine
from ..events import ConnectionRedirected, Event
from ..v0_9_1.connection import ClientConfig, ConnState, Role
from ..v0_9_1.connection import Connection as Connection091
from ..v0_9_1.connection import ServerConfig as ServerConfig091
from ..v0_9_1.spec import ERROR_CLASSES as ERROR_CLASSES_0_9_1
from ..v0_9_1.spec import ConnectionOpen
from ..v0_9_1.table import MethodTable
from .spec import ERROR_CLASSES, METHODS, PROPERTIES, PROTOCOL_HEADER, ConnectionRedirect

# Reply codes: 0-9's, and 0-9-1's 505 (unexpected-frame), which the shared
# machinery sends on 0-9 connections too.
TABLE_0_9 = MethodTable("0-9", PROTOCOL_HEADER, METHODS, PROPERTIES,
                        {**ERROR_CLASSES_0_9_1, **ERROR_CLASSES})

# 0-9's basic.recover (60, 100) is what 0-9-1 calls basic.recover-async:
# unacknowledged deliveries come again, with new tags -- the channel's rule
# for "basic.recover()", found by name, keeps those books for both.


@attrs.frozen(kw_only=True)
class ServerConfig(ServerConfig091):
    """0-9-1's server settings, and where to redirect clients: ``redirect``
    maps the virtual host a client opens to the ``host[:port]`` that serves
    it (None: this server does), ``known_hosts`` are offered with it."""

    redirect: Callable[[str], str | None] | None = None
    known_hosts: tuple[str, ...] = ()


class Connection(Connection091):
    """One AMQP 0-9 connection in the client or server role."""

    TABLE = TABLE_0_9
    # 0-9: a server that cannot support the header closes the socket
    # without sending any response (0-9-1 answers with its own header).
    ANSWER_BAD_HEADER = False

    def _on_redirect(self, m: ConnectionRedirect, events: list[Event]) -> None:
        self.closed_reason = f"redirected to {m.host}"
        events.append(ConnectionRedirected(
            str(m.host), tuple(str(m.known_hosts or "").replace(",", " ").split())))

    def _on_connection_open(self, m: ConnectionOpen, events: list[Event]) -> ConnState:
        cfg = self.config
        if isinstance(cfg, ServerConfig) and cfg.redirect is not None:
            # (0-9-1's open keeps no insist bit: every client is redirected)
            target = cfg.redirect(m.virtual_host)
            if target:
                self._write_method(0, ConnectionRedirect(host=target,
                                                         known_hosts=" ".join(cfg.known_hosts)))
                self.closed_reason = f"redirected client to {target}"
                return ConnState.CLOSED
        return super()._on_connection_open(m, events)

    #: 0-9-1's tables with 0-9's connection.redirect: a client awaiting
    #: open-ok may be redirected (then it is over), a server may answer open
    #: with it (then it closes).
    MACHINES: ClassVar[dict[Role, Machine[ConnState]]] = {
        Role.CLIENT: Connection091.MACHINES[Role.CLIENT].with_entries(
            "0-9 connection (client)", {ConnState.AWAIT_OPEN_OK: {
                "connection.redirect": Entry((ConnState.CLOSED,), _on_redirect)}}),
        Role.SERVER: Connection091.MACHINES[Role.SERVER].with_entries(
            "0-9 connection (server)", {ConnState.AWAIT_OPEN: {
                "connection.open": Entry((ConnState.OPEN, ConnState.CLOSING, ConnState.CLOSED),
                                         _on_connection_open)}}),
    }
