"""``amqp-sansio fuzz --protocol 0-9-1``: the 0-9-1 generator, monitor and
oracle, in memory and against a real RabbitMQ.

Pure:

* a case is a pure function of (seed, case number); its JSON round-trips;
* every operator produces cases, and their faults are well formed (the
  family, a faulty item, a conformant reaction, codes 0-9-1 defines);
* valid cases are legal for our own server-role core, and the framing faults
  are refused by it with a code the fault allows (the generator and the core
  agree on the spec);
* the monitor stays silent on a conformant in-memory server (our core plus a
  responder) playing valid cases, and names the rule when that server breaks
  one;
* the oracle turns documented deviations into ``deviation`` and anything
  else into a non-conformant outcome.

Against peers over TCP:

* a tiny broker on our core that answers an unknown delivery tag with the
  right code, the wrong code, nothing, or a duplicated reply is judged
  rejected, wrong-code, missed, violation;
* a 150-case campaign against the private RabbitMQ node (every family):
  every case has an outcome, nothing our harness could cause (crash, hang,
  an unknown non-conformance), reproducers replay to the same outcome, and
  the CLI runs it (and refuses ``--target embedded``).
"""

from __future__ import annotations

import collections
import json
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rabbitmq import Node

from amqp_sansio import sasl
from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import METHODS_BY_NAME, Method
from amqp_sansio.v0_9_1.connection import Connection, Role, ServerConfig
from amqp_sansio.v0_9_1.framing import PROTOCOL_HEADER
from amqp_sansio_cli.main import main
from amqp_sansio_fuzz import reproducer, wire_0_9_1
from amqp_sansio_fuzz.campaign import CampaignConfig, campaign
from amqp_sansio_fuzz.case import Case, Fault
from amqp_sansio_fuzz.generate_0_9_1 import (
    FAMILIES,
    OPERATORS,
    GenConfig,
    Script,
    describe,
    make_case,
    operator_names,
)
from amqp_sansio_fuzz.monitor_0_9_1 import Monitor
from amqp_sansio_fuzz.oracle import NONCONFORMANT, OUTCOMES, Observation, classify
from amqp_sansio_fuzz.play import run_case
from amqp_sansio_fuzz.runner import RunConfig, Target
from amqp_sansio_fuzz.signals import MonitorConfig, Signal
from amqp_sansio_fuzz.specinfo_0_9_1 import DEV, REPLY_CODES
from amqp_sansio_fuzz.values import Names, case_rng

pytest_plugins = ["conftest_rabbitmq"]

_DEV_TAG = re.compile(r"^(reset|hang|accept|drop|close:\d{3}|channel-close:\d{3})$")


# -- the generator ----------------------------------------------------------------


def test_cases_are_pure_functions_of_seed_and_number() -> None:
    a = [make_case(11, n) for n in range(150)]
    assert a == [make_case(11, n) for n in range(150)]
    assert all(c.protocol == "0-9-1" for c in a)
    assert [c.sent_octets() for c in a] != [make_case(12, n).sent_octets() for n in range(150)]
    for c in a:
        j = json.loads(json.dumps(c.to_json()))
        assert j["protocol"] == "0-9-1"
        assert Case.from_json(j) == c
    # a name tag changes names, not the structure of the case
    tagged = make_case(11, 7, GenConfig(run_tag="zz"))
    assert [i.label.replace(".zz", "") for i in tagged.items] == [
        i.label for i in make_case(11, 7).items]


