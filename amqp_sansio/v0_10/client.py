"""The AMQP 0-10 client policy, without I/O: what every adapter's client does.

Above the core's connection and sessions (:mod:`.connection`,
:mod:`.session`), a client has decisions to make that the protocol leaves
open; they are made here, once, for the Trio and the blocking-socket
adapters alike (see :mod:`amqp_sansio.client` for the shape):

* **Subscribing** is ``message.subscribe`` + ``message.set-flow-mode`` +
  two ``message.flow`` (``prefetch`` messages, unlimited octets) +
  ``execution.sync``, answered when the broker has completed them all.
* **Settling.**  Accepts are batched per subscription -- one
  ``message.accept`` when the batch (half the prefetch, at most 256) is
  full or the subscription's buffer runs dry -- and an accepted delivery is
  completed as its batch goes out (just before the accept, as qpid does;
  window mode: that re-grants its credit), so that one ``session.completed``
  goes with each accept rather than one with every settling call (each a
  control the broker handles).  Rejected and released deliveries are
  completed at once, accept-mode ``none`` ones when handed out -- and so
  are those of a subscription made with ``complete_on_receipt``, whose
  accepts may then wait as long as the application likes without holding
  the broker's replay window (0-10 keeps completion and acceptance apart;
  window mode then bounds what is buffered, not what is unsettled).  Credit
  mode re-grants credit in the same batches as the accepts.
* **Deliveries nobody asked for** (a subscription already cancelled, or one
  of a transport we lost) are completed and released (``set-redelivered``);
  their destination is cancelled once, so that they do not come back.
* **Publishing.**  ``confirm`` sends the transfer with accept-mode explicit:
  the broker then accepts or rejects it (``rejected``).  A publish that does
  not wait is bounded: by the broker's credit, the replay window and
  :data:`MAX_IN_FLIGHT` octets awaiting completion (the broker is asked
  for its completions when that bound is reached).
* **Resume.**  What a session leaves behind when its transport dies --
  accepts that never went out, deliveries never settled -- travels with the
  core session (its ``context``) to the connection that resumes it, which
  sends the accepts and releases the rest once the broker has said it kept
  the session's state.
"""

from __future__ import annotations

__all__ = ["DEFAULT_HEARTBEAT", "MAX_IN_FLIGHT", "Carry", "connection", "SessionView",
           "SubscriptionView", "ClientConnection", "ClientDelivery", "ClientSession",
           "ClientSubscription", "Transfer"]

import functools
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain, repeat
from typing import Any, NamedTuple, TypeVar

import attrs

from .. import client as base
from .. import sasl
from ..client import INFO, WARNING, AcceptMode, Pending
from ..errors import LocalProtocolError
from ..exceptions import (
    AMQPError,
    ConnectionLostError,
    ExecutionError,
    MessageRejectedError,
    SessionError,
)
from ..message import Message
from ..serial import SequenceSet
from ..url import ConnectionParams
from . import events as ev
from . import spec
from ._specbase import Command, Struct
from .connection import ClientConfig, Role
from .connection import Connection as CoreConnection
from .content import Content
from .messages import X_091, Rejections, TransferBuilder, from_event, transfer_octets
from .session import Session as CoreSession
from .session import SessionState, SessionStore

#: Body octets of published transfers awaiting completion above which a
#: publisher waits (a pipelined publisher's memory bound).
MAX_IN_FLIGHT = 16 << 20
_ID_MASK = 0xFFFFFFFF  # command ids wrap
#: Heartbeat interval asked for when the caller names none, seconds (what
#: RabbitMQ proposes), clamped into the broker's range: a silent broker is
#: detected with default settings.
DEFAULT_HEARTBEAT = 60
_INFINITE = 0xFFFFFFFF
_FLOW_MODES = {"window": spec.FlowMode.WINDOW, "credit": spec.FlowMode.CREDIT}


@attrs.define
class Carry:
    """What a session leaves behind when its transport dies, for the
    connection that resumes it: accepts the application made that never
    went out, and deliveries never settled (to be released)."""

    to_accept: SequenceSet = attrs.field(factory=SequenceSet)
    to_release: SequenceSet = attrs.field(factory=SequenceSet)
    #: those of ``to_accept`` and ``to_release`` completed already
    #: (``complete_on_receipt``); the rest are completed as they go out
    completed: SequenceSet = attrs.field(factory=SequenceSet)


class Transfer(NamedTuple):
    """A publish, built: the command, its headers and body."""

    command: spec.MessageTransfer
    headers: tuple[Struct, ...]
    body: bytes
    confirm: bool
    header_data: bytes | None = None  # the headers' segment, when already encoded

    def octets(self) -> int:
        """What it costs in byte credit (its header segment is encoded for
        that unless it was already: asked only when the broker grants byte
        credit)."""
        if self.header_data is not None:
            return len(self.header_data) + len(self.body)
        return transfer_octets(self.headers, self.body)


# ---------------------------------------------------------------- connecting
def connection(params: ConnectionParams, *, heartbeat: int | None,
               mechanisms: Iterable[str] | None = None,
               session_store: SessionStore | None = None,
               client_properties: dict[str, Any] | None = None) -> ClientConnection:
    """A client connection's policy, with its core, for ``params`` (a URL).

    ``heartbeat``: seconds asked for (None: :data:`DEFAULT_HEARTBEAT`,
    clamped into the broker's range; 0: none).  ``mechanisms``: SASL names
    to offer (None: the URL's, else SCRAM-SHA-256 and PLAIN with a username,
    ANONYMOUS without).  A bad option is :class:`InvalidURLError`."""
    config = base.configured(
        ClientConfig, params, mechanisms=mechanisms, supported=sasl.CLIENT_MECHANISMS,
        frame_max="max_frame_size", client_properties=client_properties,
        heartbeat=DEFAULT_HEARTBEAT if heartbeat is None else heartbeat,
        session_store=session_store, transfer_runs=True)
    return ClientConnection(CoreConnection(Role.CLIENT, config), params,
                            heartbeat_asked=heartbeat)


