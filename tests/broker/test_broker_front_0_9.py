"""An AMQP 0-9 client conversation with the broker, in memory: the project's
0-9 client core (the 0-9-1 core with 0-9's table) and a broker connection
that chose the 0-9 front end by the header ``AMQP 1 1 0 9``."""

from __future__ import annotations

from typing import Any

from broker_client_0_9_1 import Client
from socket_client_0_9_1 import SocketClient, has

from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9.connection import Connection as Connection09
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio_broker.front_0_9 import FILENAME
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread


def replies(events: list[ev.Event]) -> list[Any]:
    return [e.method for e in events if isinstance(e, ev.MethodReceived | ev.MessageReceived)]


def test_the_header_picks_the_0_9_front_end_and_access_gets_a_ticket() -> None:
    c = Client(Broker(), Connection09)
    assert c.server.protocol == "0-9"
    caps = c.conn.peer_properties["capabilities"]
    assert caps["consumer_cancel_notify"] and "publisher_confirms" not in caps
    assert "basic.nack" not in caps and "exchange_exchange_bindings" not in caps
    ch = c.channel()
    got = c.call(ch, spec09.AccessRequest(realm="/data", active=True, read=True, write=True))
    assert replies(got) == [spec09.AccessRequestOk(ticket=1)]


def test_basic_content_round_trip_and_0_9s_recover() -> None:
    c = Client(Broker(), Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="q"))
    ch.publish("", "q", b"one", spec.BasicProperties(content_type="text/plain"))
    got = c.call(ch, spec.BasicConsume(queue="q", consumer_tag="c1"))
    [msg] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert msg.body == b"one" and msg.properties.content_type == "text/plain"
    assert not msg.method.redelivered
    # 0-9's basic.recover (60, 100): the unacknowledged delivery comes again
    got = c.call(ch, spec09.BasicRecover(requeue=True))
    [again] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert again.body == b"one" and again.method.redelivered
    ch.ack(again.method.delivery_tag)
    c.pump()
    got = c.call(ch, spec.BasicGet(queue="q"))
    assert [type(m) for m in replies(got)] == [spec.BasicGetEmpty]


def test_file_content_staged_published_and_delivered() -> None:
    """C:open S:open-ok C:stage C:publish, then file.consume: S:open C:open-ok
    S:stage S:deliver, C:ack."""
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="files"))
    got = c.call(ch, spec09.FileOpen(identifier="f1", content_size=5))
    assert replies(got) == [spec09.FileOpenOk(staged_size=0)]
    props = spec09.FileProperties(content_type="text/plain", filename="a.txt",
                                  headers={"k": "v"}, message_id="m1")
    ch.send_content(spec09.FileStage(), props, b"hello")
    c.call(ch, spec09.FilePublish(exchange="", routing_key="files", identifier="f1"))
    got = c.call(ch, spec09.FileConsume(queue="files", consumer_tag="fc"))
    assert replies(got)[0] == spec09.FileConsumeOk(consumer_tag="fc")
    [opened] = [m for m in replies(got) if isinstance(m, spec09.FileOpen)]
    assert opened.content_size == 5
    got = c.call(ch, spec09.FileOpenOk(staged_size=0))
    [staged] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert staged.method == spec09.FileStage() and staged.body == b"hello"
    assert staged.properties == props
    [deliver] = [m for m in replies(got) if isinstance(m, spec09.FileDeliver)]
    assert (deliver.consumer_tag, deliver.routing_key, deliver.identifier) == (
        "fc", "files", opened.identifier)
    c.call(ch, spec09.FileAck(delivery_tag=deliver.delivery_tag))
    q = b.vhost("/").queues["files"]
    assert not q.messages and not any(True for _ in b.services["0-9"].held())


