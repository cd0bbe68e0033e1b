"""The 1.0 connection layer (and SASL) in memory: handshakes in both roles,
pipelining, limits, idle time-outs under fake time, closing, and the peer's
violations answered with close(error)."""

from __future__ import annotations

from typing import Any

import pytest
from pair_1_0 import Pair, of

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import ClientConfig, Connection, ConnState, Role, ServerConfig
from amqp_sansio.v1_0.framing import EMPTY_FRAME, TYPE_SASL, FrameReader, encode_frame

AUTH = sasl.ServerAuthenticator.standard(
    check_password=lambda u, p: (u, p) == ("user", "pw"),
    scram_lookup=lambda u: sasl.ScramCredentials.derive("pw", salt=b"salt" * 4,
                                                        iterations=4096) if u == "user" else None,
    external_identity="CN=client", anonymous=True)


@pytest.mark.parametrize(("mechanism", "identity"), [
    (lambda: sasl.AnonymousClient(), "anonymous"),
    (lambda: sasl.PlainClient("user", "pw"), "user"),
    (lambda: sasl.ExternalClient(), "CN=client"),
    (lambda: sasl.ScramSha256Client("user", "pw"), "user"),
])
def test_sasl_mechanisms(mechanism: Any, identity: str) -> None:
    p = Pair(ClientConfig(mechanisms=[mechanism]), ServerConfig(authenticator=AUTH))
    ce, se = p.pump()
    assert p.client.state is p.server.state is ConnState.OPENED
    name = mechanism().name
    assert of(ce, ev.SaslCompleted)[0].mechanism == name
    opened = of(se, ev.ConnectionOpened)[0]
    assert opened.identity == identity and opened.mechanism == name
    frames = p.frames("c2s")
    assert p.wire["c2s"].startswith(spec.SASL_HEADER)
    assert [type(f.body).__name__ for f in frames if f.type == TYPE_SASL][0] == "SaslInit"


def test_wrong_password_is_refused() -> None:
    p = Pair(ClientConfig(mechanisms="PLAIN", username="user", password="bad"),
             ServerConfig(authenticator=AUTH))
    ce, se = p.pump()
    assert p.client.closed and p.server.closed
    c = of(ce, ev.ConnectionClosed)[0]
    assert c.condition == "amqp:unauthorized-access" and c.code == 1  # sasl-code auth
    assert p.server.sasl is not None and p.server.sasl.outcome.code is spec.SaslCode.AUTH  # type: ignore[union-attr]


def test_scram_server_proves_itself() -> None:
    """A server that does not know the password cannot complete SCRAM: the
    client refuses its final message."""
    wrong = sasl.ServerAuthenticator.standard(
        scram_lookup=lambda u: sasl.ScramCredentials.derive("other", salt=b"s" * 16,
                                                            iterations=4096))
    p = Pair(ClientConfig(mechanisms="SCRAM-SHA-256", username="user", password="pw"),
             ServerConfig(authenticator=wrong))
    p.pump()
    assert p.server.closed and not p.server.sasl.done  # type: ignore[union-attr]


def test_client_pipelines_open_begin_attach() -> None:
    c = Connection(Role.CLIENT, ClientConfig(sasl=False))
    s = c.begin()
    s.attach_sender("l")
    data = c.data_to_send()
    items = FrameReader().feed(data)
    assert [type(getattr(i, "body", None)).__name__ for i in items] == [
        "NoneType", "Open", "Begin", "Attach"]
    assert c.state is ConnState.OPEN_PIPE


def test_frames_made_during_sasl_wait_for_open() -> None:
    p = Pair(ClientConfig(mechanisms="ANONYMOUS"), ServerConfig(authenticator=AUTH))
    s = p.client.begin()
    s.attach_receiver("r")
    assert b"\x00\x53\x11" not in p.client.data_to_send()[8:]  # only the SASL header so far
    p.client = Connection(Role.CLIENT, ClientConfig(mechanisms="ANONYMOUS"))
    s = p.client.begin()
    s.attach_receiver("r")
    ce, se = p.pump()
    assert of(se, ev.LinkAttachRequested) and of(ce, ev.LinkAttached)


def test_frame_size_limits() -> None:
    c = Connection(Role.CLIENT, ClientConfig(sasl=False))
    s = c.begin()
    with pytest.raises(LocalProtocolError, match="max-frame-size 512"):
        s.attach_sender("l", properties={"big": "x" * 600})
    p = Pair(ClientConfig(sasl=False, max_frame_size=1000), ServerConfig(max_frame_size=700))
    p.pump()
    assert p.client.peer_max_frame_size == 700 and p.server.peer_max_frame_size == 1000
    snd = p.client.begin().attach_sender("l")
    p.pump()
    snd.send(b"x" * 5000)
    p.pump()
    assert all(len(raw) <= 700 for raw in _frame_sizes(bytes(p.wire["c2s"])))
    rcvd = of(p.events["server"], ev.DeliveryReceived)
    assert rcvd[0].payload == b"x" * 5000 and rcvd[0].delivery.frames >= 8


