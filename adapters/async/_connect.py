"""``open_connection``: an async connection for a URL, in the protocol it
names, on a runtime (:func:`opener` makes each adapter's).

Only the named protocol's client (the adapter's ``client_0_10``,
``client_0_9_1`` -- 0-9 too -- or ``client_1_0``) and its core are imported,
when it is first opened: a program loads the protocol it speaks, not all of
them.
"""

from __future__ import annotations

__all__ = ["OpenConnection", "opener"]

import contextlib
import functools
import ssl
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

import attrs

from amqp_sansio.client import parse, redirect_targets
from amqp_sansio.exceptions import ConnectError, InvalidURLError, RedirectedError
from amqp_sansio.url import ConnectionParams

from ._common import named
from ._pump import CLOSE_TIMEOUT, connection_context
from .runtime import Runtime

if TYPE_CHECKING:
    from amqp_sansio.v0_10.session import SessionStore

    from .client_0_9_1 import Connection as Connection091
    from .client_0_10 import Connection as Connection010
    from .client_1_0 import Connection as Connection10


class OpenConnection(Protocol):
    """An adapter's ``open_connection`` (made by :func:`opener`)."""

    @overload
    def __call__(self, url: str, *, ssl_context: ssl.SSLContext | None = ...,
                 session_store: SessionStore | None = ...,
                 client_properties: dict[str, Any] | None = ...,
                 close_timeout: float = ..., protocol: Literal["0-9-1"],
                 connect_timeout: float | None = ..., heartbeat: int | None = ...,
                 mechanisms: Iterable[str] | None = ...,
                 ) -> AbstractAsyncContextManager[Connection091]: ...

    @overload
    def __call__(self, url: str, *, ssl_context: ssl.SSLContext | None = ...,
                 session_store: SessionStore | None = ...,
                 client_properties: dict[str, Any] | None = ...,
                 close_timeout: float = ..., protocol: Literal["1.0"],
                 connect_timeout: float | None = ..., heartbeat: int | None = ...,
                 mechanisms: Iterable[str] | None = ...,
                 ) -> AbstractAsyncContextManager[Connection10]: ...

    @overload
    def __call__(self, url: str, *, ssl_context: ssl.SSLContext | None = ...,
                 session_store: SessionStore | None = ...,
                 client_properties: dict[str, Any] | None = ...,
                 close_timeout: float = ..., protocol: Literal["0-10"] | None = ...,
                 connect_timeout: float | None = ..., heartbeat: int | None = ...,
                 mechanisms: Iterable[str] | None = ...,
                 ) -> AbstractAsyncContextManager[Connection010]: ...

    @overload
    def __call__(self, url: str, *, ssl_context: ssl.SSLContext | None = ...,
                 session_store: SessionStore | None = ...,
                 client_properties: dict[str, Any] | None = ...,
                 close_timeout: float = ..., protocol: str | None = ...,
                 connect_timeout: float | None = ..., heartbeat: int | None = ...,
                 mechanisms: Iterable[str] | None = ...,
                 ) -> AbstractAsyncContextManager[
                     Connection010 | Connection091 | Connection10]: ...


#: an adapter's ``client_0_10``/``client_0_9_1``/``client_1_0`` modules, each
#: imported when first opened (:func:`amqp_sansio_common.submodules.clients`)
Loaders = Mapping[str, Callable[[], Any]]


def opener(rt: Runtime, loaders: Loaders) -> OpenConnection:
    """``open_connection`` on the runtime ``rt``, opening the adapter's
    client modules (``loaders``)."""
    opened = functools.partial(open_connection, rt, loaders)
    named(opened, rt.package)
    return opened



