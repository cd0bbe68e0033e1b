"""0-9's own classes in the fuzzer: the generators of ``generate_0_9``'s
``OWN_0_9`` (file, stream, message and its references, dtx, tunnel,
channel.ping, basic immediate / prefetch-size, and their faults), the
rules of ``monitor_0_9`` (each shown firing on a peer that breaks it, and
quiet on one that does not), and a campaign against the embedded broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_main import run

from amqp_sansio import sasl
from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9.connection import TABLE_0_9, Connection, Role, ServerConfig
from amqp_sansio_fuzz import wire_0_9_1 as w
from amqp_sansio_fuzz.case import Case
from amqp_sansio_fuzz.generate_0_9 import (
    OWN_0_9,
    GenConfig,
    Script,
    describe,
    make_case,
    methods_sent,
)
from amqp_sansio_fuzz.monitor_0_9 import Monitor09
from amqp_sansio_fuzz.signals import MonitorConfig
from amqp_sansio_fuzz.values import Names, case_rng

OWN = tuple(f"{fam}:{name}" for fam, ops in OWN_0_9.items() for name, _, _ in ops)


_methods = methods_sent  # (the generator's: what a case sends)


def test_own_cases_are_deterministic_per_seed() -> None:
    cfg = GenConfig(operators=OWN)
    a = [make_case(5, n, cfg) for n in range(80)]
    assert a == [make_case(5, n, cfg) for n in range(80)]
    assert a != [make_case(6, n, cfg) for n in range(80)]
    for c in a:
        assert c.protocol == "0-9" and c.family in ("valid", "state")
        assert Case.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_every_own_operator_applies_and_speaks_its_class() -> None:
    want = {"valid:file": {"file.open", "file.stage", "file.publish"},
            "valid:stream": {"stream.consume", "stream.publish"},
            "valid:message": {"message.transfer"},
            "valid:references": {"message.open", "message.append", "message.close",
                                 "message.resume", "message.transfer"},
            "valid:dtx": {"dtx.select", "dtx.start"},
            "valid:tunnel": {"tunnel.request"},
            "valid:ping": {"channel.ping"},
            "valid:basic-0-9": {"basic.qos", "basic.publish"}}
    for op in OWN:
        c = make_case(3, 0, GenConfig(operators=(op,)))
        assert c.family == op.split(":")[0] and c.items, op
        assert want.get(op, set()) <= _methods(c), describe(c)
        if op.startswith("state:"):
            assert any(i.faulty for i in c.items) or c.fault.valid, describe(c)


def test_the_new_classes_appear_in_a_default_campaign() -> None:
    """Every family's default draw: 0-9's classes turn up among the 0-9-1
    operators' cases."""
    seen: set[str] = set()
    for n in range(400):
        seen |= _methods(make_case(1, n))
    for name in ("file.open", "file.publish", "stream.publish", "message.transfer",
                 "message.resume", "dtx.start", "tunnel.request", "channel.ping"):
        assert name in seen, name


# -- the monitor's rules, against a peer we script -----------------------------------


