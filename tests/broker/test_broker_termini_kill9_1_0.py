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

import pytest
from test_broker_kill9 import start
from test_broker_termini_record_1_0 import _rows

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.codec import Symbol
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role
from amqp_sansio.v1_0.link import Link
from amqp_sansio.v1_0.message import AmqpMessage, encode_message
from amqp_sansio.v1_0.spec import (
    Accepted,
    Data,
    Header,
    Released,
    Source,
    Target,
    TerminusDurability,
    TerminusExpiryPolicy,
    TransactionalState,
)
from amqp_sansio.v1_0.transactions import Controller, transactional
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


def _receive(c: SocketClient, r: Link, credit: int) -> list[Any]:
    """Grant ``credit``; every delivery ``r`` got once it has them all."""
    r.flow(credit)
    want = len(c.of(ev.DeliveryReceived, r)) + credit
    c.wait(lambda: len(c.of(ev.DeliveryReceived, r)) == want)
    return c.of(ev.DeliveryReceived, r)


def _settle_all_and_close(c: SocketClient, r: Link, got: list[Any]) -> None:
    """Accept ``got``, close the subscription (its record goes), disconnect."""
    for e in got:
        e.delivery.settle(Accepted())
    r.detach(closed=True)
    c.wait(lambda: bool(c.of(ev.LinkDetached, r)))
    c.close()


def _stop(proc: Any) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    proc.communicate(timeout=10)


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
        _publish(c, 4)
        got = _receive(c, r, 3)
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
        _settle_all_and_close(c, r, back[1:])
    finally:
        _stop(proc)
    b = Broker(data_dir=tmp_path)
    try:
        assert list(b.queues["kept"].messages) == []  # all four settled: none stored
        assert len(b.services["1.0"].termini(0.0)) == 0  # closed: its record is gone
    finally:
        b.close()


def _publish(c: SocketClient, n: int, *, durable: bool = True) -> None:
    pub = c.session.attach_sender("pub", target=Target(address="kept"))
    sent = 0
    while sent < n:
        c.wait(lambda: pub.credit > 0)
        for i in range(sent, sent + min(pub.credit, n - sent)):
            pub.send(encode_message(AmqpMessage(header=Header(durable=durable),
                                                body=(Data(b"m%d" % i),))), tag=b"%d" % i)
            sent += 1
    c.wait(lambda: len(c.of(ev.DeliveryUpdated, pub)) == n)  # stored, then accepted


def test_tags_of_non_persistent_deliveries_are_not_reused_after_kill_9(
        tmp_path: Path) -> None:
    """Killed while the client holds non-persistent deliveries unsettled
    (no held rows: their messages die with the broker): the terminus'
    stored tag reservation keeps the re-attached link's new deliveries off
    their tags, though the broker cannot name them."""
    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "transient-subscriber")
        r = _subscribe(c)
        _publish(c, 3, durable=False)
        got = _receive(c, r, 3)
        held = {e.delivery.tag for e in got}
        assert _held_rows(tmp_path) == set()  # (nothing recorded of them)
    finally:
        _kill(proc)

    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "transient-subscriber")
        r = _subscribe(c, dict.fromkeys(held))
        assert not r.remote_unsettled  # the broker does not know them
        _publish(c, 3, durable=False)
        anew = _receive(c, r, 3)
        assert [e.payload[-2:] for e in anew] == [b"m0", b"m1", b"m2"]
        assert not {e.delivery.tag for e in anew} & held
        assert len({e.delivery.tag for e in anew}) == 3
        c.close()
    finally:
        _kill(proc)


def _held_rows(data: Path) -> set[bytes]:
    return set(_rows(data))


