"""The model's side of durable storage: what it stores, in
:mod:`~amqp_sansio_broker.store`'s records, and how it comes back.

Stored: exchanges and queues declared durable (not exclusive queues: they
die with their session), bindings between a durable exchange and a durable
queue, and messages published persistent (delivery-mode 2) into a durable
queue, until they are accepted (or otherwise leave: acquired with
accept-mode none, rejected, purged, expired, their queue deleted); and the
termini a front end keeps past their links on a durable queue (1.0 durable
subscriptions: the front end's own state, given back to it on recovery).
Without a store nothing is durable, and the broker says so: declares are
accepted, but queries report ``durable`` false.

On recovery every message is marked redelivered (it may have been delivered
before the stop), and a ttl counts again from the broker's first tick.
"""

from __future__ import annotations

__all__ = ["Durability", "CODEC"]

from collections.abc import Iterable
from typing import Any, Final

from amqp_sansio.v0_10 import codec

from .properties import decode_stored
from .queued import QMsg
from .routing import Binding
from .store import (
    BindingRecord,
    ExchangeRecord,
    HeldRecord,
    MessageRecord,
    QueueRecord,
    Store,
    TerminusRecord,
)

# The model's types, named for what they are (durable.py is the model's part
# and does not import it): model.Broker, ExchangeState, QueueState.
Broker = Any
ExchangeState = Any
QueueState = Any

#: How arguments are encoded in the store (message properties: in the
#: codec of the protocol that published them, properties.FORMS).
CODEC: Final = "amqp-0-10"


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


class Durability:
    """Hooks the model calls as durable things change; all no-ops without a store."""

    def __init__(self, store: Store | None) -> None:
        self.store = store
        self.enabled = store is not None
        self._ttls: list[tuple[QMsg, QueueState, int]] = []  # recovered, waiting for a clock
        #: Termini recovered from the store, for their front end to take
        #: (:meth:`take_termini`).
        self._termini: list[TerminusRecord] = []

    def describe(self) -> str:
        if self.store is None:
            return ("durability: none -- in memory only, nothing survives a restart "
                    "(give a data directory to keep durable queues and persistent messages)")
        return f"durability: {self.store!r} (durable exchanges, queues, bindings; persistent " \
               "messages; 1.0 durable subscriptions)"

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
            self.store.put_binding(BindingRecord(x.vhost, x.name, b.dest, b.key,
                                                 _args(b.arguments)))

    def unbound(self, x: ExchangeState, queue: str, key: str) -> None:
        if self.store is not None and x.durable:
            self.store.delete_binding(x.vhost, x.name, queue, key)

    # -- link termini (1.0 durable subscriptions) -----------------------------------
    def terminus_kept(self, q: QueueState, r: TerminusRecord) -> bool:
        """Store ``r`` (a terminus on ``q``) if it can survive; is it stored?"""
        if self.store is None or not q.durable:
            return False
        self.store.put_terminus(r)
        return True

    def terminus_dropped(self, vhost: str, container: str, name: str) -> None:
        if self.store is not None:
            self.store.delete_terminus(vhost, container, name)

    def terminus_held(self, vhost: str, container: str, name: str, r: HeldRecord) -> None:
        """A stored terminus holds (or holds otherwise) a delivery: its row."""
        if self.store is not None:
            self.store.put_held(vhost, container, name, r)

    def terminus_unheld(self, vhost: str, container: str, name: str, tag: bytes) -> None:
        if self.store is not None:
            self.store.delete_held(vhost, container, name, tag)

    def take_termini(self) -> list[TerminusRecord]:
        """The recovered termini whose queue came back (once)."""
        got, self._termini = self._termini, []
        return got

    # -- messages ---------------------------------------------------------------
    def enqueued(self, q: QueueState, m: QMsg) -> bool:
        """Store ``m`` if it must survive; is it stored?"""
        if self.store is None or not q.durable or not m.persistent:
            return False
        wire = m.wire  # (decoded from the publisher's octets: once)
        ttl = wire.ttl or None
        qttl = q.options.message_ttl
        if qttl is not None and (ttl is None or qttl < ttl):
            ttl = qttl
        form, properties = wire.encode()
        self.store.put_message(MessageRecord(
            m.seq, q.vhost, q.name, form, properties, m.body, m.exchange, m.routing_key, ttl))
        return True

    def forget(self, m: QMsg) -> None:
        """``m`` is no longer the broker's to keep (accepted, dropped...)."""
        if self.store is not None and m.stored:  # (no store: no look at the flag)
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
        if self.store is None:
            return 0
        r = self.store.recover()
        for xr in r.exchanges:
            broker.restore_exchange(xr.vhost, xr.name, xr.type, auto_delete=xr.auto_delete,
                                    alternate=xr.alternate, arguments=_unargs(xr.arguments))
        for qr in r.queues:
            broker.restore_queue(qr.vhost, qr.name, auto_delete=qr.auto_delete,
                                 alternate=qr.alternate, arguments=_unargs(qr.arguments))
        for br in r.bindings:
            x = broker.vhost(br.vhost).exchanges.get(br.exchange)
            if x is not None:
                args = tuple(sorted(_unargs(br.arguments).items(), key=lambda kv: kv[0]))
                broker.link_binding(x, Binding(br.queue, br.key, args))
        for tr in r.termini:
            if tr.queue in broker.vhost(tr.vhost).queues:
                self._termini.append(tr)
            else:  # orphaned: its queue is gone
                self.store.delete_terminus(tr.vhost, tr.container, tr.name)
        last = -1
        for mr in r.messages:
            last = max(last, mr.id)
            q = broker.vhost(mr.vhost).queues.get(mr.queue)
            wire = decode_stored(mr.codec, mr.properties) if q is not None else None
            if q is None or wire is None:
                self.store.delete_message(mr.id)  # orphaned: its queue is gone
                continue
            m = QMsg(mr.id, mr.body, wire, mr.routing_key, mr.exchange, redelivered=True)
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

