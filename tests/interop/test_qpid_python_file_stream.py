"""0-10's file and stream classes and message.resume on the embedded broker,
driven by Apache qpid-python -- an implementation we did not write.

qpid-python's bundled 0-10 spec (``qpid/specs/amqp-0-10-qpid-errata-stripped.xml``)
has the file and stream classes, but its loader leaves them out
(``qpid/ops.py``: ``included``).  The fixture below lets them back in for
these tests only -- it loads the spec again with ``included`` passing every
class, registers the new commands, structs and enums where qpid's codec and
session look them up, gives ``qpid.session.Session`` their methods as qpid's
own generator makes them, and takes all of it away afterwards.  Nothing of
qpid's is copied: its generic session API (``file_open``, ``file_stage``,
``file_publish``, ``file_consume``, ``stream_publish``, ``stream_consume``,
``message_resume``) and a delegate with ``file_open``/``file_stage``/
``file_deliver``/``stream_deliver`` drive the broker.

Without qpid-python (no network) these tests skip -- with ``CI=true`` they fail.
"""

from __future__ import annotations

import contextlib
import queue
import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import qpid_python_harness as harness

from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
from amqp_sansio.v0_10.messages import Message, to_transfer
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread

TIMEOUT = 10
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:qpid.*")


@pytest.fixture(scope="module")
def qpid() -> Iterator[SimpleNamespace]:
    """qpid-python with its file and stream classes let in (undone after)."""
    harness.require_qpid()
    import qpid.connection
    import qpid.datatypes
    import qpid.generator
    import qpid.ops as ops
    import qpid.session
    import qpid.util

    undo = harness.apply_core_workarounds()
    saved = ops.included
    ops.included = lambda nd: True
    try:
        types = ops.load_types_from_xml(ops.file)
    finally:
        ops.included = saved
    added: list[tuple[dict[Any, Any], Any]] = []
    methods: list[str] = []
    known = vars(ops)
    for name, bases, body in types:
        if name in known:
            continue  # loaded already (every class but file and stream)
        t = type(name, bases, body)
        known[name] = t
        added.append((known, name))
        if issubclass(t, ops.Command):
            tables = [ops.COMMANDS]
        elif issubclass(t, ops.Compound):
            tables = [ops.COMPOUND]
        elif issubclass(t, ops.Enum):
            tables = [ops.ENUMS]
        else:
            continue
        for table in tables:
            for key in (t.NAME, getattr(t, "CODE", None)):
                if key is not None and key not in table:
                    table[key] = t
                    added.append((table, key))
        if issubclass(t, ops.Compound) and not hasattr(qpid.session.Session, t.NAME):
            setattr(qpid.session.Session, t.NAME, qpid.generator.METHOD("qpid.session", t))
            methods.append(t.NAME)
    try:
        yield SimpleNamespace(connection=qpid.connection, session=qpid.session,
                              datatypes=qpid.datatypes, util=qpid.util, ops=ops)
    finally:
        for m in methods:
            delattr(qpid.session.Session, m)
        for table, key in reversed(added):
            table.pop(key, None)
        undo()


@pytest.fixture
def broker() -> Iterator[tuple[Broker, str, int]]:
    b = Broker(users={"guest": "guest"})
    host, port, stop = start_broker_thread(b)
    try:
        yield b, host, port
    finally:
        stop()


class Recorder:
    """What the broker sent the delegate, and how it answers file.open."""

    def __init__(self, have: int = 0) -> None:
        self.got: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.have = have  # octets of each file it says it has staged


#: delegate method (the command qpid received) -> what the recorder calls it
RECORDED = {"file_qos_ok": "qos-ok", "file_consume_ok": "consume-ok",
            "file_open_ok": "open-ok", "file_stage": "stage", "file_deliver": "deliver",
            "file_return": "return", "stream_qos_ok": "stream-qos-ok",
            "stream_consume_ok": "stream-consume-ok", "stream_deliver": "stream-deliver",
            "stream_return": "stream-return"}


def delegate_for(qpid: SimpleNamespace, rec: Recorder) -> Any:
    """A qpid session delegate that records what the broker sent and
    answers its file.open with open-ok (what ``rec`` says it has)."""
    def recording(kind: str) -> Any:
        return lambda self, cmd: rec.got.put((kind, cmd))

    def file_open(self: Any, cmd: Any) -> None:
        rec.got.put(("open", cmd))
        self.session.file_open_ok(staged_size=rec.have)

    methods = {name: recording(kind) for name, kind in RECORDED.items()}
    cls = type("FileStreamClient", (qpid.session.Client,), {**methods, "file_open": file_open})
    return lambda *args: cls(*args)


@contextlib.contextmanager
def qsession(qpid: SimpleNamespace, host: str, port: int, rec: Recorder) -> Iterator[Any]:
    conn = qpid.connection.Connection(qpid.util.connect(host, port), username="guest",
                                      password="guest")
    conn.start(timeout=TIMEOUT)
    ssn = conn.session("fs", timeout=TIMEOUT, delegate=delegate_for(qpid, rec))
    ssn.auto_sync = False  # the delegate answers from qpid's I/O thread: never wait there
    try:
        yield ssn
    finally:
        with contextlib.suppress(Exception):
            conn.close(timeout=TIMEOUT)


def take(rec: Recorder, kind: str) -> Any:
    while True:
        k, cmd = rec.got.get(timeout=TIMEOUT)
        if k == kind:
            return cmd


