"""Two 0-9-1 cores in memory and the helpers that drive them: configs, a pump
between a client and a server Connection, frame decoding, and a fake
server answering a client's handshake (the connection, codec and
adapter-support tests share them).
"""

from __future__ import annotations

from typing import Any

from amqp_sansio import sasl
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.channel import Channel
from amqp_sansio.v0_9_1.connection import (
    ClientConfig,
    Connection,
    Role,
    ServerConfig,
)
from amqp_sansio.v0_9_1.framing import (
    PROTOCOL_HEADER,
    Decoder,
    encode_method,
)

GUEST = sasl.ServerAuthenticator.standard(check_password=lambda u, p: (u, p) == ("guest", "pw"))


def server_cfg(**kw: Any) -> ServerConfig:
    kw.setdefault("authenticator", GUEST)
    return ServerConfig(**kw)


def client_cfg(**kw: Any) -> ClientConfig:
    kw.setdefault("username", "guest")
    kw.setdefault("password", "pw")
    return ClientConfig(**kw)


def pump(a: Connection, b: Connection, now: float | None = None
         ) -> tuple[list[ev.Event], list[ev.Event]]:
    """Move bytes both ways until both are quiet; events of a and of b."""
    ea: list[ev.Event] = []
    eb: list[ev.Event] = []
    for _ in range(50):
        da, db = a.data_to_send(), b.data_to_send()
        if not da and not db:
            break
        if da and not b.closed:
            eb += b.receive_data(da, now)
        if db and not a.closed:
            ea += a.receive_data(db, now)
    return ea, eb


def pair(ckw: dict[str, Any] | None = None, skw: dict[str, Any] | None = None,
         now: float | None = None) -> tuple[Connection, Connection]:
    cli = Connection(Role.CLIENT, client_cfg(**(ckw or {})))
    srv = Connection(Role.SERVER, server_cfg(**(skw or {})))
    ec, es = pump(cli, srv, now)
    assert any(isinstance(e, ev.ConnectionOpened) for e in ec), ec
    assert any(isinstance(e, ev.ConnectionOpened) for e in es), es
    return cli, srv


def open_pair(**kw: Any) -> tuple[Connection, Connection, Channel, Channel]:
    cli, srv = pair(**kw)
    ch = cli.open_channel()
    ec, es = pump(cli, srv)
    assert ev.ChannelOpened(ch.id) in ec and ev.ChannelOpened(ch.id) in es
    return cli, srv, ch, srv.channel(ch.id)


def frames_of(data: bytes) -> list[Any]:
    """Decode what a core wrote (after its protocol header, if any)."""
    if data.startswith(b"AMQP"):
        data = data[8:]
    return list(Decoder(1 << 20).feed(data))


def methods_of(data: bytes) -> list[Any]:
    return [getattr(i, "method", i) for i in frames_of(data)]


class FakeServer:
    """Raw server side: feed the client canned frames."""

    def __init__(self, cli: Connection) -> None:
        self.cli = cli
        assert cli.data_to_send() == PROTOCOL_HEADER  # checklist 1

    def send(self, *frames: bytes) -> list[ev.Event]:
        return self.cli.receive_data(b"".join(frames))

    def start(self, mechanisms: bytes = b"PLAIN AMQPLAIN", **props: Any) -> list[Any]:
        self.send(encode_method(0, spec.ConnectionStart(
            version_major=0, version_minor=9, mechanisms=mechanisms, locales=b"en_US",
            server_properties={"capabilities": {"basic.nack": True}, **props})))
        return methods_of(self.cli.data_to_send())

    def tune(self, cm: int = 2047, fm: int = 131072, hb: int = 60) -> list[Any]:
        self.send(encode_method(0, spec.ConnectionTune(channel_max=cm, frame_max=fm,
                                                       heartbeat=hb)))
        return methods_of(self.cli.data_to_send())

    def open_ok(self) -> list[ev.Event]:
        return self.send(encode_method(0, spec.ConnectionOpenOk()))


def opened_client(**kw: Any) -> tuple[Connection, FakeServer]:
    cli = Connection(Role.CLIENT, client_cfg(**kw))
    fs = FakeServer(cli)
    fs.start()
    fs.tune()
    assert any(isinstance(e, ev.ConnectionOpened) for e in fs.open_ok())
    return cli, fs
