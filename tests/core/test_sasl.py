"""SASL mechanisms (amqp_sansio.sasl): RFC vectors, round trips, bad input."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.sasl import (
    CLIENT_MECHANISMS,
    MAX_MESSAGE,
    AnonymousClient,
    AnonymousServer,
    AuthenticationFailed,
    ClientMechanism,
    ExternalClient,
    ExternalServer,
    PlainClient,
    PlainServer,
    SaslError,
    ScramCredentials,
    ScramSha256Client,
    ScramSha256Server,
    ServerAuthenticator,
    ServerMechanism,
    ServerStep,
    choose,
    client_mechanism,
    saslprep,
)

# RFC 7677 section 3 (SCRAM-SHA-256 example exchange).
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

RFC_CREDS = ScramCredentials.derive("pencil", RFC_SALT, 4096)
# Cheap credentials for the many tests that do not need realistic costs.
FAST_ITER = 16
USERS = {"user": "pencil", "a,b=c": "pässwörd", "admin": "s3cret"}
FAST_CREDS = {
    u: ScramCredentials.derive(p, b"salt-" + u.encode(), FAST_ITER) for u, p in USERS.items()
}
GENERIC = "authentication failed: invalid credentials"


def rfc_server(**kw: object) -> ScramSha256Server:
    return ScramSha256Server(
        lambda u: RFC_CREDS if u == "user" else None,
        nonce=RFC_SERVER_NONCE,
        **kw,  # type: ignore[arg-type]
    )


def fast_lookup(user: str) -> ScramCredentials | None:
    return FAST_CREDS.get(user)


def fast_client(user: str, password: str, **kw: object) -> ScramSha256Client:
    return ScramSha256Client(user, password, min_iterations=1, **kw)  # type: ignore[arg-type]


def check_plain(user: str, password: str) -> bool:
    return USERS.get(user) == password


def run(client: ClientMechanism, server: ServerMechanism) -> tuple[str, list[bytes]]:
    """Drive an exchange the way the connection does; return identity, wire."""
    wire = [client.initial_response()]
    step = server.start(wire[-1])
    rounds = 0
    while not step.done:
        assert step.challenge is not None
        wire.append(step.challenge)
        wire.append(client.respond(step.challenge))
        step = server.step(wire[-1])
        rounds += 1
        assert rounds < 10
    client.verify_final()
    assert step.identity is not None
    return step.identity, wire


# --------------------------------------------------------------------------
# RFC 7677 test vector
# --------------------------------------------------------------------------


def test_rfc7677_client() -> None:
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert c.name == "SCRAM-SHA-256"
    assert c.initial_response() == RFC_CLIENT_FIRST
    assert c.respond(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert c.respond(RFC_SERVER_FINAL) == b""
    c.verify_final()


def test_rfc7677_server() -> None:
    s = rfc_server()
    assert s.start(RFC_CLIENT_FIRST) == ServerStep(challenge=RFC_SERVER_FIRST)
    assert s.step(RFC_CLIENT_FINAL) == ServerStep(challenge=RFC_SERVER_FINAL)
    assert s.step(b"") == ServerStep(done=True, identity="user")


def test_rfc7677_end_to_end_transcript() -> None:
    ident, wire = run(ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE), rfc_server())
    assert ident == "user"
    assert wire == [RFC_CLIENT_FIRST, RFC_SERVER_FIRST, RFC_CLIENT_FINAL, RFC_SERVER_FINAL, b""]


def test_rfc7677_wrong_password_changes_proof_and_fails() -> None:
    c = ScramSha256Client("user", "pencil2", nonce=RFC_CLIENT_NONCE)
    c.initial_response()
    final = c.respond(RFC_SERVER_FIRST)
    assert final != RFC_CLIENT_FINAL
    s = rfc_server()
    s.start(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed) as ei:
        s.step(final)
    assert str(ei.value) == GENERIC


def test_rfc7677_client_rejects_wrong_server_signature() -> None:
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE)
    c.initial_response()
    c.respond(RFC_SERVER_FIRST)
    bad = bytearray(base64.b64decode(RFC_SERVER_FINAL[2:]))
    bad[0] ^= 1
    with pytest.raises(AuthenticationFailed, match="server signature mismatch"):
        c.respond(b"v=" + base64.b64encode(bytes(bad)))
    with pytest.raises(LocalProtocolError):
        c.verify_final()


# --------------------------------------------------------------------------
# SASLprep (RFC 4013 section 3 examples)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        ("I\u00adX", "IX"),  # soft hyphen mapped to nothing
        ("user", "user"),
        ("USER", "USER"),  # case preserved
        ("\u00aa", "a"),  # NFKC
        ("\u2168", "IX"),  # NFKC
        ("a\u00a0b", "a b"),  # non-ASCII space -> SPACE
    ],
)
def test_saslprep_examples(given_: str, expected: str) -> None:
    assert saslprep(given_) == expected


@pytest.mark.parametrize("bad", ["\u0007", "\u0627\u0031", "a\x00b", "\ud800", "\u0627a\u0627"])
def test_saslprep_prohibited(bad: str) -> None:
    with pytest.raises(ValueError):
        saslprep(bad)


def test_saslprep_unassigned_only_in_queries() -> None:
    # U+0221 was unassigned in Unicode 3.2, the version stringprep uses.
    with pytest.raises(ValueError, match="unassigned"):
        saslprep("x\u0221")
    assert saslprep("x\u0221", allow_unassigned=True) == "x\u0221"


# --------------------------------------------------------------------------
# Round trips for every mechanism
# --------------------------------------------------------------------------


def test_anonymous_round_trip() -> None:
    server = AnonymousServer()
    ident, wire = run(AnonymousClient("sirhc@example.net"), server)
    assert ident == "anonymous"
    assert wire == [b"sirhc@example.net"]
    assert server.trace == "sirhc@example.net"
    assert run(AnonymousClient(), AnonymousServer(identity="guest"))[0] == "guest"


def test_plain_round_trip() -> None:
    ident, wire = run(PlainClient("user", "pencil"), PlainServer(check_plain))
    assert (ident, wire) == ("user", [b"\x00user\x00pencil"])


def test_plain_authzid() -> None:
    assert run(PlainClient("admin", "s3cret", "admin"), PlainServer(check_plain))[0] == "admin"
    # Acting as someone else needs authorize().
    with pytest.raises(AuthenticationFailed):
        run(PlainClient("admin", "s3cret", "user"), PlainServer(check_plain))
    server = PlainServer(check_plain, authorize=lambda who, as_: who == "admin")
    ident, wire = run(PlainClient("admin", "s3cret", "user"), server)
    assert ident == "user"
    assert wire == [b"user\x00admin\x00s3cret"]


def test_plain_server_prepares_username_and_password() -> None:
    seen: list[tuple[str, str]] = []

    def check(u: str, p: str) -> bool:
        seen.append((u, p))
        return (u, p) == ("IX", "pass word")

    assert run(PlainClient("\u2168", "pass\u00a0word"), PlainServer(check))[0] == "IX"
    assert seen == [("IX", "pass word")]


def test_external_round_trip() -> None:
    subject = "CN=client1,O=Example"
    assert run(ExternalClient(), ExternalServer(subject))[0] == subject
    assert run(ExternalClient(subject), ExternalServer(subject))[0] == subject
    with pytest.raises(AuthenticationFailed):
        run(ExternalClient("someone-else"), ExternalServer(subject))
    allowed = ExternalServer(subject, authorize=lambda who, as_: as_ == "svc")
    assert run(ExternalClient("svc"), allowed)[0] == "svc"
    with pytest.raises(AuthenticationFailed):  # adapter established no identity
        run(ExternalClient(), ExternalServer(None))


@pytest.mark.parametrize("user", sorted(USERS))
def test_scram_round_trip(user: str) -> None:
    client = fast_client(user, USERS[user])
    ident, wire = run(client, ScramSha256Server(fast_lookup))
    assert ident == user
    assert len(wire) == 5 and wire[-1] == b""
    if user == "a,b=c":  # saslname quoting on the wire
        assert b"n=a=2Cb=3Dc," in wire[0]


def test_scram_password_is_saslprepped_on_both_sides() -> None:
    creds = ScramCredentials.derive("IX", b"salt", FAST_ITER)
    server = ScramSha256Server(lambda u: creds if u == "u" else None)
    assert run(fast_client("u", "I\u00adX"), server)[0] == "u"
    assert ScramCredentials.derive("\u2168", b"salt", FAST_ITER) == creds


def test_scram_authzid() -> None:
    with pytest.raises(AuthenticationFailed):
        run(fast_client("admin", "s3cret", authzid="user"), ScramSha256Server(fast_lookup))
    server = ScramSha256Server(fast_lookup, authorize=lambda who, as_: who == "admin")
    ident, wire = run(fast_client("admin", "s3cret", authzid="user"), server)
    assert ident == "user"
    assert wire[0].startswith(b"n,a=user,n=admin,r=")
    # Naming yourself as authzid needs no authorization.
    assert (
        run(fast_client("admin", "s3cret", authzid="admin"), ScramSha256Server(fast_lookup))[0]
        == "admin"
    )


def test_scram_server_final_is_required_by_default() -> None:
    client = fast_client("user", "pencil")
    server = ScramSha256Server(fast_lookup, send_server_final=False)
    step = server.start(client.initial_response())
    assert step.challenge is not None
    step = server.step(client.respond(step.challenge))
    assert step == ServerStep(done=True, identity="user")
    with pytest.raises(SaslError, match="without proving"):
        client.verify_final()
    # Opt-out on both sides: works, without mutual authentication.
    relaxed = fast_client("user", "pencil", require_server_final=False)
    assert run(relaxed, ScramSha256Server(fast_lookup, send_server_final=False))[0] == "user"


def test_scram_server_final_as_success_data() -> None:
    # A protocol with "additional data with success" would hand v=... to verify_final.
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE)
    c.initial_response()
    c.respond(RFC_SERVER_FIRST)
    c.verify_final(RFC_SERVER_FINAL)


def test_scram_client_rejects_success_before_proof() -> None:
    c = fast_client("user", "pencil")
    c.initial_response()
    with pytest.raises(SaslError):
        c.verify_final()


def test_scram_server_error_attribute() -> None:
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE)
    c.initial_response()
    c.respond(RFC_SERVER_FIRST)
    with pytest.raises(AuthenticationFailed, match="invalid-proof"):
        c.respond(b"e=invalid-proof")


def test_scram_server_wants_empty_response_after_server_final() -> None:
    s = rfc_server()
    s.start(RFC_CLIENT_FIRST)
    s.step(RFC_CLIENT_FINAL)
    with pytest.raises(SaslError, match="empty response"):
        s.step(b"x")


def test_scram_exchanges_take_every_transition_of_their_tables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each SCRAM state change goes through its table (the engine's
    process_input), and the exchanges below -- good, refused at each step --
    take every entry."""
    taken: set[tuple[object, object, object, object]] = set()
    real = sasl.process_input

    def record(ep, machine, inp, arg=None, out=None):  # type: ignore[no-untyped-def]
        state = ep.state
        new = real(ep, machine, inp, arg, out)
        taken.add((id(machine), state, inp, new))
        return new

    monkeypatch.setattr(sasl, "process_input", record)
    run(fast_client("user", "pencil"), ScramSha256Server(fast_lookup))
    run(fast_client("user", "pencil", require_server_final=False),
        ScramSha256Server(fast_lookup, send_server_final=False))
    with pytest.raises(SaslError):  # START refused (server), FIRST refused (client)
        ScramSha256Server(fast_lookup).start(b"x")
    with pytest.raises(SaslError):
        _client_after_first().respond(b"x")
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE)
    c.initial_response()
    c.respond(RFC_SERVER_FIRST)
    with pytest.raises(AuthenticationFailed):  # FINAL refused (client)
        c.respond(RFC_SERVER_FINAL[:-4] + b"AAA=")
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE)
    c.initial_response()
    c.respond(RFC_SERVER_FIRST)
    c.respond(RFC_SERVER_FINAL)
    with pytest.raises(SaslError):  # DONE refused (client): a challenge after the end
        c.respond(b"x")
    s = rfc_server()
    s.start(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed):  # FIRST refused (server)
        s.step(RFC_CLIENT_FINAL[:-4] + b"AAA=")
    s = rfc_server()
    s.start(RFC_CLIENT_FIRST)
    s.step(RFC_CLIENT_FINAL)
    with pytest.raises(SaslError):  # FINAL refused (server)
        s.step(b"x")
    want = {(id(t), state, inp, new) for t in (sasl.SCRAM_CLIENT, sasl.SCRAM_SERVER)
            for state, row in t.rows.items() for inp, entry in row.items()
            for new in entry.targets}
    assert taken == want


