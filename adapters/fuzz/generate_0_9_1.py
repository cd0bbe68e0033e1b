"""AMQP 0-9-1 cases as pure functions of ``(seed, case number)`` -- client role.

:func:`make_case` picks a *family* and an *operator* from the case's own
random source (:func:`.values.case_rng`, salted ``0-9-1``) and builds a
:class:`.case.Case` with ``protocol="0-9-1"``:

=========  ===================================================================
family     what the operators do
=========  ===================================================================
valid      handshake, channels, then random *legal* method sequences: a small
           model of the case's own queues, exchanges, bindings, consumers and
           channel modes keeps every method legal, values of the other fields
           come from the generated classes' ``FIELDS``; publish / consume /
           get / ack, publisher confirms, transactions, tiny body frames,
           content interleaved across channels
field      one method with one field mutated (the method and field drawn from
           the generated classes): boundary integers, flipped and undefined
           bits, maximal and overlong shortstrs, invalid UTF-8, field tables
           with unknown / spec-only tags, overrunning sizes, deep and large
           nesting, x-arguments of the wrong type, basic properties (flags,
           values), truncated and trailing octets, unknown class/method ids
field /    bad frame-end octet, unknown frame type, frames above frame-max,
frame      declared sizes that lie, content header/body without a method,
           body longer/shorter than the header's body-size, a method inside a
           content, two headers, header class/weight faults, heartbeats on a
           channel or with a payload, frames on channels above channel-max,
           connection methods on channels and channel methods on channel 0
state      methods on unopened channels, channel.open twice, acks / rejects /
           nacks of tags never delivered, tx and confirm misuse, duplicate
           consumer tags, missing and reserved entities, inequivalent
           redeclarations, if-unused / if-empty deletes, server-only methods
           from the client, methods after connection.close or inside a
           channel close, features a server may not implement, qos prefetch
           semantics
handshake  bad / other-version protocol headers, a pipelined or one-octet
           handshake, unoffered mechanisms, bad credentials, start-ok field
           faults, tune-ok above the offer or below frame-min-size, unknown
           virtual hosts, handshake methods out of order
=========  ===================================================================

Every case starts (unless it is about the handshake) with the protocol
header, ``start-ok`` (PLAIN by default, client-properties announcing the
RabbitMQ capabilities), ``tune-ok`` channel-max 8 / frame-max 4096 /
heartbeat 0 -- legal whatever a server offers above those -- and
``connection.open``.  Names carry ``fz<seed>.<case>[.<tag>]``.

Each operator states which reactions a conformant server may have
(:class:`.case.Fault`: ``close`` = connection.close codes, ``channel_close``
= channel.close codes, ``drop``) and RabbitMQ's documented deviations
(:class:`.specinfo_0_9_1.DEV`).
"""

from __future__ import annotations

__all__ = ["GenConfig", "make_case", "FAMILIES", "OPERATORS", "operator_names", "describe",
           "Script"]

import datetime as dt
import decimal
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import FieldSpec, Method, unchecked
from amqp_sansio.v0_9_1.framing import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_METHOD,
    PROTOCOL_HEADER,
)

from . import casegen
from . import wire_0_9_1 as w
from .case import P091, Case, Fault
from .casegen import FAMILIES, valid_fault
from .specinfo_0_9_1 import CLIENT_REQUESTS, DEV, METHOD_CODES
from .values import Names, Rng

_INT_MAX = {"octet": 0xFF, "short": 0xFFFF, "long": 0xFFFFFFFF, "longlong": (1 << 64) - 1,
            "timestamp": (1 << 64) - 1}
DECODE = frozenset({501, 502})  # frame-error, syntax-error: "could not decode"
CONTENT = frozenset({505})  # unexpected-frame
BUILTIN_EXCHANGES = ("amq.direct", "amq.fanout", "amq.topic", "amq.headers")
EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
CAPABILITIES = {"publisher_confirms": True, "exchange_exchange_bindings": True,
                "basic.nack": True, "consumer_cancel_notify": True,
                "connection.blocked": True, "authentication_failure_close": True,
                "per_consumer_qos": True}


@attrs.frozen
class GenConfig(casegen.GenConfig):
    """What the generated 0-9-1 conversations assume about the target: a
    server that wants a login (RabbitMQ's default user)."""

    PROTOCOL = P091

    mechanism: str = "PLAIN"
    username: str | None = "guest"
    password: str | None = "guest"


# ---------------------------------------------------------------------------
# Values from FIELDS


def safe_table(rng: Rng, n: int | None = None, depth: int = 2) -> dict[str, Any]:
    """A field table of values every reading of the tags agrees on (no
    ``x-`` keys: those are arguments the broker interprets)."""
    out: dict[str, Any] = {}
    for i in range(rng.small(4) if n is None else n):
        k = f"fz-{i}-{rng.text(6)}"
        r = rng.small(9)
        if r == 0:
            v: Any = rng.text(20)
        elif r == 1:
            v = rng.edge_int(-(1 << 31), (1 << 31) - 1)
        elif r == 2:
            v = rng.edge_int(-(1 << 63), (1 << 63) - 1)
        elif r == 3:
            v = rng.chance(0.5)
        elif r == 4:
            v = float(rng.between(-1000, 1000)) / 8
        elif r == 5:
            v = decimal.Decimal(rng.between(0, 99999)).scaleb(-rng.small(5))
        elif r == 6:
            v = dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=rng.small(10**8))
        elif r == 7:
            v = None
        elif r == 8 and depth > 0:
            v = safe_table(rng, rng.small(2), depth - 1)
        else:
            v = [rng.small(100), rng.text(4)]
        out[k] = v
    return out


def field_value(f: FieldSpec, rng: Rng, names: Names) -> Any:
    """A legal value for ``f`` (names from the case's pool)."""
    t = f.type
    if t == "bit":
        return rng.chance(0.3)
    if t in _INT_MAX and t != "timestamp":
        return rng.edge_int(0, _INT_MAX[t])
    if t == "timestamp":
        return rng.between(0, 1 << 40)
    if t == "table":
        return safe_table(rng)
    if t == "longstr":
        return rng.bytes(rng.small(40))
    if f.name in ("queue",):
        return rng.pick(names.queues)
    if f.name in ("exchange", "source", "destination"):
        return rng.pick([*names.exchanges, *BUILTIN_EXCHANGES])
    if f.name == "routing-key":
        return rng.pick(names.keys)
    if f.name == "consumer-tag":
        return rng.pick(["", "fz-ctag-0", "fz-ctag-1"])
    if f.name == "type":
        return rng.pick(EXCHANGE_TYPES)
    return rng.text(20)


def build(cls: type[Method], rng: Rng, names: Names, **over: Any) -> Any:
    """An instance of ``cls`` with every field drawn from its ``FIELDS``
    (``over`` wins); built unchecked so that boundary values pass."""
    kw: dict[str, Any] = {}
    for f in cls.FIELDS:
        if f.attr is None:
            continue
        kw[f.attr] = over[f.attr] if f.attr in over else field_value(f, rng, names)
    return unchecked(cls, **kw)


def props(rng: Rng, user: str | None, optional: float = 0.4) -> spec.BasicProperties:
    """Basic properties any broker must take: every field from FIELDS, with
    the values RabbitMQ interprets kept legal (delivery-mode, priority,
    expiration as milliseconds, user-id = the authenticated user)."""
    kw: dict[str, Any] = {}
    for f in spec.BasicProperties.FIELDS:
        if f.attr is None or not rng.chance(optional):
            continue
        if f.attr == "delivery_mode":
            v: Any = rng.pick([1, 2])
        elif f.attr == "priority":
            v = rng.between(0, 9)
        elif f.attr == "expiration":
            v = str(rng.between(60000, 600000))
        elif f.attr == "user_id":
            if user is None:
                continue
            v = user
        elif f.attr == "timestamp":
            v = rng.between(0, 1 << 33)
        elif f.attr == "headers":
            v = safe_table(rng)
        else:
            v = rng.text(30)
        kw[f.attr] = v
    p: spec.BasicProperties = unchecked(spec.BasicProperties, **{
        a.name: kw.get(a.name) for a in attrs.fields(spec.BasicProperties)})
    return p


# ---------------------------------------------------------------------------
# The script


@attrs.define
class _Q:
    durable: bool
    exclusive: bool
    args: dict[str, Any]
    exclusive_consumer: bool = False
    consumers: int = 0


@attrs.define
class _Chan:
    mode: str = ""  # "", "tx", "confirm"
    consumers: dict[str, str] = attrs.field(factory=dict)  # tag -> queue
    next_tag: int = 0


@attrs.define
class World:
    """What a legal conversation has created so far (the valid family)."""

    queues: dict[str, _Q] = attrs.field(factory=dict)
    exchanges: dict[str, tuple[str, bool, bool]] = attrs.field(factory=dict)  # type, dur, int
    bindings: set[tuple[str, str, str]] = attrs.field(factory=set)  # queue, exchange, key
    xbindings: set[tuple[str, str, str]] = attrs.field(factory=set)  # dest, source, key
    chans: dict[int, _Chan] = attrs.field(factory=dict)
    # entity -> channels that used it since their last round trip: methods
    # of different channels are not ordered, so a channel that depends on
    # what another one did first waits for that one's round trip.
    touched: dict[str, set[int]] = attrs.field(factory=dict)


class Script(casegen.Script[GenConfig]):
    """Builds the items of one 0-9-1 case."""

    PROTOCOL = P091
    PROTOCOL_HEADER = PROTOCOL_HEADER
    #: the family's other header (op_handshake_other_header)
    OTHER_HEADER = b"AMQP\x01\x01\x00\x09"
    OTHER_NAME = "0-9"

    def __init__(self, cfg: GenConfig, rng: Rng, names: Names, tag: str) -> None:
        super().__init__(cfg, rng, names, tag)
        self.world = World()

    @property
    def chunk(self) -> int:
        return self.cfg.frame_max - 8

    @property
    def user(self) -> str | None:
        return self.cfg.username if self.cfg.mechanism == "PLAIN" else None

    def method(self, ch: int, m: Method, *, wait: str | None = None, faulty: bool = False,
               label: str | None = None) -> None:
        self.raw(label or f"{m.NAME} ch{ch}", w.method_frame(ch, m), wait, faulty)

    def publish(self, ch: int, exchange: str, key: str, body: bytes,
                p: spec.BasicProperties | None = None, *, mandatory: bool = False,
                sizes: Sequence[int] | None = None, faulty: bool = False,
                label: str | None = None) -> None:
        m = unchecked(spec.BasicPublish, exchange=exchange, routing_key=key,
                      mandatory=mandatory, immediate=False)
        frames = w.content(ch, m, p, body, sizes or self.chunk)
        self.raw(label or f"basic.publish ch{ch} ({len(body)} octets in {len(frames) - 2} "
                 "body frames)", b"".join(frames), faulty=faulty)

    # -- building blocks ----------------------------------------------------
    def client_properties(self) -> dict[str, Any]:
        return {"product": "amqp-sansio-fuzz", "capabilities": dict(CAPABILITIES)}

    def start_ok(self, **over: Any) -> None:
        kw: dict[str, Any] = {"client_properties": self.client_properties(),
                              "mechanism": self.cfg.mechanism, "response": self.cfg.response,
                              "locale": self.cfg.locale}
        kw.update(over)
        self.method(0, unchecked(spec.ConnectionStartOk, **kw), wait="tune")

    def tune_ok(self, **over: Any) -> None:
        kw: dict[str, Any] = {"channel_max": self.cfg.channel_max,
                              "frame_max": self.cfg.frame_max, "heartbeat": 0}
        kw.update(over)
        self.method(0, unchecked(spec.ConnectionTuneOk, **kw))

    def open(self) -> None:
        self.method(0, spec.ConnectionOpen(virtual_host=self.cfg.virtual_host), wait="open-ok")

    def channel_open(self, ch: int = 1) -> None:
        self.method(ch, spec.ChannelOpen(), wait=f"channel.open-ok:{ch}")
        self.world.chans[ch] = _Chan()

    def declare_queue(self, ch: int, q: str, *, wait: bool = False, **kw: Any) -> None:
        m = spec.QueueDeclare(queue=q, **kw)
        self.method(ch, m, wait=f"queue.declare-ok:{ch}" if wait else None)
        self.world.queues.setdefault(q, _Q(m.durable, m.exclusive, dict(m.arguments)))

    def prefix(self, ch: int = 1, *, wait: bool = True) -> str:
        """Handshake, channel ``ch``, the case's first queue declared."""
        self.handshake()
        self.channel_open(ch)
        q = self.names.queues[0]
        self.declare_queue(ch, q, wait=wait)
        return q

    def some_valid(self, ch: int, n: int) -> None:
        for _ in range(n):
            valid_action(self, ch)


