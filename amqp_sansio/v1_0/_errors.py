"""The one place AMQP 1.0 errors are built.

A 1.0 error names a symbolic *condition* (``amqp:decode-error``) and the
endpoint whose ending carries it: ``connection`` -> ``close(error)``,
``session`` -> ``end(error)``, ``link`` -> ``detach(error)``.  The shared
:class:`~amqp_sansio.errors.RemoteProtocolError` carries an integer ``code``
for 0-10/0-9-1; 1.0 has none: ``code`` is None and ``condition`` says it.
"""

from __future__ import annotations

__all__ = ["SessionViolation", "decode_error", "remote_error", "local_error",
           "connection_violation", "illegal"]

from collections.abc import Callable, Hashable
from typing import Any

from ..errors import ConnectionViolation, DecodeError, LocalProtocolError, RemoteProtocolError
from ..errors import Scope as Scope

# (literals: the generated spec imports this module; spec.AmqpCondition and
# spec.ConnectionCondition have them too, and a test says they agree)
DECODE_ERROR = "amqp:decode-error"
FRAMING_ERROR = "amqp:connection:framing-error"


def decode_error(message: str, offset: int | None = None, *,
                 condition: str = DECODE_ERROR, scope: Scope = "connection",
                 channel: int | None = None) -> DecodeError:
    """Octets that are not valid AMQP 1.0 (``offset``: where, if known)."""
    return DecodeError(message, code=None, condition=condition, scope=scope, offset=offset,
                       channel=channel)


def remote_error(message: str, condition: str, scope: Scope = "connection", *,
                 channel: int | None = None,
                 info: dict[str, Any] | None = None) -> RemoteProtocolError:
    """The peer broke the protocol; ``scope`` says whose ending answers it."""
    return RemoteProtocolError(message, condition=condition, info=info, scope=scope,
                               channel=channel)


def local_error(message: str) -> LocalProtocolError:
    return LocalProtocolError(message)


def connection_violation(message: str, condition: str, rule: str | None = None
                         ) -> ConnectionViolation:
    """Raised inside the core: the peer broke the protocol at connection
    scope; ``receive_data`` answers with close(error) and raises.  ``rule``
    names the check (the fuzz monitor's name for it)."""
    return ConnectionViolation(message, None, condition=condition, rule=rule)


class SessionViolation(Exception):
    """Inside the core only: the peer broke the protocol at session scope;
    the session ends with ``condition`` (caught by the session, never
    escapes ``receive_data``).  Link-scope errors are answered by the link
    itself (``Link.violation``).  ``rule`` names the check, where named."""

    def __init__(self, message: str, condition: str, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.condition = condition
        self.rule = rule


def illegal(who: str, inp: Hashable, state: str,
            violation: Callable[[str], Exception]) -> Exception:
    """What an input a layer's table lacks in ``state`` means (a machine's
    ``illegal``): a call of ours written ``name()`` is the caller's misuse
    (LocalProtocolError, nothing changed), a frame the peer's ``violation``."""
    name = str(inp)
    if name.endswith("()"):
        return local_error(f"{who}cannot {name[:-2]} in state {state}")
    return violation(f"{who}{name} in state {state}")