def test_every_operator_produces_well_formed_cases() -> None:
    assert set(FAMILIES) == set(OPERATORS) == {"valid", "field", "frame", "state", "handshake"}
    for op in operator_names():
        fam = op.split(":")[0]
        for n in range(6):
            c = make_case(3, n, GenConfig(operators=(op,)))
            f = c.fault
            assert c.family == fam, op
            assert f.kind == "valid" or f.kind.startswith(fam + ":"), (op, f.kind)
            assert c.items and all(isinstance(i.data, bytes) for i in c.items)
            if fam != "handshake":
                assert c.items[0].data == PROTOCOL_HEADER, op
            faulty = [i for i in c.items if i.faulty]
            if f.valid:
                assert not faulty, op
            elif fam != "handshake" or "header" not in f.kind:
                assert faulty, (op, f.kind)
            # a conformant peer has at least one way to react
            assert f.accept or f.close or f.channel_close or f.drop, (op, f.kind)
            assert (f.close | f.channel_close) <= REPLY_CODES, (op, f.kind)
            for tag, note in f.deviations:
                assert _DEV_TAG.match(tag) and "RabbitMQ" in note, (op, tag)
            assert describe(c).startswith(f"case {c.name} (AMQP 0-9-1)")


def test_operators_cover_the_method_classes() -> None:
    """Field operators pick methods from the generated classes' FIELDS."""
    seen: collections.Counter[str] = collections.Counter()
    for n in range(400):
        c = make_case(5, n, GenConfig(families=("field",)))
        seen[c.fault.target] += 1
    methods = {t for t in seen if t in METHODS_BY_NAME}
    assert len(methods) >= 15, sorted(seen)
    assert {m.split(".")[0] for m in methods} >= {"queue", "exchange", "basic", "channel"}


def _server() -> Connection:
    return Connection(Role.SERVER, ServerConfig(
        authenticator=sasl.ServerAuthenticator.standard(check_password=lambda u, p: True),
        heartbeat=0))


def test_valid_cases_are_legal_for_our_core() -> None:
    """Every octet of a valid case passes our own server-role core."""
    for n in range(300):
        c = make_case(21, n, GenConfig(families=("valid",)))
        srv = _server()
        for it in c.items:
            for e in srv.receive_data(it.data) if it.data else ():
                assert not isinstance(e, ev.ProtocolViolation), (describe(c), e)
        assert not srv.closed, describe(c)


_FRAMING = ("frame:bad-frame-end", "frame:unknown-type", "frame:oversized",
            "frame:orphan-content", "frame:body-short", "frame:header-class-id",
            "frame:header-weight", "field:short-method", "field:truncated",
            "field:overlong-shortstr", "field:bad-table-tag", "field:table-size-overrun",
            "frame:heartbeat-payload", "frame:wrong-type")


def test_framing_faults_are_refused_by_our_core_with_an_allowed_code() -> None:
    seen: set[str] = set()
    for n in range(1500):
        c = make_case(6, n, GenConfig(families=("field", "frame")))
        if c.fault.kind not in _FRAMING:
            continue
        srv = _server()
        with pytest.raises(RemoteProtocolError) as e:
            for it in c.items:
                srv.receive_data(it.data)
        assert e.value.code in c.fault.close, (describe(c), e.value)
        seen.add(c.fault.kind)
    assert seen == set(_FRAMING) - {"frame:wrong-type"} or seen == set(_FRAMING)


# -- the monitor against a conformant (and a broken) in-memory server -------------


