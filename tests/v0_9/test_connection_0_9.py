"""AMQP 0-9 in memory, both roles: the 0-9-1 state machines with 0-9's table."""

from __future__ import annotations

import pytest
from pair_0_9_1 import GUEST, pump

from amqp_sansio import registry
from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v0_9 import spec
from amqp_sansio.v0_9.connection import ClientConfig, Connection, Role, ServerConfig
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec as spec091
from amqp_sansio.v0_9_1.channel import Channel
from amqp_sansio.v0_9_1.connection import Connection as Connection091
from amqp_sansio.v0_9_1.framing import encode_method

HEADER_0_9 = b"AMQP\x01\x01\x00\x09"


def open_pair() -> tuple[Connection, Connection, Channel, Channel]:
    cli = Connection(Role.CLIENT, ClientConfig(username="guest", password="pw"))
    srv = Connection(Role.SERVER, ServerConfig(authenticator=GUEST))
    assert cli.data_to_send(0.0)[:8] == HEADER_0_9  # what a 0-9 client opens with
    srv.receive_data(HEADER_0_9, 0.0)
    ec, es = pump(cli, srv, 0.0)
    assert [type(e) for e in ec] == [ev.ConnectionOpened]
    assert [type(e) for e in es] == [ev.ConnectionOpened]
    assert es[0].identity == "guest"  # type: ignore[attr-defined]
    ch = cli.open_channel()
    ec, es = pump(cli, srv)
    assert ec == [ev.ChannelOpened(ch.id)] and es == [ev.ChannelOpened(ch.id)]
    return cli, srv, ch, srv.channel(ch.id)


def test_registry_knows_0_9_by_its_header() -> None:
    info = registry.by_header(HEADER_0_9)
    assert info is not None and info.name == "0-9"
    mod = info.load()
    assert mod.Connection is Connection and mod.PROTOCOL_HEADER == HEADER_0_9


def test_handshake_both_roles_and_close() -> None:
    cli, srv, ch, sch = open_pair()
    assert repr(cli).startswith("<Connection 0-9 client OPEN")
    cli.close()
    ec, es = pump(cli, srv)
    assert cli.closed and srv.closed
    assert [type(e) for e in ec] == [ev.ConnectionClosed]
    assert [type(e) for e in es] == [ev.ConnectionClosed]


def test_headers_of_the_family_do_not_mix() -> None:
    """A 0-9 server closes on a 0-9-1 header without sending anything (0-9's
    rule; 0-9-1's server would answer with its header); a 0-9-1 client that
    gets 0-9's header reads it as a mismatch naming 0-9's version octets."""
    srv = Connection(Role.SERVER)
    events = srv.receive_data(b"AMQP\x00\x00\x09\x01", 0.0)
    assert [type(e) for e in events] == [ev.ProtocolHeaderMismatch]
    assert srv.data_to_send() == b"" and srv.closed
    cli = Connection091(Role.CLIENT, ClientConfig(username="guest", password="pw"))
    mism = cli.receive_data(HEADER_0_9, 0.0)
    assert [type(e) for e in mism] == [ev.ProtocolHeaderMismatch]
    assert (mism[0].major, mism[0].minor) == (0, 9)  # type: ignore[attr-defined]


def test_access_request_is_answered_with_a_ticket() -> None:
    cli, srv, ch, sch = open_pair()
    req = spec.AccessRequest(realm="/data", exclusive=False, passive=True, active=True,
                             write=True, read=True)
    ch.send(req)
    ec, es = pump(cli, srv)
    assert es == [ev.MethodReceived(ch.id, req, None)]
    sch.send(spec.AccessRequestOk(ticket=101))
    ec, es = pump(cli, srv)
    assert ec == [ev.MethodReceived(ch.id, spec.AccessRequestOk(ticket=101), req)]


def test_file_and_stream_content_both_ways() -> None:
    """file.stage (0-9: the client's answer to file.open-ok) and
    stream.publish carry content with their classes' properties;
    stream.deliver goes back."""
    cli, srv, ch, sch = open_pair()
    ch.send(spec.FileOpen(identifier="f1", content_size=5))
    pump(cli, srv)
    sch.send(spec.FileOpenOk(staged_size=0))
    ec, _ = pump(cli, srv)
    assert ec == [ev.MethodReceived(ch.id, spec.FileOpenOk(), spec.FileOpen(identifier="f1",
                                                                              content_size=5))]
    fprops = spec.FileProperties(content_type="text/plain", filename="a.txt", priority=4,
                                 headers={"k": "v"})
    ch.send_content(spec.FileStage(), fprops, b"hello")
    ch.send(spec.FilePublish(exchange="amq.direct", routing_key="k", identifier="f1"))
    ec, es = pump(cli, srv)
    assert es == [ev.MessageReceived(ch.id, spec.FileStage(), fprops, b"hello",
                                     spec.FileOpenOk()),
                  ev.MethodReceived(ch.id, spec.FilePublish(exchange="amq.direct",
                                                            routing_key="k",
                                                            identifier="f1"), None)]
    sprops = spec.StreamProperties(content_type="application/octet-stream", priority=1)
    ch.send_content(spec.StreamPublish(exchange="amq.direct", routing_key="s"), sprops,
                    b"x" * 300_000)
    ec, es = pump(cli, srv)
    [got] = es
    assert isinstance(got, ev.MessageReceived) and got.properties == sprops
    assert got.body == b"x" * 300_000
    deliver = spec.StreamDeliver(consumer_tag="c", delivery_tag=1, exchange="amq.direct",
                                 queue="q")
    sch.send_content(deliver, sprops, b"s")
    ec, es = pump(cli, srv)
    assert ec == [ev.MessageReceived(ch.id, deliver, sprops, b"s", None)]


def test_basic_books_and_0_9s_recover() -> None:
    """basic is 0-9-1's own classes: deliveries are booked, and 0-9's
    basic.recover (60, 100) clears the books as 0-9-1's recover-async does."""
    cli, srv, ch, sch = open_pair()
    ch.send(spec091.BasicConsume(queue="q", consumer_tag="c"))
    pump(cli, srv)
    sch.send(spec091.BasicConsumeOk(consumer_tag="c"))
    pump(cli, srv)
    for tag in (1, 2):
        sch.send_content(spec091.BasicDeliver(consumer_tag="c", delivery_tag=tag,
                                              routing_key="q"), None, b"m")
    ec, _ = pump(cli, srv)
    assert [type(e) for e in ec] == [ev.MessageReceived] * 2
    assert sorted(ch.unacked) == [1, 2]
    ch.send(spec.BasicRecover(requeue=True))
    assert not ch.unacked
    _, es = pump(cli, srv)
    assert es == [ev.MethodReceived(ch.id, spec.BasicRecover(requeue=True), None)]


def test_0_9_only_method_without_its_reply_is_a_connection_error() -> None:
    """Replies are matched with 0-9's table: an unasked file.qos-ok is 503."""
    cli, srv, ch, sch = open_pair()
    with pytest.raises(RemoteProtocolError) as e:
        cli.receive_data(encode_method(ch.id, spec.FileQosOk()))
    assert e.value.code == 503 and "file.qos-ok" in str(e.value)
