"""0-10's file and stream classes, transfers in fragments and message.resume
on the embedded broker, in memory: the project's 0-10 client core drives
the broker's front end (content_0_10.py) command by command."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
from amqp_sansio.v0_10.messages import Message, to_transfer
from amqp_sansio.v0_10.session import Session
from amqp_sansio_broker.front_0_9 import FILENAME
from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker


class Client:
    """A 0-10 client core on one in-memory broker connection; completes
    every command it is sent unless told not to (``complete=False``)."""

    def __init__(self, broker: Broker, now: float = 1.0, complete: bool = True) -> None:
        self.broker = broker
        self.core = Connection(Role.CLIENT, ClientConfig(username="guest", password="guest"))
        self.server = broker.connection()
        self.now = now
        self.complete = complete
        self.pump()

    def pump(self, limit: int | None = None) -> list[ev.Event]:
        got: list[ev.Event] = []
        for _ in range(200):
            moved = False
            if data := self.core.data_to_send():
                self.server.receive_data(data, self.now)
                moved = True
            if data := self.server.data_to_send():
                if limit is not None:
                    data = data[:limit]
                new = self.core.receive_data(data, self.now)
                got += new
                if self.complete:
                    for e in new:
                        if isinstance(e, ev.CommandReceived) and e.session is not None:
                            e.session.complete(e.command_id)
                moved = True
            if not moved:
                break
        return got

    def session(self, name: bytes = b"s") -> Session:
        s = self.core.attach(name)
        self.pump()
        return s


def commands(events: list[ev.Event], cls: type[Any] | None = None) -> list[Any]:
    out = [e for e in events if isinstance(e, ev.CommandReceived)]
    return [e for e in out if cls is None or isinstance(e.command, cls)]


def no_exception(events: list[ev.Event]) -> None:
    assert not [e for e in events if isinstance(e, ev.ExceptionReceived)]


def exception(events: list[ev.Event]) -> ev.ExceptionReceived:
    [e] = [e for e in events if isinstance(e, ev.ExceptionReceived)]
    return e


@pytest.fixture
def broker() -> Broker:
    return Broker()


def stage(c: Client, s: Session, ident: str, body: bytes, props: Any = None) -> list[ev.Event]:
    s.send(spec.FileOpen(identifier=ident, content_size=len(body)))
    got = c.pump()
    [ok] = commands(got, spec.FileOpenOk)
    s.send(spec.FileStage(), headers=(props or spec.FileProperties(),),
           body=body[ok.command.staged_size:])
    return got + c.pump()


def test_file_staged_published_consumed_and_acked(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="files"))
    props = spec.FileProperties(content_type="text/plain", filename="a.txt",
                                headers={"k": "v"}, message_id="m1")
    no_exception(stage(c, s, "f1", b"hello", props))
    s.send(spec.FilePublish(exchange="", routing_key="files", identifier="f1"))
    s.send(spec.FileQos(prefetch_count=1))
    s.send(spec.FileConsume(queue="files", consumer_tag="fc"))
    got = c.pump()
    no_exception(got)
    assert [e.command for e in commands(got, spec.FileQosOk)] == [spec.FileQosOk()]
    assert commands(got, spec.FileConsumeOk)[0].command.consumer_tag == "fc"
    [opened] = commands(got, spec.FileOpen)
    assert opened.command.content_size == 5
    s.send(spec.FileOpenOk(staged_size=2))  # the client has 2 octets of it already
    got = c.pump()
    [staged] = commands(got, spec.FileStage)
    assert staged.body == b"llo" and staged.headers == (props,)
    [deliver] = commands(got, spec.FileDeliver)
    d = deliver.command
    assert (d.consumer_tag, d.routing_key, d.identifier, d.redelivered) == (
        "fc", "files", opened.command.identifier, False)
    assert d.delivery_tag >= 1
    s.send(spec.FileAck(delivery_tag=d.delivery_tag))
    no_exception(c.pump())
    q = broker.vhost("/").queues["files"]
    assert not q.messages and not any(True for _ in broker.services["0-10"].held())
    assert broker.staging.octets == 0


def test_file_prefetch_reject_requeue_and_unknown_tag(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="q"))
    for i in range(3):
        stage(c, s, f"id{i}", b"m%d" % i)
        s.send(spec.FilePublish(exchange="", routing_key="q", identifier=f"id{i}"))
    s.send(spec.FileQos(prefetch_count=2))
    s.send(spec.FileConsume(queue="q", consumer_tag="t"))
    got = c.pump()
    assert len(commands(got, spec.FileOpen)) == 2  # the window
    for _ in range(2):
        s.send(spec.FileOpenOk(staged_size=0))
    got = c.pump()
    tags = [e.command.delivery_tag for e in commands(got, spec.FileDeliver)]
    assert tags == [1, 2]
    # ack both with multiple: the third comes
    s.send(spec.FileAck(delivery_tag=2, multiple=True))
    got = c.pump()
    [third] = commands(got, spec.FileOpen)
    s.send(spec.FileOpenOk(staged_size=0))
    got = c.pump()
    [d] = commands(got, spec.FileDeliver)
    # rejected with requeue: back on the queue, not to this session again
    s.send(spec.FileReject(delivery_tag=d.command.delivery_tag, requeue=True))
    got = c.pump()
    assert not commands(got, spec.FileOpen)
    q = broker.vhost("/").queues["q"]
    assert [m.body for m in q.messages] == [b"m2"]
    other = Client(broker)
    s2 = other.session(b"s2")
    s2.send(spec.FileConsume(queue="q", consumer_tag="t"))  # a tag is per session
    got = other.pump()
    [o] = commands(got, spec.FileOpen)
    assert o.command.identifier == third.command.identifier  # the same message, the same id
    s.send(spec.FileAck(delivery_tag=99))
    e = exception(c.pump())
    assert e.error_code == 542


def test_file_publish_mandatory_and_immediate_return(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    stage(c, s, "x", b"lost")
    s.send(spec.FilePublish(exchange="amq.direct", routing_key="nowhere", mandatory=True,
                            identifier="x"))
    got = c.pump()
    [r] = commands(got, spec.FileReturn)
    assert r.command.reply_code == 312 and r.body == b"lost"
    s.send(spec.QueueDeclare(queue="idle"))
    stage(c, s, "y", b"now")
    s.send(spec.FilePublish(exchange="", routing_key="idle", immediate=True, identifier="y"))
    got = c.pump()
    [r] = commands(got, spec.FileReturn)
    assert r.command.reply_code == 313
    assert not broker.vhost("/").queues["idle"].messages


def test_file_content_crosses_to_message_transfer(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="x"))
    stage(c, s, "f", b"data", spec.FileProperties(filename="n.bin", content_type="a/b"))
    s.send(spec.FilePublish(exchange="", routing_key="x", identifier="f"))
    s.send(spec.MessageSubscribe(queue="x", destination="d", accept_mode=1, acquire_mode=0))
    s.send(spec.MessageFlow(destination="d", unit=0, value=10))
    s.send(spec.MessageFlow(destination="d", unit=1, value=0xFFFFFFFF))
    got = c.pump()
    [m] = [e for e in got if isinstance(e, ev.MessageReceived)]
    assert m.body == b"data"
    mp = m.message_properties
    assert mp is not None and mp.content_type == "a/b"
    assert mp.application_headers == {FILENAME: "n.bin"}


def test_staging_resumes_after_a_lost_transport(broker: Broker) -> None:
    """A file.stage cut by the transport's loss: the octets that arrived in
    whole frames are kept, and open-ok on a new connection says so."""
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="big"))
    body = bytes(range(256)) * 1024  # 256 KiB: several frames
    s.send(spec.FileOpen(identifier="big-file", content_size=len(body)))
    c.pump()
    s.send(spec.FileStage(), headers=(spec.FileProperties(filename="b"),), body=body)
    out = c.core.data_to_send()
    c.server.receive_data(out[:len(out) // 2], c.now)
    c.server.connection_lost(c.now)
    kept = broker.staging.find("file", "guest", "big-file")
    assert kept is not None and 0 < len(kept.data) < len(body)
    had = len(kept.data)
    c2 = Client(broker)
    s2 = c2.session(b"again")
    got = stage(c2, s2, "big-file", body, spec.FileProperties(filename="b"))
    [ok] = commands(got, spec.FileOpenOk)
    assert ok.command.staged_size == had
    s2.send(spec.FilePublish(exchange="", routing_key="big", identifier="big-file"))
    no_exception(c2.pump())
    assert [m.body for m in broker.vhost("/").queues["big"].messages] == [body]


def test_stream_prefetch_counts_uncompleted_deliveries(broker: Broker) -> None:
    c = Client(broker, complete=False)
    s = c.session()
    s.send(spec.QueueDeclare(queue="st"))
    for i in range(5):
        s.send(spec.StreamPublish(exchange="", routing_key="st"),
               headers=(spec.StreamProperties(priority=i),), body=b"p%d" % i)
    s.send(spec.StreamQos(prefetch_count=2))
    s.send(spec.StreamConsume(queue="st", consumer_tag="sc"))
    got = c.pump()
    ds = commands(got, spec.StreamDeliver)
    assert [d.body for d in ds] == [b"p0", b"p1"]
    assert ds[0].headers == (spec.StreamProperties(priority=0),)
    assert ds[0].command.queue == "st"
    q = broker.vhost("/").queues["st"]
    assert len(q.messages) == 3  # delivered is gone: no acknowledgement
    for d in ds:
        s.complete(d.command_id)
    got = c.pump()
    assert [d.body for d in commands(got, spec.StreamDeliver)] == [b"p2", b"p3"]


def test_stream_consume_rate_paces_on_the_brokers_clock(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="r"))
    for _ in range(4):
        s.send(spec.StreamPublish(exchange="", routing_key="r"),
               headers=(spec.StreamProperties(),), body=b"x" * 100)
    s.send(spec.StreamQos(consume_rate=100))  # 100 octets a second: one a second
    s.send(spec.StreamConsume(queue="r", consumer_tag="rc"))
    got = c.pump()
    assert len(commands(got, spec.StreamDeliver)) == 1
    assert broker.next_deadline() == pytest.approx(c.now + 1.0)
    c.now += 0.5
    c.server.handle_timer(c.now)
    assert not commands(c.pump(), spec.StreamDeliver)
    c.now += 0.5
    c.server.handle_timer(c.now)
    assert len(commands(c.pump(), spec.StreamDeliver)) == 1
    c.now += 10
    c.server.handle_timer(c.now)
    assert len(commands(c.pump(), spec.StreamDeliver)) == 1  # paced, not a burst


def test_stream_mandatory_return_and_no_consumers(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.StreamPublish(exchange="amq.direct", routing_key="none", mandatory=True),
           headers=(spec.StreamProperties(content_type="v/x"),), body=b"frame")
    got = c.pump()
    [r] = commands(got, spec.StreamReturn)
    assert r.command.reply_code == 312 and r.body == b"frame"
    assert r.headers == (spec.StreamProperties(content_type="v/x"),)


def _transfer(body: bytes, key: str, resume_id: str | None = None, **fp: bool) -> Any:
    cmd, hdrs, data = to_transfer(Message(body=body, routing_key=key), "")
    if resume_id is not None:
        hdrs = tuple(attrs.evolve(h, resume_id=resume_id, resume_ttl=60_000)
                     if isinstance(h, spec.DeliveryProperties) else h for h in hdrs)
    if fp:
        hdrs = (*hdrs, spec.FragmentProperties(**fp))
    return cmd, hdrs, data


def test_a_message_in_fragments_is_routed_once_whole(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="fr"))
    cmd, hdrs, _ = _transfer(b"", "fr", first=True, last=False)
    s.send(cmd, headers=hdrs, body=b"one-")
    s.send(spec.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
           headers=(spec.FragmentProperties(first=False, last=False),), body=b"two-")
    c.pump()
    assert not broker.vhost("/").queues["fr"].messages
    s.send(spec.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
           headers=(spec.FragmentProperties(first=False, last=True),), body=b"three")
    no_exception(c.pump())
    [m] = broker.vhost("/").queues["fr"].messages
    assert m.body == b"one-two-three"
    assert broker.staging.octets == 0


def test_message_resume_continues_a_transfer_cut_by_a_lost_transport(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="rq"))
    c.pump()
    body = bytes(range(256)) * 1024
    cmd, hdrs, data = _transfer(body, "rq", resume_id="upload-7")
    s.send(cmd, headers=hdrs, body=data)
    out = c.core.data_to_send()
    c.server.receive_data(out[:len(out) // 2], c.now)
    c.server.connection_lost(c.now)
    assert not broker.vhost("/").queues["rq"].messages
    c2 = Client(broker)
    s2 = c2.session(b"new")
    rid = s2.send(spec.MessageResume(destination="", resume_id="upload-7"))
    got = c2.pump()
    [res] = [e for e in got if isinstance(e, ev.ResultReceived) and e.command_id == rid]
    offset = res.value.offset
    assert 0 < offset < len(body)
    s2.send(spec.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
            headers=(spec.FragmentProperties(first=False, last=True),), body=body[offset:])
    no_exception(c2.pump())
    [m] = broker.vhost("/").queues["rq"].messages
    assert m.body == body and m.routing_key == "rq"
    rid = s2.send(spec.MessageResume(destination="", resume_id="unknown"))
    got = c2.pump()
    [res] = [e for e in got if isinstance(e, ev.ResultReceived) and e.command_id == rid]
    assert res.value.offset == 0
    assert broker.staging.octets == 0


def test_a_resumable_transfer_is_kept_only_for_its_ttl(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    cmd, hdrs, data = _transfer(b"z" * 200_000, "q", resume_id="r1")
    hdrs = tuple(attrs.evolve(h, resume_ttl=5000) if isinstance(h, spec.DeliveryProperties) else h
                 for h in hdrs)
    s.send(cmd, headers=hdrs, body=data)
    out = c.core.data_to_send()
    c.server.receive_data(out[:100_000], c.now)
    c.server.connection_lost(c.now)
    assert broker.staging.find("resume", "guest", "r1") is not None
    assert broker.next_deadline() == pytest.approx(c.now + 5.0)
    broker.handle_timer(c.now + 5.0)
    assert broker.staging.find("resume", "guest", "r1") is None


def test_staging_budget_refuses_with_resource_limit_exceeded() -> None:
    broker = Broker(limits=Limits(staged_per_connection=10_000))
    c = Client(broker)
    s = c.session()
    s.send(spec.FileOpen(identifier="a", content_size=20_000))
    c.pump()
    s.send(spec.FileStage(), headers=(spec.FileProperties(),), body=b"a" * 20_000)
    e = exception(c.pump())
    assert e.error_code == 506
    assert broker.staging.octets < 10_000


def test_nothing_0_10_defines_is_answered_not_implemented(broker: Broker) -> None:
    """Every command a client sends a broker is handled: none is 540."""
    from amqp_sansio_broker import content_0_10, front_0_10

    handled = set(front_0_10._HANDLERS) | set(content_0_10.CONTENT_HANDLERS)
    server_handles = [c for c in vars(spec).values()
                      if isinstance(c, type) and getattr(c, "KIND", None) == "command"
                      and c.__module__ == spec.MessageTransfer.__module__]
    missing = {c.NAME for c in server_handles if c not in handled} - {
        # handled by the session layer or as a transfer, or server-to-client only
        "message.transfer", "execution.sync", "execution.result", "execution.exception",
        "file.qos-ok", "file.consume-ok", "file.return", "file.deliver", "stream.qos-ok",
        "stream.consume-ok", "stream.return", "stream.deliver"}
    assert not missing


@pytest.mark.parametrize("cmd", [
    spec.FileQosOk(), spec.FileConsumeOk(), spec.FileReturn(), spec.FileDeliver(),
    spec.StreamQosOk(), spec.StreamConsumeOk(), spec.StreamReturn(),
    spec.StreamDeliver(queue="q")], ids=lambda c: c.NAME)
def test_a_command_only_a_client_implements_is_answered_not_implemented(
        broker: Broker, cmd: Any) -> None:
    """The eight the XML has only the client implement (the README's reason for
    their 540); the connection goes on (another session declares a queue)."""
    c = Client(broker)
    s = c.session()
    s.send(cmd)
    assert exception(c.pump()).error_code == 540
    s2 = c.session(b"next")
    s2.send(spec.QueueDeclare(queue="after"))
    no_exception(c.pump())
    assert "after" in broker.vhost("/").queues


def test_opens_waiting_for_their_stage_are_bounded(broker: Broker) -> None:
    from amqp_sansio_broker.content_0_10 import OPENS_WAITING

    c = Client(broker)
    s = c.session()
    for _ in range(OPENS_WAITING):
        s.send(spec.FileOpen(identifier="same", content_size=1))
    no_exception(c.pump())
    s.send(spec.FileOpen(identifier="same", content_size=1))
    assert exception(c.pump()).error_code == 506
    assert len(broker.staging.entries) == 1