class Responder:
    """Our server-role core plus the application part of a broker: it
    answers every request, delivers nothing, acks publishes in confirm mode,
    and refuses acknowledgements of tags it never delivered -- the way
    ``mode`` says (``conformant``: channel.close 406; ``wrong-code``: 404;
    ``silent``: not at all; ``double-reply``: a conformant broker that also
    sends every declare-ok twice)."""

    def __init__(self, mode: str = "conformant") -> None:
        self.mode = mode
        self.conn = _server()
        self.confirm: dict[int, int] = {}
        self.extra = b""

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""  # an item that only waits (b"" would be end of input)
        try:
            events = self.conn.receive_data(data)
        except RemoteProtocolError:
            return self.conn.data_to_send()
        for e in events:
            self._event(e)
        out = self.conn.data_to_send() + self.extra
        self.extra = b""
        return out

    def _event(self, e: ev.Event) -> None:
        if isinstance(e, ev.ChannelClosed):
            self.confirm.pop(e.channel, None)  # a reopened channel starts unconfirmed
            return
        if isinstance(e, ev.MessageReceived) and e.channel in self.confirm:
            self.confirm[e.channel] += 1
            self.conn.channel(e.channel).send(spec.BasicAck(delivery_tag=self.confirm[e.channel]))
            return
        if not isinstance(e, ev.MethodReceived) or e.request is not None:
            return
        m, ch = e.method, self.conn.channels.get(e.channel)
        if ch is None or not ch.is_open:
            return  # closed since: what came in the same read is discarded
        if m.NAME in ("basic.ack", "basic.nack", "basic.reject"):
            if m.delivery_tag == 0 and getattr(m, "multiple", False):
                return  # everything outstanding: nothing was delivered
            code = {"conformant": 406, "wrong-code": 404}.get(self.mode)
            if code is not None:
                ch.close(code, "unknown delivery tag", m.CLASS_ID, m.METHOD_ID)
            return
        if not m.expects_reply:
            return
        if m.NAME == "confirm.select":
            self.confirm[e.channel] = 0
        reply = _reply(m)
        ch.send(reply)
        if self.mode == "double-reply" and m.NAME == "queue.declare":
            self.extra += wire_0_9_1.method_frame(e.channel, reply)


def _reply(m: Any) -> Method:
    if m.NAME == "basic.get":
        return spec.BasicGetEmpty()
    if m.NAME == "queue.declare":
        return spec.QueueDeclareOk(queue=m.queue or "amq.gen-fz", message_count=0,
                                   consumer_count=0)
    if m.NAME == "basic.consume":
        return spec.BasicConsumeOk(consumer_tag=m.consumer_tag or "amq.ctag-fz")
    cls = METHODS_BY_NAME[m.RESPONSES[0]]
    kw = {f.attr: getattr(m, f.attr) for f in cls.FIELDS
          if f.attr is not None and hasattr(m, f.attr)}
    return cls(**kw)


def _play_in_memory(case: Case, peer: Responder) -> Monitor:
    mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
    for it in [*case.items, None]:
        data = it.data if it is not None else wire_0_9_1.method_frame(
            0, spec.ConnectionClose(reply_code=200))
        mon.sent(data, faulty=it.faulty if it is not None else False)
        out = peer.feed(data)
        while out:
            mon.received(out)
            back = b"".join(mon.take_replies())
            mon.sent(back)
            out = peer.feed(back) if back else b""
    return mon


def test_monitor_is_silent_on_a_conformant_server() -> None:
    for n in range(150):
        c = make_case(31, n, GenConfig(families=("valid",)))
        mon = _play_in_memory(c, Responder())
        assert not mon.violations and not mon.deviations, (describe(c), mon.violations)
        assert mon.opened and mon.peer_close_ok, describe(c)


def _ack_case(tag: int = 5) -> Case:
    s = Script(GenConfig(), case_rng(0, 0), Names("t"), "t")
    s.prefix(wait=True)
    s.method(1, spec.BasicAck(delivery_tag=tag), faulty=True)
    s.method(1, spec.QueueDeclare(queue="t.q0", passive=True), wait="queue.declare-ok:1")
    return s.finish(0, 0, "state", Fault(kind="state:unknown-delivery-tag", target="basic.ack",
                                         accept=False, channel_close={406}))


