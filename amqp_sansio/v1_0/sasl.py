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

``SASL_MACHINES`` (one table per role, on the one engine,
:mod:`amqp_sansio.engine`) is the layer's only state machine: a peer's frame
is its input by spec name, and its handler writes our answer (into the
``out`` octets it is handed) and names the state it led to.
"""

from __future__ import annotations

__all__ = ["SaslState", "SASL_MACHINES", "SaslLayer"]

import enum
from collections.abc import Callable, Hashable
from typing import ClassVar

from .. import sasl as mech
from ..engine import Entry, Machine, process_input
from ..role import Role
from ..sasl_negotiator import ClientNegotiator, ServerNegotiator, UnofferedMechanism
from ._errors import connection_violation, illegal, local_error
from .framing import TYPE_SASL, encode_frame
from .spec import (
    SASL_HEADER,
    ConnectionCondition,
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
    AWAIT_OUTCOME = "AWAIT_OUTCOME"  # client: init/response sent
    AWAIT_INIT = "AWAIT_INIT"  # server: header and mechanisms sent
    AWAIT_RESPONSE = "AWAIT_RESPONSE"  # server: a challenge sent
    DONE = "DONE"
    FAILED = "FAILED"


_S = SaslState
#: A SASL frame's performative.
SaslFrame = SaslMechanisms | SaslInit | SaslChallenge | SaslResponse | SaslOutcome
_INPUT = {SaslMechanisms: "sasl-mechanisms", SaslInit: "sasl-init",
          SaslChallenge: "sasl-challenge", SaslResponse: "sasl-response",
          SaslOutcome: "sasl-outcome"}


def _illegal(sl: SaslLayer, inp: Hashable) -> Exception:
    return illegal("SASL: ", inp, sl.state.name, lambda m: connection_violation(
        m, ConnectionCondition.FRAMING_ERROR))


_ENDS = (_S.DONE, _S.FAILED)


class SaslLayer:
    """One SASL exchange.  Client: ``negotiator`` a ClientNegotiator; server:
    a ServerNegotiator.  Every step writes what it answers into the ``out``
    octets it is handed (the connection's output)."""

    def __init__(self, role: Role, negotiator: ClientNegotiator | ServerNegotiator, *,
                 hostname: str | None = None, observer: bool = False) -> None:
        if (role is Role.CLIENT) != isinstance(negotiator, ClientNegotiator):
            raise local_error(f"a SASL {role.value} needs a "
                              f"{'Client' if role is Role.CLIENT else 'Server'}Negotiator")
        self.role = role
        # observer: the watched client chose and answered (its octets book
        # nothing here); the peer's frames are judged by their order alone
        self.machine = SaslLayer.OBSERVER_MACHINE if observer else SASL_MACHINES[role]
        self.state = SaslState.START
        self.negotiator = negotiator
        self.hostname = hostname
        self.identity: str | None = None
        self.outcome: SaslOutcome | None = None
        self.offered: tuple[str, ...] = ()
        self.failure: str | None = None
        #: our side's own failure (no common mechanism, a server-final that
        #: does not verify), raised once the state says FAILED
        self.error: mech.SaslError | None = None

    @property
    def mechanism(self) -> str | None:
        return self.negotiator.mechanism

    @property
    def done(self) -> bool:
        return self.state is SaslState.DONE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def _input(self, inp: str, arg: object, out: bytearray) -> None:
        process_input(self, self.machine, inp, arg, out)
        if self.error is not None:
            err, self.error = self.error, None
            raise err

    def start(self, out: bytearray) -> None:
        """Client: write the SASL header."""
        self._input("header()", None, out)

    def handle_header(self, out: bytearray) -> None:
        """The peer's SASL header arrived (the caller checked it is one)."""
        self._input("header", None, out)

    def handle_frame(self, body: SaslFrame, out: bytearray) -> None:
        """A SASL frame's performative.  Raises ConnectionViolation for a
        frame out of order, SaslError for SASL data our side cannot accept."""
        self._input(_INPUT[type(body)], body, out)

    # -- what the server's steps answer with ---------------------------------------
    def _step(self, call: Callable[[], mech.ServerStep], out: bytearray) -> SaslState:
        try:
            step = call()
        except mech.AuthenticationFailed as e:
            return self._finish(None, e.reason, SaslCode.AUTH, out)
        except UnofferedMechanism as e:
            return self._finish(None, e.message, SaslCode.AUTH, out)
        except mech.SaslError as e:
            return self._finish(None, e.message, SaslCode.SYS_PERM, out)
        if step.done:
            return self._finish(step.identity, None, SaslCode.OK, out)
        assert step.challenge is not None
        out += encode_frame(SaslChallenge(challenge=step.challenge), 0, type=TYPE_SASL)
        return _S.AWAIT_RESPONSE

    def _finish(self, identity: str | None, why: str | None, code: SaslCode,
                out: bytearray) -> SaslState:
        self.identity = identity
        self.failure = why
        self.outcome = SaslOutcome(code=code)
        out += encode_frame(self.outcome, 0, type=TYPE_SASL)
        return _S.DONE if code is SaslCode.OK else _S.FAILED

    # -- handlers: (the layer, the peer's performative, out) -> the state it led to

    def _write_header(self, _: None, out: bytearray) -> None:
        out += SASL_HEADER


    def _offer(self, _: None, out: bytearray) -> None:
        assert isinstance(self.negotiator, ServerNegotiator)
        self.offered = self.negotiator.offered
        out += SASL_HEADER
        out += encode_frame(SaslMechanisms(sasl_server_mechanisms=self.offered), 0, type=TYPE_SASL)


    def _choose(self, body: SaslMechanisms, out: bytearray) -> SaslState:
        assert isinstance(self.negotiator, ClientNegotiator)
        self.offered = body.sasl_server_mechanisms
        try:
            name, initial = self.negotiator.start(self.offered)
        except mech.SaslError as e:
            self.error = e
            return _S.FAILED
        out += encode_frame(SaslInit(mechanism=name, initial_response=initial,
                                     hostname=self.hostname), 0, type=TYPE_SASL)
        return _S.AWAIT_OUTCOME


    def _respond(self, body: SaslChallenge, out: bytearray) -> SaslState:
        assert isinstance(self.negotiator, ClientNegotiator)
        try:
            response = self.negotiator.challenge(body.challenge)
        except mech.SaslError as e:
            self.error = e
            return _S.FAILED
        out += encode_frame(SaslResponse(response=response), 0, type=TYPE_SASL)
        return _S.AWAIT_OUTCOME


    def _outcome(self, body: SaslOutcome, out: bytearray) -> SaslState:
        assert isinstance(self.negotiator, ClientNegotiator)
        self.outcome = body
        if body.code is not SaslCode.OK:
            return _S.FAILED
        try:
            self.negotiator.succeeded(body.additional_data or b"")
        except mech.SaslError as e:  # (a server-final that does not verify)
            self.error = e
            return _S.FAILED
        return _S.DONE


    def _offered(self, body: SaslMechanisms, out: bytearray) -> None:
        self.offered = body.sasl_server_mechanisms

    def _outcome_observed(self, body: SaslOutcome, out: bytearray) -> SaslState:
        self.outcome = body
        return _S.DONE if body.code is SaslCode.OK else _S.FAILED

    def _init(self, body: SaslInit, out: bytearray) -> SaslState:
        neg = self.negotiator
        assert isinstance(neg, ServerNegotiator)
        if body.hostname is not None:
            self.hostname = body.hostname
        return self._step(lambda: neg.start(body.mechanism, body.initial_response or b""), out)


    def _response(self, body: SaslResponse, out: bytearray) -> SaslState:
        neg = self.negotiator
        assert isinstance(neg, ServerNegotiator)
        return self._step(lambda: neg.step(body.response), out)

    CLIENT_MACHINE: ClassVar[Machine[SaslState]] = Machine("1.0 SASL client", {
        _S.START: {"header()": Entry((_S.HDR_SENT,), _write_header)},
        _S.HDR_SENT: {"header": Entry((_S.AWAIT_MECHS,))},
        _S.AWAIT_MECHS: {"sasl-mechanisms": Entry((_S.AWAIT_OUTCOME, _S.FAILED), _choose)},
        _S.AWAIT_OUTCOME: {"sasl-challenge": Entry((_S.AWAIT_OUTCOME, _S.FAILED), _respond),
                           "sasl-outcome": Entry(_ENDS, _outcome)},
        _S.DONE: {},
        _S.FAILED: {},
    }, terminal=_ENDS, illegal=_illegal)
    #: The observer's: the watched client chose and answered; the peer's
    #: frames are judged by their order alone.
    OBSERVER_MACHINE: ClassVar[Machine[SaslState]] = CLIENT_MACHINE.with_entries(
        "1.0 SASL observer", {
            _S.AWAIT_MECHS: {"sasl-mechanisms": Entry((_S.AWAIT_OUTCOME,), _offered)},
            _S.AWAIT_OUTCOME: {"sasl-challenge": Entry((_S.AWAIT_OUTCOME,)),
                               "sasl-outcome": Entry(_ENDS, _outcome_observed)}})
    SERVER_MACHINE: ClassVar[Machine[SaslState]] = Machine("1.0 SASL server", {
        _S.START: {"header": Entry((_S.AWAIT_INIT,), _offer)},
        _S.AWAIT_INIT: {"sasl-init": Entry((_S.AWAIT_RESPONSE, *_ENDS), _init)},
        _S.AWAIT_RESPONSE: {"sasl-response": Entry((_S.AWAIT_RESPONSE, *_ENDS), _response)},
        _S.DONE: {},
        _S.FAILED: {},
    }, terminal=_ENDS, illegal=_illegal)


SASL_MACHINES: dict[Role, Machine[SaslState]] = {
    Role.CLIENT: SaslLayer.CLIENT_MACHINE, Role.SERVER: SaslLayer.SERVER_MACHINE}
