"""Durable termini of 1.0 links (durable subscriptions).

A client's receiving link whose source asks for durability (``durable``
configuration or unsettled-state) keeps its terminus past its link: the
queue it consumes from (for an exchange source, its own subscription queue,
which goes on collecting messages), the source as the broker stated it and,
for unsettled-state, the deliveries it holds unsettled.  It outlives a
detach without ``closed``, its session's end and its connection's close,
until it expires -- its ``expiry-policy`` says which of those starts the
``timeout`` (seconds; ``never``: it does not expire) -- or a closing detach
destroys it.  Attaching the same link name again from the same container
id resumes it, as ActiveMQ Artemis and Qpid Broker-J identify a durable
subscription (container id + link name).

On a durable queue with the broker's store, a terminus is stored too
(``store.TerminusRecord``; its state is the source, whether its queue is
its own and where its delivery tags go on from) and comes back after a
restart.  While a link is attached, the stored "go on from" is a
reservation (:data:`TAG_BLOCK` tags past the next one, put again in the
batch of the delivery that reaches it): a broker killed at any point
resumes past every tag it sent -- a non-persistent delivery's too, which
no row names -- for one terminus write per block.

Unsettled-state: each delivery of a stored message it holds unsettled is
put to the store when the delivery is made and deleted when it is settled
(``store.HeldRecord``: tag, message, and the open transaction it is in),
in the store's batch before the transfers leave; the store writes a
batch's changes as one row of a log it compacts (``heldlog.py``) -- a
write costs what changed, not what the link holds.  A broker killed with
the link attached knows them after its restart as it would after the link
left.  Those messages are back on the queue then (marked redelivered); a
re-attach whose unsettled map names one of the tags takes its message off
the queue again to resolve it as before the restart.

A restart ends every transaction unfinished (rolled back, as a closed
connection's are): a delivery acquired inside one is available again --
a re-attach naming its tag gets it settled ``released`` and the message
comes anew; one only accepted inside one is still held unsettled, its
provisional outcome void (resumed as any held delivery).  Without a
restart, a re-attach before the discharge states such a delivery in its
transactional state; the discharge answers it on the new link.
"""

from __future__ import annotations

__all__ = ["Terminus", "Termini", "LINK", "SESSION", "CONNECTION", "TERMINI_MAX",
           "TERMINI_PER_USER",
           "State", "encode_state", "decode_state", "next_tag", "RowState", "row_state",
           "decode_row_state", "tag_after", "TAG_BLOCK"]

import collections
import heapq
import itertools
from collections.abc import Iterable
from typing import Any, NamedTuple

import attrs

from amqp_sansio.errors import DecodeError
from amqp_sansio.v1_0.codec import UInt, decode_all, encode_value
from amqp_sansio.v1_0.spec import Source, TerminusExpiryPolicy

from .queued import Held

#: How far a terminus' attachment has ended: its link, its session, its connection.
LINK, SESSION, CONNECTION = 0, 1, 2
#: The ending at which each expiry policy starts the timeout (never: none does).
_STARTS = {TerminusExpiryPolicy.LINK_DETACH: LINK, TerminusExpiryPolicy.SESSION_END: SESSION,
           TerminusExpiryPolicy.CONNECTION_CLOSE: CONNECTION}
#: Termini kept at once across the broker; a link beyond it keeps none (its
#: attach says so: durable none, expiry link-detach).
TERMINI_MAX = 10_000
#: ... and at most this many per user.
TERMINI_PER_USER = 1_000
#: Delivery tags an attached stored terminus reserves at a time: its
#: record says its tags go on from here, so a restart skips at most this
#: many (far below serial arithmetic's half of the 4-octet tag space).
TAG_BLOCK = 4096

Key = tuple[str, str, str]  # vhost, container id, link name


