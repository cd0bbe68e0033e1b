"""The AMQP 1.0 SASL layer [OASIS part 5 §5.3]: its own protocol header
(``AMQP 3 1 0 0``) and frames (type 0x01), before the AMQP header.

::

    C: SASL header              S: SASL header, sasl-mechanisms
    C: sasl-init(mechanism, initial-response, hostname)
       *(S: sasl-challenge  C: sasl-response)
    S: sasl-outcome(code, additional-data)
    then both start again with the AMQP header (code 0), or the server
    closes the socket.

The exchange is the core's shared negotiator
(:mod:`amqp_sansio.sasl_negotiator`, mechanisms ANONYMOUS, PLAIN, EXTERNAL,
SCRAM-SHA-256); this module only moves its bytes in 1.0's frames.  SCRAM's
server-final message travels as one more challenge answered by an empty
response (as for 0-10), and a client also accepts it as the outcome's
additional-data.

``SASL_TRANSITIONS`` (one table per role) is the layer's only state machine.
"""

from __future__ import annotations

__all__ = ["SaslState", "SASL_TRANSITIONS", "SaslLayer", "COVERAGE"]

import enum
from collections.abc import Callable
from typing import Any

from .. import sasl as mech
from ..role import Role
from ..sasl_negotiator import ClientNegotiator, ServerNegotiator, UnofferedMechanism
from ._errors import connection_violation, local_error
from .framing import TYPE_SASL, encode_frame
from .spec import (
    SASL_HEADER,
    SaslChallenge,
    SaslCode,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    SaslResponse,
)


class SaslState(enum.Enum):
    START = "START"
    HDR_SENT = "HDR_SENT"  # client: waiting for the server's header
    AWAIT_MECHS = "AWAIT_MECHS"
    MECHS_RCVD = "MECHS_RCVD"
    AWAIT_OUTCOME = "AWAIT_OUTCOME"  # client: init/response sent
    CHALLENGED = "CHALLENGED"
    HDR_RCVD = "HDR_RCVD"  # server: the client's header read
    AWAIT_INIT = "AWAIT_INIT"
    STEP = "STEP"  # server: deciding on init/response
    AWAIT_RESPONSE = "AWAIT_RESPONSE"
    DONE = "DONE"
    FAILED = "FAILED"


_S = SaslState
SASL_TRANSITIONS: dict[Role, dict[SaslState, dict[str, SaslState]]] = {
    Role.CLIENT: {
        _S.START: {"send:header": _S.HDR_SENT},
        _S.HDR_SENT: {"recv:header": _S.AWAIT_MECHS},
        _S.AWAIT_MECHS: {"recv:mechanisms": _S.MECHS_RCVD},
        _S.MECHS_RCVD: {"send:init": _S.AWAIT_OUTCOME, "send:abort": _S.FAILED},
        _S.AWAIT_OUTCOME: {"recv:challenge": _S.CHALLENGED, "recv:outcome-ok": _S.DONE,
                           "recv:outcome-fail": _S.FAILED},
        _S.CHALLENGED: {"send:response": _S.AWAIT_OUTCOME, "send:abort": _S.FAILED},
        _S.DONE: {},
        _S.FAILED: {},
    },
    Role.SERVER: {
        _S.START: {"recv:header": _S.HDR_RCVD},
        _S.HDR_RCVD: {"send:mechanisms": _S.AWAIT_INIT},
        _S.AWAIT_INIT: {"recv:init": _S.STEP},
        _S.STEP: {"send:challenge": _S.AWAIT_RESPONSE, "send:outcome-ok": _S.DONE,
                  "send:outcome-fail": _S.FAILED},
        _S.AWAIT_RESPONSE: {"recv:response": _S.STEP},
        _S.DONE: {},
        _S.FAILED: {},
    },
}

COVERAGE: set[tuple[str, str, str]] | None = None

_INPUT = {SaslMechanisms: "mechanisms", SaslInit: "init", SaslChallenge: "challenge",
          SaslResponse: "response"}