@asynccontextmanager
async def open_connection(rt: Runtime, loaders: Loaders, url: str, *, ssl_context: ssl.SSLContext | None = None,
                          session_store: SessionStore | None = None,
                          client_properties: dict[str, Any] | None = None,
                          close_timeout: float = CLOSE_TIMEOUT,
                          protocol: str | None = None,
                          connect_timeout: float | None = None,
                          heartbeat: int | None = None,
                          mechanisms: Iterable[str] | None = None,
                          ) -> AsyncGenerator[Any, None]:
    """Connect, run the handshake and yield an open :class:`Connection`.

    ``url`` is an AMQP URL (``amqp[s]://user:pass@host:port/vhost?opts``; see
    :mod:`amqp_sansio.url`).  ``connect_timeout`` (default: the URL's
    ``connect_timeout``, 10 s) bounds TCP, TLS and the AMQP handshake
    together.  ``heartbeat`` (default: the URL's, else 60 s within the
    broker's range -- 0-9-1: the broker's proposal) and ``mechanisms``
    (SASL names, default: the URL's) override the URL.  ``session_store``
    keeps detached sessions (those attached with a ``timeout``) so that a
    later connection given the same store resumes them.  On exit the
    connection is closed (200) and its tasks stop; ``close_timeout`` bounds
    each close handshake (connection, and sessions and subscriptions).

    The protocol is ``protocol`` if given, else the URL's ``?protocol=``
    option, else 0-10.  For ``0-9-1`` (RabbitMQ) this yields a
    :class:`amqp_sansio_async.client_0_9_1.Connection` with the same API
    (``session_store`` is 0-10 only).  Static typing: without a literal
    ``protocol="0-9-1"`` the connection is declared as the 0-10
    :class:`~amqp_sansio_async.client_0_10.Connection`; pass the literal to have the checker know.

    Raises :class:`InvalidURLError` (a bad URL or option),
    :class:`ConnectError` / :class:`ConnectTimeout`,
    :class:`AuthenticationError`, :class:`VirtualHostError` and the other
    :mod:`amqp_sansio.exceptions` -- the same as the blocking client.
    """
    params = parse(url)
    proto = params.protocol if protocol is None else protocol
    if proto != params.protocol:
        params = attrs.evolve(params, protocol=proto)
    hb = params.heartbeat if heartbeat is None else heartbeat
    once = functools.partial(_open_once, rt, loaders, ssl_context=ssl_context, session_store=session_store,
                             client_properties=client_properties, close_timeout=close_timeout,
                             connect_timeout=connect_timeout, heartbeat=hb,
                             mechanisms=mechanisms)
    async with contextlib.AsyncExitStack() as stack:
        # connection.redirect (0-10, 0-9): the broker serves us elsewhere -- a few hops at most
        hops = 0
        targets = [params]
        conn: Any = None
        while conn is None:
            err: RedirectedError | None = None
            for i, target in enumerate(targets):
                try:
                    conn = await _attempts(rt, stack, once, target)
                    break
                except RedirectedError as r:
                    err, params = r, target
                    break
                except ConnectError:
                    if i == len(targets) - 1:
                        raise  # the redirect's host and every known host unreachable
            if conn is None:
                assert err is not None
                targets = redirect_targets(params, err, hops)
                hops += 1
        yield conn


async def _attempts(rt: Runtime, stack: contextlib.AsyncExitStack, once: Any,
                    params: ConnectionParams) -> Any:
    """The connection ``once(params)`` opens, tried the URL's
    ``connection_attempts`` times, ``retry_delay`` apart, while the broker
    cannot be reached (pika's)."""
    for attempt in range(1, params.connection_attempts + 1):
        try:
            return await stack.enter_async_context(once(params))
        except ConnectError as e:
            if isinstance(e, RedirectedError) or attempt == params.connection_attempts:
                raise
        await rt.sleep(params.retry_delay)
    raise AssertionError("unreachable")


@asynccontextmanager
async def _open_once(rt: Runtime, loaders: Loaders, params: ConnectionParams, *, ssl_context: ssl.SSLContext | None,
                     session_store: SessionStore | None,
                     client_properties: dict[str, Any] | None, close_timeout: float,
                     connect_timeout: float | None, heartbeat: int | None,
                     mechanisms: Iterable[str] | None) -> AsyncGenerator[Any, None]:
    proto = params.protocol
    timeout = params.connect_timeout if connect_timeout is None else connect_timeout
    if session_store is not None and proto != "0-10":
        raise InvalidURLError("session_store is AMQP 0-10 only" + (
            f" ({proto} has no session resume)" if proto in ("0-9-1", "0-9") else ""))
    # (each protocol's client imported now: a program loads the one it speaks)
    extra: dict[str, Any] = {}
    if proto in ("0-9-1", "0-9"):
        client = loaders["client_0_9_1"]()
    elif proto == "1.0":
        client = loaders["client_1_0"]()
    elif proto == "0-10":
        client = loaders["client_0_10"]()
        extra["session_store"] = session_store
    else:
        raise InvalidURLError(f"protocol {proto} is not supported by this client")
    make, new = client.Connection, client.connection_policy
    p = new(params, heartbeat=heartbeat, mechanisms=mechanisms,
            client_properties=client_properties, **extra)
    async with connection_context(rt, p, ssl_context, timeout, close_timeout,
                                  functools.partial(make, p)) as conn:
        yield conn
