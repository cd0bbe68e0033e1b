"""Connection layer (notes §4, checklist §8.3): handshake, SASL, tune,
heartbeats, close, EOF -- both roles, through an in-memory pair or raw bytes
(the helpers ``Net``, ``decode``, ``client_at``, ``server_at`` are in
``tests/support/pair_0_10.py``).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from pair_0_10 import (
    START_OK,
    Net,
    client_at,
    ctl,
    decode,
    names,
    of_type,
    opened,
    raises_remote,
    server_at,
)

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import (
    ClientConfig,
    Connection,
    ConnState,
    Role,
    ServerConfig,
)
from amqp_sansio.v0_10.framing import (
    PROTOCOL_HEADER,
    encode_command,
    encode_control,
)
from amqp_sansio.v0_10.spec import (
    ConnectionClose,
    ConnectionCloseOk,
    ConnectionHeartbeat,
    ConnectionOpen,
    ConnectionOpenOk,
    ConnectionRedirect,
    ConnectionSecure,
    ConnectionSecureOk,
    ConnectionStart,
    ConnectionStartOk,
    ConnectionTune,
    ConnectionTuneOk,
    QueueDeclare,
    SessionAttach,
)

# ---------------------------------------------------------------------------
# Shared helpers


# ---------------------------------------------------------------------------
# Handshake and SASL

GOOD = {"guest": "secret", "zoë": "pässword"}


def check_password(user: str, password: str) -> bool:
    return GOOD.get(user) == password


_SCRAM = {u: sasl.ScramCredentials.derive(p, salt=b"salt-" + u.encode(), iterations=4096)
          for u, p in GOOD.items()}


def authenticator() -> sasl.ServerAuthenticator:
    return sasl.ServerAuthenticator.standard(check_password=check_password, anonymous=True,
                                             scram_lookup=_SCRAM.get)


def test_client_first_output_is_the_protocol_header() -> None:
    c = Connection(Role.CLIENT)
    assert c.data_to_send() == PROTOCOL_HEADER
    assert c.data_to_send() == b""
    assert c.state is ConnState.AWAIT_HEADER
    assert Connection(Role.SERVER).data_to_send() == b""


def test_wrong_config_type_is_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        Connection(Role.CLIENT, ServerConfig())
    with pytest.raises(LocalProtocolError):
        Connection(Role.SERVER, ClientConfig())


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_anonymous_handshake(seed: int | None) -> None:
    net = opened(seed=seed)
    (co,) = of_type(net.client_events, ev.ConnectionOpened)
    (so,) = of_type(net.server_events, ev.ConnectionOpened)
    assert co.mechanism == so.mechanism == "ANONYMOUS"
    assert so.identity == "anonymous"
    assert co.virtual_host == so.virtual_host == "/"
    assert co.peer_properties["product"] == "amqp-sansio"
    assert net.errors == {"client": [], "server": []}
    assert net.client.virtual_host == net.server.virtual_host == "/"


def test_server_start_offers_mechanisms_and_en_us() -> None:
    s = Connection(Role.SERVER, ServerConfig(authenticator=authenticator()))
    s.receive_data(PROTOCOL_HEADER)
    out = s.data_to_send()
    (start,) = decode(out, header=True)
    assert isinstance(start, ConnectionStart)
    assert list(start.mechanisms) == ["SCRAM-SHA-256", "PLAIN", "ANONYMOUS"]
    assert "en_US" in start.locales


def test_client_start_ok_picks_offered_mechanism_and_locale() -> None:
    cfg = ClientConfig(mechanisms=("PLAIN", "ANONYMOUS"), username="u", password="p",
                       locale="fr_FR")
    c = client_at(ConnState.AWAIT_START, cfg)
    c.receive_data(ctl(ConnectionStart(mechanisms=["ANONYMOUS"], locales=["de_DE", "en_US"])))
    (ok,) = decode(c.data_to_send())
    assert isinstance(ok, ConnectionStartOk)
    assert ok.mechanism == "ANONYMOUS"
    assert ok.locale in ("de_DE", "en_US")
    assert c.state is ConnState.AWAIT_TUNE


def test_client_no_common_mechanism_closes_320() -> None:
    cfg = ClientConfig(mechanisms=("PLAIN",), username="u", password="p")
    c = client_at(ConnState.AWAIT_START, cfg)
    err = raises_remote(c, ctl(ConnectionStart(mechanisms=["ANONYMOUS"], locales=["en_US"])))
    assert err.code == 320
    assert c.closed
    assert [type(x) for x in decode(c.data_to_send())] == [ConnectionClose]


@pytest.mark.parametrize("user,password", [("guest", "secret"), ("zoë", "pässword")])
def test_plain_good_password(user: str, password: str) -> None:
    net = opened(ClientConfig(mechanisms=("PLAIN",), username=user, password=password),
                 ServerConfig(authenticator=authenticator()))
    (so,) = of_type(net.server_events, ev.ConnectionOpened)
    assert so.mechanism == "PLAIN" and so.identity == user
    assert net.server.identity == user


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256"])
@pytest.mark.parametrize("user,password", [("guest", "wrong"), ("nobody", "secret")])
def test_bad_credentials_close_320_and_no_session(mech: str, user: str, password: str) -> None:
    net = Net(ClientConfig(mechanisms=(mech,), username=user, password=password),
              ServerConfig(authenticator=authenticator()), chunker=random.Random(7))
    net.pump()
    assert net.client.closed and net.server.closed
    (err,) = net.errors["server"]
    assert err.code == 320
    (closed,) = of_type(net.client_events, ev.ConnectionClosed)
    assert closed.code == 320 and closed.by_peer
    assert not of_type(net.client_events, ev.ConnectionOpened)
    assert not of_type(net.server_events, ev.ConnectionOpened)
    # The error text never contains the password, and says what failed once.
    assert password not in (closed.text or "")
    assert (closed.text or "").lower().count("authentication failed") == 1, closed.text
    with pytest.raises(LocalProtocolError):
        net.client.attach(b"s")
    with pytest.raises(LocalProtocolError):
        net.server.attach(b"s")


@pytest.mark.parametrize("response", [b"\0guest\0wrong", b"no separators"])
def test_refused_login_says_authentication_failed_once(response: bytes) -> None:
    # Wrong password (AuthenticationFailed) or a malformed response (SaslError):
    # the close text names the failure once, whichever the mechanism raised.
    s = server_at(ConnState.AWAIT_START_OK, ServerConfig(authenticator=authenticator()))
    err = raises_remote(s, ctl(ConnectionStartOk(mechanism="PLAIN", response=response,
                                                 locale="en_US")))
    (close,) = [x for x in decode(s.data_to_send()) if isinstance(x, ConnectionClose)]
    assert close.reply_code == 320
    for text in (close.reply_text, err.message):
        assert text.lower().count("authentication failed") == 1, text


def test_scram_secure_rounds() -> None:
    net = Net(ClientConfig(username="guest", password="secret"),
              ServerConfig(authenticator=authenticator()))
    # Record the connection controls each way.
    seen: list[str] = []
    for _ in range(20):
        c2s = net.client.data_to_send()
        s2c = net.server.data_to_send()
        if not c2s and not s2c:
            break
        seen += ["C:" + n for n in names(c2s[8:] if c2s.startswith(b"AMQP") else c2s)]
        seen += ["S:" + n for n in names(s2c[8:] if s2c.startswith(b"AMQP") else s2c)]
        if c2s:
            net.feed("server", c2s)
        if s2c:
            net.feed("client", s2c)
    assert net.client.state is ConnState.OPEN and net.server.state is ConnState.OPEN
    c_seen = [x for x in seen if x.startswith("C:")]
    s_seen = [x for x in seen if x.startswith("S:")]
    assert c_seen[:3] == ["C:connection.start-ok", "C:connection.secure-ok",
                          "C:connection.secure-ok"]
    assert s_seen[:4] == ["S:connection.start", "S:connection.secure", "S:connection.secure",
                          "S:connection.tune"]
    assert net.server.identity == "guest"
    assert net.client.mechanism == "SCRAM-SHA-256"


def test_server_rejects_unoffered_mechanism_by_dropping() -> None:
    s = server_at(ConnState.AWAIT_START_OK)
    err = raises_remote(s, ctl(ConnectionStartOk(mechanism="CRAM-MD5", response=b"x",
                                                 locale="en_US")))
    assert s.closed
    assert s.data_to_send() == b""  # no close: the socket is simply dropped
    (pv,) = err.events  # type: ignore[attr-defined]
    assert isinstance(pv, ev.ProtocolViolation) and pv.reply == "none"


def test_client_bad_secure_challenge_closes_320() -> None:
    cfg = ClientConfig(mechanisms=("SCRAM-SHA-256",), username="guest", password="secret")
    c = client_at(ConnState.AWAIT_START, cfg)
    c.receive_data(ctl(ConnectionStart(mechanisms=["SCRAM-SHA-256"], locales=["en_US"])))
    c.data_to_send()
    err = raises_remote(c, ctl(ConnectionSecure(challenge=b"garbage")))
    assert err.code == 320
    assert [type(x) for x in decode(c.data_to_send())] == [ConnectionClose]


def test_client_requires_scram_server_final() -> None:
    # A server that skips the SCRAM server-final message: a client that
    # requires mutual authentication must not finish the handshake.
    auth = sasl.ServerAuthenticator({"SCRAM-SHA-256": lambda: sasl.ScramSha256Server(
        _SCRAM.get, send_server_final=False)})
    net = Net(ClientConfig(username="guest", password="secret"),
              ServerConfig(authenticator=auth))
    net.pump()
    (err,) = net.errors["client"]
    assert err.code == 320
    assert net.client.closed and net.server.closed
    assert not of_type(net.client_events, ev.ConnectionOpened)


# ---------------------------------------------------------------------------
# Tune (notes §4.3)


@pytest.mark.parametrize("server_kw,client_kw,expect", [
    (dict(heartbeat_min=5, heartbeat_max=30), dict(heartbeat=10), 10),
    (dict(heartbeat_min=5, heartbeat_max=30), dict(heartbeat=100), 30),
    (dict(heartbeat_min=5, heartbeat_max=30), dict(heartbeat=1), 5),
    (dict(heartbeat_min=5), dict(heartbeat=500), 500),
    (dict(heartbeat_min=5), dict(), 5),
    (dict(), dict(heartbeat=10), None),
    # No preference: the longest the server allows (its offer), none if
    # it sets no upper bound and allows none.
    (dict(heartbeat_min=0, heartbeat_max=10), dict(), 10),
    (dict(heartbeat_min=0, heartbeat_max=10), dict(heartbeat=0), None),
    (dict(heartbeat_min=0), dict(), None),
])
def test_heartbeat_negotiation(server_kw: dict[str, Any], client_kw: dict[str, Any],
                               expect: int | None) -> None:
    net = Net(ClientConfig(**client_kw), ServerConfig(**server_kw))
    tune_ok: list[Any] = []
    # Watch the client's tune-ok go by.
    for _ in range(10):
        out = net.client.data_to_send()
        tune_ok += [x for x in decode(out[8:] if out.startswith(b"AMQP") else out)
                    if isinstance(x, ConnectionTuneOk)]
        if out:
            net.feed("server", out)
        back = net.server.data_to_send()
        if back:
            net.feed("client", back)
        if not out and not back:
            break
    assert net.client.state is ConnState.OPEN and net.server.state is ConnState.OPEN
    assert net.client.heartbeat == net.server.heartbeat == expect
    (tok,) = tune_ok
    if "heartbeat_min" not in server_kw:
        assert tok.heartbeat is None  # never set when the server offered none
    else:
        assert tok.heartbeat is not None
        assert server_kw["heartbeat_min"] <= tok.heartbeat
        assert tok.heartbeat <= server_kw.get("heartbeat_max", 0xFFFF)
    (co,) = of_type(net.client_events, ev.ConnectionOpened)
    assert co.heartbeat == expect


@pytest.mark.parametrize("server_kw,client_kw,channel_max,frame", [
    (dict(channel_max=10, max_frame_size=4096), dict(channel_max=100), 10, 4096),
    (dict(channel_max=100, max_frame_size=8000), dict(channel_max=5, max_frame_size=5000), 5,
     5000),
    (dict(), dict(), 0xFFFF, 0xFFFF),
])
def test_channel_max_and_frame_size_negotiation(server_kw: dict[str, Any],
                                                client_kw: dict[str, Any], channel_max: int,
                                                frame: int) -> None:
    net = opened(ClientConfig(**client_kw), ServerConfig(**server_kw))
    for c in (net.client, net.server):
        assert c.channel_max == channel_max
        assert c.max_frame_size == frame
    # Frames above the agreed size are never written: a big body is split.
    cs, ss = net.sessions(b"big")
    cs.send(QueueDeclare(queue="q" * 200), body=b"x" * (3 * frame))
    raw = net.client.data_to_send()
    pos = 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos + 2:pos + 4], "big")
        assert size <= frame
        pos += size
    net.feed("server", raw)
    (rec,) = of_type(net.server_events, ev.CommandReceived)
    assert rec.body == b"x" * (3 * frame)


def test_channels_at_or_above_channel_max_are_rejected() -> None:
    net = opened(ClientConfig(), ServerConfig(channel_max=4))
    with pytest.raises(LocalProtocolError):
        net.client.attach(b"x", channel=4)
    err = raises_remote(net.server, ctl(SessionAttach(name=b"x"), channel=4))
    assert err.code == 501 and err.channel == 4
    assert [type(x) for x in decode(net.server.data_to_send())] == [ConnectionClose]
    assert net.server.closed


@pytest.mark.parametrize("tune_ok,closes", [
    (ConnectionTuneOk(channel_max=200), False),  # above the offered 100
    (ConnectionTuneOk(channel_max=0), False),
    (ConnectionTuneOk(channel_max=10, max_frame_size=9000), False),  # above 8192
    (ConnectionTuneOk(channel_max=10, max_frame_size=4000), False),  # below 4096
    (ConnectionTuneOk(channel_max=10, heartbeat=3), True),  # below heartbeat-min
    (ConnectionTuneOk(channel_max=10, heartbeat=50), True),  # above heartbeat-max
])
def test_server_rejects_bad_tune_ok(tune_ok: ConnectionTuneOk, closes: bool) -> None:
    s = server_at(ConnState.AWAIT_START_OK, ServerConfig(
        channel_max=100, max_frame_size=8192, heartbeat_min=5, heartbeat_max=30))
    s.receive_data(ctl(START_OK))
    (tune,) = decode(s.data_to_send())
    assert tune == ConnectionTune(channel_max=100, max_frame_size=8192, heartbeat_min=5,
                                  heartbeat_max=30)
    raises_remote(s, ctl(tune_ok))
    assert s.closed
    sent = decode(s.data_to_send())
    # Offers exceeded: the socket is dropped without a negotiated close.
    assert [type(x) for x in sent] == ([ConnectionClose] if closes else [])


def test_server_accepts_tune_ok_within_offer_and_open_in_same_read() -> None:
    s = server_at(ConnState.AWAIT_START_OK, ServerConfig(channel_max=100, max_frame_size=8192,
                                                         heartbeat_min=5, heartbeat_max=30))
    s.receive_data(ctl(START_OK))
    s.data_to_send()
    evs = s.receive_data(ctl(ConnectionTuneOk(channel_max=100, max_frame_size=8192,
                                              heartbeat=30))
                         + ctl(ConnectionOpen(virtual_host="/")))
    assert s.state is ConnState.OPEN
    (opened_,) = of_type(evs, ev.ConnectionOpened)
    assert (opened_.channel_max, opened_.max_frame_size, opened_.heartbeat) == (100, 8192, 30)


def test_server_rejects_heartbeat_when_none_offered() -> None:
    s = server_at(ConnState.AWAIT_TUNE_OK)
    raises_remote(s, ctl(ConnectionTuneOk(channel_max=10, heartbeat=10)))
    assert s.closed


@pytest.mark.parametrize("tune", [
    ConnectionTune(heartbeat_max=10),  # max without min
    ConnectionTune(heartbeat_min=10, heartbeat_max=5),  # max < min
    ConnectionTune(max_frame_size=4095),
    ConnectionTune(channel_max=0),
])
def test_client_rejects_bad_tune(tune: ConnectionTune) -> None:
    c = client_at(ConnState.AWAIT_TUNE)
    err = raises_remote(c, ctl(tune))
    assert err.code == 501
    assert c.closed
    assert [type(x) for x in decode(c.data_to_send())] == [ConnectionClose]


def test_client_pipelines_open_behind_tune_ok() -> None:
    c = client_at(ConnState.AWAIT_TUNE, ClientConfig(virtual_host="vh", channel_max=7))
    c.receive_data(ctl(ConnectionTune(channel_max=100, max_frame_size=8192)))
    tok, op = decode(c.data_to_send())
    assert tok == ConnectionTuneOk(channel_max=7, max_frame_size=8192, heartbeat=None)
    assert isinstance(op, ConnectionOpen) and op.virtual_host == "vh"
    assert c.state is ConnState.AWAIT_OPEN_OK


# ---------------------------------------------------------------------------
# Protocol header and pre-open traffic


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("header", [b"AMQP\x00\x00\x09\x01", b"AMQP\x01\x01\x00\x09",
                                    b"HTTP/1.1", b"AMQP\x01\x01\x01\x00"])
def test_bad_protocol_header(role: Role, header: bytes) -> None:
    conn = Connection(role)
    conn.data_to_send()
    evs: list[ev.Event] = []
    for b in header:  # one octet at a time
        evs += conn.receive_data(bytes([b]))
        if conn.closed:
            break
    (mm,) = of_type(evs, ev.ProtocolHeaderMismatch)
    if header.startswith(b"AMQP"):
        assert (mm.protocol_class, mm.instance, mm.major, mm.minor) == tuple(header[4:])
    assert conn.closed
    out = conn.data_to_send()
    # The server tells the peer what it speaks, then drops: no control.
    assert out == (PROTOCOL_HEADER if role is Role.SERVER else b"")
    assert conn.receive_data(b"more") == []


@pytest.mark.parametrize("role", list(Role))
def test_header_split_into_single_octets_then_frames(role: Role) -> None:
    net = Net(chunker=None)
    # Deliver every octet separately in both directions.
    for _ in range(20):
        moved = False
        for src, side in ((net.client, "server"), (net.server, "client")):
            data = src.data_to_send()
            for b in data:
                net.feed(side, bytes([b]))
            moved = moved or bool(data)
        if not moved:
            break
    assert net.client.state is ConnState.OPEN and net.server.state is ConnState.OPEN
    assert net.errors == {"client": [], "server": []}


@pytest.mark.parametrize("data", [
    ctl(SessionAttach(name=b"x"), channel=1),
    encode_command(1, QueueDeclare(queue="q")),
])
def test_session_traffic_before_open_is_a_connection_error(data: bytes) -> None:
    for conn in (server_at(ConnState.AWAIT_START_OK), server_at(ConnState.AWAIT_OPEN),
                 client_at(ConnState.AWAIT_START), client_at(ConnState.AWAIT_OPEN_OK)):
        err = raises_remote(conn, data)
        assert err.code == 501 and err.scope == "connection"
        assert conn.closed
        assert not of_type(err.events, ev.SessionAttached)  # type: ignore[attr-defined]


@pytest.mark.parametrize("c", [ConnectionOpen(virtual_host="/"), ConnectionTuneOk(channel_max=1),
                               ConnectionSecureOk(response=b"")])
def test_server_out_of_order_handshake_control_drops(c: Any) -> None:
    s = server_at(ConnState.AWAIT_START_OK)
    raises_remote(s, ctl(c))
    assert s.closed and s.data_to_send() == b""


@pytest.mark.parametrize("c", [ConnectionOpenOk(), ConnectionTune(), ConnectionSecure(
    challenge=b""), ConnectionRedirect(host="h")])
def test_client_out_of_order_handshake_control_closes(c: Any) -> None:
    conn = client_at(ConnState.AWAIT_START)
    err = raises_remote(conn, ctl(c))
    assert err.code == 501
    assert [type(x) for x in decode(conn.data_to_send())] == [ConnectionClose]


def test_attach_before_open_is_local_error() -> None:
    for conn in (client_at(ConnState.AWAIT_START), server_at(ConnState.AWAIT_OPEN)):
        before = conn.state
        with pytest.raises(LocalProtocolError):
            conn.attach(b"s")
        assert conn.state is before and conn.data_to_send() == b""


# ---------------------------------------------------------------------------
# Virtual hosts, redirect, insist


def test_unknown_virtual_host_closes_402() -> None:
    net = Net(ClientConfig(virtual_host="nope"), ServerConfig(virtual_hosts=["/", "a"]))
    net.pump()
    (pv,) = of_type(net.server_events, ev.ProtocolViolation)
    assert pv.code == 402 and pv.reply == "connection.close"
    (closed,) = of_type(net.client_events, ev.ConnectionClosed)
    assert closed.code == 402 and closed.by_peer
    assert net.client.closed and net.server.closed
    assert not of_type(net.client_events, ev.ConnectionOpened)


def test_virtual_host_callable_sees_identity() -> None:
    seen: list[tuple[str, str | None]] = []

    def allow(vhost: str, identity: str | None) -> bool:
        seen.append((vhost, identity))
        return identity == "guest"

    auth = authenticator()
    plain = ClientConfig(virtual_host="v", mechanisms=("PLAIN",), username="guest",
                         password="secret")
    opened(plain, ServerConfig(authenticator=auth, virtual_hosts=allow))
    net = Net(ClientConfig(virtual_host="v", mechanisms=("ANONYMOUS",)),
              ServerConfig(authenticator=auth, virtual_hosts=allow))
    net.pump()
    assert of_type(net.client_events, ev.ConnectionClosed)[0].code == 402
    assert seen == [("v", "guest"), ("v", "anonymous")]


def test_redirect_and_insist() -> None:
    cfg = ServerConfig(redirect=lambda vhost: "other:5672" if vhost == "/" else None,
                       known_hosts=("a:1", "b:2"))
    net = Net(ClientConfig(), cfg)
    net.pump()
    (red,) = of_type(net.client_events, ev.ConnectionRedirected)
    assert red.host == "other:5672" and red.known_hosts == ("a:1", "b:2")
    assert net.client.closed and net.server.closed
    assert not of_type(net.client_events, ev.ConnectionOpened)
    with pytest.raises(LocalProtocolError):
        net.client.attach(b"s")
    # insist: the server must not redirect.
    net = opened(ClientConfig(insist=True), cfg)
    (co,) = of_type(net.client_events, ev.ConnectionOpened)
    assert co.known_hosts == ("a:1", "b:2")
    assert not of_type(net.client_events, ev.ConnectionRedirected)
    # A vhost the redirect function declines is served here.
    opened(ClientConfig(virtual_host="local"), cfg)


# ---------------------------------------------------------------------------
# Heartbeats (fake time)


def test_heartbeats_sent_when_idle_and_timeout_after_twice() -> None:
    net = Net(ClientConfig(heartbeat=10), ServerConfig(heartbeat_min=1, heartbeat_max=60))
    net.now = 100.0
    net.pump()
    c, s = net.client, net.server
    assert c.heartbeat == s.heartbeat == 10
    assert c.next_deadline() == 110.0
    assert c.handle_timer(105.0) == [] and c.data_to_send() == b""
    assert c.handle_timer(110.0) == []
    hb = c.data_to_send()
    assert decode(hb) == [ConnectionHeartbeat()]
    assert c.handle_timer(111.0) == [] and c.data_to_send() == b""  # not again so soon
    assert s.receive_data(hb, now=111.0) == [ev.HeartbeatReceived()]
    # The server's own output has been idle since 100: it sends one too.
    assert s.handle_timer(112.0) == []
    assert decode(s.data_to_send()) == [ConnectionHeartbeat()]
    # Input at 111 keeps the server alive until 131.
    assert s.handle_timer(130.0) == [] and not s.closed
    # The client heard nothing since 100: dead after 120.
    assert c.next_deadline() is not None and c.next_deadline() <= 120.0  # type: ignore[operator]
    assert c.handle_timer(119.9) == []
    assert not c.closed
    # Waking exactly at next_deadline() must fire (an I/O loop would spin).
    evs = c.handle_timer(c.next_deadline())  # type: ignore[arg-type]
    assert isinstance(evs[0], ev.HeartbeatTimeout) and evs[0].idle == pytest.approx(20.0)
    assert of_type(evs, ev.ConnectionLost)
    assert c.closed
    assert c.handle_timer(200.0) == [] and c.next_deadline() is None


def test_input_keeps_connection_alive() -> None:
    net = Net(ClientConfig(heartbeat=5), ServerConfig(heartbeat_min=5))
    net.pump()
    for t in range(1, 60):
        net.now = float(t)
        for conn in (net.client, net.server):
            assert conn.handle_timer(float(t)) == []
        net.pump()
    assert net.client.state is ConnState.OPEN and net.server.state is ConnState.OPEN
    assert len(of_type(net.server_events, ev.HeartbeatReceived)) >= 10
    assert len(of_type(net.client_events, ev.HeartbeatReceived)) >= 10


def test_no_heartbeats_when_not_negotiated() -> None:
    net = Net(ClientConfig(heartbeat=10), ServerConfig())
    net.pump()
    for conn in (net.client, net.server):
        assert conn.heartbeat is None and conn.next_deadline() is None
        for t in (10.0, 100.0, 1e6):
            assert conn.handle_timer(t) == []
        assert conn.data_to_send() == b""
        assert conn.state is ConnState.OPEN


def test_heartbeat_accepted_during_handshake() -> None:
    c = client_at(ConnState.AWAIT_TUNE)
    assert c.receive_data(ctl(ConnectionHeartbeat())) == [ev.HeartbeatReceived()]
    s = server_at(ConnState.AWAIT_TUNE_OK)
    assert s.receive_data(ctl(ConnectionHeartbeat())) == [ev.HeartbeatReceived()]
    assert c.state is ConnState.AWAIT_TUNE and s.state is ConnState.AWAIT_TUNE_OK


# ---------------------------------------------------------------------------
# Close and EOF


@pytest.mark.parametrize("closer", ["client", "server"])
def test_close_handshake(closer: str) -> None:
    net = opened(seed=3)
    cs, ss = net.sessions(b"s")
    net.conn(closer).close(320 if closer == "server" else 200, "bye")
    assert net.conn(closer).state is ConnState.CLOSING
    with pytest.raises(LocalProtocolError):
        net.conn(closer).close()
    with pytest.raises(LocalProtocolError):
        net.conn(closer).attach(b"t")
    net.pump()
    other = "server" if closer == "client" else "client"
    (mine,) = of_type(net.client_events if closer == "client" else net.server_events,
                      ev.ConnectionClosed)
    (theirs,) = of_type(net.client_events if other == "client" else net.server_events,
                        ev.ConnectionClosed)
    assert not mine.by_peer and theirs.by_peer
    assert theirs.code == (320 if closer == "server" else 200) and theirs.text == "bye"
    assert net.client.closed and net.server.closed
    assert net.client.sessions == {} and net.server.sessions == {}
    # Further input is ignored; nothing more goes out.
    for side in ("client", "server"):
        assert net.conn(side).receive_data(b"\x00" * 40) == []
        assert net.conn(side).data_to_send() == b""
    with pytest.raises(LocalProtocolError):
        cs.send(QueueDeclare(queue="q"))


def test_simultaneous_close() -> None:
    net = opened(seed=5)
    net.client.close(200, "c")
    net.server.close(200, "s")
    net.pump()
    assert net.client.closed and net.server.closed
    assert len(of_type(net.client_events, ev.ConnectionClosed)) == 1
    assert len(of_type(net.server_events, ev.ConnectionClosed)) == 1
    assert net.errors == {"client": [], "server": []}


@pytest.mark.parametrize("state", [ConnState.AWAIT_START, ConnState.AWAIT_TUNE,
                                   ConnState.AWAIT_OPEN_OK])
def test_client_close_during_handshake(state: ConnState) -> None:
    c = client_at(state)
    c.close(200, "changed my mind")
    assert c.state is ConnState.CLOSING
    assert [type(x) for x in decode(c.data_to_send())] == [ConnectionClose]
    # Everything but the close handshake is discarded while closing.
    assert c.receive_data(ctl(ConnectionOpenOk())) == []
    assert c.receive_data(ctl(ConnectionCloseOk())) == [
        ev.ConnectionClosed(200, "changed my mind", False)]  # what our close said
    assert c.closed


@pytest.mark.parametrize("state", [ConnState.AWAIT_START_OK, ConnState.AWAIT_TUNE_OK,
                                   ConnState.AWAIT_OPEN])
def test_peer_close_during_handshake(state: ConnState) -> None:
    s = server_at(state)
    evs = s.receive_data(ctl(ConnectionClose(reply_code=200, reply_text="bye")))
    assert evs == [ev.ConnectionClosed(200, "bye", True)]
    assert decode(s.data_to_send()) == [ConnectionCloseOk()]
    assert s.closed


def test_close_before_header() -> None:
    for role in Role:
        conn = Connection(role)
        conn.close()
        assert conn.closed
        with pytest.raises(LocalProtocolError):
            conn.close()


@pytest.mark.parametrize("state", [ConnState.AWAIT_HEADER, ConnState.AWAIT_START,
                                   ConnState.AWAIT_OPEN_OK, ConnState.OPEN])
def test_eof_is_connection_lost(state: ConnState) -> None:
    c = client_at(state)
    evs = c.receive_data(b"")
    assert [type(e) for e in evs] == [ev.ConnectionLost]
    assert c.closed
    assert c.receive_data(b"") == [] and c.receive_data(b"x") == []


def test_eof_mid_frame_and_while_closing() -> None:
    net = opened()
    cs, ss = net.sessions(b"s")
    cs.send(QueueDeclare(queue="q"))
    data = net.client.data_to_send()
    assert net.feed("server", data[:7]) == []
    (lost,) = net.feed("server", b"")
    assert isinstance(lost, ev.ConnectionLost)
    assert net.server.sessions == {}
    net = opened()
    net.client.close()
    (lost,) = net.feed("client", b"")
    assert isinstance(lost, ev.ConnectionLost)


def test_garbage_frame_after_open_closes_501() -> None:
    net = opened()
    before = len(net.server_events)
    evs = net.feed("server", b"\xff" * 24)
    (err,) = net.errors["server"]
    assert err.code == 501
    assert of_type(evs, ev.ProtocolViolation)[0].reply == "connection.close"
    assert len(net.server_events) > before
    assert net.server.closed
    net.pump()
    (closed,) = of_type(net.client_events, ev.ConnectionClosed)
    assert closed.code == 501 and closed.by_peer


def test_oversized_frame_before_tune_is_501() -> None:
    s = server_at(ConnState.AWAIT_START_OK)
    big = ConnectionStartOk(mechanism="ANONYMOUS", response=b"x" * 5000, locale="en_US")
    data = encode_control(0, big, max_frame_size=0xFFFF)
    err = raises_remote(s, data)
    assert err.code == 501 and s.closed


def test_events_before_a_violation_are_kept() -> None:
    net = opened()
    cs, ss = net.sessions(b"s")
    cs.send(QueueDeclare(queue="a"))
    good = net.client.data_to_send()
    err = raises_remote(net.server, good + b"\x00" * 12)
    got = of_type(err.events, ev.CommandReceived)  # type: ignore[attr-defined]
    assert [g.command for g in got] == [QueueDeclare(queue="a")]


def _unfinished_control_segment(frames: int) -> bytes:
    """``frames`` full-size (4096) frames of one control segment on channel 0,
    never finished (no last-frame flag)."""
    out = b""
    for k in range(frames):
        flags = 0x08 | (0x02 if k == 0 else 0)  # first segment; first frame once
        out += bytes([flags, 0]) + (4096).to_bytes(2, "big") + bytes(8) + bytes(4084)
    return out


def test_before_open_a_peer_pins_at_most_a_handshake_segment() -> None:
    # Issue 11 finding 5: 100 unauthenticated connections each pinned ~4 MB
    # (the open-connection segment limit) before the handshake was through.
    conn = server_at(ConnState.AWAIT_START_OK)
    from amqp_sansio.v0_10.connection import HANDSHAKE_SEGMENT_SIZE

    fits = HANDSHAKE_SEGMENT_SIZE // 4084 - 1
    conn.receive_data(_unfinished_control_segment(fits), 0.0)
    assert conn.buffered_input <= HANDSHAKE_SEGMENT_SIZE
    err = raises_remote(conn, _unfinished_control_segment(2))
    assert err.code == 501 and conn.closed


def test_after_open_the_configured_segment_limit_applies() -> None:
    net = opened(ClientConfig(), ServerConfig(max_segment_size=1 << 20))
    before = net.server.buffered_input
    net.feed("server", _unfinished_control_segment(100))  # 400 KB: allowed once open
    assert not net.server.closed and net.server.buffered_input > before + 300_000
    net.feed("server", _unfinished_control_segment(200))
    assert net.server.closed and net.errors["server"][0].code == 501
