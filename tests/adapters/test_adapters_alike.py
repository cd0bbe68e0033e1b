"""The Trio and the blocking-socket adapters behave alike (issues 12 and 13).

Both are pumps around one client policy (:mod:`amqp_sansio.client`), so the
same mistake raises the same exception in both, both export the same
names, both negotiate the same heartbeat and warn alike when the broker
refuses one, both log to their own logger -- never a password -- and both
pipeline a publish that asks for no verdict.  Every check runs each adapter
against the embedded broker (or a small server written here) over real
loopback TCP; each test is bounded in time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

import amqp_sansio.exceptions as exceptions
import amqp_sansio_socket
import amqp_sansio_trio
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread

ADAPTERS = ("trio", "socket")
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[str, int]]:
    """One broker: alice/s3cret, vhosts / and other, heartbeats 1..120 s."""
    host, port, stop = start_broker_thread(Broker(users={"alice": "s3cret"},
                                                  virtual_hosts=("/", "other"),
                                                  heartbeat_min=1, heartbeat_max=120))
    try:
        yield host, port
    finally:
        stop()


@pytest.fixture(scope="module")
def plain_broker() -> Iterator[tuple[str, int]]:
    """A broker that offers no heartbeats."""
    host, port, stop = start_broker_thread(Broker(users={"alice": "s3cret"}, heartbeat_min=None,
                                                  heartbeat_max=None))
    try:
        yield host, port
    finally:
        stop()


def url(where: tuple[str, int], user: str | None = "alice:s3cret", path: str = "",
        query: str = "") -> str:
    host, port = where
    cred = f"{user}@" if user else ""
    return f"amqp://{cred}{host}:{port}{path}{'?' + query if query else ''}"


def opened(adapter: str, address: str, **kw: Any) -> dict[str, Any]:
    """Connect with ``adapter``, open a session, declare a queue; return what
    the connection agreed (or raise what connecting raised)."""
    if adapter == "socket":
        with amqp_sansio_socket.connect(address, **kw) as c, c.session() as s:
            s.declare_queue("alike")
            return {"heartbeat": c.heartbeat, "mechanism": c.policy.opened.mechanism}

    async def main() -> dict[str, Any]:
        with trio.fail_after(TIMEOUT):
            async with amqp_sansio_trio.open_connection(address, **kw) as c, \
                    c.session() as s:
                await s.declare_queue("alike")
                return {"heartbeat": c.heartbeat, "mechanism": c.policy.opened.mechanism}

    return trio.run(main)


def failure(adapter: str, address: str, **kw: Any) -> BaseException:
    with pytest.raises(Exception) as ei:
        opened(adapter, address, **kw)
    return ei.value


# ---------------------------------------------------------------- names
def test_both_export_the_same_names() -> None:
    shared = {"Connection", "Session", "Subscription", "Delivery", "Message", "SessionStore",
              "HIGH_WATER", "client_0_9_1", *exceptions.__all__}
    for mod in (amqp_sansio_trio, amqp_sansio_socket):
        missing = shared - set(mod.__all__)
        assert not missing, f"{mod.__name__} lacks {sorted(missing)}"
        for name in exceptions.__all__:
            assert getattr(mod, name) is getattr(exceptions, name)


# A fresh interpreter imports one adapter and runs a 0-10 round trip
# against the parent's broker; it prints which modules of the other two
# protocols it loaded by then (none: they are imported on first use), and
# again once every name of ``__all__`` has been read.
_ZERO_TEN_ONLY = """\
import json, sys
address, adapter = sys.argv[1], sys.argv[2]
OTHERS = ("amqp_sansio.v0_9_1", "amqp_sansio.v1_0", "amqp_sansio_socket.client_0_9_1",
          "amqp_sansio_socket.client_1_0", "amqp_sansio_trio.client_0_9_1",
          "amqp_sansio_trio.client_1_0")
def others():
    return sorted(n for n in sys.modules if n.startswith(OTHERS))
if adapter == "socket":
    import amqp_sansio_socket as mod
    with mod.connect(address) as c, c.session() as s:
        s.declare_queue("zero-ten-only")
        s.publish(b"x", routing_key="zero-ten-only")
        with s.subscribe("zero-ten-only") as sub:
            got = sub.get(timeout=10.0).body
else:
    import trio
    import amqp_sansio_trio as mod
    async def main():
        with trio.fail_after(10.0):
            async with mod.open_connection(address) as c, c.session() as s:
                await s.declare_queue("zero-ten-only")
                await s.publish(b"x", routing_key="zero-ten-only")
                async with s.subscribe("zero-ten-only") as sub:
                    return (await sub.get()).body
    got = trio.run(main)
