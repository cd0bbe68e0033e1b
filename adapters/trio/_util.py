"""Small Trio helpers shared by the runtime, the server and the broker runner."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import trio


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside ``exc`` (itself if it is not a group)."""
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for e in exc.exceptions:
            out.extend(leaves(e))
        return out
    return [exc]


@asynccontextmanager
async def open_service_nursery() -> AsyncGenerator[trio.Nursery, None]:
    """A nursery for background tasks that never raise, around a user body.

    Trio wraps whatever the body raises in an ``ExceptionGroup``; here a group
    holding a single non-cancellation error is unwrapped again, so callers
    can write ``except AuthenticationError`` around ``async with``.
    """
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        found = leaves(group)
        real = [e for e in found if not isinstance(e, trio.Cancelled)]
        if len(real) == 1:
            raise real[0] from None
        raise


async def aclose_quietly(stream: trio.abc.AsyncResource) -> None:
    """Close a stream without waiting on the peer (TLS close_notify etc.)."""
    await trio.aclose_forcefully(stream)


__all__ = ["open_service_nursery", "aclose_quietly", "leaves"]