def test_file_and_stream_content_cross_to_0_9_1() -> None:
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="x9"))
    c.call(ch, spec09.FileOpen(identifier="f", content_size=1))
    ch.send_content(spec09.FileStage(), spec09.FileProperties(filename="n.bin", priority=3),
                    b"F")
    c.call(ch, spec09.FilePublish(exchange="", routing_key="x9", identifier="f"))
    ch.send_content(spec09.StreamPublish(exchange="", routing_key="x9"),
                    spec09.StreamProperties(content_type="a/b"), b"S")
    c.pump()
    other = Client(b)
    assert other.server.protocol == "0-9-1"
    och = other.channel()
    got = other.call(och, spec.BasicGet(queue="x9", no_ack=True))
    [f] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert f.body == b"F" and f.properties.priority == 3
    assert f.properties.headers == {FILENAME: "n.bin"}
    got = other.call(och, spec.BasicGet(queue="x9", no_ack=True))
    [s] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert s.body == b"S" and s.properties.content_type == "a/b"


def test_stream_consume_and_unroutable_returns() -> None:
    c = Client(Broker(), Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="s"))
    got = c.call(ch, spec09.StreamConsume(queue="s", consumer_tag="sc"))
    assert replies(got) == [spec09.StreamConsumeOk(consumer_tag="sc")]
    sp = spec09.StreamProperties(content_type="x/y", priority=2)
    ch.send_content(spec09.StreamPublish(exchange="", routing_key="s"), sp, b"tick")
    got = c.pump()
    [d] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert d.method == spec09.StreamDeliver(consumer_tag="sc", delivery_tag=1, exchange="",
                                            queue="s")
    assert d.properties == sp and d.body == b"tick"
    ch.send_content(spec09.StreamPublish(exchange="", routing_key="nowhere", mandatory=True),
                    sp, b"lost")
    got = c.pump()
    [r] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert isinstance(r.method, spec09.StreamReturn) and r.method.reply_code == 312
    assert r.body == b"lost"


def test_0_9_conversation_over_a_socket() -> None:
    """basic and file content through the broker's TCP server."""
    host, port, stop = start_broker_thread(Broker())
    c = SocketClient(host, port, Connection09, username="guest", password="guest")
    try:
        c.until(has(ev.ConnectionOpened))
        ch = c.conn.open_channel()
        c.until(has(ev.ChannelOpened))
        ch.send(spec09.AccessRequest(realm="/data", active=True, read=True, write=True))
        ch.send(spec.QueueDeclare(queue="sq"))
        ch.send(spec09.FileOpen(identifier="f", content_size=4))
        got = c.until(has(ev.MethodReceived, 3))
        assert [type(m) for m in replies(got)] == [spec09.AccessRequestOk,
                                                   spec.QueueDeclareOk, spec09.FileOpenOk]
        ch.send_content(spec09.FileStage(), spec09.FileProperties(filename="x"), b"file")
        ch.send(spec09.FilePublish(exchange="", routing_key="sq", identifier="f"))
        ch.publish("", "sq", b"basic")
        ch.send(spec.BasicGet(queue="sq", no_ack=True))
        ch.send(spec.BasicGet(queue="sq", no_ack=True))
        got = c.until(has(ev.MessageReceived, 2))
        assert [e.body for e in got if isinstance(e, ev.MessageReceived)] == [b"file", b"basic"]
        c.conn.close()
        got = c.until(has(ev.ConnectionClosed))
        assert c.conn.closed
    finally:
        c.close()
        stop()


def _stage(c: Client, ch: Any, ident: str, body: bytes, size: int | None = None) -> list[Any]:
    got = replies(c.call(ch, spec09.FileOpen(identifier=ident, content_size=len(body)
                                             if size is None else size)))
    ch.send_content(spec09.FileStage(), spec09.FileProperties(filename="f"), body)
    c.pump()
    return got


def test_staged_content_outlives_its_connection_and_is_reopened() -> None:
    """A client that staged a file and lost its connection opens the same
    identifier again: open-ok says what is staged, and publish takes it."""
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="files"))
    assert _stage(c, ch, "big", b"x" * 100) == [spec09.FileOpenOk(staged_size=0)]
    assert b.staging.by_holder[c.server.front] > 100
    c.server.connection_lost(2.0)
    assert not b.staging.by_holder and b.staging.octets > 100  # kept, on no connection
    c2 = Client(b, Connection09)
    ch2 = c2.channel()
    got = replies(c2.call(ch2, spec09.FileOpen(identifier="big", content_size=100)))
    assert got == [spec09.FileOpenOk(staged_size=100)]
    c2.call(ch2, spec09.FilePublish(exchange="", routing_key="files", identifier="big"))
    assert [m.body for m in b.vhost("/").queues["files"].messages] == [b"x" * 100]
    assert b.staging.octets == 0 and not b.staging.entries


