"""SASL for the AMQP connection handshake: pluggable mechanisms, both roles.

AMQP 0-10 runs SASL inside the ``connection`` class::

    S: connection.start(mechanisms=[...])        ServerAuthenticator.mechanisms
    C: connection.start-ok(mechanism, response)  choose(), client_mechanism(),
                                                 ClientMechanism.initial_response()
                                                 ServerAuthenticator.create(),
                                                 ServerMechanism.start()
    S: connection.secure(challenge)   \\ zero or more rounds, while the server's
    C: connection.secure-ok(response) / ServerStep has a challenge:
                                        ClientMechanism.respond(), ServerMechanism.step()
    S: connection.tune(...)                      ServerStep.done; on the client:
                                                 ClientMechanism.verify_final()

If authentication fails the server mechanism raises :class:`AuthenticationFailed`
and the server closes the connection (``connection-forced``, 320).  Every
mechanism here is pure computation; the connection state machine moves the
bytes.

Errors
------
* :class:`SaslError` (a :class:`~amqp_sansio.errors.RemoteProtocolError`,
  code 320, scope ``connection``) -- the peer sent SASL data that is malformed
  or out of order (bad UTF-8, bad base64, nonce mismatch, an iteration count
  outside the accepted range, ...).
* :class:`AuthenticationFailed` (a :class:`SaslError`) -- the exchange was
  well formed but the credentials were not accepted.  Server mechanisms always
  use the same reason, ``"invalid credentials"``, whether the user is unknown,
  the password is wrong or the requested authorization identity is not
  allowed, so the message can go back to the peer without telling it which
  part was wrong.  No error text ever contains a password.
* :class:`~amqp_sansio.errors.LocalProtocolError` -- caller misuse: an empty
  or unpreparable username, calling ``start`` twice, ...

A server mechanism that raised is finished; calling it again is caller misuse.
Exceptions raised by the caller's own callbacks (``check``, ``lookup``,
``authorize``) propagate unchanged.

Mechanisms
----------
==============  ==========================  ====================================
name            client                      server
==============  ==========================  ====================================
ANONYMOUS       :class:`AnonymousClient`    :class:`AnonymousServer` (RFC 4505)
PLAIN           :class:`PlainClient`        :class:`PlainServer` (RFC 4616)
EXTERNAL        :class:`ExternalClient`     :class:`ExternalServer` (RFC 4422)
SCRAM-SHA-256   :class:`ScramSha256Client`  :class:`ScramSha256Server`
                                            (RFC 5802, RFC 7677)
==============  ==========================  ====================================

Usernames and passwords are prepared with SASLprep (RFC 4013, see
:func:`saslprep`): the PLAIN server prepares the presented authcid and
password before calling the credential check; SCRAM prepares the username
as a query string and the password as a stored string, as RFC 5802 says.

SCRAM server-final message
--------------------------
AMQP 0-10 has no "outcome with additional data": ``connection.tune`` carries
no SASL bytes.  As RFC 4422 provides for protocols that cannot carry
additional data with success (the data goes in one more challenge, answered
with an empty response), the SCRAM server sends its server-final message
(``v=ServerSignature``) in one last ``connection.secure``; the client checks
it in :meth:`ScramSha256Client.respond` and answers with an *empty* ``connection.secure-ok``; only then does the
server report success.  So a SCRAM exchange is::

    start-ok(client-first)  secure(server-first)  secure-ok(client-final)
    secure(server-final)    secure-ok("")         tune

The client refuses to finish (``verify_final`` raises :class:`SaslError`)
unless the server proved knowledge of the password this way; a server that
cannot do this (``ScramSha256Server(send_server_final=False)``) must be
paired with ``ScramSha256Client(require_server_final=False)``, which gives up
mutual authentication.

The SCRAM server does not reveal whether a user exists: for an unknown user
it answers with a *mock* server-first message whose salt is derived from the
username and a secret (stable for the life of the process, or supplied), and
fails at the proof exactly as for a wrong password.

Channel binding (``SCRAM-SHA-256-PLUS``) is not implemented: the server
accepts the ``n`` and ``y`` GS2 flags and rejects ``p=``.
"""

from __future__ import annotations

__all__ = [
    "CONNECTION_FORCED",
    "MAX_MESSAGE",
    "DEFAULT_SCRAM_ITERATIONS",
    "DEFAULT_MIN_ITERATIONS",
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_CLIENT_PREFERENCE",
    "SaslError",
    "AuthenticationFailed",
    "ClientMechanism",
    "ServerMechanism",
    "ServerStep",
    "saslprep",
    "AnonymousClient",
    "AnonymousServer",
    "PlainClient",
    "PlainServer",
    "ExternalClient",
    "ExternalServer",
    "ScramCredentials",
    "ScramSha256Client",
    "ScramSha256Server",
    "ScramState",
    "SCRAM_CLIENT",
    "SCRAM_SERVER",
    "CLIENT_MECHANISMS",
    "client_mechanism",
    "check_credentials",
    "choose",
    "ServerAuthenticator",
]

import base64
import binascii
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import ClassVar, Final, Protocol

import attrs

from .engine import Endpoint, Entry, Machine, State, process_input
from .errors import LocalProtocolError, RemoteProtocolError