# --------------------------------------------------------------------------
# Registries
# --------------------------------------------------------------------------


def test_standard_authenticator_order_and_creation() -> None:
    auth = ServerAuthenticator.standard(
        check_password=check_plain,
        scram_lookup=fast_lookup,
        external_identity="CN=x",
        anonymous=True,
    )
    assert auth.mechanisms == ["EXTERNAL", "SCRAM-SHA-256", "PLAIN", "ANONYMOUS"]
    assert ServerAuthenticator.standard(check_password=check_plain).mechanisms == ["PLAIN"]
    kwargs: dict[str, dict[str, object]] = {
        "EXTERNAL": {},
        "SCRAM-SHA-256": {"username": "user", "password": "pencil", "min_iterations": 1},
        "PLAIN": {"username": "user", "password": "pencil"},
        "ANONYMOUS": {},
    }
    expected = {
        "EXTERNAL": "CN=x",
        "SCRAM-SHA-256": "user",
        "PLAIN": "user",
        "ANONYMOUS": "anonymous",
    }
    for name in auth.mechanisms:
        one, two = auth.create(name), auth.create(name)
        assert one is not two and one.name == name
        client = client_mechanism(name, **kwargs[name])
        assert client.name == name
        assert run(client, one)[0] == expected[name]


def test_authenticator_rejects_unoffered_choice() -> None:
    auth = ServerAuthenticator.standard(check_password=check_plain)
    with pytest.raises(SaslError, match="not offered") as ei:
        auth.create("ANONYMOUS")
    assert ei.value.code == 320 and ei.value.scope == "connection"