def test_staged_content_left_behind_expires() -> None:
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    _stage(c, ch, "gone", b"abc")
    c.server.connection_lost(5.0)
    assert b.next_deadline() == 5.0 + b.limits.staged_ttl
    b.handle_timer(5.0 + b.limits.staged_ttl)
    assert not b.staging.entries and b.staging.octets == 0


def test_staging_is_bounded_per_connection() -> None:
    from amqp_sansio_broker.limits import Limits

    b = Broker(limits=Limits(staged_per_connection=1200))
    c = Client(b, Connection09)
    ch = c.channel()
    _stage(c, ch, "a", b"y" * 600)
    got = c.call(ch, spec09.FileOpen(identifier="b", content_size=600))
    ch.send_content(spec09.FileStage(), spec09.FileProperties(), b"z" * 600)
    got += c.pump()
    closed = [e for e in got if isinstance(e, ev.ConnectionClosed)]
    assert closed and closed[0].code == 506  # resource-error: nothing more was kept
    assert len(b.staging.entries["file", "guest", "a"].data) == 600
    assert len(b.staging.entries["file", "guest", "b"].data) == 0


def test_open_over_the_message_size_limit_is_refused() -> None:
    from amqp_sansio_broker.limits import Limits

    b = Broker(limits=Limits(max_message_size=1 << 20))
    c = Client(b, Connection09)
    ch = c.channel()
    got = c.call(ch, spec09.FileOpen(identifier="huge", content_size=1 << 62))
    closed = [e for e in got if isinstance(e, ev.ConnectionClosed)]
    assert closed and closed[0].code == 506 and not b.staging.entries


def test_a_wrong_header_on_a_0_9_listener_closes_without_a_word() -> None:
    """0-9: a server that cannot support the header closes the socket without
    sending any response (0-9-1's rule, the header back, is not 0-9's)."""
    b = Broker(protocols=("0-9",))
    conn = b.connection()
    conn.receive_data(b"AMQP\x00\x00\x09\x01", 1.0)
    assert conn.data_to_send() == b"" and conn.closed
    b2 = Broker()  # the default listener: 0-10 first, which answers with its header
    conn2 = b2.connection()
    conn2.receive_data(b"AMQP\x00\x00\x09\x02", 1.0)
    assert conn2.data_to_send().startswith(b"AMQP")


def test_the_broker_redirects_0_9_clients_when_configured() -> None:
    from amqp_sansio.events import ConnectionRedirected
    from amqp_sansio.v0_9_1.connection import ClientConfig, Role

    b = Broker(redirect="elsewhere:5999")
    conn = b.connection()
    core = Connection09(Role.CLIENT, ClientConfig(username="guest", password="guest"))
    got: list[Any] = []
    for _ in range(20):
        if out := core.data_to_send():
            conn.receive_data(out, 1.0)
        if back := conn.data_to_send():
            got += core.receive_data(back, 1.0)
    assert ConnectionRedirected("elsewhere:5999", ()) in got
    assert core.closed and conn.closed


