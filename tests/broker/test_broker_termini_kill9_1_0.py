"""A durable subscription (unsettled-state) whose link is still attached
when the broker process is killed (SIGKILL, by its pid): its record follows
the link's unsettled deliveries (adapters/broker/termini_1_0.py), so after
the restart a re-attach with the client's unsettled map resumes them --
outcome taken, or sent again with ``resume`` -- instead of getting them as
new deliveries.  Our 1.0 client core over a socket is the client."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_broker_kill9 import start

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role
from amqp_sansio.v1_0.link import Link
from amqp_sansio.v1_0.message import AmqpMessage, encode_message
from amqp_sansio.v1_0.spec import (
    Accepted,
    Data,
    Header,
    Source,
    Target,
    TerminusDurability,
    TerminusExpiryPolicy,
)
from amqp_sansio_broker.model import Broker

UNSETTLED, NEVER = TerminusDurability.UNSETTLED_STATE, TerminusExpiryPolicy.NEVER
WAIT = 10.0  # seconds a wait may take at most (a bound, not an assertion)


class SocketClient:
    """Our 1.0 client core on a socket to ``url`` (no SASL: the broker
    allows anonymous), pumped until what a test waits for happened."""

    def __init__(self, url: str, container: str) -> None:
        host, port = url.removeprefix("amqp://").split("/")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT)
        self.sock.settimeout(0.2)
        self.conn = Connection(Role.CLIENT, ClientConfig(container_id=container))
        self.events: list[Any] = []
        self.session = self.conn.begin()
        self.wait(lambda: self.session.remote_begin is not None)

    def wait(self, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT
        for _ in range(10_000):
            if data := self.conn.data_to_send():
                self.sock.sendall(data)
            if done():
                return
            assert time.monotonic() < deadline, "waited too long"
            try:
                got = self.sock.recv(65536)
            except TimeoutError:
                continue
            assert got, "the broker closed the connection"
            self.events += self.conn.receive_data(got, time.monotonic())
            self.events += self.conn.take_events()
        raise AssertionError("too many rounds")

    def of(self, kind: type, link: Link) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind) and e.link is link]

    def close(self) -> None:
        self.sock.close()


def _subscribe(c: SocketClient, unsettled: dict[bytes, Any] | None = None) -> Link:
    link = c.session.attach_receiver("sub", source=Source(
        address="kept", durable=UNSETTLED, expiry_policy=NEVER), unsettled=unsettled)
    c.wait(lambda: link.remote_source is not None)
    return link


def _kill(proc: Any) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def test_unsettled_deliveries_of_an_attached_link_resume_after_kill_9(tmp_path: Path) -> None:
    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "killed-subscriber")
        r = _subscribe(c)
        assert r.remote_source.durable == UNSETTLED  # the broker says it keeps that
        pub = c.session.attach_sender("pub", target=Target(address="kept"))
        c.wait(lambda: pub.credit > 0)
        for i in range(4):
            pub.send(encode_message(AmqpMessage(header=Header(durable=True),
                                                body=(Data(b"m%d" % i),))), tag=b"%d" % i)
        c.wait(lambda: len(c.of(ev.DeliveryUpdated, pub)) == 4)  # stored, then accepted
        r.flow(3)
        c.wait(lambda: len(c.of(ev.DeliveryReceived, r)) == 3)
        got = c.of(ev.DeliveryReceived, r)
        tags = [e.delivery.tag for e in got]
        assert [e.payload[-2:] for e in got] == [b"m0", b"m1", b"m2"]
        got[0].delivery.update(Accepted())  # unsettled: the broker settles it in return
        c.wait(lambda: got[0].delivery.remote_settled)
        c.close()  # (unread by the broker, or not: it is killed next)
    finally:
        _kill(proc)

    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "killed-subscriber")
        # tags[1]: accepted here while the broker was down; tags[2]: no outcome
        r = _subscribe(c, {tags[1]: Accepted(), tags[2]: None})
        # the broker knew both from its stored record (tags[0] was settled)
        assert r.remote_unsettled == {tags[1]: None, tags[2]: None}
        r.flow(10)
        c.wait(lambda: len(c.of(ev.DeliveryReceived, r)) == 3)
        back = c.of(ev.DeliveryReceived, r)
        assert [(e.delivery.tag, e.delivery.resumed, e.payload[-2:] if e.payload else b"")
                for e in back[:2]] == [(tags[1], True, b""), (tags[2], True, b"m2")]
        assert back[0].delivery.remote_settled  # settled with the client's outcome
        anew = back[2]
        assert anew.payload[-2:] == b"m3" and not anew.delivery.resumed
        assert anew.delivery.tag not in tags  # its tags go on past the stored ones
        for e in back[1:]:
            e.delivery.settle(Accepted())
        r.detach(closed=True)
        c.wait(lambda: bool(c.of(ev.LinkDetached, r)))
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        proc.communicate(timeout=10)
    b = Broker(data_dir=tmp_path)
    try:
        assert list(b.queues["kept"].messages) == []  # all four settled: none stored
        assert len(b.services["1.0"].termini(0.0)) == 0  # closed: its record is gone
    finally:
        b.close()