def test_authenticator_custom_and_misuse() -> None:
    auth = ServerAuthenticator([("X-CUSTOM", AnonymousServer)])
    assert auth.mechanisms == ["X-CUSTOM"]
    with pytest.raises(LocalProtocolError):
        ServerAuthenticator([])
    with pytest.raises(LocalProtocolError):
        ServerAuthenticator([("lower", AnonymousServer)])
    with pytest.raises(LocalProtocolError):
        ServerAuthenticator([("PLAIN", AnonymousServer), ("PLAIN", AnonymousServer)])


def test_choose() -> None:
    assert choose(["PLAIN", "SCRAM-SHA-256", "ANONYMOUS"]) == "SCRAM-SHA-256"
    assert choose(["PLAIN", "ANONYMOUS"]) == "PLAIN"
    assert choose(["EXTERNAL", "PLAIN"], ["EXTERNAL", "SCRAM-SHA-256", "PLAIN"]) == "EXTERNAL"
    assert choose(["PLAIN", "ANONYMOUS"], ["ANONYMOUS", "PLAIN"]) == "ANONYMOUS"
    with pytest.raises(SaslError, match="no SASL mechanism in common"):
        choose(["ANONYMOUS", "GSSAPI"])
    with pytest.raises(SaslError):
        choose([])
    with pytest.raises(LocalProtocolError):
        choose(["PLAIN"], "PLAIN")


