"""``Session.publish_many`` of the blocking-socket adapter and of the async
one (Trio, asyncio), in every protocol: the publishes ``publish`` would send
one by one (the policy's ``transfers`` are its ``transfer`` of each body,
equal field for field), taking the same route (``_send_transfers``), each
body delivered once and in order; a body source that fails stops it there,
with what went before sent.  Against the embedded broker over loopback TCP;
bounded by the adapters' timeouts (the async ones by a 30 s limit)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from amqp_sansio.message import TYPE_AMQP_1_0, Message
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect

PROTOCOLS = ("0-10", "0-9-1", "1.0")
#: Bodies around the encodings' size steps (1.0's vbin8/vbin32 at 256).
BODIES = [b"", b"a", b"x" * 255, b"y" * 256, bytes(range(256)) * 40]
TEMPLATES: dict[str, Message | bytes] = {
    "bytes": b"ignored",
    "routing key": Message(routing_key="ignored-rk"),
    "properties": Message(content_type="text/plain", priority=7, ttl=60_000,
                          persistent=True, correlation_id=b"c-1", app_id="spark"),
    "headers": Message(headers={"n": 1, "s": "x"}, content_encoding="identity"),
}


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[str, int]]:
    host, port, stop = start_broker_thread(Broker(users={"alice": "s3cret"}))
    try:
        yield host, port
    finally:
        stop()


def _url(where: tuple[str, int], protocol: str) -> str:
    return f"amqp://alice:s3cret@{where[0]}:{where[1]}/?protocol={protocol}&read_timeout=20"


def _queue(s: Any, protocol: str) -> str:
    name = f"pm-{uuid.uuid4().hex[:8]}"
    s.declare_queue(name)
    return f"/queue/{name}" if protocol == "1.0" else name


def _confirm(protocol: str) -> dict[str, Any]:
    return {"settled": False} if protocol == "1.0" else {"confirm": True}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", list(TEMPLATES))
def test_transfers_are_transfer_of_each_body(broker: tuple[str, int], protocol: str,
                                             kind: str) -> None:
    template = TEMPLATES[kind]
    with connect(_url(broker, protocol)) as conn, conn.session() as s:
        p: Any = s._p
        kw = _confirm(protocol)
        many = list(p.transfers(template, iter(BODIES), "", "rk", **kw))
        if isinstance(template, Message):
            one = [p.transfer(template.with_body(b), "", "rk", **kw) for b in BODIES]
        else:
            one = [p.transfer(b, "", "rk", **kw) for b in BODIES]
        assert many == one


def test_a_1_0_message_of_sections_is_mapped_body_by_body(broker: tuple[str, int]) -> None:
    """A body that is a 1.0 message's encoded sections is no data section:
    no shared prefix, each body is mapped as its own message."""
    from amqp_sansio.v1_0.message import encode_message, from_message

    bodies = [encode_message(from_message(Message(body=b"in%d" % i))) for i in range(3)]
    template = Message(type=TYPE_AMQP_1_0)
    with connect(_url(broker, "1.0")) as conn, conn.session() as s:
        p: Any = s._p
        many = list(p.transfers(template, bodies, "", "rk"))
        assert many == [p.transfer(template.with_body(b), "", "rk") for b in bodies]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_body_arrives_once_in_order_with_the_template(broker: tuple[str, int],
                                                           protocol: str) -> None:
    template = TEMPLATES["properties"]
    assert isinstance(template, Message)
    bodies = [b"m%04d" % i for i in range(600)]  # > the lock's 256 per taking
    with connect(_url(broker, protocol)) as conn, conn.session() as s:
        q = _queue(s, protocol)
        numbers = s.publish_many(iter(bodies), template, routing_key=q, wait=False)
        assert len(numbers) == len(bodies)
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
        s.sync()
        got: list[Message] = []
        with s.subscribe(q, prefetch=200) as sub:
            while len(got) < len(bodies):
                batch = sub.get_many(200, timeout=10)
                assert batch, f"{len(got)} of {len(bodies)} arrived"
                got.extend(d.message for d in batch)
                s.accept(batch)
        assert [m.body for m in got] == bodies
        m = got[0]
        assert (m.content_type, m.priority, m.ttl, m.persistent, m.app_id) == (
            "text/plain", 7, 60_000, True, "spark")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_failing_body_source_stops_there_what_went_before_is_sent(
        broker: tuple[str, int], protocol: str) -> None:
    class Bad(Exception):
        pass

    def bodies() -> Iterator[bytes]:
        for i in range(300):
            if i == 277:
                raise Bad("row 277")
            yield b"b%d" % i

    with connect(_url(broker, protocol)) as conn, conn.session() as s:
        q = _queue(s, protocol)
        with pytest.raises(Bad):
            s.publish_many(bodies(), b"", routing_key=q, wait=False)
        s.publish(b"after", routing_key=q)  # the session goes on
        s.sync()
        got: list[bytes] = []
        with s.subscribe(q, prefetch=300) as sub:
            while len(got) < 278:
                batch = sub.get_many(300, timeout=10)
                assert batch, f"{len(got)} arrived"
                got.extend(d.body for d in batch)
                s.accept(batch)
        assert got == [b"b%d" % i for i in range(277)] + [b"after"]


def test_0_10_runs_wait_for_room_and_count_what_went(broker: tuple[str, int]) -> None:
    """0-10 sends bodies in runs (one check of the window, one write for
    many): with a replay window of 7 the runs are cut to what it has room
    for and wait for completions, each body going once, in order;
    ``Session.sent`` counts what was handed over, also when the body source
    fails half-way."""
    bodies = [b"w%03d" % i for i in range(300)]

    def failing() -> Iterator[bytes]:
        yield from bodies[:123]
        raise ValueError("row 123")

    with connect(_url(broker, "0-10")) as conn, conn.session() as s:
        q = _queue(s, "0-10")
        s._p.core.replay_window = 7
        assert s._p.run_of(b"", "", q) is not None  # (the run path is taken)
        numbers = s.publish_many(bodies, Message(routing_key="x"), routing_key=q)
        assert numbers == list(range(numbers[0], numbers[0] + 300)) and s.sent == 300
        with pytest.raises(ValueError):
            s.publish_many(failing(), b"", routing_key=q)
        assert s.sent == 300 + 123
        s._p.core.replay_window = 65536
        s.sync()
        assert s._p.in_flight == 0 and not s._p._sizes  # every completion booked
        got: list[bytes] = []
        with s.subscribe(q, prefetch=500) as sub:
            while len(got) < 423:
                batch = sub.get_many(500, timeout=10)
                assert batch, f"{len(got)} arrived"
                got.extend(d.body for d in batch)
                s.accept(batch)
        assert got == bodies + bodies[:123]


async def _async_round(open_connection: Any, url: str, protocol: str) -> list[Message]:
    template = TEMPLATES["properties"]
    bodies = [b"a%04d" % i for i in range(300)]
    async with open_connection(url) as conn, conn.session() as s:
        name = f"pm-{uuid.uuid4().hex[:8]}"
        await s.declare_queue(name)
        q = f"/queue/{name}" if protocol == "1.0" else name
        numbers = await s.publish_many(iter(bodies), template, routing_key=q, wait=False)
        assert len(numbers) == len(bodies) and numbers == sorted(set(numbers))
        await s.wait_completed()
        got: list[Message] = []
        async with s.subscribe(q, prefetch=100) as sub:
            async for d in sub:
                got.append(d.message)
                await d.accept()
                if len(got) == len(bodies):
                    break
    assert [m.body for m in got] == bodies
    return got


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("runtime", ["trio", "asyncio"])
def test_the_async_adapters_publish_many_alike(broker: tuple[str, int], protocol: str,
                                               runtime: str) -> None:
    url = _url(broker, protocol)
    if runtime == "trio":
        from amqp_sansio_trio import open_connection as trio_open

        async def on_trio() -> list[Message]:
            with trio.fail_after(30):
                return await _async_round(trio_open, url, protocol)

        got = trio.run(on_trio)
    else:
        from amqp_sansio_asyncio import open_connection as asyncio_open

        async def on_asyncio() -> list[Message]:
            async with asyncio.timeout(30):
                return await _async_round(asyncio_open, url, protocol)

        got = asyncio.run(on_asyncio())
    m = got[-1]
    assert (m.content_type, m.priority, m.ttl, m.persistent, m.app_id) == (
        "text/plain", 7, 60_000, True, "spark")
