"""AMQP 1.0 fuzz cases: a pure function of ``(seed, case number)``.

:func:`make_case` picks a *family* and an *operator* (the shared
:func:`.casegen.make_case`) and returns a :class:`.case.Case` with
``protocol="1.0"``.  Every case (but the handshake family) starts with the
SASL header, ``sasl-init`` (ANONYMOUS, or PLAIN with ``--user``), the AMQP
header and ``open`` (max-frame-size 4096, channel-max 8); names carry
``fz<seed>.<case>[.<tag>]`` behind ``GenConfig.address_prefix``.  Frames we
send stay within 512 octets (the smallest max-frame-size a peer may offer),
so a valid case is valid against any peer; larger messages go as several
transfer frames.

=========  ===================================================================
family     operators
=========  ===================================================================
valid      send then receive (settled or not, 0..70 000 octets, several
           frames), drain on an empty queue, two sessions, settle modes,
           session flow with echo, an aborted delivery, frames with an
           extended header, everything written 1..7 octets at a time
field      one performative (open, begin, attach, flow, transfer,
           disposition, detach) with one field mutated: a mandatory field
           null, a field of the wrong type, uint/ushort boundaries, a list
           count or size that lies, trailing octets, an unknown descriptor,
           too many fields, properties nested 33..200 deep or 5 000 entries
           wide, invalid UTF-8
frame      size below 8, data offset below 2 or past the frame, unknown
           frame types, a SASL frame after open, a frame padded with zeros
           after its performative
state      transfer / flow / detach on an unattached handle, a handle
           attached twice, begin on a channel in use, frames on a channel
           never begun, transfers beyond the credit granted, a transfer on
           a receiving link, open twice, anything after our close,
           dispositions for delivery ids never sent
handshake  bad protocol headers (0-9-1, 0-10, 1.0 with an unknown id,
           garbage), the AMQP header without SASL, an unoffered
           mechanism, a wrong PLAIN password, open with max-frame-size
           below 512, open before the header completes
=========  ===================================================================

Wait conditions (see :mod:`.monitor_1_0`): ``sasl-mechanisms``,
``sasl-outcome``, ``open``, ``begin:<ch>``, ``end:<ch>``,
``attach:<name>`` (its attach or detach), ``flow:<name>``,
``transfer:<n>:<name>`` (n transfers in all), ``detach:<name>``,
``flow:<ch>`` (a session flow).  A peer that closes or breaks a rule ends
every wait.
"""

from __future__ import annotations

__all__ = ["GenConfig", "Script", "make_case", "describe", "OPERATORS", "FAMILIES",
           "operator_names", "mutate_performative", "FIELD_OPS"]

from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.framing import TYPE_SASL
from amqp_sansio.v1_0.message import AmqpMessage, encode_message

from . import casegen
from .case import P10, Case, Fault
from .casegen import FAMILIES, valid_fault
from .specinfo_1_0 import DECODE, FRAMING, SESSION, STATE
from .wire_1_0 import described_list, fields_of, frame, perf, perf_frame, value

_MIN_FRAME = 512  # every peer takes frames this large
_WINDOW = 2048


@attrs.frozen
class GenConfig(casegen.GenConfig):
    PROTOCOL: ClassVar[str] = P10

    frame_max: int = 4096
    #: put before every address a case names: ``/queue/`` for RabbitMQ's
    #: plugin (which wants node names in its own forms); plain for others.
    address_prefix: str = ""

    def to_json(self) -> dict[str, Any]:
        j = super().to_json()
        j["address_prefix"] = self.address_prefix
        return j


@attrs.define
class _Link:
    name: str
    channel: int
    handle: int
    role: spec.Role
    address: str
    next_delivery: int = 0  # a sender's delivery-tags


