"""asyncio as the async client's runtime (:class:`amqp_sansio_async.runtime.Runtime`).

Where asyncio has no word for what Trio says, the nearest:

* a cancel point that runs nothing else (Trio's ``checkpoint_if_cancelled``)
  yields only when a cancellation is pending;
* a shielded block is a task of its own that the caller, if cancelled, waits
  for (bounded) before its cancellation goes on;
* a checkpoint that must not raise takes a cancellation and requests it
  again, so that it lands at the caller's next await.
"""

from __future__ import annotations

__all__ = ["ASYNCIO", "AsyncioRuntime"]

import asyncio
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import cast

from amqp_sansio_async.runtime import Event, Lot, Nursery, Stream


class _Lot:
    """Tasks parked until ``unpark_all``."""

    __slots__ = ("_parked",)

    def __init__(self) -> None:
        self._parked: list[asyncio.Future[None]] = []

    def __len__(self) -> int:
        return len(self._parked)

    async def park(self) -> None:
        f = asyncio.get_running_loop().create_future()
        self._parked.append(f)
        try:
            await f
        finally:
            if not f.done() or f.cancelled():
                # (cancelled while parked: not woken, so still listed)
                with suppress(ValueError):
                    self._parked.remove(f)

    def unpark_all(self) -> None:
        parked, self._parked = self._parked, []
        for f in parked:
            if not f.done():
                f.set_result(None)


class _Stream:
    """A StreamReader/StreamWriter pair as a Trio-shaped stream."""

    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def receive_some(self, max_bytes: int) -> bytes:
        return await self.reader.read(max_bytes)

    async def send_all(self, data: bytes) -> None:
        if self.writer.is_closing():
            raise ConnectionResetError("the transport is closed")
        self.writer.write(data)
        await self.writer.drain()


class _Tasks:
    """Background tasks of a block (see :meth:`AsyncioRuntime.open_nursery`)."""

    __slots__ = ("tasks",)

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[object]] = []

    def start_soon(self, fn: Callable[[], Awaitable[object]]) -> None:
        async def run() -> object:
            return await fn()

        self.tasks.append(asyncio.get_running_loop().create_task(run()))

    def cancel(self) -> None:
        for t in self.tasks:
            t.cancel()


async def _checkpoint_if_cancelled() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        await asyncio.sleep(0)


async def _cancel_shielded_checkpoint() -> None:
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
            task.cancel()  # (delivered at the caller's next await)


async def _sleep_until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))


def _now() -> float:
    return asyncio.get_running_loop().time()


class AsyncioRuntime:
    """asyncio's calls in the shape the async client uses."""

    package = "amqp_sansio_asyncio"
    logger = "amqp_sansio.asyncio"
    TooSlow: type[BaseException] = TimeoutError
    stream_errors: tuple[type[BaseException], ...] = (asyncio.IncompleteReadError,)

    current_time = staticmethod(_now)
    checkpoint_if_cancelled = staticmethod(_checkpoint_if_cancelled)
    cancel_shielded_checkpoint = staticmethod(_cancel_shielded_checkpoint)
    sleep_until = staticmethod(_sleep_until)

    @staticmethod
    def lot() -> Lot:
        return _Lot()

    @staticmethod
    def event() -> Event:
        return asyncio.Event()

    @staticmethod
    async def checkpoint() -> None:
        await asyncio.sleep(0)

    @staticmethod
    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds)

    @staticmethod
    @asynccontextmanager
    async def fail_after(seconds: float) -> AsyncGenerator[None, None]:
        async with asyncio.timeout(seconds):
            yield

    @staticmethod
    @asynccontextmanager
    async def move_on_after(seconds: float) -> AsyncGenerator[None, None]:
        cm = asyncio.timeout(seconds)
        try:
            async with cm:
                yield
        except TimeoutError:
            if not cm.expired():
                raise

    @staticmethod
    async def shielded(seconds: float, fn: Callable[[], Awaitable[object]]) -> None:
        async def bounded() -> None:
            cm = asyncio.timeout(seconds)
            try:
                async with cm:
                    await fn()
            except TimeoutError:
                if not cm.expired():
                    raise

        task = asyncio.get_running_loop().create_task(bounded())
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                # the caller was cancelled: the block still runs to its end
                # (it is bounded), then the cancellation goes on
                await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                task.exception()  # (retrieved: the cancellation is what goes on)
            raise

    @staticmethod
    @asynccontextmanager
    async def open_nursery() -> AsyncGenerator[Nursery, None]:
        tasks = _Tasks()
        try:
            yield tasks
        except BaseException:
            tasks.cancel()
            raise
        finally:
            if tasks.tasks:
                await asyncio.wait(tasks.tasks)
            failed = [t.exception() for t in tasks.tasks if not t.cancelled()]
        errors = [e for e in failed if e is not None]
        if errors:
            raise errors[0]

    @staticmethod
    async def connect_tcp(host: str, port: int) -> Stream:
        reader, writer = await asyncio.open_connection(host, port)
        return _Stream(reader, writer)

    @staticmethod
    async def start_tls(stream: Stream, context: ssl.SSLContext, server_hostname: str) -> Stream:
        s = cast(_Stream, stream)
        await s.writer.start_tls(context, server_hostname=server_hostname)
        return s

    @staticmethod
    async def aclose(stream: Stream) -> None:
        s = cast(_Stream, stream)
        s.writer.transport.abort()
        await asyncio.sleep(0)  # (the transport's connection_lost runs now)


ASYNCIO = AsyncioRuntime()
