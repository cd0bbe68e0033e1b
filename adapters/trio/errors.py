"""The adapter's exceptions: the shared vocabulary of
:mod:`amqp_sansio.exceptions` (the same classes in every adapter)."""

from amqp_sansio.exceptions import (
    AMQPError,
    AMQPTimeout,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    ExecutionError,
    HeartbeatTimeoutError,
    InvalidURLError,
    MessageRejectedError,
    ProtocolViolationError,
    SessionError,
    VirtualHostError,
)

__all__ = [
    "AMQPError",
    "AMQPTimeout",
    "AuthenticationError",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionLostError",
    "ConnectTimeout",
    "ExecutionError",
    "HeartbeatTimeoutError",
    "InvalidURLError",
    "MessageRejectedError",
    "ProtocolViolationError",
    "SessionError",
    "VirtualHostError",
]