# ---------------------------------------------------------------------------
# valid: a model keeps every method legal


def _sync(s: Script, ch: int) -> None:
    """A round trip on ``ch``: everything sent on it before is done."""
    s.method(ch, spec.ChannelFlow(active=True), wait=f"channel.flow-ok:{ch}",
             label=f"channel.flow ch{ch} (round trip)")
    for users in s.world.touched.values():
        users.discard(ch)


def _touch(s: Script, ch: int, *entities: str) -> None:
    """``ch`` is about to use ``entities``: first settle every other
    channel that used them."""
    for e in entities:
        if not e or e.startswith("amq."):
            continue
        for other in sorted(s.world.touched.get(e, set()) - {ch}):
            _sync(s, other)
    for e in entities:
        if e and not e.startswith("amq."):
            s.world.touched.setdefault(e, set()).add(ch)


def _use(s: Script, ch: int, pool: Iterable[str]) -> str:
    """One of ``pool`` (queues, exchanges), for ``ch`` to use (see :func:`_touch`)."""
    x: str = s.rng.pick(pool)
    _touch(s, ch, x)
    return x


#: what binds and unbinds a queue or an exchange: the method, the fields
#: naming (destination, source) -- a binding is (destination, source, key).
_BINDINGS: dict[str, tuple[type[Method], str, str]] = {
    "queue.bind": (spec.QueueBind, "queue", "exchange"),
    "queue.unbind": (spec.QueueUnbind, "queue", "exchange"),
    "exchange.bind": (spec.ExchangeBind, "destination", "source"),
    "exchange.unbind": (spec.ExchangeUnbind, "destination", "source")}


def _fresh_tag(s: Script, ch: int) -> str:
    c = s.world.chans[ch]
    c.next_tag += 1
    return f"fz-c{ch}-{c.next_tag}"


def valid_action(s: Script, ch: int) -> str:
    """Append one legal method (or publish) on ``ch``; return its name."""
    rng, world, names = s.rng, s.world, s.names
    chan = world.chans[ch]
    acts: list[tuple[str, float]] = [("queue.declare", 4), ("exchange.declare", 2),
                                     ("basic.publish", 8), ("basic.qos", 1),
                                     ("channel.flow", 0.5)]
    if world.queues:
        acts += [("queue.bind", 3), ("basic.consume", 3), ("basic.get", 4),
                 ("queue.purge", 1), ("queue.declare-passive", 1), ("queue.delete", 0.5)]
    if world.bindings:
        acts.append(("queue.unbind", 1))
    if world.exchanges:
        acts += [("exchange.bind", 1), ("exchange.delete", 0.3),
                 ("exchange.declare-passive", 0.5)]
    if world.xbindings:
        acts.append(("exchange.unbind", 0.5))
    if chan.consumers:
        acts.append(("basic.cancel", 1.5))
    acts += [("basic.ack", 2), ("basic.nack", 0.5), ("basic.recover", 0.5),
             ("basic.recover-async", 0.2), ("basic.cancel-unknown", 0.2)]
    if chan.mode == "":
        acts += [("tx.select", 0.5), ("confirm.select", 0.7)]
    if chan.mode == "tx":
        acts += [("tx.commit", 2), ("tx.rollback", 1)]
    act = rng.weighted(acts)
    wait_reply = rng.chance(0.25)

    def send(m: Any, reply: str | None = None) -> str:
        nw = m.NO_WAIT
        wait = f"{reply}:{ch}" if reply and wait_reply and not (nw and getattr(m, nw)) \
            else None
        s.method(ch, m, wait=wait)
        return str(m.NAME)

    if act == "queue.declare":  # a new queue, or an equivalent redeclaration
        q = _use(s, ch, names.queues)
        old = world.queues.get(q)
        same: dict[str, Any] = {"exclusive": rng.chance(0.2)} if old is None else {
            "durable": old.durable, "exclusive": old.exclusive, "arguments": old.args}
        m = build(spec.QueueDeclare, rng, names, queue=q, passive=False, auto_delete=False,
                  **same)
        world.queues.setdefault(q, _Q(m.durable, m.exclusive, dict(m.arguments)))
        return send(m, "queue.declare-ok")
    if act == "exchange.declare":
        x = _use(s, ch, names.exchanges)
        old_x = world.exchanges.get(x)
        same = {"internal": rng.chance(0.1)} if old_x is None else dict(
            zip(("type", "durable", "internal"), old_x, strict=True))
        m = build(spec.ExchangeDeclare, rng, names, exchange=x, passive=False,
                  auto_delete=False, arguments={}, **same)
        world.exchanges.setdefault(x, (m.type, m.durable, m.internal))
        return send(m, "exchange.declare-ok")
    if act in ("queue.declare-passive", "exchange.declare-passive"):
        kind = act.partition(".")[0]
        x = _use(s, ch, world.queues if kind == "queue" else world.exchanges)
        cls: type[Method] = spec.QueueDeclare if kind == "queue" else spec.ExchangeDeclare
        return send(build(cls, rng, names, passive=True, **{kind: x}), f"{kind}.declare-ok")
    if act in ("queue.bind", "exchange.bind", "queue.unbind", "exchange.unbind"):
        kind, _, verb = act.partition(".")
        bound = world.bindings if kind == "queue" else world.xbindings
        if verb == "bind":
            b = (rng.pick(world.queues if kind == "queue" else world.exchanges),
                 rng.pick([*world.exchanges, *BUILTIN_EXCHANGES[:3]]), rng.pick(names.keys))
            bound.add(b)
        else:
            b = rng.pick(sorted(bound))
            bound.discard(b)
        _touch(s, ch, b[0], b[1])
        cls, dst, src = _BINDINGS[act]
        return send(build(cls, rng, names, routing_key=b[2], arguments={},
                          **{dst: b[0], src: b[1]}), f"{act}-ok")
    if act == "exchange.delete":
        x = rng.pick(list(world.exchanges))
        _touch(s, ch, x, *(b[0] for b in world.xbindings if b[1] == x),
               *(b[1] for b in world.xbindings if b[0] == x))
        del world.exchanges[x]
        world.bindings = {b for b in world.bindings if b[1] != x}
        world.xbindings = {b for b in world.xbindings if x not in (b[0], b[1])}
        return send(build(spec.ExchangeDelete, rng, names, exchange=x, if_unused=False),
                    "exchange.delete-ok")
    if act == "queue.purge":
        q = _use(s, ch, world.queues)
        return send(build(spec.QueuePurge, rng, names, queue=q), "queue.purge-ok")
    if act == "queue.delete":
        q = _use(s, ch, world.queues)
        del world.queues[q]
        world.bindings = {b for b in world.bindings if b[0] != q}
        for c in world.chans.values():
            c.consumers = {t: qq for t, qq in c.consumers.items() if qq != q}
        return send(build(spec.QueueDelete, rng, names, queue=q, if_unused=False,
                          if_empty=False), "queue.delete-ok")
    if act == "basic.qos":
        return send(build(spec.BasicQos, rng, names, prefetch_size=0,
                          prefetch_count=rng.pick([0, 1, 2, 10, 0xFFFF])), "basic.qos-ok")
    if act == "channel.flow":
        return send(spec.ChannelFlow(active=True), "channel.flow-ok")
    if act == "basic.consume":
        q = rng.pick(list(world.queues))
        qq = world.queues[q]
        if qq.exclusive_consumer:
            return send(spec.ChannelFlow(active=True), "channel.flow-ok")
        _touch(s, ch, q)
        tag = _fresh_tag(s, ch)
        excl = qq.consumers == 0 and rng.chance(0.1)
        m = build(spec.BasicConsume, rng, names, queue=q, consumer_tag=tag, exclusive=excl,
                  arguments={})
        chan.consumers[tag] = q
        qq.consumers += 1
        qq.exclusive_consumer = excl
        return send(m, "basic.consume-ok")
    if act == "basic.cancel":
        tag = rng.pick(sorted(chan.consumers))
        q = chan.consumers.pop(tag)
        if q in world.queues:
            world.queues[q].consumers -= 1
            world.queues[q].exclusive_consumer = False
        return send(build(spec.BasicCancel, rng, names, consumer_tag=tag), "basic.cancel-ok")
    if act == "basic.cancel-unknown":  # the spec: an unknown tag is ignored
        return send(build(spec.BasicCancel, rng, names, consumer_tag=f"fz-never-{ch}"),
                    "basic.cancel-ok")
    if act == "basic.publish":
        r = rng.small(9)
        if r < 5 and world.queues:
            x, key = "", rng.pick(list(world.queues))
        else:
            x = rng.pick([*(k for k, v in world.exchanges.items() if not v[2]),
                          *BUILTIN_EXCHANGES, ""])
            key = rng.pick([*names.keys, *world.queues])
        _touch(s, ch, x)
        size = rng.weighted([(0, 2), (rng.small(100), 6), (rng.between(3000, 9000), 2),
                             (rng.between(20000, 70000), 1)])
        sizes = None if rng.chance(0.7) else [rng.between(1, s.chunk)]
        s.publish(ch, x, key, rng.bytes(size), props(rng, s.user) if rng.chance(0.7) else None,
                  mandatory=rng.chance(0.1), sizes=sizes)
        return "basic.publish"
    if act == "basic.get":
        q = _use(s, ch, world.queues)
        m = build(spec.BasicGet, rng, names, queue=q)
        s.method(ch, m, wait=f"basic.get-ok|basic.get-empty:{ch}" if wait_reply else None)
        return "basic.get"
    if act == "basic.ack":  # tag 0 + multiple: everything outstanding (spec)
        return send(spec.BasicAck(delivery_tag=0, multiple=True))
    if act == "basic.nack":
        return send(spec.BasicNack(delivery_tag=0, multiple=True, requeue=rng.chance(0.5)))
    if act == "basic.recover":
        return send(spec.BasicRecover(requeue=True), "basic.recover-ok")
    if act == "basic.recover-async":
        return send(spec.BasicRecoverAsync(requeue=True))
    if act == "tx.select":
        chan.mode = "tx"
        return send(spec.TxSelect(), "tx.select-ok")
    if act in ("tx.commit", "tx.rollback"):
        # Waited for: RabbitMQ refuses pipelining behind a commit (see the
        # tx-pipelined operator).
        m = spec.TxCommit() if act == "tx.commit" else spec.TxRollback()
        s.method(ch, m, wait=f"{act}-ok:{ch}")
        return str(act)
    if act == "confirm.select":
        chan.mode = "confirm"
        return send(build(spec.ConfirmSelect, rng, names), "confirm.select-ok")
    raise AssertionError(act)  # pragma: no cover


def op_valid_random(s: Script) -> Fault:
    s.handshake()
    chans = [1] if s.rng.chance(0.6) else [1, 2] if s.rng.chance(0.7) else [1, 2, 3]
    for ch in chans:
        s.channel_open(ch)
    target = "channel.open"
    for _ in range(s.rng.between(1, 14)):
        ch = s.rng.pick(chans)
        target = valid_action(s, ch)
        if s.rng.chance(0.04):  # close and reopen the channel: the model forgets it
            s.method(ch, spec.ChannelClose(reply_code=200, reply_text="fz"),
                     wait=f"channel.close-ok:{ch}")
            for c in list(s.world.chans[ch].consumers.values()):
                if c in s.world.queues:
                    s.world.queues[c].consumers -= 1
                    s.world.queues[c].exclusive_consumer = False
            s.channel_open(ch)
    return valid_fault(target, "random legal method sequence")


def op_valid_pubsub(s: Script) -> Fault:
    q = s.prefix()
    n = s.rng.between(1, 6)
    no_ack = s.rng.chance(0.3)
    if s.rng.chance(0.5):
        s.method(1, spec.BasicQos(prefetch_count=s.rng.pick([1, 2, 100])))
    tag = _fresh_tag(s, 1)
    s.method(1, spec.BasicConsume(queue=q, consumer_tag=tag, no_ack=no_ack),
             wait="basic.consume-ok:1")
    for _ in range(n):
        s.publish(1, "", q, s.rng.bytes(s.rng.pick([0, 10, 5000, 9000])),
                  props(s.rng, s.user))
    s.raw("(wait for a delivery)", b"", wait="basic.deliver>=1:1")
    if not no_ack:
        s.method(1, spec.BasicAck(delivery_tag=0, multiple=True))
    if s.rng.chance(0.5):
        s.method(1, spec.BasicCancel(consumer_tag=tag), wait="basic.cancel-ok:1")
    return valid_fault("basic.consume", f"consume (no-ack {no_ack}), {n} publishes")