def test_dtx_select_start_and_coordination_over_0_10() -> None:
    """0-9's dtx on the broker's dtx: publishes and acks after dtx.start are
    the branch's; a 0-10 session (the coordinator) prepares and commits."""
    from amqp_sansio.v0_10 import spec as spec10
    from amqp_sansio.v0_10.connection import ClientConfig as Config10
    from amqp_sansio.v0_10.connection import Connection as Core10
    from amqp_sansio.v0_10.connection import Role as Role10

    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="dq"))
    got = replies(c.call(ch, spec09.DtxSelect()))
    assert got == [spec09.DtxSelectOk()]
    assert replies(c.call(ch, spec09.DtxStart(dtx_identifier="branch-1"))) == [
        spec09.DtxStartOk()]
    ch.publish("", "dq", b"in-branch", spec.BasicProperties())
    c.pump()
    q = b.vhost("/").queues["dq"]
    assert not q.messages  # the branch's until it commits
    ch.close()  # the channel's part of the branch is done
    c.pump()
    # the coordinator: any 0-10 session
    core = Core10(Role10.CLIENT, Config10(username="guest", password="guest"))
    conn = b.connection()
    events: list[Any] = []

    def pump() -> None:
        for _ in range(20):
            if out := core.data_to_send():
                conn.receive_data(out, 1.0)
            if back := conn.data_to_send():
                events.extend(core.receive_data(back, 1.0))

    pump()
    s = core.attach(b"tm")
    pump()
    xid = spec10.Xid(format=0, global_id=b"branch-1", branch_id=b"")
    s.send(spec10.DtxPrepare(xid=xid))
    s.send(spec10.DtxCommit(xid=xid, one_phase=False))
    pump()
    from amqp_sansio.v0_10 import events as ev10

    results = [e.value.status for e in events if isinstance(e, ev10.ResultReceived)]
    assert results == [0, 0]  # xa-ok twice
    assert [m.body for m in q.messages] == [b"in-branch"]


def test_a_tunnel_request_reaches_its_proxys_queue() -> None:
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="proxy-7"))
    ch.send_content(spec09.TunnelRequest(meta_data={"seq": 3}),
                    spec09.TunnelProperties(headers={"h": "v"}, proxy_name="proxy-7",
                                            data_name="frame", durable=1, broadcast=0),
                    b"\x01\x02")
    c.pump()
    other = Client(b)
    och = other.channel()
    got = other.call(och, spec.BasicGet(queue="proxy-7", no_ack=True))
    [m] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert m.body == b"\x01\x02"
    assert m.properties.type == "frame" and m.properties.delivery_mode == 2
    assert m.properties.headers == {"h": "v", "x-amqp-0-9-tunnel-meta-data": {"seq": 3}}


def test_the_message_class_transfer_consume_ok_and_reject() -> None:
    """0-9's work-in-progress message class: C:transfer S:ok; C:consume
    S:ok, then S:transfer answered by C:ok (acknowledged) or C:reject."""
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="mq"))
    for body in (b"one", b"two"):
        got = c.call(ch, spec09.MessageTransfer(
            destination="", routing_key="mq", content_type="text/plain", ttl=60_000,
            application_headers={"k": 1}, body=body))
        assert replies(got) == [spec09.MessageOk()]
    got = c.call(ch, spec09.MessageConsume(queue="mq", destination="d1"))
    ms = replies(got)
    assert ms[0] == spec09.MessageOk()
    transfers = [m for m in ms if isinstance(m, spec09.MessageTransfer)]
    assert [t.body for t in transfers] == [b"one", b"two"]
    assert transfers[0].destination == "d1" and transfers[0].content_type == "text/plain"
    assert transfers[0].application_headers == {"k": 1} and transfers[0].ttl == 60_000
    ch.send(spec09.MessageOk())  # the first: acknowledged
    ch.send(spec09.MessageReject(code=0, text="no"))  # the second: dead-lettered (dropped)
    c.pump()
    q = b.vhost("/").queues["mq"]
    assert not q.messages and not list(b.services["0-9"].held())


def test_the_message_class_get_and_empty_and_cross_protocol() -> None:
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="mg"))
    got = replies(c.call(ch, spec09.MessageGet(queue="mg", destination="g")))
    assert got == [spec09.MessageEmpty()]
    other = Client(b)  # a 0-9-1 publisher
    och = other.channel()
    och.publish("", "mg", b"from-091", spec.BasicProperties(content_type="a/b",
                                                             message_id="id-1"))
    other.pump()
    got = replies(c.call(ch, spec09.MessageGet(queue="mg", destination="g", no_ack=True)))
    [t] = [m for m in got if isinstance(m, spec09.MessageTransfer)]
    assert (t.body, t.content_type, t.message_id, t.destination) == (
        b"from-091", "a/b", "id-1", "g")
    assert got[-1] == spec09.MessageOk()