def test_client_mechanism_registry() -> None:
    assert set(CLIENT_MECHANISMS) == {"ANONYMOUS", "PLAIN", "EXTERNAL", "SCRAM-SHA-256"}
    assert isinstance(client_mechanism("PLAIN", username="u", password="p"), PlainClient)
    with pytest.raises(LocalProtocolError, match="GSSAPI"):
        client_mechanism("GSSAPI")
    with pytest.raises(LocalProtocolError, match="bad arguments"):
        client_mechanism("PLAIN", user="u")


# --------------------------------------------------------------------------
# Failures never say which part was wrong
# --------------------------------------------------------------------------


def _plain_failure(response: bytes, **kw: object) -> AuthenticationFailed:
    with pytest.raises(AuthenticationFailed) as ei:
        PlainServer(check_plain, **kw).start(response)  # type: ignore[arg-type]
    return ei.value


def test_plain_failures_are_indistinguishable() -> None:
    failures = [
        _plain_failure(b"\x00user\x00wrong-password"),  # bad password
        _plain_failure(b"\x00nobody\x00pencil"),  # unknown user
        _plain_failure(b"admin\x00user\x00pencil"),  # authzid not allowed
        _plain_failure(b"\x00user\x00bad\x07pw"),  # password fails SASLprep
    ]
    assert {(str(f), f.reason, f.code, f.scope) for f in failures} == {
        (GENERIC, "invalid credentials", 320, "connection")
    }
    for f in failures:
        for secret in ("pencil", "wrong-password", "bad"):
            assert secret not in str(f) and secret not in repr(f)


def test_scram_unknown_user_looks_like_wrong_password() -> None:
    auth_a = ServerAuthenticator.standard(scram_lookup=fast_lookup)
    auth_b = ServerAuthenticator.standard(scram_lookup=fast_lookup)

    def attempt(auth: ServerAuthenticator, user: str, password: str) -> tuple[bytes, str]:
        client = fast_client(user, password)
        server = auth.create("SCRAM-SHA-256")
        step = server.start(client.initial_response())
        assert step.challenge is not None
        first = step.challenge
        with pytest.raises(AuthenticationFailed) as ei:
            server.step(client.respond(first))
        return first, str(ei.value)

    first_1, err_1 = attempt(auth_a, "ghost", "pencil")
    first_2, err_2 = attempt(auth_b, "ghost", "other")
    _, err_3 = attempt(auth_a, "user", "not-pencil")
    assert err_1 == err_2 == err_3 == GENERIC

    def salt_iter(first: bytes) -> tuple[bytes, bytes]:
        m = re.fullmatch(rb"r=[^,]+,s=([^,]+),i=(\d+)", first)
        assert m is not None
        return m.group(1), m.group(2)

    # A mock salt is stable for one name (a changing salt would give it away) ...
    assert salt_iter(first_1) == salt_iter(first_2)
    assert salt_iter(first_1)[1] == b"4096"
    assert len(base64.b64decode(salt_iter(first_1)[0])) == 16
    # ... and differs between names.
    _, err_4 = attempt(auth_a, "ghost2", "x")
    other = ScramSha256Server(fast_lookup).start(b"n,,n=ghost2,r=abc").challenge
    assert other is not None and salt_iter(other)[0] != salt_iter(first_1)[0]


