"""The 0-9-1 (and 0-9) core in the observer role: it is told what a client
sent (``observe_sent``, ``observe``), books it without the local checks,
and judges the server's replies with its own rules and codes."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from pair_0_9_1 import client_cfg, server_cfg

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.v0_9 import connection as c09
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.channel import ChannelState
from amqp_sansio.v0_9_1.connection import Connection, ConnState, Role
from amqp_sansio.v0_9_1.framing import encode_method


class Watch:
    """A client and a server core talking, and an observer core told what
    the client sent and fed what the server sent."""

    def __init__(self, cls: type[Connection] = Connection, **skw: Any) -> None:
        self.cls = cls
        self.srv = cls(Role.SERVER, server_cfg(**skw))
        self.obs = cls(Role.CLIENT, client_cfg(), observer=True)
        self.misuse: list[ev.ObservedMisuse] = []
        self.seen: list[ev.Event] = []  # the observer's events
        cli = cls(Role.CLIENT, client_cfg())
        for _ in range(10):  # the handshake, by a real client
            back = self.send(cli.data_to_send())
            if not back:
                break
            cli.receive_data(back)
        assert self.obs.state is ConnState.OPEN and self.srv.state is ConnState.OPEN
        assert not self.misuse and not self.violations()

    def send(self, data: bytes) -> bytes:
        """The client wrote ``data``: the server reads it and the observer is
        told; what the server answers (returned) the observer reads."""
        if not data:
            return b""  # (b"" would be the end of input)
        self.misuse += self.obs.observe_sent(data)
        with contextlib.suppress(RemoteProtocolError):  # (its close is in its output)
            self.srv.receive_data(data)
        return self.peer(self.srv.data_to_send())

    def peer(self, data: bytes) -> bytes:
        """The server wrote ``data``."""
        if data:
            self.seen += self.obs.receive_data(data)
        assert self.obs.data_to_send() == b""  # it writes nothing of its own
        return data

    def violations(self) -> list[ev.ProtocolViolation]:
        return [e for e in self.seen if isinstance(e, ev.ProtocolViolation)]


def m(ch: int, method: Any) -> bytes:
    return encode_method(ch, method)


def test_a_send_the_local_checks_refuse_is_booked_and_its_answer_is_no_violation() -> None:
    w = Watch()
    # A request pipelined behind channel.open (the client API refuses it:
    # the next test) -- the wire allows it, the peer takes it after the open.
    w.send(m(1, spec.ChannelOpen()) + m(1, spec.QueueDeclare(queue="q")))
    assert not w.misuse
    srv_ch = w.srv.channel(1)
    srv_ch.send(spec.QueueDeclareOk(queue="q", message_count=0, consumer_count=0))
    w.peer(w.srv.data_to_send())
    got = [e for e in w.seen if isinstance(e, ev.MethodReceived)]
    assert [(e.method.NAME, e.request.NAME if e.request else None) for e in got] == [
        ("queue.declare-ok", "queue.declare")]
    assert not w.violations()

    # An ack of a tag never delivered: noted, and the peer's 406 close is
    # the right answer, not a violation.
    w.send(m(1, spec.BasicAck(delivery_tag=7)))
    assert [x.method for x in w.misuse] == ["basic.ack"]
    assert "not outstanding" in w.misuse[0].reason
    srv_ch.close(406, "PRECONDITION_FAILED - unknown delivery tag 7", 60, 80)
    w.peer(w.srv.data_to_send())
    closed = [e for e in w.seen if isinstance(e, ev.ChannelClosed)]
    assert [(e.channel, e.code, e.by_peer) for e in closed] == [(1, 406, True)]
    assert not w.violations()
    # What we send before our close-ok the peer discards: no misuse; the
    # close-ok ends it; a send after that is one.
    w.send(m(1, spec.QueueDeclare(queue="r")))
    assert len(w.misuse) == 1
    w.send(m(1, spec.ChannelCloseOk()))
    w.send(m(1, spec.BasicQos(prefetch_count=1)))
    assert len(w.misuse) == 2 and "not open" in w.misuse[1].reason
    # ...which the peer answers with connection.close(504): right, too.
    closed = [e for e in w.seen if isinstance(e, ev.ConnectionClosed)]
    assert [(e.code, e.by_peer) for e in closed] == [(504, True)]
    assert not w.violations()


def test_the_client_api_refuses_what_the_observer_books() -> None:
    """The same sends through the local API raise: the observer input is
    what differs."""
    cli = Connection(Role.CLIENT, client_cfg())
    srv = Connection(Role.SERVER, server_cfg())
    for _ in range(10):
        srv.receive_data(cli.data_to_send())
        back = srv.data_to_send()
        if not back:
            break
        cli.receive_data(back)
    ch = cli.open_channel(1)
    with pytest.raises(LocalProtocolError):
        ch.send(spec.QueueDeclare(queue="q"))  # before open-ok
    srv.receive_data(cli.data_to_send())
    cli.receive_data(srv.data_to_send())
    with pytest.raises(LocalProtocolError):
        ch.send(spec.BasicAck(delivery_tag=7))


def test_a_peer_violation_is_reported_with_the_code_the_core_would_send() -> None:
    w = Watch()
    w.send(m(1, spec.ChannelOpen()))
    # A reply nobody asked for: 503, connection scope -- as a plain client
    # core would answer it; the observer reports it and reads on.
    w.peer(m(1, spec.QueueDeclareOk(queue="x", message_count=0, consumer_count=0)))
    v = w.violations()
    assert [(x.code, x.scope, x.rule) for x in v] == [(503, "connection",
                                                        "channel.unexpected-reply")]
    plain = Connection(Role.CLIENT, client_cfg())
    _handshake_plain(plain)
    plain.open_channel(1)
    plain.receive_data(m(1, spec.ChannelOpenOk()))
    with pytest.raises(RemoteProtocolError) as info:
        plain.receive_data(m(1, spec.QueueDeclareOk(queue="x", message_count=0,
                                                    consumer_count=0)))
    assert info.value.code == v[0].code
    assert [(x.code, x.rule) for x in info.value.events
            if isinstance(x, ev.ProtocolViolation)] == [(503, "channel.unexpected-reply")]
    assert w.obs.state is ConnState.OPEN and w.obs.channel(1).state is ChannelState.OPEN
    # A confirm on a channel not in confirm mode: a channel error (406); the
    # observer does not close the channel (nobody did on the wire).
    w.peer(m(1, spec.BasicAck(delivery_tag=1)))
    assert [(x.code, x.scope, x.rule) for x in w.violations()[1:]] == [
        (406, "channel", "confirm.unsolicited")]
    assert w.obs.channel(1).state is ChannelState.OPEN
    # A method on a channel we never opened: 504.
    w.peer(m(5, spec.QueueDeclareOk(queue="x", message_count=0, consumer_count=0)))
    assert [(x.code, x.rule) for x in w.violations()[2:]] == [(504, "channel.not-open")]
    # The right answer to a request still passes.
    w.send(m(1, spec.BasicQos(prefetch_count=3)))
    w.srv.channel(1).send(spec.BasicQosOk())
    w.peer(w.srv.data_to_send())
    assert len(w.violations()) == 3


def _handshake_plain(cli: Connection) -> None:
    srv = Connection(Role.SERVER, server_cfg())
    for _ in range(10):
        srv.receive_data(cli.data_to_send())
        back = srv.data_to_send()
        if not back:
            break
        cli.receive_data(back)
    assert cli.state is ConnState.OPEN


def test_undecodable_octets_are_booked_by_their_ids() -> None:
    w = Watch()
    bad = bytearray(m(2, spec.ChannelOpen()))
    bad[11:12] = b"\x09"  # reserved shortstr says 9 octets; there are none
    w.misuse += w.obs.observe_sent(bytes(bad))
    assert [x.method for x in w.misuse] == ["undecodable"]
    assert w.obs.channel(2).state is ChannelState.OPENING
    w.peer(m(2, spec.ChannelOpenOk()))
    assert ev.ChannelOpened(2) in w.seen and not w.violations()


def test_a_late_consume_ok_is_counted_not_reported() -> None:
    """RabbitMQ's dialect: consume-ok may pass later replies; the observer
    books it and counts it (a fuzz monitor reports it as a deviation)."""
    w = Watch()
    w.send(m(1, spec.ChannelOpen()))
    w.send(m(1, spec.BasicConsume(queue="q", consumer_tag="c1"))
           + m(1, spec.BasicQos(prefetch_count=1)))
    w.peer(m(1, spec.BasicQosOk()) + m(1, spec.BasicConsumeOk(consumer_tag="c1")))
    assert not w.violations() and w.obs.channel(1).late_replies == 1
    assert w.obs.channel(1).consumers == {"c1": False}


def test_the_observer_role_is_a_client_s() -> None:
    with pytest.raises(LocalProtocolError):
        Connection(Role.SERVER, server_cfg(), observer=True)
    with pytest.raises(LocalProtocolError):
        Connection(Role.CLIENT, client_cfg()).observe(1, spec.ChannelOpen())


def test_0_9_shares_the_observer_input() -> None:
    w = Watch(c09.Connection)
    w.send(m(1, spec.ChannelOpen()) + m(1, spec.BasicQos(prefetch_count=2)))
    assert not w.misuse
    w.srv.channel(1).send(spec.BasicQosOk())
    w.peer(w.srv.data_to_send())
    got = [e for e in w.seen if isinstance(e, ev.MethodReceived)]
    assert [(e.method.NAME, e.request.NAME if e.request else None) for e in got] == [
        ("basic.qos-ok", "basic.qos")]
    w.peer(m(1, spec.BasicQosOk()))
    assert [(x.code, x.rule) for x in w.violations()] == [(503, "channel.unexpected-reply")]
