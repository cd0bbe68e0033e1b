"""``connect``: a blocking connection for a URL, in the protocol it names.

Only the named protocol's client (``client_0_10``, ``client_0_9_1`` -- 0-9
too -- or ``client_1_0``) and its core are imported, when ``connect`` is
first called with it: a one-message ``amqp-sansio send`` loads one protocol,
not all of them.
"""

from __future__ import annotations

__all__ = ["connect"]

import functools
import ssl
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import attrs

from amqp_sansio.client import parse, redirect_targets
from amqp_sansio.url import ConnectionParams

from ._common import connected
from ._io import DEFAULT
from .errors import ConnectError, InvalidURLError, RedirectedError

C = TypeVar("C")

if TYPE_CHECKING:
    from amqp_sansio.v0_10.session import SessionStore

    from .client_0_9_1 import Connection as Connection091
    from .client_0_10 import Connection as Connection010
    from .client_1_0 import Connection as Connection10


@overload
def connect(url: str = ..., *, ssl_context: ssl.SSLContext | None = ...,
            timeout: float | None = ..., read_timeout: float | None = ...,
            session_store: SessionStore | None = ..., heartbeat: int | None = ...,
            mechanisms: Iterable[str] | None = ...,
            client_properties: dict[str, Any] | None = ...,
            protocol: Literal["0-9-1"], connect_timeout: float | None = ...,
            ) -> Connection091: ...


@overload
def connect(url: str = ..., *, ssl_context: ssl.SSLContext | None = ...,
            timeout: float | None = ..., read_timeout: float | None = ...,
            session_store: SessionStore | None = ..., heartbeat: int | None = ...,
            mechanisms: Iterable[str] | None = ...,
            client_properties: dict[str, Any] | None = ...,
            protocol: Literal["1.0"], connect_timeout: float | None = ...,
            ) -> Connection10: ...


@overload
def connect(url: str = ..., *, ssl_context: ssl.SSLContext | None = ...,
            timeout: float | None = ..., read_timeout: float | None = ...,
            session_store: SessionStore | None = ..., heartbeat: int | None = ...,
            mechanisms: Iterable[str] | None = ...,
            client_properties: dict[str, Any] | None = ...,
            protocol: Literal["0-10"] | None = ..., connect_timeout: float | None = ...,
            ) -> Connection010: ...


@overload
def connect(url: str = ..., *, ssl_context: ssl.SSLContext | None = ...,
            timeout: float | None = ..., read_timeout: float | None = ...,
            session_store: SessionStore | None = ..., heartbeat: int | None = ...,
            mechanisms: Iterable[str] | None = ...,
            client_properties: dict[str, Any] | None = ...,
            protocol: str | None = ..., connect_timeout: float | None = ...,
            ) -> Connection010 | Connection091 | Connection10: ...


