"""Both 0-10 clients against a hostile broker (issue 11 finding 2): what a
broker's command names -- a range of ids -- must not drive the client's
memory.  The broker here is the bare server-role core on loopback TCP,
answering each confirmed publish with one ``message.reject`` over a range
of 2**22 ids; each client must keep the range as a range."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Callable, Iterator
from functools import partial

import pytest
import trio

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import Connection as CoreConnection
from amqp_sansio.v0_10.connection import Role, ServerConfig

HUGE = (0, (1 << 22) - 1)  # 4M ids: a dict of them is ~500 MB; the range is a few octets
PEAK_LIMIT = 20 << 20  # octets traced while the reject is handled (generous)


class RejectEverything:
    """A server handler: completes every command; answers each transfer
    with a reject naming ``HUGE`` (which includes the transfer's id)."""

    def __init__(self) -> None:
        self.core = CoreConnection(Role.SERVER, ServerConfig())
        self.on_output: Callable[[], None] | None = None

    @property
    def closed(self) -> bool:
        return self.core.closed

    def receive_data(self, data: bytes, now: float) -> None:
        for e in self.core.receive_data(data, now):
            s = getattr(e, "session", None) or self.core.sessions.get(getattr(e, "channel", -1))
            if isinstance(e, ev.MessageReceived) and s is not None:
                s.send(spec.MessageReject(transfers=SequenceSet([HUGE]), code=1,
                                          text="unroutable"))
                s.complete(e.command_id)
            elif isinstance(e, ev.CommandReceived) and s is not None:
                s.complete(e.command_id)

    def data_to_send(self) -> bytes:
        return self.core.data_to_send()

    def handle_timer(self, now: float) -> None:
        self.core.handle_timer(now)

    def next_deadline(self) -> float | None:
        return self.core.next_deadline()

    def connection_lost(self, now: float) -> None:
        return None


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def test_socket_client_keeps_a_huge_reject_as_a_range(traced: None) -> None:
    from amqp_sansio_socket import MessageRejectedError, Server, connect

    with Server(RejectEverything) as srv:
        runner = threading.Thread(target=srv.serve_forever, daemon=True)
        runner.start()
        host, port = srv.address
        with connect(f"amqp://{host}:{port}", timeout=10, read_timeout=10) as conn:
            s = conn.session()
            tracemalloc.reset_peak()
            with pytest.raises(MessageRejectedError) as err:
                s.publish(b"x", routing_key="q", confirm=True, wait=True)
            _, peak = tracemalloc.get_traced_memory()
            assert err.value.code == 1
            assert peak < PEAK_LIMIT, peak
            assert s.rejected[HUGE[1]] == (1, "unroutable")
            assert len(s.rejected) == HUGE[1]  # the publish took its own id out
            s.rejected.clear()
            assert not s.rejected
        srv.stop()
        runner.join(10)


async def test_trio_client_keeps_a_huge_reject_as_a_range(
        traced: None, nursery: trio.Nursery) -> None:
    from amqp_sansio_trio import MessageRejectedError, open_connection, serve

    listeners = await nursery.start(partial(serve, RejectEverything))
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(30):
        async with open_connection(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
            tracemalloc.reset_peak()
            with pytest.raises(MessageRejectedError):
                await s.publish(b"x", routing_key="q", confirm=True, wait=True)
            _, peak = tracemalloc.get_traced_memory()
            assert peak < PEAK_LIMIT, peak
            assert s.rejected.get(7) == (1, "unroutable")
            assert len(s.rejected) == HUGE[1]