@attrs.define(eq=False)
class Terminus:
    """A receiving link's source kept past its link."""

    vhost: str
    container: str
    name: str
    queue: str
    private: bool  # its own subscription queue (an exchange source): deleted with it
    source: Source  # as the broker's attach stated it
    durable: int  # what it keeps: 1 its configuration, 2 its unsettled deliveries too
    user: str | None = None  # who made it (only they may resume it)
    consumer: Any = None  # its front end's consumer while attached
    front: Any = None  # the connection it was last attached on
    channel: int = -1  # and the session
    #: unsettled-state: the deliveries it holds while no link is attached, by tag
    held: dict[bytes, Held] = attrs.field(factory=dict)
    #: unsettled-state after a restart: tag -> the stored message it carried
    restored: dict[bytes, int] = attrs.field(factory=dict)
    #: after a restart: tags acquired in a transaction it rolled back (their
    #: messages are available again; a re-attach naming one gets released)
    rolled_back: set[bytes] = attrs.field(factory=set)
    #: unsettled-state: deliveries accepted in a transaction not yet
    #: discharged (not held meanwhile), by tag: the transaction's id
    in_txn: dict[bytes, bytes] = attrs.field(factory=dict)
    #: its held rows in the store: tag -> their state (:func:`row_state`)
    rows: dict[bytes, bytes] = attrs.field(factory=dict)
    #: the number its next delivery tag takes: its tags go on across its
    #: attachments (each starts its delivery count at 0, as rhea assumes),
    #: so a new one never clashes with one it resumes
    next_tag: int = 0
    #: where its stored record says its tags go on from (the reservation
    #: while attached): every tag sent is below it (serial arithmetic)
    tags_reserved: int = 0
    ended: int = -1  # how far its attachment has ended (-1: attached)
    expires: float | None = None
    stored: bool = False

    @property
    def key(self) -> Key:
        return (self.vhost, self.container, self.name)


def next_tag(t: Terminus) -> int:
    """The number ``t``'s next delivery tag takes."""
    c = t.consumer
    return c.next_tag() if c is not None else t.next_tag


def encode_state(t: Terminus) -> bytes:
    """What the store keeps of ``t`` beyond its key and queue (1.0
    encoding), and from now on ``t.tags_reserved``: where its tags go on
    from -- attached, :data:`TAG_BLOCK` past its next one.  The held map
    stays empty: held deliveries are rows of their own (stores of format 1
    kept them here: :func:`decode_state` reads it)."""
    n = next_tag(t)
    if t.consumer is not None:
        n = (n + TAG_BLOCK) & 0xFFFFFFFF
    t.tags_reserved = n
    out = bytearray()
    encode_value([t.source, t.private, t.durable, t.user, {}, UInt(n)], out)
    return bytes(out)


def tag_after(tags: Iterable[bytes], start: int) -> int:
    """The delivery tag number to go on from: ``start``, or past the
    furthest of ``tags`` (4-octet numbers, serial arithmetic) beyond it."""
    best = 0
    for tag in tags:
        if len(tag) == 4:
            ahead = (int.from_bytes(tag, "big") + 1 - start) & 0xFFFFFFFF
            if ahead < 0x80000000:
                best = max(best, ahead)
    return (start + best) & 0xFFFFFFFF


class RowState(NamedTuple):
    """A held row's transaction: the one its delivery is in (None: held
    for good), whether it acquired it and whether it accepted it."""

    txn: bytes | None = None
    acquired: bool = False
    accepted: bool = False


def row_state(r: RowState) -> bytes:
    """``r`` as a held row's state: empty for a delivery held for good."""
    if r.txn is None:
        return b""
    out = bytearray()
    encode_value([r.txn, r.acquired, r.accepted], out)
    return bytes(out)


def decode_row_state(data: bytes) -> RowState:
    """:func:`row_state` back (what does not decode so: held for good)."""
    if not data:
        return RowState()
    try:
        v = decode_all(data)
    except DecodeError:
        return RowState()
    if (not isinstance(v, list) or len(v) != 3 or not isinstance(v[0], bytes)
            or not isinstance(v[1], bool) or not isinstance(v[2], bool)):
        return RowState()
    return RowState(v[0], v[1], v[2])


