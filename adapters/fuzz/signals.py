"""What a monitor reports about the peer, whatever the protocol.  Pure.

* :class:`Violation` -- a rule the peer's own output broke (named, e.g.
  ``session.command-point`` in 0-10, ``channel.unexpected-reply`` in 0-9-1);
  a monitor also reports *documented deviations* with it: rules a known
  implementation breaks on purpose (the oracle's ``deviation`` outcome).
* :class:`Signal` -- something the peer did that the oracle judges: its
  rejections (0-10: ``connection.close``, ``session.detached``,
  ``execution.exception``; 0-9-1: ``connection.close``, ``channel.close``)
  and other turns (``close-ok``, ``session.detach``, a redirect, the peer's
  protocol header).
* :class:`MonitorConfig` -- who we are to the peer (role, credentials,
  frame size, virtual host), for every protocol's monitor.
* :class:`MonitorBase` -- the bookkeeping every monitor shares (what it
  reports, the counters waits are measured against, the state of both
  sides' closes, our own octets and their protocol header) and what the
  runner asks of any monitor.
"""

from __future__ import annotations

__all__ = ["Signal", "Violation", "MonitorBase", "MonitorConfig", "complete_header"]

from typing import Any

import attrs


@attrs.frozen
class MonitorConfig:
    role: str = "client"  # our role; the peer has the other one
    mechanism: str = "ANONYMOUS"
    username: str | None = None
    password: str | None = None
    frame_max: int = 4096
    virtual_host: str = "/"


@attrs.frozen
class Violation:
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


@attrs.frozen
class Signal:
    """Something the peer did that the oracle judges."""

    # close | close-ok | detached | detach | exception | redirect (0-10);
    # close | close-ok | channel-close | header (0-9-1)
    kind: str
    channel: int | None = None
    code: int | None = None
    command: str | None = None  # what the rejection names (exception: its command-id)
    faulty: bool = False  # that command came from a faulty item
    after_fault: bool = False  # sent after we had sent the fault
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v not in (None, "", False)}


def complete_header(head: bytes, data: bytes) -> tuple[bytes, bytes]:
    """``head`` completed towards the 8-octet protocol header from ``data``,
    and what follows it in ``data``."""
    need = 8 - len(head)
    return head + data[:need], data[need:]


class MonitorBase:
    """Watches one connection: the protocol-neutral half (see the protocol
    monitors, :mod:`.monitor_0_10` and :mod:`.monitor_0_9_1`)."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.deviations: list[Violation] = []  # documented deviations
        self.signals: list[Signal] = []
        self.counters: dict[str, int] = {}  # what the peer sent, by kind (waits compare)
        self.handshake: set[str] = set()  # the peer's connection methods/controls seen
        self.core_failed = False  # our core refused the peer's octets
        self.fault_sent = False
        self._current_faulty = False  # the octets being sent carry the fault
        self.sent_broken = False  # our own octets stopped being valid framing
        self._our_header = b""
        self.peer_closed = False  # the peer sent connection.close
        self.peer_close_ok = False
        self.we_closed = False
        self.eof = False
        self.received_octets = 0
        self.sent_octets = 0
        self.trace: list[str] = []  # what the peer sent, in order (see .feedback.tokens)
        self.peer_said: dict[str, str] = {}  # what the peer says it is (see .profiles.identity)

    # -- what the runner asks ------------------------------------------------
    @property
    def over(self) -> bool:
        """Nothing more will come from the peer."""
        raise NotImplementedError

    @property
    def opened(self) -> bool:
        return "connection.open-ok" in self.handshake

    def satisfied(self, wait: str, mark: dict[str, int]) -> bool:
        """Has the peer done what ``wait`` waits for since ``mark``?"""
        raise NotImplementedError

    def sent(self, data: bytes, *, faulty: bool = False) -> None:
        """We wrote ``data``."""
        raise NotImplementedError

    def received(self, data: bytes) -> None:
        """The peer wrote ``data``."""
        raise NotImplementedError

    def end_of_input(self) -> None:
        """The peer closed its side (or the connection reset)."""
        raise NotImplementedError

    def mark(self) -> dict[str, int]:
        return dict(self.counters)

    #: we answered the peer's close (a reflex); monitors that queue replies set it
    answered_close = False

    def take_replies(self) -> list[bytes]:
        """The replies the peer's input calls for, queued by the monitor
        (taken once; none unless the protocol's monitor queues them)."""
        return []

    # -- helpers ---------------------------------------------------------------
    def violation(self, rule: str, message: str) -> None:
        if len(self.violations) < 50:
            self.violations.append(Violation(rule, message))

    def deviation(self, rule: str, message: str) -> None:
        if len(self.deviations) < 20:
            self.deviations.append(Violation(rule, message))

    def count(self, key: str) -> None:
        """One more ``key`` (what :meth:`satisfied` and :meth:`mark` read);
        the order they came in is the peer's response sequence (``trace``)."""
        self.counters[key] = self.counters.get(key, 0) + 1
        if len(self.trace) < 4096:
            self.trace.append(key)

    def _note_sent(self, data: bytes, faulty: bool) -> bool:
        """Count what we wrote and whether it carries the fault; False when
        there is nothing to parse (no octets, or our framing broke before)."""
        self.sent_octets += len(data)
        if faulty:
            self.fault_sent = True
        self._current_faulty = faulty
        return bool(data) and not self.sent_broken
