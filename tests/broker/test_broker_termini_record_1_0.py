"""The stored record of a durable subscription's unsettled deliveries
(unsettled-state, adapters/broker/termini_1_0.py): each delivery held is
put as it is made and deleted as it is settled -- the store writes a batch's
changes as one row of a log it compacts (heldlog.py) --, transactional ones
with their transaction, and stores of the formats before (1: the held map
inside the terminus' state; 2: a row per delivery) taken over.  In memory with our 1.0 client core; a broker
"stopped" with the link attached is one whose store is closed without its
connections ending (what a kill -9 leaves: everything output was committed
first)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_broker_core_1_0 import Client, _payload

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.codec import Symbol, UInt, ULong, encode_value
from amqp_sansio.v1_0.link import Link
from amqp_sansio.v1_0.spec import (
    Accepted,
    Header,
    Released,
    Source,
    TerminusDurability,
    TerminusExpiryPolicy,
    TransactionalState,
)
from amqp_sansio.v1_0.transactions import Controller, transactional
from amqp_sansio_broker import termini_1_0
from amqp_sansio_broker.heldlog import COMPACT_SLACK, HeldLog
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.store import DB_NAME
from amqp_sansio_broker.termini_1_0 import decode_row_state, decode_state

UNSETTLED, NEVER = TerminusDurability.UNSETTLED_STATE, TerminusExpiryPolicy.NEVER


def _subscribe(c: Client, unsettled: dict[bytes, Any] | None = None) -> Link:
    link = c.session.attach_receiver("sub", source=Source(
        address="kept", durable=UNSETTLED, expiry_policy=NEVER), unsettled=unsettled)
    c.pump()
    return link


def _publish(b: Broker, n: int) -> None:
    p = Client(b, container="publisher")
    s = p.sender("kept")
    for i in range(n):
        s.send(_payload(b"%d" % i, Header(durable=True)), tag=b"%d" % i)
    p.pump()
    assert len(p.of(ev.DeliveryUpdated, s)) == n


def _received(c: Client, link: Link) -> list[Any]:
    return c.of(ev.DeliveryReceived, link)


def _log(data: Path) -> HeldLog:
    """The held deliveries the store has now, from its log (read beside the
    broker)."""
    log = HeldLog()
    with sqlite3.connect(data / DB_NAME) as db:
        for (entries,) in db.execute("SELECT entries FROM terminus_log ORDER BY n"):
            log.replay(bytes(entries))
    return log


def _rows(data: Path) -> dict[bytes, tuple[int, bytes]]:
    return _log(data).live


def _state(data: Path) -> bytes:
    with sqlite3.connect(data / DB_NAME) as db:
        [(st,)] = db.execute("SELECT state FROM termini").fetchall()
    return bytes(st)


def _consuming(data: Path, n: int, credit: int) -> tuple[Broker, Client, Link, list[Any]]:
    """A broker on ``data``, a subscription, ``n`` persistent messages
    published; the deliveries ``credit`` brought."""
    b = Broker(data_dir=data)
    c = Client(b)
    r = _subscribe(c)
    _publish(b, n)
    r.flow(credit)
    c.pump()
    return b, c, r, _received(c, r)


def test_the_record_follows_each_delivery(tmp_path: Path) -> None:
    """Each unsettled delivery of a stored message is in the record;
    settling one takes it out; the terminus' own state does not grow with
    them."""
    b, c, r, got = _consuming(tmp_path, 40, 40)
    assert len(got) == 40
    state = _state(tmp_path)
    assert decode_state(state).held == {}  # (not in the terminus' state)
    rows = _rows(tmp_path)
    assert sorted(rows) == sorted(e.delivery.tag for e in got)
    assert {s for _, s in rows.values()} == {b""}  # held for good
    for e in got[:30]:
        e.delivery.settle(Accepted())
    c.pump()
    assert sorted(_rows(tmp_path)) == sorted(e.delivery.tag for e in got[30:])
    assert _state(tmp_path) == state  # not rewritten while the link is attached
    for e in got[30:]:
        e.delivery.settle(Accepted())
    c.pump()
    assert _rows(tmp_path) == {} and list(b.queues["kept"].messages) == []
    b.close()


def test_the_record_reserves_tags_a_block_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the link is attached, the stored record's next tag is past
    every tag sent (a broker killed at any point resumes past them, rows or
    none); it is written once a block, in the batch of the delivery that
    reaches the last reservation; the detach stores the exact next tag."""
    monkeypatch.setattr(termini_1_0, "TAG_BLOCK", 8)
    b, c, r, _ = _consuming(tmp_path, 20, 0)
    assert decode_state(_state(tmp_path)).next_tag == 8  # reserved at attach
    stored = []
    for _ in range(20):
        r.flow(1)
        c.pump()
        [*_, last] = _received(c, r)
        stored.append(decode_state(_state(tmp_path)).next_tag)
        assert int.from_bytes(last.delivery.tag, "big") < stored[-1]
    assert sorted(set(stored)) == [8, 16, 24]
    r.detach(closed=False)
    c.pump()
    assert decode_state(_state(tmp_path)).next_tag == 20
    b.close()