class State(NamedTuple):
    """:func:`encode_state`'s fields."""

    source: Source
    private: bool
    durable: int
    user: str | None
    held: dict[bytes, int]
    next_tag: int


def decode_state(data: bytes) -> State | None:
    """:func:`encode_state`'s fields back, or None if they do not decode so
    (a record without a next tag, from before it was kept: 0)."""
    try:
        v = decode_all(data)
    except DecodeError:
        return None
    if (not isinstance(v, list) or len(v) not in (5, 6) or not isinstance(v[0], Source)
            or not isinstance(v[1], bool) or v[2] not in (1, 2)
            or not (v[3] is None or isinstance(v[3], str)) or not isinstance(v[4], dict)
            or not all(isinstance(k, bytes) and isinstance(n, int) for k, n in v[4].items())
            or (len(v) == 6 and not (isinstance(v[5], int) and 0 <= v[5] <= 0xFFFFFFFF))):
        return None
    return State(v[0], v[1], int(v[2]), v[3], {k: int(n) for k, n in v[4].items()},
                 int(v[5]) if len(v) == 6 else 0)


class Termini:
    """The termini kept, by (vhost, container id, link name), and when they
    expire."""

    def __init__(self) -> None:
        self.kept: dict[Key, Terminus] = {}
        self._timers: list[tuple[float, int, Terminus]] = []
        self._seq = itertools.count()
        #: How many each user keeps (TERMINI_PER_USER: one user cannot take
        #: every other user's room).
        self.by_user: collections.Counter[str | None] = collections.Counter()

    def __len__(self) -> int:
        return len(self.kept)

    def get(self, key: Key) -> Terminus | None:
        return self.kept.get(key)

    def add(self, t: Terminus) -> None:
        old = self.kept.get(t.key)
        if old is not None:
            self._uncount(old)
        self.kept[t.key] = t
        self.by_user[t.user] += 1

    def remove(self, t: Terminus) -> bool:
        """Forget ``t``; was it kept?"""
        if self.kept.get(t.key) is not t:
            return False
        del self.kept[t.key]
        self._uncount(t)
        return True

    def _uncount(self, t: Terminus) -> None:
        self.by_user[t.user] -= 1
        if self.by_user[t.user] <= 0:
            del self.by_user[t.user]

    def room_for(self, user: str | None) -> bool:
        """May ``user`` keep one more (within TERMINI_MAX across the broker
        and TERMINI_PER_USER of its own)?"""
        return len(self.kept) < TERMINI_MAX and self.by_user[user] < TERMINI_PER_USER

    def attached(self, t: Terminus) -> None:
        """A link took ``t`` (again): it does not expire while attached."""
        t.ended = -1
        t.expires = None

    def end(self, t: Terminus, how: int, now: float) -> bool:
        """``t``'s attachment ended this far (LINK, SESSION, CONNECTION);
        its timeout starts when its expiry policy says.  True: it expires
        now (a timeout of 0)."""
        if how <= t.ended:
            return False
        t.ended = how
        start = _STARTS.get(t.source.expiry_policy)
        if start is None or how < start or t.expires is not None:
            return False
        t.expires = now + (t.source.timeout or 0)
        if t.expires <= now:
            return True
        heapq.heappush(self._timers, (t.expires, next(self._seq), t))
        return False

    def _live(self, when: float, t: Terminus) -> bool:
        return self.kept.get(t.key) is t and t.consumer is None and t.expires == when

    def next_deadline(self) -> float | None:
        heap = self._timers
        while heap and not self._live(heap[0][0], heap[0][2]):
            heapq.heappop(heap)  # resumed, destroyed, or its timer started again
        return heap[0][0] if heap else None

    def due(self, now: float) -> list[Terminus]:
        """The termini whose timeout ran out by ``now`` (no longer timed)."""
        out = []
        heap = self._timers
        while heap and heap[0][0] <= now:
            when, _, t = heapq.heappop(heap)
            if self._live(when, t):
                out.append(t)
        return out
