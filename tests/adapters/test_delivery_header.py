"""``Delivery.header(name)`` reads one application header as ``message.headers``
has it -- from the headers as received (0-10, 0-9-1; 1.0: its decoded
sections, the message unmapped), or through the mapped message (the names a
protocol lifts into fields) -- and ``body``/``redelivered`` read what the
mapped message says, against the embedded broker, every protocol, through
the socket adapter."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from amqp_sansio.message import Message
from amqp_sansio.v0_10.messages import X_091
from amqp_sansio_socket import connect

NAMES = ["x-sent-at", "k", "absent", "x-message-id", "x-correlation-id", X_091 + "type",
         X_091 + "message-id", "x-basic-type", X_091 + "cluster-id"]


@pytest.fixture(scope="module")
def broker() -> Iterator[str]:
    from amqp_sansio_broker.server import start_broker_thread

    host, port, stop = start_broker_thread()
    try:
        yield f"amqp://guest:guest@{host}:{port}?read_timeout=10"
    finally:
        stop()


@pytest.mark.parametrize("protocol", ["0-10", "0-9-1", "1.0"])
def test_header_is_what_the_message_says(broker: str, protocol: str) -> None:
    q = ("/queue/" if protocol == "1.0" else "") + "hdr-" + uuid.uuid4().hex[:6]
    sent = [
        Message(body=b"a", headers={"x-sent-at": 1.25, "k": "v"}),
        Message(body=b"b"),
        Message(body=b"c", headers={"k": 7, "x-message-id": "m-1", X_091 + "type": "t"},
                message_id=uuid.uuid4(), type="kind", correlation_id=b"\x00\x01",
                cluster_id="cl"),
        Message(body=b"d", headers={"x-message-id": "m-2", X_091 + "message-id": "m-3"}),
    ]
    with connect(broker, protocol=protocol) as conn, conn.session() as s:
        if protocol != "1.0":
            s.declare_queue(q)
        for m in sent:
            s.publish(m, routing_key=q, **({"wait": False} if protocol == "1.0" else {}))
        s.sync()
        seen = []
        with s.subscribe(q, prefetch=10) as sub:
            for _ in sent:
                d = sub.get(timeout=10)
                assert d is not None
                fresh = [d.header(n) for n in NAMES]  # before the message is mapped
                body, redelivered = d.body, d.redelivered
                mapped = d.message.headers or {}
                assert fresh == [mapped.get(n) for n in NAMES]
                assert (body, redelivered) == (d.message.body, d.message.redelivered)
                assert [d.header(n) for n in NAMES] == fresh  # and after
                seen.append(fresh)
                d.accept()
    assert seen[0][:3] == [1.25, "v", None]
    assert seen[1] == [None] * len(NAMES)
    assert seen[2][1] == 7


@pytest.mark.parametrize("protocol", ["0-10", "0-9-1", "1.0"])
def test_bodies_of_a_batch_are_each_body(broker: str, protocol: str) -> None:
    """``Delivery.bodies(batch)`` (a reader's column of bodies) is each
    delivery's ``body``, in order, leaving the messages unmapped."""
    q = ("/queue/" if protocol == "1.0" else "") + "bod-" + uuid.uuid4().hex[:6]
    sent = [b"", b"a", b"x" * 300, bytes(range(256))]
    with connect(broker, protocol=protocol) as conn, conn.session() as s:
        if protocol != "1.0":
            s.declare_queue(q)
        for b in sent:
            s.publish(Message(body=b, headers={"k": 1}), routing_key=q,
                      **({"wait": False} if protocol == "1.0" else {}))
        s.sync()
        got: list[object] = []
        with s.subscribe(q, prefetch=10) as sub:
            while len(got) < len(sent):
                batch = sub.get_many(10, timeout=10)
                assert batch, f"{len(got)} of {len(sent)} arrived"
                assert batch[0].bodies(batch) == [d.body for d in batch]
                assert all(d._message is None for d in batch)  # not mapped for it
                got += batch
                s.accept(batch)
        assert [d.body for d in got] == sent  # type: ignore[attr-defined]