def _declare(c: Client) -> tuple[Controller, bytes]:
    ctl = Controller(c.session)
    c.pump()
    ctl.declare()
    c.pump()
    [declared] = [x for e in c.events if (x := ctl.handle(e)) is not None]
    return ctl, declared.txn_id


@pytest.mark.parametrize("end", ["stop", "close"])
def test_transactional_deliveries_after_a_stop(tmp_path: Path, end: str) -> None:
    """Stopped with a transaction open (or the connection closed, with the
    link attached: the same): it rolled back.  A delivery only accepted in
    it is still held (resent resumed); those acquired in it are available
    again -- settled released where the client names them, their messages
    delivered anew."""
    b, c, r, plain = _consuming(tmp_path, 4, 2)
    _, txn = _declare(c)
    plain[0].delivery.update(transactional(txn, Accepted()))  # provisional
    r.flow(2, properties={Symbol("txn-id"): txn})
    c.pump()
    acquired = _received(c, r)[2:]
    assert [e.delivery.remote_state for e in acquired] == [TransactionalState(txn_id=txn)] * 2
    rows = {tag: decode_row_state(s) for tag, (_, s) in _rows(tmp_path).items()}
    assert rows[plain[0].delivery.tag][:3] == (txn, False, True)
    assert rows[plain[1].delivery.tag].txn is None
    assert [rows[e.delivery.tag][:3] for e in acquired] == [(txn, True, False)] * 2
    tags = [e.delivery.tag for e in plain + acquired]
    if end == "close":
        c.conn.close()
        c.pump()
        b2 = b
    else:
        b.close()  # stopped with the link attached, the transaction open
        b2 = Broker(data_dir=tmp_path)
    # queued: after a stop all four (held ones too, until a re-attach takes
    # them); after the close the two acquired in the transaction
    assert len(b2.queues["kept"].messages) == (4 if end == "stop" else 2)
    c2 = Client(b2)
    theirs = {tags[0]: transactional(txn, Accepted()), tags[1]: None,
              tags[2]: TransactionalState(txn_id=txn), tags[3]: transactional(txn, Accepted())}
    r2 = _subscribe(c2, theirs)
    assert r2.remote_unsettled == dict.fromkeys(tags)
    r2.flow(10)
    c2.pump()
    got = _received(c2, r2)
    resumed = {e.delivery.tag: e for e in got if e.delivery.resumed}
    assert sorted(resumed) == sorted(tags)
    for tag in tags[:2]:  # still held: sent again
        assert resumed[tag].payload[-1:] == b"%d" % tags.index(tag)
        assert not resumed[tag].delivery.remote_settled
    for tag in tags[2:]:  # rolled back: released
        assert resumed[tag].payload == b"" and resumed[tag].delivery.remote_settled
        assert resumed[tag].delivery.remote_state == Released()
    anew = [e for e in got if not e.delivery.resumed]
    assert sorted(e.payload[-1:] for e in anew) == [b"2", b"3"]
    assert not {e.delivery.tag for e in anew} & set(tags)
    assert sorted(_rows(tmp_path)) == sorted([*tags[:2], *(e.delivery.tag for e in anew)])
    for e in got:
        if not e.delivery.remote_settled:
            e.delivery.settle(Accepted())
    c2.pump()
    assert _rows(tmp_path) == {} and list(b2.queues["kept"].messages) == []
    b2.close()


def test_a_committed_acquisition_is_held_for_good(tmp_path: Path) -> None:
    """Acquired in a transaction that commits: its row says held for good,
    so after a stop it is resumed (sent again), not released."""
    b = Broker(data_dir=tmp_path)
    c = Client(b)
    r = _subscribe(c)
    _publish(b, 2)
    ctl, txn = _declare(c)
    r.flow(2, properties={Symbol("txn-id"): txn})
    c.pump()
    got = _received(c, r)
    ctl.discharge(txn)
    c.pump()
    assert {s for _, s in _rows(tmp_path).values()} == {b""}
    b.close()
    b2 = Broker(data_dir=tmp_path)
    c2 = Client(b2)
    r2 = _subscribe(c2, {e.delivery.tag: None for e in got})
    r2.flow(5)
    c2.pump()
    back = _received(c2, r2)
    assert [(e.delivery.resumed, e.payload[-1:]) for e in back] == [(True, b"0"), (True, b"1")]
    b2.close()


