"""Protocol-header gating: the 8 octets every AMQP connection starts with.

``AMQP`` then four octets that name the protocol (0-10: ``1 1 0 10``; 0-9-1:
``0 0 9 1``; 0-9: ``1 1 0 9``; 1.0: ``0 1 0 0`` for AMQP itself, ``3 1 0 0`` for its SASL
layer).  A :class:`HeaderGate` collects the peer's header from whatever
chunks arrive, gives up as soon as the octets cannot be an AMQP header any
more (so a peer speaking another protocol is not waited on), and says
whether it is one it accepts.  What to answer -- our own header, a
``start``, nothing -- is the connection's business.
"""

from __future__ import annotations

__all__ = ["HEADER_SIZE", "HeaderGate", "mismatch"]

from .events import ProtocolHeaderMismatch

HEADER_SIZE = 8
_MAGIC = b"AMQP"


def mismatch(header: bytes) -> ProtocolHeaderMismatch:
    """The event for a header we do not speak: as sent, and its four
    version octets when it starts with ``AMQP``."""
    magic = header[:4] == _MAGIC and len(header) == HEADER_SIZE
    return ProtocolHeaderMismatch(header, header[4] if magic else None,
                                  header[5] if magic else None, header[6] if magic else None,
                                  header[7] if magic else None)


class HeaderGate:
    """Reads one protocol header; ``accepted`` are the headers we speak here."""

    __slots__ = ("accepted", "received", "done")

    def __init__(self, *accepted: bytes) -> None:
        if not accepted or any(len(h) != HEADER_SIZE for h in accepted):
            raise ValueError("a header gate needs 8-octet headers")
        self.accepted = accepted
        self.received = b""  # the peer's octets so far (at most 8)
        self.done = False

    def feed(self, data: bytes | bytearray | memoryview
             ) -> tuple[bytes, bytes | bytearray | memoryview] | None:
        """Take octets; ``None`` while more are needed, else ``(header,
        rest)``: the header as it arrived -- 8 octets, or fewer when they
        already cannot begin ``AMQP`` -- and the input after it."""
        if self.done:
            raise ValueError("the header was already read")
        need = HEADER_SIZE - len(self.received)
        self.received += bytes(data[:need])
        rest = data[need:]
        got = self.received
        if len(got) < HEADER_SIZE:
            if _MAGIC.startswith(got[:4]):
                return None
            rest = b""  # not AMQP: what follows means nothing to us
        self.done = True
        return got, rest

    def ok(self, header: bytes) -> bool:
        """Is ``header`` (from :meth:`feed`) one we speak?"""
        return header in self.accepted