# ---------------------------------------------------------------- connection
class ClientConnection(base.ClientConnection[CoreConnection, "ClientSession"]):
    """An AMQP 0-10 client connection's policy (see the module docstring)."""

    PROTOCOL = "0-10"

    def attach(self, name: str | bytes | None = None, *,
               timeout: int | None = None) -> ClientSession:
        """Attach (or resume) a session; its ``ready`` is answered once the
        broker attached it (and, for a resume, once replay is done).  A
        resume takes the session over (``force``) from a transport the broker
        may still think alive."""
        self.check()
        if name is None:
            name = uuid.uuid4().hex
        raw = name.encode() if isinstance(name, str) else bytes(name)
        # A resume forces: the broker may still hold the session on the
        # transport we lost (until its heartbeat notices), and would answer
        # session-busy until then.  Our store parked it, so it is ours.
        core = self.core
        s = ClientSession(self, core.attach(raw, timeout=timeout, force=core.resumable(raw)))
        self.sessions[s.channel] = s
        return s

    def _close_core(self, code: int, text: str | None) -> None:
        self.core.close(code, text)


# ---------------------------------------------------------------- deliveries
class ClientDelivery(base.ClientDelivery):
    """A transfer delivered to a subscription: ``command_id`` (its id in the
    broker's command numbering) and ``body`` its own; ``event`` the
    MessageReceived it came in -- with the transfers alike read with it
    (a run: ``event.more``), whose command and headers it shares."""

    __slots__ = ("sub", "command_id", "body")
    event: ev.MessageReceived
    command_id: int
    body: bytes

    def __init__(self, sub: ClientSubscription[Any], event: ev.MessageReceived,
                 command_id: int, body: bytes) -> None:
        # The base's fields set here too: one call per delivery, not two.
        self.event = event
        self.settled = False
        self._message: Message | None = None
        self.sub = sub
        self.command_id = command_id
        self.body = body

    @staticmethod
    def bodies(deliveries: Sequence[base.ClientDelivery], /) -> list[bytes]:
        return [d.body for d in deliveries]

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = from_event(self.event, self.body)
        return self._message

    _LIFTED = frozenset(X_091 + n for n in ("type", "cluster-id", "message-id"))  # (fields_of)

    def _received_header(self, name: str) -> Any:
        mp = self.event.message_properties
        h = mp.application_headers if mp is not None else None
        return h.get(name) if h else None

    @property
    def routing_key(self) -> str | None:
        dp = self.event.delivery_properties
        return dp.routing_key if dp else None

    @property
    def exchange(self) -> str | None:
        dp = self.event.delivery_properties
        return dp.exchange if dp else None

    @property
    def redelivered(self) -> bool:
        dp = self.event.delivery_properties
        return bool(dp is not None and dp.redelivered)

    @property
    def ack(self) -> bool:
        """False: accept-mode none, nothing to settle."""
        return self.sub.ack


D = TypeVar("D", bound=ClientDelivery)


