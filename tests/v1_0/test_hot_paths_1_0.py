"""The 1.0 hot path is the one path, read and written faster.

Receiving: ``framing.transfer_fields`` reads the common transfer (one frame
of a delivery, no state) as a tuple; what it accepts, the generic decoder
reads as the same Transfer, and what it refuses (anything unusual) it
leaves to that decoder; on any octets it never raises.  The reader knows
a transfer laid out as the last common one by comparing octets: read so,
it is still the generic decoder's Transfer, whatever octet differs; such
transfers come as one run, and a run is one input at each layer.  Sending:
a delivery's one frame written by the connection's ``write_transfer`` is
the octets the generated encoder makes of the same Transfer.  End to end, a
conversation with runs and the common frame and the same one with them
switched off (every transfer alone, every frame encoded the long way)
leave the same octets on the wire, the same events and the same state."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqp_sansio.engine import process_input
from amqp_sansio.errors import DecodeError
from amqp_sansio.v1_0 import connection as conn_mod
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import framing
from amqp_sansio.v1_0 import session as session_mod
from amqp_sansio.v1_0.connection import Connection, ConnState, Role
from amqp_sansio.v1_0.framing import (
    Frame,
    FrameReader,
    TransferRun,
    accepted_disposition,
    decode_frame,
    encode_frame,
    transfer_fields,
    transfer_of,
)
from amqp_sansio.v1_0.link import LINK_MACHINE, Delivery, Link, LinkState, LinkStep
from amqp_sansio.v1_0.spec import Accepted, Disposition, Released, Transfer
from amqp_sansio.v1_0.spec import Role as LinkRole
from tests.support.pair_1_0 import Pair
from tests.support.strategies_1_0 import instances, typed_eq

U32 = st.integers(0, 0xFFFFFFFF)
TAGS = st.binary(max_size=32)


_COMMON_TAIL = (False, None, None, False, False, False)


def _frames(item: Any) -> list[Any]:
    """A run as the Frames it stands for (a common transfer's body as its
    five fields, any other as its eleven), anything else as itself."""
    if type(item) is not TransferRun:
        return [item]
    return [Frame(0, item.channel, f[:5] if f[5:11] == _COMMON_TAIL else f[:11], f[11])
            for f in item.frames]


def _read(octets: bytes, fast: bool) -> Any:
    r = FrameReader(1 << 20, header=False)
    r.receive(octets)
    item = r.next_input() if fast else r.next_item()
    assert (r.next_input() if fast else r.next_item()) is None
    got = _frames(item)
    assert len(got) == 1
    return got[0]


@st.composite
def common(draw: st.DrawFn) -> Transfer:
    """A transfer the hot path takes: first and only frame, no state."""
    return Transfer(handle=draw(U32), delivery_id=draw(U32), delivery_tag=draw(TAGS),
                    message_format=draw(U32), settled=draw(st.none() | st.booleans()))


@given(instances(Transfer), st.binary(max_size=40))
def test_fast_reading_agrees_with_the_generic_decoder(t: Transfer, payload: bytes) -> None:
    octets = encode_frame(t, 3, payload)
    slow = _read(octets, False)
    fast = _read(octets, True)
    assert fast.channel == slow.channel == 3
    assert fast.payload == slow.payload == payload
    if type(fast.body) is tuple:
        assert typed_eq(transfer_of(fast.body), slow.body)
    else:
        assert typed_eq(fast.body, slow.body)


@given(common(), st.binary(max_size=40))
def test_the_common_transfer_takes_the_fast_path(t: Transfer, payload: bytes) -> None:
    fast = _read(encode_frame(t, 0, payload), True)
    assert fast.body == (t.handle, t.delivery_id, t.delivery_tag, t.message_format, t.settled)
    assert fast.payload == payload


def test_list32_and_explicit_defaults_as_rhea_and_rabbitmq_write_them() -> None:
    # rhea: list32, six fields; RabbitMQ: list8, all eleven (nulls and falses);
    # qpidd 1.39: list8, four (settled absent: None, as the decoder reads it)
    rhea = bytes.fromhex("0053 14 d0 0000000e 00000006 5201 5201 a00131 43 42 42")
    rabbit = bytes.fromhex("0053 14 c0 17 0b 5201 5201 a0080000000000000002 43 42 42 40 40 42 42 42")
    qpidd = bytes.fromhex("0053 14 c0 0b 04 43 5201 a00401000000 43")
    for body, tag, settled in ((rhea, b"1", False), (rabbit, b"\0" * 7 + b"\2", False),
                               (qpidd, b"\1\0\0\0", None)):
        got = transfer_fields(body + b"MSG", 3, len(body) + 3)
        assert got == ((0 if body is qpidd else 1, 1, tag, 0, settled), len(body))
        assert transfer_fields(bytearray(body + b"MSG"), 3, len(body) + 3) == got
        octets = (8 + len(body) + 3).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body + b"MSG"
        assert typed_eq(transfer_of(_read(octets, True).body), _read(octets, False).body)


@pytest.mark.parametrize("hexa", [
    "0053 14 c0 0a 06 5201 5201 a00131 43 42 41",  # more: a delivery of several frames
    "0053 14 c0 0b 07 5201 5201 a00131 43 42 42 00",  # rcv-settle-mode given
    "0053 14 c0 0d 08 5201 5201 a00131 43 42 42 40 005324 45",  # a state
    "0053 14 c0 0b 0a 5201 5201 a00131 43 42 42 40 40 42 41",  # aborted
    "0053 14 c0 07 03 5201 5201 a00131",  # message-format absent too
    "0053 14 c0 09 04 5201 5201 a00131 5201",  # settled absent, a list size that does not add up
    "0053 14 c0 09 05 5201 40 a00131 43 42",  # no delivery-id: a later frame
    "0053 14 c0 0b 05 5201 5201 a00131 43 42 40",  # a list size that does not add up
])
def test_anything_unusual_is_left_to_the_generic_decoder(hexa: str) -> None:
    body = bytes.fromhex(hexa)
    assert transfer_fields(body, 3, len(body)) is None
    assert transfer_fields(bytearray(body), 3, len(body)) is None  # (octet by octet)


@given(st.binary(max_size=60), st.integers(0, 70))
def test_fast_reading_never_raises_and_never_reads_past_the_frame(junk: bytes, cut: int) -> None:
    body = b"\x00\x53\x14" + junk
    end = min(cut, len(body))
    got = transfer_fields(body, 3, end)
    if got is not None:
        assert got[1] <= end
        assert transfer_fields(body[:end], 3, end) == got
    # bytes take the usual rest of a transfer in one lookup, a bytearray
    # octet by octet: the same answer
    assert transfer_fields(bytearray(body), 3, end) == got


def _items(octets: bytes, fast: bool, cut: int) -> list[Any]:
    """What a reader makes of ``octets`` received in two reads (cut at
    ``cut``), fast (runs of transfers laid out alike, then the next item)
    or not: a FastTransfer as the Frame it stands for, a DecodeError as
    itself (the reader is spent then)."""
    r = FrameReader(1 << 16, header=False)
    out: list[Any] = []
    for chunk in (octets[:cut], octets[cut:]):
        r.receive(chunk)
        try:
            while (item := r.next_input() if fast else r.next_item()) is not None:
                out += [Frame(0, f.channel, transfer_of(f.body), f.payload)
                        if type(f.body) is tuple else f for f in _frames(item)]
        except DecodeError as e:
            return [*out, (e.message, e.offset)]
    return out


@given(common(), st.binary(max_size=20), U32, st.data(), st.integers(0, 0xFFFF))
def test_a_transfer_laid_out_as_the_last_one_is_read_as_the_decoder_reads_it(
        t: Transfer, payload: bytes, did: int, data: st.DataObject, channel: int) -> None:
    # the reader knows the next transfer by the last one's layout (its
    # octets but the delivery-id and tag): the same transfer with another
    # id and tag of the same sizes, or with any one octet changed, or cut
    # anywhere, reads as the generic decoder reads it
    tag = data.draw(st.binary(min_size=len(t.delivery_tag), max_size=len(t.delivery_tag)))
    if (did < 256) != (t.delivery_id < 256) or (did == 0) != (t.delivery_id == 0):
        did = t.delivery_id
    second = bytearray(encode_frame(attrs.evolve(t, delivery_id=did, delivery_tag=tag), channel,
                                    data.draw(st.binary(max_size=20))))
    if data.draw(st.booleans()):
        second[data.draw(st.integers(0, len(second) - 1))] = data.draw(st.integers(0, 255))
    octets = (encode_frame(t, channel, payload) + bytes(second) + encode_frame(t, channel)
              + bytes(second))
    cut = data.draw(st.integers(0, len(octets)))
    fast, slow = _items(octets, True, cut), _items(octets, False, cut)
    for a, b in zip(fast, slow, strict=True):
        assert typed_eq(a, b)


def test_the_next_transfer_laid_out_the_same_is_not_read_field_by_field(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(framing, "transfer_fields",
                        lambda *a: calls.append(1) or transfer_fields(*a))  # type: ignore[func-returns-value]
    frames = [Transfer(handle=0, delivery_id=300 + i, delivery_tag=b"%04d" % i,
                       message_format=0, settled=i == 2) for i in range(4)]
    def runs() -> list[list[Any]]:
        out = []
        while (item := r.next_input()) is not None:
            out.append([(item.channel, f.body, f.payload) for f in _frames(item)])
        return out

    r = FrameReader(1 << 16, header=False)
    r.receive(b"".join(encode_frame(f, 5, b"m%d" % i) for i, f in enumerate(frames)))
    got = runs()
    want = [(5, (0, 300 + i, b"%04d" % i, 0, i == 2), b"m%d" % i) for i in range(4)]
    assert got == [want[:2], want[2:3], want[3:]]  # runs of frames laid out alike
    assert len(calls) == 3  # the first, the settled one (another layout), the one after it
    r.receive(b"".join(encode_frame(f, 5, b"m%d" % i) for i, f in enumerate(frames)))
    assert runs() == [want[:2], want[2:3], want[3:]]  # the first two: the last one's layout
    assert len(calls) == 5
    r = FrameReader(64, header=False)  # the frame size limit holds all the same
    r.receive(encode_frame(frames[0], 5, b"m") + encode_frame(frames[1], 5, b"m" * 40))
    assert _frames(r.next_input()) == [Frame(0, 5, (0, 300, b"0000", 0, False), b"m")]
    with pytest.raises(DecodeError, match="exceeds the limit of 64"):
        r.next_input()


@given(instances(Transfer), st.binary(max_size=8))
def test_the_rest_looked_up_is_the_rest_read_octet_by_octet(t: Transfer, payload: bytes) -> None:
    octets = encode_frame(t, 0, payload)
    assert transfer_fields(octets, 11, len(octets)) == \
        transfer_fields(bytearray(octets), 11, len(octets))


@given(st.integers(0, 0xFFFF), U32, U32, TAGS, U32, st.booleans(), st.binary(max_size=300))
def test_fast_writing_makes_the_encoders_octets(channel: int, handle: int, did: int, tag: bytes,
                                                fmt: int, settled: bool, payload: bytes) -> None:
    c = Connection(Role.CLIENT, conn_mod.ClientConfig(sasl=False))
    c.state = ConnState.OPENED
    c.peer_max_frame_size = 1 << 20
    c.data_to_send()
    assert c.write_transfer(channel, handle, did, tag, fmt, settled, payload)
    fast = c.data_to_send()
    t = Transfer(handle=handle, delivery_id=did, delivery_tag=tag, message_format=fmt,
                 settled=settled)
    assert fast == encode_frame(t, channel, payload)


def _conversation(monkeypatch: pytest.MonkeyPatch, hot: bool) -> tuple[bytes, bytes, list[Any]]:
    """The client sends 30 deliveries (one with a state: the long way, one
    pre-settled), the server accepts them in one disposition; the server
    sends 30 back (one pre-settled), the client accepts them.  Not ``hot``:
    every transfer read alone (no runs) and every frame encoded by the
    generated encoder."""
    if not hot:
        monkeypatch.setattr(Connection, "write_transfer", lambda self, *a: False)
        monkeypatch.setattr(FrameReader, "_gather", lambda r, sh, out: out)
    p = Pair(credit=40)
    s = p.client.begin()
    snd = s.attach_sender("out")
    rcv = s.attach_receiver("in")
    rcv.flow(40)
    p.pump()
    seen: list[Any] = []
    for i in range(30):
        snd.send(b"m%d" % i, state=Accepted() if i == 7 else None, settled=i == 9)
    _, srv_events = p.pump()
    got = [e.delivery for e in srv_events if isinstance(e, ev.DeliveryReceived)]
    got[0].link.dispose_many([d for d in got if not d.settled], Accepted(), settled=True)
    ssn = p.server.sessions[got[0].link.channel]
    out = next(k for k in ssn.links.values() if k.is_sender)
    for i in range(30):
        out.send(b"r%d" % i, settled=i == 3)
    cl_events, _ = p.pump()
    cl_events = [e for e in p.events["client"] if isinstance(e, ev.ChannelEvent)]
    for e in cl_events:
        if isinstance(e, ev.DeliveryReceived) and not e.delivery.settled:
            e.delivery.settle(Accepted())
        seen.append((type(e).__name__, getattr(getattr(e, "delivery", None), "id", None),
                     getattr(e, "payload", None), getattr(e, "settled", None)))
    p.pump()
    seen.append((snd.credit, snd.delivery_count, rcv.credit, rcv.delivery_count,
                 s.next_outgoing_id, s.next_incoming_id, s.incoming_window,
                 s.remote_incoming_window, len(snd.unsettled_deliveries),
                 len(rcv.unsettled_deliveries)))
    return bytes(p.wire["c2s"]), bytes(p.wire["s2c"]), seen


def test_a_conversation_is_the_same_over_the_hot_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    hot = _conversation(monkeypatch, True)
    monkeypatch.undo()
    checked = _conversation(monkeypatch, False)
    assert hot == checked
    assert len(hot[2]) > 60  # it did happen


def test_a_run_of_transfers_is_one_input_at_each_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    # the table is checked once for a read's run, however long, at the
    # connection, the session and the link (and nothing goes beside it)
    p = Pair(credit=100)
    s = p.client.begin()
    rcv = s.attach_receiver("in")
    rcv.flow(100)
    p.pump()
    out = next(e.link for e in p.events["server"] if isinstance(e, ev.LinkAttachRequested))
    for i in range(1, 41):
        out.send(b"m%d" % i, settled=True)
    data = p.server.data_to_send()
    inputs: list[tuple[str, Any]] = []

    def counted(ep: Any, machine: Any, inp: Any, arg: Any = None, o: Any = None) -> Any:
        inputs.append((machine.name, inp))
        return process_input(ep, machine, inp, arg, o)

    monkeypatch.setattr(conn_mod, "process_input", counted)
    monkeypatch.setattr(session_mod, "process_input", counted)
    events = p.client.receive_data(data[:len(data) // 2])
    events += p.client.receive_data(data[len(data) // 2:])
    assert [e.payload for e in events] == [b"m%d" % i for i in range(1, 41)]
    assert inputs.count(("1.0 link", "transfer")) <= 3  # a read's run, and a frame cut in two
    assert len(inputs) <= 9 and {i for _, i in inputs} == {"channel", "transfer"}


def _received_in_order(runs: bool, event_first: bool = False) -> tuple[list[Any], list[Any]]:
    """Six deliveries in one read, the fourth with a state, the last
    pre-settled; with ``runs`` the receiving link reports them as runs
    (``batch_deliveries``); with ``event_first`` the read begins with
    another link's attach (an event).  (the runs' deliveries, the single
    events' deliveries)."""
    p = Pair(credit=40)
    s = p.client.begin()
    rcv = s.attach_receiver("in")
    rcv.flow(40)
    p.pump()
    rcv.batch_deliveries = runs
    out = next(e.link for e in p.events["server"] if isinstance(e, ev.LinkAttachRequested))
    if event_first:
        p.server.sessions[out.channel].attach_sender("other")
    for i in range(6):
        out.send(b"m%d" % i, state=Accepted() if i == 3 else None, settled=i == 5)
    events = p.client.receive_data(p.server.data_to_send(), now=p.now)
    got = [(e.delivery.id, e.delivery.tag, e.payload, e.delivery.settled) for e in events
           if isinstance(e, ev.DeliveryReceived)]
    batches = [e for e in events if isinstance(e, ev.DeliveriesReceived)]
    taken = [(d.id, d.tag, payload, d.settled) for e in batches
             for d, payload in zip(e.deliveries, e.payloads, strict=True)]
    # nothing else happened; a run is one event, after what came before it
    assert len(events) == len(got) + len(batches) + event_first
    assert len(batches) == (1 if runs else 0)
    if runs:
        assert events[-1] is batches[0] and batches[0].link is rcv
    # runs or not, the unsettled ones are tracked (by tag and by id)
    assert len(rcv.unsettled_deliveries) == 5
    assert sorted(s.unsettled_ids[1]) == [0, 1, 2, 3, 4]
    return taken, got