def test_scram_mock_secret_is_configurable() -> None:
    def salt(secret: bytes) -> bytes:
        step = ScramSha256Server(fast_lookup, mock_secret=secret).start(b"n,,n=ghost,r=abc")
        assert step.challenge is not None
        return step.challenge.split(b",")[1]

    assert salt(b"k1") == salt(b"k1") != salt(b"k2")


def test_secrets_not_in_reprs() -> None:
    assert "pencil" not in repr(PlainClient("user", "pencil"))
    assert "pencil" not in repr(fast_client("user", "pencil"))
    r = repr(RFC_CREDS)
    assert "stored_key" not in r and "server_key" not in r and "4096" in r


# --------------------------------------------------------------------------
# Malformed input, server side
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "match"),
    [
        (b"user\x00pencil", "malformed"),  # one NUL: truncated
        (b"\x00\x00pencil", "malformed"),  # empty authcid
        (b"\x00user\x00", "malformed"),  # empty password
        (b"\x00user\x00pen\x00cil", "malformed"),  # extra field
        (b"\x00us\xffer\x00pencil", "UTF-8"),
        (b"\x00user\x00" + b"p" * MAX_MESSAGE, "too long"),
    ],
)
def test_plain_server_malformed(response: bytes, match: str) -> None:
    with pytest.raises(SaslError, match=match) as ei:
        PlainServer(check_plain).start(response)
    assert not isinstance(ei.value, AuthenticationFailed)


@pytest.mark.parametrize("response", [b"\xff", b"a" * 256, b"tab\there", b"x" * (MAX_MESSAGE + 1)])
def test_anonymous_server_malformed(response: bytes) -> None:
    with pytest.raises(SaslError):
        AnonymousServer().start(response)


def test_external_server_malformed() -> None:
    for response in (b"\xc3", b"a\x00b"):
        with pytest.raises(SaslError):
            ExternalServer("CN=x").start(response)


@pytest.mark.parametrize(
    ("client_first", "match"),
    [
        (b"", "malformed"),
        (b"n,,", "malformed"),  # truncated: no bare message
        (b"n,,n=user", "malformed"),  # no nonce
        (b"n,,r=abc,n=user", "malformed"),  # wrong order
        (b"x,,n=user,r=abc", "GS2 flag"),
        (b"p=tls-unique,,n=user,r=abc", "channel binding"),
        (b"n,authz,n=user,r=abc", "GS2 header"),
        (b"n,,m=ext,n=user,r=abc", "extension"),
        (b"n,,n=us=2Xer,r=abc", "escape"),
        (b"n,,n=,r=abc", "empty name"),
        (b"n,,n=user,r=ab\x7fc", "nonce"),
        (b"n,,n=user,r=", "nonce"),
        (b"n,,n=user,r=abc,==x", "attribute"),
        (b"n,,n=us\xe9r,r=abc", "UTF-8"),
        (b"n,,n=user,r=" + b"a" * MAX_MESSAGE, "too long"),
    ],
)
def test_scram_server_malformed_client_first(client_first: bytes, match: str) -> None:
    with pytest.raises(SaslError, match=match):
        rfc_server().start(client_first)


def test_scram_server_accepts_y_flag_and_extensions() -> None:
    s = rfc_server()
    step = s.start(b"y,,n=user,r=" + RFC_CLIENT_NONCE.encode() + b",x=ignored")
    assert step.challenge is not None and step.challenge.startswith(
        b"r=" + RFC_CLIENT_NONCE.encode()
    )


def _with_proof(without_proof: bytes, proof: bytes = b"A" * 43 + b"=") -> bytes:
    return without_proof + b",p=" + proof


_NONCE = RFC_CLIENT_NONCE.encode() + RFC_SERVER_NONCE.encode()


