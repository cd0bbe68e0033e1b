"""Who broke the protocol.

Every error this library raises on purpose is a :class:`ProtocolError`, and
there are exactly two kinds:

* :class:`LocalProtocolError` -- *you* (the caller) asked for something the
  protocol forbids: sending a command before the session is attached,
  building a struct with a 300-octet ``str8``, replying to a ``start`` you
  never received.  The state of the connection is unchanged; fix the call.

* :class:`RemoteProtocolError` -- the *peer* broke the protocol.  It carries
  what the core sends (or has already queued) in reply: an integer ``code``
  (0-10, 0-9-1) and/or a symbolic ``condition`` with ``info`` (1.0:
  ``amqp:not-found``), and the ``scope`` of that reply:

  ===========  ===============================================================
  scope        reply the core queues
  ===========  ===============================================================
  connection   0-10/0-9-1 ``connection.close(code)``, 1.0 ``close(error)`` --
               or, before the handshake got far enough for a close, nothing
               (the socket is to be dropped)
  session      0-10 ``session.detached(name, code)``, 1.0 ``end(error)``
  execution    0-10 ``execution.exception(error-code=code, command-id, ...)``
  channel      0-9-1 ``channel.close(code)``
  link         1.0 ``detach(error)``
  ===========  ===============================================================

The wire decoder raises :class:`DecodeError`, a :class:`RemoteProtocolError`
that also carries the stream ``offset`` at which the problem was found.

Strategy (as in h11): code below the public API raises these errors from one
place each; ``Connection.receive_data`` is the only public entry point that
raises :class:`RemoteProtocolError`.  Inside a connection, a handler that
finds a connection-scope violation raises :class:`ConnectionViolation`;
``receive_data`` queues the close it asks for and re-raises it, once, as a
:class:`RemoteProtocolError` whose ``events`` hold what the same input
produced before the violation (nothing accepted is lost).  Any other
exception escaping the core is a bug.
"""

from __future__ import annotations

__all__ = [
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "DecodeError",
    "ConnectionViolation",
    "Scope",
]

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .events import Event

Scope = Literal["connection", "session", "execution", "channel", "link"]



class ProtocolError(Exception):
    """Base class: the protocol was violated.  Not raised directly."""

    def __init__(self, message: str) -> None:
        if type(self) is ProtocolError:
            raise TypeError("raise LocalProtocolError or RemoteProtocolError")
        super().__init__(message)
        self.message = message


class LocalProtocolError(ProtocolError, ValueError):
    """The caller asked for something the protocol forbids.  Nothing changed."""


class RemoteProtocolError(ProtocolError):
    """The peer violated the protocol.

    ``code`` is the AMQP reply/error code sent back (0-10, 0-9-1; None when
    the protocol has only conditions), ``condition`` the symbolic error
    condition (1.0, e.g. ``"amqp:decode-error"``; None in 0-10/0-9-1) with
    its ``info`` map; ``message`` is the description.  ``scope`` is the layer
    whose reply carries it (see the module docstring).  ``channel`` is the
    channel the offending input arrived on, when known.  For execution-scope
    errors ``class_code``, ``command_code`` and ``field_index`` identify the
    offending command and argument when known (they fill the corresponding
    fields of ``execution.exception``; 0-9-1 fills close's class-id and
    method-id from the first two).  ``events``: raised from
    ``receive_data``, what the same input produced before the violation.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        condition: str | None = None,
        info: Mapping[str, Any] | None = None,
        scope: Scope = "connection",
        channel: int | None = None,
        class_code: int | None = None,
        command_code: int | None = None,
        field_index: int | None = None,
        events: Sequence[Event] = (),
    ) -> None:
        if code is None and condition is None:
            raise TypeError("a RemoteProtocolError needs a code or a condition")
        super().__init__(message)
        self.code = code
        self.condition = condition
        self.info = info
        self.scope: Scope = scope
        self.channel = channel
        self.class_code = class_code
        self.command_code = command_code
        self.field_index = field_index
        self.events: list[Event] = list(events)

    @property
    def description(self) -> str:
        """The error's text (1.0 calls it the description)."""
        return self.message

    def __repr__(self) -> str:
        what = f"code={self.code}" if self.condition is None else (
            f"condition={self.condition!r}" if self.code is None
            else f"code={self.code}, condition={self.condition!r}")
        return (f"{type(self).__name__}({self.message!r}, {what}, "
                f"scope={self.scope!r}, channel={self.channel})")


class DecodeError(RemoteProtocolError):
    """Bytes that are not valid AMQP.

    ``offset`` is the position in the decoder's input stream (counting from
    the first octet ever fed to it) of the frame -- or, outside framing, of
    the value -- where the problem was found.  Each protocol's decoder
    gives its own code (0-10, 0-9-1: framing-error 501 for a broken stream)
    or condition (1.0: ``amqp:decode-error``).
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        condition: str | None = None,
        info: Mapping[str, Any] | None = None,
        scope: Scope = "connection",
        offset: int | None = None,
        channel: int | None = None,
        class_code: int | None = None,
        command_code: int | None = None,
        field_index: int | None = None,
    ) -> None:
        super().__init__(
            message,
            code=code,
            condition=condition,
            info=info,
            scope=scope,
            channel=channel,
            class_code=class_code,
            command_code=command_code,
            field_index=field_index,
        )
        self.offset = offset

    def __str__(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        what = f"code {self.code}" if self.code is not None else str(self.condition)
        return f"{self.message}{where} ({what}, {self.scope})"


class ConnectionViolation(Exception):
    """Raised by a connection's handlers: the peer broke the protocol at
    connection scope.  ``receive_data`` catches it, queues the close it asks
    for (``close``: False means drop the socket without a close -- the spec's
    rule during parts of the handshake) and raises :meth:`remote` instead.

    ``code``/``condition``/``info`` go into the close; ``channel``,
    ``class_code``/``command_code`` say what caused it; ``broken``: the
    input stream can no longer be parsed (nothing more is read); ``rule``:
    the name of the check that failed, where the layer names it.
    """

    def __init__(self, message: str, code: int | None = None, *,
                 condition: str | None = None, info: Mapping[str, Any] | None = None,
                 close: bool = True, channel: int | None = None,
                 class_code: int | None = None, command_code: int | None = None,
                 broken: bool = False, rule: str | None = None) -> None:
        if code is None and condition is None:
            raise TypeError("a ConnectionViolation needs a code or a condition")
        super().__init__(message)
        self.message = message
        self.code = code
        self.condition = condition
        self.info = info
        self.close = close
        self.channel = channel
        self.class_code = class_code
        self.command_code = command_code
        self.broken = broken
        self.rule = rule

    @classmethod
    def from_decode_error(cls, e: DecodeError, *, broken: bool = False, close: bool = True
                          ) -> ConnectionViolation:
        """The connection-scope violation a decoder's error amounts to."""
        return cls(e.message, e.code, condition=e.condition, info=e.info, channel=e.channel,
                   class_code=e.class_code, command_code=e.command_code, broken=broken,
                   close=close)

    def remote(self, events: Sequence[Event]) -> RemoteProtocolError:
        """What ``receive_data`` raises for it."""
        return RemoteProtocolError(self.message, code=self.code, condition=self.condition,
                                   info=self.info, scope="connection", channel=self.channel,
                                   class_code=self.class_code, command_code=self.command_code,
                                   events=events)