def test_deliveries_keep_their_order() -> None:
    none, every = _received_in_order(False)
    assert none == [] and [e[0] for e in every] == [0, 1, 2, 3, 4, 5]
    assert every[5][3] and not every[0][3]
    # a receiver that reports runs: one event for the six, in the same order
    taken, events = _received_in_order(True)
    assert events == [] and taken == every
    # and after an event that came first in the read
    taken, events = _received_in_order(True, event_first=True)
    assert events == [] and taken == every


@given(st.booleans(), U32, st.none() | U32, st.booleans(), st.integers(0, 0xFFFF))
def test_a_batch_of_accepts_is_the_encoders_disposition(receiver: bool, first: int,
                                                        last: int | None, batchable: bool,
                                                        channel: int) -> None:
    body = Disposition(role=LinkRole.RECEIVER if receiver else LinkRole.SENDER, first=first,
                       last=last,
                       settled=True, state=Accepted(), batchable=batchable)
    fast = encode_frame(accepted_disposition(receiver, first, last, batchable), channel)  # type: ignore[arg-type]
    assert fast == encode_frame(body, channel)


class _Port:
    """A receiving link's session, as far as settling goes: what is written."""

    def __init__(self) -> None:
        self.frames: list[Any] = []

    def run_link(self, link: Link, inp: str, arg: Any = None) -> None:
        step = LinkStep([])
        process_input(link, LINK_MACHINE, inp, arg, step)
        self.frames += [decode_frame(encode_frame(body)).body for body in step.frames]


