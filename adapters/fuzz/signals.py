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
"""

from __future__ import annotations

__all__ = ["Signal", "Violation"]

from typing import Any

import attrs


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