after_0_10 = others()
listed = sorted(set(mod.__all__) - set(dir(mod)))
names = {n: getattr(mod, n).__name__ for n in ("client_0_9_1", "client_1_0")}
print(json.dumps({"got": got.decode(), "after_0_10": after_0_10, "not_in_dir": listed,
                  "names": names, "after_all": others(),
                  "loaded_0_10": f"{mod.__name__}.client_0_10" in sys.modules}))
"""


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_0_10_program_loads_neither_other_protocol(broker: tuple[str, int],
                                                     adapter: str) -> None:
    """Importing an adapter and using 0-10 loads no 0-9-1 or 1.0 module (the
    clients and their cores are imported on first use); every name of
    ``__all__`` is still there, in ``dir()`` and as an attribute, the lazy
    clients being the package's own submodules."""
    proc = subprocess.run([sys.executable, "-c", _ZERO_TEN_ONLY, url(broker), adapter],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout)
    package = f"amqp_sansio_{adapter}"
    assert seen["got"] == "x" and seen["loaded_0_10"]
    assert seen["after_0_10"] == []
    assert seen["not_in_dir"] == []
    assert seen["names"] == {n: f"{package}.{n}" for n in ("client_0_9_1", "client_1_0")}
    assert {f"{package}.client_0_9_1", f"{package}.client_1_0"} <= set(seen["after_all"])


# ---------------------------------------------------------------- mistakes
@pytest.fixture(scope="module")
def http_peer() -> Iterator[tuple[str, int]]:
    """Answers anything with an HTTP error: not an AMQP peer at all."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                conn.settimeout(1.0)
                with contextlib.suppress(OSError):
                    conn.recv(100)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield listener.getsockname()[:2]
    finally:
        stop.set()
        listener.close()
        t.join(5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


MISTAKES: dict[str, tuple[Callable[..., tuple[str, dict[str, Any]]], type[BaseException]]] = {
    "not an AMQP URL": (lambda b, h: ("http://x", {}), exceptions.InvalidURLError),
    "unknown option": (lambda b, h: ("amqp://h?nope=1", {}), exceptions.InvalidURLError),
    "unknown mechanism": (lambda b, h: (url(b, query="mechanism=KERBEROS"), {}),
                          exceptions.InvalidURLError),
    "PLAIN without a user": (lambda b, h: (url(b, user=None, query="mechanism=PLAIN"), {}),
                             exceptions.InvalidURLError),
    "resume with 0-9-1": (lambda b, h: (url(b, query="protocol=0-9-1"),
                                        {"session_store": amqp_sansio_trio.SessionStore()}),
                          exceptions.InvalidURLError),
    "nothing listens": (lambda b, h: (f"amqp://127.0.0.1:{_free_port()}", {}),
                        exceptions.ConnectError),
    "wrong password": (lambda b, h: (url(b, user="alice:wrong"), {}),
                       exceptions.AuthenticationError),
    "no mechanism in common": (lambda b, h: (url(b, user=None), {}),
                               exceptions.AuthenticationError),
    "unknown vhost": (lambda b, h: (url(b, path="/nowhere"), {}), exceptions.VirtualHostError),
    "not an AMQP peer": (lambda b, h: (f"amqp://{h[0]}:{h[1]}", {}),
                         exceptions.ProtocolMismatchError),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_the_same_mistake_raises_the_same_exception(broker: tuple[str, int],
                                                    http_peer: tuple[str, int],
                                                    mistake: str) -> None:
    make, expected = MISTAKES[mistake]
    address, kw = make(broker, http_peer)
    got = {adapter: failure(adapter, address, **kw) for adapter in ADAPTERS}
    for adapter, e in got.items():
        assert type(e) is expected, (adapter, repr(e))
        assert "s3cret" not in str(e)
    assert got["trio"].args == got["socket"].args or type(got["trio"]) is exceptions.ConnectError
    if expected is exceptions.ProtocolMismatchError:  # caught either way
        assert all(isinstance(e, exceptions.ConnectError | exceptions.ProtocolViolationError)
                   for e in got.values())


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_refused_login_reads_once(broker: tuple[str, int], adapter: str) -> None:
    e = failure(adapter, url(broker, user="alice:wrong"))
    assert isinstance(e, exceptions.AuthenticationError) and e.code == 320
    assert str(e).lower().count("authentication failed") == 1, str(e)
    assert "ProtocolViolation" not in str(e)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_user_without_password_is_refused_saying_why(broker: tuple[str, int],
                                                       adapter: str) -> None:
    """``amqp://alice@host`` names a user for PLAIN (not ANONYMOUS, which then
    ended in "no mechanism in common"), and PLAIN needs a password: said at
    once, before any connection."""
    e = failure(adapter, url(broker, user="alice"))
    assert isinstance(e, exceptions.InvalidURLError), repr(e)
    assert "'alice'" in str(e) and "PLAIN" in str(e) and "password" in str(e), str(e)
    # A mechanism that needs no password takes the user as it is.
    e = failure(adapter, url(broker, user="alice", query="mechanism=ANONYMOUS"))
    assert isinstance(e, exceptions.AuthenticationError), repr(e)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_tuning_option_of_zero_is_no_wish(broker: tuple[str, int], adapter: str) -> None:
    """``?channel_max=0&frame_max=0``: the defaults (the Trio client passed
    the zeros on, the blocking one dropped them)."""
    assert opened(adapter, url(broker, query="channel_max=0&frame_max=0"))


@pytest.fixture
def mute_peer() -> Iterator[tuple[str, int]]:
    """Listens, never accepts or speaks."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        yield listener.getsockname()[:2]
    finally:
        listener.close()


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_connect_timeout_is_an_argument(mute_peer: tuple[str, int], adapter: str) -> None:
    e = failure(adapter, url(mute_peer, user=None), connect_timeout=0.2)
    assert isinstance(e, exceptions.ConnectTimeout), repr(e)


