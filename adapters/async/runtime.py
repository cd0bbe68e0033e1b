"""What the async client needs of an event loop: the seam between the
client (written once, in this package) and a runtime (Trio:
``amqp_sansio_trio._runtime``, asyncio: ``amqp_sansio_asyncio._runtime``).

The client is a pump around the client policy (:mod:`amqp_sansio.client`):
it reads and writes a byte stream, feeds the clock at the policy's
deadlines and waits -- cancellably -- for the policy's
:class:`~amqp_sansio.client.Pending` answers.  So a runtime gives a clock,
two ways to wait (a :class:`Lot` many wait in until woken, an
:class:`Event` once), cancel points, timeouts, a shielded bounded block for
closing, background tasks, and a TCP (TLS) stream.  Nothing else of the
loop is used; nothing here is protocol.
"""

from __future__ import annotations

__all__ = ["Runtime", "Lot", "Event", "Stream", "Nursery", "waker"]

import ssl
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol


class Lot(Protocol):
    """Tasks parked until ``unpark_all`` (Trio's ``ParkingLot``); its
    length is how many are parked."""

    async def park(self) -> None: ...

    def unpark_all(self) -> object: ...

    def __len__(self) -> int: ...


class Event(Protocol):
    """Set once; ``wait`` returns once it is set."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> object: ...


class Stream(Protocol):
    """A connected byte stream (Trio's ``Stream``); ``receive_some`` returns
    ``b""`` at the end.  Failures raise one of :attr:`Runtime.stream_errors`."""

    async def receive_some(self, max_bytes: int) -> bytes | bytearray: ...

    async def send_all(self, data: bytes) -> None: ...


class Nursery(Protocol):
    """Background tasks that end with their block (Trio's nursery)."""

    def start_soon(self, fn: Callable[[], Awaitable[object]]) -> None: ...

    def cancel(self) -> None:
        """Cancel every task started here (the block's own code too, in Trio)."""


class Runtime(Protocol):
    """An event loop, as the async client uses it (see the module docstring)."""

    #: the adapter package's name (``amqp_sansio_trio``): reprs and the logger
    package: str
    #: the logger (``amqp_sansio.trio``; frames: its ``.frames`` child)
    logger: str
    #: what a ``fail_after`` block raises when its time is up
    TooSlow: type[BaseException]
    #: what a broken or closed stream raises (besides :class:`OSError`)
    stream_errors: tuple[type[BaseException], ...]

    def current_time(self) -> float: ...

    def lot(self) -> Lot: ...

    def event(self) -> Event: ...

    async def checkpoint(self) -> None:
        """Let other tasks run; a cancel point."""

    async def checkpoint_if_cancelled(self) -> None:
        """A cancel point that runs nothing else (cheap: the per-message one)."""

    async def cancel_shielded_checkpoint(self) -> None:
        """Let other tasks run; never raises (a cancellation stays pending)."""

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, deadline: float) -> None: ...

    def fail_after(self, seconds: float) -> AbstractAsyncContextManager[object]:
        """A block that raises :attr:`TooSlow` when ``seconds`` are up."""

    def move_on_after(self, seconds: float) -> AbstractAsyncContextManager[object]:
        """A block that is left (silently) when ``seconds`` are up."""

    async def shielded(self, seconds: float, fn: Callable[[], Awaitable[object]]) -> None:
        """Run ``fn()`` to its end, or for ``seconds`` at most, whether or not
        the caller is cancelled meanwhile (closing handshakes): the caller's
        cancellation takes effect afterwards."""

    def open_nursery(self) -> AbstractAsyncContextManager[Nursery]:
        """Background tasks for the block; a single error of the block comes
        out as itself, not in a group."""

    async def connect_tcp(self, host: str, port: int) -> Stream: ...

    async def start_tls(self, stream: Stream, context: ssl.SSLContext,
                        server_hostname: str) -> Stream:
        """TLS over ``stream``, handshake done."""

    async def aclose(self, stream: Stream) -> None:
        """Close now, without waiting on the peer (TLS close_notify etc.)."""


def waker(lot: Lot) -> Callable[[], None]:
    """``lot.unpark_all`` for a policy's ``wake``, called per delivery and
    per answer: a no-op while nobody is parked (the common case)."""

    def wake() -> None:
        if lot:
            lot.unpark_all()

    return wake
