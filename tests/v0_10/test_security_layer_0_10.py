"""The SASL security-layer hook transforms every octet both ways."""

from __future__ import annotations

from pair_0_10 import ConnectionPair, of_type

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec


def _xor(data: bytes) -> bytes:
    return bytes(b ^ 0x5A for b in data)


def test_layer_applies_to_all_later_traffic() -> None:
    p = ConnectionPair()
    p.open()
    for c in (p.client, p.server):
        c.install_security_layer(_xor, _xor)
    s = p.client.attach(b"s")
    s.send(spec.QueueDeclare(queue="q"))
    raw = p.client.data_to_send()
    assert b"AMQP" not in raw and _xor(raw)[:1] == b"\x0f"  # a frame, transformed
    se = p.server.receive_data(raw, now=0.0)
    assert [type(e) for e in se] == [ev.SessionAttached, ev.CommandReceived]
    p.server.session(s.channel or 0).complete(0)
    ce, _ = p.pump()
    assert of_type(ce, ev.CommandsCompleted)


def test_layer_installs_once() -> None:
    p = ConnectionPair()
    p.open()
    p.client.install_security_layer(_xor, _xor)
    try:
        p.client.install_security_layer(_xor, _xor)
    except LocalProtocolError:
        pass
    else:  # pragma: no cover
        raise AssertionError("second install accepted")


def test_close_reports_the_code_we_sent_and_names_are_bytes() -> None:
    p = ConnectionPair()
    p.open()
    try:
        p.client.attach("text")  # type: ignore[arg-type]
    except LocalProtocolError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a str session name was accepted")
    p.client.close(320, "going away")
    ce, se = p.pump()
    (closed,) = of_type(ce, ev.ConnectionClosed)
    assert (closed.code, closed.text, closed.by_peer) == (320, "going away", False)
    (seen,) = of_type(se, ev.ConnectionClosed)
    assert (seen.code, seen.by_peer) == (320, True)


def test_close_before_the_header_exchange_sends_nothing() -> None:
    from amqp_sansio.v0_10.connection import Connection, Role

    c = Connection(Role.CLIENT)
    c.close()
    assert c.closed and c.data_to_send() == b""
