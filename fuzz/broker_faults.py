"""Fault soak of the broker's delivery guarantees across the three protocols
(issue 11, finding 3; issue 26): nothing lost, however the transport dies.

    python fuzz/broker_faults.py [--cuts 1000] [--seed S] [--protocols 0-10,0-9-1,1.0] [--json]

The embedded broker runs as a subprocess; every client connects through a
TCP proxy on loopback that, at random moments, cuts every connection it
carries (once the clients are connected again) -- the client side, the
broker side or both, with a reset (RST) or an orderly close (FIN).  The
side not cut is left open and silent: its endpoint finds the transport dead
by heartbeat (clients ask for 1 s).

* Publishers, one per adapter (blocking socket and Trio), send numbered
  messages on a session with a timeout, resuming it by name after each
  cut (``session_store``); a resume may be answered session-busy while the
  broker has not yet found the old transport dead: they retry.  A sync
  after each batch says which publishes the broker completed.
* Consumers, one per adapter, take messages with explicit accepts on a
  fresh session per connection (the broker releases what a dead one held).

At the end the publishers stop, cuts stop, and a direct connection drains
what is left.  Then, for every message:

* lost: its publish was completed but no consumer ever got it -- must be 0;
* duplicated: the broker delivered it more than once *not* marked
  redelivered, i.e. a replayed publish was enqueued twice -- must be 0
  (exactly-once is what session resume promises the publisher);
* in-doubt lost: the broker forgot publishes a resume should have replayed
  (``lost_commands``) -- must be 0.

Redeliveries after a consumer's cut are expected (at-least-once consumers)
and are reported, not failed.

Beside them, on queues of their own and through the same proxy (so every
cut hits them too), our own client cores over blocking sockets (heartbeats
of 1 s):

* 0-9-1: a publisher in confirm mode counts a message completed when the
  broker confirms it, and publishes what was not confirmed again on its next
  connection (at-least-once: copies are expected and reported); a consumer
  acknowledges each delivery (prefetch 50).  Lost -- confirmed, never
  consumed -- must be 0.
* 1.0: a publisher counts a message completed when the broker settles it
  accepted, and sends what was not settled again on its next connection; the
  consumer holds a durable subscription with unsettled-state (container id
  and link name kept), accepts each delivery, and attaches again after each
  cut with its unsettled map naming the deliveries it accepted: the broker
  settles those on the resume instead of sending them again.  Lost must be
  0, and so must ``resume_duplicates``: a message sent again, payload and
  all, after the client accepted it and named it in its map.

Exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import select
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

QUEUE = "faults"
QUEUE_091 = "faults091"
QUEUE_10 = "faults10"
PROTOCOLS = ("0-10", "0-9-1", "1.0")
BATCH = 40  # publishes between syncs
MODES = ("client", "server", "both")
HOWS = ("rst", "fin")


# ------------------------------------------------------------------ the proxy
class Proxy:
    """Forwards loopback TCP to ``target``; :meth:`cut` kills every pair it
    carries: one side or both, RST or FIN; the other side is left open and
    silent (only closed once its own end closes it)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._pairs: list[list[socket.socket | None]] = []  # [client, broker]
        self._silent: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = False
        self.cuts: Counter[str] = Counter()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        with self._lock:
            for pair in self._pairs:
                for sk in pair:
                    if sk is not None:
                        sk.close()
            for sk in self._silent:
                sk.close()
        self.listener.close()

    def carrying(self) -> int:
        with self._lock:
            return len(self._pairs)

    def cut(self, mode: str, how: str) -> int:
        """Cut every pair; how many there were."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            for client, broker in pairs:
                for side, sk in (("client", client), ("server", broker)):
                    if sk is None:
                        continue
                    if mode in (side, "both"):
                        _kill(sk, how)
                    else:
                        self._silent.append(sk)  # open, never forwarded again
            self.cuts[f"{mode}/{how}"] += 1
            return len(pairs)

    def _run(self) -> None:
        self.listener.setblocking(False)
        while not self._stop:
            with self._lock:
                socks = [self.listener] + [s for p in self._pairs for s in p if s is not None]
                socks += self._silent
            try:
                readable, _, _ = select.select(socks, [], [], 0.05)
            except (OSError, ValueError):
                continue  # a socket was closed under us by a cut
            for sk in readable:
                if sk is self.listener:
                    self._accept()
                    continue
                self._forward(sk)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        try:
            broker = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for sk in (client, broker):
            sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._pairs.append([client, broker])

    def _forward(self, sk: socket.socket) -> None:
        with self._lock:
            if sk in self._silent:
                try:
                    data = sk.recv(65536)
                except OSError:
                    data = b""
                if not data:  # its end gave up on it at last
                    self._silent.remove(sk)
                    sk.close()
                return
            pair = next((p for p in self._pairs if sk in p), None)
            if pair is None:
                return
            other = pair[1] if pair[0] is sk else pair[0]
            try:
                data = sk.recv(65536)
            except OSError:
                data = b""
            if not data:  # one end closed: close the other, as a proxy would
                self._pairs.remove(pair)
                sk.close()
                if other is not None:
                    other.close()
                return
            try:
                assert other is not None
                other.sendall(data)
            except OSError:
                self._pairs.remove(pair)
                sk.close()
                if other is not None:
                    other.close()


def _kill(sk: socket.socket, how: str) -> None:
    with contextlib.suppress(OSError):
        if how == "rst":
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            sk.shutdown(socket.SHUT_RDWR)
        sk.close()


# ------------------------------------------------------------------ books
@attrs.define
class Books:
    """What the clients were told (under a lock: several client threads)."""

    completed: set[str] = attrs.field(factory=set)  # publishes the broker completed
    first_deliveries: Counter[str] = attrs.field(factory=Counter)  # not redelivered
    accepted: Counter[str] = attrs.field(factory=Counter)
    in_doubt_lost: int = 0
    busy_retries: int = 0
    republished: int = 0  # (0-9-1, 1.0) sent again after a cut: at-least-once
    resume_duplicates: int = 0  # (1.0) sent again after it was accepted and named
    resume_settled: int = 0  # (1.0) named on re-attach and settled by the resume
    reconnects: Counter[str] = attrs.field(factory=Counter)
    errors: list[str] = attrs.field(factory=list)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def delivered(self, body: bytes, redelivered: bool) -> None:
        key = body.decode()
        with self.lock:
            if not redelivered:
                self.first_deliveries[key] += 1
            self.accepted[key] += 1


# ------------------------------------------------------------------ clients
def _url(port: int) -> str:
    return f"amqp://guest:guest@127.0.0.1:{port}/?heartbeat=1"


def socket_publisher(port: int, books: Books, stop: threading.Event, name: str) -> None:
    from amqp_sansio.exceptions import AMQPError, SessionError
    from amqp_sansio.v0_10.session import SessionStore
    from amqp_sansio_socket import connect

    store = SessionStore()
    seq = 0
    pending: list[str] = []  # published since the last completed sync
    while not stop.is_set():
        try:
            with connect(_url(port), session_store=store, timeout=10,
                         read_timeout=10) as conn:
                s = _attach_socket(conn, name, books, stop, SessionError)
                if s is None:
                    continue
                if s.lost_commands:
                    with books.lock:
                        books.in_doubt_lost += len(s.lost_commands)
                while not stop.is_set():
                    for _ in range(BATCH):
                        body = f"{name}:{seq}"
                        s.publish(body.encode(), routing_key=QUEUE, wait=False)
                        pending.append(body)
                        seq += 1
                    s.sync(timeout=10)
                    with books.lock:
                        books.completed.update(pending)
                    pending.clear()
                # Everything published is completed before we leave.
                s.sync(timeout=10)
                with books.lock:
                    books.completed.update(pending)
                pending.clear()
                return
        except AMQPError:
            with books.lock:
                books.reconnects[name] += 1
            time.sleep(0.05)


def _attach_socket(conn: Any, name: str, books: Books, stop: threading.Event,
                   busy: type[Exception]) -> Any:
    """Resume the session; while the broker has not found the old transport
    dead it answers session-busy: retry (the old one dies by heartbeat)."""
    while True:
        try:
            return conn.session(name, timeout=60, wait_timeout=10)
        except busy:
            with books.lock:
                books.busy_retries += 1
            time.sleep(0.2)
            if conn.closed:
                return None


def socket_consumer(port: int, books: Books, done: threading.Event, name: str) -> None:
    from amqp_sansio.exceptions import AMQPError
    from amqp_sansio_socket import connect

    while not done.is_set():
        try:
            with connect(_url(port), timeout=10, read_timeout=10) as conn, \
                    conn.session() as s, s.subscribe(QUEUE, prefetch=50) as sub:
                while not done.is_set():
                    d = sub.get(timeout=0.2)
                    if d is None:
                        continue
                    books.delivered(d.body, d.redelivered)
                    d.accept()
        except AMQPError:
            with books.lock:
                books.reconnects[name] += 1
            time.sleep(0.05)


def trio_clients(port: int, books: Books, stop: threading.Event, done: threading.Event) -> None:
    import trio

    from amqp_sansio.exceptions import AMQPError, SessionError
    from amqp_sansio_trio import SessionStore, open_connection

    async def publisher(name: str) -> None:
        store = SessionStore()
        seq = 0
        pending: list[str] = []
        while True:
            try:
                async with open_connection(_url(port), session_store=store) as conn:
                    while True:
                        try:
                            s = await conn.attach(name, timeout=60)
                            break
                        except SessionError:
                            with books.lock:
                                books.busy_retries += 1
                            await trio.sleep(0.2)
                    if s.resumed is not None and s.lost_commands:
                        with books.lock:
                            books.in_doubt_lost += len(s.lost_commands)
                    while not stop.is_set():
                        for _ in range(BATCH):
                            body = f"{name}:{seq}"
                            await s.publish(body.encode(), routing_key=QUEUE, wait=False)
                            pending.append(body)
                            seq += 1
                        with trio.fail_after(10):
                            await s.sync()
                        with books.lock:
                            books.completed.update(pending)
                        pending.clear()
                    with trio.fail_after(10):
                        await s.sync()
                    with books.lock:
                        books.completed.update(pending)
                    pending.clear()
                    return
            except (AMQPError, trio.TooSlowError):
                with books.lock:
                    books.reconnects[name] += 1
                await trio.sleep(0.05)

    async def consumer(name: str) -> None:
        while not done.is_set():
            try:
                async with open_connection(_url(port)) as conn, conn.session() as s, \
                        s.subscribe(QUEUE, prefetch=50) as sub:
                    while not done.is_set():
                        with trio.move_on_after(0.2):
                            d = await sub.get()
                            books.delivered(d.body, d.redelivered)
                            await d.accept()
            except AMQPError:
                with books.lock:
                    books.reconnects[name] += 1
                await trio.sleep(0.05)

    async def main() -> None:
        async with trio.open_nursery() as n:
            n.start_soon(publisher, "trio-pub")
            n.start_soon(consumer, "trio-sub")

    trio.run(main)


# ------------------------------------------------------------------ our cores, 0-9-1 and 1.0


class Lost(Exception):
    """The transport died (or the broker closed the connection)."""


class CorePump:
    """A client core over a blocking socket (through the proxy), its timers
    run, its events kept; :class:`Lost` once the transport is gone."""

    def __init__(self, port: int, core: Any) -> None:
        try:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            raise Lost(str(e)) from None
        self.sock.setblocking(False)
        self.core = core
        self.events: list[Any] = []

    def flush(self) -> None:
        data = self.core.data_to_send()
        while data:
            try:
                n = self.sock.send(data)
                data = data[n:]
            except BlockingIOError:
                select.select([], [self.sock], [], 0.2)
            except OSError as e:
                raise Lost(str(e)) from None

    def step(self, wait: float = 0.05) -> list[Any]:
        """Write, wait up to ``wait`` for input, feed it and the timers; the
        new events."""
        self.flush()
        now = time.monotonic()
        due = self.core.next_deadline()
        if due is not None:
            wait = max(0.0, min(wait, due - now))
        r, _, _ = select.select([self.sock], [], [], wait)
        got: list[Any] = []
        now = time.monotonic()
        try:
            if r:
                try:
                    data = self.sock.recv(1 << 20)
                except BlockingIOError:
                    data = None
                except OSError:
                    data = b""
                if data == b"":
                    raise Lost("closed")
                if data:
                    got += self.core.receive_data(data, now) or []
            due = self.core.next_deadline()
            if due is not None and due <= now:
                got += self.core.handle_timer(now) or []
        except Lost:
            raise
        except Exception as e:  # the core says the peer broke the protocol, or it is over
            raise Lost(f"{type(e).__name__}: {e}") from None
        take = getattr(self.core, "take_events", None)
        if take is not None:
            got += take()
        self.flush()
        self.events += got
        if self.closed or any(type(e).__name__ in ("ConnectionLost", "HeartbeatTimeout",
                                                   "ConnectionClosed") for e in got):
            raise Lost("the connection ended")
        return got

    @property
    def closed(self) -> bool:
        return bool(self.core.closed)

    def until(self, pred: Callable[[], bool], timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > end:
                raise Lost("timed out")
            self.step()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def note(books: Books, e: Exception) -> None:
    """Why a client started again (the kinds are reported)."""
    if not isinstance(e, Lost):
        with books.lock:
            books.errors.append(f"{type(e).__name__}: {e}"[:120])


class Waiting:
    """Outcomes awaited: the channel or link closed by the broker, or 15 s
    without one, is a connection to start again (at-least-once: what was
    not confirmed goes again) -- never a client waiting for ever."""

    ENDS = ("ChannelClosed", "LinkDetached", "SessionEnded")

    def __init__(self, patience: float = 15.0) -> None:
        self.patience = patience
        self.until = time.monotonic() + patience

    def on(self, events: list[Any]) -> list[Any]:
        if events:
            self.until = time.monotonic() + self.patience
        if any(type(e).__name__ in self.ENDS for e in events):
            raise Lost("closed by the broker")
        if time.monotonic() > self.until:
            raise Lost(f"no outcome for {self.patience:g} s")
        return events


class Outbox:
    """What an at-least-once publisher sends next: what was not confirmed on
    an earlier connection first, else a new numbered batch -- none once it
    is stopping (it then only finishes what it owes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seq = 0
        self.again: list[str] = []

    def next(self, stopping: bool) -> list[str]:
        if self.again:
            batch, self.again = self.again, []
            return batch
        if stopping:
            return []
        batch = [f"{self.name}:{self.seq + i}" for i in range(BATCH)]
        self.seq += BATCH
        return batch

    def lost(self, books: Books, unsettled: Iterable[str]) -> None:
        """The connection went: what it had not confirmed goes again."""
        self.again = [*unsettled, *self.again]
        with books.lock:
            books.reconnects[self.name] += 1
            books.republished += len(self.again)


def _core_091() -> Any:
    from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, Role

    return Connection(Role.CLIENT, ClientConfig(username="guest", password="guest",
                                                heartbeat=1))


def publisher_091(port: int, books: Books, stop: threading.Event) -> None:
    """Confirm mode; what was not confirmed goes again on the next connection."""
    from amqp_sansio.v0_9_1 import events as ev
    from amqp_sansio.v0_9_1 import spec

    box = Outbox("091-pub")
    unconfirmed: dict[int, str] = {}  # this connection's publish sequence number -> body
    finishing = False
    while True:
        pump = None
        try:
            pump = CorePump(port, _core_091())
            pump.until(lambda p=pump: p.core.state.name == "OPEN")
            ch = pump.core.open_channel()
            pump.until(lambda ch=ch: ch.is_open)
            ch.send(spec.ConfirmSelect())
            pump.until(lambda ch=ch: ch.confirm_mode)
            unconfirmed = {}
            while True:
                finishing = finishing or stop.is_set()
                batch = box.next(finishing)
                for body in batch:
                    unconfirmed[ch.publish("", QUEUE_091, body.encode())] = body
                waited = Waiting()
                while unconfirmed:
                    for e in waited.on(pump.step(0.2)):
                        if isinstance(e, ev.PublishConfirmed):
                            for n in e.sequence_numbers:
                                body = unconfirmed.pop(n, None)
                                if body is None:
                                    continue
                                if e.ack:
                                    with books.lock:
                                        books.completed.add(body)
                                else:
                                    box.again.append(body)
                if finishing and not box.again:
                    return
        except Exception as e:  # noqa: BLE001 (Lost; a link or channel gone under us)
            note(books, e)
            box.lost(books, unconfirmed.values())
            unconfirmed = {}
            time.sleep(0.05)
        finally:
            if pump is not None:
                pump.close()


def consumer_091(port: int, books: Books, done: threading.Event) -> None:
    from amqp_sansio.v0_9_1 import events as ev
    from amqp_sansio.v0_9_1 import spec

    name = "091-sub"
    while not done.is_set():
        pump = None
        try:
            pump = CorePump(port, _core_091())
            pump.until(lambda p=pump: p.core.state.name == "OPEN")
            ch = pump.core.open_channel()
            pump.until(lambda ch=ch: ch.is_open)
            ch.send(spec.BasicQos(prefetch_count=50))
            ch.send(spec.BasicConsume(queue=QUEUE_091, consumer_tag="c"))
            while not done.is_set():
                for e in pump.step(0.2):
                    if isinstance(e, ev.MessageReceived):
                        books.delivered(e.body, bool(e.method.redelivered))
                        ch.ack(e.method.delivery_tag)
        except Exception as e:  # noqa: BLE001 (Lost; a link or channel gone under us)
            note(books, e)
            with books.lock:
                books.reconnects[name] += 1
            time.sleep(0.05)
        finally:
            if pump is not None:
                pump.close()


def _core_10(container: str) -> Any:
    from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role

    return Connection(Role.CLIENT, ClientConfig(container_id=container, idle_timeout=1000,
                                                username="guest", password="guest"))


def _session_10(pump: CorePump) -> Any:
    s = pump.core.begin()
    pump.until(lambda: s.state.name == "MAPPED")
    return s


def publisher_10(port: int, books: Books, stop: threading.Event) -> None:
    """Unsettled sends; what the broker did not settle goes again."""
    from amqp_sansio.v1_0 import events as ev
    from amqp_sansio.v1_0.message import AmqpMessage, encode_message
    from amqp_sansio.v1_0.spec import Accepted, Data, Target

    box = Outbox("10-pub")
    out: dict[bytes, str] = {}
    finishing = False
    while True:
        pump = None
        try:
            pump = CorePump(port, _core_10(f"faults-pub-{box.seq}"))
            s = _session_10(pump)
            link = s.attach_sender("pub", target=Target(address=QUEUE_10))
            pump.until(lambda lk=link: lk.credit > 0)
            out = {}
            while True:
                finishing = finishing or stop.is_set()
                for body in box.next(finishing):
                    pump.until(lambda lk=link: lk.credit > 0)
                    tag = body.encode()
                    link.send(encode_message(AmqpMessage(body=(Data(tag),))), tag=tag)
                    out[tag] = body
                waited = Waiting()
                while out:
                    for e in waited.on(pump.step(0.2)):
                        if isinstance(e, ev.DeliveryUpdated) and e.link is link and e.settled:
                            body = out.pop(e.delivery.tag, None)
                            if body is None:
                                continue
                            if isinstance(e.state, Accepted):
                                with books.lock:
                                    books.completed.add(body)
                            else:
                                box.again.append(body)
                if finishing and not box.again:
                    return
        except Exception as e:  # noqa: BLE001 (Lost; a link gone under us)
            note(books, e)
            box.lost(books, out.values())
            out = {}
            time.sleep(0.05)
        finally:
            if pump is not None:
                pump.close()


def consumer_10(port: int, books: Books, done: threading.Event) -> None:
    """A durable subscription with unsettled-state: after each cut the same
    container attaches the same link again naming what it accepted."""
    from amqp_sansio.v1_0 import events as ev
    from amqp_sansio.v1_0.codec import Symbol
    from amqp_sansio.v1_0.message import decode_message
    from amqp_sansio.v1_0.spec import Accepted, Source, TerminusDurability

    name = "10-sub"
    accepted: dict[bytes, str] = {}  # tag -> body: what we accepted (named on re-attach)
    while not done.is_set():
        pump = None
        try:
            pump = CorePump(port, _core_10("faults-sub"))
            s = _session_10(pump)
            link = s.attach_receiver("sub", source=Source(
                address=QUEUE_10, durable=TerminusDurability.UNSETTLED_STATE,
                expiry_policy=Symbol("never")), unsettled={t: Accepted() for t in accepted})
            pump.until(lambda lk=link: lk.state.name != "ATTACH_SENT")
            if link.remote_source is None:
                raise Lost("subscription refused")
            link.flow(50)
            while not done.is_set():
                for e in pump.step(0.2):
                    if not (isinstance(e, ev.DeliveryReceived) and e.link is link):
                        continue
                    d = e.delivery
                    if d.resumed and not e.payload:
                        with books.lock:  # the broker settled one we named: not sent again
                            books.resume_settled += 1
                    if e.payload:
                        body = decode_message(e.payload).body[0].value.decode()
                        with books.lock:
                            if d.tag in accepted:
                                books.resume_duplicates += 1
                        books.delivered(body.encode(), bool(d.resumed))
                        accepted[d.tag] = body
                    if not d.settled:
                        d.settle(Accepted())
                    if link.credit < 25:
                        link.flow(50)
        except Exception as e:  # noqa: BLE001 (Lost; a link or channel gone under us)
            note(books, e)
            with books.lock:
                books.reconnects[name] += 1
            time.sleep(0.05)
        finally:
            if pump is not None:
                pump.close()


# ------------------------------------------------------------------ the run
@contextlib.contextmanager
def broker_process(log: str | None = None) -> Iterator[int]:
    """The embedded broker in a subprocess (1 s heartbeats allowed); its port.
    ``log``: a file for what it logs (warnings and up)."""
    from pathlib import Path

    from amqp_sansio_fuzz.campaign import EmbeddedBroker

    broker = EmbeddedBroker(args=("--heartbeat-min", "1", "--log-level", "warning"),
                            log=Path(log) if log else None)
    try:
        yield broker.start().port
    finally:
        broker.stop()


def _drain(port: int, books: Books) -> None:
    from amqp_sansio_socket import connect

    with connect(f"amqp://guest:guest@127.0.0.1:{port}/", timeout=10) as conn, \
            conn.session() as s, s.subscribe(QUEUE, prefetch=500) as sub:
        while (d := sub.get(timeout=1.0)) is not None:
            books.delivered(d.body, d.redelivered)
            d.accept()
        s.sync()


def _retried(drain: Callable[[], None], books: Books, attempts: int = 5) -> None:
    """Run a drain, again on a new connection if it is lost (what it took is
    booked already; what it had not acknowledged comes back redelivered)."""
    for n in range(attempts):
        try:
            drain()
            return
        except Exception as e:  # noqa: BLE001 - reported, then tried again
            with books.lock:
                books.errors.append(f"drain {n + 1}: {type(e).__name__}: {e}"[:120])
            time.sleep(1)


def _declare_091(port: int, queues: list[str]) -> None:
    from amqp_sansio.v0_9_1 import spec

    pump = CorePump(port, _core_091())
    try:
        pump.until(lambda: pump.core.state.name == "OPEN")
        ch = pump.core.open_channel()
        pump.until(lambda: ch.is_open)
        for q in queues:
            ch.send(spec.QueueDeclare(queue=q))
        pump.until(lambda: not ch.pending)
    finally:
        pump.close()


def _drain_091(port: int, books: Books) -> None:
    from amqp_sansio.v0_9_1 import events as ev
    from amqp_sansio.v0_9_1 import spec

    pump = CorePump(port, _core_091())
    try:
        pump.until(lambda p=pump: p.core.state.name == "OPEN")
        ch = pump.core.open_channel()
        pump.until(lambda ch=ch: ch.is_open)
        while True:
            ch.send(spec.BasicGet(queue=QUEUE_091))
            got: list[Any] = []
            end = time.monotonic() + 10
            while not any(isinstance(e, ev.MessageReceived) or (
                    isinstance(e, ev.MethodReceived) and isinstance(e.method, spec.BasicGetEmpty))
                    for e in got):
                if time.monotonic() > end:
                    raise Lost("no answer to basic.get")
                got += pump.step()
            m = next((e for e in got if isinstance(e, ev.MessageReceived)), None)
            if m is None:
                return
            books.delivered(m.body, bool(m.method.redelivered))
            ch.ack(m.method.delivery_tag)
    finally:
        pump.close()


def _drain_10(port: int, books: Books) -> None:
    """The durable subscription once more (what its terminus held comes back
    or is settled), until nothing comes for 2 s; then closed for good."""
    done = threading.Event()
    t = threading.Thread(target=consumer_10, args=(port, books, done), daemon=True)
    t.start()
    last = -1
    while True:
        time.sleep(2)
        with books.lock:
            n = sum(books.accepted.values())
        if n == last:
            break
        last = n
    done.set()
    t.join(30)


def run(cuts: int, seed: int, gap: tuple[float, float] = (0.2, 1.2),
        log: Callable[[str], None] = print,
        protocols: tuple[str, ...] = PROTOCOLS, broker_log: str | None = None
        ) -> dict[str, Any]:
    rng = random.Random(seed)
    books = {p: Books() for p in protocols}
    stop, done = threading.Event(), threading.Event()
    t0 = time.monotonic()
    severed = 0  # connections cut
    hung: list[str] = []
    with broker_process(broker_log) as broker_port:
        from amqp_sansio_socket import connect

        if "0-10" in protocols:
            with connect(f"amqp://guest:guest@127.0.0.1:{broker_port}/", timeout=10) as c, \
                    c.session() as s:
                s.declare_queue(QUEUE)
        if "0-9-1" in protocols or "1.0" in protocols:
            _declare_091(broker_port, [QUEUE_091, QUEUE_10])
        proxy = Proxy(("127.0.0.1", broker_port))
        publishers: list[threading.Thread] = []
        workers: list[threading.Thread] = []
        if "0-10" in protocols:
            b = books["0-10"]
            publishers.append(threading.Thread(target=socket_publisher,
                                               args=(proxy.port, b, stop, "sock-pub")))
            workers += [threading.Thread(target=socket_consumer,
                                         args=(proxy.port, b, done, "sock-sub")),
                        threading.Thread(target=trio_clients, args=(proxy.port, b, stop, done))]
        if "0-9-1" in protocols:
            b = books["0-9-1"]
            publishers.append(threading.Thread(target=publisher_091, args=(proxy.port, b, stop)))
            workers.append(threading.Thread(target=consumer_091, args=(proxy.port, b, done)))
        if "1.0" in protocols:
            b = books["1.0"]
            publishers.append(threading.Thread(target=publisher_10, args=(proxy.port, b, stop)))
            workers.append(threading.Thread(target=consumer_10, args=(proxy.port, b, done)))
        for w in publishers + workers:
            w.daemon = True
            w.start()
        try:
            # Every protocol's clients under way before the first cut (a client
            # slow to start would otherwise see few cuts, or none).
            end = time.monotonic() + 60
            while time.monotonic() < end and not all(b.completed for b in books.values()):
                time.sleep(0.1)
            for n in range(cuts):
                time.sleep(rng.uniform(*gap))
                # Cut only while the clients are connected again (up to 10 s):
                # a cut of nothing would count for nothing.
                end = time.monotonic() + 10
                while proxy.carrying() < rng.randint(1, 4) and time.monotonic() < end:
                    time.sleep(0.05)
                mode, how = rng.choice(MODES), rng.choice(HOWS)
                carried = proxy.cut(mode, how)
                severed += carried
                if (n + 1) % 50 == 0:
                    total = sum(len(b.completed) for b in books.values())
                    log(f"{n + 1} cuts ({time.monotonic() - t0:.0f} s, {total} "
                        f"publishes completed, last cut {mode}/{how} of {carried})")
            stop.set()
            # Publishers finish (resuming once more if they must) ...
            for w in publishers:
                w.join(120)
            time.sleep(3)  # ... and the trio publisher, in its own thread
            done.set()
            for w in publishers + workers:
                w.join(60)
            hung = [w.name for w in publishers + workers if w.is_alive()]
        finally:
            proxy.close()
        # (each drain tries again on a new connection if its own is lost)
        if "0-10" in protocols:
            _retried(lambda: _drain(broker_port, books["0-10"]), books["0-10"])
        if "0-9-1" in protocols:
            _retried(lambda: _drain_091(broker_port, books["0-9-1"]), books["0-9-1"])
        if "1.0" in protocols:
            _drain_10(broker_port, books["1.0"])
    per: dict[str, Any] = {}
    for proto, b in books.items():
        lost = sorted(k for k in b.completed if b.accepted[k] == 0)
        duplicated = sorted(k for k, n in b.first_deliveries.items() if n > 1)
        per[proto] = {
            "completed": len(b.completed),
            "consumed": sum(1 for n in b.accepted.values() if n), "lost": len(lost),
            # 0-10: enqueued twice (a replayed publish); 0-9-1, 1.0: copies
            # of a message sent again after a cut (at-least-once), reported
            "duplicated": len(duplicated), "in_doubt_lost": b.in_doubt_lost,
            "republished": b.republished, "resume_duplicates": b.resume_duplicates,
            "resume_settled": b.resume_settled,
            "consumer_redeliveries": sum(n - 1 for n in b.accepted.values() if n > 1),
            "busy_retries": b.busy_retries, "reconnects": dict(b.reconnects),
            "client_errors": Counter(e.split(":")[0] + ": " + e.split(":", 1)[-1][:60]
                                     for e in b.errors).most_common(3),
            "examples": {"lost": lost[:5], "duplicated": duplicated[:5]}}
    return {"cuts": sum(proxy.cuts.values()), "by_kind": dict(proxy.cuts),
            "connections_cut": severed, "seed": seed,
            "seconds": round(time.monotonic() - t0, 1), "hung": hung, **per}


def violations(result: dict[str, Any]) -> list[str]:
    """What the soak must not see: anything lost (every protocol); a 0-10
    publish enqueued twice or forgotten in doubt; a 1.0 delivery sent again
    after it was accepted and named; a client that hung."""
    bad = [f"hung: {result['hung']}"] if result["hung"] else []
    for proto in PROTOCOLS:
        r = result.get(proto)
        if r is None:
            continue
        if r["lost"]:
            bad.append(f"{proto}: {r['lost']} lost")
        if proto == "0-10" and (r["duplicated"] or r["in_doubt_lost"]):
            bad.append(f"0-10: {r['duplicated']} duplicated, {r['in_doubt_lost']} in doubt lost")
        if proto == "1.0" and r["resume_duplicates"]:
            bad.append(f"1.0: {r['resume_duplicates']} sent again after accepted")
    return bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cuts", type=int, default=1000)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--protocols", default=",".join(PROTOCOLS),
                   help="comma-separated, of %(default)s")
    p.add_argument("--broker-log", metavar="FILE", help="the broker's log (warnings and up)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    a = p.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    protocols = tuple(x for x in a.protocols.split(",") if x)
    result = run(a.cuts, seed, log=(lambda _m: None) if a.json else print, protocols=protocols,
                 broker_log=a.broker_log)
    bad = violations(result)
    result["violations"] = bad
    print(json.dumps(result) if a.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
