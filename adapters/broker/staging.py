"""Content staged for later, within one budget for every front end.

What a peer sends now to be used later lives here: the file class's staged
content (0-9 and 0-10 ``file.open`` / ``file.stage``, published by
identifier) and a 0-10 ``message.transfer`` cut short by a lost transport
(kept by its ``resume-id`` for ``message.resume``).  Each piece is named
by its kind, its user and the peer's identifier -- the spec makes both
names unique per user, and a sender that lost its connection comes back on
a new one -- so a staging outlives the connection that made it.

The budget (:class:`~.limits.Limits`): the octets one connection has
staged (``staged_per_connection``), the octets staged across the broker
(``staged_total``) and the number of pieces (``staged_count``, each
charged :data:`ENTRY_OVERHEAD` octets besides its content).  Going over is
refused before anything is kept (``ModelError("resource-limit-exceeded")``),
so a declared content size -- a number the peer wrote -- never reserves
memory: only octets that arrived are held.  A piece whose connection went
is kept ``staged_ttl`` seconds (or its own, shorter, ttl) on the broker's
clock, then dropped.
"""

from __future__ import annotations

__all__ = ["Staged", "Staging", "ENTRY_OVERHEAD"]

import heapq
import itertools
from typing import Any

import attrs

from .limits import Limits
from .queued import ModelError

#: Octets a staged piece is charged beyond its content (its record, key and
#: the front end's note of what it was).
ENTRY_OVERHEAD = 256

Key = tuple[str, str, str]  # (kind, user, identifier)


@attrs.define(eq=False)
class Staged:
    """One piece of staged content.  ``size``: the content size declared
    (file.open), None when unknown; ``properties``: the content's header
    as the front end keeps it; ``note``: anything else its front end needs
    to finish it (a transfer's command and headers)."""

    key: Key
    size: int | None
    data: bytearray = attrs.field(factory=bytearray)
    properties: Any = None
    note: Any = None
    holder: object | None = None
    expires: float | None = None

    @property
    def complete(self) -> bool:
        return self.size is not None and len(self.data) >= self.size


def _refused(text: str) -> Exception:
    return ModelError("resource-limit-exceeded", text)


class Staging:
    """Every staged piece of a broker (see the module docstring)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.entries: dict[Key, Staged] = {}
        #: Octets charged in all; per holding connection, its octets and pieces.
        self.octets = 0
        self.by_holder: dict[object, int] = {}
        self._pieces: dict[object, dict[Key, None]] = {}
        self._heap: list[tuple[float, int, Key]] = []
        self._seq = itertools.count()

    # -- charging ------------------------------------------------------------------
    def _charge(self, holder: object | None, n: int, force: bool = False) -> None:
        lim = self.limits
        if not force and lim.staged_total is not None and self.octets + n > lim.staged_total:
            raise _refused(f"the broker holds {self.octets} octets of staged content "
                           f"(at most {lim.staged_total})")
        if holder is not None:
            mine = self.by_holder.get(holder, 0)
            if (not force and lim.staged_per_connection is not None
                    and mine + n > lim.staged_per_connection):
                raise _refused(f"this connection holds {mine} octets of staged content "
                               f"(at most {lim.staged_per_connection})")
            self.by_holder[holder] = mine + n
        self.octets += n

    def _release(self, st: Staged) -> int:
        """Take ``st`` off its holder (and the total); returns its charge."""
        n = len(st.data) + ENTRY_OVERHEAD
        self.octets -= n
        h = st.holder
        if h is not None:
            left = self.by_holder.get(h, 0) - n
            pieces = self._pieces.get(h)
            if pieces is not None:
                pieces.pop(st.key, None)
            if left > 0 and pieces:
                self.by_holder[h] = left
            else:
                self.by_holder.pop(h, None)
                self._pieces.pop(h, None)
            st.holder = None
        return n

    def _adopt(self, st: Staged, holder: object, n: int, force: bool = False) -> None:
        self._charge(holder, n, force)
        st.holder = holder
        st.expires = None
        self._pieces.setdefault(holder, {})[st.key] = None

    # -- pieces ----------------------------------------------------------------------
    def find(self, kind: str, user: str, ident: str) -> Staged | None:
        return self.entries.get((kind, user, ident))

    def open(self, kind: str, user: str, ident: str, holder: object,
             size: int | None = None) -> Staged:
        """The piece ``ident`` of ``user``, taken over by ``holder``: the one
        staged before if it is for the same size, else a new, empty one."""
        key = (kind, user, ident)
        st = self.entries.get(key)
        if st is not None and (size is None or st.size == size):
            if st.holder is not holder:
                was, expires = st.holder, st.expires
                n = self._release(st)
                try:
                    self._adopt(st, holder, n)
                except Exception:
                    # stays as it was (the charge it had is given back)
                    if was is not None:
                        self._adopt(st, was, n, force=True)
                    else:
                        self.octets += n
                        st.expires = expires
                    raise
            return st
        lim = self.limits
        if size is not None and size > lim.max_message_size:
            raise _refused(f"content of {size} octets is over the broker's limit "
                           f"({lim.max_message_size})")
        if st is not None:
            self.drop(st)
        if lim.staged_count is not None and len(self.entries) >= lim.staged_count:
            raise _refused(f"{len(self.entries)} pieces of content are staged (at most "
                           f"{lim.staged_count})")
        st = Staged(key, size)
        self._adopt(st, holder, ENTRY_OVERHEAD)
        self.entries[key] = st
        return st

    def append(self, st: Staged, data: bytes | memoryview) -> None:
        """More content: refused (nothing kept) over a budget or past the
        declared size."""
        total = len(st.data) + len(data)
        if st.size is not None and total > st.size:
            raise _refused(f"{total} octets staged for content of {st.size}")
        if total > self.limits.max_message_size:
            raise _refused(f"content over the broker's limit ({self.limits.max_message_size})")
        self._charge(st.holder, len(data))
        st.data += data

    def take(self, st: Staged) -> bytes:
        """The content, no longer staged."""
        self.drop(st)
        return bytes(st.data)

    def drop(self, st: Staged) -> None:
        if self.entries.get(st.key) is st:
            del self.entries[st.key]
            self._release(st)

    def left(self, holder: object, now: float, ttls: dict[Key, float] | None = None) -> None:
        """``holder``'s connection is over: its pieces are kept for their
        ttl (``ttls``, seconds, else ``staged_ttl``), on no connection's
        budget.  Costs the pieces it held."""
        pieces = self._pieces.get(holder)
        if not pieces:
            return
        ttl = self.limits.staged_ttl
        for key in list(pieces):
            st = self.entries[key]
            n = self._release(st)
            self.octets += n  # still held by the broker
            st.expires = now + max(0.0, min(ttl, (ttls or {}).get(key, ttl)))
            heapq.heappush(self._heap, (st.expires, next(self._seq), key))

    # -- timers (a model.Service's part) -----------------------------------------------
    def next_deadline(self) -> float | None:
        heap = self._heap
        while heap and self._stale(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _stale(self, item: tuple[float, int, Key]) -> bool:
        st = self.entries.get(item[2])
        return st is None or st.expires != item[0]

    def handle_timer(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            item = heapq.heappop(heap)
            if not self._stale(item):
                self.drop(self.entries[item[2]])