def test_message_references_checkpoint_and_resume() -> None:
    """A body sent by reference in pieces; a checkpoint outlives the
    connection and resume opens the reference from it (offset)."""
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="mr"))
    assert replies(c.call(ch, spec09.MessageOpen(reference=b"r1"))) == [spec09.MessageOk()]
    c.call(ch, spec09.MessageAppend(reference=b"r1", bytes=b"hello "))
    c.call(ch, spec09.MessageCheckpoint(reference=b"r1", identifier="cp-1"))
    c.server.connection_lost(2.0)  # cut: the reference goes, the checkpoint stays
    c2 = Client(b, Connection09)
    ch2 = c2.channel()
    got = replies(c2.call(ch2, spec09.MessageResume(reference=b"r2", identifier="cp-1")))
    assert got == [spec09.MessageOffset(value=6)]
    c2.call(ch2, spec09.MessageAppend(reference=b"r2", bytes=b"world"))
    c2.call(ch2, spec09.MessageClose(reference=b"r2"))
    got = replies(c2.call(ch2, spec09.MessageTransfer(destination="", routing_key="mr",
                                                      body_kind=1, body=b"r2")))
    assert got == [spec09.MessageOk()]
    assert [m.body for m in b.vhost("/").queues["mr"].messages] == [b"hello world"]
    got = replies(c2.call(ch2, spec09.MessageResume(reference=b"r3", identifier="nope")))
    assert got == [spec09.MessageOffset(value=0)]


def test_every_0_9_method_a_client_sends_is_handled() -> None:
    """No 0-9 method a client may send is answered 540 for want of a
    handler (the README's checklist gives what is refused, and why)."""
    from amqp_sansio.v0_9.spec import METHODS
    from amqp_sansio_broker.front_0_9 import Connection09 as Front09

    server_bound = [m for m in METHODS.values() if "server" in m.CHASSIS]
    missing = {m.NAME for m in server_bound if m not in Front09.HANDLERS}
    # replies the core matches to what the broker sent (the front end reads them
    # as answers, not requests), and content the front end takes as a publish
    assert missing <= {"channel.open", "channel.close", "channel.close-ok", "channel.flow",
                       "channel.flow-ok", "basic.publish", "file.stage", "stream.publish",
                       "tunnel.request", "message.ok", "message.reject", "message.offset",
                       "message.empty", "basic.ack", "basic.cancel-ok",
                       "channel.ok"} | {m.NAME for m in server_bound
                                                        if m.CLASS_ID == 10}, missing


def test_channel_ping_is_answered_ok_then_pong_and_resume_is_refused() -> None:
    c = Client(Broker(), Connection09)
    ch = c.channel()
    got = replies(c.call(ch, spec09.ChannelPing()))
    assert got == [spec09.ChannelOk(), spec09.ChannelPong()]
    ch.send(spec09.ChannelOk())  # our answer to its pong
    assert replies(c.call(ch, spec09.ChannelPong())) == [spec09.ChannelOk()]
    got = c.call(ch, spec09.ChannelResume(channel_id=b"old"))
    [closed] = [e for e in got if isinstance(e, ev.ChannelClosed)]
    assert closed.code == 404


def test_immediate_stream_content_without_a_ready_consumer_is_returned() -> None:
    c = Client(Broker(), Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="idle"))
    ch.send_content(spec09.StreamPublish(exchange="", routing_key="idle", immediate=True),
                    spec09.StreamProperties(), b"now")
    got = c.pump()
    [r] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert isinstance(r.method, spec09.StreamReturn) and r.method.reply_code == 313