# ---------------------------------------------------------------- heartbeats
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_default_heartbeat_is_60_within_the_brokers_range(broker: tuple[str, int],
                                                          adapter: str) -> None:
    assert opened(adapter, url(broker))["heartbeat"] == 60
    assert opened(adapter, url(broker, query="heartbeat=7"))["heartbeat"] == 7


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_refused_heartbeat_is_a_warning(plain_broker: tuple[str, int], adapter: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=f"amqp_sansio.{adapter}")
    assert opened(adapter, url(plain_broker, query="heartbeat=5"))["heartbeat"] is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                and r.name == f"amqp_sansio.{adapter}"]
    assert len(warnings) == 1 and "heartbeat" in warnings[0].getMessage()
    caplog.clear()
    opened(adapter, url(plain_broker))  # nothing asked for: nothing to warn about
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# ---------------------------------------------------------------- logging
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_lifecycle_at_info_frames_at_debug_never_a_password(
        broker: tuple[str, int], adapter: str, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"amqp_sansio.{adapter}"
    caplog.set_level(logging.DEBUG, logger=name)
    opened(adapter, url(broker, query="mechanism=PLAIN"))
    info = [r.getMessage() for r in caplog.records if r.name == name
            and r.levelno == logging.INFO]
    assert any(m.startswith("connected to") and "heartbeat 60 s" in m for m in info), info
    assert any("ended" in m for m in info), info
    assert not [r for r in caplog.records if r.name == f"{name}.frames"]  # not asked for
    caplog.clear()
    monkeypatch.setenv("AMQP_SANSIO_TRACE", "frames")
    opened(adapter, url(broker, query="mechanism=PLAIN"))
    frames = [r.getMessage() for r in caplog.records if r.name == f"{name}.frames"]
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == f"{name}.frames")
    sent = [m for m in frames if " -> " in m]
    assert any("connection.start-ok" in m and "response=***" in m for m in sent), sent
    assert any("queue.declare" in m for m in sent) and any(" <- " in m for m in frames)
    assert not [r for r in caplog.records if "s3cret" in r.getMessage()]


# ---------------------------------------------------------------- publishing
class _MuteAfter:
    """A broker connection that holds its answers back while ``mute`` is set
    (the broker still reads; what it says goes out once unmuted)."""

    def __init__(self, inner: Any, mute: threading.Event) -> None:
        self.inner = inner
        self.mute = mute
        self.held = bytearray()

    @property
    def closed(self) -> bool:
        return bool(self.inner.closed)

    @property
    def on_output(self) -> Any:
        return self.inner.on_output

    @on_output.setter
    def on_output(self, cb: Any) -> None:
        self.inner.on_output = cb

    def receive_data(self, data: bytes, now: float) -> None:
        self.inner.receive_data(data, now)

    def data_to_send(self) -> bytes:
        self.held += self.inner.data_to_send()
        if self.mute.is_set():
            return b""
        out = bytes(self.held)
        self.held.clear()
        return out

    def handle_timer(self, now: float) -> None:
        self.inner.handle_timer(now)

    def next_deadline(self) -> float | None:
        deadline: float | None = self.inner.next_deadline()
        return deadline

    def connection_lost(self, now: float) -> None:
        self.inner.connection_lost(now)


