"""rhea (npm) durable subscriptions on the embedded broker
(adapters/broker/termini_1_0.py): rhea's receiver with a durable source
(``durable: 2``, ``expiry_policy: 'never'``) under a fixed container id and
link name, detached without closing and attached again -- on the same
connection, from a new one, and after a broker restart with a store.

rhea sends no ``unsettled`` map on attach (it does not resume deliveries):
what its link held unsettled when it left comes back as a new delivery
(redelivered: header delivery-count 1, first-acquirer false), ahead of what
the subscription collected meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from peers_1_0 import require_rhea, rhea

from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread

pn = pytest.importorskip("proton")
from proton.utils import BlockingConnection  # noqa: E402

TIMEOUT = 10
CONTAINER, LINK = "rhea-durable", "weather-sub"


pytest_plugins = ["amqp_sansio_broker.pytest_plugin"]  # (a broker per test, in a thread)


def _rhea_durable(port: int, address: str, **kw: Any) -> dict[str, Any]:
    out = rhea("durable", port, address=address, container=CONTAINER, name=LINK, timeout=60,
               **kw)
    assert out["exit"] == 0 and "error" not in out, out
    assert all(a["detach_error"] is None for a in out["attachments"]), out
    return out


def _publish(port: int, address: str, *bodies: bytes, durable: bool = False) -> None:
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        snd = c.create_sender(address)
        for body in bodies:
            snd.send(pn.Message(body=body, durable=durable))
    finally:
        c.close()


@contextmanager
def _serving(data_dir: Path) -> Iterator[tuple[Broker, int]]:
    """A broker on ``data_dir`` in a thread: it and its port; stopped and
    its store closed after."""
    b = Broker(data_dir=data_dir)
    try:
        _, port, stop = start_broker_thread(b)
        try:
            yield b, port
        finally:
            stop()
    finally:
        b.close()


def _got(attachment: dict[str, Any]) -> list[tuple[str, int, bool]]:
    return [(m["body"], m["delivery_count"], m["first_acquirer"])
            for m in attachment["messages"]]


def _subscriptions(b: Broker) -> list[tuple[str, int, int]]:
    """The subscription queues: (name, consumers, messages)."""
    return [(n, len(q.consumers), len(q.messages)) for n, q in list(b.queues.items())
            if n.startswith("amq.sub.")]


def test_rhea_durable_subscription_detach_and_reattach(amqp_broker_instance: Broker,
                                                       amqp_broker: str) -> None:
    """rhea subscribes and detaches (closed=false): the subscription
    collects five messages; a new rhea connection (same container id and
    link name) takes three, accepts two, detaches holding the third,
    publishes two more meanwhile and attaches again on the same connection:
    it gets the held one (redelivered) first, then the rest in order; its
    closing detach ends the subscription."""
    require_rhea()
    b, port = amqp_broker_instance, int(amqp_broker.rsplit(":", 1)[1])
    first = _rhea_durable(port, "/topic/weather", take=0)
    # in memory: expiry never is honoured, durable is not (nothing survives a
    # restart); None: the field left at its default (durable none, timeout 0)
    [att] = first["attachments"]
    assert att["source"] == {"address": "/topic/weather", "durable": None,
                             "expiry_policy": "never", "timeout": None}, att
    [(sub, consumers, queued)] = _subscriptions(b)
    assert (consumers, queued) == (0, 0)
    _publish(port, "/topic/weather", *(b"m%d" % i for i in range(5)))
    assert _subscriptions(b) == [(sub, 0, 5)]
    out = _rhea_durable(port, "/topic/weather", take=3, hold=1, publish=2, resume=5, end=True)
    before, after = out["attachments"]
    assert out["published"] == 2
    assert _got(before) == [("m0", 0, False), ("m1", 0, False), ("m2", 0, False)]
    assert _got(after) == [("m2", 1, False), ("m3", 0, False), ("m4", 0, False),
                           ("p0", 0, False), ("p1", 0, False)]
    assert after["source"] == before["source"] == att["source"]
    assert _subscriptions(b) == []  # closed: the subscription and its queue are gone
    assert b.retained == 0 == b.recount()


def test_rhea_durable_subscription_across_a_broker_restart(tmp_path: Path) -> None:
    """With a data directory the attach says durable unsettled-state; rhea
    takes two of three durable messages (accepting one), detaches, publishes
    two durable ones and goes; the broker stops and starts again on the same
    store; rhea (same container id, link name) gets the one it held
    (redelivered), the one it never took, and the two it published; closing
    ends the subscription in the store too."""
    require_rhea()
    with _serving(tmp_path) as (_, port):
        first = _rhea_durable(port, "/topic/news", take=0)
        assert first["attachments"][0]["source"]["durable"] == 2
        _publish(port, "/topic/news", b"n0", b"n1", b"n2", durable=True)
        out = _rhea_durable(port, "/topic/news", take=2, hold=1, publish=2)
        assert _got(out["attachments"][0]) == [("n0", 0, False), ("n1", 0, False)]
        assert out["published"] == 2
    with _serving(tmp_path) as (b2, port):
        [(_, _, queued)] = _subscriptions(b2)
        assert queued == 4  # n1 (held by the terminus when stored), n2, p0, p1
        out = _rhea_durable(port, "/topic/news", take=4, end=True)
        [att] = out["attachments"]
        assert att["source"] == {"address": "/topic/news", "durable": 2,
                                 "expiry_policy": "never", "timeout": None}, att
        # every recovered message is marked redelivered (it may have been
        # delivered before the stop): delivery-count 1
        assert _got(att) == [("n1", 1, False), ("n2", 1, False), ("p0", 1, False),
                             ("p1", 1, False)]
        assert _subscriptions(b2) == []
    b3 = Broker(data_dir=tmp_path)
    try:
        assert _subscriptions(b3) == []
    finally:
        b3.close()