def test_monitor_names_the_rule_a_server_breaks() -> None:
    mon = _play_in_memory(_ack_case(), Responder("double-reply"))
    assert [v.rule for v in mon.violations][:1] == ["channel.unexpected-reply"]
    base = _play_in_memory(_ack_case(), Responder())
    assert not base.violations
    bad = [
        (wire_0_9_1.method_frame(1, spec.BasicDeliver(consumer_tag="nobody", delivery_tag=1,
                                                       exchange="", routing_key="k"))
         + wire_0_9_1.frame(2, 1, wire_0_9_1.header_payload(60, 0)),
         "basic.deliver-unknown-consumer"),
        (wire_0_9_1.method_frame(1, spec.ChannelClose(reply_code=504)), "channel.close-code"),
        (wire_0_9_1.method_frame(0, spec.ConnectionClose(reply_code=505, class_id=60,
                                                         method_id=40)),
         "connection.close-method"),
        (wire_0_9_1.method_frame(1, spec.BasicAck(delivery_tag=1)), "confirm.unsolicited"),
        (wire_0_9_1.method_frame(1, spec.ChannelOpenOk()), "channel.open-ok-unsolicited"),
        (wire_0_9_1.method_frame(3, spec.QueueDeclareOk(queue="x")), "channel.unused"),
        (wire_0_9_1.frame(1, 1, b"\x00\x32"), "core.connection"),
    ]
    for data, rule in bad:
        mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
        peer = Responder()
        case = _ack_case()
        for it in case.items[:5]:  # handshake, channel 1, declare
            mon.sent(it.data)
            mon.received(peer.feed(it.data))
        assert not mon.violations
        mon.received(data)
        assert rule in [v.rule for v in mon.violations], (rule, mon.violations)


def test_monitor_after_close_rule() -> None:
    mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
    peer = Responder()
    for it in _ack_case().items[:5]:
        mon.sent(it.data)
        mon.received(peer.feed(it.data))
    close = wire_0_9_1.method_frame(0, spec.ConnectionClose(reply_code=320))
    mon.received(close + wire_0_9_1.method_frame(1, spec.QueueDeclareOk(queue="t.q0")))
    assert [v.rule for v in mon.violations] == ["connection.after-close"]
    assert [s.kind for s in mon.signals] == ["close"]
    assert mon.take_replies() == [wire_0_9_1.method_frame(0, spec.ConnectionCloseOk())]


def test_monitor_accepts_close_ok_to_a_close_sent_mid_handshake() -> None:
    """Our connection.close before tune-ok (and before open) is answered
    with close-ok: a conformant ending, also when the peer's tune crosses
    our close."""
    close = wire_0_9_1.method_frame(0, spec.ConnectionClose(reply_code=200))
    items = _ack_case().items  # header, start-ok, tune-ok, open, ...
    for sent_before in (1, 2, 3):
        mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
        peer = Responder()
        for it in items[:sent_before]:
            mon.sent(it.data)
            mon.received(peer.feed(it.data))
        mon.sent(close)
        mon.received(peer.feed(close))
        assert not mon.violations, (sent_before, mon.violations)
        assert mon.peer_close_ok
    mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
    peer = Responder()
    mon.sent(items[0].data)
    mon.received(peer.feed(items[0].data))
    mon.sent(items[1].data)
    tune = peer.feed(items[1].data)
    mon.sent(close)
    mon.received(tune)
    mon.received(peer.feed(close))
    assert not mon.violations and mon.peer_close_ok


# -- the oracle ---------------------------------------------------------------


def _case(**fault: Any) -> Case:
    return Case(seed=0, number=0, family="field", protocol="0-9-1", items=(),
                fault=Fault(kind="field:x", target="queue.declare", **fault))