def test_qpid_stages_publishes_consumes_and_acks_a_file(
        qpid: SimpleNamespace, broker: tuple[Broker, str, int]) -> None:
    b, host, port = broker
    rec = Recorder(have=3)
    with qsession(qpid, host, port, rec) as ssn:
        ssn.queue_declare(queue="qf")
        ssn.file_open(identifier="report-1", content_size=11)
        assert take(rec, "open-ok").staged_size == 0
        props = ssn.file_properties(content_type="text/plain", filename="r.txt")
        ssn.file_stage(headers=[props], payload=b"hello world")
        ssn.file_publish(exchange="", routing_key="qf", identifier="report-1")
        ssn.sync(TIMEOUT)
        assert [m.body for m in b.vhost("/").queues["qf"].messages] == [b"hello world"]
        ssn.file_qos(prefetch_count=5)
        ssn.file_consume(queue="qf", consumer_tag="files")
        assert take(rec, "consume-ok").consumer_tag == "files"
        opened = take(rec, "open")
        assert opened.content_size == 11
        staged = take(rec, "stage")  # the rest after what the client said it has (3)
        assert staged.payload == b"lo world"
        [fp] = staged.headers
        assert (fp.filename, fp.content_type) == ("r.txt", "text/plain")
        d = take(rec, "deliver")
        assert (d.consumer_tag, d.identifier, d.routing_key) == ("files", opened.identifier,
                                                                  "qf")
        ssn.file_ack(delivery_tag=d.delivery_tag)
        ssn.sync(TIMEOUT)
        assert not b.vhost("/").queues["qf"].messages
        assert not list(b.services["0-10"].held())


def test_qpid_file_return_for_an_unroutable_mandatory_publish(
        qpid: SimpleNamespace, broker: tuple[Broker, str, int]) -> None:
    _, host, port = broker
    rec = Recorder()
    with qsession(qpid, host, port, rec) as ssn:
        ssn.file_open(identifier="x", content_size=4)
        take(rec, "open-ok")
        ssn.file_stage(headers=[ssn.file_properties()], payload=b"lost")
        ssn.file_publish(exchange="amq.direct", routing_key="nobody", mandatory=True,
                         identifier="x")
        r = take(rec, "return")
        assert r.reply_code == 312 and r.payload == b"lost"


def test_qpid_streams_paced_deliveries(qpid: SimpleNamespace,
                                       broker: tuple[Broker, str, int]) -> None:
    b, host, port = broker
    rec = Recorder()
    with qsession(qpid, host, port, rec) as ssn:
        ssn.queue_declare(queue="qs")
        for i in range(3):
            ssn.stream_publish(exchange="", routing_key="qs",
                               headers=[ssn.stream_properties(priority=i)],
                               payload=b"frame-%d" % i)
        ssn.stream_qos(prefetch_count=10)
        assert take(rec, "stream-qos-ok") is not None
        ssn.stream_consume(queue="qs", consumer_tag="st")
        assert take(rec, "stream-consume-ok").consumer_tag == "st"
        got = [take(rec, "stream-deliver") for _ in range(3)]
        assert [d.payload for d in got] == [b"frame-0", b"frame-1", b"frame-2"]
        assert [d.headers[0].priority for d in got] == [0, 1, 2]
        assert {d.queue for d in got} == {"qs"}
        assert not b.vhost("/").queues["qs"].messages  # unacknowledged: gone as sent


def test_qpid_resumes_a_transfer_cut_by_a_lost_connection(
        qpid: SimpleNamespace, broker: tuple[Broker, str, int]) -> None:
    """Half a transfer carrying a resume-id, then the connection drops; qpid
    asks message.resume for the offset and sends the rest as the last
    fragment: the broker routes the whole message once."""
    b, host, port = broker
    body = bytes(range(256)) * 2048  # 512 KiB: many frames
    core = Connection(Role.CLIENT, ClientConfig(username="guest", password="guest"))
    with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
        # the handshake, then a session, then half the transfer
        s = None
        while s is None or s.state.name != "ATTACHED":
            if out := core.data_to_send():
                sock.sendall(out)
            if core.state.name == "OPEN" and s is None:
                s = core.attach(b"uploader")
                continue
            core.receive_data(sock.recv(65536))
        s.send(spec.QueueDeclare(queue="uploads"))
        cmd, hdrs, data = to_transfer(Message(body=body, routing_key="uploads"), "")
        hdrs = tuple(h.__class__(**{**{f.attr: getattr(h, f.attr) for f in h.FIELDS},
                                    "resume_id": "upload-42", "resume_ttl": 60_000})
                     if isinstance(h, spec.DeliveryProperties) else h for h in hdrs)
        s.send(cmd, headers=hdrs, body=data)
        out = core.data_to_send()
        sock.sendall(out[:len(out) // 2])
    rec = Recorder()
    with qsession(qpid, host, port, rec) as ssn:
        offset = ssn.message_resume(destination="", resume_id="upload-42").get(TIMEOUT).offset
        assert 0 < offset < len(body)
        fp = ssn.fragment_properties(first=False, last=True)
        ssn.message_transfer(destination="", accept_mode=1, acquire_mode=0,
                             message=qpid.datatypes.Message(fp, body[offset:]))
        ssn.sync(TIMEOUT)
        [m] = b.vhost("/").queues["uploads"].messages
        assert m.body == body and m.routing_key == "uploads"
        assert ssn.message_resume(destination="", resume_id="unknown").get(TIMEOUT).offset == 0