# ---------------------------------------------------------------- sessions
class ClientSession(base.ClientSessionBase["ClientSubscription[Any]"]):
    """An attached 0-10 session's policy.  ``ready`` is answered once the
    session may be used (attached, resume replayed); ``ended`` once it is
    detached."""

    conn: ClientConnection
    name: bytes

    def __init__(self, conn: ClientConnection, core: CoreSession) -> None:
        assert core.channel is not None
        super().__init__(conn, core.name, core.channel)
        self.core = core
        self.timeout: int | None = core.timeout
        self.resuming = core.resuming  # until the broker says what it expects
        self.resumed: ev.SessionResumed | None = None
        self.lost_commands: SequenceSet | None = None  # in-doubt ids the broker lost
        #: our transfers the broker rejected (``confirm``): id -> (code, text)
        self.rejected = Rejections()
        self.ready: Pending[None] = self.track(Pending())
        self._ended: Pending[None] = Pending()
        self.in_flight = 0  # body octets of published transfers awaiting completion
        self._attached = False
        self._waiters: dict[int, Pending[Any]] = {}  # command id -> its answer
        self._results: dict[int, Any] = {}  # command id -> result (waited-for ids only)
        self._confirmed: set[int] = set()  # waited-for transfers sent with confirm
        self._sizes: dict[int, int] = {}  # transfer id -> octets, while in flight
        self._cancelled: set[str] = set()  # destinations we sent message.cancel for
        self._deferred: list[Command] = []  # to send once resumed
        self._asked = False  # session.flush(completed) sent since the last completion
        self._builder = TransferBuilder()  # reuses the last publish's header segment
        ctx = core.context
        self._carry = ctx if isinstance(ctx, Carry) else None
        core.context = None
        self._dest_ids = 0
        self._content: Content | None = None

    def __repr__(self) -> str:
        return f"<ClientSession {self.name!r} channel={self.channel} {self.core.state.name}>"

    # -- sending ------------------------------------------------------------------
    @property
    def outstanding(self) -> int:
        """Commands sent and not yet completed by the broker."""
        return self.core.outstanding

    def has_room(self) -> bool:
        """A command may be sent without waiting (the replay window has room)."""
        self.check()
        if self.core.outstanding < self.core.replay_window:
            return True
        self._ask_completions()
        return False

    def send(self, command: Command, *, sync: bool = False, headers: Iterable[Struct] = (),
             body: bytes | None = None) -> int:
        """Hand a command to the core; its id.  Raises the session's error if
        it is over (else the core's LocalProtocolError for misuse)."""
        self.check()
        try:
            return self.core.send(command, sync=sync, headers=headers, body=body)
        except LocalProtocolError:
            self.check()  # the session or connection died: say that instead
            raise

    def execute(self, command: Command, *, headers: Iterable[Struct] = (),
                body: bytes | None = None) -> Pending[Any]:
        """Send ``command`` with the sync bit; answered with its result (None
        for commands without one) once the broker completed it."""
        return self._answer(self.send(command, sync=True, headers=headers, body=body))

    def sync(self) -> Pending[Any]:
        """``execution.sync``: answered once every earlier command completed."""
        self.flush()
        self.check()
        return self._answer(self.core.sync())

    def all_completed(self) -> bool:
        """Nothing sent awaits completion (asks the broker for completions
        when something does)."""
        self.check()
        if self.core.outstanding == 0 and not self.resuming:
            return True
        self._ask_completions()
        return False

    def _answer(self, cid: int) -> Pending[Any]:
        p: Pending[Any] = self.track(Pending())
        self._waiters[cid] = p
        return p

    def forget(self, p: Pending[Any]) -> None:
        super().forget(p)
        for cid, q in list(self._waiters.items()):
            if q is p:
                del self._waiters[cid]
                self._results.pop(cid, None)
                self._confirmed.discard(cid)

    def _ask_completions(self) -> None:
        if not self._asked and self.core.state is SessionState.ATTACHED:
            self._asked = True
            self.core.flush(completed=True)

    # -- queues and exchanges ---------------------------------------------------------
    def declare_queue(self, queue: str, *, passive: bool = False, durable: bool = False,
                      exclusive: bool = False, auto_delete: bool = False,
                      alternate_exchange: str | None = None,
                      arguments: dict[str, Any] | None = None,
                      ) -> Pending[spec.QueueQueryResult]:
        """``queue.declare``, answered with the queue's state (``queue.query``)."""
        self.send(spec.QueueDeclare(queue=queue, passive=passive, durable=durable,
                                    exclusive=exclusive, auto_delete=auto_delete,
                                    alternate_exchange=alternate_exchange,
                                    arguments=arguments))
        return self.execute(spec.QueueQuery(queue=queue))

    def query_queue(self, queue: str) -> Pending[spec.QueueQueryResult]:
        """``queue.query`` (fields absent -- ``queue`` empty -- if there is no
        such queue)."""
        return self.execute(spec.QueueQuery(queue=queue))

    def delete_queue(self, queue: str, *, if_unused: bool = False,
                     if_empty: bool = False) -> Pending[None]:
        return self.execute(spec.QueueDelete(queue=queue, if_unused=if_unused,
                                             if_empty=if_empty))

    def purge_queue(self, queue: str) -> Pending[None]:
        return self.execute(spec.QueuePurge(queue=queue))

    def declare_exchange(self, exchange: str, type: str = "direct", *, passive: bool = False,
                         durable: bool = False, auto_delete: bool = False,
                         alternate_exchange: str | None = None,
                         arguments: dict[str, Any] | None = None) -> Pending[None]:
        return self.execute(spec.ExchangeDeclare(
            exchange=exchange, type=type, passive=passive, durable=durable,
            auto_delete=auto_delete, alternate_exchange=alternate_exchange,
            arguments=arguments))

    def query_exchange(self, exchange: str) -> Pending[spec.ExchangeQueryResult]:
        """``exchange.query`` (``not_found`` set if there is no such exchange)."""
        return self.execute(spec.ExchangeQuery(name=exchange))

    def delete_exchange(self, exchange: str, *, if_unused: bool = False) -> Pending[None]:
        return self.execute(spec.ExchangeDelete(exchange=exchange, if_unused=if_unused))

    def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
             arguments: dict[str, Any] | None = None) -> Pending[None]:
        """``exchange.bind`` (``binding_key`` defaults to the queue's name)."""
        return self.execute(spec.ExchangeBind(
            queue=queue, exchange=exchange,
            binding_key=queue if binding_key is None else binding_key, arguments=arguments))

    def unbind(self, queue: str, exchange: str, binding_key: str | None = None,
               ) -> Pending[None]:
        return self.execute(spec.ExchangeUnbind(
            queue=queue, exchange=exchange,
            binding_key=queue if binding_key is None else binding_key))

    def tx_select(self) -> Pending[None]:
        return self.execute(spec.TxSelect())

    def tx_commit(self) -> Pending[None]:
        self.flush()
        return self.execute(spec.TxCommit())

    def tx_rollback(self) -> Pending[None]:
        self.flush()
        return self.execute(spec.TxRollback())

    # -- publishing ---------------------------------------------------------------------
    def transfer(self, message: Message | bytes | str, exchange: str = "",
                 routing_key: str | None = None, confirm: bool = False) -> Transfer:
        """Build a publish (nothing is sent); the header segment of one like
        the last is reused (:class:`~.messages.TransferBuilder`)."""
        cmd, headers, body, data = self._builder.build(
            base.as_message(message, routing_key), exchange, explicit_accept=confirm)
        return Transfer(cmd, headers, body, confirm, data)

    def transfers(self, template: Message | bytes | str, bodies: Iterable[bytes],
                  exchange: str = "", routing_key: str | None = None,
                  confirm: bool = False) -> Iterator[Transfer]:
        """:meth:`transfer` of ``template`` with each of ``bodies`` as its
        body, built as they are taken: one command, header structs and
        header segment for all of them -- unless message-properties are
        set (their content-length differs with the body), then one each."""
        msg = base.as_message(template, routing_key)
        cmd, headers, _, data = self._builder.build(msg, exchange, explicit_accept=confirm)
        if data is None or any(type(h) is spec.MessageProperties for h in headers):
            for body in bodies:
                yield self.transfer(msg.with_body(body), exchange, None, confirm)
            return
        for body in bodies:
            yield Transfer(cmd, headers, body if type(body) is bytes else bytes(body),
                           confirm, data)

    def run_of(self, template: Message | bytes | str, exchange: str = "",
               routing_key: str | None = None, confirm: bool = False) -> Transfer | None:
        """The publish every body of a run shares (its body empty), for
        :meth:`publish_run` -- or None when the bodies cannot share one
        (message-properties: their content-length differs with the body;
        then :meth:`transfers`, one by one)."""
        msg = base.as_message(template, routing_key)
        cmd, headers, _, data = self._builder.build(msg, exchange, explicit_accept=confirm)
        if data is None or any(type(h) is spec.MessageProperties for h in headers):
            return None
        return Transfer(cmd, headers, b"", confirm, data)

    def publish_run(self, t: Transfer, bodies: Sequence[bytes]) -> tuple[int, int]:
        """Send ``t`` (from :meth:`run_of`) with each body of the longest
        prefix of ``bodies`` that may go now -- the replay window, the
        broker's credit, :data:`MAX_IN_FLIGHT` -- as one run, not waited
        for: ``(first id, how many)``.  At least one goes whenever
        :meth:`can_publish` says the first may; ``(0, 0)`` otherwise (wait
        for room as for it)."""
        if self.error is not None:
            raise self.error
        core = self.core
        n = min(len(bodies), core.replay_window - core.outstanding)
        if n <= 0:
            self._ask_completions()
            return 0, 0
        if not all(type(b) is bytes for b in bodies):  # (as transfers() takes them)
            bodies = [b if type(b) is bytes else bytes(b) for b in bodies]
        sizes = list(accumulate(map(len, bodies[:n])))
        credit = core.credit(t.command.destination or "")
        if credit is not None:
            if credit.messages is not None:
                n = min(n, credit.messages)
            if credit.octets is not None:
                per = len(t.header_data or b"")
                n = min(n, next((i for i, c in enumerate(sizes) if c + per * (i + 1)
                                 > credit.octets), n))
            if n <= 0:
                return 0, 0
        if self.in_flight:
            fit = bisect_right(sizes, MAX_IN_FLIGHT - self.in_flight, 0, n)
            if fit < n:
                self._ask_completions()
                n = fit
            if n <= 0:
                return 0, 0
        run = bodies if n == len(bodies) else bodies[:n]
        try:
            first = core.send_transfers(t.command, run, headers=t.headers,
                                        header_data=t.header_data)
        except LocalProtocolError:
            self.check()  # the session or connection died: say that instead
            raise
        self.in_flight += sizes[n - 1]
        if first + n <= _ID_MASK:
            self._sizes.update(zip(range(first, first + n), map(len, run), strict=True))
        else:  # the ids wrap
            self._sizes.update(((first + i) & _ID_MASK, len(b)) for i, b in enumerate(run))
        return first, n

    def resume_offset(self, exchange: str, resume_id: str) -> Pending[Any]:
        """``message.resume``: answered with the broker's
        ``message-resume-result`` -- how many body octets of the message
        ``resume_id`` it kept from an interrupted transfer (0: none)."""
        return self.execute(spec.MessageResume(destination=exchange, resume_id=resume_id))

    @staticmethod
    def resumable(t: Transfer, resume_id: str, offset: int,
                  resume_ttl: int | None = None) -> Transfer:
        """``t`` as it goes under ``resume_id`` once the broker said it has
        ``offset`` octets of it: whole, naming the id in its
        delivery-properties (so a broker keeps what arrives of it if the
        transport is lost) -- or, from ``offset``, as the last fragment of
        the message the broker holds.  ``resume_ttl``: milliseconds the
        broker is asked to keep a cut transfer."""
        if 0 < offset <= len(t.body):
            c = t.command
            return Transfer(spec.MessageTransfer(destination=c.destination,
                                                 accept_mode=c.accept_mode,
                                                 acquire_mode=c.acquire_mode),
                            (spec.FragmentProperties(first=False, last=True),),
                            t.body[offset:], t.confirm)
        headers = list(t.headers)
        i = next((n for n, h in enumerate(headers) if isinstance(h, spec.DeliveryProperties)),
                 None)
        extra: dict[str, Any] = {"resume_id": resume_id}
        if resume_ttl is not None:
            extra["resume_ttl"] = resume_ttl
        if i is None:
            headers.insert(0, spec.DeliveryProperties.unchecked(**extra))
        else:
            dp = headers[i]
            headers[i] = type(dp).unchecked(**{**{f.attr: getattr(dp, f.attr)
                                                   for f in dp.FIELDS}, **extra})
        return Transfer(t.command, tuple(headers), t.body, t.confirm)

    def can_publish(self, t: Transfer) -> bool:
        """``t`` may be sent now: the broker's credit, the replay window, the
        body octets in flight -- or the session is over, which
        :meth:`publish` then raises."""
        if self.error is not None:
            return True
        core = self.core
        if core.outstanding >= core.replay_window:
            self._ask_completions()
            return False
        credit = core.credit(t.command.destination or "")
        if credit is not None and not credit.can_send(t.octets()):
            return False
        if self.in_flight and self.in_flight + len(t.body) > MAX_IN_FLIGHT:
            self._ask_completions()
            return False
        return True

    def publish(self, t: Transfer, *, wait: bool) -> tuple[int, Pending[Any] | None]:
        """Send ``t``: its command id, and what to wait for if ``wait`` --
        answered when the broker completed it (and, with ``confirm``,
        failed with :class:`MessageRejectedError` if it rejected it)."""
        if self.error is not None:
            raise self.error
        try:
            cid = self.core.send(t.command, sync=wait, headers=t.headers, body=t.body,
                                 header_data=t.header_data)
        except LocalProtocolError:
            self.check()  # the session or connection died: say that instead
            raise
        if not wait:
            n = len(t.body)
            self._sizes[cid] = n
            self.in_flight += n
            return cid, None
        if t.confirm:
            self._confirmed.add(cid)
        return cid, self._answer(cid)

    # -- consuming -----------------------------------------------------------------------
    def cancel_destination(self, destination: str) -> Pending[Any]:
        """``message.cancel``; transfers to ``destination`` that still arrive
        are given back without another cancel."""
        self._cancelled.add(destination)
        return self.execute(spec.MessageCancel(destination=destination))

    def subscribe(self, queue: str, make_delivery: Callable[[ClientSubscription[D],
                                                             ev.MessageReceived, int, bytes], D], *,
                  prefetch: int | None = 100, accept_mode: str = "explicit",
                  flow_mode: str = "window", destination: str | None = None,
                  exclusive: bool = False, arguments: dict[str, Any] | None = None,
                  complete_on_receipt: bool = False) -> ClientSubscription[D]:
        """A subscription to ``queue`` (not started: see
        :meth:`ClientSubscription.start`); ``complete_on_receipt``: see the
        module docstring."""
        mode = base.accept_mode(accept_mode)
        if flow_mode not in _FLOW_MODES:
            raise LocalProtocolError(f"flow_mode must be one of {sorted(_FLOW_MODES)}")
        base.check_prefetch(prefetch)
        if destination is None:
            destination = f"{queue}#{uuid.uuid4().hex[:12]}"
        if destination in self.subs:
            raise LocalProtocolError(f"destination {destination!r} is already subscribed")
        sub = ClientSubscription(self, queue, destination, prefetch, mode,
                                 _FLOW_MODES[flow_mode], exclusive, arguments, make_delivery,
                                 complete_on_receipt)
        self.subs[destination] = sub
        return sub

    def get(self, queue: str, make_delivery: Callable[[ClientSubscription[D],
                                                       ev.MessageReceived, int, bytes], D], *,
            accept_mode: str = "explicit", now: bool) -> tuple[ClientSubscription[D],
                                                                Pending[Any] | None]:
        """Fetch one message: a subscription with credit for one.  ``now``:
        only a message available at once (``message.flush``, answered when
        done); else the caller waits for a delivery as long as it likes, then
        calls :meth:`ClientSubscription.stop`."""
        self._dest_ids += 1
        sub = self.subscribe(queue, make_delivery, prefetch=1, accept_mode=accept_mode,
                             flow_mode="credit", destination=f"get-{self._dest_ids}")
        sub.started = True
        sub.send_subscribe()
        if not now:
            return sub, None
        return sub, self.execute(spec.MessageFlush(destination=sub.destination))

    def settle(self, deliveries: Iterable[ClientDelivery], how: str, code: int = 0,
               text: str | None = None, redelivered: bool = False) -> None:
        """Accept, reject or release deliveries of this session (``how``);
        accepts are batched per subscription, the others go out at once."""
        if how == "accept" and type(deliveries) is tuple and len(deliveries) == 1:
            self._accept(deliveries[0])  # one delivery's accept(): the common case
            return
        ds = deliveries if isinstance(deliveries, (tuple, list)) else list(deliveries)
        if how == "accept" and ds and self._accept_run(ds):
            return
        for d in ds:
            self._settleable(d)
        if how not in ("accept", "reject", "release"):
            raise LocalProtocolError(f"cannot settle by {how!r}")
        self.check()
        core = self.core
        if how == "accept":
            touched: list[ClientSubscription[Any]] = []
            for d in ds:
                d.settled = True
                sub = d.sub
                sub.settled(d)
                sub.to_accept(d.command_id)  # (completed as the accept goes out)
                if sub not in touched:
                    touched.append(sub)
            for sub in touched:
                sub.accepts_added()
            return
        ids = SequenceSet()
        incomplete = SequenceSet()
        for d in ds:
            d.settled = True
            ids.add(d.command_id)
            if not d.sub.complete_on_receipt:
                incomplete.add(d.command_id)
        if not ids:
            return
        core.complete(incomplete)
        for d in ds:
            d.sub.settled(d)
        if how == "reject":
            self.send(spec.MessageReject(transfers=ids, code=code, text=text))
        elif how == "release":
            self.send(spec.MessageRelease(transfers=ids, set_redelivered=redelivered))

    def _settleable(self, d: ClientDelivery) -> None:
        if d.sub.session is not self:
            raise LocalProtocolError("the delivery belongs to another session")
        if not d.ack:
            raise LocalProtocolError("deliveries of an accept_mode='none' subscription "
                                     "need no settling")
        if d.settled:
            raise LocalProtocolError(f"delivery {d.command_id} is already settled")

    def _accept_run(self, ds: Sequence[ClientDelivery]) -> bool:
        """:meth:`settle` by accept of deliveries of one subscription (a
        batch a consumer took with ``take_many``): the same checks, then
        booked for the lot -- ids, settled, credit, accepts -- in one call
        each rather than a few per delivery.  False, nothing done, when they
        are not all of one subscription (or one is settled: then settle's
        checks say which)."""
        sub = ds[0].sub
        if not all(d.sub is sub for d in ds) or any(d.settled for d in ds):
            return False
        if sub.session is not self or not sub.ack:
            self._settleable(ds[0])  # raises
        self.check()
        for d in ds:
            d.settled = True
        ids = [d.command_id for d in ds]
        sub.settled_run(ids)
        sub.to_accept_run(ids)  # (completed as the accept goes out)
        sub.accepts_added()
        return True

    def _accept(self, d: ClientDelivery) -> None:
        """:meth:`settle` of one delivery by accept."""
        sub = d.sub
        if sub.session is not self or not sub.ack or d.settled:
            self._settleable(d)
        if self.error is not None:
            raise self.error
        d.settled = True
        sub.settled(d)
        sub.to_accept(d.command_id)
        sub.accepts_added()

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def ended(self) -> Pending[None]:
        return self._ended

    def end(self) -> bool:
        """Send what is batched and detach; False if there is nothing to
        detach (answer: ``ended``)."""
        if self.error is not None or self.core.state is not SessionState.ATTACHED:
            return False
        self.flush()
        self.core.detach()
        return True

    def abandon(self) -> None:
        """The attach was given up (cancelled, failed): detach as soon as the
        broker has answered it."""
        self.closed = True
        if self.error is None and self.core.state is SessionState.ATTACHED:
            self.core.detach()

    def fail(self, err: AMQPError) -> None:
        if self.error is None and isinstance(err, ConnectionLostError) and self.core.timeout:
            self._leave_carry()
        super().fail(err)
        self._ended.resolve(None)
        for sub in self.subs.values():
            sub.owed = 0

    def _leave_carry(self) -> None:
        carry = self._carry or Carry()  # not yet recovered: pass it on
        for sub in self.subs.values():
            if sub.started and not sub.cancelled:
                sub.leave(carry)
        if carry.to_accept or carry.to_release:
            self.core.context = carry

    def _become_ready(self) -> None:
        """Attached (and resumed): settle what the last transport left
        behind, send what waited for the resume."""
        carry, self._carry = self._carry, None
        # Transfer ids only mean the same thing if the broker kept the
        # session's state (a consumer has always sent commands, so
        # SessionResumed says peer_state).  Otherwise the carry is dropped:
        # the old ids would name the broker's new transfers.
        if carry is not None and self.resumed is not None and self.resumed.peer_state:
            if carry.to_accept:
                self.core.complete(carry.to_accept.difference(carry.completed))
                self.core.send(spec.MessageAccept(transfers=carry.to_accept))
            if carry.to_release:
                self.core.complete(carry.to_release.difference(carry.completed))
                self.core.send(spec.MessageRelease(transfers=carry.to_release,
                                                   set_redelivered=True))
        for cmd in self._deferred:
            self.core.send(cmd)
        self._deferred.clear()
        self._pending.discard(self.ready)
        self.ready.resolve(None)

    # -- events ---------------------------------------------------------------------------
    def on_exception(self, e: ev.ExceptionReceived) -> None:
        self.fail(ExecutionError(e.error_code, e.description, command_id=e.command_id,
                                 class_code=e.class_code, command_code=e.command_code,
                                 field_index=e.field_index, error_info=e.error_info))

    def on_state_lost(self, e: ev.SessionStateLost) -> None:
        self.lost_commands = e.commands

    def on_timeout(self, e: ev.SessionTimeout) -> None:
        self.timeout = e.timeout

    def on_attached(self, e: ev.SessionAttached | None = None) -> None:
        self._attached = True
        if self.closed:
            self.abandon()  # its attach was given up meanwhile
        elif not self.resuming:
            self._become_ready()

    def on_resumed(self, e: ev.SessionResumed) -> None:
        self.resumed = e
        self.resuming = False
        if self._attached and not self.closed:
            self._become_ready()
        self._woken()

    def on_detached(self, e: ev.SessionDetached) -> None:
        self.conn.sessions.pop(self.channel, None)
        who = "by the broker" if e.by_peer else "by the client"
        self.fail(SessionError(f"session {self.name!r} detached {who} (code {e.code})",
                               e.code))

    def on_completed(self, e: ev.CommandsCompleted) -> None:
        done = e.commands
        self._asked = False
        sizes = self._sizes
        if sizes:
            pop = sizes.pop
            for lo, hi in done.ranges:
                # (a range's sizes popped and summed in C: one completion
                # reports a publisher's whole run)
                run: Iterable[int] = range(lo, hi + 1) if lo <= hi else chain(
                    range(lo, _ID_MASK + 1), range(hi + 1))
                self.in_flight -= sum(map(pop, run, repeat(0)))
        w = self._waiters
        if w:
            # A waiter leaves the dict when its command completes.
            ids = [c for c in w if c in done] if len(w) <= 8 else [c for c in done if c in w]
            for cid in ids:
                p = w.pop(cid)
                self._pending.discard(p)
                value = self._results.pop(cid, None)
                rejected = self.rejected.pop(cid, None) if cid in self._confirmed else None
                self._confirmed.discard(cid)
                if rejected is not None:
                    p.fail(MessageRejectedError(rejected[0], rejected[1], cid))
                else:
                    p.resolve(value)
        if self._content is not None:
            self._content.room()  # answers owed while the replay window was full
        self._woken()

    def on_result(self, e: ev.ResultReceived) -> None:
        if e.command_id in self._waiters:
            self._results[e.command_id] = e.value

    @property
    def content(self) -> Content:
        """The file and stream classes on this session (``content.py``)."""
        if self._content is None:
            self._content = Content(self, self._woken)
        return self._content

    def on_command(self, e: ev.CommandReceived) -> None:
        cmd = e.command
        if cmd.CLASS_CODE in (9, 10):  # file, stream
            self.content.on_command(e)
            return
        if isinstance(cmd, spec.MessageReject):
            self.rejected.add(cmd.transfers or SequenceSet(), int(cmd.code), cmd.text)
        if isinstance(cmd, spec.MessageResume):
            # This client keeps no part of a transfer it did not get whole:
            # it knows no resume-id, and says 0 (the XML's rule).
            self.core.send_result(e.command_id, spec.MessageResumeResult(offset=0))
            self._woken()
            return
        # accept/reject of our transfers, flow/stop/set-flow-mode: the core
        # keeps the credit books; we complete, and blocked publishers retry.
        self.core.complete(e.command_id)
        self._woken()

    def on_message(self, e: ev.MessageReceived) -> None:
        sub = self.subs.get(e.transfer.destination or "")
        if sub is not None:
            sub.deliver(e)
            return
        # Not ours (cancelled, or a subscription of a transport we lost):
        # complete it (the run) and give it back -- after cancelling its
        # destination once, so that it does not come back.
        ids = SequenceSet()
        ids.add_range(e.command_id, e.command_id + len(e.more))  # (a run never wraps)
        self.core.complete(ids)
        if self.core.failed:
            return
        dest = e.transfer.destination or ""
        cmds: list[Command] = []
        if dest not in self._cancelled:
            self._cancelled.add(dest)
            cmds.append(spec.MessageCancel(destination=dest))
            self.conn.note(INFO, f"session {self.name!r}: a transfer to destination {dest!r}, "
                                 f"which has no subscription here: released, destination "
                                 f"cancelled")
        if e.transfer.accept_mode == spec.AcceptMode.EXPLICIT:
            cmds.append(spec.MessageRelease(transfers=ids, set_redelivered=True))
        if self.resuming or self._carry is not None:
            self._deferred.extend(cmds)  # after the resume's replay
            return
        for cmd in cmds:
            try:
                self.core.send(cmd)
            except LocalProtocolError as err:  # replay window full: the broker keeps it
                self.conn.note(WARNING, f"could not give back transfers {ids}: "
                                        f"{err.message}")


