"""The file and stream classes, client role: the policy, without I/O.

A session's :class:`Content` (``ClientSession.content``) sends what a
client of these classes sends and reads what the broker answers:

* **publishing a file** is staging it -- ``file.open`` (the broker's
  ``open-ok`` says how much of that identifier it holds already, from an
  earlier attempt its user made), ``file.stage`` of the rest, then
  ``file.publish`` by identifier.  A file upload cut by a lost connection is
  published again from where the broker's copy stops;
* **publishing to a stream** is one ``stream.publish`` with its content;
* **consuming** (``file.consume`` / ``stream.consume``): the broker's
  ``file.open`` is answered ``open-ok`` 0 (this client keeps no part of a
  file it did not get whole: the XML lets a recipient discard partial
  content), its ``file.stage`` is the content of the oldest open, and its
  ``file.deliver`` makes a :class:`ContentDelivery`; a ``stream.deliver``
  is one as it comes.  Deliveries wait per consumer tag until taken; a
  stream delivery is completed when it is taken -- so the broker's
  stream prefetch counts the ones the application has not had yet;
* ``qos-ok``, ``consume-ok`` and ``open-ok`` answer what was asked, in
  order; ``file.return`` / ``stream.return`` are kept in :attr:`returned`.
"""

from __future__ import annotations

__all__ = ["Content", "ContentDelivery", "Returned"]

import collections
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs

from ..client import Pending
from ..errors import LocalProtocolError
from . import spec

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._specbase import Command, Struct
    from .session import CommandReceived
    from .session import Session as CoreSession

T = TypeVar("T")


class ClientSession(Protocol):
    """What content needs of its client session (``client.ClientSession``;
    named here, not imported: the client imports this module)."""

    core: CoreSession

    def track(self, p: Pending[T]) -> Pending[T]: ...

    def send(self, command: Command, *, sync: bool = False, headers: Iterable[Struct] = (),
             body: bytes | None = None) -> int: ...

    def execute(self, command: Command, *, headers: Iterable[Struct] = (),
                body: bytes | None = None) -> Pending[Any]: ...

#: Deliveries one consumer tag keeps waiting before the rest are refused
#: (file: rejected with requeue; stream: dropped, as the class allows).
MAX_WAITING = 10_000


@attrs.frozen
class ContentDelivery:
    """A file or stream message delivered to a consumer (``kind``
    ``"file"`` or ``"stream"``); ``properties`` as the broker sent them
    (``FileProperties`` / ``StreamProperties``)."""

    kind: str
    consumer_tag: str
    delivery_tag: int
    body: bytes
    properties: Any
    exchange: str | None = None
    routing_key: str | None = None  # (file)
    queue: str | None = None  # (stream)
    redelivered: bool = False
    identifier: str | None = None  # (file: its staging identifier)


@attrs.frozen
class Returned:
    """Content the broker returned (``file.return`` / ``stream.return``)."""

    kind: str
    code: int
    text: str | None
    exchange: str | None
    routing_key: str | None
    body: bytes
    properties: Any


_REPLIES = {"file.qos": "file.qos-ok", "file.consume": "file.consume-ok",
            "file.open": "file.open-ok", "stream.qos": "stream.qos-ok",
            "stream.consume": "stream.consume-ok"}


