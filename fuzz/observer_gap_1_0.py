"""Our 1.0 core in the fuzz monitor's seat: can it book what we send?

Issue 25 asks that the fuzz monitor run the core in an observer role
instead of its own rules; 0-9-1/0-9 do (``Connection(observer=True)``), 1.0
does not yet.  This script measures the gap the way 0-9-1's was measured
before its role existed (``fuzz/observer_gap_0_9_1.py --public-api``), on
the 1.0 monitor tests' in-memory peer (our server-role core, accepting what
a case asks for), with the runner's reflexes (the monitor's replies):

* the monitor (``Monitor``), fed both directions -- a conformant peer, so it
  must report nothing (asserted);
* a *shadow*: a client-role :class:`Connection` told what we send through
  the public API (``begin``, ``attach_sender``/``attach_receiver``,
  ``Link.flow``/``send``/``detach``, ``Session.flow``/``end``, ``close``)
  and reading every octet the peer sends.

Per case it records whether the shadow refused to book something we sent
(a ``LocalProtocolError``, a channel or handle other than ours, nothing to
book it with) and whether it reported the peer (a ``ProtocolViolation``).
The shadow is now the observer role by default (``Connection(observer=True)``
told our octets with ``observe_sent``: what its local checks would refuse
is booked and noted, not refused); ``--public-api`` is the baseline above.
Run: ``python fuzz/observer_gap_1_0.py --cases 2000 --seed 1 [--public-api]``.

Measured at 1577ba5 (``--public-api`` since): seeds 1/2/3 x 1000, a booking refused in 737/758/742
cases (490/515/495 other than by our octets turning undecodable), the peer
reported in 16/8/18 (all begin.remote-channel, after a refusal); seed 1 x
2000: 1477 (999), 32.  The observer role: refused 0/0/0, the peer reported
in 0/0/0, sends its local checks would refuse booked and noted in 431/447/431.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path
from typing import Any

from amqp_sansio.errors import DecodeError, LocalProtocolError, RemoteProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role
from amqp_sansio.v1_0.framing import TYPE_SASL, Frame, FrameReader
from amqp_sansio.v1_0.link import Link
from amqp_sansio.v1_0.session import Session, SessionConfig
from amqp_sansio_fuzz.generate_1_0 import make_case
from amqp_sansio_fuzz.monitor_1_0 import Monitor
from amqp_sansio_fuzz.signals import MonitorConfig

_TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(_TESTS / "fuzz"), str(_TESTS / "support")]
from test_fuzz_1_0 import _OurServer  # noqa: E402  (the monitor tests' peer)

_UNDECODABLE = "our octets undecodable (from here on nothing is booked)"


def _read_peer(core: Connection, data: bytes, reports: collections.Counter[str]) -> bool:
    """The peer's octets into ``core``, each ProtocolViolation counted in
    ``reports`` by its rule; True when the core raised (stop feeding it)."""
    try:
        events = core.receive_data(data)
        stopped = False
    except RemoteProtocolError as err:
        events, stopped = list(err.events), True
    for e in events:
        if isinstance(e, ev.ProtocolViolation):
            reports[e.rule or e.condition or e.message] += 1
    return stopped


class Observer:
    """A client core in the observer role, told our octets as they go."""

    def __init__(self) -> None:
        self.core = Connection(Role.CLIENT, ClientConfig(), observer=True)
        self.refused: collections.Counter[str] = collections.Counter()
        self.reports: collections.Counter[str] = collections.Counter()
        self.noted = 0  # sends its local checks would have refused
        self.stopped = False

    def sent(self, data: bytes) -> None:
        try:
            self.noted += len(self.core.observe_sent(data))
        except LocalProtocolError as e:
            self.refused[f"observe_sent: {str(e)[:60]}"] += 1
        assert not self.core.data_to_send()  # (it writes nothing)

    def received(self, data: bytes) -> None:
        if self.stopped or not data:
            return
        self.stopped = _read_peer(self.core, data, self.reports)
        assert not self.core.data_to_send()


class Shadow:
    """A client core booking what we send through the public API."""

    def __init__(self) -> None:
        self.core: Connection | None = None  # made at our open (its config from it)
        self.ours = FrameReader(1 << 32)
        self.sasl = False
        self.started = False
        self.waiting = b""  # the peer's octets before our open
        self.sessions: dict[int, Session] = {}  # by our channel
        self.links: dict[tuple[int, int], Link] = {}  # by (our channel, our handle)
        self.refused: collections.Counter[str] = collections.Counter()
        self.reports: collections.Counter[str] = collections.Counter()
        self.stopped = False

    def sent(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            self.sasl = data[:8] == spec.SASL_HEADER
        try:
            items = self.ours.feed(data)
        except DecodeError:
            self.refused[_UNDECODABLE] += 1
            self.stopped = True
            return
        for f in items:
            if isinstance(f, Frame) and f.type != TYPE_SASL and f.body is not None:
                try:
                    self._book(f.channel, f.body)
                except LocalProtocolError as e:
                    why = re.sub(r"\d+|'[^']*'", "N", e.message if hasattr(e, "message")
                                 else str(e))
                    self.refused[f"{type(f.body).__name__.lower()}: {why[:70]}"] += 1
                if self.core is not None:
                    self.core.data_to_send()  # (written by nobody)

    def _book(self, ch: int, p: Any) -> None:
        if isinstance(p, spec.Open):
            if self.core is None:
                self.core = Connection(Role.CLIENT, ClientConfig(
                    sasl=self.sasl, container_id=p.container_id or "c",
                    max_frame_size=max(512, min(p.max_frame_size or 0xFFFFFFFF, 0xFFFFFFFF)),
                    channel_max=p.channel_max if p.channel_max is not None else 0xFFFF))
                self.core.data_to_send()
                if self.waiting:
                    self.received(self.waiting)
            return
        if self.core is None:
            self.refused["a frame before our open"] += 1
            return
        if isinstance(p, spec.Begin):
            s = self.core.begin(SessionConfig(
                next_outgoing_id=p.next_outgoing_id or 0, incoming_window=p.incoming_window or 0,
                outgoing_window=p.outgoing_window or 0,
                handle_max=p.handle_max if p.handle_max is not None else 0xFFFFFFFF))
            if s.channel != ch:
                self.refused["begin: the core chose another channel"] += 1
            self.sessions[ch] = s
        elif isinstance(p, spec.Attach):
            self._attach(ch, p)
        elif isinstance(p, spec.Flow):
            if p.handle is None:
                if (ses := self.sessions.get(ch)) is not None:
                    ses.flow(echo=bool(p.echo))
            elif (lk := self._link(ch, p.handle, "flow")) is not None:
                lk.flow(p.link_credit or 0, drain=bool(p.drain), echo=bool(p.echo))
        elif isinstance(p, spec.Transfer):
            if (lk := self._link(ch, p.handle, "transfer")) is not None:
                lk.send(b"", tag=p.delivery_tag, settled=p.settled)
        elif isinstance(p, spec.Disposition):
            self.refused["disposition: no call books a range of ids"] += 1
        elif isinstance(p, spec.Detach):
            if (lk := self._link(ch, p.handle, "detach")) is not None:
                del self.links[(ch, p.handle)]
                lk.detach(closed=bool(p.closed))
        elif isinstance(p, spec.End):
            if (gone := self.sessions.pop(ch, None)) is not None:
                gone.end()
        elif isinstance(p, spec.Close):
            self.core.close()

    def _attach(self, ch: int, p: spec.Attach) -> None:
        s = self.sessions.get(ch)
        if s is None:
            self.refused["attach: no session of ours on its channel"] += 1
            return
        kw: dict[str, Any] = {}
        if p.snd_settle_mode is not None:
            kw["snd_settle_mode"] = p.snd_settle_mode
        if p.rcv_settle_mode is not None:
            kw["rcv_settle_mode"] = p.rcv_settle_mode
        attach = s.attach_sender if p.role is spec.Role.SENDER else s.attach_receiver
        lk = attach(p.name, **kw)
        if lk.handle != p.handle:
            self.refused["attach: the core chose another handle"] += 1
        self.links[(ch, p.handle)] = lk

    def _link(self, ch: int, handle: int, what: str) -> Link | None:
        lk = self.links.get((ch, handle))
        if lk is None:
            self.refused[f"{what}: no link of ours on its handle"] += 1
        return lk

    def received(self, data: bytes) -> None:
        if self.core is None:
            self.waiting += data
            return
        if self.stopped or self.core.closed:
            return
        self.stopped = _read_peer(self.core, data, self.reports)
        self.core.data_to_send()


def run_case(seed: int, n: int, public_api: bool = False) -> Shadow | Observer:
    case = make_case(seed, n)
    srv, mon = _OurServer(), Monitor(MonitorConfig())
    sh: Shadow | Observer = Shadow() if public_api else Observer()

    def peer(data: bytes) -> None:
        if data and not srv.core.closed:
            out = srv.feed(data)
            sh.received(out)
            mon.received(out)

    for it in case.items:
        sh.sent(it.data)
        mon.sent(it.data, faulty=it.faulty)
        peer(it.data)
        for reply in mon.take_replies():  # what the runner would answer
            sh.sent(reply)
            mon.sent(reply)
            peer(reply)
    assert not mon.violations, (n, mon.violations)  # a conformant peer
    return sh


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--public-api", action="store_true",
                    help="book our sends through the client API (the gap before the observer role)")
    a = ap.parse_args()
    refused = checks = reported = alone = noted = 0
    first_refusal: collections.Counter[str] = collections.Counter()
    reports: collections.Counter[str] = collections.Counter()
    for n in range(a.cases):
        sh = run_case(a.seed, n, a.public_api)
        noted += isinstance(sh, Observer) and sh.noted > 0
        refused += bool(sh.refused)
        checks += any(k != _UNDECODABLE for k in sh.refused)
        reported += bool(sh.reports)
        alone += bool(sh.reports) and not sh.refused
        if sh.refused:
            first_refusal[next(iter(sh.refused))] += 1
        reports.update(set(sh.reports))
    print(f"{a.cases} cases, seed {a.seed}, our server core as the peer, booked by "
          f"{'the public API' if a.public_api else 'the observer role'}")
    print(f"cases where the core refused a booking: {refused} ({checks} other than "
          "by our octets becoming undecodable)")
    print(f"cases where the core reported the (conformant) peer: {reported} "
          f"({alone} without a refusal)")
    if not a.public_api:
        print(f"cases with a send the local checks would refuse (booked, noted): {noted}")
    print("what the core refused to book first (cases):")
    for k, v in first_refusal.most_common(10):
        print(f"  {v:5d}  {k}")
    print("what the core reported (cases):")
    for k, v in reports.most_common(10):
        print(f"  {v:5d}  {k}")


if __name__ == "__main__":
    main()