def test_a_store_of_format_1_is_taken_over(tmp_path: Path) -> None:
    """A store written before held rows (format 1: the held map inside the
    terminus' state) resumes as it did; its record becomes rows and the
    store is marked format 2."""
    b, c, r, got = _consuming(tmp_path, 3, 3)
    tags = [e.delivery.tag for e in got]
    r.detach(closed=False)
    c.pump()
    b.close()
    # what the previous version wrote: the rows inside the state, no table
    rows = _rows(tmp_path)
    st = decode_state(_state(tmp_path))
    assert st is not None
    old = bytearray()
    encode_value([st.source, st.private, st.durable, st.user,
                  {tag: ULong(m) for tag, (m, _) in rows.items()}, UInt(st.next_tag)], old)
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("UPDATE termini SET state = ?", (bytes(old),))
        db.execute("DROP TABLE terminus_log")
        db.execute("UPDATE meta SET value = 'amqp-sansio-store/1' WHERE key = 'format'")
    b2 = Broker(data_dir=tmp_path)
    c2 = Client(b2)
    r2 = _subscribe(c2, {tags[0]: Accepted(), tags[1]: None})
    assert r2.remote_unsettled == {tags[0]: None, tags[1]: None}
    assert sorted(_rows(tmp_path)) == sorted(tags[1:2])  # the one still held
    assert decode_state(_state(tmp_path)).held == {}
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        assert db.execute("SELECT value FROM meta").fetchall() == [("amqp-sansio-store/3",)]
    r2.flow(5)
    c2.pump()
    back = _received(c2, r2)
    assert [(e.delivery.tag, e.delivery.resumed) for e in back[:2]] == [
        (tags[0], True), (tags[1], True)]
    assert back[2].payload[-1:] == b"2" and back[2].delivery.tag not in tags
    b2.close()


def test_a_batch_writes_one_row_and_the_log_stays_small(tmp_path: Path) -> None:
    """The held deliveries' log: a row per batch whatever it changed, and
    never more entries than twice what is held plus the slack (a snapshot
    replaces it); nothing left once all is settled."""
    b, c, r, got = _consuming(tmp_path, 250, 100)
    assert len(got) == 100

    def rows() -> int:
        with sqlite3.connect(tmp_path / DB_NAME) as db:
            return int(db.execute("SELECT count(*) FROM terminus_log").fetchone()[0])

    assert rows() == 1 and len(_rows(tmp_path)) == 100  # the batch of 100: one row
    held = list(got)
    for _ in range(15):  # accept 10 a round, 10 more come
        for e in held[:10]:
            e.delivery.settle(Accepted())
        del held[:10]
        r.flow(10)
        c.pump()
        held += _received(c, r)[len(got):]
        got = _received(c, r)
        log = _log(tmp_path)
        assert sorted(log.live) == sorted(e.delivery.tag for e in held)
        assert log.logged <= 2 * len(log.live) + COMPACT_SLACK
    assert len(got) == 250 and len(held) == 100
    for e in held:
        e.delivery.settle(Accepted())
    c.pump()
    assert rows() <= 1 and _rows(tmp_path) == {}
    b.close()


def test_a_store_of_format_2_is_taken_over(tmp_path: Path) -> None:
    """Format 2 kept a row per held delivery (terminus_held): they become
    the log's first row."""
    b, c, r, got = _consuming(tmp_path, 3, 3)
    tags = [e.delivery.tag for e in got]
    b.close()
    rows = _rows(tmp_path)
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("CREATE TABLE terminus_held (vhost TEXT NOT NULL, container TEXT NOT NULL, "
                   "name TEXT NOT NULL, tag BLOB NOT NULL, message INTEGER NOT NULL, "
                   "state BLOB NOT NULL, PRIMARY KEY (vhost, container, name, tag))")
        db.executemany("INSERT INTO terminus_held VALUES ('/', 'test', 'sub', ?, ?, ?)",
                       [(tag, m, st) for tag, (m, st) in rows.items()])
        db.execute("DROP TABLE terminus_log")
        db.execute("UPDATE meta SET value = 'amqp-sansio-store/2' WHERE key = 'format'")
    b2 = Broker(data_dir=tmp_path)
    assert _rows(tmp_path) == rows
    c2 = Client(b2)
    r2 = _subscribe(c2, dict.fromkeys(tags))
    assert r2.remote_unsettled == dict.fromkeys(tags)
    r2.flow(5)
    c2.pump()
    assert [(e.delivery.tag, e.delivery.resumed) for e in _received(c2, r2)] == [
        (tag, True) for tag in tags]
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        assert db.execute("SELECT value FROM meta").fetchall() == [("amqp-sansio-store/3",)]
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'terminus_held'"
                              ).fetchall()
    b2.close()