def test_many_unsettled_deliveries_resume_after_kill_9(tmp_path: Path) -> None:
    """300 deliveries on the link, a third accepted before the kill: the
    record names the 200 others (a row each); after the restart the client's
    outcomes for some are taken, the rest sent again, none anew."""
    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "many")
        r = _subscribe(c)
        _publish(c, 300)
        got = _receive(c, r, 300)
        for e in got[::3]:
            e.delivery.update(Accepted())
        c.wait(lambda: all(e.delivery.remote_settled for e in got[::3]))
        kept = [e.delivery.tag for i, e in enumerate(got) if i % 3]
    finally:
        _kill(proc)
    assert _held_rows(tmp_path) == set(kept)

    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "many")
        theirs: dict[bytes, Any] = {tag: Accepted() if i < 50 else None
                                    for i, tag in enumerate(kept)}
        r = _subscribe(c, theirs)
        assert r.remote_unsettled == dict.fromkeys(kept)
        r.flow(300)
        c.wait(lambda: len(c.of(ev.DeliveryReceived, r)) == 200)
        back = c.of(ev.DeliveryReceived, r)
        assert all(e.delivery.resumed for e in back)
        assert [e.delivery.tag for e in back] == kept
        assert all(e.delivery.remote_settled and not e.payload for e in back[:50])
        assert [e.payload.rsplit(b"m", 1)[1] for e in back[50:]] == [
            b"%d" % i for i in range(300) if i % 3][50:]  # their messages, in order
        _settle_all_and_close(c, r, back[50:])
    finally:
        _stop(proc)
    assert _held_rows(tmp_path) == set()
    b = Broker(data_dir=tmp_path)
    try:
        assert list(b.queues["kept"].messages) == []
    finally:
        b.close()


@pytest.mark.parametrize("reattached", [False, True])
def test_a_transaction_open_at_kill_9_rolls_back(tmp_path: Path, reattached: bool) -> None:
    """Killed with a transaction open: a delivery only accepted in it is
    still held (sent again), the two acquired in it are released (their
    messages come anew).  So too when the link had left and attached again
    before the kill (its unsettled map then stated the accepted one in its
    transactional state, the others held)."""
    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "txn-subscriber")
        r = _subscribe(c)
        _publish(c, 3)
        _receive(c, r, 1)
        ctl = Controller(c.session)
        c.wait(lambda: ctl.link.credit > 0)
        ctl.declare()
        c.wait(lambda: any(isinstance(e, ev.DeliveryUpdated) and e.link is ctl.link
                           for e in c.events))
        [declared] = [x for e in c.events if (x := ctl.handle(e)) is not None]
        txn = declared.txn_id
        [first] = c.of(ev.DeliveryReceived, r)
        first.delivery.update(transactional(txn, Accepted()))
        r.flow(2, properties={Symbol("txn-id"): txn})
        c.wait(lambda: len(c.of(ev.DeliveryReceived, r)) == 3)
        tags = [e.delivery.tag for e in c.of(ev.DeliveryReceived, r)]
        c.wait(lambda: _held_rows(tmp_path) == set(tags))  # (the accept's row too)
        if reattached:
            r.detach(closed=False)
            c.wait(lambda: bool(c.of(ev.LinkDetached, r)))
            r = _subscribe(c, {tags[0]: transactional(txn, Accepted()),
                               tags[1]: TransactionalState(txn_id=txn), tags[2]: None})
            assert r.remote_unsettled == {tags[0]: transactional(txn, Accepted()),
                                          tags[1]: None, tags[2]: None}
    finally:
        _kill(proc)

    proc, url = start(tmp_path)
    try:
        c = SocketClient(url, "txn-subscriber")
        r = _subscribe(c, {tags[0]: transactional(txn, Accepted()),
                           tags[1]: TransactionalState(txn_id=txn), tags[2]: None})
        assert r.remote_unsettled == dict.fromkeys(tags)
        r.flow(10)
        c.wait(lambda: len(c.of(ev.DeliveryReceived, r)) == 5)
        got = c.of(ev.DeliveryReceived, r)
        resumed = {e.delivery.tag: e for e in got if e.delivery.resumed}
        assert sorted(resumed) == sorted(tags)
        assert resumed[tags[0]].payload[-2:] == b"m0"  # still held: sent again
        for tag in tags[1:]:
            assert resumed[tag].delivery.remote_state == Released()
        assert sorted(e.payload[-2:] for e in got if not e.delivery.resumed) == [b"m1", b"m2"]
        c.close()
    finally:
        _kill(proc)
