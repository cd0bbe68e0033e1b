"""Which end of the connection we are: the one role enum of every protocol.

AMQP 0-10 and 0-9-1 say client and server (the client opens the TCP
connection and starts the handshake); AMQP 1.0 is symmetric on the wire but
keeps the same split for who sends the protocol header first and who offers
SASL mechanisms.  ``Role.CLIENT`` is the same object whatever the protocol
package it is imported from.
"""

from __future__ import annotations

__all__ = ["Role"]

import enum


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"