ClientSession.EVENTS = {
    ev.MessageReceived: ClientSession.on_message,
    ev.CommandsCompleted: ClientSession.on_completed,
    ev.ResultReceived: ClientSession.on_result,
    ev.CommandReceived: ClientSession.on_command,
    ev.ExceptionReceived: ClientSession.on_exception,
    ev.SessionAttached: ClientSession.on_attached,
    ev.SessionResumed: ClientSession.on_resumed,
    ev.SessionStateLost: ClientSession.on_state_lost,
    ev.SessionTimeout: ClientSession.on_timeout,
    ev.SessionDetached: ClientSession.on_detached,
}


# ---------------------------------------------------------------- subscriptions
class ClientSubscription(base.ClientSubscriptionBase[D]):
    """Deliveries from one ``message.subscribe`` (see the module docstring)."""

    session: ClientSession

    def __init__(self, session: ClientSession, queue: str, destination: str,
                 prefetch: int | None, mode: AcceptMode, flow_mode: spec.FlowMode,
                 exclusive: bool, arguments: dict[str, Any] | None,
                 make_delivery: Callable[[ClientSubscription[D], ev.MessageReceived, int,
                                          bytes], D],
                 complete_on_receipt: bool = False) -> None:
        make: Callable[[ev.MessageReceived, int, bytes], D] = functools.partial(
            make_delivery, self)
        super().__init__(session, queue, destination, prefetch, mode, make)
        self._make = make
        self.flow_mode = flow_mode
        self.complete_on_receipt = complete_on_receipt
        self._exclusive = exclusive
        self._arguments = arguments
        self._accepts = SequenceSet()
        self._accepts_n = 0
        self.owed = 0  # credit mode: messages to re-grant
        self.unsettled: set[int] = set()  # handed out, explicit mode, not settled

    def deliver(self, event: ev.MessageReceived) -> None:
        """A transfer, or a run of them (``event.more``, numbered on from
        ``event.command_id``): one delivery each, in order."""
        cid = event.command_id
        more = event.more
        self.buffer.extend(map(self._make, repeat(event),
                               range(cid, cid + 1 + len(more)), (event.body, *more)))
        if self.wake is not None:
            self.wake()

    def send_subscribe(self) -> None:
        s = self.session
        s.send(spec.MessageSubscribe(
            queue=self.queue, destination=self.destination,
            accept_mode=spec.AcceptMode(self.accept_mode),
            acquire_mode=spec.AcquireMode.PRE_ACQUIRED, exclusive=self._exclusive,
            arguments=self._arguments))
        s.send(spec.MessageSetFlowMode(destination=self.destination, flow_mode=self.flow_mode))
        s.send(spec.MessageFlow(destination=self.destination, unit=spec.CreditUnit.MESSAGE,
                                value=_INFINITE if self.prefetch is None else self.prefetch))
        s.send(spec.MessageFlow(destination=self.destination, unit=spec.CreditUnit.BYTE,
                                value=_INFINITE))

    def start(self) -> Pending[Any]:
        """Subscribe; answered once the broker completed it (a missing queue:
        :class:`ExecutionError`)."""
        self.session.check()
        self.started = True
        self.send_subscribe()
        return self.session.sync()

    def stop(self, *, keep: bool = True) -> Pending[Any]:
        """End a :meth:`ClientSession.get`: ``message.cancel``, keeping what
        was delivered to be taken (``keep``) or giving it back (answered
        once the broker completed the cancel)."""
        self.cancelled = True
        s = self.session
        p = s.cancel_destination(self.destination)
        if not keep:
            self._release_buffered()
        s.subs.pop(self.destination, None)
        return p

    def cancel(self) -> Pending[Any] | None:
        """``message.cancel``; buffered deliveries are released (explicit
        mode).  None if there is nothing to wait for."""
        if self.cancelled:
            return None
        self.cancelled = True
        s = self.session
        self.end()
        if s.error is not None or not self.started:
            s.subs.pop(self.destination, None)
            return None
        self.flush()
        p = s.cancel_destination(self.destination)
        self._release_buffered()
        s.subs.pop(self.destination, None)
        return p

    def _release_buffered(self) -> None:
        """Deliveries never handed out: completed, and released (explicit mode)."""
        s = self.session
        left = SequenceSet()
        while self.buffer:
            d = self.buffer.popleft()
            d.settled = True
            s.core.complete(d.command_id)
            if self.ack:
                left.add(d.command_id)
        if left:
            s.send(spec.MessageRelease(transfers=left))

    def take_many(self, limit: int) -> list[D]:
        """:meth:`handed_out` for the lot: their ids completed (on receipt,
        or accept-mode none) in one call -- one range for a run of them."""
        buf = self.buffer
        if not buf:
            self.flush()
            return []
        popleft = buf.popleft
        out = [popleft() for _ in range(min(limit, len(buf)))]
        ids = [d.command_id for d in out]
        if self.ack:
            self.unsettled.update(ids)
            if self.complete_on_receipt:
                self.session.core.complete(ids)
            return out
        for d in out:
            d.settled = True
        self.session.core.complete(ids)
        if self.flow_mode == spec.FlowMode.CREDIT and self.prefetch is not None and (
                not self.cancelled):  # (_credit_one, for the lot)
            self.owed += len(out)
            if self.owed >= self.batch:
                self._send_credit()
        return out

    def handed_out(self, d: D) -> None:
        if self.ack:
            self.unsettled.add(d.command_id)
            if self.complete_on_receipt:  # (and settling does not complete it again)
                self.session.core.complete(d.command_id)
        else:
            d.settled = True
            self.session.core.complete(d.command_id)
            self._credit_one()

    def settled(self, d: D) -> None:
        """``d`` was just settled (the session completes it -- an accepted
        one as its accept goes out)."""
        self.unsettled.discard(d.command_id)
        self._credit_one()

    def to_accept(self, cid: int) -> None:
        self._accepts.add(cid)
        self._accepts_n += 1

    def settled_run(self, ids: list[int]) -> None:
        """:meth:`settled` of the deliveries ``ids``, for the lot."""
        self.unsettled.difference_update(ids)
        if self.flow_mode != spec.FlowMode.CREDIT or self.prefetch is None or self.cancelled:
            return
        self.owed += len(ids)  # (_credit_one, for the lot)
        if self.owed >= self.batch:
            self._send_credit()

    def to_accept_run(self, ids: list[int]) -> None:
        """:meth:`to_accept` of each of ``ids``: one range when they are
        consecutive (a batch taken in order)."""
        lo, hi = ids[0], ids[0] + len(ids) - 1
        if hi <= _ID_MASK and ids == list(range(lo, hi + 1)):
            self._accepts.add_range(lo, hi)
        else:
            add = self._accepts.add
            for cid in ids:
                add(cid)
        self._accepts_n += len(ids)

    def accepts_added(self) -> None:
        """Accepts were batched: send them if the batch is full or nothing
        more is buffered (the application has caught up)."""
        if self._accepts_n >= self.batch or not self.buffer:
            self._send_accepts()

    def _credit_one(self) -> None:
        if self.flow_mode != spec.FlowMode.CREDIT or self.prefetch is None or self.cancelled:
            return
        self.owed += 1
        if self.owed >= self.batch:
            self._send_credit()

    def _send_credit(self) -> None:
        if self.owed:
            self.session.send(spec.MessageFlow(destination=self.destination,
                                               unit=spec.CreditUnit.MESSAGE, value=self.owed))
            self.owed = 0

    def _send_accepts(self) -> None:
        if self._accepts_n:
            s = self.session
            if not self.complete_on_receipt:
                s.core.complete(self._accepts)  # completion before the accept (as qpid does)
            s.send(spec.MessageAccept(transfers=self._accepts))
            self._accepts = SequenceSet()
            self._accepts_n = 0

    def flush(self) -> None:
        """Send batched accepts and owed credit now."""
        if self.session.error is not None:
            return
        self._send_accepts()
        if not self.cancelled:
            self._send_credit()

    def leave(self, carry: Carry) -> None:
        """The transport died: what this subscription owes goes with the session."""
        carry.to_accept.update(self._accepts)
        if self.complete_on_receipt:
            carry.completed.update(self._accepts)
        for cid in self.unsettled:
            carry.to_release.add(cid)
            if self.complete_on_receipt:
                carry.completed.add(cid)
        if self.ack:
            for d in self.buffer:
                carry.to_release.add(d.command_id)


# ---------------------------------------------------------------- what adapters show
class SessionView(base.SessionView[ClientSession]):
    """What an adapter's 0-10 session shows of its policy."""

    @property
    def name(self) -> bytes:
        return self._p.name

    @property
    def core(self) -> CoreSession:
        """The sans-IO session underneath (for inspection)."""
        return self._p.core

    @property
    def timeout(self) -> int | None:
        """The session timeout the broker granted (seconds)."""
        return self._p.timeout

    @property
    def resumed(self) -> ev.SessionResumed | None:
        """Set when this attach resumed a session (what was replayed)."""
        return self._p.resumed

    @property
    def lost_commands(self) -> SequenceSet | None:
        """In-doubt commands the broker had lost when resumed (None: none)."""
        return self._p.lost_commands

    @property
    def rejected(self) -> Rejections:
        """Our transfers the broker rejected (``confirm``): id -> (code, text)."""
        return self._p.rejected


class SubscriptionView(base.SubscriptionView[D]):
    """What an adapter's 0-10 subscription shows of its policy."""

    _p: ClientSubscription[D]

    @property
    def flow_mode(self) -> spec.FlowMode:
        return self._p.flow_mode