def test_a_stage_cut_by_the_transport_keeps_what_arrived() -> None:
    b = Broker()
    c = Client(b, Connection09)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="cut"))
    body = bytes(range(256)) * 4096  # 1 MiB: body frames of frame-max (128 KiB)
    c.call(ch, spec09.FileOpen(identifier="cut-1", content_size=len(body)))
    ch.send_content(spec09.FileStage(), spec09.FileProperties(filename="c"), body)
    out = c.conn.data_to_send()
    c.server.receive_data(out[:len(out) * 3 // 4], 2.0)
    c.server.connection_lost(2.0)
    kept = b.staging.find("file", "guest", "cut-1")
    assert kept is not None and 0 < len(kept.data) < len(body)
    had = len(kept.data)
    c2 = Client(b, Connection09)
    ch2 = c2.channel()
    got = replies(c2.call(ch2, spec09.FileOpen(identifier="cut-1", content_size=len(body))))
    assert got == [spec09.FileOpenOk(staged_size=had)]
    ch2.send_content(spec09.FileStage(), spec09.FileProperties(filename="c"), body[had:])
    c2.call(ch2, spec09.FilePublish(exchange="", routing_key="cut", identifier="cut-1"))
    assert [m.body for m in b.vhost("/").queues["cut"].messages] == [body]


def test_0_9_honours_basic_immediate_and_prefetch_size() -> None:
    """0-9 defines both; 0-9-1's front end refuses them as RabbitMQ does (and
    so does our client core in its default "rabbit" dialect)."""
    c = Client(Broker(), Connection09, dialect="spec")
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="bi"))
    ch.publish("", "bi", b"now", spec.BasicProperties(), immediate=True)
    got = c.pump()
    [r] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert isinstance(r.method, spec.BasicReturn) and r.method.reply_code == 313
    for body in (b"a" * 60, b"b" * 60):
        ch.publish("", "bi", body, spec.BasicProperties())
    got = replies(c.call(ch, spec.BasicQos(prefetch_size=100, prefetch_count=0)))
    assert got == [spec.BasicQosOk()]
    got = c.call(ch, spec.BasicConsume(queue="bi", consumer_tag="w"))
    assert [e.body for e in got if isinstance(e, ev.MessageReceived)] == [b"a" * 60]
    ch.publish("", "bi", b"now", spec.BasicProperties(), immediate=True)  # a consumer: queued
    got = c.pump()
    assert not [e for e in got if isinstance(e, ev.MessageReceived)
                and isinstance(e.method, spec.BasicReturn)]


def test_a_message_transfer_over_the_frame_max_goes_by_reference() -> None:
    """A body whose message.transfer would not fit the frame-max is sent by
    a reference the broker opens (open, appends, close, then the transfer
    naming it), each answered ok.  Found by the fuzzer (valid:message): the
    inline frame was refused by the encoder and the connection dropped."""
    b = Broker()
    c = Client(b, Connection09, frame_max=4096)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="big"))
    body = bytes(range(256)) * 40  # 10,240 octets
    ch.publish("", "big", body, spec.BasicProperties(content_type="a/b"))
    c.pump()
    ms = replies(c.call(ch, spec09.MessageConsume(queue="big", destination="d")))
    assert ms[0] == spec09.MessageOk()
    opens = [m for m in ms if isinstance(m, spec09.MessageOpen)]
    appends = [m for m in ms if isinstance(m, spec09.MessageAppend)]
    closes = [m for m in ms if isinstance(m, spec09.MessageClose)]
    [t] = [m for m in ms if isinstance(m, spec09.MessageTransfer)]
    assert len(opens) == len(closes) == 1 and len(appends) >= 3
    ref = opens[0].reference
    assert {a.reference for a in appends} == {ref} and closes[0].reference == ref
    assert b"".join(a.bytes for a in appends) == body
    assert (t.body_kind, t.body, t.destination, t.content_type) == (1, ref, "d", "a/b")
    # every method came in a frame within the frame-max (the core checks it)
    assert not [e for e in c.events if isinstance(e, ev.ProtocolViolation)]
    for _ in range(len(ms) - 1):  # open, appends, close, transfer: each answered ok
        ch.send(spec09.MessageOk())
    c.pump()
    assert not b.vhost("/").queues["big"].messages and not list(b.services["0-9"].held())
