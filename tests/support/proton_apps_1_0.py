"""python-qpid-proton (its reactor ``Container``) as an AMQP 1.0 client for
the tests and bench: one JSON line on stdout says what happened.

    python proton_apps_1_0.py send    --port P --address A --count N [--size S] [--settled]
    python proton_apps_1_0.py receive --port P --address A --count N [--credit C]
    python proton_apps_1_0.py request --port P --count N   (to a dynamic node and back)

``send`` waits until every message is settled by the peer (unsettled unless
``--settled``) and counts the outcomes.  CPU seconds (user + system) of the
process are reported as ``cpu``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import AtMostOnce, Container, DynamicNodeProperties


def _report(**kw: Any) -> None:
    t = os.times()
    kw["cpu"] = t.user + t.system
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def _url(o: argparse.Namespace) -> str:
    auth = f"{o.username}:{o.password}@" if o.username else ""
    return f"amqp://{auth}{o.host}:{o.port}"


def _body(i: int, size: int) -> bytes:
    return str(i).zfill(10).encode().ljust(size, b"a")


class Send(MessagingHandler):  # type: ignore[misc]
    def __init__(self, o: argparse.Namespace) -> None:
        super().__init__()
        self.o = o
        self.sent = self.accepted = self.rejected = self.released = 0
        self.t0 = 0.0

    def on_start(self, event: Any) -> None:
        opts = [AtMostOnce()] if self.o.settled else None
        self.conn = event.container.connect(_url(self.o), allowed_mechs=self.o.mechs)
        event.container.create_sender(self.conn, self.o.address, options=opts)

    def on_sendable(self, event: Any) -> None:
        if not self.t0:
            self.t0 = time.monotonic()
        while event.sender.credit and self.sent < self.o.count:
            event.sender.send(Message(body=_body(self.sent, self.o.size), id=self.sent))
            self.sent += 1
        if self.o.settled and self.sent >= self.o.count:
            self._done(event)

    def _settled(self, event: Any) -> None:
        if self.accepted + self.rejected + self.released >= self.o.count:
            self._done(event)

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        self._settled(event)

    def on_rejected(self, event: Any) -> None:
        self.rejected += 1
        self._settled(event)

    def on_released(self, event: Any) -> None:
        self.released += 1
        self._settled(event)

    def _done(self, event: Any) -> None:
        _report(sent=self.sent, accepted=self.accepted, rejected=self.rejected,
                released=self.released, seconds=time.monotonic() - self.t0)
        event.connection.close()


class Receive(MessagingHandler):  # type: ignore[misc]
    def __init__(self, o: argparse.Namespace) -> None:
        super().__init__(prefetch=min(o.credit, o.count))
        self.o = o
        self.received = self.octets = 0
        self.t0 = 0.0

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(_url(self.o), allowed_mechs=self.o.mechs)
        event.container.create_receiver(conn, self.o.address)

    def on_message(self, event: Any) -> None:
        if not self.t0:
            self.t0 = time.monotonic()
        body = event.message.body
        self.octets += len(body) if isinstance(body, bytes | str | memoryview) else 0
        self.received += 1
        if self.received >= self.o.count:
            _report(received=self.received, octets=self.octets,
                    seconds=time.monotonic() - self.t0)
            event.connection.close()


class Request(MessagingHandler):  # type: ignore[misc]
    """A dynamic (temporary) node: its generated address, used as a target,
    brings the messages back."""

    def __init__(self, o: argparse.Namespace) -> None:
        super().__init__()
        self.o = o
        self.sent = self.answered = 0
        self.sender: Any = None
        self.to: str | None = None

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(_url(self.o), allowed_mechs=self.o.mechs)
        self.receiver = event.container.create_receiver(
            self.conn, None, dynamic=True,
            options=DynamicNodeProperties({"lifetime-policy": "delete-on-close"}))

    def on_link_opened(self, event: Any) -> None:
        if event.link.name == self.receiver.name and self.sender is None:
            self.to = self.receiver.remote_source.address
            self.sender = event.container.create_sender(self.conn, self.to)

    def on_sendable(self, event: Any) -> None:
        while self.sender.credit and self.sent < self.o.count:
            self.sender.send(Message(reply_to=self.to, body=f"req-{self.sent}"))
            self.sent += 1

    def on_message(self, event: Any) -> None:
        self.answered += 1
        if self.answered >= self.o.count:
            _report(sent=self.sent, answered=self.answered, last=str(event.message.body),
                    reply_to=self.to)
            event.connection.close()

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        _report(error=f"{cond.name}: {cond.description}" if cond else "link error")
        event.connection.close()

    def on_session_error(self, event: Any) -> None:
        cond = event.session.remote_condition
        _report(error=f"{cond.name}: {cond.description}" if cond else "session error")
        event.connection.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["send", "receive", "request"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--address", default="q")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--credit", type=int, default=500)
    p.add_argument("--settled", action="store_true")
    p.add_argument("--username")
    p.add_argument("--password", default="")
    p.add_argument("--mechs", default=None, help="SASL mechanisms, space separated")
    o = p.parse_args(argv)
    handler = {"send": Send, "receive": Receive, "request": Request}[o.mode](o)
    Container(handler).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