def connect(url: str = "amqp://localhost", *, ssl_context: ssl.SSLContext | None = None,
            timeout: float | None = None, read_timeout: float | None = DEFAULT,
            session_store: SessionStore | None = None, heartbeat: int | None = DEFAULT,
            mechanisms: Iterable[str] | None = None,
            client_properties: dict[str, Any] | None = None,
            protocol: str | None = None,
            connect_timeout: float | None = None,
            ) -> Connection010 | Connection091 | Connection10:
    """Open an AMQP connection and return it once ``connection.open-ok`` arrived.

    The protocol is ``protocol`` if given, else the URL's ``?protocol=``
    option, else 0-10.  For ``0-9-1`` (RabbitMQ) this returns a
    :class:`amqp_sansio_socket.client_0_9_1.Connection` with the same API
    (for ``1.0``: :class:`amqp_sansio_socket.client_1_0.Connection`)
    (``session_store`` is 0-10 only).  Static typing: without a literal
    ``protocol="0-9-1"`` the result is declared as the 0-10
    :class:`~amqp_sansio_socket.client_0_10.Connection`; pass the literal to have the checker know.

    ``url`` is ``amqp[s]://user:pass@host:port/vhost?heartbeat=10&...`` (see
    :mod:`amqp_sansio.url`; no path, a bare ``/`` and ``/%2F`` all mean
    vhost ``/``).  ``connect_timeout`` (or ``timeout``, its older name)
    bounds TCP connect + TLS + the AMQP handshake (default: the URL's
    ``connect_timeout``, 10 s).  ``read_timeout`` is the default for every
    blocking call afterwards (default: the URL's ``read_timeout``; ``None``
    waits forever).  ``heartbeat`` (default: the URL's, else 60 s within
    the broker's range -- 0-9-1: the broker's proposal) and ``mechanisms``
    (SASL names, default: the URL's) override the URL.  Pass the same
    ``session_store`` to a later ``connect`` to resume sessions whose
    transport died (see :meth:`Connection.session`).

    Raises :class:`InvalidURLError`, :class:`ConnectError` (refused,
    unreachable, TLS failure, hang-up during the handshake),
    :class:`ConnectTimeout`, :class:`AuthenticationError`,
    :class:`VirtualHostError` or :class:`ConnectionClosedError` -- the same
    as the Trio client.
    """
    params = parse(url)
    proto = params.protocol if protocol is None else protocol
    if proto != params.protocol:
        params = attrs.evolve(params, protocol=proto)
    hb = params.heartbeat if heartbeat is DEFAULT else heartbeat
    budget = connect_timeout if connect_timeout is not None else timeout
    one = functools.partial(_connect_once, ssl_context=ssl_context, read_timeout=read_timeout,
                            session_store=session_store, heartbeat=hb, mechanisms=mechanisms,
                            client_properties=client_properties, budget=budget)
    # connection.redirect (0-10, 0-9): the broker serves us elsewhere -- a few hops at most
    hops = 0
    targets = [params]
    while True:
        err: RedirectedError | None = None
        for i, target in enumerate(targets):
            try:
                return _attempts(one, target)
            except RedirectedError as r:
                err = r
                params = target
                break
            except ConnectError:
                if i == len(targets) - 1:
                    raise  # the redirect's host and every known host unreachable
        assert err is not None
        targets = redirect_targets(params, err, hops)
        hops += 1


def _attempts(one: Callable[[ConnectionParams], C], params: ConnectionParams) -> C:
    """``one(params)``, tried the URL's ``connection_attempts`` times,
    ``retry_delay`` apart, while the broker cannot be reached (pika's)."""
    for attempt in range(1, params.connection_attempts + 1):
        try:
            return one(params)
        except ConnectError as e:
            if isinstance(e, RedirectedError) or attempt == params.connection_attempts:
                raise
        time.sleep(params.retry_delay)
    raise AssertionError("unreachable")


def _connect_once(params: ConnectionParams, *, ssl_context: ssl.SSLContext | None,
                  read_timeout: float | None, session_store: SessionStore | None,
                  heartbeat: int | None, mechanisms: Iterable[str] | None,
                  client_properties: dict[str, Any] | None, budget: float | None,
                  ) -> Connection010 | Connection091 | Connection10:
    proto = params.protocol
    hb = heartbeat
    if proto in ("0-9-1", "0-9"):
        if session_store is not None:
            raise InvalidURLError(f"session_store is AMQP 0-10 only ({proto} has no session "
                                  "resume)")
        from .client_0_9_1 import Connection as Connection091
        from .client_0_9_1 import connection_policy

        p091 = connection_policy(params, heartbeat=hb, mechanisms=mechanisms,
                                 client_properties=client_properties)
        return connected(Connection091, p091, ssl_context, budget, read_timeout)
    if proto == "1.0":
        if session_store is not None:
            raise InvalidURLError("session_store is AMQP 0-10 only")
        from .client_1_0 import Connection as Connection10
        from .client_1_0 import connection_policy as policy10

        p10 = policy10(params, heartbeat=hb, mechanisms=mechanisms,
                       client_properties=client_properties)
        return connected(Connection10, p10, ssl_context, budget, read_timeout)
    if proto != "0-10":
        raise InvalidURLError(f"protocol {proto} is not supported by this client")
    from .client_0_10 import Connection as Connection010
    from .client_0_10 import connection_policy as policy010

    p = policy010(params, heartbeat=hb, mechanisms=mechanisms, session_store=session_store,
                  client_properties=client_properties)
    return connected(Connection010, p, ssl_context, budget, read_timeout)