#: ``connection.close`` code sent when SASL fails (0-10 ``connection-forced``).
CONNECTION_FORCED: Final = 320
#: Longest SASL message (octets) accepted from a peer, in either role.
MAX_MESSAGE: Final = 8192
#: Iteration count used by :meth:`ScramCredentials.derive` and for mock users.
DEFAULT_SCRAM_ITERATIONS: Final = 4096
#: Fewest SCRAM iterations a client accepts (RFC 7677 section 4: at least 4096).
DEFAULT_MIN_ITERATIONS: Final = 4096
#: Most SCRAM iterations a client accepts: caps the PBKDF2 work a server can
#: make a client do (600 000 is the 2023 OWASP figure for PBKDF2-HMAC-SHA256).
DEFAULT_MAX_ITERATIONS: Final = 600_000
#: What :func:`choose` tries, in order, when the caller gives no preference.
#: EXTERNAL needs a TLS client certificate and ANONYMOUS needs the caller to
#: mean it, so neither is tried unless asked for.
DEFAULT_CLIENT_PREFERENCE: Final = ("SCRAM-SHA-256", "PLAIN")

_GENERIC_REASON: Final = "invalid credentials"
_ANONYMOUS_TRACE_MAX: Final = 255  # RFC 4505: at most 255 characters of trace


class ScramState(State):
    START = "START"  # nothing exchanged yet
    FIRST = "FIRST"  # client-first sent (client) / server-first sent (server)
    FINAL = "FINAL"  # client-final sent (client) / server-final sent (server)
    DONE = "DONE"  # client: the server proved the password; server: success
    FAILED = "FAILED"  # terminal: the peer's message was refused


_S = ScramState

#: The SCRAM exchanges run on the one engine (:mod:`amqp_sansio.engine`):
#: ``SCRAM_CLIENT`` and ``SCRAM_SERVER`` (state -> input -> Entry(targets,
#: handler)) are each mechanism's ``MACHINE``, built in its class next to the
#: handlers they name.  Inputs are the mechanism's calls, each carrying the
#: peer's next message -- client: ``initial_response()``, ``respond()``
#: (server-first, then server-final); server: ``start()`` (client-first),
#: ``step()`` (client-final, then the empty response) -- and ``refused``: the
#: peer's message was malformed or its proof wrong (the handler raised a
#: SaslError and changed nothing).  A call the table does not list is the
#: caller's error (LocalProtocolError).


def _scram_illegal(ep: object, inp: Hashable) -> Exception:
    state = getattr(ep, "state", None)
    return LocalProtocolError(f"SCRAM: {inp} in state {getattr(state, 'name', state)}")


# --------------------------------------------------------------------------
# Errors and the mechanism interface
# --------------------------------------------------------------------------


