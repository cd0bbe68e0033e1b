"""AMQP URLs: ``amqp[s]://user:pass@host:port/vhost?option=value&...``.

User, password and vhost are percent-decoded; ``%2F`` encodes a ``/``
inside the vhost.  The vhost follows the Python clients (pika, aio-pika/yarl)
rather than the letter of RabbitMQ's URI spec: ``amqp://host``,
``amqp://host/`` and ``amqp://host/%2F`` all mean the default virtual host
``/`` -- an empty vhost is never valid on RabbitMQ, and a trailing slash
should not change which broker namespace you reach.  ``amqp://host/prod``
is vhost ``prod``.  Default ports: 5672 (amqp), 5671 (amqps).

Options (query string), all optional:

==========================  ==================================================
heartbeat                   seconds wanted (0 = none)
channel_max                 highest channel count wanted
frame_max                   largest frame wanted (alias ``max_frame_size``)
connect_timeout             seconds for TCP (+TLS) connect (alias
                            ``socket_timeout``, pika's)
connection_attempts         tries to connect before giving up (default 1;
                            pika's)
retry_delay                 seconds between those tries (default 2; pika's)
blocked_connection_timeout  seconds a connection the broker blocked (0-9-1
                            ``connection.blocked``) may stay so before the
                            client gives it up (default: no limit; pika's)
read_timeout                seconds a blocking read waits for a reply
mechanism                   SASL mechanism(s) to try, comma-separated, in
                            order
protocol                    ``0-10`` (default), ``0-9-1``, ``0-9`` or ``1.0``
cafile, certfile, keyfile   TLS files (amqps)
verify                      ``true``/``false``: verify the server certificate
                            (amqps)
server_name                 TLS server name (defaults to host)
strict                      ``true``/``false``: act on the rules real peers
                            break that the core tolerates by default (the
                            config's ``strict``; docs/architecture.md lists
                            them per protocol)
==========================  ==================================================

Unknown options are an error (a typo should not pass silently).  The
password never appears in ``repr``.
"""

from __future__ import annotations

__all__ = ["ConnectionParams", "parse_url"]

from urllib.parse import parse_qsl, quote, unquote, urlsplit

import attrs

from . import registry
from .errors import LocalProtocolError

_FLOAT = {"connect_timeout", "read_timeout", "blocked_connection_timeout"}
_FLOAT0 = {"retry_delay"}  # (may be 0)
_INT = {"heartbeat", "channel_max", "frame_max"}
_INT1 = {"connection_attempts"}  # (at least 1)
_STR = {"mechanism", "protocol", "cafile", "certfile", "keyfile", "server_name"}
_BOOL = {"verify", "strict"}
_ALIASES = {"max_frame_size": "frame_max", "mechanisms": "mechanism",
            "socket_timeout": "connect_timeout"}


@attrs.frozen(kw_only=True)
class ConnectionParams:
    scheme: str = "amqp"
    host: str = "localhost"
    port: int = 5672
    username: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    virtual_host: str = "/"
    heartbeat: int | None = None
    channel_max: int | None = None
    frame_max: int | None = None
    connect_timeout: float = 10.0
    connection_attempts: int = 1
    retry_delay: float = 2.0
    blocked_connection_timeout: float | None = None
    read_timeout: float | None = None
    mechanisms: tuple[str, ...] = ()
    protocol: str = registry.DEFAULT
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    verify: bool = True
    server_name: str | None = None
    strict: bool = False

    @property
    def tls(self) -> bool:
        return self.scheme == "amqps"

    def redacted(self) -> str:
        """The URL without its password (for logs)."""
        user = f"{quote(self.username, safe='')}:***@" if self.username is not None else ""
        return f"{self.scheme}://{user}{self.host}:{self.port}/{quote(self.virtual_host, safe='')}"


def parse_url(url: str) -> ConnectionParams:
    """Parse an AMQP URL; raise LocalProtocolError saying what is wrong."""
    if not isinstance(url, str) or not url:
        raise LocalProtocolError("an AMQP URL is required")
    try:
        parts = urlsplit(url)
        port_raw = parts.port
    except ValueError as e:
        raise LocalProtocolError(f"bad AMQP URL {_safe(url)!r}: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("amqp", "amqps"):
        raise LocalProtocolError(f"bad AMQP URL {_safe(url)!r}: scheme must be amqp or amqps")
    if parts.fragment:
        raise LocalProtocolError(f"bad AMQP URL {_safe(url)!r}: fragments are not allowed")
    host = parts.hostname or "localhost"
    port = port_raw if port_raw is not None else (5671 if scheme == "amqps" else 5672)
    if not 0 < port < 65536:
        raise LocalProtocolError(f"bad AMQP URL {_safe(url)!r}: port {port} out of range")
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    raw = parts.path[1:]  # the path is "" or starts with "/"
    if "/" in raw:
        raise LocalProtocolError(
            f"bad AMQP URL {_safe(url)!r}: a '/' in the vhost must be written %2F")
    vhost = unquote(raw) or "/"  # no path, or a bare "/": the default vhost
    kw: dict[str, object] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        key = _ALIASES.get(key, key)
        if key not in _INT | _INT1 | _FLOAT | _FLOAT0 | _BOOL | _STR:
            raise LocalProtocolError(f"bad AMQP URL {_safe(url)!r}: unknown option {key!r}")
        try:
            if key in _INT | _INT1:
                n = int(value)
                if n < (1 if key in _INT1 else 0):
                    raise ValueError("must be at least 1" if key in _INT1 else "negative")
                kw[key] = n
            elif key in _FLOAT | _FLOAT0:
                f = float(value)
                if not (f >= 0 if key in _FLOAT0 else f > 0) or f != f or f == float("inf"):
                    raise ValueError("must be a positive number of seconds")
                kw[key] = f
            elif key in _BOOL:
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError("expected true or false")
                kw[key] = value.lower() in ("true", "1", "yes")
            else:
                kw[key] = value
        except ValueError as e:
            raise LocalProtocolError(
                f"bad AMQP URL {_safe(url)!r}: option {key}={value!r}: {e}") from None
    mech = kw.pop("mechanism", None)
    if mech is not None:
        kw["mechanisms"] = tuple(m.strip().upper() for m in str(mech).split(",") if m.strip())
    proto = kw.get("protocol", registry.DEFAULT)
    if proto not in registry.PROTOCOLS:
        raise LocalProtocolError(f"bad AMQP URL {_safe(url)!r}: protocol must be one of "
                                 f"{', '.join(registry.names())}")
    return ConnectionParams(scheme=scheme, host=host, port=port, username=username,
                            password=password, virtual_host=vhost, **kw)  # type: ignore[arg-type]


def _safe(url: str) -> str:
    """The URL with any password masked, for error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
            return parts._replace(netloc=netloc).geturl()
    except ValueError:
        return "<unparseable URL>"
    return url
