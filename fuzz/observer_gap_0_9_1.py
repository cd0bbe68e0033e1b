"""Our 0-9-1 core in the fuzz monitor's seat: does it book what we send?

Issue 25 asked that the fuzz monitor run the core in an observer role
instead of its own channel rules; the monitor now does
(``Connection(observer=True)``).  This script measures a core in that seat
beside the monitor, on the monitor's own in-memory test peer (our
server-role core plus a responder that answers every request; ``--mode
double-reply`` also sends every declare-ok twice):

* the monitor (``Monitor``), fed both directions;
* a *shadow*: a client-role :class:`Connection` told everything we send --
  in the observer role (``observe_sent``), or with ``--public-api`` through
  the public client API (``open_channel``, ``Channel.send``, ``publish``,
  ``close``), how the gap was measured before the role existed -- and
  reading every octet the peer sends.

Per case it records whether the core refused to book something we sent (a
``LocalProtocolError``: the fuzzer sends what a client must not, and the
observer must book it anyway), and whether each side reported the peer.
Run: ``python fuzz/observer_gap_0_9_1.py --cases 1000 --seed 1 [--mode M]
[--public-api]``.
"""

from __future__ import annotations

import argparse
import collections
import struct
import sys
from pathlib import Path
from typing import Any

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, ConnState, Role, ServerConfig
from amqp_sansio.v0_9_1.framing import FRAME_METHOD, decode_method
from amqp_sansio.v0_9_1.table import TABLE_0_9_1
from amqp_sansio_fuzz import wire_0_9_1
from amqp_sansio_fuzz.generate_0_9_1 import GenConfig, make_case
from amqp_sansio_fuzz.monitor_0_9_1 import Monitor
from amqp_sansio_fuzz.signals import MonitorConfig

_TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(_TESTS / "fuzz"), str(_TESTS / "support")]
from test_fuzz_0_9_1 import Responder  # noqa: E402  (the monitor tests' peer)

_HDR = struct.Struct("!BHI")


class Shadow:
    """A client core that books what we send: in the observer role
    (``Connection.observe_sent``), or -- ``--public-api``, how this script
    measured the gap before that role existed -- through the public client
    API (``open_channel``, ``Channel.send``, ``publish``, ``close``), whose
    local checks refuse what the fuzzer sends on purpose."""

    def __init__(self, observer: bool) -> None:
        self.observer = observer
        self.core = Connection(Role.CLIENT, ClientConfig(
            username="guest", password="guest", mechanisms=("PLAIN",), channel_max=0,
            frame_max=0xFFFFFFFF, heartbeat=0), observer=observer)
        self.core.data_to_send()
        self.buf = bytearray()
        self.started = False
        self.header_left = 8  # our protocol header (may come in pieces)
        self.refused: list[str] = []
        self.refused_valid = 0  # refusals of items the case does not mark faulty
        self.noted = 0  # observer: sends booked with a local rule broken
        self.faulty = False
        self.flagged: list[str] = []
        self.dead = False

    def sent(self, data: bytes) -> None:
        if self.header_left:
            self.started = True
        if self.observer:
            try:
                self.noted += len(self.core.observe_sent(data))
            except LocalProtocolError as e:
                self.refused.append(f"observe: {str(e)[:60]}")
                self.refused_valid += not self.faulty
            return
        if self.header_left:
            cut = min(self.header_left, len(data))
            self.header_left -= cut
            data = data[cut:]
        self.buf += data
        while len(self.buf) >= 8:
            ftype, ch, size = _HDR.unpack_from(self.buf)
            if len(self.buf) < 8 + size:
                return
            payload = bytes(self.buf[7:7 + size])
            del self.buf[:8 + size]
            if ftype != FRAME_METHOD or ch == 0 or self.dead:
                continue  # the core runs its own handshake; content rides on its method
            try:
                m = decode_method(payload, methods=TABLE_0_9_1.methods)
            except RemoteProtocolError:
                self.refused.append("undecodable")
                self.refused_valid += not self.faulty
                continue
            try:
                self._book(ch, m)
            except LocalProtocolError as e:
                self.refused.append(f"{m.NAME}: {str(e)[:60]}")
                self.refused_valid += not self.faulty
            self.core.data_to_send()

    def _book(self, ch: int, m: Any) -> None:
        core = self.core
        if m.NAME == "channel.open":
            core.open_channel(ch)
        elif m.NAME == "channel.close":
            core.channel(ch).close(int(m.reply_code))
        elif m.NAME == "basic.publish":
            core.channel(ch).publish(m.exchange, m.routing_key, b"", mandatory=m.mandatory,
                                     immediate=m.immediate)
        else:
            core.channel(ch).send(m)

    def received(self, data: bytes) -> None:
        if self.dead or not data:
            return
        try:
            events = self.core.receive_data(data)
        except RemoteProtocolError as e:
            self.flagged.append(f"connection {e.code}: {str(e)[:60]}")
            self.dead = True
            return
        for e in events:
            if isinstance(e, ev.ProtocolViolation):
                self.flagged.append(f"{e.scope} {e.code} {e.rule}: {e.message[:50]}")
        self.core.data_to_send()


