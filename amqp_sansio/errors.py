"""Who broke the protocol.

Every error this library raises on purpose is a :class:`ProtocolError`, and
there are exactly two kinds:

* :class:`LocalProtocolError` -- *you* (the caller) asked for something the
  protocol forbids: sending a command before the session is attached,
  building a struct with a 300-octet ``str8``, replying to a ``start`` you
  never received.  The state of the connection is unchanged; fix the call.

* :class:`RemoteProtocolError` -- the *peer* broke the protocol.  It carries
  the AMQP error code that the core sends (or has already queued) in reply,
  and ``scope`` says which reply that is:

  ===========  ===============================================================
  scope        reply the core queues
  ===========  ===============================================================
  connection   ``connection.close(code)`` -- or, before the handshake got far
               enough for a close, nothing (the socket is to be dropped)
  session      ``session.detached(name, code)`` on the offending channel
  execution    ``execution.exception(error-code=code, command-id, ...)``
  ===========  ===============================================================

The wire decoder raises :class:`DecodeError`, a :class:`RemoteProtocolError`
that also carries the stream ``offset`` at which the problem was found.

Strategy (as in h11): code below the public API raises these errors from one
place each; ``Connection.receive_data`` is the only public entry point that
raises :class:`RemoteProtocolError`.  Any other exception escaping the core is
a bug.
"""

from __future__ import annotations

__all__ = [
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "DecodeError",
    "Scope",
]

from typing import Literal

Scope = Literal["connection", "session", "execution"]

# AMQP 0-10 codes used by default (connection.close-code / execution.error-code).
FRAMING_ERROR = 501
COMMAND_INVALID = 503
ILLEGAL_ARGUMENT = 531
INVALID_ARGUMENT = 542


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

    ``code`` is the AMQP reply/error code sent back; ``scope`` is the layer
    whose reply carries it (see the module docstring).  ``channel`` is the
    channel the offending input arrived on, when known.  For execution-scope
    errors ``class_code``, ``command_code`` and ``field_index`` identify the
    offending command and argument when known (they fill the corresponding
    fields of ``execution.exception``).
    """

    def __init__(
        self,
        message: str,
        *,
        code: int,
        scope: Scope = "connection",
        channel: int | None = None,
        class_code: int | None = None,
        command_code: int | None = None,
        field_index: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.scope: Scope = scope
        self.channel = channel
        self.class_code = class_code
        self.command_code = command_code
        self.field_index = field_index

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, code={self.code}, "
            f"scope={self.scope!r}, channel={self.channel})"
        )


class DecodeError(RemoteProtocolError):
    """Bytes that are not valid AMQP.

    ``offset`` is the position in the decoder's input stream (counting from
    the first octet ever fed to it) of the frame -- or, outside framing, of
    the value -- where the problem was found.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = FRAMING_ERROR,
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
            scope=scope,
            channel=channel,
            class_code=class_code,
            command_code=command_code,
            field_index=field_index,
        )
        self.offset = offset

    def __str__(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{self.message}{where} (code {self.code}, {self.scope})"