@pytest.mark.parametrize(
    ("client_final", "match"),
    [
        (b"c=biws,r=" + _NONCE, "no proof"),  # truncated
        (RFC_CLIENT_FINAL[:-10], "bad proof"),  # truncated proof
        (_with_proof(b"c=biws,r=" + _NONCE, b"!!!!"), "bad proof"),  # not base64
        (_with_proof(b"c=biws,r=" + _NONCE, b"QUJD"), "bad proof"),  # 3 octets, not 32
        (_with_proof(b"c=biws,r=" + _NONCE, b"A" * 43 + b"B"), "bad proof"),  # no padding
        (_with_proof(b"c=biws,r=" + _NONCE, b"A" * 42 + b"B="), "bad proof"),  # non-canonical
        (_with_proof(b"c=eSws,r=" + _NONCE), "channel binding"),  # "y,," but we saw "n,,"
        (_with_proof(b"c=bi*s,r=" + _NONCE), "bad channel binding"),
        (_with_proof(b"r=" + _NONCE + b",c=biws"), "malformed"),
        (_with_proof(b"c=biws"), "malformed"),
        (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=bi\xffws"), "UTF-8"),
    ],
)
def test_scram_server_malformed_client_final(client_final: bytes, match: str) -> None:
    s = rfc_server()
    s.start(RFC_CLIENT_FIRST)
    with pytest.raises(SaslError, match=match) as ei:
        s.step(client_final)
    assert not isinstance(ei.value, AuthenticationFailed)
    with pytest.raises(LocalProtocolError):  # a failed mechanism is finished
        s.step(RFC_CLIENT_FINAL)


@pytest.mark.parametrize("client_final", [
    _with_proof(b"c=biws,r=" + _NONCE + b"x"),
    _with_proof(b"c=biws,r=" + RFC_CLIENT_NONCE.encode()),
])
def test_scram_server_takes_a_wrong_nonce_as_a_failed_authentication(
        client_final: bytes) -> None:
    """Well-formed, but not this exchange's nonce: the client failed to
    authenticate (SASL outcome auth), it did not break the protocol (issue
    26, finding 19: it was answered sys-perm)."""
    s = rfc_server()
    s.start(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match="nonce mismatch"):
        s.step(client_final)
    with pytest.raises(LocalProtocolError):  # a failed mechanism is finished
        s.step(RFC_CLIENT_FINAL)


def test_scram_server_ignores_extensions_in_client_final_and_checks_proof() -> None:
    s = rfc_server()
    s.start(RFC_CLIENT_FIRST)
    with_ext = RFC_CLIENT_FINAL.replace(b",p=", b",x=1,p=")
    # The extension is part of AuthMessage, so the RFC proof no longer matches.
    with pytest.raises(AuthenticationFailed):
        s.step(with_ext)


# --------------------------------------------------------------------------
# Malformed input, client side
# --------------------------------------------------------------------------


def _client_after_first(**kw: object) -> ScramSha256Client:
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE, **kw)  # type: ignore[arg-type]
    c.initial_response()
    return c


def _server_first(
    nonce: str = RFC_CLIENT_NONCE + "srv", salt: str = "c2FsdA==", i: str = "4096"
) -> bytes:
    return f"r={nonce},s={salt},i={i}".encode()


@pytest.mark.parametrize(
    ("server_first", "match"),
    [
        (_server_first(i="0"), "iteration count"),
        (_server_first(i="-1"), "iteration count"),
        (_server_first(i="04096"), "iteration count"),
        (_server_first(i="4e3"), "iteration count"),
        (_server_first(i="\u0664\u0660\u0669\u0666"), "UTF-8|iteration count"),  # Arabic digits
        (_server_first(i="4095"), "below the minimum"),
        (_server_first(i="600001"), "above the limit"),
        (_server_first(i="9" * 4000), "above the limit"),
        (_server_first(i=""), "iteration count"),
        (_server_first(salt="c2FsdA"), "bad salt"),  # unpadded
        (_server_first(salt="c2F*dA=="), "bad salt"),
        (_server_first(salt=""), "bad salt"),
        (_server_first(nonce="other" + RFC_CLIENT_NONCE), "nonce"),
        (_server_first(nonce=RFC_CLIENT_NONCE), "nonce"),  # server added nothing
        (_server_first(nonce=RFC_CLIENT_NONCE + "s\x01"), "nonce"),
        (b"r=" + RFC_CLIENT_NONCE.encode() + b"srv,i=4096,s=c2FsdA==", "malformed"),
        (b"r=" + RFC_CLIENT_NONCE.encode() + b"srv,s=c2FsdA==", "malformed"),  # truncated
        (b"m=x," + _server_first(), "extension"),
        (b"", "malformed"),
        (b"\xff\xfe", "UTF-8"),
        (_server_first() + b"," + b"x=" + b"y" * MAX_MESSAGE, "too long"),
    ],
)
def test_scram_client_malformed_server_first(server_first: bytes, match: str) -> None:
    c = _client_after_first()
    with pytest.raises(SaslError, match=match):
        c.respond(server_first)
    with pytest.raises(LocalProtocolError):
        c.respond(server_first)


def test_scram_client_iteration_limits_are_configurable() -> None:
    c = _client_after_first(min_iterations=1, max_iterations=10)
    assert c.respond(_server_first(i="10")).startswith(b"c=biws,r=")
    with pytest.raises(SaslError, match="above the limit of 10"):
        _client_after_first(min_iterations=1, max_iterations=10).respond(_server_first(i="11"))
    with pytest.raises(LocalProtocolError):
        ScramSha256Client("u", "p", min_iterations=0)
    with pytest.raises(LocalProtocolError):
        ScramSha256Client("u", "p", min_iterations=5, max_iterations=4)