class Script(casegen.Script[GenConfig]):
    PROTOCOL = P10
    PROTOCOL_HEADER = spec.SASL_HEADER

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.channels: dict[int, int] = {}  # our channel -> next delivery id
        self.handles: dict[int, int] = {}  # our channel -> next handle
        self.links: dict[str, _Link] = {}

    # -- the handshake --------------------------------------------------------
    def header(self) -> None:
        self.raw("SASL header", spec.SASL_HEADER, wait="sasl-mechanisms")

    def start_ok(self, **over: Any) -> None:
        """``sasl-init`` with the configured mechanism, then the AMQP header."""
        mech = over.get("mechanism", self.cfg.mechanism)
        resp = over.get("initial_response", self.cfg.response if mech == "PLAIN" else None)
        init = spec.SaslInit(mechanism=mech, initial_response=resp)
        self.raw(f"sasl-init {mech}", perf_frame(init, ftype=TYPE_SASL), wait="sasl-outcome")

    def tune_ok(self) -> None:
        self.raw("AMQP header", spec.AMQP_HEADER)

    def open(self, **over: Any) -> None:
        kw: dict[str, Any] = {"container_id": f"{self.tag}.c", "hostname": "localhost",
                              "max_frame_size": self.cfg.frame_max,
                              "channel_max": self.cfg.channel_max}
        kw.update(over)
        self.raw("open", perf_frame(spec.Open(**kw)), wait="open")

    # -- sessions and links ---------------------------------------------------
    def address(self, i: int = 0) -> str:
        return f"{self.cfg.address_prefix}{self.tag}.q{i}"

    def begin(self, ch: int = 0, wait: bool = True) -> int:
        b = spec.Begin(next_outgoing_id=0, incoming_window=_WINDOW, outgoing_window=_WINDOW)
        self.raw(f"begin on {ch}", perf_frame(b, ch), wait=f"begin:{ch}" if wait else None)
        self.channels[ch] = 0
        self.handles[ch] = 0
        return ch

    def attach(self, ch: int, role: spec.Role, address: str, *, wait: bool = True,
               handle: int | None = None, **over: Any) -> _Link:
        h = self.handles[ch] if handle is None else handle
        self.handles[ch] = max(self.handles[ch], h + 1)
        name = f"{self.tag}.l{len(self.links)}"
        link = _Link(name, ch, h, role, address)
        self.links[name] = link
        kw: dict[str, Any] = {"name": name, "handle": h, "role": role,
                              "source": spec.Source(address=address), "target": spec.Target(
                                  address=address)}
        if role is spec.Role.SENDER:
            kw["initial_delivery_count"] = 0
        kw.update(over)
        what = "sender" if role is spec.Role.SENDER else "receiver"
        self.raw(f"attach {what} {name} ({address}) handle {h} on {ch}",
                 perf_frame(spec.Attach(**kw), ch), wait=f"attach:{name}" if wait else None)
        return link

    def sender(self, ch: int = 0, address: str | None = None, **over: Any) -> _Link:
        link = self.attach(ch, spec.Role.SENDER, address or self.address(), **over)
        return link

    def wait_credit(self, link: _Link) -> None:
        """Wait for the peer's flow granting the sender credit."""
        self.raw(f"(wait for credit on {link.name})", b"", wait=f"flow:{link.name}")

    def flow(self, link: _Link, credit: int, *, drain: bool = False, wait: str | None = None,
             echo: bool = False) -> None:
        f = spec.Flow(next_incoming_id=None, incoming_window=_WINDOW,
                      next_outgoing_id=self.channels[link.channel], outgoing_window=_WINDOW,
                      handle=link.handle, link_credit=credit, drain=drain, echo=echo)
        self.raw(f"flow {link.name} credit {credit}{' drain' if drain else ''}",
                 perf_frame(f, link.channel), wait=wait)

    def transfer(self, link: _Link, body: bytes, *, settled: bool, label: str = "",
                 faulty: bool = False, handle: int | None = None) -> None:
        """One message, cut into frames of at most 512 octets."""
        ch = link.channel
        did = self.channels[ch]
        self.channels[ch] = did + 1
        tag = link.next_delivery.to_bytes(4, "big")
        link.next_delivery += 1
        msg = encode_message(AmqpMessage(body=(spec.Data(body),)))
        h = link.handle if handle is None else handle
        first = True
        while True:
            t = spec.Transfer(handle=h, delivery_id=did if first else None,
                              delivery_tag=tag if first else None,
                              message_format=0 if first else None,
                              settled=settled if first else None, more=False)
            room = _MIN_FRAME - 8 - len(perf(t)) - 8
            more = len(msg) > room
            if more:
                t = attrs.evolve(t, more=True)
            self.raw(label or f"transfer {len(body)} octets on {link.name}"
                     f"{' (settled)' if settled else ''}",
                     perf_frame(t, ch, msg[:room]), faulty=faulty)
            msg = msg[room:]
            first = False
            if not more:
                return

    def detach(self, link: _Link, wait: bool = True) -> None:
        self.raw(f"detach {link.name}", perf_frame(spec.Detach(handle=link.handle, closed=True),
                                                   link.channel),
                 wait=f"detach:{link.name}" if wait else None)

    def end(self, ch: int) -> None:
        self.raw(f"end {ch}", perf_frame(spec.End(), ch), wait=f"end:{ch}")
        del self.channels[ch]

    def session(self) -> tuple[int, _Link]:
        """The handshake, a session on 0 and a sender with credit."""
        self.handshake()
        self.begin(0)
        snd = self.sender(0)
        self.wait_credit(snd)
        return 0, snd


def _fault(kind: str, target: str, detail: str, conditions: frozenset[str], *,
           accept: bool = False, drop: bool = False) -> Fault:
    return Fault(kind=kind, target=target, detail=detail, accept=accept, drop=drop,
                 conditions=conditions)