class SaslError(RemoteProtocolError):
    """The peer's SASL data is malformed, out of order, or not acceptable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=CONNECTION_FORCED, scope="connection")


class AuthenticationFailed(SaslError):
    """Well-formed exchange, credentials not accepted.

    ``reason`` is safe to show the peer: it never contains a password, and
    server mechanisms always use ``"invalid credentials"``.
    """

    def __init__(self, reason: str = _GENERIC_REASON) -> None:
        super().__init__(f"authentication failed: {reason}")
        self.reason = reason


class ClientMechanism(Protocol):
    """Client side of one SASL exchange (one object per connection attempt)."""

    @property
    def name(self) -> str:
        """The IANA mechanism name, e.g. ``"PLAIN"``."""
        ...

    def initial_response(self) -> bytes:
        """Bytes for ``connection.start-ok.response``.  Call exactly once."""
        ...

    def respond(self, challenge: bytes) -> bytes:
        """Answer a ``connection.secure`` challenge (bytes for ``secure-ok``).

        Raises :class:`SaslError` if the challenge is unexpected or bad.
        """
        ...

    def verify_final(self, data: bytes = b"") -> None:
        """The server declared success (0-10: ``connection.tune`` arrived).

        ``data`` is additional data sent with the success in protocols that
        have it; AMQP 0-10 has none, so the connection passes ``b""``.
        Raises :class:`SaslError` if the exchange is not complete from the
        client's point of view (e.g. SCRAM without a verified server
        signature).
        """
        ...


@attrs.frozen
class ServerStep:
    """What the server does next: send a challenge, or finish.

    Exactly one of: ``challenge is not None`` (send ``connection.secure``)
    or ``done`` (authenticated as ``identity``, which is then set).  Build
    with :meth:`more` or :meth:`success`.
    """

    challenge: bytes | None = None
    done: bool = False
    identity: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.done == (self.challenge is not None):
            raise LocalProtocolError("ServerStep needs exactly one of a challenge or done=True")
        if self.done and self.identity is None:
            raise LocalProtocolError("a finished ServerStep needs an identity")
        if not self.done and self.identity is not None:
            raise LocalProtocolError("identity is only set once authentication is done")

    @classmethod
    def more(cls, challenge: bytes) -> ServerStep:
        return cls(challenge=bytes(challenge))

    @classmethod
    def success(cls, identity: str) -> ServerStep:
        return cls(done=True, identity=identity)


class ServerMechanism(Protocol):
    """Server side of one SASL exchange (one object per connection attempt)."""

    @property
    def name(self) -> str: ...

    def start(self, response: bytes) -> ServerStep:
        """Handle ``connection.start-ok.response``.  Call exactly once."""
        ...

    def step(self, response: bytes) -> ServerStep:
        """Handle ``connection.secure-ok.response`` (after a challenge)."""
        ...


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

_ucd = unicodedata.ucd_3_2_0  # stringprep (RFC 3454) is defined on Unicode 3.2


def saslprep(text: str, *, allow_unassigned: bool = False) -> str:
    """Prepare ``text`` with SASLprep (RFC 4013, a stringprep profile).

    ``allow_unassigned=True`` treats it as a *query* string (unassigned code
    points allowed), the default as a *stored* string.  Raises
    :class:`ValueError` naming the offending code point; the result may be
    empty.
    """
    # 2.1 mapping: non-ASCII space -> SPACE; "commonly mapped to nothing" -> removed.
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in text if not stringprep.in_table_b1(ch)
    )
    # 2.2 normalization: NFKC.
    out = _ucd.normalize("NFKC", mapped)
    # 2.3 prohibited output, and unassigned code points for stored strings.
    for ch in out:
        if (
            stringprep.in_table_c12(ch)
            or stringprep.in_table_c21_c22(ch)
            or stringprep.in_table_c3(ch)
            or stringprep.in_table_c4(ch)
            or stringprep.in_table_c5(ch)
            or stringprep.in_table_c6(ch)
            or stringprep.in_table_c7(ch)
            or stringprep.in_table_c8(ch)
            or stringprep.in_table_c9(ch)
        ):
            raise ValueError(f"prohibited character U+{ord(ch):04X}")
        if not allow_unassigned and stringprep.in_table_a1(ch):
            raise ValueError(f"unassigned code point U+{ord(ch):04X}")
    # 2.4 bidirectional characters (RFC 3454 section 6).
    if any(stringprep.in_table_d1(ch) for ch in out):
        if any(stringprep.in_table_d2(ch) for ch in out):
            raise ValueError("mixes right-to-left and left-to-right characters")
        if not (stringprep.in_table_d1(out[0]) and stringprep.in_table_d1(out[-1])):
            raise ValueError("right-to-left text must start and end with an RTL character")
    return out


def _prep_local(text: object, what: str, *, query: bool) -> str:
    """SASLprep a caller-supplied string; misuse -> LocalProtocolError."""
    if not isinstance(text, str):
        raise LocalProtocolError(f"{what} must be a str")
    try:
        out = saslprep(text, allow_unassigned=query)
    except ValueError as exc:
        raise LocalProtocolError(f"{what} fails SASLprep: {exc}") from None
    if not out:
        raise LocalProtocolError(f"{what} is empty (after SASLprep)")
    return out


def _utf8_local(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise LocalProtocolError(f"{what} must be a str")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise LocalProtocolError(f"{what} is not encodable as UTF-8") from None


def _octets(data: object, what: str) -> bytes:
    """Bytes handed in by the caller (they came from the peer)."""
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise LocalProtocolError(f"{what} must be bytes, not {type(data).__name__}")


def _peer_text(data: bytes, what: str) -> str:
    if len(data) > MAX_MESSAGE:
        raise SaslError(f"{what} is too long ({len(data)} octets; limit {MAX_MESSAGE})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(f"{what} is not valid UTF-8") from None


def _no_controls(text: str) -> bool:
    return not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def _b64encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _b64decode(text: str) -> bytes | None:
    """Strict, canonical base64 (RFC 4648, padded); None if it is not."""
    if not text.isascii():
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if _b64encode(raw) == text else None


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.digest(key, msg, "sha256")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _valid_nonce(nonce: str) -> bool:
    # RFC 5802: printable = %x21-2B / %x2D-7E (visible ASCII except ",").
    return bool(nonce) and all(0x21 <= ord(ch) <= 0x7E and ch != "," for ch in nonce)


def _encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _decode_saslname(text: str, what: str) -> str:
    """Undo ``=2C``/``=3D`` quoting; any other ``=`` is malformed."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "=":
            esc = text[i : i + 3]
            if esc == "=2C":
                out.append(",")
            elif esc == "=3D":
                out.append("=")
            else:
                raise SaslError(f"malformed {what}: bad '=' escape")
            i += 3
        else:
            out.append(ch)
            i += 1
    if not out:
        raise SaslError(f"malformed {what}: empty name")
    return "".join(out)


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    """Split ``a=v,b=w`` (RFC 5802 attr-val list; attribute names are one letter)."""
    out: list[tuple[str, str]] = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=" or not (part[0].isascii() and part[0].isalpha()):
            raise SaslError(f"malformed {what}: bad attribute")
        out.append((part[0], part[2:]))
    return out


def _check_name(name: str) -> str:
    # RFC 4422 section 3.1: 1-20 characters from A-Z 0-9 - _
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= 20
        or not all(ch.isascii() and (ch.isupper() or ch.isdigit() or ch in "-_") for ch in name)
    ):
        raise LocalProtocolError(f"invalid SASL mechanism name {name!r}")
    return name


#: ``authorize(authentication_identity, requested_authzid) -> bool``
Authorize = Callable[[str, str], bool]


def _no_proxy(authcid: str, authzid: str) -> bool:
    return False


# --------------------------------------------------------------------------
# Single-message mechanisms: ANONYMOUS, PLAIN, EXTERNAL
# --------------------------------------------------------------------------


class _SingleMessageClient:
    """Client mechanisms that send one message and expect no challenge."""

    name: str = ""

    def __init__(self) -> None:
        self._sent = False

    def _message(self) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    def initial_response(self) -> bytes:
        if self._sent:
            raise LocalProtocolError(f"{self.name}: initial response already produced")
        self._sent = True
        return self._message()

    def respond(self, challenge: bytes) -> bytes:
        _octets(challenge, "challenge")
        if not self._sent:
            raise LocalProtocolError(f"{self.name}: respond() before initial_response()")
        raise SaslError(f"{self.name} expects no challenge, but the server sent one")

    def verify_final(self, data: bytes = b"") -> None:
        if not self._sent:
            raise LocalProtocolError(f"{self.name}: verify_final() before initial_response()")
        if _octets(data, "data"):
            raise SaslError(f"{self.name}: unexpected additional data from the server")