def op_valid_get(s: Script) -> Fault:
    q = s.prefix()
    for _ in range(s.rng.between(0, 3)):
        s.publish(1, "", q, s.rng.bytes(s.rng.small(9000)), props(s.rng, s.user))
    for _ in range(s.rng.between(1, 4)):
        s.method(1, spec.BasicGet(queue=q, no_ack=s.rng.chance(0.3)),
                 wait="basic.get-ok|basic.get-empty:1")
    end = s.rng.pick([spec.BasicAck(delivery_tag=0, multiple=True),
                      spec.BasicNack(delivery_tag=0, multiple=True, requeue=True),
                      spec.BasicRecover(requeue=True)])
    s.method(1, end)
    return valid_fault("basic.get", f"publish, get, {end.NAME}")


def op_valid_confirms(s: Script) -> Fault:
    q = s.prefix()
    nowait = s.rng.chance(0.3)
    s.method(1, spec.ConfirmSelect(nowait=nowait),
             wait=None if nowait else "confirm.select-ok:1")
    s.world.chans[1].mode = "confirm"
    n = s.rng.between(1, 8)
    for _ in range(n):
        unroutable = s.rng.chance(0.2)
        s.publish(1, "amq.direct" if unroutable else "", "fz-nowhere" if unroutable else q,
                  s.rng.bytes(s.rng.small(200)), props(s.rng, s.user),
                  mandatory=unroutable and s.rng.chance(0.5))
    return valid_fault("confirm.select", f"{n} publishes in confirm mode (nowait {nowait})")


def op_valid_tx(s: Script) -> Fault:
    q = s.prefix()
    s.method(1, spec.TxSelect(), wait="tx.select-ok:1")
    for _ in range(s.rng.between(0, 3)):
        s.publish(1, "", q, s.rng.bytes(s.rng.small(100)), props(s.rng, s.user))
    if s.rng.chance(0.5):
        s.method(1, spec.BasicGet(queue=q), wait="basic.get-ok|basic.get-empty:1")
        s.method(1, spec.BasicAck(delivery_tag=0, multiple=True))
    end = s.rng.pick([spec.TxCommit(), spec.TxRollback()])
    s.method(1, end, wait=f"{end.NAME}-ok:1")
    return valid_fault(end.NAME, "transaction")


def op_valid_tiny_frames(s: Script) -> Fault:
    """Bodies in 1..40-octet frames, content of two channels interleaved
    frame by frame (legal: only frames of *one* channel must not mix)."""
    q = s.prefix()
    s.channel_open(2)
    sizes = [s.rng.between(1, 40) for _ in range(s.rng.between(1, 3))]
    per = []
    for ch in (1, 2):
        m = spec.BasicPublish(exchange="", routing_key=q)
        per.append(w.content(ch, m, props(s.rng, s.user), s.rng.bytes(s.rng.between(1, 600)),
                             sizes))
    mixed: list[bytes] = []
    a, b = per
    while a or b:
        if a:
            mixed.append(a.pop(0))
        if b and s.rng.chance(0.7) or not a and b:
            mixed.append(b.pop(0))
        if s.rng.chance(0.05):
            mixed.append(w.heartbeat())
    s.raw(f"two publishes on ch1 and ch2, body frames of {sizes} octets, interleaved",
          b"".join(mixed))
    s.method(1, spec.BasicGet(queue=q, no_ack=True), wait="basic.get-ok|basic.get-empty:1")
    return valid_fault("basic.publish", f"interleaved content, body frames of {sizes}")


# ---------------------------------------------------------------------------
# field


def _pick_field(s: Script, want: Callable[[type[Method], FieldSpec], bool]
                ) -> tuple[type[Method], FieldSpec] | None:
    cands = [(c, f) for c in CLIENT_REQUESTS for f in c.FIELDS
             if f.attr is not None and want(c, f)]
    if not cands:
        return None
    found: tuple[type[Method], FieldSpec] = s.rng.pick(cands)
    return found


def _instance(s: Script, cls: type[Method], q: str) -> dict[str, Any]:
    """Fields for a method that is legal in the field prefix's state, so
    that the mutation is the only thing wrong with it."""
    over: dict[str, Any] = {}
    names = {f.attr for f in cls.FIELDS}
    if "queue" in names:
        over["queue"] = q
    if "exchange" in names:
        over["exchange"] = "" if cls is spec.BasicPublish else s.names.exchanges[0]
    for a in ("source", "destination"):
        if a in names:
            over[a] = "amq.direct"
    if "passive" in names:
        over["passive"] = False
    if "no_wait" in names:
        over["no_wait"] = False
    if "nowait" in names:
        over["nowait"] = False
    if "consumer_tag" in names:
        over["consumer_tag"] = "fz-mut"
    if "delivery_tag" in names:
        over["delivery_tag"] = 0
        over["multiple"] = True
    if cls is spec.BasicQos:
        over["prefetch_size"] = 0
    if cls is spec.ChannelFlow:
        over["active"] = True
    if cls is spec.ExchangeDeclare:
        over.update(type="direct", durable=False, internal=False, auto_delete=False)
    if cls is spec.QueueDeclare:
        over.update(durable=False, exclusive=False, auto_delete=False)
    if cls is spec.BasicPublish:
        over.update(immediate=False, routing_key=q)
    if cls is spec.BasicConsume:
        over["exclusive"] = False
    if cls in (spec.BasicRecover, spec.BasicRecoverAsync):
        over["requeue"] = True
    if cls in (spec.QueueDelete, spec.ExchangeDelete):
        over.update(if_unused=False)
        if cls is spec.QueueDelete:
            over["if_empty"] = False
    if cls is spec.ChannelClose:
        over.update(reply_code=200, class_id=0, method_id=0)
    for a in ("arguments",):
        if a in names:
            over[a] = {}
    o = build(cls, s.rng, s.names, **over)
    return {f.attr: getattr(o, f.attr) for f in cls.FIELDS if f.attr is not None}


def _payload(cls: type[Method], kw: dict[str, Any]) -> bytes:
    return w.method_payload(unchecked(cls, **kw))


def _field_prefix(s: Script) -> str:
    q = s.prefix()
    if s.rng.chance(0.3):
        s.some_valid(1, s.rng.between(1, 2))
    return q


def _emit_method(s: Script, cls: type[Method], payload: bytes, label: str) -> None:
    """The mutated method, with content if it carries one."""
    if cls.CONTENT:
        body = s.rng.bytes(s.rng.small(50))
        data = (w.frame(FRAME_METHOD, 1, payload) + w.frame(FRAME_HEADER, 1, w.header_payload(
            cls.CLASS_ID, len(body))) + (w.frame(FRAME_BODY, 1, body) if body else b""))
    else:
        data = w.frame(FRAME_METHOD, 1, payload)
    s.raw(label, data, faulty=True)


def _after(s: Script) -> None:
    """A few legal methods after the fault: a conformant peer that accepted
    it goes on; one that closed the channel closes the connection (504)."""
    if s.rng.chance(0.5):
        s.some_valid(1, s.rng.between(1, 2))


def _method_fault(kind: str, target: str, detail: str, *, accept: bool,
                  close: frozenset[int] | set[int] = DECODE,
                  channel_close: frozenset[int] | set[int] = frozenset(),
                  deviations: Sequence[tuple[str, str]] = ()) -> Fault:
    return Fault(kind=kind, target=target, detail=detail, accept=accept, close=close,
                 channel_close=channel_close | METHOD_CODES.get(target, frozenset()),
                 deviations=deviations)


def _field_case(s: Script, kind: str, want: Callable[[type[Method], FieldSpec], bool],
                mutate: Callable[[type[Method], FieldSpec, dict[str, Any]],
                                 tuple[bytes, str] | None], *, accept: bool,
                close: frozenset[int] | set[int] = DECODE,
                channel_close: frozenset[int] | set[int] = frozenset(),
                deviations: Sequence[tuple[str, str]] = ()) -> Fault | None:
    pick = _pick_field(s, want)
    if pick is None:
        return None
    cls, f = pick
    q = s.names.queues[0]
    kw = _instance(s, cls, q)
    got = mutate(cls, f, kw)
    if got is None:
        return None
    payload, detail = got
    _field_prefix(s)
    _emit_method(s, cls, payload, f"{cls.NAME} ch1 [{kind}: {detail}]")
    _after(s)
    return _method_fault(f"field:{kind}", cls.NAME, detail, accept=accept, close=close,
                         channel_close=channel_close, deviations=deviations)


def _is_int(c: type[Method], f: FieldSpec) -> bool:
    return f.type in ("octet", "short", "long", "longlong")


