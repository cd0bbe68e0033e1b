"""The held deliveries of a stored terminus as the store writes them: an
append log, one row per store batch holding that batch's changes (a
delivery held: its tag, message and state; one settled: its tag), replaced
by a snapshot of what is held once the log outgrows it -- so a batch
writes what changed (one row, however many deliveries the terminus holds)
and the log stays within twice what is held, plus a slack.

An entry: kind (1 held, 0 gone), the tag's length (2 octets) and the tag;
for a held one the message id (8 octets), the state's length (2 octets)
and the state.  Big-endian.
"""

from __future__ import annotations

__all__ = ["HeldLog", "encode", "decode", "COMPACT_SLACK"]

import struct
from collections.abc import Iterable, Iterator
from typing import Final

#: Entries the log may hold beyond twice what is held before a snapshot
#: replaces it.
COMPACT_SLACK: Final = 64

_HEAD = struct.Struct(">BH")
_HELD = struct.Struct(">QH")

Change = tuple[int, bytes] | None  # (message, state), or None: no longer held


def encode(entries: Iterable[tuple[bytes, Change]]) -> bytes:
    out: list[bytes] = []
    for tag, held in entries:
        if held is None:
            out += (_HEAD.pack(0, len(tag)), tag)
        else:
            out += (_HEAD.pack(1, len(tag)), tag, _HELD.pack(held[0], len(held[1])), held[1])
    return b"".join(out)


def decode(data: bytes) -> Iterator[tuple[bytes, Change]]:
    """:func:`encode`'s entries (up to any that does not decode)."""
    i, end = 0, len(data)
    while i + _HEAD.size <= end:
        kind, n = _HEAD.unpack_from(data, i)
        i += _HEAD.size
        tag = data[i:i + n]
        i += n
        if kind == 0 and i <= end:
            yield tag, None
            continue
        if kind != 1 or i + _HELD.size > end:
            return
        message, n = _HELD.unpack_from(data, i)
        i += _HELD.size
        if i + n > end:
            return
        yield tag, (message, data[i:i + n])
        i += n


class HeldLog:
    """One terminus' held deliveries: what is held, the changes not yet
    written, and its log's length."""

    __slots__ = ("live", "pending", "logged", "next")

    def __init__(self) -> None:
        self.live: dict[bytes, tuple[int, bytes]] = {}
        self.pending: dict[bytes, Change] = {}
        self.logged = 0  # entries in its rows
        self.next = 0  # its next row's number

    def put(self, tag: bytes, message: int, state: bytes) -> None:
        self.live[tag] = self.pending[tag] = (message, state)

    def delete(self, tag: bytes) -> None:
        if self.live.pop(tag, None) is not None:
            self.pending[tag] = None

    def replay(self, data: bytes) -> None:
        """A stored row (recovery, rows in order)."""
        for tag, held in decode(data):
            self.logged += 1
            if held is None:
                self.live.pop(tag, None)
            else:
                self.live[tag] = held

    def take(self) -> tuple[bool, bytes] | None:
        """Its next row, if anything changed: (snapshot -- the row replaces
        every earlier one --, entries)."""
        if not self.pending:
            return None
        pending, self.pending = self.pending, {}
        if self.logged + len(pending) > 2 * len(self.live) + COMPACT_SLACK:
            self.logged = len(self.live)
            return True, encode(self.live.items())
        self.logged += len(pending)
        return False, encode(pending.items())