class _SingleMessageServer:
    """Server mechanisms that decide on the first response."""

    name: str = ""

    def __init__(self) -> None:
        self._started = False

    def _decide(self, response: bytes) -> ServerStep:  # pragma: no cover - overridden
        raise NotImplementedError

    def start(self, response: bytes) -> ServerStep:
        data = _octets(response, "response")
        if self._started:
            raise LocalProtocolError(f"{self.name}: start() called twice")
        self._started = True
        return self._decide(data)

    def step(self, response: bytes) -> ServerStep:
        raise LocalProtocolError(f"{self.name}: step() without an outstanding challenge")


class AnonymousClient(_SingleMessageClient):
    """ANONYMOUS (RFC 4505); ``trace`` is optional trace information."""

    name = "ANONYMOUS"

    def __init__(self, trace: str = "") -> None:
        super().__init__()
        raw = _utf8_local(trace, "trace")
        if len(trace) > _ANONYMOUS_TRACE_MAX or not _no_controls(trace):
            raise LocalProtocolError(
                f"trace must be at most {_ANONYMOUS_TRACE_MAX} characters, no controls"
            )
        self._trace = raw

    def _message(self) -> bytes:
        return self._trace


class AnonymousServer(_SingleMessageServer):
    """ANONYMOUS (RFC 4505): everyone is ``identity``; ``trace`` is kept."""

    name = "ANONYMOUS"

    def __init__(self, identity: str = "anonymous") -> None:
        super().__init__()
        self._identity = identity
        #: The client's trace information, once :meth:`start` accepted it.
        self.trace: str | None = None

    def _decide(self, response: bytes) -> ServerStep:
        text = _peer_text(response, "ANONYMOUS trace")
        if len(text) > _ANONYMOUS_TRACE_MAX or not _no_controls(text):
            raise SaslError("malformed ANONYMOUS trace")
        self.trace = text
        return ServerStep.success(self._identity)


class PlainClient(_SingleMessageClient):
    """PLAIN (RFC 4616): ``[authzid] NUL authcid NUL passwd``.

    Only use it over TLS: the password crosses the wire as is.
    """

    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        super().__init__()
        parts = [
            _utf8_local(authzid, "authzid"),
            _utf8_local(username, "username"),
            _utf8_local(password, "password"),
        ]
        if any(b"\x00" in p for p in parts):
            raise LocalProtocolError("PLAIN fields must not contain NUL")
        if not parts[1] or not parts[2]:
            raise LocalProtocolError("PLAIN needs a non-empty username and password")
        self._parts: list[bytes] | None = parts

    def __repr__(self) -> str:
        return f"<PlainClient sent={self._sent}>"

    def _message(self) -> bytes:
        assert self._parts is not None
        msg = b"\x00".join(self._parts)
        self._parts = None  # do not keep the password around
        return msg


class PlainServer(_SingleMessageServer):
    """PLAIN (RFC 4616).

    ``check(username, password) -> bool`` gets the SASLprep-prepared authcid
    and password.  A non-empty authzid other than the authcid is allowed only
    if ``authorize(authcid, authzid)`` says so; the identity is then the
    authzid.
    """

    name = "PLAIN"

    def __init__(
        self, check: Callable[[str, str], bool], authorize: Authorize | None = None
    ) -> None:
        super().__init__()
        self._check = check
        self._authorize = authorize or _no_proxy

    def _decide(self, response: bytes) -> ServerStep:
        text = _peer_text(response, "PLAIN response")
        fields = text.split("\x00")
        if len(fields) != 3 or not fields[1] or not fields[2]:
            raise SaslError("malformed PLAIN response")
        authzid, authcid, passwd = fields
        try:
            user = saslprep(authcid, allow_unassigned=True)
            password = saslprep(passwd, allow_unassigned=True)
        except ValueError:
            raise AuthenticationFailed() from None
        if not user or not password or not self._check(user, password):
            raise AuthenticationFailed()
        if authzid in ("", authcid, user):
            return ServerStep.success(user)
        if self._authorize(user, authzid):
            return ServerStep.success(authzid)
        raise AuthenticationFailed()


class ExternalClient(_SingleMessageClient):
    """EXTERNAL (RFC 4422 appendix A): identity comes from outside SASL
    (e.g. the TLS client certificate); sends an optional authzid."""

    name = "EXTERNAL"

    def __init__(self, authzid: str = "") -> None:
        super().__init__()
        raw = _utf8_local(authzid, "authzid")
        if b"\x00" in raw:
            raise LocalProtocolError("authzid must not contain NUL")
        self._authzid = raw

    def _message(self) -> bytes:
        return self._authzid


class ExternalServer(_SingleMessageServer):
    """EXTERNAL: ``external_identity`` is what the adapter established
    outside SASL (e.g. the TLS peer certificate subject); ``None`` means
    nothing was established and every attempt fails.
    """

    name = "EXTERNAL"

    def __init__(self, external_identity: str | None, authorize: Authorize | None = None) -> None:
        super().__init__()
        self._external = external_identity
        self._authorize = authorize or _no_proxy

    def _decide(self, response: bytes) -> ServerStep:
        authzid = _peer_text(response, "EXTERNAL authzid")
        if "\x00" in authzid:
            raise SaslError("malformed EXTERNAL authzid")
        ext = self._external
        if ext is None:
            raise AuthenticationFailed()
        if authzid in ("", ext):
            return ServerStep.success(ext)
        if self._authorize(ext, authzid):
            return ServerStep.success(authzid)
        raise AuthenticationFailed()


# --------------------------------------------------------------------------
# SCRAM-SHA-256 (RFC 5802, RFC 7677)
# --------------------------------------------------------------------------