@pytest.mark.parametrize("how", ["detach", "session", "stolen"])
@pytest.mark.parametrize("fail", [False, True])
def test_an_accept_in_an_open_transaction_is_unsettled_on_re_attach(
        tmp_path: Path, how: str, fail: bool) -> None:
    """The link leaves (detached, its session ended, or attached again from
    another connection) while a delivery is accepted in a transaction not
    yet discharged: the re-attach's unsettled map has it, in its
    transactional state (nothing is settled before the discharge).  The
    discharge then answers it on the new link: a commit settles it
    accepted (resume=true, no payload), a rollback sends it again
    (resume=true: still held, its record says so).  The other held delivery
    is resumed as any."""
    b = Broker(data_dir=tmp_path)
    c = Client(b)
    on = c.conn.begin() if how == "session" else c.session
    c.pump()
    r = on.attach_receiver("sub", source=Source(address="kept", durable=UNSETTLED,
                                                expiry_policy=NEVER))
    c.pump()
    _publish(b, 2)
    r.flow(2)
    c.pump()
    got = _received(c, r)
    tags = [e.delivery.tag for e in got]
    ctl, txn = _declare(c)
    got[0].delivery.update(transactional(txn, Accepted()))
    c.pump()
    if how == "detach":
        r.detach(closed=False)
    elif how == "session":
        on.end()
    c.pump()
    c2 = Client(b) if how == "stolen" else c
    r2 = _subscribe(c2, {tags[0]: transactional(txn, Accepted()), tags[1]: None})
    assert r2.remote_unsettled == {tags[0]: transactional(txn, Accepted()), tags[1]: None}
    r2.flow(10)
    c2.pump()
    [again] = _received(c2, r2)  # the one held; the other waits for the discharge
    assert (again.delivery.tag, again.delivery.resumed, again.payload[-1:]) == (
        tags[1], True, b"1")
    assert decode_row_state(_rows(tmp_path)[tags[0]][1])[:3] == (txn, False, True)
    ctl.discharge(txn, fail=fail)
    c.pump()
    c2.pump()
    [answer] = _received(c2, r2)[1:]
    assert (answer.delivery.tag, answer.delivery.resumed) == (tags[0], True)
    if fail:  # rolled back: still held, sent again
        assert answer.payload[-1:] == b"0" and not answer.delivery.remote_settled
        assert _rows(tmp_path)[tags[0]][1] == b""  # held for good again
        assert len(b.queues["kept"].messages) == 0
        answer.delivery.settle(Accepted())
    else:  # committed: settled accepted
        assert answer.payload == b"" and answer.delivery.remote_settled
        assert answer.delivery.remote_state == Accepted()
        assert sorted(_rows(tmp_path)) == [tags[1]]
    again.delivery.settle(Accepted())
    c2.pump()
    assert _rows(tmp_path) == {} and list(b.queues["kept"].messages) == []
    assert b.retained == 0 == b.recount()
    b.close()


@pytest.mark.parametrize("fail", [False, True])
def test_an_accept_in_an_open_transaction_the_re_attach_does_not_name(
        tmp_path: Path, fail: bool) -> None:
    """The re-attach's map states it, but the client's does not name it:
    the discharge settles nothing on the new link -- a commit consumes the
    message, a rollback delivers it anew (a new tag, redelivered)."""
    b, c, r, got = _consuming(tmp_path, 1, 1)
    tag = got[0].delivery.tag
    ctl, txn = _declare(c)
    got[0].delivery.update(transactional(txn, Accepted()))
    r.detach(closed=False)
    c.pump()
    r2 = _subscribe(c, {})
    assert r2.remote_unsettled == {tag: transactional(txn, Accepted())}
    r2.flow(10)
    ctl.discharge(txn, fail=fail)
    c.pump()
    back = _received(c, r2)
    if fail:
        [anew] = back
        assert not anew.delivery.resumed and anew.delivery.tag != tag
        assert anew.payload[-1:] == b"0" and anew.delivery.remote_state is None
        assert sorted(_rows(tmp_path)) == [anew.delivery.tag]
        anew.delivery.settle(Accepted())
        c.pump()
    else:
        assert back == [] and _rows(tmp_path) == {}
    assert list(b.queues["kept"].messages) == [] and b.retained == 0 == b.recount()
    b.close()