class SaslLayer:
    """One SASL exchange.  Client: ``negotiator`` a ClientNegotiator; server:
    a ServerNegotiator.  ``write`` takes the octets to send."""

    def __init__(self, role: Role, write: Callable[[bytes], None],
                 negotiator: ClientNegotiator | ServerNegotiator, *,
                 hostname: str | None = None) -> None:
        if (role is Role.CLIENT) != isinstance(negotiator, ClientNegotiator):
            raise local_error(f"a SASL {role.value} needs a "
                              f"{'Client' if role is Role.CLIENT else 'Server'}Negotiator")
        self.role = role
        self.state = SaslState.START
        self._write = write
        self._neg = negotiator
        self._hostname = hostname
        self.identity: str | None = None
        self.outcome: SaslOutcome | None = None
        self.offered: tuple[str, ...] = ()
        self.failure: str | None = None

    @property
    def mechanism(self) -> str | None:
        return self._neg.mechanism

    @property
    def hostname(self) -> str | None:
        return self._hostname

    @property
    def done(self) -> bool:
        return self.state is SaslState.DONE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def _go(self, inp: str) -> None:
        nxt = SASL_TRANSITIONS[self.role][self.state].get(inp)
        if nxt is None:
            if inp.startswith("recv:"):
                raise connection_violation(f"SASL: {inp[5:]} in state {self.state.name}",
                                           "amqp:connection:framing-error")
            raise local_error(f"SASL: cannot {inp[5:]} in state {self.state.name}")
        if COVERAGE is not None:
            COVERAGE.add((self.role.value, self.state.name, inp))
        self.state = nxt

    def _send(self, body: Any) -> None:
        self._write(encode_frame(body, 0, type=TYPE_SASL))

    def start(self) -> None:
        """Client: write the SASL header."""
        self._go("send:header")
        self._write(SASL_HEADER)

    def handle_header(self) -> None:
        """The peer's SASL header arrived (the caller checked it is one)."""
        self._go("recv:header")
        if isinstance(self._neg, ServerNegotiator):
            self.offered = self._neg.offered
            self._go("send:mechanisms")
            self._write(SASL_HEADER)
            self._send(SaslMechanisms(sasl_server_mechanisms=self.offered))

    def handle_frame(self, body: Any) -> None:
        """A SASL frame's performative.  Raises ConnectionViolation for a
        frame out of order, SaslError for SASL data our side cannot accept."""
        neg = self._neg
        if type(body) is SaslOutcome:
            self._go("recv:outcome-ok" if body.code is SaslCode.OK else "recv:outcome-fail")
            self.outcome = body
            if body.code is SaslCode.OK:
                assert isinstance(neg, ClientNegotiator)
                neg.succeeded(body.additional_data or b"")
            return
        self._go("recv:" + _INPUT[type(body)])
        if isinstance(neg, ClientNegotiator):
            try:
                if type(body) is SaslMechanisms:
                    self.offered = body.sasl_server_mechanisms
                    name, initial = neg.start(self.offered)
                    reply: Any = SaslInit(mechanism=name, initial_response=initial,
                                          hostname=self._hostname)
                    inp = "send:init"
                else:
                    reply = SaslResponse(response=neg.challenge(body.challenge))
                    inp = "send:response"
            except mech.SaslError:
                self._go("send:abort")
                raise
            self._go(inp)
            self._send(reply)
            return
        if type(body) is SaslInit:
            if body.hostname is not None:
                self._hostname = body.hostname
            self._step(lambda: neg.start(body.mechanism, body.initial_response or b""))
        else:  # SaslResponse
            self._step(lambda: neg.step(body.response))

    def _step(self, call: Callable[[], mech.ServerStep]) -> None:
        try:
            step = call()
        except mech.AuthenticationFailed as e:
            self._finish(None, e.reason, SaslCode.AUTH)
            return
        except UnofferedMechanism as e:
            self._finish(None, e.message, SaslCode.AUTH)
            return
        except mech.SaslError as e:
            self._finish(None, e.message, SaslCode.SYS_PERM)
            return
        if step.done:
            self._finish(step.identity, None, SaslCode.OK)
        else:
            self._go("send:challenge")
            assert step.challenge is not None
            self._send(SaslChallenge(challenge=step.challenge))

    def _finish(self, identity: str | None, why: str | None, code: SaslCode) -> None:
        self._go("send:outcome-ok" if code is SaslCode.OK else "send:outcome-fail")
        self.identity = identity
        self.failure = why
        self.outcome = SaslOutcome(code=code)
        self._send(self.outcome)