_KEY_LEN: Final = 32  # SHA-256 output


@attrs.frozen
class ScramCredentials:
    """What a SCRAM-SHA-256 server stores for a user (never the password).

    ``stored_key = H(HMAC(SaltedPassword, "Client Key"))`` and
    ``server_key = HMAC(SaltedPassword, "Server Key")``; the keys are left
    out of ``repr``.
    """

    salt: bytes
    iterations: int
    stored_key: bytes = attrs.field(repr=False)
    server_key: bytes = attrs.field(repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.salt, bytes) or not self.salt:
            raise LocalProtocolError("SCRAM salt must be non-empty bytes")
        if type(self.iterations) is not int or self.iterations < 1:
            raise LocalProtocolError("SCRAM iteration count must be a positive int")
        for key in (self.stored_key, self.server_key):
            if not isinstance(key, bytes) or len(key) != _KEY_LEN:
                raise LocalProtocolError(f"SCRAM-SHA-256 keys are {_KEY_LEN} bytes")

    @classmethod
    def derive(
        cls,
        password: str,
        salt: bytes | None = None,
        iterations: int = DEFAULT_SCRAM_ITERATIONS,
    ) -> ScramCredentials:
        """Compute credentials from a password (SASLprep'd as a stored string).

        ``salt`` defaults to 16 random bytes.
        """
        pw = _prep_local(password, "password", query=False)
        if salt is None:
            salt = secrets.token_bytes(16)
        if not isinstance(salt, bytes) or not salt:
            raise LocalProtocolError("SCRAM salt must be non-empty bytes")
        if type(iterations) is not int or iterations < 1:
            raise LocalProtocolError("SCRAM iteration count must be a positive int")
        salted = hashlib.pbkdf2_hmac("sha256", pw.encode("utf-8"), salt, iterations)
        return cls(
            salt=salt,
            iterations=iterations,
            stored_key=hashlib.sha256(_hmac(salted, b"Client Key")).digest(),
            server_key=_hmac(salted, b"Server Key"),
        )


def _make_nonce(nonce: str | None) -> str:
    if nonce is None:
        return secrets.token_urlsafe(24)  # [A-Za-z0-9_-]: all valid nonce chars
    if not isinstance(nonce, str) or not _valid_nonce(nonce):
        raise LocalProtocolError("SCRAM nonce must be non-empty printable ASCII without ','")
    return nonce