def test_oracle_for_0_9_1() -> None:
    after = {"after_fault": True}
    c = _case(accept=False, close={501}, deviations=[DEV.UNKNOWN_METHOD])
    assert classify(c, Observation(eof=True, fault_sent=True)).kind == "deviation"
    assert classify(c, Observation(signals=(Signal("close", 0, 501, **after),), eof=True,
                                   fault_sent=True)).kind == "rejected"
    assert classify(c, Observation(signals=(Signal("close", 0, 505, **after),), eof=True,
                                   fault_sent=True)).kind == "wrong-code"
    assert classify(c, Observation(fault_sent=True, opened=True)).kind == "missed"
    # channel.close: the fault's codes, or the codes the named method allows
    c2 = _case(accept=True, channel_close={406})
    ok = Signal("channel-close", 1, 406, command="queue.declare", faulty=True, **after)
    assert classify(c2, Observation(signals=(ok,), fault_sent=True)).kind == "rejected"
    missing = Signal("channel-close", 1, 404, command="queue.bind", **after)
    assert classify(c2, Observation(signals=(missing,), fault_sent=True)).kind == "rejected"
    wrong = Signal("channel-close", 1, 313, command="queue.declare", faulty=True, **after)
    assert classify(c2, Observation(signals=(wrong,), fault_sent=True)).kind == "wrong-code"
    # a documented monitor deviation, unless something worse happened
    from amqp_sansio_fuzz.signals import Violation
    d = (Violation(DEV.RETURN_312, "x"),)
    assert classify(c2, Observation(deviations=d)).kind == "deviation"
    assert classify(c2, Observation(deviations=d, timed_out="x")).kind == "hang"
    assert "deviation" in OUTCOMES and "deviation" not in NONCONFORMANT


# -- a broken peer over TCP ------------------------------------------------------------


class FakeBroker:
    """A :class:`Responder` per connection, on a loopback socket."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.target = Target("127.0.0.1", self.srv.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(sock,), daemon=True).start()

    def _conn(self, sock: socket.socket) -> None:
        peer = Responder(self.mode)
        with sock:
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                out = peer.feed(data)
                if out:
                    sock.sendall(out)
                if peer.conn.closed:
                    return

    def close(self) -> None:
        self.srv.close()


@pytest.mark.parametrize(("mode", "outcome"), [("conformant", "rejected"),
                                               ("wrong-code", "wrong-code"),
                                               ("silent", "missed"),
                                               ("double-reply", "violation")])
def test_a_broken_broker_is_caught(mode: str, outcome: str) -> None:
    broker = FakeBroker(mode)
    try:
        cfg = RunConfig(target=broker.target, step_timeout=2.0, monitor=MonitorConfig(
            mechanism="PLAIN", username="guest", password="guest"))
        r = run_case(_ack_case(), cfg)
    finally:
        broker.close()
    assert r.outcome.kind == outcome, (r.outcome, r.observation)
    if mode == "wrong-code":
        assert "channel.close(404)" in r.outcome.detail


# -- against RabbitMQ -------------------------------------------------------------------

#: Non-conformance RabbitMQ 3.10 shows that is not a documented deviation:
#: the README's findings.  Anything else failing is ours.


def _consume_then_cancel(case: Case) -> bool:
    """Finding 2: a basic.cancel pipelined behind its basic.consume (no wait
    for consume-ok) may crash RabbitMQ's channel (541, or silence)."""
    pending: set[str] = set()
    for it in case.items:
        ch = it.label.rsplit(" ch", 1)[-1].split(" ")[0]
        if it.label.startswith("basic.consume ch"):
            if it.wait is None:
                pending.add(ch)
            else:
                pending.discard(ch)
        elif it.label.startswith("basic.cancel ch") and ch in pending:
            return True
    return False


def _known(row: Any, cfg: Any) -> bool:
    if row.outcome == "reset" and row.fault == "field:bad-table-tag":
        return True  # finding 1
    if row.outcome == "violation" and row.detail.startswith("shortstr.utf8"):
        return True  # finding 4: an echo of what we sent
    if row.outcome == "hang" or (row.outcome == "wrong-code" and "close(541)" in row.detail):
        return _consume_then_cancel(make_case(cfg.seed, row.case, cfg.gen))  # finding 2
    return False