def op_field_int_boundary(s: Script) -> Fault | None:
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        hi = _INT_MAX[f.type]
        v = s.rng.pick([0, 1, hi, hi - 1, (hi + 1) // 2])
        kw[str(f.attr)] = v
        return _payload(cls, kw), f"{f.name} = {v}"
    # Any value of the type is legal octets; what the method means with it
    # may be refused with the method's codes (e.g. an unknown delivery tag).
    return _field_case(s, "int-boundary", _is_int, mutate, accept=True, close=frozenset())


def op_field_bits(s: Script) -> Fault | None:
    """Every bit of a method drawn at random (passive on a missing entity,
    no-wait, exclusive ...): legal octets with any meaning."""
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        flips = {}
        for g in cls.FIELDS:
            if g.type == "bit" and g.attr is not None:
                kw[g.attr] = flips[g.name] = s.rng.chance(0.5)
        return _payload(cls, kw), ", ".join(f"{k}={int(v)}" for k, v in flips.items())
    return _field_case(s, "bits", lambda c, f: f.type == "bit" and c is not spec.BasicPublish,
                       mutate, accept=True, close={540, 530},
                       channel_close={403, 404, 405, 406})


def op_field_undefined_bits(s: Script) -> Fault | None:
    """Bits of a packed octet that name no field set to 1."""
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str] | None:
        bits = [g for g in cls.FIELDS if g.type == "bit"]
        if len(bits) >= 8:
            return None
        for g in bits:
            if g.attr is not None:
                kw[g.attr] = False
        payload = _payload(cls, kw)
        # The bit octet: locate it by encoding with the first bit set.
        kw2 = dict(kw)
        first = next(g for g in bits if g.attr is not None)
        kw2[str(first.attr)] = True
        other = _payload(cls, kw2)
        at = next(i for i, (a, b) in enumerate(zip(payload, other, strict=True)) if a != b)
        extra = (0xFF << len(bits)) & 0xFF
        return (payload[:at] + bytes([payload[at] | extra]) + payload[at + 1:],
                f"bit octet |= 0x{extra:02x} ({len(bits)} bits defined)")
    return _field_case(s, "undefined-bits", lambda c, f: f.type == "bit", mutate, accept=True)


def op_field_max_shortstr(s: Script) -> Fault | None:
    """A 255-octet shortstr: legal octets, though names have a 127 limit."""
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        v = s.rng.pick(["a" * 255, "é" * 127 + "a", "€" * 85, "a" * 128])
        kw[str(f.attr)] = v
        return _payload(cls, kw), f"{f.name}: {len(v.encode())}-octet shortstr"
    return _field_case(s, "max-shortstr", lambda c, f: f.type == "shortstr", mutate,
                       accept=True, close={502, 530}, channel_close={403, 404, 406})


def _marker(s: Script, n: int = 10) -> str:
    return "\x1bFZ" + "".join(s.rng.pick("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(n - 3))


def op_field_overlong_shortstr(s: Script) -> Fault | None:
    """A shortstr whose length octet claims more than the frame holds."""
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str] | None:
        m = _marker(s)
        kw[str(f.attr)] = m
        payload = _payload(cls, kw)
        at = w.find_marker(payload, m.encode())
        rest = len(payload) - at
        claim = s.rng.between(rest + 1, 255) if rest < 255 else None
        if claim is None:
            return None
        return (payload[:at - 1] + bytes([claim]) + payload[at:],
                f"{f.name}: length {claim} but {rest} octets follow")
    return _field_case(s, "overlong-shortstr", lambda c, f: f.type == "shortstr", mutate,
                       accept=False)


def op_field_invalid_utf8(s: Script) -> Fault | None:
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        m = _marker(s)
        kw[str(f.attr)] = m
        payload = _payload(cls, kw)
        at = w.find_marker(payload, m.encode())
        bad = s.rng.pick([b"\xff" * len(m), b"\xc0\xaf" * (len(m) // 2), b"ab\xed\xa0\x80cdefg",
                          b"\xe2\x82" + b"x" * (len(m) - 2)])[:len(m)].ljust(len(m), b"x")
        return payload[:at] + bad + payload[at + len(m):], f"{f.name}: invalid UTF-8 {bad!r}"
    return _field_case(s, "invalid-utf8", lambda c, f: f.type == "shortstr", mutate,
                       accept=True, channel_close={403, 404, 406})


_TABLE_METHODS = (spec.QueueDeclare, spec.ExchangeDeclare, spec.QueueBind, spec.QueueUnbind,
                  spec.BasicConsume, spec.ExchangeBind, spec.ExchangeUnbind)


def _with_table(s: Script, cls: type[Method], f: FieldSpec, kw: dict[str, Any],
                table: bytes) -> bytes:
    """``cls``'s payload with the table field ``f`` replaced by raw octets."""
    m = _marker(s)
    kw[str(f.attr)] = {m: None}
    payload = _payload(cls, kw)
    at = w.find_marker(payload, m.encode())
    start, end = at - 1 - 4, at + len(m) + 1  # size, name length ... the 'V' tag
    return payload[:start] + table + payload[end:]


def _is_table(c: type[Method], f: FieldSpec) -> bool:
    return f.type == "table"


_BAD_TAGS = (b"Z", b"c", b"C", b"k", b"\x00", b"\xff", b"N", b"?")


def op_field_bad_table_tag(s: Script) -> Fault | None:
    """A field-table value with a tag no reading of 0-9-1 defines: its size
    is unknown, nothing after it can be read."""
    tag = s.rng.pick(_BAD_TAGS)

    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        entries = w.table_entry(b"fz-ok", b"I", b"\0\0\0\1") + w.table_entry(
            b"fz-bad", tag, s.rng.bytes(s.rng.small(8)))
        return _with_table(s, cls, f, kw, w.raw_table(entries)), f"{f.name}: tag {tag!r}"
    return _field_case(s, "bad-table-tag", _is_table, mutate, accept=False)


def op_field_spec_only_tag(s: Script) -> Fault | None:
    """A value with a tag only the 0-9-1 spec reads ('U' int16): legal per
    the spec, refused by RabbitMQ (documented)."""
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        entries = w.table_entry(b"fz-short", b"U", s.rng.bytes(2))
        return _with_table(s, cls, f, kw, w.raw_table(entries)), f"{f.name}: tag 'U' (int16)"
    return _field_case(s, "spec-only-tag", _is_table, mutate, accept=True,
                       deviations=[DEV.U_TAG])


def op_field_table_size(s: Script) -> Fault | None:
    """A table whose declared size overruns the frame, or cuts an entry."""
    how = s.rng.pick(["overrun", "short"])

    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        entries = w.table_entry(b"fz-a", b"S", b"\0\0\0\3abc") + w.table_entry(
            b"fz-b", b"I", b"\0\0\0\7")
        size = len(entries) + s.rng.between(1, 1 << 20) if how == "overrun" else \
            s.rng.between(1, len(entries) - 1)
        return (_with_table(s, cls, f, kw, w.raw_table(entries, size)),
                f"{f.name}: table size {size} for {len(entries)} octets of entries")
    return _field_case(s, f"table-size-{how}", _is_table, mutate, accept=False)


def op_field_table_nesting(s: Script) -> Fault | None:
    """Deep or large tables, every entry legal."""
    how = s.rng.pick(["deep", "large", "names"])
    n = s.rng.pick([33, 100, 1000]) if how == "deep" else s.rng.pick([200, 2000])

    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        if how == "deep":
            t, d = w.deep_table(n), f"tables nested {n} deep"
        elif how == "large":
            t, d = w.large_table(n), f"{n} entries"
        else:
            entries = (w.table_entry(b"", b"I", b"\0\0\0\1") + w.table_entry(b"9" * 200, b"t",
                       b"\1") + w.table_entry("é".encode(), b"V", b""))
            t, d = w.raw_table(entries), "field names empty, 200 octets, starting with a digit"
        return _with_table(s, cls, f, kw, t), f"{f.name}: {d}"
    return _field_case(s, f"table-{how}", lambda c, f: _is_table(c, f) and (
        how != "large" or c.NAME.endswith(("consume", "bind"))), mutate, accept=True,
        close=DECODE | {506}, channel_close={406})


def op_field_table_types(s: Script) -> Fault | None:
    """One value of every tag RabbitMQ and the spec read alike (and 'x',
    'b', 'B', 'u', 'i', 'f', 'L'), in an arguments table."""
    def mutate(cls: type[Method], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        e = b"".join([
            w.table_entry(b"t", b"t", b"\1"), w.table_entry(b"b", b"b", b"\x80"),
            w.table_entry(b"B", b"B", b"\xff"), w.table_entry(b"u", b"u", b"\xff\xff"),
            w.table_entry(b"I", b"I", b"\x80\0\0\0"), w.table_entry(b"i", b"i", b"\xff" * 4),
            w.table_entry(b"L", b"L", b"\x80" + b"\0" * 7), w.table_entry(b"l", b"l", b"\1" * 8),
            w.table_entry(b"f", b"f", b"\x3f\x80\0\0"), w.table_entry(b"d", b"d", b"\0" * 8),
            w.table_entry(b"D", b"D", b"\2\0\0\x01\x00"), w.table_entry(b"S", b"S", b"\0\0\0\0"),
            w.table_entry(b"A", b"A", b"\0\0\0\5I\0\0\0\1"), w.table_entry(b"T", b"T", b"\0" * 8),
            w.table_entry(b"F", b"F", b"\0\0\0\0"), w.table_entry(b"V", b"V", b""),
            w.table_entry(b"x", b"x", b"\0\0\0\2\xff\0")])
        return _with_table(s, cls, f, kw, w.raw_table(e)), f"{f.name}: one value of each tag"
    return _field_case(s, "table-types", lambda c, f: _is_table(c, f) and c.NAME.endswith(
        ("consume", "bind", "unbind")), mutate, accept=True, close=DECODE)


def op_field_x_args(s: Script) -> Fault:
    """Broker-interpreted queue arguments with wrong types or values: the
    declare may be refused (406), never the connection."""
    q = s.names.queues[1]
    s.handshake()
    s.channel_open(1)
    key, val = s.rng.pick([("x-message-ttl", "abc"), ("x-max-length", -1),
                           ("x-expires", 0), ("x-max-priority", 1000),
                           ("x-queue-type", "fz-nonsense"), ("x-overflow", 7),
                           ("x-dead-letter-exchange", 5), ("x-message-ttl", 1 << 40)])
    s.method(1, spec.QueueDeclare(queue=q, arguments={key: val}), faulty=True,
             label=f"queue.declare ch1 [{key} = {val!r}]")
    _after_declare(s, q)
    return Fault(kind="field:x-arguments", target="queue.declare", detail=f"{key} = {val!r}",
                 accept=True, channel_close=METHOD_CODES["queue.declare"])


def _after_declare(s: Script, q: str) -> None:
    s.method(1, spec.QueueDeclare(queue=q, passive=True),
             wait="queue.declare-ok:1")


def op_field_properties(s: Script) -> Fault:
    """basic.publish with mutated content properties: undefined flag bits,
    the continuation bit, property values at their limits, bad header
    tables."""
    q = s.prefix()
    how = s.rng.pick(["undefined-flag", "continuation", "values", "bad-header-tag",
                      "expiration", "user-id"])
    body = s.rng.bytes(s.rng.small(100))
    accept, close, chan = True, DECODE, frozenset(METHOD_CODES["basic.publish"])
    devs: tuple[tuple[str, str], ...] = ()
    m = spec.BasicPublish(exchange="", routing_key=q)
    if how == "undefined-flag":
        raw = (0x0002 | (0x8000 if s.rng.chance(0.5) else 0)).to_bytes(2, "big") + (
            b"\x04text" if s.rng.chance(0.5) else b"")
        # No rule says what to do with a flag naming no property: ignoring
        # it (RabbitMQ) or refusing the frame (our core) are both conformant.
        detail = f"property flags 0x{int.from_bytes(raw[:2], 'big'):04x}: bit 1 names a " \
            "15th property basic does not have"
    elif how == "continuation":
        raw = b"\x80\x01\x00\x00\x04text"
        detail, accept, devs = ("property flags 0x8001: continuation bit, then an empty "
                                "second flags word", True, (DEV.PROPERTIES_541,))
    elif how == "values":
        p = unchecked(spec.BasicProperties, **{
            a.name: None for a in attrs.fields(spec.BasicProperties)} | {
            "delivery_mode": s.rng.pick([0, 3, 255]), "priority": s.rng.pick([10, 255]),
            "timestamp": (1 << 64) - 1, "content_type": "x" * 255})
        raw = w.props_payload(p)
        detail = "delivery-mode/priority outside the domain, timestamp 2**64-1"
    elif how == "bad-header-tag":
        tag = s.rng.pick(_BAD_TAGS)
        t = w.raw_table(w.table_entry(b"fz", tag, b"\1\2\3"))
        raw = b"\x20\x00" + t
        detail, accept = f"headers table with tag {tag!r}", False
    elif how == "expiration":
        exp = s.rng.pick(["abc", "-1", "", "1e3", "99999999999999999999"])
        p = unchecked(spec.BasicProperties, **{
            a.name: None for a in attrs.fields(spec.BasicProperties)} | {"expiration": exp})
        raw = w.props_payload(p)
        detail = f"expiration {exp!r} (RabbitMQ reads it as milliseconds)"
    else:
        p = unchecked(spec.BasicProperties, **{
            a.name: None for a in attrs.fields(spec.BasicProperties)} | {"user_id": "fz-nobody"})
        raw = w.props_payload(p)
        detail = "user-id other than the authenticated user"
    data = (w.method_frame(1, m) + w.frame(FRAME_HEADER, 1, w.header_payload(
        60, len(body), raw)) + (w.frame(FRAME_BODY, 1, body) if body else b""))
    if how in ("undefined-flag", "bad-header-tag"):
        devs = (DEV.PROPERTIES_541,)
    s.raw(f"basic.publish ch1 [properties: {how}]", data, faulty=True)
    _after(s)
    return Fault(kind=f"field:properties-{how}", target="basic.publish", detail=detail,
                 accept=accept, close=close, channel_close=chan, deviations=devs)


def _raw_case(s: Script, kind: str, how: Callable[[bytes], tuple[bytes, str] | None], *,
              accept: bool) -> Fault | None:
    cls: type[Method] = s.rng.pick([c for c in CLIENT_REQUESTS if c.FIELDS])
    kw = _instance(s, cls, s.names.queues[0])
    got = how(_payload(cls, kw))
    if got is None:
        return None
    payload, detail = got
    _field_prefix(s)
    _emit_method(s, cls, payload, f"{cls.NAME} ch1 [{kind}: {detail}]")
    _after(s)
    return _method_fault(f"field:{kind}", cls.NAME, detail, accept=accept)


def op_field_truncated(s: Script) -> Fault | None:
    def how(p: bytes) -> tuple[bytes, str] | None:
        if len(p) <= 4:
            return None
        cut = s.rng.between(4, len(p) - 1)
        return p[:cut], f"arguments cut to {cut - 4} of {len(p) - 4} octets"
    return _raw_case(s, "truncated", how, accept=False)


def op_field_trailing(s: Script) -> Fault | None:
    def how(p: bytes) -> tuple[bytes, str]:
        extra = s.rng.bytes(s.rng.between(1, 8))
        return p + extra, f"{len(extra)} octets after the last argument"
    # Not ruled out by the text; RabbitMQ refuses with 501 (notes A.2.3).
    return _raw_case(s, "trailing-octets", how, accept=True)


def op_field_unknown_method(s: Script) -> Fault:
    _field_prefix(s)
    cid, mid = s.rng.pick([(60, 99), (77, 10), (50, 60), (20, 99), (85, 20), (90, 99),
                           (0, 0), (0xFFFF, 0xFFFF), (40, 41)])
    payload = (cid << 16 | mid).to_bytes(4, "big") + s.rng.bytes(s.rng.small(6))
    ch = s.rng.pick([1, 1, 0]) if cid != 10 else 0
    s.raw(f"method ({cid}, {mid}) on ch{ch} [unknown class/method]",
          w.frame(FRAME_METHOD, ch, payload), faulty=True)
    _after(s)
    return Fault(kind="field:unknown-method", target="method",
                 detail=f"class {cid} method {mid} on channel {ch}", accept=False,
                 close={540, 503, 505}, deviations=[DEV.UNKNOWN_METHOD])


def op_field_short_method(s: Script) -> Fault:
    _field_prefix(s)
    n = s.rng.between(0, 3)
    s.raw(f"method frame of {n} octets ch1", w.frame(FRAME_METHOD, 1, b"\0\x32"[:n]),
          faulty=True)
    return Fault(kind="field:short-method", target="method",
                 detail=f"a method frame of {n} payload octets", accept=False, close=DECODE)


# ---------------------------------------------------------------------------
# frame


def _frame_prefix(s: Script) -> str:
    return s.prefix()


def _victim(s: Script, q: str) -> tuple[list[bytes], str]:
    """Frames to mangle: a publish (method, header, bodies) or a method."""
    if s.rng.chance(0.6):
        m = spec.BasicPublish(exchange="", routing_key=q)
        body = s.rng.bytes(s.rng.pick([1, 50, 3000, 6000]))
        return w.content(1, m, props(s.rng, s.user), body, s.chunk), "basic.publish"
    m2: Any = s.rng.pick([spec.QueueDeclare(queue=q, passive=True), spec.BasicQos(),
                          spec.ChannelFlow(active=True), spec.QueuePurge(queue=q)])
    return [w.method_frame(1, m2)], str(m2.NAME)


def _framing(kind: str, target: str, detail: str, *, accept: bool = False,
             close: frozenset[int] | set[int] = frozenset({501}),
             deviations: Sequence[tuple[str, str]] = (), drop: bool = False) -> Fault:
    return Fault(kind=kind, target=target, detail=detail, accept=accept, close=close,
                 deviations=deviations, drop=drop)


def op_frame_bad_end(s: Script) -> Fault:
    q = _frame_prefix(s)
    frames, target = _victim(s, q)
    k = s.rng.small(len(frames) - 1)
    end = s.rng.pick([0x00, 0xCD, 0xCF, 0xFF, 0x01])
    f = frames[k]
    frames[k] = f[:-1] + bytes([end])
    s.raw(f"{target} ch1, frame {k} ends with 0x{end:02x}", b"".join(frames), faulty=True)
    s.some_valid(1, 1)
    return _framing("frame:bad-frame-end", target, f"frame-end octet 0x{end:02x}")


def op_frame_unknown_type(s: Script) -> Fault:
    _frame_prefix(s)
    t = s.rng.pick([0, 4, 5, 6, 7, 9, 0x41, 0xFF])
    ch = s.rng.pick([0, 1])
    s.raw(f"frame of type {t} ch{ch}", w.frame(t, ch, s.rng.bytes(s.rng.small(20))),
          faulty=True)
    s.some_valid(1, 1)
    return _framing("frame:unknown-type", "frame", f"frame type {t} on channel {ch}")


def op_frame_oversized(s: Script) -> Fault:
    q = _frame_prefix(s)
    excess = s.rng.pick([1, 2, 8, 9, 100, 70000])
    size = s.cfg.frame_max - 8 + excess
    m = spec.BasicPublish(exchange="", routing_key=q)
    frames = w.content(1, m, None, s.rng.bytes(size), size)
    s.raw(f"basic.publish ch1 body in one frame of {size + 8} octets", b"".join(frames),
          faulty=True)
    s.method(1, spec.QueueDeclare(queue=q, passive=True), wait="queue.declare-ok:1")
    return _framing("frame:oversized", "basic.publish",
                    f"a {size + 8}-octet frame after frame-max {s.cfg.frame_max}",
                    deviations=[DEV.FRAME_FUDGE] if excess <= 8 else ())


def op_frame_size_lies(s: Script) -> Fault:
    """The size field disagrees with the payload: the frame-end octet is
    then not where the size says."""
    q = _frame_prefix(s)
    frames, target = _victim(s, q)
    k = s.rng.small(len(frames) - 1)
    f = frames[k]
    n = int.from_bytes(f[3:7], "big")
    delta = s.rng.pick([-1, 1, 3, -3]) if n > 3 else s.rng.pick([1, 3])
    frames[k] = f[:3] + (n + delta).to_bytes(4, "big") + f[7:]
    s.raw(f"{target} ch1, frame {k} declares {n + delta} payload octets for {n}",
          b"".join(frames) + b"\xce" * 8, faulty=True)
    # Most often the frame-end octet is then wrong (501); when the octet
    # there happens to be 0xCE the stream is read out of step, and what the
    # peer finds next decides the code.
    return _framing("frame:size-lies", target, f"size {n + delta} for a {n}-octet payload",
                    close=DECODE | {503, 505, 540}, deviations=[DEV.UNKNOWN_METHOD])


def op_frame_wrong_type(s: Script) -> Fault:
    """A method payload sent as a header or body frame (or a header payload
    as a method frame)."""
    q = _frame_prefix(s)
    how = s.rng.pick(["method-as-header", "method-as-body", "header-as-method"])
    m = spec.QueueDeclare(queue=q, passive=True)
    if how == "header-as-method":
        data = w.frame(FRAME_METHOD, 1, w.header_payload(60, 0))
        close, target = DECODE | {540, 503}, "method"
        devs: tuple[tuple[str, str], ...] = (DEV.UNKNOWN_METHOD,)
    else:
        t = FRAME_HEADER if how == "method-as-header" else FRAME_BODY
        data = w.frame(t, 1, w.method_payload(m))
        close, target, devs = CONTENT | {503}, "queue.declare", ()
    s.raw(f"[{how}] ch1", data, faulty=True)
    s.some_valid(1, 1)
    return _framing("frame:wrong-type", target, how, close=close, deviations=devs)


def op_frame_orphan_content(s: Script) -> Fault:
    """A content header or body frame with no content method before it."""
    _frame_prefix(s)
    what = s.rng.pick(["header", "body", "header+body"])
    body = s.rng.bytes(s.rng.between(1, 100))
    hdr = w.frame(FRAME_HEADER, 1, w.header_payload(60, len(body)))
    bod = w.frame(FRAME_BODY, 1, body)
    data = {"header": hdr, "body": bod, "header+body": hdr + bod}[what]
    s.raw(f"content {what} ch1 without basic.publish", data, faulty=True)
    s.some_valid(1, 1)
    return _framing("frame:orphan-content", "content", f"{what} without a content method",
                    close=CONTENT | {503})


def op_frame_body_overrun(s: Script) -> Fault:
    """Body frames longer than the header's body-size."""
    q = _frame_prefix(s)
    n = s.rng.between(1, 200)
    extra = s.rng.between(1, 50)
    m = spec.BasicPublish(exchange="", routing_key=q)
    frames = w.content(1, m, None, s.rng.bytes(n + extra), s.chunk, body_size=n)
    s.raw(f"basic.publish ch1 body-size {n}, {n + extra} body octets", b"".join(frames),
          faulty=True)
    s.some_valid(1, 1)
    return _framing("frame:body-overrun", "basic.publish",
                    f"body frames of {n + extra} octets after body-size {n}",
                    close=CONTENT | DECODE, deviations=[DEV.BODY_OVERRUN])


def op_frame_body_short(s: Script) -> Fault:
    """Fewer body octets than announced, then a method on the same channel
    (or a second header, or a second content method)."""
    q = _frame_prefix(s)
    n = s.rng.between(10, 9000)
    short = s.rng.between(0, n - 1)
    m = spec.BasicPublish(exchange="", routing_key=q)
    frames = w.content(1, m, None, s.rng.bytes(short), s.chunk, body_size=n)
    how = s.rng.pick(["method", "header", "publish"])
    if how == "method":
        nxt = w.method_frame(1, spec.QueueDeclare(queue=q, passive=True))
    elif how == "header":
        nxt = w.frame(FRAME_HEADER, 1, w.header_payload(60, 5))
    else:
        nxt = b"".join(w.content(1, m, None, b"hello", s.chunk))
    s.raw(f"basic.publish ch1 body-size {n} with {short} octets, then a {how}",
          b"".join(frames) + nxt, faulty=True)
    return _framing("frame:body-short", "basic.publish",
                    f"{short} of {n} body octets, then a {how} on the channel",
                    close=CONTENT)


def op_frame_header_fields(s: Script) -> Fault:
    q = _frame_prefix(s)
    how = s.rng.pick(["class-id", "weight", "short-header", "no-header"])
    m = spec.BasicPublish(exchange="", routing_key=q)
    body = s.rng.bytes(s.rng.between(1, 50))
    if how == "class-id":
        cid = s.rng.pick([50, 0, 10, 61, 0xFFFF])
        hdr = w.header_payload(cid, len(body))
        detail = f"content header class-id {cid} after basic.publish"
    elif how == "weight":
        wt = s.rng.pick([1, 0xFFFF])
        hdr = w.header_payload(60, len(body), weight=wt)
        detail = f"content header weight {wt}"
    elif how == "short-header":
        hdr = w.header_payload(60, len(body))[:s.rng.between(0, 13)]
        detail = f"content header of {len(hdr)} octets"
    else:
        hdr = b""
        detail = "basic.publish, then body frames without a header"
    data = w.method_frame(1, m) + (w.frame(FRAME_HEADER, 1, hdr) if how != "no-header" else b"")
    data += w.frame(FRAME_BODY, 1, body)
    s.raw(f"basic.publish ch1 [{detail}]", data, faulty=True)
    # A header of 12 or 13 octets has no property flags: RabbitMQ reads it
    # as a header and fails when it decodes the properties (541).
    return _framing(f"frame:header-{how}", "basic.publish", detail,
                    close=CONTENT | DECODE,
                    deviations=[DEV.PROPERTIES_541] if how == "short-header" else ())


def op_frame_empty_body_frame(s: Script) -> Fault:
    """Empty body frames in the middle of a content (the 0-9 text uses one
    to abort a content; RabbitMQ accepts and ignores them)."""
    q = _frame_prefix(s)
    m = spec.BasicPublish(exchange="", routing_key=q)
    body = s.rng.bytes(s.rng.between(2, 200))
    cut = s.rng.between(1, len(body) - 1)
    data = (w.method_frame(1, m) + w.frame(FRAME_HEADER, 1, w.header_payload(60, len(body)))
            + w.frame(FRAME_BODY, 1, body[:cut]) + w.frame(FRAME_BODY, 1, b"")
            + w.frame(FRAME_BODY, 1, body[cut:]))
    s.raw("basic.publish ch1 with an empty body frame mid-content", data, faulty=True)
    s.method(1, spec.BasicGet(queue=q, no_ack=True), wait="basic.get-ok|basic.get-empty:1")
    return Fault(kind="frame:empty-body-frame", target="basic.publish",
                 detail="a 0-octet body frame between two parts", accept=True,
                 close=CONTENT | DECODE)


def op_frame_heartbeat(s: Script) -> Fault:
    _frame_prefix(s)
    how = s.rng.pick(["on-channel", "with-payload", "flood"])
    if how == "flood":
        s.raw("100 heartbeat frames", w.heartbeat() * 100)
        s.some_valid(1, 1)
        return valid_fault("heartbeat", "100 heartbeats in a row")
    if how == "on-channel":
        ch = s.rng.pick([1, 2, 0xFFFF])
        s.raw(f"heartbeat on ch{ch}", w.heartbeat(ch), faulty=True)
        s.some_valid(1, 1)
        # The spec: 501; another passage: connection frames off channel 0 -> 503.
        return _framing("frame:heartbeat-channel", "heartbeat", f"heartbeat on channel {ch}",
                        close={501, 503}, deviations=[DEV.HEARTBEAT_CHANNEL])
    p = s.rng.bytes(s.rng.between(1, 8))
    s.raw(f"heartbeat with {len(p)} payload octets", w.heartbeat(0, p), faulty=True)
    s.some_valid(1, 1)
    return _framing("frame:heartbeat-payload", "heartbeat",
                    f"heartbeat frame with {len(p)} payload octets", close={501, 505})


def op_frame_channel_max(s: Script) -> Fault:
    s.handshake()
    ch = s.rng.pick([s.cfg.channel_max + 1, s.cfg.channel_max + 2, 1000, 0xFFFF])
    s.method(ch, spec.ChannelOpen(), wait=f"channel.open-ok:{ch}", faulty=True)
    s.method(ch, spec.QueueDeclare(queue=s.names.queues[0]), wait=f"queue.declare-ok:{ch}")
    return _framing("frame:channel-above-max", "channel.open",
                    f"channel {ch} above the channel-max {s.cfg.channel_max} we tuned",
                    close={504, 530, 503}, deviations=[DEV.CHANNEL_MAX])


def op_frame_wrong_channel(s: Script) -> Fault:
    """Connection methods on a channel, channel methods on channel 0."""
    _frame_prefix(s)
    how = s.rng.pick(["connection-on-channel", "queue-on-0", "channel.open-on-0",
                      "basic.publish-on-0"])
    if how == "connection-on-channel":
        m: Any = s.rng.pick([spec.ConnectionClose(reply_code=200, reply_text="fz"),
                             spec.ConnectionTuneOk(channel_max=8, frame_max=4096),
                             spec.ConnectionOpen(virtual_host="/")])
        s.method(1, m, faulty=True, label=f"{m.NAME} on ch1")
        close, target = {503, 504}, m.NAME
    elif how == "basic.publish-on-0":
        s.raw("basic.publish on ch0", b"".join(w.content(
            0, spec.BasicPublish(routing_key="x"), None, b"x", s.chunk)), faulty=True)
        close, target = {503, 504, 505}, "basic.publish"
    else:
        m = spec.QueueDeclare(queue=s.names.queues[0]) if how == "queue-on-0" else \
            spec.ChannelOpen()
        s.method(0, m, faulty=True, label=f"{m.NAME} on ch0")
        close, target = {503, 504}, m.NAME
    s.some_valid(1, 1)
    return _framing(f"frame:{how}", target, how, close=close)


def op_frame_split_header(s: Script) -> Fault:
    """Every frame of the conversation written in pieces of 1..7 octets."""
    s.handshake()
    s.channel_open(1)
    q = s.names.queues[0]
    pieces = s.rng.between(1, 7)
    data = w.method_frame(1, spec.QueueDeclare(queue=q)) + b"".join(w.content(
        1, spec.BasicPublish(routing_key=q), props(s.rng, s.user), s.rng.bytes(300), 100))
    for i in range(0, len(data), pieces):
        s.raw(f"octets {i}.. in pieces of {pieces}", data[i:i + pieces])
    s.method(1, spec.BasicGet(queue=q, no_ack=True), wait="basic.get-ok|basic.get-empty:1")
    return valid_fault("frame", f"frames written {pieces} octets at a time")


# ---------------------------------------------------------------------------
# state


def op_state_unopened_channel(s: Script) -> Fault:
    s.handshake()
    if s.rng.chance(0.5):
        s.channel_open(1)
    ch = s.rng.between(2, s.cfg.channel_max)
    m = s.rng.pick([spec.QueueDeclare(queue=s.names.queues[0]), spec.BasicQos(),
                    spec.ChannelFlow(active=True), spec.TxSelect(),
                    spec.ChannelClose(reply_code=200), spec.ChannelCloseOk()])
    s.method(ch, m, faulty=True, label=f"{m.NAME} on unopened ch{ch}")
    # A close-ok may cross a close the server sent and forgot: tolerating one
    # for an unknown channel is not wrong (RabbitMQ ignores it).
    return Fault(kind="state:unopened-channel", target=m.NAME,
                 detail=f"{m.NAME} on channel {ch}, never opened",
                 accept=m.NAME == "channel.close-ok", close={504})


def op_state_open_twice(s: Script) -> Fault:
    s.handshake()
    s.channel_open(1)
    if s.rng.chance(0.5):
        s.some_valid(1, 1)
    s.method(1, spec.ChannelOpen(), faulty=True, label="channel.open again on ch1")
    return Fault(kind="state:open-twice", target="channel.open",
                 detail="channel.open on an open channel", accept=False, close={504})


def op_state_unknown_tag(s: Script) -> Fault:
    q = s.prefix()
    m: Any = s.rng.pick(["ack", "ack-multiple", "reject", "nack", "twice"])
    tag = s.rng.pick([1, 2, 7, 1000, (1 << 64) - 1])
    if m == "twice":
        # A delivery acknowledged twice (RabbitMQ numbers from 1; if the peer
        # numbers otherwise, the first ack is already an unknown tag).
        s.publish(1, "", q, b"fz")
        s.method(1, spec.BasicGet(queue=q), wait="basic.get-ok|basic.get-empty:1")
        s.method(1, spec.BasicAck(delivery_tag=1))
        meth: Any = spec.BasicAck(delivery_tag=1)
        detail = "basic.ack of tag 1 twice"
    elif m == "ack":
        meth, detail = spec.BasicAck(delivery_tag=tag), f"ack of tag {tag}, never delivered"
    elif m == "ack-multiple":
        meth = spec.BasicAck(delivery_tag=tag, multiple=True)
        detail = f"ack multiple up to {tag}, nothing delivered"
    elif m == "reject":
        meth = spec.BasicReject(delivery_tag=tag, requeue=s.rng.chance(0.5))
        detail = f"reject of tag {tag}, never delivered"
    else:
        meth = spec.BasicNack(delivery_tag=tag, multiple=s.rng.chance(0.5))
        detail = f"nack of tag {tag}, never delivered"
    if s.rng.chance(0.3):
        s.method(1, spec.TxSelect(), wait="tx.select-ok:1")
        detail += " (transactional channel: checked at once, not at commit)"
    s.method(1, meth, faulty=True, label=f"{meth.NAME} ch1 [{detail}]")
    s.some_valid(1, s.rng.between(0, 2))
    return Fault(kind="state:unknown-delivery-tag", target=meth.NAME, detail=detail,
                 accept=False, channel_close={406})


def op_state_modes(s: Script) -> Fault:
    """tx and confirm misuse: commit/rollback without select, confirm on a
    transactional channel and the reverse (RabbitMQ extension: 406)."""
    _frame_prefix(s)
    how = s.rng.pick(["commit", "rollback", "confirm-after-tx", "tx-after-confirm"])
    if how in ("commit", "rollback"):
        m: Any = spec.TxCommit() if how == "commit" else spec.TxRollback()
    elif how == "confirm-after-tx":
        s.method(1, spec.TxSelect(), wait="tx.select-ok:1")
        m = spec.ConfirmSelect()
    else:
        s.method(1, spec.ConfirmSelect(), wait="confirm.select-ok:1")
        m = spec.TxSelect()
    s.method(1, m, faulty=True, label=f"{m.NAME} ch1 [{how}]")
    s.some_valid(1, s.rng.between(0, 1))
    return Fault(kind=f"state:{how}", target=m.NAME, detail=how, accept=False,
                 channel_close={406})


def op_state_duplicate_consumer(s: Script) -> Fault:
    q = s.prefix()
    s.method(1, spec.BasicConsume(queue=q, consumer_tag="fz-dup"), wait="basic.consume-ok:1")
    s.method(1, spec.BasicConsume(queue=q, consumer_tag="fz-dup"), faulty=True,
             label="basic.consume ch1 [consumer tag in use]")
    s.some_valid(1, s.rng.between(0, 1))
    # rule unique: not-allowed (a connection exception).
    return Fault(kind="state:duplicate-consumer-tag", target="basic.consume",
                 detail="consumer tag 'fz-dup' twice on one channel", accept=False,
                 close={530})


def op_state_entities(s: Script) -> Fault:
    """Missing, reserved and inequivalent entities: channel exceptions."""
    q = s.prefix()
    miss_q, miss_x = s.names.queues[2], s.names.exchanges[1]
    how = s.rng.pick(["consume-missing", "publish-missing-exchange", "bind-missing-exchange",
                      "bind-missing-queue", "passive-queue", "passive-exchange",
                      "reserved-queue", "reserved-exchange", "exchange-type-redeclare",
                      "queue-inequivalent", "delete-if-empty", "delete-if-unused",
                      "exchange-if-unused", "get-missing", "purge-missing",
                      "bind-internal", "publish-internal", "delete-reserved-exchange"])
    chan: set[int] = set()
    close: set[int] = set()
    x = s.names.exchanges[0]
    if how == "consume-missing":
        m: Any = spec.BasicConsume(queue=miss_q)
        chan = {404}
    elif how == "publish-missing-exchange":
        s.publish(1, miss_x, "k", b"fz", faulty=True, label=f"basic.publish to missing {miss_x}")
        m, chan = None, {404}
    elif how == "bind-missing-exchange":
        m, chan = spec.QueueBind(queue=q, exchange=miss_x), {404}
    elif how == "bind-missing-queue":
        m, chan = spec.QueueBind(queue=miss_q, exchange="amq.direct"), {404}
    elif how == "passive-queue":
        m, chan = spec.QueueDeclare(queue=miss_q, passive=True), {404}
    elif how == "passive-exchange":
        m, chan = spec.ExchangeDeclare(exchange=miss_x, type="direct", passive=True), {404}
    elif how == "reserved-queue":
        m, chan = spec.QueueDeclare(queue=f"amq.{s.tag}"), {403}
    elif how == "reserved-exchange":
        m, chan = spec.ExchangeDeclare(exchange=f"amq.{s.tag}", type="direct"), {403}
    elif how == "exchange-type-redeclare":
        s.method(1, spec.ExchangeDeclare(exchange=x, type="direct"),
                 wait="exchange.declare-ok:1")
        # rule typed: not-allowed (530); rule equivalent: a channel exception.
        m, chan, close = spec.ExchangeDeclare(exchange=x, type="fanout"), {406}, {530}
    elif how == "queue-inequivalent":
        m, chan = spec.QueueDeclare(queue=q, durable=True), {406}
    elif how == "delete-if-empty":
        s.publish(1, "", q, b"fz")
        m, chan = spec.QueueDelete(queue=q, if_empty=True), {406}
    elif how == "delete-if-unused":
        s.method(1, spec.BasicConsume(queue=q, consumer_tag="fz-u"), wait="basic.consume-ok:1")
        m, chan = spec.QueueDelete(queue=q, if_unused=True), {406}
    elif how == "exchange-if-unused":
        s.method(1, spec.ExchangeDeclare(exchange=x, type="direct"))
        s.method(1, spec.QueueBind(queue=q, exchange=x, routing_key="k"), wait="queue.bind-ok:1")
        m, chan = spec.ExchangeDelete(exchange=x, if_unused=True), {406}
    elif how == "get-missing":
        m, chan = spec.BasicGet(queue=miss_q), {404}
    elif how == "purge-missing":
        m, chan = spec.QueuePurge(queue=miss_q), {404}
    elif how == "bind-internal":
        s.method(1, spec.ExchangeDeclare(exchange=x, type="direct", internal=True),
                 wait="exchange.declare-ok:1")
        # 0-9 text (queue.bind): binding to an internal exchange is 530;
        # 0-9-1 keeps internal only as reserved-3, RabbitMQ lets queues bind.
        m, chan, close = spec.QueueBind(queue=q, exchange=x), {403}, {530}
        s.method(1, m, faulty=True, label=f"queue.bind ch1 [{how}]")
        s.some_valid(1, s.rng.between(0, 1))
        return Fault(kind=f"state:{how}", target="queue.bind", detail=how, accept=True,
                     channel_close=chan, close=close)
    elif how == "publish-internal":
        s.method(1, spec.ExchangeDeclare(exchange=x, type="direct", internal=True),
                 wait="exchange.declare-ok:1")
        s.publish(1, x, "k", b"fz", faulty=True, label=f"basic.publish to internal {x}")
        m, chan = None, {403}
    else:  # delete-reserved-exchange
        m, chan = spec.ExchangeDelete(exchange="amq.direct"), {403}
    if m is not None:
        s.method(1, m, faulty=True, label=f"{m.NAME} ch1 [{how}]")
    s.some_valid(1, s.rng.between(0, 1))
    target = m.NAME if m is not None else "basic.publish"
    return Fault(kind=f"state:{how}", target=target, detail=how, accept=False,
                 channel_close=chan, close=close)


def op_state_server_method(s: Script) -> Fault:
    """A method only a server sends, from the client."""
    q = _frame_prefix(s)
    cls: type[Method] = s.rng.pick([c for c in spec.METHODS.values()
                                    if "server" not in c.CHASSIS and c.CLASS_ID != 10])
    m = build(cls, s.rng, s.names, **({"queue": q} if any(
        f.attr == "queue" for f in cls.FIELDS) else {}))
    if cls.CONTENT:
        s.raw(f"{cls.NAME} ch1 with content [server method]",
              b"".join(w.content(1, m, None, b"fz", s.chunk)), faulty=True)
    else:
        s.method(1, m, faulty=True, label=f"{cls.NAME} ch1 [server method]")
    s.some_valid(1, 1)
    return Fault(kind="state:server-method", target=cls.NAME,
                 detail=f"{cls.NAME} sent by the client", accept=False,
                 close={503, 504, 540, 505})


def op_state_after_close(s: Script) -> Fault:
    """Methods after our connection.close: the peer answers close-ok and
    must not act on (or answer) them."""
    q = s.prefix()
    s.method(0, spec.ConnectionClose(reply_code=200, reply_text="fz"), faulty=True)
    for _ in range(s.rng.between(1, 3)):
        s.method(1, spec.QueueDeclare(queue=q, passive=True))
    s.barrier = "none"
    return Fault(kind="state:methods-after-close", target="connection.close",
                 detail="methods pipelined after connection.close", accept=True, drop=True)


def op_state_closing_channel(s: Script) -> Fault:
    """Methods pipelined after our channel.close: once the peer has
    answered close-ok the channel is closed for it, so it must refuse them
    (504) -- or ignore them; it must not execute or answer them."""
    q = s.prefix()
    s.method(1, spec.ChannelClose(reply_code=200, reply_text="fz"))
    for _ in range(s.rng.between(1, 3)):
        s.method(1, s.rng.pick([spec.QueueDeclare(queue=q, passive=True), spec.BasicQos(),
                                spec.ChannelFlow(active=True)]), faulty=True)
    s.raw("(wait for close-ok)", b"", wait="channel.close-ok:1")
    s.channel_open(1)
    s.method(1, spec.QueueDeclare(queue=q, passive=True), wait="queue.declare-ok:1")
    return Fault(kind="state:methods-after-channel-close", target="channel.close",
                 detail="methods between our channel.close and its close-ok", accept=True,
                 close={504})


def op_valid_tx_pipelined(s: Script) -> Fault:
    """Requests pipelined behind tx.commit / tx.rollback (legal: a client
    MAY send requests without waiting for the replies)."""
    q = s.prefix()
    s.method(1, spec.TxSelect(), wait="tx.select-ok:1")
    s.publish(1, "", q, s.rng.bytes(s.rng.small(100)), props(s.rng, s.user))
    end = s.rng.pick([spec.TxCommit(), spec.TxRollback()])
    s.method(1, end)
    for _ in range(s.rng.between(1, 2)):
        s.method(1, s.rng.pick([spec.QueueDeclare(queue=q, passive=True),
                                spec.BasicGet(queue=q, no_ack=True),
                                spec.ChannelFlow(active=True)]))
    return Fault(kind="valid", target=end.NAME, detail="requests pipelined behind "
                 f"{end.NAME}", accept=True, deviations=[DEV.TX_PIPELINE])


def op_state_unsolicited(s: Script) -> Fault:
    """Replies nobody asked for: channel.close-ok / flow-ok without a
    request (the server must not take them as something else)."""
    _frame_prefix(s)
    m: Any = s.rng.pick([spec.ChannelCloseOk(), spec.ChannelFlowOk(active=True),
                         spec.ChannelFlowOk(active=False)])
    s.method(1, m, faulty=True, label=f"{m.NAME} ch1 [unsolicited]")
    s.some_valid(1, 1)
    return Fault(kind="state:unsolicited-reply", target=m.NAME,
                 detail=f"{m.NAME} without a request", accept=True, close={503, 504, 505})


def op_state_unimplemented(s: Script) -> Fault:
    """Features a server may leave out (RabbitMQ: all of them, 540)."""
    q = _frame_prefix(s)
    how = s.rng.pick(["prefetch-size", "immediate", "flow-off", "recover-no-requeue",
                      "qos-global"])
    if how == "prefetch-size":
        m: Any = spec.BasicQos(prefetch_size=s.rng.pick([1, 4096, 0xFFFFFFFF]))
        s.method(1, m, faulty=True, label="basic.qos ch1 [prefetch-size]")
    elif how == "immediate":
        m = unchecked(spec.BasicPublish, exchange="", routing_key=q, mandatory=False,
                      immediate=True)
        s.raw("basic.publish ch1 [immediate]", b"".join(w.content(1, m, None, b"fz", s.chunk)),
              faulty=True)
    elif how == "flow-off":
        m = spec.ChannelFlow(active=False)
        s.method(1, m, faulty=True, label="channel.flow(active=0) ch1", wait="channel.flow-ok:1")
    elif how == "recover-no-requeue":
        m = spec.BasicRecover(requeue=False)
        s.method(1, m, faulty=True, label="basic.recover(requeue=0) ch1")
    else:
        m = spec.BasicQos(prefetch_count=5, global_=True)
        s.method(1, m, faulty=True, label="basic.qos(global=1) ch1")
    s.some_valid(1, 1)
    return Fault(kind=f"state:unimplemented-{how}", target=m.NAME, detail=how, accept=True)


def op_state_qos(s: Script) -> Fault:
    """prefetch-count 1 with global=0 and two consumers on one channel: the
    spec limits the *channel* to 1 unacknowledged message (RabbitMQ limits
    each consumer: documented, the monitor reports it)."""
    q1, q2 = s.names.queues[0], s.names.queues[1]
    s.handshake()
    s.channel_open(1)
    s.declare_queue(1, q1)
    s.declare_queue(1, q2)
    for q in (q1, q2):
        for _ in range(s.rng.between(1, 3)):
            s.publish(1, "", q, b"fz")
    s.method(1, spec.BasicQos(prefetch_count=1), wait="basic.qos-ok:1")
    s.method(1, spec.BasicConsume(queue=q1, consumer_tag="fz-a"), wait="basic.consume-ok:1")
    s.method(1, spec.BasicConsume(queue=q2, consumer_tag="fz-b"), wait="basic.consume-ok:1")
    s.raw("(wait for a delivery)", b"", wait="basic.deliver>=1:1")
    s.method(1, spec.ChannelFlow(active=True), wait="channel.flow-ok:1")
    return valid_fault("basic.qos", "prefetch-count 1, global 0, two consumers on a channel")


def op_state_before_open(s: Script) -> Fault:
    s.until_open()
    m: Any = s.rng.pick([spec.ChannelOpen(), spec.QueueDeclare(queue="fz")])
    ch = 1
    s.method(ch, m, faulty=True, label=f"{m.NAME} ch{ch} before connection.open")
    s.open()
    s.barrier = "none"
    # command-invalid, channel-error, or unexpected-frame ("a frame that was
    # not expected"), or -- a handshake error -- the socket closes.
    return Fault(kind="state:before-open", target=m.NAME,
                 detail=f"{m.NAME} between tune-ok and connection.open", accept=False,
                 close={503, 504, 505, 530}, drop=True)


def op_state_connection_again(s: Script) -> Fault:
    _frame_prefix(s)
    m: Any = s.rng.pick([spec.ConnectionOpen(virtual_host=s.cfg.virtual_host),
                         spec.ConnectionTuneOk(channel_max=8, frame_max=4096),
                         unchecked(spec.ConnectionStartOk, client_properties={},
                                   mechanism="PLAIN", response=s.cfg.response, locale="en_US"),
                         spec.ConnectionSecureOk(response=b"x")])
    s.method(0, m, faulty=True, label=f"{m.NAME} again once open")
    s.some_valid(1, 1)
    return Fault(kind="state:connection-method-again", target=m.NAME,
                 detail=f"{m.NAME} after the handshake", accept=False, close={503, 504, 505})


# ---------------------------------------------------------------------------
# handshake


_BAD_HEADERS = casegen.bad_headers(b"AMQP\x00\x00\x09\x02", b"AMQP\x00\x00\x0a\x00",
                                   b"AMQP\x01\x01\x00\x0a", b"AMQP\x00\x01\x00\x00",
                                   b"AMQP\x03\x01\x00\x00", b"HTTP/1.1", b"\x00" * 8,
                                   b"AMQP\x00\x00\x00\x00")


def op_handshake_bad_header(s: Script) -> Fault:
    hdr = s.rng.pick(_BAD_HEADERS)
    s.raw(f"protocol header {hdr!r}", hdr, faulty=True)
    s.barrier = "none"
    # 0-9-1: reply with the header we support, then close the socket.
    return Fault(kind="handshake:bad-header", target="protocol-header", detail=f"{hdr!r}",
                 accept=False, drop=True)


def op_handshake_other_header(s: Script) -> Fault:
    """The family's other header (0-9's for 0-9-1, 0-9-1's for 0-9): a server
    may speak it (RabbitMQ speaks 0-9 as 0-9-1) or refuse it with its own
    header."""
    other = s.OTHER_HEADER
    s.raw(f"protocol header AMQP {' '.join(str(b) for b in other[4:])}", other, wait="start",
          faulty=True)
    s.start_ok()
    s.tune_ok()
    s.open()
    s.channel_open(1)
    s.declare_queue(1, s.names.queues[0])
    return Fault(kind="handshake:0-9-header", target="protocol-header",
                 detail=f"AMQP {s.OTHER_NAME} header, then a {s.PROTOCOL} conversation",
                 accept=True, drop=True)


def op_handshake_pipelined(s: Script) -> Fault:
    how = s.rng.pick(["one-write", "octet-header"])
    if how == "one-write":
        # header, start-ok, tune-ok, open, channel.open, declare in one write
        cp = {"product": "fz", "capabilities": dict(CAPABILITIES)}
        data = s.PROTOCOL_HEADER + b"".join(w.method_frame(0, m) for m in [
            spec.ConnectionStartOk(client_properties=cp, mechanism=s.cfg.mechanism,
                                   response=s.cfg.response, locale=s.cfg.locale),
            spec.ConnectionTuneOk(channel_max=s.cfg.channel_max, frame_max=s.cfg.frame_max),
            spec.ConnectionOpen(virtual_host=s.cfg.virtual_host)]) + w.method_frame(
            1, spec.ChannelOpen()) + w.method_frame(1, spec.QueueDeclare(queue=s.names.queues[0]))
        s.raw("the whole handshake and a declare in one write", data, wait="open-ok")
        s.world.chans[1] = _Chan()
    else:
        s.header_octets()
        s.start_ok()
        s.tune_ok()
        s.open()
        s.channel_open(1)
    s.some_valid(1, 1)
    return valid_fault("protocol-header", how)


def op_handshake_mechanism(s: Script) -> Fault:
    s.header()
    how = s.rng.pick(["unoffered", "bad-password", "bad-response"])
    if how == "unoffered":
        mech = s.rng.pick(["X-FUZZ", "", "PLAIN PLAIN", "plain"])
        s.method(0, unchecked(spec.ConnectionStartOk, client_properties={}, mechanism=mech,
                              response=b"", locale="en_US"), faulty=True,
                 label=f"start-ok mechanism {mech!r}")
        s.barrier = "none"
        # 0-9-1 start-ok rule: close the socket (no connection.close).
        return Fault(kind="handshake:unoffered-mechanism", target="connection.start-ok",
                     detail=f"mechanism {mech!r}", accept=False, drop=True)
    resp = (b"\0" + (s.cfg.username or "guest").encode() + b"\0fz-wrong-" + s.tag.encode()
            if how == "bad-password" else s.rng.pick([b"", b"guest", b"\0\0\0", b"\0" * 300]))
    s.method(0, unchecked(spec.ConnectionStartOk, client_properties=s.client_properties(),
                          mechanism="PLAIN", response=resp, locale="en_US"), faulty=True,
             wait="tune", label=f"start-ok PLAIN [{how}]")
    s.tune_ok()
    s.open()
    s.barrier = "none"
    # RabbitMQ extension: with the authentication_failure_close capability
    # (announced) a connection.close(403); else the socket closes.
    return Fault(kind=f"handshake:{how}", target="connection.start-ok", detail=how,
                 accept=False, close={403}, drop=True)


def op_handshake_start_ok_field(s: Script) -> Fault:
    s.header()
    how = s.rng.pick(["odd-locale", "bad-properties-tag", "deep-properties", "truncated",
                      "huge-response"])
    kw: dict[str, Any] = {"client_properties": s.client_properties(),
                          "mechanism": s.cfg.mechanism, "response": s.cfg.response,
                          "locale": s.cfg.locale}
    accept = True
    if how == "odd-locale":
        kw["locale"] = s.rng.pick(["xx_XX", "", "é" * 50])
        payload = _payload(spec.ConnectionStartOk, kw)
    elif how == "huge-response":
        kw["response"] = s.cfg.response + b"\0" * 100000
        payload = _payload(spec.ConnectionStartOk, kw)
        accept = True
    elif how == "truncated":
        p = _payload(spec.ConnectionStartOk, kw)
        payload = p[:s.rng.between(4, len(p) - 1)]
        accept = False
    else:
        m = _marker(s)
        kw["client_properties"] = {m: None}
        p = _payload(spec.ConnectionStartOk, kw)
        at = w.find_marker(p, m.encode())
        t = (w.raw_table(w.table_entry(b"fz", s.rng.pick(_BAD_TAGS), b"\1\2"))
             if how == "bad-properties-tag" else w.deep_table(s.rng.pick([40, 500])))
        payload = p[:at - 5] + t + p[at + len(m) + 1:]
        accept = how == "deep-properties"
    frames = [w.frame(FRAME_METHOD, 0, payload)]
    if how == "huge-response":  # larger than frame-min-size: an oversized frame
        accept = False
    s.raw(f"start-ok [{how}]", b"".join(frames), wait="tune", faulty=True)
    s.tune_ok()
    s.open()
    s.channel_open(1)
    s.declare_queue(1, s.names.queues[0])
    return Fault(kind=f"handshake:start-ok-{how}", target="connection.start-ok", detail=how,
                 accept=accept, close=DECODE | {403, 503, 530}, drop=True)


def op_handshake_tune_ok(s: Script) -> Fault:
    s.header()
    s.start_ok()
    how = s.rng.pick(["channel-max-above", "channel-max-0", "frame-max-above", "frame-max-0",
                      "frame-max-small", "heartbeat"])
    over: dict[str, Any] = {}
    if how == "channel-max-above":
        over["channel_max"] = 0xFFFF
    elif how == "channel-max-0":
        over["channel_max"] = 0
    elif how == "frame-max-above":
        over["frame_max"] = 0xFFFFFFFF
    elif how == "frame-max-0":
        over["frame_max"] = 0
    elif how == "frame-max-small":
        over["frame_max"] = s.rng.pick([0x10, 512, 4095])
    else:
        over["heartbeat"] = s.rng.pick([600, 0xFFFF])
    m = unchecked(spec.ConnectionTuneOk, **{"channel_max": s.cfg.channel_max,
                                            "frame_max": s.cfg.frame_max, "heartbeat": 0,
                                            **over})
    s.method(0, m, faulty=how != "heartbeat", label=f"tune-ok [{how}: {over}]")
    s.open()
    s.channel_open(1)
    s.declare_queue(1, s.names.queues[0])
    if how == "heartbeat":
        return valid_fault("connection.tune-ok", f"heartbeat {over['heartbeat']}")
    # tune-ok rules (channel-max, frame-max above the offer): close the
    # socket without a negotiated close -- a close reporting the error (the
    # spec lets the server report it; the embedded broker sends 530 and
    # hangs up) or none.  Values above are above any limited offer (a
    # server offering 0 = no limit would accept them).  Below
    # frame-min-size: no close method rule, so close or drop.
    close = DECODE | {503, 530} if how == "frame-max-small" else frozenset({530})
    return Fault(kind=f"handshake:tune-ok-{how}", target="connection.tune-ok",
                 detail=f"{over}", accept=False, close=close, drop=True)


def op_handshake_vhost(s: Script) -> Fault:
    s.until_open()
    vhost = s.rng.pick([f"/fz-nowhere-{s.tag}", "é" * 100, ""])
    s.method(0, spec.ConnectionOpen(virtual_host=vhost), wait="open-ok", faulty=True)
    s.barrier = "none"
    # invalid-path (402), access-refused (403, permissions), not-allowed
    # (530: RabbitMQ's "vhost not found").
    return Fault(kind="handshake:unknown-vhost", target="connection.open",
                 detail=f"virtual host {vhost!r}", accept=False, close={402, 403, 530})


def op_handshake_out_of_order(s: Script) -> Fault:
    s.header()
    how = s.rng.pick(["open-before-tune-ok", "secure-ok-unasked", "tune-ok-before-start-ok",
                      "heartbeat-early", "start-ok-twice", "close-early"])
    if how == "heartbeat-early":
        s.raw("heartbeat", w.heartbeat())
        s.start_ok()
        s.raw("heartbeat", w.heartbeat())
        s.tune_ok()
        s.open()
        s.channel_open(1)
        return valid_fault("heartbeat", "heartbeats during the handshake")
    if how == "close-early":
        s.start_ok()
        s.method(0, spec.ConnectionClose(reply_code=200, reply_text="fz"), faulty=True)
        s.barrier = "none"
        return Fault(kind="handshake:close-early", target="connection.close",
                     detail="connection.close before tune-ok", accept=True, drop=True)
    if how == "open-before-tune-ok":
        s.start_ok()
        s.method(0, spec.ConnectionOpen(virtual_host=s.cfg.virtual_host), faulty=True)
        target = "connection.open"
    elif how == "secure-ok-unasked":
        s.start_ok()
        s.method(0, spec.ConnectionSecureOk(response=b"x"), faulty=True)
        target = "connection.secure-ok"
    elif how == "start-ok-twice":
        s.start_ok()
        s.method(0, unchecked(spec.ConnectionStartOk, client_properties={}, mechanism="PLAIN",
                              response=s.cfg.response, locale="en_US"), faulty=True)
        target = "connection.start-ok"
    else:
        s.method(0, spec.ConnectionTuneOk(channel_max=8, frame_max=4096), faulty=True)
        target = "connection.tune-ok"
    s.barrier = "none"
    return Fault(kind="handshake:out-of-order", target=target, detail=how, accept=False,
                 close={501, 503, 504, 505, 530}, drop=True)


# ---------------------------------------------------------------------------

Operator = Callable[[Script], "Fault | None"]

#: family -> [(operator name, weight, function)]
#: Delivery tags at the ends of their 64-bit range, and zero: the 0-9-1
#: shape of the serial-range crash class (a "multiple" ack walking or
#: comparing a range the wrong way).
TAG_EXTREMES = (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1)


def op_state_tag_extremes(s: Script) -> Fault:
    """basic.ack / nack / reject with a delivery tag at an extreme (0, 2**63,
    2**64-1) or just past what was delivered, ``multiple`` on or off, after
    0-3 deliveries.  Tag 0 with ``multiple`` means "everything outstanding"
    (legal even when nothing is); any other tag not delivered is an
    unknown-delivery-tag (406)."""
    q = s.prefix()
    held = s.rng.between(0, 3)
    for _ in range(held):
        s.publish(1, "", q, b"fz")
    got = 0
    for _ in range(held):
        s.method(1, spec.BasicGet(queue=q), wait="basic.get-ok|basic.get-empty:1")
        got += 1
    how = s.rng.pick(["ack", "nack", "reject"])
    tag = s.rng.pick([*TAG_EXTREMES, got + 1])
    multiple = how != "reject" and s.rng.chance(0.6)
    if how == "ack":
        m: Any = spec.BasicAck(delivery_tag=tag, multiple=multiple)
    elif how == "nack":
        m = spec.BasicNack(delivery_tag=tag, multiple=multiple, requeue=s.rng.chance(0.5))
    else:
        m = spec.BasicReject(delivery_tag=tag, requeue=s.rng.chance(0.5))
    legal = (tag == 0 and multiple) or 1 <= tag <= got
    detail = f"{how} tag {tag}{' multiple' if multiple else ''} after {got} deliveries"
    s.method(1, m, faulty=True, label=f"{m.NAME} ch1 [{detail}]")
    s.some_valid(1, s.rng.between(0, 2))
    return Fault(kind="state:tag-extremes", target=m.NAME, detail=detail,
                 accept=legal, channel_close={406})


#: Methods without content that a content header may wrongly follow.
def _non_content_method(s: Script, q: str) -> Method:
    m: Method = s.rng.pick([spec.QueueDeclare(queue=q, passive=True), spec.BasicQos(prefetch_count=5),
                       spec.ChannelFlow(active=True), spec.QueuePurge(queue=q),
                       spec.ExchangeDeclare(exchange="amq.direct", type="direct", passive=True),
                       spec.QueueBind(queue=q, exchange="amq.direct", routing_key=q),
                       spec.BasicRecover(requeue=True), spec.BasicGet(queue=q),
                       spec.TxSelect(), spec.ConfirmSelect()])
    return m


def op_state_content_after(s: Script) -> Fault:
    """A method that carries no content, followed by a content header (and
    body) on its channel: the peer must refuse the content
    (unexpected-frame), never deliver it."""
    q = s.prefix()
    m = _non_content_method(s, q)
    what = s.rng.pick(["header", "header+body"])
    body = s.rng.bytes(s.rng.between(1, 100))
    hdr = w.frame(FRAME_HEADER, 1, w.header_payload(60, len(body)))
    data = w.method_frame(1, m) + hdr + (w.frame(FRAME_BODY, 1, body) if "body" in what
                                         else b"")
    s.raw(f"{m.NAME} ch1 + content {what}", data, faulty=True)
    s.some_valid(1, 1)
    return _framing("state:content-after", m.NAME, f"content {what} after {m.NAME}",
                    close=CONTENT | {503})


OPERATORS: dict[str, list[tuple[str, float, Operator]]] = {
    "valid": [("random", 8, op_valid_random), ("pubsub", 3, op_valid_pubsub),
              ("get", 2, op_valid_get), ("confirms", 2, op_valid_confirms),
              ("tx", 1, op_valid_tx), ("tx-pipelined", 0.5, op_valid_tx_pipelined),
              ("tiny-frames", 1, op_valid_tiny_frames)],
    "field": [("int-boundary", 3, op_field_int_boundary), ("bits", 2, op_field_bits),
              ("undefined-bits", 1, op_field_undefined_bits),
              ("max-shortstr", 2, op_field_max_shortstr),
              ("overlong-shortstr", 2, op_field_overlong_shortstr),
              ("invalid-utf8", 1, op_field_invalid_utf8),
              ("bad-table-tag", 2, op_field_bad_table_tag),
              ("spec-only-tag", 1, op_field_spec_only_tag),
              ("table-size", 2, op_field_table_size), ("table-nesting", 1, op_field_table_nesting),
              ("table-types", 1, op_field_table_types), ("x-arguments", 1, op_field_x_args),
              ("properties", 3, op_field_properties), ("truncated", 2, op_field_truncated),
              ("trailing-octets", 1, op_field_trailing),
              ("unknown-method", 1, op_field_unknown_method),
              ("short-method", 1, op_field_short_method)],
    "frame": [("bad-frame-end", 2, op_frame_bad_end), ("unknown-type", 1, op_frame_unknown_type),
              ("oversized", 2, op_frame_oversized), ("size-lies", 1, op_frame_size_lies),
              ("wrong-type", 1, op_frame_wrong_type),
              ("orphan-content", 2, op_frame_orphan_content),
              ("body-overrun", 1, op_frame_body_overrun), ("body-short", 2, op_frame_body_short),
              ("header-fields", 2, op_frame_header_fields),
              ("empty-body-frame", 1, op_frame_empty_body_frame),
              ("heartbeat", 1, op_frame_heartbeat), ("channel-max", 1, op_frame_channel_max),
              ("wrong-channel", 2, op_frame_wrong_channel),
              ("split", 1, op_frame_split_header)],
    "state": [("unopened-channel", 2, op_state_unopened_channel),
              ("open-twice", 1, op_state_open_twice),
              ("unknown-delivery-tag", 3, op_state_unknown_tag), ("modes", 1, op_state_modes),
              ("tag-extremes", 3, op_state_tag_extremes),
              ("content-after", 2, op_state_content_after),
              ("duplicate-consumer", 1, op_state_duplicate_consumer),
              ("entities", 4, op_state_entities), ("server-method", 1, op_state_server_method),
              ("after-close", 1, op_state_after_close),
              ("closing-channel", 1, op_state_closing_channel),
              ("unsolicited", 1, op_state_unsolicited),
              ("unimplemented", 1, op_state_unimplemented), ("qos", 1, op_state_qos),
              ("before-open", 1, op_state_before_open),
              ("connection-again", 1, op_state_connection_again)],
    "handshake": [("bad-header", 2, op_handshake_bad_header),
                  ("0-9-header", 1, op_handshake_other_header),
                  ("pipelined", 1, op_handshake_pipelined),
                  ("mechanism", 2, op_handshake_mechanism),
                  ("start-ok-field", 1, op_handshake_start_ok_field),
                  ("tune-ok", 2, op_handshake_tune_ok), ("vhost", 1, op_handshake_vhost),
                  ("out-of-order", 2, op_handshake_out_of_order)],
}


def operator_names() -> list[str]:
    return casegen.operator_names(OPERATORS)


def make_case(seed: int, number: int, cfg: GenConfig | None = None) -> Case:
    """Case ``number`` of the 0-9-1 campaign seeded ``seed`` -- deterministic
    (its random source salted ``0-9-1/``)."""
    return casegen.make_case(seed, number, cfg or GenConfig(), operators=OPERATORS,
                             families=FAMILIES, script=Script, salt="0-9-1/")


def describe(case: Case) -> str:
    """A human-readable listing of a case."""
    f = case.fault
    return "\n".join([
        f"case {case.name} (AMQP {case.protocol}): family {case.family}, fault {f.kind} on "
        f"{f.target}: {f.detail}",
        f"  conformant: accept={f.accept} close={sorted(f.close)} "
        f"channel.close={sorted(f.channel_close)} drop={f.drop}; barrier {case.barrier}",
        *(f"  documented deviation {tag}: {note}" for tag, note in f.deviations),
        *casegen.item_lines(case)])
