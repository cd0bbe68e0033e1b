"""Message credit for one destination (message.flow and friends).

Whoever *sends* transfers to a destination keeps its credit: the server for a
subscription (credit comes from the subscriber's ``message.flow``), a client
for a destination the server throttles.  Two balances, messages and octets;
a transfer costs one message and the octets of its header and body segments
(rule byte-accounting).  ``None`` is infinite (flow value 0xFFFFFFFF or
absent).  Window mode re-grants a transfer's cost when the receiver completes
it; credit mode never does.  Adding credit saturates instead of wrapping.
"""

from __future__ import annotations

__all__ = ["Credit", "INFINITE"]

import attrs

from ..errors import LocalProtocolError

INFINITE = 0xFFFFFFFF
CREDIT_MODE, WINDOW_MODE = 0, 1
UNIT_MESSAGE, UNIT_BYTE = 0, 1
_MAX = 0xFFFFFFFE  # largest finite balance


@attrs.define(slots=True)
class Credit:
    """Credit balances of one destination (default: window mode, zero credit)."""

    mode: int = WINDOW_MODE
    messages: int | None = 0  # None = infinite
    octets: int | None = 0
    stopped: bool = False

    def set_mode(self, mode: int) -> None:
        self.mode = mode

    def add(self, unit: int, value: int | None) -> None:
        infinite = value is None or value == INFINITE
        if unit == UNIT_MESSAGE:
            self.messages = None if infinite or self.messages is None else min(
                _MAX, self.messages + value)  # type: ignore[operator]
        else:
            self.octets = None if infinite or self.octets is None else min(
                _MAX, self.octets + value)  # type: ignore[operator]
        self.stopped = False

    def stop(self) -> None:
        self.messages = 0
        self.octets = 0
        self.stopped = True

    def can_send(self, octets: int) -> bool:
        if self.messages is not None and self.messages < 1:
            return False
        return self.octets is None or self.octets >= octets

    def debit(self, octets: int, destination: str) -> None:
        messages, have = self.messages, self.octets  # (can_send, inline: once per transfer)
        if (messages is not None and messages < 1) or (have is not None and have < octets):
            raise LocalProtocolError(
                f"no credit for a {octets}-octet transfer to {destination!r} "
                f"(messages={self.messages}, octets={self.octets})")
        if messages is not None:
            self.messages = messages - 1
        if have is not None:
            self.octets = have - octets

    def debit_run(self, transfers: int, octets: int, destination: str) -> None:
        """:meth:`debit` of ``transfers`` transfers of ``octets`` in all (a
        run, checked whole: refused, nothing changes)."""
        messages, have = self.messages, self.octets
        if (messages is not None and messages < transfers) or (have is not None
                                                               and have < octets):
            raise LocalProtocolError(
                f"no credit for {transfers} transfers of {octets} octets to {destination!r} "
                f"(messages={self.messages}, octets={self.octets})")
        if messages is not None:
            self.messages = messages - transfers
        if have is not None:
            self.octets = have - octets

    def replenish(self, octets: int, transfers: int = 1) -> None:
        """Window mode: ``transfers`` transfers of ``octets`` in all were
        completed by the receiver."""
        if self.mode != WINDOW_MODE or self.stopped:
            return
        if self.messages is not None:
            self.messages = min(_MAX, self.messages + transfers)
        if self.octets is not None:
            self.octets = min(_MAX, self.octets + octets)