class ScramSha256Client(Endpoint[ScramState]):
    """SCRAM-SHA-256 client (no channel binding).

    ``nonce`` is injectable for tests; by default 24 random bytes.  The
    server's iteration count must lie in ``[min_iterations, max_iterations]``.
    With ``require_server_final`` (the default) :meth:`verify_final` fails
    unless the server proved knowledge of the password (see the module
    docstring).
    """

    name = "SCRAM-SHA-256"

    def __init__(
        self,
        username: str,
        password: str,
        *,
        authzid: str | None = None,
        nonce: str | None = None,
        min_iterations: int = DEFAULT_MIN_ITERATIONS,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        require_server_final: bool = True,
    ) -> None:
        self._username = _prep_local(username, "username", query=True)
        self._password: bytes | None = _prep_local(password, "password", query=False).encode(
            "utf-8"
        )
        if authzid is not None and not (isinstance(authzid, str) and authzid):
            raise LocalProtocolError("authzid must be a non-empty str or None")
        if authzid is not None:
            _utf8_local(authzid, "authzid")
        self._authzid = authzid
        self._nonce = _make_nonce(nonce)
        if not 1 <= min_iterations <= max_iterations:
            raise LocalProtocolError("need 1 <= min_iterations <= max_iterations")
        self._min_iter = min_iterations
        self._max_iter = max_iterations
        self._require_final = require_server_final
        self.state = ScramState.START  # written by the engine alone (MACHINE)
        self._gs2 = ""
        self._bare = ""
        self._server_signature = b""

    def __repr__(self) -> str:
        return f"<ScramSha256Client user={self._username!r} state={self.state.name}>"

    def initial_response(self) -> bytes:
        out: list[bytes] = []
        process_input(self, self.MACHINE, "initial_response()", None, out)
        return out[0]

    def respond(self, challenge: bytes) -> bytes:
        out: list[bytes] = []
        self._take(_octets(challenge, "challenge"), out)
        return out[0] if out else b""

    def verify_final(self, data: bytes = b"") -> None:
        data = _octets(data, "data")
        st = self.state
        if st in (ScramState.START, ScramState.FAILED):
            raise LocalProtocolError(f"SCRAM: verify_final() in state {st.name}")
        if data:
            if st is not ScramState.FINAL:
                raise SaslError("SCRAM: unexpected additional data from the server")
            self._take(data, [])  # the server-final message, as a challenge carries it
        st = self.state
        if st is ScramState.DONE or (st is ScramState.FINAL and not self._require_final):
            return
        raise SaslError("SCRAM: the server declared success without proving it knows the password")

    def _take(self, data: bytes, out: list[bytes]) -> None:
        try:
            process_input(self, self.MACHINE, "respond()", data, out)
        except SaslError:
            process_input(self, self.MACHINE, "refused")
            raise

    # -- handlers (MACHINE) ------------------------------------------------------
    def _client_first(self, _: None, out: list[bytes]) -> None:
        authz = "" if self._authzid is None else "a=" + _encode_saslname(self._authzid)
        self._gs2 = f"n,{authz},"
        self._bare = f"n={_encode_saslname(self._username)},r={self._nonce}"
        out.append((self._gs2 + self._bare).encode("utf-8"))

    def _after_end(self, data: bytes, out: list[bytes]) -> None:
        raise SaslError("SCRAM: unexpected challenge after the exchange ended")

    def _client_final(self, challenge: bytes, out: list[bytes]) -> None:
        text = _peer_text(challenge, "SCRAM server-first message")
        fields = _attributes(text, "SCRAM server-first message")
        if fields[0][0] == "m":
            raise SaslError("SCRAM: the server requires an unsupported extension")
        if len(fields) < 3 or [k for k, _ in fields[:3]] != ["r", "s", "i"]:
            raise SaslError("malformed SCRAM server-first message")
        nonce, salt_b64, count = (v for _, v in fields[:3])
        if (
            not _valid_nonce(nonce)
            or not nonce.startswith(self._nonce)
            or len(nonce) == len(self._nonce)
        ):
            raise SaslError("SCRAM: the server nonce does not extend the client nonce")
        salt = _b64decode(salt_b64)
        if not salt:
            raise SaslError("malformed SCRAM server-first message: bad salt")
        if not (count.isascii() and count.isdigit()) or count[0] == "0":
            raise SaslError("malformed SCRAM server-first message: bad iteration count")
        if len(count) > len(str(self._max_iter)) or int(count) > self._max_iter:
            raise SaslError(f"SCRAM: iteration count above the limit of {self._max_iter}")
        iterations = int(count)
        if iterations < self._min_iter:
            raise SaslError(
                f"SCRAM: iteration count {iterations} below the minimum of {self._min_iter}"
            )

        password = self._password
        assert password is not None
        self._password = None  # used once; do not keep it
        salted = hashlib.pbkdf2_hmac("sha256", password, salt, iterations)
        client_key = _hmac(salted, b"Client Key")
        stored_key = hashlib.sha256(client_key).digest()
        server_key = _hmac(salted, b"Server Key")
        without_proof = f"c={_b64encode(self._gs2.encode('utf-8'))},r={nonce}".encode()
        auth_message = self._bare.encode("utf-8") + b"," + challenge + b"," + without_proof
        proof = _xor(client_key, _hmac(stored_key, auth_message))
        self._server_signature = _hmac(server_key, auth_message)
        out.append(without_proof + b",p=" + _b64encode(proof).encode("ascii"))

    def _check_server_final(self, data: bytes, out: list[bytes]) -> None:
        text = _peer_text(data, "SCRAM server-final message")
        key, value = _attributes(text, "SCRAM server-final message")[0]
        if key == "e":
            raise AuthenticationFailed(f"server reported SCRAM error {value[:64]!r}")
        if key != "v":
            raise SaslError("malformed SCRAM server-final message")
        signature = _b64decode(value)
        if signature is None:
            raise SaslError("malformed SCRAM server-final message: bad verifier")
        if not hmac.compare_digest(signature, self._server_signature):
            raise AuthenticationFailed("SCRAM server signature mismatch")

    MACHINE: ClassVar[Machine[ScramState]] = Machine("SCRAM client", {
        _S.START: {"initial_response()": Entry((_S.FIRST,), _client_first)},
        _S.FIRST: {"respond()": Entry((_S.FINAL,), _client_final),
                   "refused": Entry((_S.FAILED,))},
        _S.FINAL: {"respond()": Entry((_S.DONE,), _check_server_final),
                   "refused": Entry((_S.FAILED,))},
        _S.DONE: {"respond()": Entry((), _after_end), "refused": Entry((_S.FAILED,))},
        _S.FAILED: {},
    }, illegal=_scram_illegal)


#: Secret behind mock salts for unknown users; fixed for the process so that
#: repeated attempts for one unknown name see the same salt.
_MOCK_SECRET: Final = secrets.token_bytes(32)