def _frame_sizes(stream: bytes) -> list[bytes]:
    pos, out = 8, []
    while pos < len(stream):
        n = int.from_bytes(stream[pos:pos + 4], "big")
        out.append(stream[pos:pos + n])
        pos += n
    return out


def test_incoming_frame_above_our_max_is_a_framing_error() -> None:
    srv = Connection(Role.SERVER, ServerConfig(max_frame_size=512))
    srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c")))
    big = encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=1, outgoing_window=1,
                                  properties={"x": "y" * 600}))
    with pytest.raises(RemoteProtocolError) as ei:
        srv.receive_data(big)
    assert ei.value.condition == "amqp:connection:framing-error"  # type: ignore[attr-defined]
    out = FrameReader(1 << 16).feed(srv.data_to_send())
    close = [i.body for i in out if isinstance(getattr(i, "body", None), spec.Close)]
    assert close and close[0].error.condition == "amqp:connection:framing-error"
    assert srv.state is ConnState.DISCARDING


def test_channel_max() -> None:
    p = Pair(ClientConfig(channel_max=1), ServerConfig(channel_max=5))
    p.pump()
    p.client.begin()
    p.client.begin()
    with pytest.raises(LocalProtocolError, match="no free channel"):
        p.client.begin()
    srv = Connection(Role.SERVER, ServerConfig(channel_max=2))
    srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c")))
    with pytest.raises(RemoteProtocolError, match="above our channel-max") as ei:
        srv.receive_data(encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=1,
                                                 outgoing_window=1), channel=3))
    assert ei.value.condition == "amqp:connection:framing-error"  # type: ignore[attr-defined]


def test_idle_timeout_sends_empty_frames_and_declares_the_peer_dead() -> None:
    p = Pair(ClientConfig(idle_timeout=10_000), ServerConfig(idle_timeout=4_000))
    p.pump()
    # each advertises half of its threshold
    assert p.server.remote_open.idle_time_out == 5_000  # type: ignore[union-attr]
    assert p.client.remote_open.idle_time_out == 2_000  # type: ignore[union-attr]
    # the client sends an empty frame after 1 s of silence (half the server's 2 s)
    assert p.client.next_deadline() == pytest.approx(1.0)
    p.client.handle_timer(1.0)
    assert p.client.data_to_send() == EMPTY_FRAME
    p.now = 1.0
    assert of(p.server.receive_data(EMPTY_FRAME, now=1.0), ev.HeartbeatReceived)
    # the server hears nothing more: dead after its 4 s
    assert not of(p.server.handle_timer(4.9), ev.HeartbeatTimeout) and not p.server.closed
    assert p.server.data_to_send() == EMPTY_FRAME  # half the client's 5 s have passed
    out = p.server.handle_timer(5.0)
    assert of(out, ev.HeartbeatTimeout) and p.server.closed
    close = [i.body for i in FrameReader(1 << 16, header=False).feed(p.server.data_to_send())
             if isinstance(getattr(i, "body", None), spec.Close)]
    assert close[0].error.condition == "amqp:resource-limit-exceeded"


def test_no_idle_timeout_no_timer() -> None:
    p = Pair()
    p.pump()
    assert p.client.next_deadline() is None and p.server.next_deadline() is None


def test_close_with_error_and_both_closing_at_once() -> None:
    p = Pair()
    p.pump()
    p.client.close(spec.Error(condition="amqp:internal-error", description="bye"))
    ce, se = p.pump()
    closed = of(se, ev.ConnectionClosed)[0]
    assert closed.by_peer and closed.condition == "amqp:internal-error" and closed.text == "bye"
    assert p.client.closed and p.server.closed
    assert not of(ce, ev.ConnectionClosed)[0].by_peer
    q = Pair()
    q.pump()
    q.client.close()
    q.server.close()
    ce, se = q.pump()
    assert q.client.closed and q.server.closed  # each close answered the other's
    with pytest.raises(LocalProtocolError):
        q.client.begin()


def test_nothing_is_written_after_our_close() -> None:
    p = Pair()
    p.pump()
    s = p.client.begin()
    p.pump()
    p.client.close()
    with pytest.raises(LocalProtocolError):
        s.attach_sender("late")
    assert p.client.handle_timer(100.0) == []


