"""The one place AMQP 1.0 errors are built.

A 1.0 error names a symbolic *condition* (``amqp:decode-error``) and the
endpoint whose ending carries it: ``connection`` -> ``close(error)``,
``session`` -> ``end(error)``, ``link`` -> ``detach(error)``.  The shared
:class:`~amqp_sansio.errors.RemoteProtocolError` carries an integer ``code``
for 0-10/0-9-1; 1.0 has none, so ``code`` is 0 and ``condition`` says it.
"""

from __future__ import annotations

__all__ = ["Scope1", "Violation", "decode_error", "remote_error", "local_error", "condition_of"]

from typing import Any, Literal

from ..errors import DecodeError, LocalProtocolError, RemoteProtocolError

Scope1 = Literal["connection", "session", "link"]

DECODE_ERROR = "amqp:decode-error"
FRAMING_ERROR = "amqp:connection:framing-error"


def _attach(e: RemoteProtocolError, condition: str, scope: Scope1,
            handle: int | None, info: dict[str, Any] | None) -> None:
    e.condition = condition
    e.scope = scope
    e.handle = handle  # type: ignore[attr-defined]
    e.info = info


def decode_error(message: str, offset: int | None = None, *,
                 condition: str = DECODE_ERROR, scope: Scope1 = "connection",
                 channel: int | None = None) -> DecodeError:
    """Octets that are not valid AMQP 1.0 (``offset``: where, if known)."""
    e = DecodeError(message, code=0, offset=offset, channel=channel)
    _attach(e, condition, scope, None, None)
    return e


def remote_error(message: str, condition: str, scope: Scope1 = "connection", *,
                 channel: int | None = None, handle: int | None = None,
                 info: dict[str, Any] | None = None) -> RemoteProtocolError:
    """The peer broke the protocol; ``scope`` says whose ending answers it."""
    e = RemoteProtocolError(message, code=0, channel=channel)
    _attach(e, condition, scope, handle, info)
    return e


def local_error(message: str) -> LocalProtocolError:
    return LocalProtocolError(message)


def condition_of(e: RemoteProtocolError) -> str:
    """The 1.0 condition of a remote error (``amqp:internal-error`` if none)."""
    c = getattr(e, "condition", None)
    return c if isinstance(c, str) else "amqp:internal-error"


class Violation(Exception):
    """Inside the core only: the peer broke the protocol at ``scope``; the
    endpoint of that scope ends with ``condition`` (caught where the scope
    is known, never escapes ``receive_data``)."""

    def __init__(self, message: str, condition: str, scope: Scope1) -> None:
        super().__init__(message)
        self.message = message
        self.condition = condition
        self.scope: Scope1 = scope
