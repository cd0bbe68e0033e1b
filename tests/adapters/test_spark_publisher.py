"""What a Spark write task does (``publish_chunks``), without Spark, against
the embedded broker in every protocol: a chunk whose rows differ in their
bodies only goes through the client's ``publish_many`` (its template mapped
once), any other row by row -- the same messages either way -- and a row
that fails half-way leaves a report saying exactly what was sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from embedded_broker import guest_url

from amqp_sansio.message import Message
from amqp_sansio_socket import connect
from amqp_sansio_spark.convert import Bodies, bodies_from_columns, messages_from_columns
from amqp_sansio_spark.options import parse_write_options
from amqp_sansio_spark.pipeline import with_protocol
from amqp_sansio_spark.publisher import publish_chunks
from amqp_sansio_spark.queues import queue_address

COLS = {"body": "binary", "routing_key": "string", "prio": "integer"}
PROTOCOLS = ("0-10", "0-9-1", "1.0")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with guest_url() as u:
        yield u


def _declared(url: str, protocol: str) -> tuple[str, str]:
    u = with_protocol(url, protocol)
    q = queue_address(protocol, f"pub-{uuid.uuid4().hex[:8]}")
    with connect(u) as c, c.session() as s:
        s.declare_queue(q)
    return u, q


def _drain(u: str, q: str, n: int) -> list[Message]:
    got: list[Message] = []
    with connect(u) as c, c.session() as s, s.subscribe(q, prefetch=500) as sub:
        while len(got) < n:
            batch = sub.get_many(500, timeout=10)
            if not batch:
                break
            got.extend(d.message for d in batch)
            s.accept(batch)
        s.sync()
    return got


def test_only_a_chunk_of_bodies_alone_is_bodies() -> None:
    u = "amqp://h:1"
    plain = parse_write_options({"url": u, "routingKey": "q", "ttl": "5000",
                                 "contentType": "text/plain"}, {"body": "binary"})
    b = bodies_from_columns(plain, {"body": [b"a", "b", None]})
    assert isinstance(b, Bodies)
    assert b.template == Message(routing_key="q", ttl=5000, content_type="text/plain")
    assert b.bodies == [b"a", b"b", b""] and b.error is None and b.octets(3) == 2
    bad = bodies_from_columns(plain, {"body": [b"a", 1.5, b"c"]})  # a float is no body
    assert bad is not None and bad.bodies == [b"a"]
    assert bad.error is not None and "row 1 of the chunk" in str(bad.error)
    # the same messages as row by row
    rows = [m for _, m in messages_from_columns(plain, {"body": [b"a", "b", None]}, 3)]
    assert rows == [b.template.with_body(x) for x in (b"a", b"b", b"")]
    per_row = parse_write_options({"url": u, "priorityColumn": "prio"}, COLS)
    assert bodies_from_columns(per_row, {"body": [b"a"], "routing_key": ["q"],
                                         "prio": [1]}) is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bodies_and_rows_publish_the_same_messages(url: str, protocol: str) -> None:
    u, q = _declared(url, protocol)
    opts = parse_write_options({"url": u, "routingKey": q, "contentType": "text/plain"},
                               {"body": "binary"})
    bodies = [b"r%05d" % i for i in range(700)]
    rep = publish_chunks(opts, [({"body": bodies[:300]}, 300, lambda: []),
                                ({"body": bodies[300:]}, 400, lambda: [])])
    assert rep.error is None, rep.summary()
    assert (rep.sent, rep.confirmed, rep.rejected, rep.bytes) == (700, 700, 0, 700 * 6)
    got = _drain(u, q, 700)
    assert [m.body for m in got] == bodies
    assert {m.content_type for m in got} == {"text/plain"}
    # row by row (a routing-key column): the same
    opts2 = parse_write_options({"url": u, "priorityColumn": "prio"}, COLS)
    rep2 = publish_chunks(opts2, [({"body": bodies[:50], "routing_key": [q] * 50,
                                    "prio": [None] * 50}, 50, lambda: [])])
    assert (rep2.sent, rep2.error) == (50, None)
    assert [m.body for m in _drain(u, q, 50)] == bodies[:50]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_bad_body_half_way_reports_what_was_sent(url: str, protocol: str) -> None:
    u, q = _declared(url, protocol)
    opts = parse_write_options({"url": u, "routingKey": q}, {"body": "binary"})
    raw: list[Any] = [b"ok"] * 30 + [1.5] + [b"never"] * 10  # a float is no body
    rep = publish_chunks(opts, [({"body": [b"first"] * 5}, 5, lambda: []),
                                ({"body": raw}, len(raw), lambda: [])])
    assert rep.error is not None and "row 30 of the chunk" in rep.error
    assert (rep.sent, rep.confirmed, rep.bytes) == (35, 35, 5 * 5 + 30 * 2)
    got = _drain(u, q, 36)
    assert [m.body for m in got] == [b"first"] * 5 + [b"ok"] * 30  # exactly what it says
