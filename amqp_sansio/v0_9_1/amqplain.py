"""AMQPLAIN: the AMQP 0-8/0-9-1 username/password mechanism RabbitMQ offers.

Not an IANA SASL mechanism.  The response is a field table's *entries*
without the u32 size prefix -- ``LOGIN`` and ``PASSWORD``, each a long
string (``S``) -- inside the ``start-ok.response`` longstr
(notes-0-9-1-and-1-0.md §A.3.7, verified against RabbitMQ 3.10.8)::

    05 "LOGIN" 53 00000005 "guest" 08 "PASSWORD" 53 00000005 "guest"

The classes follow the :mod:`amqp_sansio.sasl` mechanism protocols, so they
plug into the same places (``ClientMechanism``, ``ServerMechanism``,
``ServerAuthenticator``).  Like PLAIN, it sends the password as is: use TLS.
"""

from __future__ import annotations

__all__ = ["NAME", "AmqplainClient", "AmqplainServer", "encode_response", "decode_response"]

from collections.abc import Callable

from ..errors import DecodeError, LocalProtocolError
from ..sasl import AuthenticationFailed, SaslError, ServerStep, saslprep
from . import codec

NAME = "AMQPLAIN"


def encode_response(username: str, password: str) -> bytes:
    """The AMQPLAIN response octets for ``username``/``password``."""
    out = bytearray()
    codec.encode_table_entries({"LOGIN": username, "PASSWORD": password}, out)
    return bytes(out)


def decode_response(data: bytes) -> tuple[str, str]:
    """``(login, password)`` from an AMQPLAIN response; SaslError if malformed."""
    try:
        entries = codec.decode_table_entries(data, 0, len(data), codec.RABBIT, depth=1)
    except DecodeError as e:
        raise SaslError(f"malformed AMQPLAIN response: {e.message}") from None
    login, password = entries.get("LOGIN"), entries.get("PASSWORD")
    if not isinstance(login, str) or not isinstance(password, str):
        raise SaslError("malformed AMQPLAIN response: LOGIN and PASSWORD strings needed")
    return login, password


class AmqplainClient:
    """Client side: one response, no challenge."""

    name = NAME

    def __init__(self, username: str, password: str) -> None:
        if not isinstance(username, str) or not isinstance(password, str):
            raise LocalProtocolError("AMQPLAIN needs str username and password")
        if not username:
            raise LocalProtocolError("AMQPLAIN needs a non-empty username")
        self._msg: bytes | None = encode_response(username, password)
        self._sent = False

    def __repr__(self) -> str:
        return f"<AmqplainClient sent={self._sent}>"

    def initial_response(self) -> bytes:
        if self._sent or self._msg is None:
            raise LocalProtocolError("AMQPLAIN: initial response already produced")
        msg, self._msg = self._msg, None  # do not keep the password around
        self._sent = True
        return msg

    def respond(self, challenge: bytes) -> bytes:
        if not self._sent:
            raise LocalProtocolError("AMQPLAIN: respond() before initial_response()")
        raise SaslError("AMQPLAIN expects no challenge, but the server sent one")

    def verify_final(self, data: bytes = b"") -> None:
        if not self._sent:
            raise LocalProtocolError("AMQPLAIN: verify_final() before initial_response()")
        if data:
            raise SaslError("AMQPLAIN: unexpected additional data from the server")


class AmqplainServer:
    """Server side: ``check(username, password) -> bool`` decides (both are
    SASLprep-prepared as query strings, as the PLAIN server does)."""

    name = NAME

    def __init__(self, check: Callable[[str, str], bool]) -> None:
        self._check = check
        self._started = False

    def start(self, response: bytes) -> ServerStep:
        if self._started:
            raise LocalProtocolError("AMQPLAIN: start() called twice")
        self._started = True
        login, password = decode_response(bytes(response))
        try:
            user = saslprep(login, allow_unassigned=True)
            pw = saslprep(password, allow_unassigned=True)
        except ValueError:
            raise AuthenticationFailed() from None
        if not user or not pw or not self._check(user, pw):
            raise AuthenticationFailed()
        return ServerStep.success(user)

    def step(self, response: bytes) -> ServerStep:
        raise LocalProtocolError("AMQPLAIN: step() without an outstanding challenge")
