"""The tolerated rules of the 0-9-1 (and 0-9) client core (issue 25's
decision): real servers break them, so by default the core goes on as if
they held; an observer core reports each (``tolerated=True``, nothing
sent); ``ClientConfig(strict=True)`` acts on it -- the connection (a
channel rule: the channel) closes with the rule's code."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pair_0_9_1 import client_cfg, pair, pump, server_cfg

from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v0_9 import connection as c09
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.channel import TOLERATED_RULES, ChannelState
from amqp_sansio.v0_9_1.connection import Connection, ConnState, Role
from amqp_sansio.v0_9_1.framing import HEARTBEAT_FRAME, encode_method

MODES = ("default", "observer", "strict")


class Talk:
    """A server core and a client core talking; ``observer``: a second
    client core in the observer role is told what the client sent and reads
    what the server sent; ``strict``: the client is strict."""

    def __init__(self, mode: str, cls: type[Connection] = Connection,
                 dialect: str = "rabbit") -> None:
        self.mode = mode
        self.srv = cls(Role.SERVER, server_cfg())
        self.cli = cls(Role.CLIENT, client_cfg(strict=mode == "strict", dialect=dialect))
        self.obs = cls(Role.CLIENT, client_cfg(dialect=dialect), observer=True) \
            if mode == "observer" else None
        self.seen: list[ev.Event] = []  # the judging core's events (observer or client)
        self.error: RemoteProtocolError | None = None
        for _ in range(10):  # the handshake
            if not self.to_server() and not self.to_client():
                break
        assert self.cli.state is ConnState.OPEN
        self.ch = self.cli.open_channel(1)
        self.flush()
        self.sch = self.srv.channel(1)
        assert self.ch.is_open
        self.seen.clear()

    def to_server(self) -> bytes:
        data = self.cli.data_to_send()
        if data:
            if self.obs is not None:
                self.obs.observe_sent(data)
            self.srv.receive_data(data)
        return data

    def to_client(self, data: bytes | None = None) -> bytes:
        """What the server wrote (``data``: these octets instead)."""
        if data is None:
            data = self.srv.data_to_send()
        if data:
            try:
                got = self.cli.receive_data(data)
            except RemoteProtocolError as e:
                self.error = e
                got = list(e.events)  # type: ignore[attr-defined]
            if self.obs is None:
                self.seen += got
            else:
                self.seen += self.obs.receive_data(data)
                assert self.obs.data_to_send() == b""
        return data

    def flush(self) -> None:
        for _ in range(10):
            if not self.to_server() and not self.to_client():
                break

    def reports(self) -> list[ev.ProtocolViolation]:
        return [e for e in self.seen if isinstance(e, ev.ProtocolViolation)]


def _close_code(t: Talk) -> None:
    t.sch.close(504, "CHANNEL_ERROR - a hard code on a channel")


def _connection_close_code(t: Talk) -> None:
    t.srv.close(404, "NOT_FOUND - a soft code on the connection")


def _declare_ok_name(t: Talk) -> None:
    t.ch.send(spec.QueueDeclare(queue="q"))
    t.to_server()
    t.sch.send(spec.QueueDeclareOk(queue="other", message_count=0, consumer_count=0))


def _consume(t: Talk, tag: str = "ct", no_ack: bool = False) -> None:
    t.ch.send(spec.BasicConsume(queue="q", consumer_tag=tag, no_ack=no_ack))
    t.to_server()
    t.sch.send(spec.BasicConsumeOk(consumer_tag=tag))
    t.to_client()


def _consume_ok_tag(t: Talk) -> None:
    t.ch.send(spec.BasicConsume(queue="q", consumer_tag="mine"))
    t.to_server()
    t.sch.send(spec.BasicConsumeOk(consumer_tag="theirs"))


def _consume_ok_generated_in_use(t: Talk) -> None:
    _consume(t, "amq.ctag-1")
    t.ch.send(spec.BasicConsume(queue="q", consumer_tag=""))
    t.to_server()
    t.sch.send(spec.BasicConsumeOk(consumer_tag="amq.ctag-1"))


def _cancel_ok_tag(t: Talk) -> None:
    _consume(t)
    t.ch.send(spec.BasicCancel(consumer_tag="ct"))
    t.to_server()
    t.sch.send(spec.BasicCancelOk(consumer_tag="other"))


def _flow_ok_active(t: Talk) -> None:
    t.ch.send(spec.ChannelFlow(active=True))
    t.to_server()
    t.srv.data_to_send()  # (the server core answers flow itself: a wrong answer instead)
    t.to_client(encode_method(1, spec.ChannelFlowOk(active=False)))


def _deliver(t: Talk, ctag: str, tag: int) -> None:
    t.sch.send_content(spec.BasicDeliver(consumer_tag=ctag, delivery_tag=tag, exchange="",
                                         routing_key="q"), spec.BasicProperties(), b"x")


def _return(t: Talk, code: int) -> None:
    t.sch.send_content(spec.BasicReturn(reply_code=code, reply_text="", exchange="",
                                        routing_key="q"), spec.BasicProperties(), b"x")


def _return_code(t: Talk) -> None:
    t.ch.publish("", "q", b"x", mandatory=True)
    t.to_server()
    _return(t, 200)


def _return_unsolicited(t: Talk) -> None:
    t.ch.publish("", "q", b"x")  # not mandatory
    t.to_server()
    _return(t, 313)


def _delivery_tag_0(t: Talk) -> None:
    _consume(t, no_ack=True)
    _deliver(t, "ct", 0)


def _delivery_tag_twice(t: Talk) -> None:
    _consume(t, no_ack=True)
    _deliver(t, "ct", 5)
    t.to_client()
    _deliver(t, "ct", 5)


def _deliver_unknown_consumer(t: Talk) -> None:
    _consume(t)
    _deliver(t, "nobody", 1)


def _cancel_unknown(t: Talk) -> None:
    _consume(t)
    t.sch.send(spec.BasicCancel(consumer_tag="nobody", no_wait=True))


# rule, what the server does, the code strict acts with, channel scope, dialect
# (RabbitMQ's matches consume-ok/cancel-ok to requests by tag: another tag
# than the one asked for answers nothing there -- channel.unexpected-reply)
CASES: list[tuple[str, Callable[[Talk], None], int, bool, str]] = [
    ("channel.close-code", _close_code, 502, False, "rabbit"),
    ("connection.close-code", _connection_close_code, 502, False, "rabbit"),
    ("queue.declare-ok-name", _declare_ok_name, 503, False, "rabbit"),
    ("basic.consume-ok-tag", _consume_ok_tag, 503, False, "spec"),
    ("basic.consume-ok-tag", _consume_ok_generated_in_use, 503, False, "rabbit"),
    ("basic.consume-ok-tag", _cancel_ok_tag, 503, False, "spec"),
    ("channel.flow-ok-active", _flow_ok_active, 503, False, "rabbit"),
    ("basic.return-code", _return_code, 502, False, "rabbit"),
    ("basic.return-unsolicited", _return_unsolicited, 406, True, "rabbit"),
    ("basic.delivery-tag", _delivery_tag_0, 406, True, "rabbit"),
    ("basic.delivery-tag", _delivery_tag_twice, 406, True, "rabbit"),
    ("basic.deliver-unknown-consumer", _deliver_unknown_consumer, 406, True, "rabbit"),
    ("basic.cancel-unknown", _cancel_unknown, 406, True, "rabbit"),
]
IDS = [f"{r}-{f.__name__.strip('_')}" for r, f, _, _, _ in CASES]


@pytest.mark.parametrize(("rule", "act", "code", "channel_scope", "dialect"), CASES, ids=IDS)
@pytest.mark.parametrize("mode", MODES)
def test_a_tolerated_rule(mode: str, rule: str, act: Callable[[Talk], None], code: int,
                          channel_scope: bool, dialect: str) -> None:
    t = Talk(mode, dialect=dialect)
    act(t)
    t.to_client()
    got = [(v.rule, v.code, v.scope, v.reply, v.tolerated) for v in t.reports()]
    scope = "channel" if channel_scope else "connection"
    if mode == "default":  # nothing a user sees changes
        assert got == [] and t.error is None
        assert t.cli.state is not ConnState.CLOSING
        if rule != "channel.close-code" and rule != "connection.close-code":
            assert t.ch.is_open
    elif mode == "observer":  # reported, nothing sent, the conversation goes on
        assert got == [(rule, code, scope, "none", True)]
        assert t.obs is not None and t.obs.data_to_send() == b""
        if "close-code" not in rule:
            assert t.obs.channels[1].is_open
    elif channel_scope:  # strict: the channel closes with the rule's code
        assert got == [(rule, code, "channel", "channel.close", False)]
        assert t.error is None and t.ch.state is ChannelState.CLOSING
    else:  # strict: the connection closes with it
        assert got == [(rule, code, "connection", "connection.close", False)]
        assert t.error is not None and t.error.code == code
        assert t.cli.state is ConnState.CLOSING


@pytest.mark.parametrize("mode", MODES)
def test_what_the_rules_allow(mode: str) -> None:
    """A conversation keeping them: no report in any mode."""
    t = Talk(mode)
    _consume(t)
    _deliver(t, "ct", 1)
    t.to_client()
    t.ch.send(spec.BasicGet(queue="q"))
    t.to_server()
    t.sch.send_content(spec.BasicGetOk(delivery_tag=2, redelivered=False, exchange="",
                                       routing_key="q", message_count=0),
                       spec.BasicProperties(), b"x")
    t.to_client()
    t.ch.publish("", "q", b"x", mandatory=True)
    t.to_server()
    _return(t, 313)
    t.to_client()
    t.ch.send(spec.QueueDeclare(queue=""))
    t.to_server()
    t.sch.send(spec.QueueDeclareOk(queue="amq.gen-1", message_count=0, consumer_count=0))
    t.to_client()
    t.sch.send(spec.BasicCancel(consumer_tag="ct", no_wait=True))  # a known consumer
    t.to_client()
    _deliver(t, "ct", 3)  # its last delivery, after the cancel: known, tags rising
    t.to_client()
    t.sch.close(404, "NOT_FOUND")
    t.flush()
    t.srv.close(320, "CONNECTION_FORCED")
    t.flush()
    assert t.reports() == [] and t.error is None


def test_the_rabbit_dialect_takes_312_and_the_spec_dialect_does_not() -> None:
    """RabbitMQ returns unroutable mandatory publishes with 312 NO_ROUTE
    (0-9's code): its dialect lets that pass even when strict."""
    for dialect, want in (("rabbit", []), ("spec", ["basic.return-code"])):
        t = Talk("strict", dialect=dialect)
        t.ch.publish("", "nowhere", b"x", mandatory=True)
        t.to_server()
        _return(t, 312)
        t.to_client()
        assert [v.rule for v in t.reports()] == want


def test_0_9_shares_the_rules_with_its_own_codes() -> None:
    """0-9 defines 312 (no-route) and 310 as soft codes: a return with
    either is no fault there, and its tolerated rules are the same."""
    t = Talk("observer", c09.Connection)
    t.ch.publish("", "nowhere", b"x", mandatory=True)
    t.ch.publish("", "nowhere", b"x", mandatory=True)
    t.to_server()
    _return(t, 312)
    _return(t, 310)
    t.to_client()
    assert t.reports() == []
    _deliver_unknown_consumer(t)
    t.to_client()
    assert [(v.rule, v.tolerated) for v in t.reports()] == [
        ("basic.deliver-unknown-consumer", True)]


def _client_closes_channel_hard(cli: Connection, srv: Connection) -> bytes:
    cli.channels[1].close(504, "CHANNEL_ERROR")
    return cli.data_to_send()


def _client_closes_connection_soft(cli: Connection, srv: Connection) -> bytes:
    cli.close(404, "NOT_FOUND")
    return cli.data_to_send()


def _client_flow_ok_wrong(cli: Connection, srv: Connection) -> bytes:
    srv.channel(1).send(spec.ChannelFlow(active=False))
    cli.receive_data(srv.data_to_send())
    cli.data_to_send()  # (the client core's own flow-ok: a wrong one instead)
    return encode_method(1, spec.ChannelFlowOk(active=True))


# the tolerated rules a client can break: ServerConfig(strict=True) acts on them
SERVER_CASES = [("channel.close-code", _client_closes_channel_hard, 502),
                ("connection.close-code", _client_closes_connection_soft, 502),
                ("channel.flow-ok-active", _client_flow_ok_wrong, 503)]


@pytest.mark.parametrize(("rule", "act", "code"), SERVER_CASES,
                         ids=[r for r, _, _ in SERVER_CASES])
@pytest.mark.parametrize("strict", [False, True])
def test_a_strict_server_acts_on_the_rules_a_client_breaks(
        strict: bool, rule: str, act: Callable[[Connection, Connection], bytes],
        code: int) -> None:
    """0-9-1's ServerConfig has ``strict`` as its ClientConfig (and 0-10's
    and 1.0's configs) do: the server closes the connection with the
    rule's code; by default the client's fault passes."""
    cli, srv = pair(skw={"strict": strict})
    cli.open_channel(1)
    pump(cli, srv)
    try:
        got = srv.receive_data(act(cli, srv))
    except RemoteProtocolError as e:
        assert strict and e.code == code
        got = list(e.events)  # type: ignore[attr-defined]
    reports = [(v.rule, v.code, v.reply) for v in got if isinstance(v, ev.ProtocolViolation)]
    if strict:
        assert reports == [(rule, code, "connection.close")]
        assert srv.state is ConnState.CLOSING
    else:
        assert reports == [] and srv.state is not ConnState.CLOSING


def test_strict_is_off_by_default_and_every_tolerated_rule_is_tested() -> None:
    assert client_cfg().strict is False and server_cfg().strict is False
    assert sorted({rule for rule, *_ in CASES} | {"connection.after-close"}) == sorted(
        TOLERATED_RULES)


_CLOSE = encode_method(0, spec.ConnectionClose(reply_code=320, reply_text="CONNECTION_FORCED"))
_CLOSE_OK = encode_method(0, spec.ConnectionCloseOk())
_LATE = encode_method(1, spec.QueueDeclareOk(queue="q", message_count=0, consumer_count=0))


def _after_close(t: Talk, reads: list[bytes], n: int, close_ok: bool = False) -> None:
    """connection.after-close, ``n`` times: reported to an observer
    (nothing sent), raised with 505 under strict (nothing sent after the
    close-ok it owes, if any), dropped by default."""
    for data in reads:
        t.to_client(data)
    got = [(v.rule, v.code, v.scope, v.reply, v.tolerated) for v in t.reports()]
    if t.mode == "default":
        assert got == [] and t.error is None
    elif t.mode == "observer":
        assert got == [("connection.after-close", 505, "connection", "none", True)] * n
        assert t.obs is not None and t.obs.data_to_send() == b""
    else:
        assert got == [("connection.after-close", 505, "connection", "none", False)][:n]
        assert (t.error is not None and t.error.code == 505) is (n > 0)
        assert t.cli.data_to_send() == (_CLOSE_OK if close_ok else b"")
    judge = t.obs if t.obs is not None else t.cli
    assert judge.closed


@pytest.mark.parametrize("same_read", [False, True], ids=["later-read", "same-read"])
@pytest.mark.parametrize("mode", MODES)
def test_connection_after_close(mode: str, same_read: bool) -> None:
    """A frame after the peer's connection.close, in the same read or a later one."""
    t = Talk(mode)
    _after_close(t, [_CLOSE + _LATE] if same_read else [_CLOSE, _LATE], 1, close_ok=True)


@pytest.mark.parametrize("mode", MODES)
def test_connection_after_close_allows_heartbeats_then_not_a_close_ok(mode: str) -> None:
    """Heartbeats go on during the close; a close-ok nobody asked for
    (we did not close) does not; nor does anything after close-ok."""
    t = Talk(mode)
    _after_close(t, [_CLOSE + HEARTBEAT_FRAME, HEARTBEAT_FRAME], 0, close_ok=True)
    _after_close(t, [_CLOSE_OK], 1)


@pytest.mark.parametrize("same_read", [False, True], ids=["later-read", "same-read"])
@pytest.mark.parametrize("mode", MODES)
def test_connection_after_close_crossing_closes(mode: str, same_read: bool) -> None:
    """Our close crossing the peer's: its close-ok answering ours may
    follow its close (heartbeats between), nothing after that close-ok."""
    t = Talk(mode)
    t.cli.close(200, "bye")
    t.to_server()  # (the observer is told; the server's answer is not read)
    t.cli.data_to_send()
    reads = [_CLOSE + HEARTBEAT_FRAME + _CLOSE_OK]
    if not same_read:
        reads = [_CLOSE, HEARTBEAT_FRAME, _CLOSE_OK]
    _after_close(t, reads, 0, close_ok=True)
    closed = [e for e in t.seen if isinstance(e, ev.ConnectionClosed)]
    assert [e.by_peer for e in closed] == [False]  # (the close-ok ended it)
    t.seen.clear()
    _after_close(t, [HEARTBEAT_FRAME], 1)


@pytest.mark.parametrize("mode", MODES)
def test_connection_after_close_reads_no_further_than_frames(mode: str) -> None:
    """Nothing after a close is decoded: an undecodable method is one
    report like any frame; a broken frame ends what is judged."""
    t = Talk(mode)
    junk = encode_method(1, spec.QueueDeclareOk(queue="q", message_count=0,
                                                consumer_count=0))[:-2] + b"\xce"
    junk = junk[:3] + (len(junk) - 8).to_bytes(4, "big") + junk[7:]
    _after_close(t, [_CLOSE, junk + b"\x01\x00\x00\x00\x00\x00\x01\x00\x00" + _LATE], 1,
                 close_ok=True)


def test_0_9_shares_connection_after_close() -> None:
    t = Talk("observer", c09.Connection)
    t.to_client(_CLOSE + HEARTBEAT_FRAME + _LATE)
    assert [(v.rule, v.message) for v in t.reports()] == [
        ("connection.after-close", "queue.declare-ok on channel 1 after its connection.close")]


def test_the_observed_close_may_cross_after_the_peer_closed() -> None:
    """The observed client wrote its close before it read the peer's: the
    peer's close-ok to it is allowed (once), as when ours went first."""
    t = Talk("observer")
    t.to_client(_CLOSE)
    assert t.obs is not None
    t.obs.observe_sent(encode_method(0, spec.ConnectionClose(reply_code=200)))
    t.to_client(HEARTBEAT_FRAME + _CLOSE_OK)
    assert t.reports() == []
    t.to_client(_CLOSE_OK)
    assert [v.message for v in t.reports()] == ["a type-1 frame on channel 0 after close-ok"]
