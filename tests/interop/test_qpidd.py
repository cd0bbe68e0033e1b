"""This library's 0-10 and 1.0 clients against Apache Qpid's C++ broker
(qpidd, a private build named by ``QPIDD``; skipped without it, see
``tests/support/qpidd.py``).  Each direction is checked by an independent
client at the other end -- qpid-python for 0-10, python-qpid-proton for 1.0
-- and qpidd's own 0-10 <-> 1.0 translation is compared with the embedded
broker's, field by field (:data:`QPIDD_DIFFERS`: where they part).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from peers_1_0 import proton
from qpidd import Qpidd

from amqp_sansio.message import Message
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect

pytest_plugins = ["conftest_qpidd"]  # (the session fixture ``qpidd``)

COUNT = 200
TIMEOUT = 10.0


def _queue(prefix: str) -> str:
    return f"qpidd-{prefix}-{uuid.uuid4().hex[:8]}"  # (1.0 attaches make qpidd-.*)


def _send(url: str, protocol: str, q: str, count: int) -> None:
    with connect(url, protocol=protocol) as c, c.session() as s:
        if protocol == "0-10":
            s.declare_queue(q)
        for i in range(count):
            s.publish(Message(body=b"m%d" % i, headers={"x-seq": i}), routing_key=q,
                      wait=False)
        s.sync()
        assert s.outstanding == 0


def _drain(url: str, protocol: str, q: str, count: int) -> list[tuple[bytes, Any]]:
    got: list[tuple[bytes, Any]] = []
    with connect(url, protocol=protocol) as c, c.session() as s:
        with s.subscribe(q, prefetch=50) as sub:
            while len(got) < count and (d := sub.get(TIMEOUT)) is not None:
                got.append((d.body, d.header("x-seq")))
                d.accept()
        s.sync()
    return got


def _depth(url: str, q: str) -> int:
    with connect(url, protocol="0-10") as c, c.session() as s:
        return int(s.query_queue(q).message_count)


@pytest.mark.parametrize("protocol", ["0-10", "1.0"])
def test_publish_then_consume_every_message_once(qpidd: Qpidd, protocol: str) -> None:
    q = _queue(protocol)
    if protocol == "1.0":
        with connect(qpidd.url, protocol="0-10") as c, c.session() as s:
            s.declare_queue(q)
    _send(qpidd.url, protocol, q, COUNT)
    assert _depth(qpidd.url, q) == COUNT
    got = _drain(qpidd.url, protocol, q, COUNT)
    assert got == [(b"m%d" % i, i) for i in range(COUNT)]
    assert _depth(qpidd.url, q) == 0  # every accept reached qpidd


def test_0_10_to_qpid_python(qpidd: Qpidd) -> None:
    """What our 0-10 client sends, qpid.messaging receives whole."""
    import qpid_python_harness as harness

    harness.add_to_path(harness.require_qpid())
    import qpid.messaging

    q = _queue("qp")
    _send(qpidd.url, "0-10", q, 20)
    conn = qpid.messaging.Connection(f"{qpidd.host}:{qpidd.port}", sasl_mechanisms="ANONYMOUS")
    conn.open()
    try:
        ssn = conn.session()
        rcv = ssn.receiver(q)
        got = []
        for _ in range(20):
            m = rcv.fetch(timeout=TIMEOUT)
            got.append((bytes(m.content), m.properties.get("x-seq")))
        ssn.acknowledge()
    finally:
        conn.close()
    assert got == [(b"m%d" % i, i) for i in range(20)]


@pytest.mark.parametrize("direction", ["ours-to-proton", "proton-to-ours"])
def test_1_0_with_proton(qpidd: Qpidd, direction: str) -> None:
    q = _queue("pn")
    if direction == "ours-to-proton":
        _send(qpidd.url, "1.0", q, 50)
        got = proton("receive", qpidd.port, address=q, count=50)
        assert got["exit"] == 0, got
        assert (got["received"], got["octets"]) == (50, sum(len(b"m%d" % i) for i in range(50)))
        return
    sent = proton("send", qpidd.port, address=q, count=50, size=100)
    assert sent["exit"] == 0, sent
    assert (sent["sent"], sent["accepted"]) == (50, 50), sent
    with connect(qpidd.url, protocol="1.0") as c, c.session() as s:
        with s.subscribe(q, prefetch=10) as sub:
            bodies: list[bytes] = []
            while len(bodies) < 50 and (d := sub.get(TIMEOUT)) is not None:
                bodies.append(d.body)
                d.accept()
        s.sync()
    assert [len(b) for b in bodies] == [100] * 50


# -- qpidd's 0-10 <-> 1.0 translation vs the embedded broker's -------------------------
SENT = Message(body=b"body", correlation_id=b"cid-1", message_id="mid-1", app_id="app-1",
               content_type="application/json", headers={"k": "v", "n": 7}, priority=5,
               persistent=True, reply_to=("", "replies"), timestamp=1_700_000_000)
FIELDS = ("body", "correlation_id", "message_id", "app_id", "content_type", "headers",
          "priority", "persistent", "reply_to", "timestamp")


@pytest.fixture(scope="module")
def embedded_url() -> Iterator[str]:
    _, port, stop = start_broker_thread(Broker())
    try:
        yield f"amqp://guest:guest@127.0.0.1:{port}"
    finally:
        stop()


def _across(url: str, publisher: str, consumer: str) -> dict[str, Any]:
    q = _queue(f"{publisher}-{consumer}")
    with connect(url, protocol="0-10") as c, c.session() as s:
        s.declare_queue(q)
        s.declare_queue("replies")  # (qpidd resolves a 1.0 reply-to by the node)
    with connect(url, protocol=publisher) as c, c.session() as s:
        s.publish(SENT, routing_key=q, wait=True)
    with connect(url, protocol=consumer) as c, c.session() as s:
        with s.subscribe(q, prefetch=1) as sub:
            d = sub.get(TIMEOUT)
            assert d is not None
            d.accept()
        s.sync()
    m = d.message
    got = {f: getattr(m, f) for f in FIELDS}
    got["headers"] = {k: v for k, v in (m.headers or {}).items() if k != "qpid.subject"}
    return got


#: Where qpidd 1.39's translation differs from the embedded broker's (field:
#: (qpidd's, ours)), read by our clients -- and the same by qpid.messaging and
#: proton (see the note of 2026-12-07).  qpidd carries no app-id, timestamp
#: or non-UUID message-id across (our 0-10 client sends a text message-id
#: as the x-amqp-0-9-1-message-id header, which qpidd passes on as a 1.0
#: application property), and gives a 0-10 correlation-id to 1.0 as a string.
#: (Also not compared: qpidd adds the 1.0 subject as a qpid.subject header.)
QPIDD_DIFFERS: dict[tuple[str, str], dict[str, tuple[Any, Any]]] = {
    ("0-10", "1.0"): {
        "message_id": (None, "mid-1"), "app_id": (None, "app-1"),
        "timestamp": (None, 1_700_000_000), "correlation_id": ("cid-1", b"cid-1"),
        "headers": ({"k": "v", "n": 7, "x-amqp-0-9-1-message-id": "mid-1"},
                    {"k": "v", "n": 7})},
    ("1.0", "0-10"): {
        "message_id": (None, "mid-1"), "app_id": (None, "app-1"),
        "timestamp": (None, 1_700_000_000)},
}


@pytest.mark.parametrize("publisher,consumer", [("0-10", "1.0"), ("1.0", "0-10")])
def test_translation_against_the_embedded_brokers(qpidd: Qpidd, embedded_url: str,
                                                  publisher: str, consumer: str) -> None:
    """Every field reads the same through either broker but those listed."""
    theirs = _across(qpidd.url, publisher, consumer)
    ours = _across(embedded_url, publisher, consumer)
    assert theirs["body"] == b"body"
    differ = {f: (theirs[f], ours[f]) for f in FIELDS if theirs[f] != ours[f]}
    assert differ == QPIDD_DIFFERS[publisher, consumer]