#: Publishes that wait for the broker.
WAITING: list[dict[str, Any]] = [{"wait": True}, {"confirm": True}]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_publish_pipelines_unless_a_verdict_is_asked_for(adapter: str) -> None:
    """With the broker mute after set-up, a default publish returns at once
    (pipelined) while ``wait=True`` and ``confirm=True`` wait for it."""
    broker = Broker()
    mute = threading.Event()
    with amqp_sansio_socket.Server(lambda: _MuteAfter(broker.connection(), mute)) as srv:
        host, port = srv.address
        address = f"amqp://guest:guest@{host}:{port}"
        if adapter == "socket":
            with amqp_sansio_socket.connect(address, read_timeout=TIMEOUT) as c, \
                    c.session() as s:
                s.declare_queue("piped")
                mute.set()
                ids = [s.publish(b"%d" % i, routing_key="piped") for i in range(5)]
                assert ids == sorted(ids) and s.outstanding == 5
                for kw in WAITING:
                    with pytest.raises(exceptions.AMQPTimeout):
                        s.publish(b"held", routing_key="piped", timeout=0.2, **kw)
                mute.clear()
                s.wait_completed()
                assert s.outstanding == 0 and not s.rejected
                assert s.query_queue("piped").message_count == 7
            return

        async def main() -> None:
            with trio.fail_after(TIMEOUT):
                async with amqp_sansio_trio.open_connection(address) as c, \
                        c.session() as s:
                    await s.declare_queue("piped")
                    mute.set()
                    ids = [await s.publish(b"%d" % i, routing_key="piped") for i in range(5)]
                    assert ids == sorted(ids) and s.outstanding == 5
                    for kw in WAITING:
                        with trio.move_on_after(0.2) as cs:
                            await s.publish(b"held", routing_key="piped", **kw)
                        assert cs.cancelled_caught
                    mute.clear()
                    await s.wait_completed()
                    assert s.outstanding == 0 and not s.rejected
                    assert (await s.query_queue("piped")).message_count == 7

        trio.run(main)


# ---------------------------------------------------------------- batches
@pytest.mark.parametrize("protocol", ["0-10", "0-9-1", "1.0"])
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_get_many_hands_out_batches_one_accept_settles(broker: tuple[str, int], adapter: str,
                                                       protocol: str) -> None:
    """``get_many(limit)`` hands out what is buffered (1..limit, in order;
    ``[]`` once nothing comes) and ``session.accept(batch)`` settles the lot:
    a second subscription finds the queue empty.  Same name and shape in
    both adapters and every protocol."""
    name = f"batch-{adapter}-{protocol}"
    q = f"/queue/{name}" if protocol == "1.0" else name
    address = url(broker, query=f"protocol={protocol}")
    bodies = [b"%d" % i for i in range(12)]
    if adapter == "socket":
        with amqp_sansio_socket.connect(address, read_timeout=TIMEOUT) as c, c.session() as s:
            if protocol != "1.0":
                s.declare_queue(q)
            for b in bodies:
                s.publish(b, routing_key=q)
            got: list[bytes] = []
            with s.subscribe(q, prefetch=20) as sub:
                with pytest.raises(ValueError):
                    sub.get_many(0)
                while len(got) < len(bodies):
                    batch = sub.get_many(5, timeout=TIMEOUT)
                    assert 1 <= len(batch) <= 5
                    s.accept(batch)
                    got += [d.body for d in batch]
                assert sub.get_many(5, timeout=0.2) == []
            assert got == bodies
            with s.subscribe(q, prefetch=20) as sub:
                assert sub.get_many(5, timeout=0.3) == []
        return

    async def main() -> list[bytes]:
        got: list[bytes] = []
        with trio.fail_after(TIMEOUT):
            async with amqp_sansio_trio.open_connection(address) as c, c.session() as s:
                if protocol != "1.0":
                    await s.declare_queue(q)
                for b in bodies:
                    await s.publish(b, routing_key=q)
                async with s.subscribe(q, prefetch=20) as sub:
                    with pytest.raises(ValueError):
                        await sub.get_many(0)
                    while len(got) < len(bodies):
                        batch = await sub.get_many(5)
                        assert 1 <= len(batch) <= 5
                        await s.accept(batch)
                        got += [d.body for d in batch]
                async with s.subscribe(q, prefetch=20) as sub:
                    with trio.move_on_after(0.3) as cs:
                        await sub.get_many(5)
                    assert cs.cancelled_caught
        return got

    assert trio.run(main) == bodies
