"""One SASL negotiation, either role, whatever protocol carries it.

The mechanisms themselves are in :mod:`amqp_sansio.sasl`; this is the
conversation around them, which every AMQP version has in the same shape:

=========================  ========================  ==================================
step                       0-10 / 0-9-1              1.0 (its own SASL layer)
=========================  ========================  ==================================
server offers mechanisms   ``connection.start``      ``sasl-mechanisms``
client picks, responds     ``start-ok``              ``sasl-init``
challenge / response       ``secure``/``secure-ok``  ``sasl-challenge``/``-response``
outcome                    ``tune`` (success)        ``sasl-outcome``
=========================  ========================  ==================================

:class:`ClientNegotiator` and :class:`ServerNegotiator` hold one exchange's
state and say what to send next; the connection (0-10, 0-9-1) or the SASL
layer (1.0) puts that into its own frames and decides which reply code or
condition a failure gets.  Failures raise :class:`~amqp_sansio.sasl.SaslError`
subclasses: :class:`NoCommonMechanism`, :class:`UnofferedMechanism`, and the
mechanisms' own (:class:`~amqp_sansio.sasl.AuthenticationFailed` ...).
"""

from __future__ import annotations

__all__ = [
    "Negotiation",
    "ClientNegotiator",
    "ServerNegotiator",
    "NoCommonMechanism",
    "UnofferedMechanism",
    "client_mechanisms",
]

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import ClassVar

from . import sasl
from .engine import Endpoint, Entry, Machine, State, process_input
from .errors import LocalProtocolError

#: A mechanism as a config names it: a name or a zero-argument factory.
MechanismChoice = str | Callable[[], sasl.ClientMechanism]

#: Names that need the username and password (they are skipped without).
_CREDENTIAL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256")


class NoCommonMechanism(sasl.SaslError):
    """The server offers none of the client's mechanisms."""


class UnofferedMechanism(sasl.SaslError):
    """The client chose a mechanism the server did not offer."""


def client_mechanisms(
    wanted: Iterable[MechanismChoice], username: str | None, password: str | None, *,
    default: Sequence[str], default_without_credentials: Sequence[str],
    extra: Mapping[str, Callable[[str, str], sasl.ClientMechanism]] | None = None,
) -> list[Callable[[], sasl.ClientMechanism]]:
    """The client's mechanisms, best first, as fresh-object factories
    (mechanisms are single-use).  ``wanted`` empty: ``default`` with
    credentials, else ``default_without_credentials``.  A name that needs
    credentials (PLAIN, SCRAM-SHA-256, any of ``extra`` -- a protocol's own,
    e.g. 0-9-1's AMQPLAIN) is left out when there are none."""
    creds = username is not None and password is not None
    chosen = tuple(wanted) or tuple(default if creds else default_without_credentials)
    extra = extra or {}
    out: list[Callable[[], sasl.ClientMechanism]] = []
    for m in chosen:
        if callable(m):
            out.append(m)
            continue
        name = str(m).upper()
        if name in extra:
            if creds:
                out.append(functools.partial(extra[name], str(username), str(password)))
        elif name in _CREDENTIAL_MECHANISMS:
            if creds:
                out.append(functools.partial(sasl.client_mechanism, name, username=username,
                                             password=password))
        else:
            out.append(functools.partial(sasl.client_mechanism, name))
    return out


class Negotiation(State):
    NEW = "NEW"  # nothing chosen yet
    STARTED = "STARTED"  # a mechanism chosen (and created): its exchange runs
    DONE = "DONE"  # server: the client authenticated


def _illegal(ep: object, inp: Hashable) -> Exception:
    if inp == "start()":
        return LocalProtocolError("the SASL exchange has already started")
    if getattr(ep, "state", None) is Negotiation.DONE:
        return LocalProtocolError("the SASL exchange is over")
    return LocalProtocolError("the SASL exchange has not started")


