"""The AMQP 0-9 connection: 0-9-1's, speaking 0-9's method table.

The state machines (:data:`CONNECTION_TRANSITIONS`, the channel's table),
the handshake, tuning, heartbeats and the error rules are 0-9-1's
(:mod:`amqp_sansio.v0_9_1.connection`); only :attr:`Connection.TABLE`
differs: the header ``AMQP 1 1 0 9``, 0-9's methods (file, stream, access,
tunnel, dtx and message are decoded, checked against their chassis and
matched with their replies like any other channel method) and its content
properties (file and stream content headers).  What 0-9 has that the
0-9-1 machinery does not follow: ``connection.redirect`` (a client that
receives it closes with 503), out-of-band frames (types 4-7: 501), the
delivery books of the file class (file deliveries are reported, not
tracked for acknowledgement).
"""

from __future__ import annotations

__all__ = ["PROTOCOL_HEADER", "TABLE_0_9", "Role", "ConnState", "ClientConfig", "ServerConfig",
           "Connection"]

from ..v0_9_1 import spec as spec091
from ..v0_9_1.channel import follow_rules
from ..v0_9_1.connection import ClientConfig, ConnState, Role, ServerConfig
from ..v0_9_1.connection import Connection as Connection091
from ..v0_9_1.table import MethodTable
from .spec import METHODS, PROPERTIES, PROTOCOL_HEADER, BasicRecover

TABLE_0_9 = MethodTable("0-9", PROTOCOL_HEADER, METHODS, PROPERTIES)

# 0-9's basic.recover (60, 100) is what 0-9-1 calls basic.recover-async:
# unacknowledged deliveries come again, with new tags.
follow_rules(BasicRecover, spec091.BasicRecoverAsync)


class Connection(Connection091):
    """One AMQP 0-9 connection in the client or server role."""

    TABLE = TABLE_0_9
