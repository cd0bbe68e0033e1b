"""What a connection has to say, as log lines -- without logging.

The core imports no logging (it would pull in threads); adapters do.  This
module holds what they share: :class:`FrameTrace` decodes a copy of the
octets each way into one line per frame (a control, command or method with
its fields; heartbeats; content sizes), never showing a SASL response or a
secret, and never failing the connection it watches; :class:`Logbook`
writes a connection's policy notices (:mod:`amqp_sansio.client`) and, when
asked, its frames to loggers the adapter passes in.
"""

from __future__ import annotations

__all__ = ["TRACE_VARIABLE", "FrameTrace", "Logbook", "Logger", "describe"]

import enum
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .client import DEBUG, ClientConnection
from .errors import DecodeError

#: Fields never shown: SASL responses carry passwords, update-secret a token.
SECRET_FIELDS = frozenset({"response", "new_secret"})
_LONGEST = 120  # characters of one field's value in a line


class Logger(Protocol):
    """What :class:`Logbook` needs of a :class:`logging.Logger`."""

    def log(self, level: int, msg: str, *args: object) -> None: ...


def _value(v: object) -> str:
    if isinstance(v, enum.Enum):
        return v.name
    r = repr(v)
    return r if len(r) <= _LONGEST else r[:_LONGEST - 3] + "..."


def describe(obj: Any) -> str:
    """``name field=value ...`` for a control, command, method or struct:
    the fields that are set, secrets as ``***``."""
    parts = [obj.NAME]
    for f in obj.FIELDS:
        attr = f.attr
        if attr is None:
            continue
        v = getattr(obj, attr)
        if v is None or v is False or (isinstance(v, str | bytes | dict | list) and not v):
            continue
        parts.append(f"{attr}=***" if attr in SECRET_FIELDS else f"{attr}={_value(v)}")
    return " ".join(parts)


class _Direction:
    """One direction's decoder, behind the 8-octet protocol header."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.header = 8  # octets of protocol header still to skip
        self.broken = False
        self.decoder: Any
        if protocol == "0-9-1":
            from .v0_9_1.framing import Decoder

            self.decoder = Decoder(1 << 30, max_body_size=1 << 30)
        else:
            from .v0_10.framing import AssemblyDecoder

            self.decoder = AssemblyDecoder(max_frame_size=0xFFFF, max_body_size=1 << 30)

    def lines(self, data: bytes) -> list[str]:
        if self.broken or not data:
            return []
        if self.header:
            skip = min(self.header, len(data))
            self.header -= skip
            data = data[skip:]
            if not data:
                return []
        try:
            items = list(self.decoder.feed(data))
        except DecodeError as e:
            self.broken = True
            return [f"(not decodable any more: {e.message})"]
        return [self._line(item) for item in items]

    def _line(self, item: object) -> str:
        channel = getattr(item, "channel", 0)
        for name in ("control", "command", "method"):
            obj = getattr(item, name, None)
            if obj is not None:
                line = f"[{channel}] {describe(obj)}"
                headers = getattr(item, "headers", ())
                props = getattr(item, "properties", None)
                if props is not None:
                    headers = (props,)
                for h in headers:
                    line += f" | {describe(h)}"
                body = getattr(item, "body", None)
                if body is not None:
                    line += f" | body {len(body)} octets"
                return line
        return f"[{channel}] {type(item).__name__}"


class FrameTrace:
    """Both directions of one connection, one line per frame."""

    def __init__(self, protocol: str) -> None:
        self._in = _Direction(protocol)
        self._out = _Direction(protocol)

    def incoming(self, data: bytes) -> list[str]:
        return self._in.lines(data)

    def outgoing(self, data: bytes) -> list[str]:
        return self._out.lines(data)


#: The environment variable that turns the frame trace on: a comma-separated
#: list holding ``frames`` (as rhea's ``DEBUG=rhea:frames``).
TRACE_VARIABLE = "AMQP_SANSIO_TRACE"


class Logbook:
    """One connection's log lines, on the adapter's logger ``name``
    (``amqp_sansio.trio``, ``amqp_sansio.socket``): the policy's notices
    (lifecycle at INFO, trouble at WARNING), and -- when ``environ`` says
    ``AMQP_SANSIO_TRACE=frames`` -- every frame at DEBUG on
    ``<name>.frames``.  ``get_logger`` is :func:`logging.getLogger`."""

    def __init__(self, get_logger: Callable[[str], Logger], name: str, where: str,
                 protocol: str, environ: Mapping[str, str]) -> None:
        self.log = get_logger(name)
        self.where = where
        traced = "frames" in environ.get(TRACE_VARIABLE, "").split(",")
        self._frames = get_logger(f"{name}.frames") if traced else None
        self._trace = FrameTrace(protocol) if traced else None

    def connecting(self) -> None:
        self.log.log(DEBUG, "connecting to %s", self.where)

    def drain(self, policy: ClientConnection[Any, Any]) -> None:
        """Log what the policy had to say."""
        for n in policy.take_notices():
            self.log.log(n.level, "%s", n.message)

    def received(self, data: bytes) -> None:
        if self._trace is not None and self._frames is not None:
            for line in self._trace.incoming(data):
                self._frames.log(DEBUG, "%s <- %s", self.where, line)

    def sent(self, data: bytes) -> None:
        if self._trace is not None and self._frames is not None:
            for line in self._trace.outgoing(data):
                self._frames.log(DEBUG, "%s -> %s", self.where, line)