class ClientNegotiator(Endpoint[Negotiation]):
    """The client's side: pick a mechanism, answer challenges, check the outcome."""

    def __init__(self, mechanisms: Sequence[Callable[[], sasl.ClientMechanism]]) -> None:
        self._factories = list(mechanisms)
        self._mech: sasl.ClientMechanism | None = None
        self.mechanism: str | None = None  # the chosen name
        self.state = Negotiation.NEW  # written by the engine alone (MACHINE)

    def start(self, offered: Iterable[str]) -> tuple[str, bytes]:
        """The first of ours the server ``offered``: ``(name, initial
        response)``.  Raises :class:`NoCommonMechanism` or the mechanism's
        :class:`~amqp_sansio.sasl.SaslError`."""
        out: list[tuple[str, bytes]] = []
        process_input(self, self.MACHINE, "start()", offered, out)
        return out[0]

    def challenge(self, data: bytes) -> bytes:
        """The response to a server challenge."""
        out: list[bytes] = []
        process_input(self, self.MACHINE, "challenge()", data, out)
        return out[0]

    def succeeded(self, additional: bytes = b"") -> None:
        """The server declared success (0-x: ``tune`` arrived; 1.0:
        ``sasl-outcome`` ok, with its additional data).  Raises
        :class:`~amqp_sansio.sasl.SaslError` if the exchange is not complete
        from our side (SCRAM without the server's proof)."""
        process_input(self, self.MACHINE, "succeeded()", additional)

    @property
    def started(self) -> bool:
        """A mechanism was chosen (even one whose initial response failed)."""
        return self._mech is not None

    # -- handlers (MACHINE) ------------------------------------------------------
    def _start(self, offered: Iterable[str], out: list[tuple[str, bytes]]) -> None:
        offer = [str(m) for m in offered]
        for factory in self._factories:
            candidate = factory()
            if candidate.name in offer:
                self._mech = candidate
                self.mechanism = candidate.name
                out.append((candidate.name, candidate.initial_response()))
                return
        raise NoCommonMechanism(f"no common SASL mechanism (offered {offer})")

    def _challenge(self, data: bytes, out: list[bytes]) -> None:
        assert self._mech is not None
        out.append(self._mech.respond(data))

    def _succeeded(self, additional: bytes, out: None) -> None:
        assert self._mech is not None
        self._mech.verify_final(additional)

    MACHINE: ClassVar[Machine[Negotiation]] = Machine("SASL client", {
        Negotiation.NEW: {"start()": Entry((Negotiation.STARTED,), _start)},
        Negotiation.STARTED: {"challenge()": Entry((), _challenge),
                              "succeeded()": Entry((), _succeeded)},
        Negotiation.DONE: {},
    }, illegal=_illegal)


class ServerNegotiator(Endpoint[Negotiation]):
    """The server's side: offer mechanisms, run the chosen one to its outcome."""

    def __init__(self, authenticator: sasl.ServerAuthenticator) -> None:
        self.authenticator = authenticator
        self._mech: sasl.ServerMechanism | None = None
        self.mechanism: str | None = None
        self.identity: str | None = None  # once authenticated
        self.state = Negotiation.NEW  # written by the engine alone (MACHINE)

    @property
    def offered(self) -> tuple[str, ...]:
        """What to offer, best first."""
        return tuple(self.authenticator.mechanisms)

    def start(self, mechanism: str, response: bytes) -> sasl.ServerStep:
        """The client chose ``mechanism`` and sent its initial ``response``.
        Raises :class:`UnofferedMechanism` for a name we did not offer, or
        the mechanism's :class:`~amqp_sansio.sasl.SaslError`."""
        out: list[sasl.ServerStep] = []
        process_input(self, self.MACHINE, "start()", (mechanism, response), out)
        return out[0]

    def step(self, response: bytes) -> sasl.ServerStep:
        """The client's response to our last challenge."""
        out: list[sasl.ServerStep] = []
        process_input(self, self.MACHINE, "step()", response, out)
        return out[0]

    @property
    def started(self) -> bool:
        """A mechanism was chosen and created (even one whose first step
        failed: its own errors follow)."""
        return self._mech is not None

    # -- handlers (MACHINE) ------------------------------------------------------
    def _start(self, arg: tuple[str, bytes], out: list[sasl.ServerStep]) -> Negotiation:
        mechanism, response = arg
        if mechanism not in self.authenticator.mechanisms:
            raise UnofferedMechanism(f"chose unoffered mechanism {mechanism!r}")
        self.mechanism = mechanism
        self._mech = self.authenticator.create(mechanism)
        return self._done(self._mech.start(response), out)

    def _step(self, response: bytes, out: list[sasl.ServerStep]) -> Negotiation:
        assert self._mech is not None
        return self._done(self._mech.step(response), out)

    def _done(self, step: sasl.ServerStep, out: list[sasl.ServerStep]) -> Negotiation:
        out.append(step)
        if step.done:
            self.identity = step.identity
            return Negotiation.DONE
        return Negotiation.STARTED

    MACHINE: ClassVar[Machine[Negotiation]] = Machine("SASL server", {
        Negotiation.NEW: {"start()": Entry((Negotiation.STARTED, Negotiation.DONE), _start)},
        Negotiation.STARTED: {"step()": Entry((Negotiation.STARTED, Negotiation.DONE), _step)},
        Negotiation.DONE: {},
    }, illegal=_illegal)