@given(U32, st.lists(st.tuples(st.integers(1, 3), st.booleans()), min_size=1, max_size=12),
       st.randoms(use_true_random=False), st.booleans(), st.booleans())
def test_settling_many_writes_one_disposition_per_run_of_ids(
        base: int, steps: list[tuple[int, bool]], rnd: Any, shuffled: bool,
        accepted: bool) -> None:
    # a run of consecutive ids (serial: across 2**32 too) is one frame,
    # batchable when all of it is, whatever order the deliveries come in
    port = _Port()
    link = Link(port, "in", 0, LinkRole.RECEIVER)
    link.state = LinkState.ATTACHED
    ds, did = [], base
    for step, batchable in steps:
        did = (did + step) & 0xFFFFFFFF
        d = Delivery(link, did, b"%d" % did, 0, False)
        d.complete, d.batchable = True, batchable
        ds.append(d)
    runs: list[tuple[int, int, bool]] = []
    for d in ds:  # (in serial order)
        if runs and runs[-1][1] + 1 & 0xFFFFFFFF == d.id:
            runs[-1] = (runs[-1][0], d.id, runs[-1][2] and d.batchable)
        else:
            runs.append((d.id, d.id, d.batchable))
    if shuffled:
        rnd.shuffle(ds)
    state = Accepted() if accepted else Released()
    link.dispose_many(ds, state, settled=True)
    frames = port.frames
    assert [(f.first, f.last if f.last is not None else f.first, f.batchable)
            for f in frames] == runs
    assert all(f.settled and f.state == state and f.role is LinkRole.RECEIVER for f in frames)
    assert all(d.settled and d.state == state for d in ds)