class Content:
    """One session's file and stream classes (see the module docstring)."""

    def __init__(self, session: ClientSession, wake: Callable[[], None]) -> None:
        self.session = session
        self._wake = wake
        self._replies: dict[str, collections.deque[Pending[Any]]] = {}
        self._opening: collections.deque[tuple[str, int]] = collections.deque()
        self._staged: dict[str, tuple[Any, bytes]] = {}
        self.waiting: dict[str, collections.deque[tuple[ContentDelivery, int | None]]] = {}
        self.returned: list[Returned] = []
        self._owed_open_oks = 0  # the broker's file.open not yet answered

    # -- asking --------------------------------------------------------------------
    def _ask(self, cmd: Any) -> Pending[Any]:
        p: Pending[Any] = self.session.track(Pending())
        self.session.send(cmd)
        self._replies.setdefault(_REPLIES[cmd.NAME], collections.deque()).append(p)
        return p

    def qos(self, kind: str, prefetch_count: int = 0, prefetch_size: int = 0,
            consume_rate: int = 0, global_: bool = False) -> Pending[Any]:
        if kind == "stream":
            return self._ask(spec.StreamQos(prefetch_size=prefetch_size,
                                            prefetch_count=prefetch_count,
                                            consume_rate=consume_rate, global_=global_))
        return self._ask(spec.FileQos(prefetch_size=prefetch_size, prefetch_count=prefetch_count,
                                      global_=global_))

    def consume(self, kind: str, queue: str, consumer_tag: str, *, no_ack: bool = False,
                exclusive: bool = False) -> Pending[Any]:
        """``file.consume`` / ``stream.consume``; answered with consume-ok."""
        if not consumer_tag:
            raise LocalProtocolError("a consumer tag is required (the XML: not empty)")
        self.waiting.setdefault(consumer_tag, collections.deque())
        if kind == "stream":
            return self._ask(spec.StreamConsume(queue=queue, consumer_tag=consumer_tag,
                                                exclusive=exclusive))
        return self._ask(spec.FileConsume(queue=queue, consumer_tag=consumer_tag, no_ack=no_ack,
                                          exclusive=exclusive))

    def cancel(self, kind: str, consumer_tag: str) -> Pending[Any]:
        cls = spec.StreamCancel if kind == "stream" else spec.FileCancel
        return self.session.execute(cls(consumer_tag=consumer_tag))

    def open_file(self, identifier: str, size: int) -> Pending[Any]:
        """``file.open``: answered with the broker's open-ok (``staged_size``:
        what it holds of ``identifier`` already)."""
        return self._ask(spec.FileOpen(identifier=identifier, content_size=size))

    def stage_and_publish(self, identifier: str, body: bytes, offset: int, properties: Any, *,
                          exchange: str = "", routing_key: str = "", mandatory: bool = False,
                          immediate: bool = False) -> Pending[Any]:
        """``file.stage`` of ``body`` from ``offset`` (the open-ok's
        staged-size), then ``file.publish``; answered once the broker
        completed the publish."""
        if not 0 <= offset <= len(body):
            raise LocalProtocolError(f"the broker holds {offset} octets of {identifier!r}, a "
                                     f"file of {len(body)}: another file under that identifier")
        self.session.send(spec.FileStage(), headers=(properties,), body=body[offset:])
        return self.session.execute(spec.FilePublish(
            exchange=exchange, routing_key=routing_key, mandatory=mandatory,
            immediate=immediate, identifier=identifier))

    def publish_stream(self, body: bytes, properties: Any, *, exchange: str = "",
                       routing_key: str = "", mandatory: bool = False,
                       immediate: bool = False) -> Pending[Any]:
        return self.session.execute(spec.StreamPublish(
            exchange=exchange, routing_key=routing_key, mandatory=mandatory,
            immediate=immediate), headers=(properties,), body=body)

    # -- taking deliveries ---------------------------------------------------------------
    def take(self, consumer_tag: str) -> ContentDelivery | None:
        """The oldest delivery waiting for ``consumer_tag`` (None: none); a
        stream delivery is completed now (the broker's prefetch moves on)."""
        q = self.waiting.get(consumer_tag)
        if not q:
            return None
        d, cid = q.popleft()
        if cid is not None:
            self.session.core.complete(cid)
        return d

    def ack(self, d: ContentDelivery, multiple: bool = False) -> None:
        if d.kind != "file":
            raise LocalProtocolError("stream deliveries are not acknowledged")
        self.session.send(spec.FileAck(delivery_tag=d.delivery_tag, multiple=multiple))

    def reject(self, d: ContentDelivery, requeue: bool = False) -> None:
        if d.kind != "file":
            raise LocalProtocolError("stream deliveries are not rejected")
        self.session.send(spec.FileReject(delivery_tag=d.delivery_tag, requeue=requeue))

    # -- the broker's commands ------------------------------------------------------------
    def on_command(self, e: CommandReceived) -> None:
        cmd: Any = e.command
        name = cmd.NAME
        core = self.session.core
        complete = True
        waiters = self._replies.get(name)
        if waiters:
            waiters.popleft().resolve(cmd)
        elif name == "file.open":
            self._opening.append((cmd.identifier or "", int(cmd.content_size or 0)))
            # nothing of it is kept from before: all of it, please
            self._owed_open_oks += 1
            self.room()
        elif name == "file.stage" and self._opening:
            ident, _ = self._opening.popleft()
            props = next((h for h in e.headers if isinstance(h, spec.FileProperties)), None)
            self._staged[ident] = (props, e.body or b"")
        elif name == "file.deliver":
            props, body = self._staged.pop(cmd.identifier or "", (None, b""))
            self._arrived(ContentDelivery(
                "file", cmd.consumer_tag or "", int(cmd.delivery_tag or 0), body, props,
                exchange=cmd.exchange, routing_key=cmd.routing_key,
                redelivered=bool(cmd.redelivered), identifier=cmd.identifier), None)
        elif name == "stream.deliver":
            sp = next((h for h in e.headers if isinstance(h, spec.StreamProperties)), None)
            complete = not self._arrived(ContentDelivery(
                "stream", cmd.consumer_tag or "", int(cmd.delivery_tag or 0), e.body or b"",
                sp, exchange=cmd.exchange, queue=cmd.queue), e.command_id)
        elif name in ("file.return", "stream.return"):
            self.returned.append(Returned(name.partition(".")[0], int(cmd.reply_code or 0),
                                          cmd.reply_text, cmd.exchange, cmd.routing_key,
                                          e.body or b"", next(iter(e.headers), None)))
        if complete:
            core.complete(e.command_id)
        self._wake()

    def room(self) -> None:
        """Send the open-oks owed (the broker's file.open waits for them)
        as far as the replay window has room; the rest when the broker
        completes what we sent."""
        core = self.session.core
        while self._owed_open_oks and core.outstanding < core.replay_window:
            self.session.send(spec.FileOpenOk(staged_size=0))
            self._owed_open_oks -= 1

    def _arrived(self, d: ContentDelivery, cid: int | None) -> bool:
        """Keep ``d`` for its consumer; True if kept (its completion waits)."""
        q = self.waiting.setdefault(d.consumer_tag, collections.deque())
        if len(q) >= MAX_WAITING:
            if d.kind == "file":
                # (no room to say so: it stays the session's until the session ends)
                with contextlib.suppress(LocalProtocolError):
                    self.session.send(spec.FileReject(delivery_tag=d.delivery_tag,
                                                      requeue=True))
            return False
        q.append((d, cid))
        return True