class ScramSha256Server(Endpoint[ScramState]):
    """SCRAM-SHA-256 server (no channel binding).

    ``lookup(username)`` gets the SASLprep-prepared username and returns its
    :class:`ScramCredentials`, or ``None`` if there is no such user (the
    exchange then continues with mock credentials and fails at the proof).
    ``authorize(username, authzid)`` decides whether a client may act as a
    different ``authzid`` (default: never).  ``nonce`` (the server part) is
    injectable for tests.  ``mock_iterations``/``mock_secret`` shape the mock
    server-first message; pass a fixed ``mock_secret`` when several processes
    serve the same users.  ``send_server_final`` -- see the module docstring.
    """

    name = "SCRAM-SHA-256"

    def __init__(
        self,
        lookup: Callable[[str], ScramCredentials | None],
        *,
        authorize: Authorize | None = None,
        nonce: str | None = None,
        mock_iterations: int = DEFAULT_SCRAM_ITERATIONS,
        mock_secret: bytes | None = None,
        send_server_final: bool = True,
    ) -> None:
        self._lookup = lookup
        self._authorize = authorize or _no_proxy
        self._server_nonce = _make_nonce(nonce)
        if type(mock_iterations) is not int or mock_iterations < 1:
            raise LocalProtocolError("mock_iterations must be a positive int")
        self._mock_iterations = mock_iterations
        self._mock_secret = _MOCK_SECRET if mock_secret is None else mock_secret
        self._send_final = send_server_final
        self.state = ScramState.START  # written by the engine alone (MACHINE)
        self._user = ""
        self._authzid: str | None = None
        self._identity = ""
        self._gs2 = ""
        self._bare = ""
        self._nonce = ""
        self._server_first = b""
        self._creds: ScramCredentials | None = None
        self._known = False

    def __repr__(self) -> str:
        return f"<ScramSha256Server state={self.state.name}>"

    def start(self, response: bytes) -> ServerStep:
        return self._take("start()", _octets(response, "response"))

    def step(self, response: bytes) -> ServerStep:
        return self._take("step()", _octets(response, "response"))

    def _take(self, inp: str, data: bytes) -> ServerStep:
        out: list[ServerStep] = []
        try:
            process_input(self, self.MACHINE, inp, data, out)
        except SaslError:
            process_input(self, self.MACHINE, "refused")
            raise
        return out[0]

    # -- handlers (MACHINE) ------------------------------------------------------
    def _empty_response(self, data: bytes, out: list[ServerStep]) -> None:
        if data:
            raise SaslError("SCRAM: expected an empty response to the server-final message")
        out.append(ServerStep.success(self._identity))

    def _server_first_message(self, data: bytes, out: list[ServerStep]) -> None:
        what = "SCRAM client-first message"
        text = _peer_text(data, what)
        flag, sep, rest = text.partition(",")
        if not sep:
            raise SaslError(f"malformed {what}")
        if flag.startswith("p="):
            raise SaslError("SCRAM channel binding is not supported")
        if flag not in ("n", "y"):
            raise SaslError(f"malformed {what}: bad GS2 flag")
        authz, sep, bare = rest.partition(",")
        if not sep:
            raise SaslError(f"malformed {what}")
        authzid: str | None = None
        if authz:
            if not authz.startswith("a="):
                raise SaslError(f"malformed {what}: bad GS2 header")
            authzid = _decode_saslname(authz[2:], what)
        fields = _attributes(bare, what)
        if fields[0][0] == "m":
            raise SaslError("SCRAM: the client requires an unsupported extension")
        if len(fields) < 2 or fields[0][0] != "n" or fields[1][0] != "r":
            raise SaslError(f"malformed {what}")
        username = _decode_saslname(fields[0][1], what)
        client_nonce = fields[1][1]
        if not _valid_nonce(client_nonce):
            raise SaslError(f"malformed {what}: bad nonce")
        try:
            user = saslprep(username, allow_unassigned=True)
        except ValueError:
            raise AuthenticationFailed() from None
        if not user:
            raise AuthenticationFailed()

        creds = self._lookup(user)
        self._known = creds is not None
        if creds is None:
            salt = _hmac(self._mock_secret, b"scram-mock-salt\x00" + user.encode("utf-8"))[:16]
            creds = ScramCredentials(
                salt=salt,
                iterations=self._mock_iterations,
                stored_key=secrets.token_bytes(_KEY_LEN),
                server_key=secrets.token_bytes(_KEY_LEN),
            )
        self._creds = creds
        self._user = user
        self._authzid = None if authzid in (None, username, user) else authzid
        self._gs2 = text[: len(text) - len(bare)]
        self._bare = bare
        self._nonce = client_nonce + self._server_nonce
        self._server_first = (
            f"r={self._nonce},s={_b64encode(creds.salt)},i={creds.iterations}".encode("ascii")
        )
        out.append(ServerStep.more(self._server_first))

    def _server_final_message(self, data: bytes, out: list[ServerStep]) -> ScramState:
        what = "SCRAM client-final message"
        text = _peer_text(data, what)
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise SaslError(f"malformed {what}: no proof")
        fields = _attributes(without_proof, what)
        if len(fields) < 2 or fields[0][0] != "c" or fields[1][0] != "r":
            raise SaslError(f"malformed {what}")
        cbind = _b64decode(fields[0][1])
        if cbind is None:
            raise SaslError(f"malformed {what}: bad channel binding")
        if cbind != self._gs2.encode("utf-8"):
            raise SaslError("SCRAM: channel binding does not match the GS2 header")
        if fields[1][1] != self._nonce:
            raise AuthenticationFailed("SCRAM: nonce mismatch")
        proof = _b64decode(proof_b64)
        if proof is None or len(proof) != _KEY_LEN:
            raise SaslError(f"malformed {what}: bad proof")

        creds = self._creds
        assert creds is not None
        auth_message = (
            self._bare.encode("utf-8")
            + b","
            + self._server_first
            + b","
            + without_proof.encode("utf-8")
        )
        client_key = _xor(proof, _hmac(creds.stored_key, auth_message))
        ok = hmac.compare_digest(hashlib.sha256(client_key).digest(), creds.stored_key)
        if not (ok and self._known):
            raise AuthenticationFailed()
        self._identity = self._user
        if self._authzid is not None:
            if not self._authorize(self._user, self._authzid):
                raise AuthenticationFailed()
            self._identity = self._authzid
        if not self._send_final:
            out.append(ServerStep.success(self._identity))
            return ScramState.DONE
        signature = _hmac(creds.server_key, auth_message)
        out.append(ServerStep.more(b"v=" + _b64encode(signature).encode("ascii")))
        return ScramState.FINAL

    MACHINE: ClassVar[Machine[ScramState]] = Machine("SCRAM server", {
        _S.START: {"start()": Entry((_S.FIRST,), _server_first_message),
                   "refused": Entry((_S.FAILED,))},
        # DONE at once without a server-final message (send_server_final=False)
        _S.FIRST: {"step()": Entry((_S.FINAL, _S.DONE), _server_final_message),
                   "refused": Entry((_S.FAILED,))},
        _S.FINAL: {"step()": Entry((_S.DONE,), _empty_response), "refused": Entry((_S.FAILED,))},
        _S.DONE: {},
        _S.FAILED: {},
    }, illegal=_scram_illegal)


#: The SCRAM tables, by the names the transition-coverage tests use.
SCRAM_CLIENT: Final = ScramSha256Client.MACHINE
SCRAM_SERVER: Final = ScramSha256Server.MACHINE


