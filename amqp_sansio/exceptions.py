"""What the adapters raise: one vocabulary for every client of this library.

The Trio and blocking-socket adapters (and the Spark source, through the
socket adapter) raise these same classes, so code that catches them works
with either.  They wrap what the core reports -- its events and its
:class:`~amqp_sansio.errors.RemoteProtocolError` -- in terms of what the
caller was doing.  Misuse of an API (settling a delivery twice, a bad
``prefetch`` ...) raises the core's
:class:`~amqp_sansio.errors.LocalProtocolError` (a ``ValueError``) instead.
::

    AMQPError
    +-- InvalidURLError           the URL does not parse (also LocalProtocolError/ValueError)
    +-- ConnectError              TCP/TLS connect failed (refused, DNS, TLS) (also OSError)
    |   +-- ConnectTimeout        connect or handshake took too long (also AMQPTimeout)
    +-- ConnectionClosedError     the connection was closed (code, text, by_peer)
    |   +-- AuthenticationError   ... during the handshake, code 320 (bad credentials,
    |   |                         or no SASL mechanism in common)
    |   +-- VirtualHostError      ... at connection.open, code 402 (unknown vhost)
    +-- ConnectionLostError       the transport ended without a close handshake (reason)
    |   +-- HeartbeatTimeoutError nothing arrived for twice the heartbeat interval
    +-- ProtocolViolationError    the peer broke the protocol (the core closed it)
    |   +-- ProtocolMismatchError the peer speaks another protocol (also ConnectError)
    +-- SessionError              the session was detached (code) or closed
    +-- ExecutionError            execution.exception: the command failed, the
    |                             session is over (error_code, description, ...)
    +-- MessageRejectedError      publish(confirm=True, wait=True): the broker
    |                             rejected the transfer (code 1: unroutable)
    +-- AMQPTimeout               a blocking call got no answer in time (also
                                  TimeoutError); the connection stays usable
"""

from __future__ import annotations

__all__ = [
    "AMQPError",
    "InvalidURLError",
    "ConnectError",
    "ConnectTimeout",
    "RedirectedError",
    "ConnectionClosedError",
    "AuthenticationError",
    "VirtualHostError",
    "ConnectionLostError",
    "HeartbeatTimeoutError",
    "ConnectionBlockedTimeoutError",
    "ProtocolViolationError",
    "ProtocolMismatchError",
    "SessionError",
    "ExecutionError",
    "ChannelClosedByBrokerError",
    "LinkClosedByBrokerError",
    "MessageRejectedError",
    "AMQPTimeout",
]

from typing import Any

from amqp_sansio.errors import LocalProtocolError


class AMQPError(Exception):
    """Base class of every error this adapter raises on purpose."""


class InvalidURLError(AMQPError, LocalProtocolError):
    """The AMQP URL is malformed (the message says what; never the password)."""


class AMQPTimeout(AMQPError, TimeoutError):
    """A blocking call did not get its answer in time.  The connection and
    session stay usable; a late answer is discarded."""


class ConnectError(AMQPError, OSError):
    """Could not reach the broker (refused, unknown host, TLS failure), or it
    hung up during the handshake without saying why."""


