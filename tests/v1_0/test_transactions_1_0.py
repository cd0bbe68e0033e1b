"""Transactions over a coordinator link, both roles: declare -> declared,
transactional transfers and dispositions, discharge (commit and rollback),
refusals."""

from __future__ import annotations

from typing import Any

from pair_1_0 import Pair, of

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.message import AmqpMessage, decode_message
from amqp_sansio.v1_0.transactions import (
    ACQUIRE_TXN_KEY,
    Controller,
    Coordinator,
    is_coordinator_link,
    transactional,
)


def _run(p: Pair, ctl: Controller, coord: Coordinator, answer: Any) -> tuple[list[Any], list[Any]]:
    """Pump; the coordinator answers requests with ``answer(event)``; the
    controller's view of the replies."""
    ce, se = p.pump()
    reqs = [r for r in (coord.handle(e) for e in se) if r is not None]
    for r in reqs:
        answer(r)
    ce2, _ = p.pump()
    return [t for t in (ctl.handle(e) for e in ce + ce2) if t is not None], reqs


def test_declare_transfer_discharge() -> None:
    p = Pair()
    s = p.client.begin()
    ctl = Controller(s)
    coord = Coordinator()
    _, se = p.pump()
    srv_link = of(p.events["server"], ev.LinkAttachRequested)[0].link
    assert is_coordinator_link(srv_link)
    assert isinstance(srv_link.remote_target, spec.Coordinator)
    assert srv_link.remote_target.capabilities == ("amqp:local-transactions",)
    ctl.declare()

    def answer(r: Any) -> None:
        if isinstance(r, ev.TxnDeclareRequested):
            Coordinator.declared(r.delivery, b"txn-1")
        elif isinstance(r, ev.TxnDischargeRequested):
            Coordinator.discharged(r.delivery)

    txe, reqs = _run(p, ctl, coord, answer)
    assert isinstance(reqs[0], ev.TxnDeclareRequested) and reqs[0].global_id is None
    assert txe == [ev.TxnDeclared(txe[0].channel, b"txn-1")]
    # a transactional publish: every transfer carries transactional-state
    snd = s.attach_sender("pub", target=spec.Target(address="q"))
    p.pump()
    snd.send(b"\x00\x53\x75\xa0\x01m", state=transactional(b"txn-1"))
    _, se = p.pump()
    got = of(se, ev.DeliveryReceived)[0]
    assert got.delivery.remote_state == spec.TransactionalState(txn_id=b"txn-1")
    got.delivery.settle(transactional(b"txn-1", spec.Accepted()))
    ce, _ = p.pump()
    assert of(ce, ev.DeliveryUpdated)[0].state.outcome == spec.Accepted()
    ctl.discharge(b"txn-1", fail=False)
    txe, reqs = _run(p, ctl, coord, answer)
    assert reqs[0].txn_id == b"txn-1" and reqs[0].fail is False
    assert txe == [ev.TxnDischarged(txe[0].channel, b"txn-1", False)]
    # the requests were amqp-value(declare/discharge), sent unsettled
    xfers = [f for f in p.frames("c2s") if isinstance(f.body, spec.Transfer)
             and f.body.handle == ctl.link.handle]
    bodies = [decode_message(f.payload).body for f in xfers]
    assert bodies == [spec.AmqpValue(spec.Declare()),
                      spec.AmqpValue(spec.Discharge(txn_id=b"txn-1", fail=False))]
    assert all(not f.body.settled for f in xfers)


def test_rollback_and_refusals() -> None:
    p = Pair()
    s = p.client.begin()
    ctl = Controller(s)
    coord = Coordinator()
    p.pump()
    ctl.declare()

    def refuse(r: Any) -> None:
        Coordinator.refuse(r.delivery, spec.Error(condition="amqp:transaction:rollback",
                                                  description="no"))

    txe, _ = _run(p, ctl, coord, refuse)
    assert isinstance(txe[0], ev.TxnFailed) and txe[0].txn_id is None
    assert txe[0].error.condition == "amqp:transaction:rollback"
    ctl.discharge(b"t", fail=True)
    txe, reqs = _run(p, ctl, coord, lambda r: Coordinator.discharged(r.delivery))
    assert reqs[0].fail is True and txe[0] == ev.TxnDischarged(txe[0].channel, b"t", True)
    # not a request: refused with decode-error
    ctl.link.send(b"\x00\x53\x77\xa1\x03bad")
    ce, se = p.pump()
    assert [coord.handle(e) for e in se] == [None]
    p.pump()
    upd = [e for e in p.events["client"] if isinstance(e, ev.DeliveryUpdated)][-1]
    assert upd.state.error.condition == "amqp:decode-error"
    assert AmqpMessage  # (message helpers used above)


def test_transactional_acquisition_flow_properties() -> None:
    p = Pair(credit=0)
    s = p.client.begin()
    rcv = s.attach_receiver("acq", source=spec.Source(address="q"))
    p.pump()
    rcv.flow(3, properties={ACQUIRE_TXN_KEY: b"txn-9"})
    p.pump()
    flows = [f.body for f in p.frames("c2s") if isinstance(f.body, spec.Flow)
             and f.body.handle is not None]
    assert flows[-1].properties == {"txn-id": b"txn-9"} and flows[-1].link_credit == 3