# --------------------------------------------------------------------------
# Registries
# --------------------------------------------------------------------------

#: Client mechanism classes by name; :func:`client_mechanism` builds from it.
CLIENT_MECHANISMS: Final[Mapping[str, Callable[..., ClientMechanism]]] = {
    "ANONYMOUS": AnonymousClient,
    "PLAIN": PlainClient,
    "EXTERNAL": ExternalClient,
    "SCRAM-SHA-256": ScramSha256Client,
}


def client_mechanism(name: str, **kw: object) -> ClientMechanism:
    """A fresh client mechanism, e.g.
    ``client_mechanism("PLAIN", username="guest", password="guest")``."""
    factory = CLIENT_MECHANISMS.get(name)
    if factory is None:
        raise LocalProtocolError(f"no client support for SASL mechanism {name!r}")
    try:
        return factory(**kw)
    except TypeError as exc:
        raise LocalProtocolError(f"bad arguments for {name}: {exc}") from None


def check_credentials(mechanisms: Iterable[object], username: str | None,
                      password: str | None) -> None:
    """Refuse credentials the named password mechanisms could not use (an
    empty password, a NUL, text SASLprep rejects) with LocalProtocolError.

    Connection configs call it when they are made, so that misconfiguration
    is the caller's error at once -- not raised later from ``receive_data``,
    which raises only the peer's errors.  ``mechanisms`` are the config's
    (names or factories; empty: the default names); factories are the
    caller's own and are not called.
    """
    if username is None or password is None:
        return
    names = [m for m in mechanisms if isinstance(m, str)] if mechanisms else ["PLAIN"]
    for name in names:
        if name.upper() in ("PLAIN", "SCRAM-SHA-256"):
            client_mechanism(name.upper(), username=username, password=password)


def choose(offered: Iterable[str], preferred: Sequence[str] = DEFAULT_CLIENT_PREFERENCE) -> str:
    """The first of ``preferred`` (the client's mechanisms, best first) that
    the server ``offered`` (``connection.start.mechanisms``).

    Raises :class:`SaslError` if there is none.
    """
    if isinstance(preferred, str):
        raise LocalProtocolError("preferred must be a sequence of names, not a str")
    offer = {m for m in offered if isinstance(m, str)}
    for name in preferred:
        if name in offer:
            return name
    shown = ", ".join(sorted(offer)[:16])[:200]
    raise SaslError(f"no SASL mechanism in common (server offers: {shown or 'none'})")


class ServerAuthenticator:
    """The mechanisms a server offers (best first) and how to make each.

    ``factories`` maps names to zero-argument callables that return a fresh
    :class:`ServerMechanism`; their order is the order offered.  Usually
    built with :meth:`standard`, once per connection (so that EXTERNAL gets
    that connection's TLS identity).
    """

    def __init__(
        self,
        factories: Mapping[str, Callable[[], ServerMechanism]]
        | Iterable[tuple[str, Callable[[], ServerMechanism]]],
    ) -> None:
        items = factories.items() if isinstance(factories, Mapping) else factories
        self._factories: dict[str, Callable[[], ServerMechanism]] = {}
        for name, factory in items:
            if _check_name(name) in self._factories:
                raise LocalProtocolError(f"mechanism {name!r} listed twice")
            if not callable(factory):
                raise LocalProtocolError(f"factory for {name!r} is not callable")
            self._factories[name] = factory
        if not self._factories:
            raise LocalProtocolError("a ServerAuthenticator needs at least one mechanism")

    @classmethod
    def standard(
        cls,
        *,
        check_password: Callable[[str, str], bool] | None = None,
        scram_lookup: Callable[[str], ScramCredentials | None] | None = None,
        external_identity: str | None = None,
        anonymous: bool = False,
        authorize: Authorize | None = None,
        scram_mock_iterations: int = DEFAULT_SCRAM_ITERATIONS,
        scram_mock_secret: bytes | None = None,
    ) -> ServerAuthenticator:
        """The built-in mechanisms, offered most secure first:

        EXTERNAL (if ``external_identity`` is known), SCRAM-SHA-256 (if
        ``scram_lookup``), PLAIN (if ``check_password``), ANONYMOUS (if
        ``anonymous``).
        """
        factories: list[tuple[str, Callable[[], ServerMechanism]]] = []
        if external_identity is not None:
            ident = external_identity
            factories.append(("EXTERNAL", lambda: ExternalServer(ident, authorize)))
        if scram_lookup is not None:
            lookup = scram_lookup
            factories.append(
                (
                    "SCRAM-SHA-256",
                    lambda: ScramSha256Server(
                        lookup,
                        authorize=authorize,
                        mock_iterations=scram_mock_iterations,
                        mock_secret=scram_mock_secret,
                    ),
                )
            )
        if check_password is not None:
            check = check_password
            factories.append(("PLAIN", lambda: PlainServer(check, authorize)))
        if anonymous:
            factories.append(("ANONYMOUS", AnonymousServer))
        return cls(factories)

    @property
    def mechanisms(self) -> list[str]:
        """Names for ``connection.start.mechanisms``, best first."""
        return list(self._factories)

    def create(self, name: str) -> ServerMechanism:
        """A fresh mechanism for the client's choice (``start-ok.mechanism``).

        Raises :class:`SaslError` if ``name`` was not offered.
        """
        factory = self._factories.get(name) if isinstance(name, str) else None
        if factory is None:
            raise SaslError(
                f"client chose SASL mechanism {str(name)[:40]!r}, which was not offered"
            )
        return factory()