def play(case: Any, mode: str, observer: bool) -> tuple[Monitor, Shadow]:
    mon = Monitor(MonitorConfig(mechanism="PLAIN", username="guest", password="guest"))
    sh = Shadow(observer)
    peer = Responder(mode)
    if not observer:
        # The shadow's own handshake: a server core answers it, then it reads
        # the peer's channel traffic like the monitor.
        hs = Connection(Role.SERVER, ServerConfig(
            authenticator=sasl.ServerAuthenticator.standard(check_password=lambda u, p: True),
            heartbeat=0))
        hs.receive_data(b"AMQP\x00\x00\x09\x01")
        while (out := hs.data_to_send()):
            sh.core.receive_data(out)
            if (back := sh.core.data_to_send()):
                hs.receive_data(back)
        assert sh.core.state is ConnState.OPEN, sh.core.state
    for it in [*case.items, None]:
        data = it.data if it is not None else wire_0_9_1.method_frame(
            0, spec.ConnectionClose(reply_code=200))
        faulty = it.faulty if it is not None else False
        mon.sent(data, faulty=faulty)
        if data:
            sh.faulty = faulty
            sh.sent(data)
        back = peer.feed(data)
        while back:
            mon.received(back)
            if observer:
                sh.received(back)
            elif sh.started:
                sh.received(_channel_frames(back))
            ours = b"".join(mon.take_replies())
            mon.sent(ours)
            if observer and ours:
                sh.sent(ours)
            back = peer.feed(ours) if ours else b""
    return mon, sh


def _channel_frames(data: bytes) -> bytes:
    """The peer's frames on channels other than 0 (the public-API shadow
    did its own handshake with another server)."""
    out, pos = bytearray(), 0
    if data.startswith(b"AMQP"):
        return b""  # its protocol header, refusing ours: the handshake's business
    while len(data) - pos >= 8:
        _, ch, size = _HDR.unpack_from(data, pos)
        end = pos + 8 + size
        if ch:
            out += data[pos:end]
        pos = end
    return bytes(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", default="conformant",
                    choices=("conformant", "wrong-code", "silent", "double-reply"))
    ap.add_argument("--public-api", action="store_true",
                    help="book our sends through the client API (the gap before the observer role)")
    a = ap.parse_args()
    rows: collections.Counter[str] = collections.Counter()
    refusals: collections.Counter[str] = collections.Counter()
    flags: collections.Counter[str] = collections.Counter()
    noted = 0
    for n in range(a.cases):
        case = make_case(a.seed, n, GenConfig())
        mon, sh = play(case, a.mode, not a.public_api)
        m_flag, s_flag = bool(mon.violations), bool(sh.flagged)
        booked = ("booked all" if not sh.refused else
                  "refused a faulty item" if not sh.refused_valid else "refused a valid item")
        rows[f"{case.family:9s} monitor {'flags ' if m_flag else 'silent'}  core "
             f"{'flags ' if s_flag else 'silent'}  core {booked}"] += 1
        rows[f"(all)     monitor {'flags ' if m_flag else 'silent'}  core "
             f"{'flags ' if s_flag else 'silent'}  core {booked}"] += 1
        noted += bool(sh.noted)
        if sh.refused:
            refusals[sh.refused[0].split(":")[0]] += 1
        for f in sh.flagged[:1]:
            flags[f[:70]] += 1
    print(f"{a.cases} cases, seed {a.seed}, peer mode {a.mode}, "
          f"{'public API' if a.public_api else 'observer role'}")
    for k, v in sorted(rows.items()):
        print(f"  {v:5d}  {k}")
    print(f"cases with a send booked against a local rule (observer): {noted}")
    print("what the core refused to book first (cases):")
    for k, v in refusals.most_common(12):
        print(f"  {v:5d}  {k}")
    print("what the core reported first (cases):")
    for k, v in flags.most_common(12):
        print(f"  {v:5d}  {k}")


if __name__ == "__main__":
    main()