def _opened() -> Monitor09:
    """A monitor that has seen the handshake and channel 1 opened (our 0-9
    server core in memory plays the peer)."""
    srv = Connection(Role.SERVER, ServerConfig(
        authenticator=sasl.ServerAuthenticator.standard(check_password=lambda u, p: True),
        heartbeat=0))
    mon = Monitor09(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
    s = Script(GenConfig(), case_rng(1, 0, "t"), Names("t"), "t")
    s.handshake()
    s.channel_open(1)
    for it in s.items:
        mon.sent(it.data)
        srv.receive_data(it.data)
        mon.received(srv.data_to_send())
    assert mon.channel_gone(1) is False and not mon.violations
    return mon


def _ours(mon: Monitor09, m: Any) -> None:
    mon.sent(w.method_frame(1, m))


def _peer(mon: Monitor09, m: Any, props: Any = None, body: bytes = b"") -> None:
    data = b"".join(w.content(1, m, props, body, 4000)) if m.CONTENT else w.method_frame(1, m)
    mon.received(data)


def _rules(mon: Monitor09) -> list[str]:
    return [v.rule for v in mon.violations]


def _answer(mon: Monitor09) -> list[str]:
    """Send our reflexes; their names."""
    names = []
    for data in mon.take_replies():
        mon.sent(data)
        names.append(TABLE_0_9.methods[int.from_bytes(data[7:11], "big")].NAME)
    return names


def test_ping_pong_rules_and_reflexes() -> None:
    mon = _opened()
    _ours(mon, spec09.ChannelPing())
    _peer(mon, spec09.ChannelOk())
    _peer(mon, spec09.ChannelPong())
    assert _answer(mon) == ["channel.ok"] and not mon.violations
    _peer(mon, spec09.ChannelPong())  # a second pong for one ping
    assert _rules(mon) == ["channel.pong-unsolicited"] and _answer(mon) == ["channel.ok"]
    _peer(mon, spec09.ChannelPing())  # the peer's ping: ok, then our pong
    assert _answer(mon) == ["channel.ok", "channel.pong"]


def test_message_offset_is_what_the_checkpoint_held() -> None:
    mon = _opened()
    for m in (spec09.MessageOpen(reference=b"r"), spec09.MessageAppend(reference=b"r",
                                                                         bytes=b"12345"),
              spec09.MessageCheckpoint(reference=b"r", identifier="cp"),
              spec09.MessageAppend(reference=b"r", bytes=b"678")):
        _ours(mon, m)
        _peer(mon, spec09.MessageOk())
    _ours(mon, spec09.MessageResume(reference=b"r2", identifier="cp"))
    _peer(mon, spec09.MessageOffset(value=5))
    _ours(mon, spec09.MessageResume(reference=b"r3", identifier="never"))
    _peer(mon, spec09.MessageOffset(value=0))
    assert not mon.violations
    _ours(mon, spec09.MessageResume(reference=b"r4", identifier="cp"))
    _peer(mon, spec09.MessageOffset(value=8))
    assert _rules(mon) == ["message.offset-value"]


def test_file_open_ok_reports_what_we_staged() -> None:
    mon = _opened()
    _ours(mon, spec09.FileOpen(identifier="f", content_size=10))
    _peer(mon, spec09.FileOpenOk(staged_size=0))
    mon.sent(b"".join(w.content(1, spec09.FileStage(), None, b"1234", 4000)))
    _ours(mon, spec09.FileOpen(identifier="f", content_size=10))  # resumed: 4 staged
    _peer(mon, spec09.FileOpenOk(staged_size=4))
    assert not mon.violations
    _ours(mon, spec09.FileOpen(identifier="g", content_size=10))
    _peer(mon, spec09.FileOpenOk(staged_size=3))
    assert _rules(mon) == ["file.open-ok-staged"]


def test_file_and_stream_deliveries() -> None:
    mon = _opened()
    _ours(mon, spec09.FileConsume(queue="q", consumer_tag="t"))
    _peer(mon, spec09.FileConsumeOk(consumer_tag="t"))
    _peer(mon, spec09.FileOpen(identifier="t/1", content_size=2))
    assert _answer(mon) == ["file.open-ok"]
    _peer(mon, spec09.FileStage(), spec09.FileProperties(), b"fz")
    _peer(mon, spec09.FileDeliver(consumer_tag="t", delivery_tag=1, identifier="t/1"))
    assert not mon.violations
    _peer(mon, spec09.FileDeliver(consumer_tag="t", delivery_tag=2, identifier="t/9"))
    assert _rules(mon) == ["file.deliver-unstaged"]
    _peer(mon, spec09.StreamDeliver(consumer_tag="t", delivery_tag=3, queue="q"),
          spec09.StreamProperties(), b"s")
    assert _rules(mon)[1:] == ["file.deliver-unknown-consumer"]  # a file consumer's tag


def test_returns_count_and_codes() -> None:
    mon = _opened()
    mon.sent(b"".join(w.content(1, spec09.StreamPublish(routing_key="x", mandatory=True),
                                None, b"a", 4000)))
    _peer(mon, spec09.StreamReturn(reply_code=312, reply_text="NO_ROUTE", routing_key="x"),
          spec09.StreamProperties(), b"a")
    assert not mon.violations
    _peer(mon, spec09.StreamReturn(reply_code=313, reply_text="NO_CONSUMERS"),
          spec09.StreamProperties(), b"a")
    _peer(mon, spec09.FileReturn(reply_code=200, reply_text="?"),
          spec09.FileProperties(), b"a")
    assert _rules(mon) == ["content.return-unsolicited", "content.return-unsolicited",
                           "content.return-code"]


def test_message_transfers_references_and_get() -> None:
    mon = _opened()
    _ours(mon, spec09.MessageConsume(queue="q", destination="d"))
    _peer(mon, spec09.MessageOk())
    _peer(mon, spec09.MessageTransfer(destination="d", body=b"inline"))
    for m in (spec09.MessageOpen(reference=b"amq.ref-1"),
              spec09.MessageAppend(reference=b"amq.ref-1", bytes=b"big"),
              spec09.MessageClose(reference=b"amq.ref-1"),
              spec09.MessageTransfer(destination="d", body_kind=1, body=b"amq.ref-1")):
        _peer(mon, m)
    assert _answer(mon) == ["message.ok"] * 5 and not mon.violations
    _peer(mon, spec09.MessageTransfer(destination="d", body_kind=1, body=b"amq.ref-1"))
    _peer(mon, spec09.MessageAppend(reference=b"nope", bytes=b"x"))
    _peer(mon, spec09.MessageTransfer(destination="elsewhere", body=b"x"))
    assert _rules(mon) == ["message.reference", "message.reference",
                           "file.deliver-unknown-consumer"]
    _ours(mon, spec09.MessageGet(queue="q", destination="g"))
    _peer(mon, spec09.MessageOk())  # no transfer to "g" before it: that is message.empty
    assert _rules(mon)[3:] == ["message.get-ok-empty"]


def test_a_campaign_of_0_9s_classes_against_the_embedded_broker(tmp_path: Path) -> None:
    """Every own operator, 120 cases: nothing non-conformant (before the
    broker sent large message-class bodies by reference, valid:message cases
    with a body over the frame-max were 'violation': the broker dropped the
    connection)."""
    rc, out, err = run(["fuzz", "--protocol", "0-9", "--target", "embedded", "--cases", "120",
                        "--seed", "4", "--out", str(tmp_path), "--quiet", "--no-minimise",
                        "--operators", ",".join(OWN), "--fail-on", "all"])
    text = out.decode()
    assert rc == 0, text + err.decode()
    assert "120 AMQP 0-9 cases" in text and "non-conformant: 0 of 120 cases" in text
    for target in ("file.publish", "stream.publish", "message.resume", "tunnel.request",
                   "dtx.start", "channel.ping"):
        assert target in text, target