def test_header_mismatches() -> None:
    c = Connection(Role.CLIENT, ClientConfig(sasl=False))
    c.data_to_send()
    out = c.receive_data(b"AMQP\x01\x01\x00\x0a")
    m = of(out, ev.ProtocolHeaderMismatch)[0]
    assert (m.protocol_class, m.instance, m.major, m.minor) == (1, 1, 0, 10) and c.closed
    srv = Connection(Role.SERVER, ServerConfig())
    out = srv.receive_data(spec.TLS_HEADER)
    assert of(out, ev.ProtocolHeaderMismatch) and srv.closed
    assert "TLS" in (srv.closed_reason or "")
    assert srv.data_to_send() == spec.AMQP_HEADER  # our header, then the socket goes
    srv = Connection(Role.SERVER, ServerConfig(authenticator=AUTH, require_sasl=True))
    srv.receive_data(spec.AMQP_HEADER)
    assert srv.closed and srv.data_to_send() == spec.SASL_HEADER
    srv = Connection(Role.SERVER, ServerConfig())
    srv.receive_data(b"GET / HTTP/1.1\r\n")
    assert srv.closed
    srv = Connection(Role.SERVER, ServerConfig(authenticator=None))  # SASL refused
    srv.receive_data(spec.SASL_HEADER)
    assert srv.closed and srv.data_to_send() == spec.AMQP_HEADER


@pytest.mark.parametrize(("frames", "condition"), [
    ([encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=1, outgoing_window=1))],
     "amqp:illegal-state"),  # a begin before open
    ([encode_frame(spec.Open(container_id="c"), channel=1)], "amqp:connection:framing-error"),
    ([encode_frame(spec.Open(container_id="c")), encode_frame(spec.Open(container_id="c"))],
     "amqp:illegal-state"),
    ([encode_frame(spec.Open(container_id="c")),
      encode_frame(spec.End(), channel=4)], "amqp:not-found"),
    ([encode_frame(spec.Open(container_id="c")),
      encode_frame(spec.Begin(remote_channel=9, next_outgoing_id=0, incoming_window=1,
                              outgoing_window=1))], "amqp:not-found"),
    ([encode_frame(spec.Open(container_id="c")),
      encode_frame(spec.SaslInit(mechanism="PLAIN"), type=TYPE_SASL)],
     "amqp:connection:framing-error"),
    ([encode_frame(spec.Open.unchecked(container_id="c", max_frame_size=100))],
     "amqp:invalid-field"),
    ([b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x10\x45"], "amqp:decode-error"),
])
def test_peer_violations_close_with_a_condition(frames: list[bytes], condition: str) -> None:
    srv = Connection(Role.SERVER, ServerConfig())
    events: list[Any] = []
    with pytest.raises(RemoteProtocolError) as ei:
        for f in [spec.AMQP_HEADER, *frames]:
            events += srv.receive_data(f)
    e = ei.value
    assert e.condition == condition and e.scope == "connection"  # type: ignore[attr-defined]
    closes = [i.body for i in FrameReader(1 << 16).feed(srv.data_to_send())
              if isinstance(getattr(i, "body", None), spec.Close)]
    assert closes and closes[0].error.condition == condition
    # an open always goes before the close
    assert srv.remote_open is None or srv.state is ConnState.DISCARDING
    assert srv.receive_data(encode_frame(spec.Close())) == [] or srv.closed


def test_violation_keeps_what_came_before() -> None:
    srv = Connection(Role.SERVER, ServerConfig())
    data = (spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c")) + EMPTY_FRAME
            + encode_frame(spec.Open(container_id="again")))
    with pytest.raises(RemoteProtocolError) as ei:
        srv.receive_data(data)
    evs = ei.value.events  # type: ignore[attr-defined]
    assert of(evs, ev.ConnectionOpened) and of(evs, ev.HeartbeatReceived)


def test_eof() -> None:
    p = Pair()
    p.pump()
    out = p.server.receive_data(b"")
    assert of(out, ev.ConnectionLost) and p.server.closed
    assert p.server.receive_data(b"") == []


def test_discarding_ignores_all_but_close() -> None:
    srv = Connection(Role.SERVER, ServerConfig())
    srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c")))
    with pytest.raises(RemoteProtocolError):
        srv.receive_data(encode_frame(spec.End(), channel=3))
    assert srv.state is ConnState.DISCARDING
    srv.data_to_send()
    assert srv.receive_data(encode_frame(spec.End(), channel=3)) == []
    out = srv.receive_data(encode_frame(spec.Close()))
    assert srv.closed and srv.data_to_send() == b""  # no second close
    assert of(out, ev.ConnectionClosed)


def test_config_is_checked() -> None:
    with pytest.raises(LocalProtocolError):
        ClientConfig(max_frame_size=100)
    with pytest.raises(LocalProtocolError):
        ServerConfig(channel_max=70000)
    with pytest.raises(LocalProtocolError):
        Connection(Role.SERVER, ClientConfig())