@pytest.mark.parametrize(
    "server_final", [b"v=!!", b"v=", b"x=1", b"", b"\x80", b"v=" + RFC_SERVER_FINAL[2:-1]]
)
def test_scram_client_malformed_server_final(server_final: bytes) -> None:
    c = _client_after_first()
    c.respond(RFC_SERVER_FIRST)
    with pytest.raises(SaslError):
        c.respond(server_final)


def test_single_message_clients_refuse_challenges() -> None:
    for c in (AnonymousClient(), PlainClient("u", "p"), ExternalClient()):
        with pytest.raises(LocalProtocolError):
            c.respond(b"")
        c.initial_response()
        with pytest.raises(SaslError, match="no challenge"):
            c.respond(b"challenge")
        with pytest.raises(SaslError, match="additional data"):
            c.verify_final(b"data")
        c.verify_final()


# --------------------------------------------------------------------------
# Misuse and invariants
# --------------------------------------------------------------------------


def test_error_types() -> None:
    e = SaslError("x")
    assert isinstance(e, RemoteProtocolError) and (e.code, e.scope) == (320, "connection")
    a = AuthenticationFailed()
    assert isinstance(a, SaslError) and a.reason == "invalid credentials" and str(a) == GENERIC


def test_server_step_invariants() -> None:
    assert ServerStep.more(b"c") == ServerStep(challenge=b"c", done=False, identity=None)
    assert ServerStep.success("u") == ServerStep(challenge=None, done=True, identity="u")
    assert ServerStep.more(b"").challenge == b""  # an empty challenge is still a challenge
    for bad in (
        dict(),
        dict(challenge=b"x", done=True, identity="u"),
        dict(done=True),
        dict(challenge=b"x", identity="u"),
    ):
        with pytest.raises(LocalProtocolError):
            ServerStep(**bad)


def test_call_order_misuse() -> None:
    s = PlainServer(check_plain)
    with pytest.raises(LocalProtocolError):
        s.step(b"x")
    s.start(b"\x00user\x00pencil")
    with pytest.raises(LocalProtocolError):
        s.start(b"\x00user\x00pencil")
    c = PlainClient("u", "p")
    c.initial_response()
    with pytest.raises(LocalProtocolError):
        c.initial_response()
    scram = rfc_server()
    with pytest.raises(LocalProtocolError):
        scram.step(b"")
    scram.start(RFC_CLIENT_FIRST)
    with pytest.raises(LocalProtocolError):
        scram.start(RFC_CLIENT_FIRST)
    with pytest.raises(LocalProtocolError):
        scram.start("text")  # type: ignore[arg-type]
    sc = fast_client("u", "p")
    with pytest.raises(LocalProtocolError):
        sc.respond(b"r=x")
    sc.initial_response()
    with pytest.raises(LocalProtocolError):
        sc.initial_response()


@pytest.mark.parametrize(
    "make",
    [
        lambda: PlainClient("", "p"),
        lambda: PlainClient("u", ""),
        lambda: PlainClient("u\x00", "p"),
        lambda: PlainClient("u", "p", "\ud800"),
        lambda: ExternalClient("a\x00b"),
        lambda: AnonymousClient("x" * 256),
        lambda: ScramSha256Client("", "p"),
        lambda: ScramSha256Client("u", "\u0007"),
        lambda: ScramSha256Client("u", "p", nonce="a,b"),
        lambda: ScramSha256Client("u", "p", authzid=""),
        lambda: ScramSha256Server(fast_lookup, nonce=""),
        lambda: ScramCredentials.derive("p", b"", 1),
        lambda: ScramCredentials.derive("p", b"s", 0),
        lambda: ScramCredentials(salt=b"s", iterations=1, stored_key=b"k", server_key=b"k" * 32),
    ],
)
def test_bad_local_arguments(make: object) -> None:
    with pytest.raises(LocalProtocolError):
        make()  # type: ignore[operator]


# --------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _server_factories() -> list[tuple[str, object]]:
    return [
        ("anonymous", AnonymousServer),
        ("plain-accept-all", lambda: PlainServer(lambda u, p: True, authorize=lambda a, b: True)),
        ("plain", lambda: PlainServer(check_plain)),
        ("external", lambda: ExternalServer("CN=x")),
        ("external-none", lambda: ExternalServer(None)),
        ("scram", lambda: ScramSha256Server(fast_lookup)),
        ("scram-send-final-off", lambda: ScramSha256Server(fast_lookup, send_server_final=False)),
    ]


def _drive(server: ServerMechanism, messages: list[bytes]) -> None:
    """Feed messages as start then steps, only while challenges are outstanding."""
    try:
        step = server.start(messages[0])
        for msg in messages[1:]:
            if step.done:
                return
            step = server.step(msg)
    except SaslError:
        pass