class RedirectedError(ConnectError):
    """The broker sent ``connection.redirect`` (0-10, 0-9): it serves this
    connection at ``host`` (``host[:port]``), else at one of
    ``known_hosts``.  ``connect`` follows redirects itself (a few hops at
    most: :data:`amqp_sansio.client.MAX_REDIRECTS`); this is what it raises
    past them, or what a core driven by hand reports."""

    def __init__(self, message: str, host: str = "", known_hosts: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.host = host
        self.known_hosts = known_hosts


class ConnectTimeout(ConnectError, AMQPTimeout):
    """The TCP/TLS connect or the AMQP handshake exceeded the connect timeout."""


class ConnectionClosedError(AMQPError):
    """The connection is closed; ``code``/``text`` from ``connection.close``
    (``by_peer``: the broker closed it)."""

    def __init__(self, message: str, code: int | None = None, text: str | None = None,
                 *, by_peer: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.text = text
        self.by_peer = by_peer


class AuthenticationError(ConnectionClosedError):
    """The broker refused the credentials (closed with 320 during the
    handshake), or the client and broker share no SASL mechanism."""


class VirtualHostError(ConnectionClosedError):
    """The broker does not serve the virtual host (closed with 402 at open)."""


class ConnectionLostError(AMQPError):
    """The transport ended (EOF, reset, I/O error) without a close handshake."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HeartbeatTimeoutError(ConnectionLostError):
    """Nothing arrived from the broker for twice the heartbeat interval."""


class ConnectionBlockedTimeoutError(ConnectionLostError):
    """AMQP 0-9-1: the broker kept the connection blocked
    (``connection.blocked``) longer than the URL's
    ``blocked_connection_timeout``; the client gave it up (pika's
    ``ConnectionBlockedTimeout``)."""


class ProtocolViolationError(AMQPError):
    """The broker violated the protocol at connection scope; the core has
    queued ``connection.close(code)`` (1.0: ``close`` with ``condition``)
    and the connection is over."""

    def __init__(self, message: str, code: int | None, condition: str | None = None) -> None:
        what = condition if condition is not None else code
        super().__init__(f"protocol violation{'' if what is None else f' ({what})'}: "
                         f"{message}")
        self.message = message
        self.code = code
        self.condition = condition


class ProtocolMismatchError(ConnectError, ProtocolViolationError):
    """The peer answered with another protocol header (another AMQP version,
    or not AMQP at all): no connection in this protocol is possible."""

    def __init__(self, message: str) -> None:
        ProtocolViolationError.__init__(self, message, 0)
        self.args = (message,)  # no "protocol violation (0)" prefix: nothing was violated yet


class SessionError(AMQPError):
    """The session is over.  ``code`` is the session.detach-code (0 normal,
    1 session-busy, 2 transport-busy, 3 not-attached, 4 unknown-ids) when
    it was detached, None when it was closed here."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class ExecutionError(AMQPError):
    """``execution.exception`` from the broker: command ``command_id`` failed
    with ``error_code`` (404 not-found, 405 resource-locked, 406
    precondition-failed, 530 not-allowed ...).  The session is finished
    (AMQP 0-10 semantics): every later call on it raises this again; open a
    new session."""

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

    @property
    def code(self) -> int:
        """Alias of ``error_code``."""
        return self.error_code


class ChannelClosedByBrokerError(ExecutionError):
    """AMQP 0-9-1: the broker closed the channel (``channel.close`` with
    ``code``: 404 not-found, 405 resource-locked, 406 precondition-failed,
    ...): an :class:`ExecutionError` in 0-9-1's words.  Open a new channel."""

    def __init__(self, channel: int, error_code: int, text: str | None, *,
                 class_code: int | None = None, command_code: int | None = None) -> None:
        super().__init__(error_code, text, class_code=class_code, command_code=command_code)
        self.args = (f"channel {channel} closed by the broker: {error_code} {text or ''}"
                     .rstrip(),)
        self.channel = channel


class LinkClosedByBrokerError(ExecutionError):
    """AMQP 1.0: the broker refused a link or detached it with an error
    (``condition``: amqp:not-found, amqp:unauthorized-access, ...): an
    :class:`ExecutionError` in 1.0's words, whose ``error_code`` is the 0-10
    code for the same thing (404, 403, ...).  The session goes on."""

    def __init__(self, link: str, error_code: int, condition: str, text: str | None) -> None:
        super().__init__(error_code, f"link {link!r}: {condition}{': ' + text if text else ''}",
                         error_info={"condition": condition, "description": text})
        self.args = (f"link {link!r} closed by the broker: {condition}"
                     f"{': ' + text if text else ''}",)
        self.link = link
        self.condition = condition


class MessageRejectedError(AMQPError):
    """The broker rejected a published transfer (``message.reject``): ``code``
    1 unroutable, 2 immediate, 0 unspecified.  The session goes on."""

    def __init__(self, code: int, text: str | None, command_id: int) -> None:
        super().__init__(f"broker rejected the message (code {code}: {text or ''})")
        self.code = code
        self.text = text
        self.command_id = command_id
