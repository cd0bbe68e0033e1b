"""What the 1.0 fuzzer knows about the spec's error conditions, and the
documented deviations of known 1.0 peers.  Pure.

1.0 refuses with an *error condition* (a symbol) on ``close``, ``end`` or
``detach`` instead of a numeric code; the oracle judges a 1.0 rejection by
its condition against :attr:`.case.Fault.conditions` and the sets here.
The conditions themselves come from the generated spec enums.
"""

from __future__ import annotations

__all__ = ["DECODE", "FRAMING", "STATE", "SESSION", "GENERIC", "LINK_REFUSAL", "SASL_SYS",
           "allowed_conditions", "DEV"]

from amqp_sansio.v1_0 import spec

_A, _C, _S, _L = spec.AmqpCondition, spec.ConnectionCondition, spec.SessionCondition, \
    spec.LinkCondition

#: "could not decode": a performative or field the peer cannot read.
DECODE = frozenset({_A.DECODE_ERROR.value, _A.INVALID_FIELD.value, _A.NOT_ALLOWED.value,
                    _C.FRAMING_ERROR.value})
#: the frame layer itself broke (size, data offset, type).
FRAMING = frozenset({_C.FRAMING_ERROR.value, _A.DECODE_ERROR.value, _A.NOT_ALLOWED.value})
#: a performative in a state that does not allow it (not-found: a channel
#: or handle that names nothing, e.g. once the fault ended the session).
STATE = frozenset({_A.NOT_ALLOWED.value, _A.ILLEGAL_STATE.value, _A.INVALID_FIELD.value,
                   _A.PRECONDITION_FAILED.value, _A.NOT_FOUND.value, _C.FRAMING_ERROR.value})
#: the session rules (handles, windows, errant links).
SESSION = frozenset(c.value for c in _S) | STATE
#: any close / end / detach may carry these (an operator, a limit).
GENERIC = frozenset({_C.CONNECTION_FORCED.value, _A.RESOURCE_LIMIT_EXCEEDED.value})
#: a broker may refuse or end any link with these (not found, not allowed,
#: not implemented ...): 1.0 link refusal is a detach with an error.
LINK_REFUSAL = frozenset({_A.NOT_FOUND.value, _A.UNAUTHORIZED_ACCESS.value,
                          _A.NOT_IMPLEMENTED.value, _A.NOT_ALLOWED.value,
                          _A.PRECONDITION_FAILED.value, _A.RESOURCE_LOCKED.value,
                          _A.RESOURCE_DELETED.value, _A.INVALID_FIELD.value,
                          _L.DETACH_FORCED.value, _L.STOLEN.value, _L.REDIRECT.value,
                          _L.MESSAGE_SIZE_EXCEEDED.value})
#: sasl-outcome codes a server may always answer with (its own trouble).
SASL_SYS = frozenset({2, 3, 4})


def allowed_conditions(kind: str) -> frozenset[str]:
    """Conditions a conformant peer may use on ``kind`` (close / end /
    detach) whatever the case did."""
    if kind == "detach":
        return GENERIC | LINK_REFUSAL
    return GENERIC


class DEV:
    """Documented deviations of known 1.0 peers, ``(reaction, note)`` pairs
    for :attr:`.case.Fault.deviations` (see the fuzzer's README)."""
