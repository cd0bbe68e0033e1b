"""Trio as the async client's runtime (:class:`amqp_sansio_async.runtime.Runtime`)."""

from __future__ import annotations

__all__ = ["TRIO", "TrioRuntime"]

import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import cast

import trio
from amqp_sansio_async.runtime import Lot, Nursery, Stream
from trio.lowlevel import ParkingLot

from ._util import aclose_quietly, open_service_nursery


class _Nursery:
    __slots__ = ("start_soon", "cancel")

    def __init__(self, nursery: trio.Nursery) -> None:
        self.start_soon = nursery.start_soon
        self.cancel = nursery.cancel_scope.cancel


class TrioRuntime:
    """Trio's own calls, most of them as they are (the per-message ones are
    Trio's functions, not wrappers)."""

    package = "amqp_sansio_trio"
    logger = "amqp_sansio.trio"
    TooSlow: type[BaseException] = trio.TooSlowError
    stream_errors: tuple[type[BaseException], ...] = (trio.BrokenResourceError,
                                                      trio.ClosedResourceError)

    current_time = staticmethod(trio.current_time)
    event = staticmethod(trio.Event)
    checkpoint = staticmethod(trio.lowlevel.checkpoint)
    checkpoint_if_cancelled = staticmethod(trio.lowlevel.checkpoint_if_cancelled)
    cancel_shielded_checkpoint = staticmethod(trio.lowlevel.cancel_shielded_checkpoint)
    sleep = staticmethod(trio.sleep)
    sleep_until = staticmethod(trio.sleep_until)

    @staticmethod
    def lot() -> Lot:
        return ParkingLot()

    @staticmethod
    @asynccontextmanager
    async def fail_after(seconds: float) -> AsyncGenerator[None, None]:
        with trio.fail_after(seconds):
            yield

    @staticmethod
    @asynccontextmanager
    async def move_on_after(seconds: float) -> AsyncGenerator[None, None]:
        with trio.move_on_after(seconds):
            yield

    @staticmethod
    async def shielded(seconds: float, fn: Callable[[], Awaitable[object]]) -> None:
        with trio.move_on_after(seconds) as cs:
            cs.shield = True
            await fn()

    @staticmethod
    @asynccontextmanager
    async def open_nursery() -> AsyncGenerator[Nursery, None]:
        async with open_service_nursery() as nursery:
            yield _Nursery(nursery)

    @staticmethod
    async def connect_tcp(host: str, port: int) -> Stream:
        return await trio.open_tcp_stream(host, port)

    @staticmethod
    async def start_tls(stream: Stream, context: ssl.SSLContext, server_hostname: str) -> Stream:
        tls = trio.SSLStream(cast(trio.abc.Stream, stream), context,
                             server_hostname=server_hostname)
        await tls.do_handshake()
        return tls

    @staticmethod
    async def aclose(stream: Stream) -> None:
        await aclose_quietly(cast(trio.abc.Stream, stream))


TRIO = TrioRuntime()