@FUZZ
@given(
    which=st.sampled_from(_server_factories()),
    messages=st.lists(st.binary(max_size=200), min_size=1, max_size=4),
)
def test_fuzz_server_random_bytes_raise_only_sasl_error(
    which: tuple[str, object], messages: list[bytes]
) -> None:
    _drive(which[1](), messages)  # type: ignore[operator]


_ASCII = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8)


def _mutations(base: bytes) -> st.SearchStrategy[bytes]:
    """Near-valid messages: splice bytes into a valid one, or cut it short."""
    n = len(base)
    filler = st.one_of(st.binary(max_size=8), _ASCII.map(str.encode))
    return st.one_of(
        st.tuples(st.integers(0, n), st.integers(0, n), filler).map(
            lambda t: base[: min(t[0], t[1])] + t[2] + base[max(t[0], t[1]) :]
        ),
        st.integers(0, n).map(lambda k: base[:k]),
        st.sampled_from([b",", b"=", b"=2C", b"=3D", b"\x00", b"\xff", b"p=", b"m="]).flatmap(
            lambda tok: st.integers(0, n).map(lambda k: base[:k] + tok + base[k:])
        ),
    )


def _near_valid(exchange: list[bytes]) -> st.SearchStrategy[list[bytes]]:
    """A valid exchange with one message mutated (so later steps are reached)."""
    return st.integers(0, len(exchange) - 1).flatmap(
        lambda i: _mutations(exchange[i]).map(lambda m: [*exchange[:i], m, *exchange[i + 1 :]])
    )


@FUZZ
@given(messages=_near_valid([RFC_CLIENT_FIRST, RFC_CLIENT_FINAL, b""]))
def test_fuzz_scram_server_near_valid(messages: list[bytes]) -> None:
    _drive(rfc_server(), messages)


@FUZZ
@given(messages=_near_valid([RFC_SERVER_FIRST, RFC_SERVER_FINAL]))
def test_fuzz_scram_client_raises_only_sasl_error(messages: list[bytes]) -> None:
    c = ScramSha256Client("user", "pencil", nonce=RFC_CLIENT_NONCE, max_iterations=5000)
    c.initial_response()
    try:
        c.respond(messages[0])
        c.respond(messages[1])
        c.verify_final()
    except SaslError:
        pass


_text = st.one_of(
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x17F), min_size=1, max_size=12),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12),
)


@FUZZ
@given(user=_text, password=_text, authzid=st.one_of(st.none(), _text))
def test_property_round_trips(user: str, password: str, authzid: str | None) -> None:
    try:
        prepped_user = saslprep(user, allow_unassigned=True)
        prepped_pw = saslprep(password)
    except ValueError:
        return
    if not prepped_user or not prepped_pw:
        return
    creds = ScramCredentials.derive(password, b"salt", FAST_ITER)
    lookup = {prepped_user: creds}.get
    server = ScramSha256Server(lookup, authorize=lambda who, as_: who == prepped_user)
    ident, _ = run(fast_client(user, password, authzid=authzid), server)
    # The wire carries the prepared username, so only that counts as "self".
    assert ident == (authzid if authzid not in (None, prepped_user) else prepped_user)
    # A different password never works.
    with pytest.raises(AuthenticationFailed):
        run(fast_client(user, password + "x"), ScramSha256Server(lookup))
    # PLAIN: the server sees prepared strings.
    plain = PlainServer(
        lambda u, p: (u, p) == (prepped_user, saslprep(password, allow_unassigned=True))
    )
    if "\x00" not in user + password:
        assert run(PlainClient(user, password), plain)[0] == prepped_user


@pytest.mark.parametrize("protocol", ["0-10", "0-9-1"])
@pytest.mark.parametrize("username,password,mechanisms", [
    ("guest", "", ()), ("", "guest", ()), ("guest", "", ("SCRAM-SHA-256",)),
    ("gu\x00est", "guest", ("PLAIN",))])
def test_unusable_credentials_are_refused_when_the_connection_is_configured(
        protocol: str, username: str, password: str, mechanisms: tuple[str, ...]) -> None:
    # Issue 11 finding 8: an empty password used to escape from
    # receive_data as LocalProtocolError once the server's start arrived.
    if protocol == "0-10":
        from amqp_sansio.v0_10.connection import ClientConfig
    else:
        from amqp_sansio.v0_9_1.connection import ClientConfig  # type: ignore[assignment]
    with pytest.raises(LocalProtocolError):
        ClientConfig(username=username, password=password, mechanisms=mechanisms)
    ClientConfig(username="guest", password="guest", mechanisms=mechanisms)  # usable: fine
    ClientConfig(username=username, password=password, mechanisms=("ANONYMOUS",))  # unused