@pytest.fixture(scope="module")
def rabbit_campaign(rabbitmq: Node, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    out = tmp_path_factory.mktemp("fz091")
    gen = GenConfig(username=rabbitmq.username, password=rabbitmq.password,
                    virtual_host=rabbitmq.vhost, run_tag=uuid.uuid4().hex[:6])
    cfg = CampaignConfig(target=Target(rabbitmq.host, rabbitmq.port), seed=2024, cases=150,
                         gen=gen, out=out, step_timeout=2.0, max_minimise_tests=6,
                         minimise_budget=8.0, target_label=f"{rabbitmq.host}:{rabbitmq.port}")
    yield cfg, campaign(cfg)


def test_campaign_against_rabbitmq(rabbit_campaign: Any) -> None:
    cfg, result = rabbit_campaign
    rows = result.rows
    assert len(rows) == 150 and result.stopped == "done"
    assert {r.family for r in rows} == set(FAMILIES)
    assert all(r.outcome in OUTCOMES for r in rows)
    kinds = collections.Counter(r.outcome for r in rows)
    assert kinds["accepted"] > 20 and kinds["rejected"] > 20, kinds
    assert not kinds["crash"], [r for r in rows if r.outcome == "crash"]
    unknown = [r for r in rows if r.outcome in NONCONFORMANT and not _known(r, cfg)]
    assert not unknown, unknown
    # documented deviations are recognised (RabbitMQ shows several in 150 cases)
    assert kinds["deviation"] > 0, kinds
    # every non-conformant case and one example per deviation has a reproducer
    for r in rows:
        if r.outcome in NONCONFORMANT:
            assert r.reproducer and Path(r.reproducer).is_file(), r


def test_reproducers_replay_to_the_same_outcome(rabbitmq: Node, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    gen = GenConfig(username=rabbitmq.username, password=rabbitmq.password,
                    operators=("field:bad-table-tag", "field:unknown-method"),
                    run_tag=uuid.uuid4().hex[:6])
    cfg = CampaignConfig(target=Target(rabbitmq.host, rabbitmq.port), seed=7, cases=6, gen=gen,
                         out=tmp_path, max_minimise_tests=6, minimise_budget=8.0)
    result = campaign(cfg)
    assert result.reproducers, result.rows
    for path in result.reproducers:
        case, j = reproducer.load(path)
        assert case.protocol == "0-9-1"
        capsys.readouterr()
        rc = main(["fuzz", "replay", str(path), "--target", f"{rabbitmq.host}:{rabbitmq.port}"])
        got = json.loads(capsys.readouterr().out)
        assert got["reproduced"] is True, (path, got)
        assert got["outcome"]["kind"] == j["outcome"]["kind"]
        assert rc == (1 if got["outcome"]["kind"] in NONCONFORMANT else 0)
    # minimised: the bad-table-tag resets keep the handshake and the fault
    resets = [p for p in result.reproducers if Path(p).name.startswith("reset-")]
    for p in resets:
        case, j = reproducer.load(p)
        assert j["minimised"]["reproducible"] is True
        assert case.items[-1].faulty and len(case.items) <= j["minimised"]["from_items"]


def test_cli_fuzz_0_9_1(rabbitmq: Node, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    target = f"{rabbitmq.host}:{rabbitmq.port}"
    rc = main(["fuzz", "--protocol", "0-9-1", "--target", target, "--cases", "25", "--seed",
               "3", "--out", str(tmp_path), "--quiet", "--no-minimise", "--families",
               "valid,state", "--fail-on", "crash,hang", "--user", rabbitmq.username,
               "--password", rabbitmq.password])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "25 AMQP 0-9-1 cases" in text and "TOTAL" in text
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 25 and {r["family"] for r in rows} <= {"valid", "state"}
    assert (tmp_path / "summary.txt").read_text().startswith("amqp-sansio fuzz: 25 AMQP 0-9-1")
    # The embedded broker answers 0-9-1 too (its front_0_9_1): a short campaign
    # of every family finds nothing non-conformant in it.
    rc = main(["fuzz", "--protocol", "0-9-1", "--target", "embedded", "--cases", "40",
               "--seed", "3", "--out", str(tmp_path / "embedded"), "--quiet", "--no-minimise",
               "--fail-on", "all"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "non-conformant: 0 of 40 cases" in text
    assert main(["fuzz", "operators", "--protocol", "0-9-1"]) == 0
    assert "unknown-delivery-tag" in capsys.readouterr().out
    assert main(["fuzz", "--protocol", "0-9-1", "show", "--seed", "1", "--case", "2"]) == 0
    assert "(AMQP 0-9-1)" in capsys.readouterr().out


def test_an_ack_of_everything_covers_deliveries_tagged_before_it_was_read() -> None:
    """The README's campaign, 0-9-1 seed 3 cases 5797 and 8561 (not
    reproducible on replay): after ``basic.ack(0, multiple)`` and a
    ``channel.flow`` the broker wrote flow-ok, then deliveries 2-4 with
    prefetch-count 2 -- delivery 2 had its tag before the broker read the
    ack, which covered it.  The monitor counted it and reported a prefetch
    overrun; a real overrun after that is still one."""

    def deliver(tag: int) -> bytes:
        return (wire_0_9_1.method_frame(1, spec.BasicDeliver(
            consumer_tag="c1", delivery_tag=tag, exchange="", routing_key="k"))
            + wire_0_9_1.frame(2, 1, wire_0_9_1.header_payload(60, 0)))

    def setup() -> Monitor:
        mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
        peer = Responder()
        for it in _ack_case().items[:5]:  # handshake, channel 1, declare
            mon.sent(it.data)
            mon.received(peer.feed(it.data))
        mon.sent(wire_0_9_1.method_frame(1, spec.BasicQos(prefetch_count=2)))
        mon.received(wire_0_9_1.method_frame(1, spec.BasicQosOk()))
        mon.sent(wire_0_9_1.method_frame(1, spec.BasicConsume(queue="t.q0", consumer_tag="c1")))
        mon.received(wire_0_9_1.method_frame(1, spec.BasicConsumeOk(consumer_tag="c1")))
        mon.received(deliver(1))
        mon.sent(wire_0_9_1.method_frame(1, spec.BasicAck(delivery_tag=0, multiple=True))
                 + wire_0_9_1.method_frame(1, spec.ChannelFlow(active=True)))
        mon.received(wire_0_9_1.method_frame(1, spec.ChannelFlowOk(active=True)))
        return mon

    mon = setup()
    mon.received(deliver(2) + deliver(3) + deliver(4))
    assert not mon.violations, mon.violations
    mon.received(deliver(5))  # 3 and 4 unacknowledged, prefetch-count 2
    assert [v.rule for v in mon.violations] == ["basic.qos-prefetch"]


def test_what_comes_on_a_channel_we_are_closing_is_not_judged() -> None:
    """RabbitMQ, seed 91 case 2295 (a campaign of the observer monitor):
    after our basic.consume and channel.close it sent a basic.deliver for the
    consumer, no consume-ok, then close-ok.  Sent before it read our close:
    discarded, as the core discards it -- not a delivery for an unknown
    consumer.  On an open channel the same delivery is one."""

    def play(close: bool) -> Monitor:
        mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
        peer = Responder()
        for it in _ack_case().items[:5]:  # handshake, channel 1, declare
            mon.sent(it.data)
            mon.received(peer.feed(it.data))
        mon.sent(wire_0_9_1.method_frame(1, spec.BasicConsume(queue="t.q0", consumer_tag="c9")))
        if close:
            mon.sent(wire_0_9_1.method_frame(1, spec.ChannelClose(reply_code=200)))
        mon.received(wire_0_9_1.method_frame(1, spec.BasicDeliver(
            consumer_tag="c9", delivery_tag=1, exchange="", routing_key="k"))
            + wire_0_9_1.frame(2, 1, wire_0_9_1.header_payload(60, 0)))
        if close:
            mon.received(wire_0_9_1.method_frame(1, spec.ChannelCloseOk()))
        return mon

    closing = play(True)
    assert not closing.violations, closing.violations
    assert closing.channel_gone(1)
    assert [v.rule for v in play(False).violations] == ["basic.deliver-unknown-consumer"]
