"""What the Trio adapter raises.

Every error is an :class:`AMQPError`.  They wrap what the core reports (its
events and its :class:`~amqp_sansio.errors.RemoteProtocolError`); misuse of
the API still raises the core's :class:`~amqp_sansio.errors.LocalProtocolError`
(a bad URL included), unchanged.

::

    AMQPError
    +-- ConnectError              TCP/TLS connect failed (refused, DNS, TLS, timeout)
    |   +-- ConnectTimeout        connect or handshake took longer than connect_timeout
    +-- ConnectionClosedError     the peer closed the connection (code, text)
    |   +-- AuthenticationError   ... during the handshake, code 320 (bad credentials)
    |   +-- VirtualHostError      ... at connection.open, code 402 (unknown vhost)
    +-- ConnectionLostError       the transport ended without a close handshake
    |   +-- HeartbeatTimeoutError nothing arrived for twice the heartbeat interval
    +-- ProtocolViolationError    the peer broke the protocol (the core closed it)
    +-- SessionError              the session was detached (code), or could not attach
    +-- ExecutionError            execution.exception: the command failed, the
    |                             session is over (error_code, description, ...)
    +-- MessageRejectedError      publish(confirm=True, wait=True): the broker
                                  rejected the transfer (code 1: unroutable)
"""

from __future__ import annotations

__all__ = [
    "AMQPError",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionClosedError",
    "AuthenticationError",
    "VirtualHostError",
    "ConnectionLostError",
    "HeartbeatTimeoutError",
    "ProtocolViolationError",
    "SessionError",
    "ExecutionError",
    "MessageRejectedError",
]

from typing import Any


class AMQPError(Exception):
    """Base class of everything the adapter raises on purpose."""


class ConnectError(AMQPError, OSError):
    """Could not reach the broker (refused, unknown host, TLS failure)."""


class ConnectTimeout(ConnectError, TimeoutError):
    """The TCP/TLS connect or the AMQP handshake exceeded ``connect_timeout``."""


class ConnectionClosedError(AMQPError):
    """The connection is closed; ``code``/``text`` from ``connection.close``."""

    def __init__(self, code: int, text: str | None, *, by_peer: bool = True) -> None:
        super().__init__(f"connection closed ({code}): {text or ''}".rstrip(": "))
        self.code = code
        self.text = text
        self.by_peer = by_peer


class AuthenticationError(ConnectionClosedError):
    """The broker refused our credentials (closed with 320 during the handshake)."""


class VirtualHostError(ConnectionClosedError):
    """The broker does not know the virtual host (closed with 402 at open)."""


class ConnectionLostError(AMQPError):
    """The transport ended (EOF, reset, heartbeat) without a close handshake."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"connection lost: {reason}")
        self.reason = reason


class HeartbeatTimeoutError(ConnectionLostError):
    """The peer went silent for more than twice the heartbeat interval."""


class ProtocolViolationError(AMQPError):
    """The peer violated the protocol at connection scope (the core has queued
    ``connection.close(code)`` or dropped the socket)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(f"protocol violation ({code}): {message}")
        self.message = message
        self.code = code


class SessionError(AMQPError):
    """The session ended: detached by the peer (``code``: 0 normal, 1
    session-busy, 2 transport-busy, 3 not-attached, 4 unknown-ids) or lost."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class ExecutionError(AMQPError):
    """``execution.exception`` from the peer: the command ``command_id``
    failed with ``error_code`` (e.g. 404 not-found, 405 resource-locked,
    530 not-allowed).  The session is finished; open a new one."""

    def __init__(self, error_code: int, description: str | None, *,
                 command_id: int | None = None, class_code: int | None = None,
                 command_code: int | None = None, field_index: int | None = None,
                 error_info: dict[str, Any] | None = None) -> None:
        super().__init__(f"execution error {error_code}: {description or ''}".rstrip(": "))
        self.error_code = error_code
        self.description = description
        self.command_id = command_id
        self.class_code = class_code
        self.command_code = command_code
        self.field_index = field_index
        self.error_info = error_info


class MessageRejectedError(AMQPError):
    """The broker rejected a published transfer (``message.reject``): ``code``
    1 unroutable, 2 immediate, 0 unspecified.  The session goes on."""

    def __init__(self, code: int, text: str | None, command_id: int) -> None:
        super().__init__(f"broker rejected the message (code {code}: {text or ''})")
        self.code = code
        self.text = text
        self.command_id = command_id