def _body(s: Script) -> bytes:
    n = s.rng.pick([0, 1, 100, 400, 1000, s.rng.between(0, 70_000)])
    return s.rng.bytes(n)


# -- valid -----------------------------------------------------------------------
def op_valid_send_receive(s: Script) -> Fault:
    ch, snd = s.session()
    n = s.rng.between(1, 5)
    settled = s.rng.chance(0.3)
    for _ in range(n):
        s.transfer(snd, _body(s), settled=settled)
    # Received pre-settled: the peer's delivery ids are its own (from its begin).
    # The flow goes right behind the attach: a receiver's flow may leave
    # delivery-count out only before it has seen the sender's attach.
    rcv = s.attach(ch, spec.Role.RECEIVER, snd.address, wait=False,
                   snd_settle_mode=spec.SenderSettleMode.SETTLED)
    s.flow(rcv, n, wait=f"transfer:{n}:{rcv.name}")
    if s.rng.chance(0.5):
        s.detach(rcv)
        s.detach(snd)
        s.end(ch)
    return valid_fault("transfer", f"{n} messages {'settled' if settled else 'unsettled'}")


def op_valid_drain(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    rcv = s.attach(0, spec.Role.RECEIVER, s.address(1), wait=False)
    s.flow(rcv, s.rng.between(1, 50), drain=True, wait=f"flow:{rcv.name}")
    return valid_fault("flow", "drain on an empty node: the peer uses the credit up")


def op_valid_two_sessions(s: Script) -> Fault:
    s.handshake()
    for ch in (0, s.rng.between(1, 7)):
        s.begin(ch)
        snd = s.sender(ch, s.address(ch))
        s.wait_credit(snd)
        s.transfer(snd, _body(s), settled=False)
    return valid_fault("begin", "two sessions")


def op_valid_settle_modes(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    mode = s.rng.pick(list(spec.SenderSettleMode))
    snd = s.sender(0, snd_settle_mode=mode)
    s.wait_credit(snd)
    s.transfer(snd, _body(s), settled=mode is spec.SenderSettleMode.SETTLED)
    return valid_fault("attach", f"snd-settle-mode {mode.name}")


def op_valid_echo(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    f = spec.Flow(next_incoming_id=None, incoming_window=_WINDOW, next_outgoing_id=0,
                  outgoing_window=_WINDOW, echo=True)
    # echo is a "should": the barrier, not a wait, shows the session goes on
    s.raw("session flow, echo", perf_frame(f, 0))
    return valid_fault("flow", "session flow with echo")


def op_valid_aborted(s: Script) -> Fault:
    ch, snd = s.session()
    t = spec.Transfer(handle=snd.handle, delivery_id=0, delivery_tag=b"ab", message_format=0,
                      more=True)
    s.channels[ch] = 1
    s.raw("transfer, more", perf_frame(t, ch, b"\x00\x53\x75\xa0\x10partial"))
    s.raw("transfer, aborted", perf_frame(spec.Transfer(handle=snd.handle, aborted=True), ch))
    s.transfer(snd, b"after", settled=False)
    return valid_fault("transfer", "an aborted multi-frame delivery, then another")


def op_valid_extended_header(s: Script) -> Fault:
    s.handshake()
    b = spec.Begin(next_outgoing_id=0, incoming_window=_WINDOW, outgoing_window=_WINDOW)
    ext = s.rng.bytes(4 * s.rng.between(1, 3))
    s.raw("begin with an extended header", frame(perf(b), 0, doff=2 + len(ext) // 4, ext=ext),
          wait="begin:0")
    s.channels[0] = 0
    s.handles[0] = 0
    return valid_fault("frame", f"{len(ext)}-octet extended header (to be skipped)")


def op_valid_tiny_writes(s: Script) -> Fault:
    op_valid_send_receive(s)
    out = []
    for it in s.items:
        if it.wait or len(it.data) < 2:
            out.append(it)
            continue
        pos = 0
        while pos < len(it.data):
            n = s.rng.between(1, 7)
            out.append(attrs.evolve(it, data=it.data[pos:pos + n]))
            pos += n
    s.items = out
    return valid_fault("frame", "every item written 1..7 octets at a time")


# -- field -----------------------------------------------------------------------
_BAD_TYPES = [b"\xa3\x02fz", b"\xa1\x02fz", b"\x41", b"\x56\x01", b"\x52\x07", b"\x71\xff\xff\xff\xff",
              b"\xa0\x00", b"\x45", b"\xc1\x01\x00", b"\x98" + bytes(16)]
#: the type each of _BAD_TYPES is, and the type a field of a base type wants
#: (fields of any type, '*', or of a composite have no wrong primitive type)
_KIND_OF = {0xA3: "symbol", 0xA1: "string", 0x41: "boolean", 0x56: "boolean", 0x52: "uint",
            0x71: "int", 0xA0: "binary", 0x45: "list", 0xC1: "map", 0x98: "uuid"}
_KIND = {"uint": "uint", "boolean": "boolean", "symbol": "symbol", "string": "string",
         "binary": "binary", "fields": "map", "map": "map", "annotations": "map",
         "string-keyed": "map", "ubyte": "ubyte", "ushort": "ushort", "ulong": "ulong",
         "timestamp": "timestamp", "list": "list"}
_INTS = {"uint": [b"\x70\xff\xff\xff\xff", b"\x43", b"\x70\x80\x00\x00\x00"],
         "ushort": [b"\x60\xff\xff", b"\x60\x00\x00"], "ubyte": [b"\x50\xff", b"\x50\x03"],
         "ulong": [b"\x80" + b"\xff" * 8]}


def _victim(s: Script) -> tuple[str, bytes, int, Callable[[bytes], None]]:
    """A performative to mutate, after the steps that make it legal:
    (name, its octets, channel, how to send the mutated octets)."""
    s.handshake()
    ch = 0
    name = s.rng.pick(["open", "begin", "attach", "flow", "transfer", "disposition", "detach"])
    if name == "open":
        s.items.pop()  # the open itself is the victim
        o = spec.Open(container_id=f"{s.tag}.c", max_frame_size=s.cfg.frame_max,
                      channel_max=s.cfg.channel_max)
        return name, perf(o), ch, lambda b: s.raw("open (mutated)", frame(b), wait="open",
                                                  faulty=True)
    if name == "begin":
        b = spec.Begin(next_outgoing_id=0, incoming_window=_WINDOW, outgoing_window=_WINDOW)
        return name, perf(b), ch, lambda o: s.raw("begin (mutated)", frame(o), wait="begin:0",
                                                  faulty=True)
    s.begin(0)
    if name == "attach":
        a = spec.Attach(name=f"{s.tag}.m", handle=0, role=spec.Role.SENDER,
                        target=spec.Target(address=s.address()), initial_delivery_count=0)
        return name, perf(a), ch, lambda o: s.raw("attach (mutated)", frame(o),
                                                  wait=f"attach:{s.tag}.m", faulty=True)
    snd = s.sender(0)
    s.wait_credit(snd)
    p: Any
    if name == "flow":
        p = spec.Flow(next_incoming_id=0, incoming_window=_WINDOW, next_outgoing_id=0,
                      outgoing_window=_WINDOW, handle=snd.handle, delivery_count=0,
                      link_credit=0, available=1)
    elif name == "transfer":
        p = spec.Transfer(handle=snd.handle, delivery_id=0, delivery_tag=b"m",
                          message_format=0, settled=False)
    elif name == "disposition":
        s.transfer(snd, b"x", settled=False)
        p = spec.Disposition(role=spec.Role.SENDER, first=0, settled=True,
                             state=spec.Accepted())
    else:
        p = spec.Detach(handle=snd.handle, closed=True)
    payload = b"\x00\x53\x75\xa0\x01m" if name == "transfer" else b""
    return name, perf(p), ch, lambda o: s.raw(f"{name} (mutated)", frame(o + payload, ch),
                                              faulty=True)


def _mutate_field(s: Script, op: str) -> Fault | None:
    name, body, _ch, send = _victim(s)
    got = mutate_performative(s.rng, name, body, op)
    if got is None:
        return None
    send(got[0])
    return got[1]


def mutate_performative(rng: Any, name: str, body: bytes, op: str
                        ) -> tuple[bytes, Fault] | None:
    """The field operator ``op`` applied to the performative ``name`` encoded
    in ``body``: (the mutated octets, the fault), or None where ``op`` has
    nothing to work on.  The server role mutates its own answers with it."""
    out: list[bytes] = []
    fault = _mutated(rng, name, body, op, out.append)
    return None if fault is None else (out[0], fault)


def _mutated(rng: Any, name: str, body: bytes, op: str, send: Callable[[bytes], None]
             ) -> Fault | None:
    head, fields = fields_of(body)
    specs = type_of(name).FIELDS
    fields += [b"\x40"] * (len(specs) - len(fields))
    if op == "null-mandatory":
        cands = [f for f in specs if f.mandatory]
        if not cands:
            return None
        f = rng.pick(cands)
        fields[f.index] = b"\x40"
    elif op == "wrong-type":
        cands = [f for f in specs if _KIND.get(f.base) is not None]
        f = rng.pick(cands)
        fields[f.index] = rng.pick([b for b in _BAD_TYPES if _KIND_OF[b[0]] != _KIND[f.base]])
    elif op == "int-boundary":
        cands = [f for f in specs if f.base in _INTS]
        if not cands:
            return None
        f = rng.pick(cands)
        fields[f.index] = rng.pick(_INTS[f.base])
        send(described_list(head, fields))
        # A boundary value may be legal (a window of 2^32-1) or not (a
        # handle above handle-max): either way the peer must not break.
        return _fault(f"field:{op}", name, f"{f.name} at its edge", DECODE | SESSION,
                      accept=True)
    elif op == "count-lies":
        k = rng.pick([len(fields) + 1, len(fields) + 100, 0xFFFFFFFF])
        send(described_list(head, fields, count=k))
        return _fault(f"field:{op}", name, f"list count {k} for {len(fields)} fields", DECODE)
    elif op == "size-lies":
        k = rng.pick([0, 3, 0xFFFFFFF0])
        send(described_list(head, fields, size=k))
        return _fault(f"field:{op}", name, f"list size {k}", DECODE)
    elif op == "extra-fields":
        fields += [b"\x40", value("extra")]
        send(described_list(head, fields))
        return _fault(f"field:{op}", name, "two fields beyond the spec's", DECODE, accept=True)
    elif op == "unknown-descriptor":
        send(b"\x00\x53\x7f" + described_list(b"", fields)[0:])
        return _fault(f"field:{op}", name, "descriptor 0x7f (no performative)", DECODE)
    elif op == "trailing" and name != "transfer":
        send(described_list(head, fields) + b"\x40\x40")
        # only a transfer carries a payload; ignoring one elsewhere is lenient
        return _fault(f"field:{op}", name, "two octets after the performative", DECODE,
                      accept=True)
    elif op == "deep-properties":
        cands = [f for f in specs if f.name == "properties"]
        if not cands:
            return None
        depth = rng.pick([33, 64, 200])
        inner = b"\xc1\x01\x00"
        for _ in range(depth):
            body_ = b"\xa3\x01d" + inner
            inner = b"\xd1" + (len(body_) + 4).to_bytes(4, "big") + (2).to_bytes(4, "big") + \
                body_
        fields[cands[0].index] = inner
        send(described_list(head, fields))
        return _fault(f"field:{op}", name, f"properties {depth} maps deep", DECODE,
                      accept=True)
    elif op == "wide-properties":
        cands = [f for f in specs if f.name == "properties"]
        if not cands:
            return None
        n = 5000
        entries = b"".join(b"\xa3\x06k" + b"%05d" % i + b"\x43" for i in range(n))
        fields[cands[0].index] = b"\xd1" + (len(entries) + 4).to_bytes(4, "big") + \
            (2 * n).to_bytes(4, "big") + entries
        send(described_list(head, fields))
        return _fault(f"field:{op}", name, f"properties with {n} entries (beyond 512 octets: "
                      "also a frame above the limit before open)", DECODE | FRAMING,
                      accept=True)
    elif op == "bad-utf8":
        cands = [f for f in specs if f.base == "string"]
        if not cands:
            return None
        f = rng.pick(cands)
        fields[f.index] = b"\xa1\x03\xff\xfe\xc3"
    else:
        return None
    send(described_list(head, fields))
    return _fault(f"field:{op}", name, f"{f.name}", DECODE)


def type_of(name: str) -> Any:
    from amqp_sansio.v1_0._specbase import CLASSES

    return CLASSES[name]


FIELD_OPS = ("null-mandatory", "wrong-type", "int-boundary", "count-lies", "size-lies",
              "extra-fields", "unknown-descriptor", "trailing", "deep-properties",
              "wide-properties", "bad-utf8")


def _field_op(op: str) -> Callable[[Script], Fault | None]:
    return lambda s: _mutate_field(s, op)


# -- frame -----------------------------------------------------------------------
def _framing(s: Script, label: str, data: bytes, detail: str, *, accept: bool = False
             ) -> Fault:
    s.handshake()
    s.begin(0)
    s.raw(label, data, faulty=True)
    return _fault(f"frame:{label}", "frame", detail, FRAMING, accept=accept, drop=True)


def op_frame_small_size(s: Script) -> Fault:
    n = s.rng.between(0, 7)
    return _framing(s, "size-below-8", frame(b"", size=n) + bytes(8),
                    f"frame size {n}")


def op_frame_doff(s: Script) -> Fault:
    d = s.rng.pick([0, 1, 200])
    b = perf(spec.Flow(next_incoming_id=0, incoming_window=1, next_outgoing_id=0,
                       outgoing_window=1))
    return _framing(s, "bad-doff", frame(b, doff=d), f"data offset {d}")


def op_frame_type(s: Script) -> Fault:
    t = s.rng.pick([2, 3, 0x41, 0xff])
    return _framing(s, "unknown-type", frame(perf(spec.End()), ftype=t), f"frame type {t}")


def op_frame_sasl_after_open(s: Script) -> Fault:
    init = spec.SaslInit(mechanism="ANONYMOUS")
    return _framing(s, "sasl-after-open", perf_frame(init, ftype=TYPE_SASL),
                    "a sasl-init frame once the connection is open")


def op_frame_size_claims_more(s: Script) -> Fault:
    n = s.rng.pick([64, 511])
    f = s.rng.pick(["end", "flow"])
    body = perf(spec.End()) if f == "end" else perf(spec.Flow(
        next_incoming_id=0, incoming_window=1, next_outgoing_id=0, outgoing_window=1))
    pad = n - 8 - len(body)
    fault = _framing(s, "size-claims-more", frame(body, 0, size=n) + bytes(pad),
                     f"a {8 + len(body)}-octet {f} declared as {n}, zeros after the body")
    return attrs.evolve(fault, accept=True, conditions=fault.conditions | DECODE)


# -- state -----------------------------------------------------------------------
def _state(kind: str, target: str, detail: str, conditions: frozenset[str] = SESSION, *,
           accept: bool = False) -> Fault:
    return _fault(f"state:{kind}", target, detail, conditions, accept=accept)


def op_state_unattached_transfer(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    ghost = _Link("ghost", 0, s.rng.pick([5, 1000, 0xFFFFFFFF]), spec.Role.SENDER, "")
    s.transfer(ghost, b"ghost", settled=False, faulty=True)
    return _state("unattached-transfer", "transfer", f"handle {ghost.handle} never attached")


def op_state_unattached_flow(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    f = spec.Flow(next_incoming_id=0, incoming_window=_WINDOW, next_outgoing_id=0,
                  outgoing_window=_WINDOW, handle=7, link_credit=10, delivery_count=0)
    s.raw("flow for handle 7 (never attached)", perf_frame(f, 0), faulty=True)
    return _state("unattached-flow", "flow", "handle 7 never attached")


def op_state_unattached_detach(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    s.raw("detach handle 9 (never attached)", perf_frame(spec.Detach(handle=9, closed=True)),
          faulty=True)
    return _state("unattached-detach", "detach", "handle 9 never attached")


def op_state_handle_in_use(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    a = s.sender(0)
    s.items[-1] = attrs.evolve(s.items[-1], wait=f"attach:{a.name}")
    s.sender(0, s.address(1), handle=a.handle, wait=False)
    s.items[-1] = attrs.evolve(s.items[-1], faulty=True)
    return _state("handle-in-use", "attach", f"handle {a.handle} attached twice")


def op_state_begin_twice(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    b = spec.Begin(next_outgoing_id=0, incoming_window=_WINDOW, outgoing_window=_WINDOW)
    s.raw("begin on 0 again", perf_frame(b, 0), faulty=True)
    return _state("begin-twice", "begin", "a second begin on a channel in use", STATE)


def op_state_unbegun_channel(s: Script) -> Fault:
    s.handshake()
    p = s.rng.pick(["attach", "end", "flow"])
    body: Any = {"attach": spec.Attach(name="x", handle=0, role=spec.Role.SENDER),
                 "end": spec.End(),
                 "flow": spec.Flow(next_incoming_id=0, incoming_window=1, next_outgoing_id=0,
                                   outgoing_window=1)}[p]
    s.raw(f"{p} on channel 3 (never begun)", perf_frame(body, 3), faulty=True)
    return _state("unbegun-channel", p, "a performative on a channel never begun", STATE)


def op_state_beyond_credit(s: Script) -> Fault:
    _ch, snd = s.session()
    k = s.rng.pick([1, 100, 300])
    # The credit the peer granted is unknown here: send well beyond any usual
    # grant (the peer may still have granted that much: accept is allowed).
    for i in range(k):
        s.transfer(snd, b"%d" % i, settled=True, faulty=True)
    return _state("beyond-credit", "transfer", f"{k} settled transfers after one flow",
                  SESSION | {spec.LinkCondition.TRANSFER_LIMIT_EXCEEDED.value}, accept=True)


def op_state_transfer_on_receiver(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    rcv = s.attach(0, spec.Role.RECEIVER, s.address())
    s.transfer(rcv, b"wrong way", settled=False, faulty=True)
    return _state("transfer-on-receiver", "transfer", "a transfer on our receiving link",
                  SESSION | DECODE)


def op_state_open_twice(s: Script) -> Fault:
    s.handshake()
    s.raw("open again", perf_frame(spec.Open(container_id="again")), faulty=True)
    return _state("open-twice", "open", "a second open", STATE | DECODE)


def op_state_after_close(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    s.raw("close", perf_frame(spec.Close()))
    s.raw("begin after our close", perf_frame(spec.Begin(
        next_outgoing_id=0, incoming_window=1, outgoing_window=1), 1), faulty=True)
    s.barrier = "none"
    return _state("after-close", "begin", "a begin after our close", STATE | FRAMING,
                  accept=True)


def op_state_disposition_unknown(s: Script) -> Fault:
    s.handshake()
    s.begin(0)
    first = s.rng.pick([0, 1000, 0xFFFFFFF0])
    d = spec.Disposition(role=spec.Role.RECEIVER, first=first, last=first + 10, settled=True,
                         state=spec.Accepted())
    s.raw(f"disposition {first}..{first + 10} (never sent)", perf_frame(d, 0), faulty=True)
    return _state("disposition-unknown", "disposition", "ids never delivered", SESSION,
                  accept=True)


# -- handshake -------------------------------------------------------------------
_HEADERS = {"0-9-1": b"AMQP\x00\x00\x09\x01", "0-10": b"AMQP\x01\x01\x00\x0a",
            "1.0-id-9": b"AMQP\x09\x01\x00\x00", "2.0": b"AMQP\x00\x02\x00\x00",
            "garbage": b"GET / HTTP/1.1\r\n\r\n"}


_BAD_HEADER_NAMES = sorted(k for k in _HEADERS if casegen.bad_headers(_HEADERS[k][:8]))


def op_handshake_bad_header(s: Script) -> Fault:
    k = s.rng.pick(_BAD_HEADER_NAMES)
    s.raw(f"protocol header {k}", _HEADERS[k], faulty=True)
    s.barrier = "none"
    # the spec: answer with a header we speak, then close the socket (a
    # close with framing-error in between is polite, and allowed)
    return _fault("handshake:bad-header", "header", k, FRAMING, drop=True)


def op_handshake_no_sasl(s: Script) -> Fault:
    s.raw("AMQP header (no SASL)", spec.AMQP_HEADER, faulty=True)
    s.open()
    s.items[-1] = attrs.evolve(s.items[-1], faulty=True)
    return _fault("handshake:no-sasl", "header", "the AMQP header without SASL first",
                  frozenset({spec.AmqpCondition.UNAUTHORIZED_ACCESS.value}) | STATE,
                  accept=True, drop=True)


def op_handshake_unoffered(s: Script) -> Fault:
    s.header()
    s.start_ok(mechanism=s.rng.pick(["FUZZ-MECH", "CRAM-MD5", "GSSAPI"]))
    s.items[-1] = attrs.evolve(s.items[-1], faulty=True)
    s.barrier = "none"
    return attrs.evolve(_fault("handshake:unoffered-mechanism", "sasl-init",
                               "a mechanism not offered", frozenset(), drop=True),
                        close={1})  # sasl-outcome auth


def op_handshake_small_frame(s: Script) -> Fault:
    s.until_open()
    n = s.rng.pick([0, 8, 511])
    o = spec.Open.unchecked(container_id=f"{s.tag}.c", max_frame_size=n)
    s.raw(f"open max-frame-size {n}", perf_frame(o), wait="open", faulty=True)
    return _fault("handshake:small-frame", "open", f"max-frame-size {n} (< 512)",
                  DECODE | frozenset({spec.AmqpCondition.FRAME_SIZE_TOO_SMALL.value}),
                  accept=True)


def op_handshake_open_early(s: Script) -> Fault:
    s.header()
    s.raw("open before sasl-init", perf_frame(spec.Open(container_id="early")), faulty=True)
    s.barrier = "none"
    return _fault("handshake:open-early", "open", "an AMQP frame inside the SASL exchange",
                  FRAMING | DECODE, drop=True)


#: Disposition ranges at the ends of the delivery-id space, reversed
#: (last before first), wrapping, or one end only: the 1.0 shape of the
#: serial-range crash class.  (first, last); last None: first alone.
DISPOSITION_EXTREMES = ((0, 2**31 - 1), (2**31 - 1, 0), (0xFFFFFFFF, 0x7FFFFFFE),
                        (0x7FFFFFFE, 0xFFFFFFFF), (0, 0xFFFFFFFF), (0xFFFFFFFF, 0),
                        (2**31 - 1, 2**31), (0xFFFFFFFF, None), (5, 3))


def op_state_disposition_extremes(s: Script) -> Fault:
    """A disposition naming an extreme, reversed or wrapping range of
    delivery-ids (with a transfer of ours unsettled, or none), either role:
    the peer must refuse or ignore it and stay up, answering promptly (no
    walk over 2**31 ids)."""
    s.handshake()
    s.begin(0)
    if s.rng.chance(0.5):
        a = s.sender(0)
        s.wait_credit(a)
        s.transfer(a, b"fz", settled=False)
    first, last = s.rng.pick(list(DISPOSITION_EXTREMES))
    role = s.rng.pick([spec.Role.RECEIVER, spec.Role.SENDER])
    d = spec.Disposition(role=role, first=first, last=last, settled=s.rng.chance(0.7),
                         state=s.rng.pick([spec.Accepted(), spec.Released(), None]))
    s.raw(f"disposition {role.name.lower()} {first}..{last}", perf_frame(d, 0), faulty=True)
    return _state("disposition-extremes", "disposition", f"first {first} last {last}",
                  SESSION, accept=True)


def op_state_unattached_controls(s: Script) -> Fault:
    """Session and link performatives where nothing is attached or begun:
    a flow, disposition or detach on a channel never begun, an attach on a
    channel never begun, a transfer or flow for a handle beyond every
    attached one."""
    s.handshake()
    how = s.rng.pick(["flow-unbegun", "disposition-unbegun", "detach-unbegun",
                      "attach-unbegun", "transfer-high-handle"])
    if how == "transfer-high-handle":
        s.begin(0)
        t = spec.Transfer(handle=0xFFFFFFFF, delivery_id=0, delivery_tag=b"x", settled=True)
        s.raw("transfer on handle 2**32-1 (never attached)", perf_frame(t, 0), faulty=True)
        return _state("unattached-controls", "transfer", how)
    ch = s.rng.between(1, 5)
    if how == "flow-unbegun":
        perf: Any = spec.Flow(next_incoming_id=0, incoming_window=_WINDOW, next_outgoing_id=0,
                              outgoing_window=_WINDOW)
    elif how == "disposition-unbegun":
        perf = spec.Disposition(role=spec.Role.RECEIVER, first=0, settled=True)
    elif how == "detach-unbegun":
        perf = spec.Detach(handle=0, closed=True)
    else:
        perf = spec.Attach(name=f"fz-unbegun.{s.tag}", handle=0, role=spec.Role.SENDER,
                           target=spec.Target(address=s.address(0)), initial_delivery_count=0)
    s.raw(f"{type(perf).__name__.lower()} on channel {ch} (never begun)", perf_frame(perf, ch),
          faulty=True)
    return _state("unattached-controls", type(perf).__name__.lower(), how)


OPERATORS: casegen.Operators[Script] = {
    "valid": [("send-receive", 4, op_valid_send_receive), ("drain", 1, op_valid_drain),
              ("two-sessions", 1, op_valid_two_sessions),
              ("settle-modes", 1, op_valid_settle_modes), ("echo", 1, op_valid_echo),
              ("aborted", 1, op_valid_aborted), ("extended-header", 1,
                                                 op_valid_extended_header),
              ("tiny-writes", 1, op_valid_tiny_writes)],
    "field": [(op, 1, _field_op(op)) for op in FIELD_OPS],
    "frame": [("size-below-8", 1, op_frame_small_size), ("bad-doff", 1, op_frame_doff),
              ("unknown-type", 1, op_frame_type),
              ("sasl-after-open", 1, op_frame_sasl_after_open),
              ("size-claims-more", 1, op_frame_size_claims_more)],
    "state": [("unattached-transfer", 1, op_state_unattached_transfer),
              ("unattached-flow", 1, op_state_unattached_flow),
              ("unattached-detach", 1, op_state_unattached_detach),
              ("handle-in-use", 1, op_state_handle_in_use),
              ("begin-twice", 1, op_state_begin_twice),
              ("unbegun-channel", 1, op_state_unbegun_channel),
              ("beyond-credit", 1, op_state_beyond_credit),
              ("transfer-on-receiver", 1, op_state_transfer_on_receiver),
              ("open-twice", 1, op_state_open_twice), ("after-close", 1, op_state_after_close),
              ("disposition-unknown", 1, op_state_disposition_unknown),
              ("disposition-extremes", 2, op_state_disposition_extremes),
              ("unattached-controls", 1, op_state_unattached_controls)],
    "handshake": [("bad-header", 1, op_handshake_bad_header),
                  ("no-sasl", 1, op_handshake_no_sasl),
                  ("unoffered-mechanism", 1, op_handshake_unoffered),
                  ("small-frame", 1, op_handshake_small_frame),
                  ("open-early", 1, op_handshake_open_early)],
}


def operator_names() -> list[str]:
    return casegen.operator_names(OPERATORS)


def make_case(seed: int, number: int, cfg: GenConfig | None = None) -> Case:
    """Case ``number`` of the 1.0 campaign seeded ``seed`` -- deterministic
    (its random source salted ``1.0/``)."""
    return casegen.make_case(seed, number, cfg or GenConfig(), operators=OPERATORS,
                             families=FAMILIES, script=Script, salt="1.0/")


def describe(case: Case) -> str:
    """A human-readable listing of a case."""
    f = case.fault
    return "\n".join([
        f"case {case.name} (AMQP 1.0): family {case.family}, fault {f.kind} on "
        f"{f.target}: {f.detail}",
        f"  conformant: accept={f.accept} conditions={sorted(f.conditions)} drop={f.drop}; "
        f"barrier {case.barrier}",
        *(f"  documented deviation {tag}: {note}" for tag, note in f.deviations),
        *casegen.item_lines(case)])
