"""The 0-10 model's side of durable storage: what it stores, in
:mod:`~amqp_sansio_broker.store`'s records, and how it comes back.

Stored: exchanges and queues declared durable (not exclusive queues: they
die with their session), bindings between a durable exchange and a durable
queue, and messages published persistent (delivery-mode 2) into a durable
queue, until they are accepted (or otherwise leave: acquired with
accept-mode none, rejected, purged, expired, their queue deleted).
Without a store nothing is durable, and the broker says so: declares are
accepted, but queries report ``durable`` false.

On recovery every message is marked redelivered (it may have been delivered
before the stop), and a ttl counts again from the broker's first tick.
"""

from __future__ import annotations

__all__ = ["Durability", "CODEC"]

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from amqp_sansio.v0_10 import codec, spec
from amqp_sansio.v0_10._specbase import Struct
from amqp_sansio.v0_10.framing import header_octets

from .routing import Binding
from .store import BindingRecord, ExchangeRecord, MessageRecord, QueueRecord, Store

if TYPE_CHECKING:
    from .model import Broker, ExchangeState, QMsg, QueueState

#: How message properties and arguments are encoded in the store.
CODEC: Final = "amqp-0-10"
_PERSISTENT: Final = 2


def _args(arguments: dict[str, Any] | Iterable[tuple[str, Any]]) -> bytes:
    items = dict(arguments)
    if not items:
        return b""
    out = bytearray()
    codec.encode_map(items, out)
    return bytes(out)


def _unargs(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    value, _ = codec.decode_map(data, 0, len(data))
    return dict(value)


def _headers(data: bytes) -> tuple[Struct, ...]:
    out = []
    pos, n = 0, len(data)
    while pos < n:
        h, pos = codec.decode_struct32(data, pos, n)
        out.append(h)
    return tuple(out)


def _delivery(m: QMsg) -> Any:
    return next((h for h in m.headers if isinstance(h, spec.DeliveryProperties)), None)


class Durability:
    """Hooks the model calls as durable things change; all no-ops without a store."""

    def __init__(self, store: Store | None) -> None:
        self.store = store
        self.enabled = store is not None
        self._ttls: list[tuple[QMsg, QueueState, int]] = []  # recovered, waiting for a clock

    def describe(self) -> str:
        if self.store is None:
            return ("durability: none -- in memory only, nothing survives a restart "
                    "(give a data directory to keep durable queues and persistent messages)")
        return f"durability: {self.store!r} (durable exchanges, queues, bindings; persistent " \
               "messages)"

    # -- exchanges, queues, bindings ---------------------------------------------
    def exchange_declared(self, x: ExchangeState) -> None:
        if self.store is not None and x.durable:
            self.store.put_exchange(ExchangeRecord(x.vhost, x.name, x.type, x.auto_delete,
                                                   x.alternate, _args(x.arguments)))

    def exchange_deleted(self, x: ExchangeState) -> None:
        if self.store is not None and x.durable:
            self.store.delete_exchange(x.vhost, x.name)

    def queue_declared(self, q: QueueState) -> None:
        if self.store is not None and q.durable:
            self.store.put_queue(QueueRecord(q.vhost, q.name, q.auto_delete, q.alternate,
                                             _args(q.arguments)))

    def queue_deleted(self, q: QueueState) -> None:
        if self.store is not None and q.durable:
            self.store.delete_queue(q.vhost, q.name)

    def bound(self, x: ExchangeState, q: QueueState, b: Binding) -> None:
        if self.store is not None and x.durable and q.durable:
            self.store.put_binding(BindingRecord(x.vhost, x.name, b.queue, b.key,
                                                 _args(b.arguments)))

    def unbound(self, x: ExchangeState, queue: str, key: str) -> None:
        if self.store is not None and x.durable:
            self.store.delete_binding(x.vhost, x.name, queue, key)

    # -- messages ---------------------------------------------------------------
    def enqueued(self, q: QueueState, m: QMsg) -> bool:
        """Store ``m`` if it must survive; is it stored?"""
        if self.store is None or not q.durable:
            return False
        dp = _delivery(m)
        if dp is None or dp.delivery_mode != _PERSISTENT:
            return False
        self.store.put_message(MessageRecord(
            m.seq, q.vhost, q.name, CODEC, header_octets(m.headers), m.body, m.exchange,
            m.routing_key, dp.ttl or None))
        return True

    def forget(self, m: QMsg) -> None:
        """``m`` is no longer the broker's to keep (accepted, dropped...)."""
        if m.stored and self.store is not None:
            self.store.delete_message(m.seq)
            m.stored = False

    def commit(self) -> None:
        """Before any octet leaves the broker: what it confirms is stored."""
        if self.store is not None and self.store.dirty:
            self.store.commit()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    # -- recovery -----------------------------------------------------------------
    def recover(self, broker: Broker) -> int:
        """Put what the store holds back into ``broker``; the next message
        sequence number to use."""
        from .model import ExchangeState, QMsg, QueueState

        if self.store is None:
            return 0
        r = self.store.recover()
        for xr in r.exchanges:
            ns = broker.vhost(xr.vhost)
            ns.exchanges[xr.name] = ExchangeState(
                xr.name, xr.type, xr.vhost, durable=True, auto_delete=xr.auto_delete,
                alternate=xr.alternate, arguments=_unargs(xr.arguments))
        for qr in r.queues:
            qargs = _unargs(qr.arguments)
            broker.vhost(qr.vhost).queues[qr.name] = QueueState(
                qr.name, qr.vhost, durable=True, auto_delete=qr.auto_delete,
                alternate=qr.alternate, arguments=qargs, policy=broker.queue_policy(qargs),
                options=broker.queue_options(qargs))
        for br in r.bindings:
            x = broker.vhost(br.vhost).exchanges.get(br.exchange)
            if x is not None:
                args = tuple(sorted(_unargs(br.arguments).items(), key=lambda kv: kv[0]))
                x.bindings.append(Binding(br.queue, br.key, args))
                x.had_binding = True
        last = -1
        for mr in r.messages:
            last = max(last, mr.id)
            q = broker.vhost(mr.vhost).queues.get(mr.queue)
            if q is None or mr.codec != CODEC:
                self.store.delete_message(mr.id)  # orphaned: its queue is gone
                continue
            headers = _headers(mr.properties)
            mp = next((h for h in headers if isinstance(h, spec.MessageProperties)), None)
            m = QMsg(mr.id, headers, mr.body, mr.routing_key, mr.exchange,
                     mp.application_headers if mp is not None else None, redelivered=True)
            m.stored = True
            broker.restored(q, m)
            if mr.ttl_ms:
                self._ttls.append((m, q, mr.ttl_ms))
        self.store.commit()
        return last + 1

    def start_clock(self, now: float, note: Any) -> None:
        """The broker's first ``now``: recovered ttls count from here."""
        ttls, self._ttls = self._ttls, []
        for m, q, ttl_ms in ttls:
            m.expires = now + ttl_ms / 1000
            note(q, m)

    @property
    def waiting_for_clock(self) -> bool:
        return bool(self._ttls)
