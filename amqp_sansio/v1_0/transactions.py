"""Transactions [OASIS part 4]: a controller sends ``declare`` and
``discharge`` over a link to the coordinator target; transfers and
dispositions inside a transaction carry ``transactional-state(txn-id,
outcome)``; acquiring inside one puts ``{"txn-id": id}`` in the flow.

Both roles, on top of the link layer (no state of their own beyond which
request a delivery carried):

* :class:`Controller` -- the client: ``declare()``, ``discharge(txn_id,
  fail)``; ``handle(event)`` turns the coordinator's answers into
  ``TxnDeclared`` / ``TxnDischarged`` / ``TxnFailed``.
* :class:`Coordinator` -- the server (the broker in the next issue):
  ``handle(event)`` turns deliveries on a coordinator link into
  ``TxnDeclareRequested`` / ``TxnDischargeRequested``; answer with
  ``declared`` / ``discharged`` / ``refuse``.
"""

from __future__ import annotations

__all__ = ["Controller", "Coordinator", "is_coordinator_link", "transactional",
           "ACQUIRE_TXN_KEY"]


from ..errors import DecodeError
from . import events as ev
from .link import Delivery, Link
from .message import decode_message
from .session import Session
from .spec import (
    Accepted,
    AmqpCondition,
    AmqpValue,
    Declare,
    Declared,
    Discharge,
    Error,
    Modified,
    Rejected,
    Released,
    Source,
    TransactionalState,
    TxnCapability,
)
from .spec import (
    Coordinator as CoordinatorTarget,
)

ACQUIRE_TXN_KEY = "txn-id"  # flow.properties key for transactional acquisition
_OUTCOMES = (Accepted.SYMBOL, Rejected.SYMBOL, Declared.SYMBOL)


def transactional(txn_id: bytes, outcome: Accepted | Rejected | Released | Modified | None = None,
                  ) -> TransactionalState:
    """The state for a transfer or disposition inside ``txn_id``."""
    return TransactionalState(txn_id=txn_id, outcome=outcome)


def is_coordinator_link(link: Link) -> bool:
    return isinstance(link.target, CoordinatorTarget) or isinstance(
        link.remote_target, CoordinatorTarget)


def _payload(request: Declare | Discharge) -> bytes:
    out = bytearray()
    sec = AmqpValue(request)
    sec.encode_into(sec, out)
    return bytes(out)


class Controller:
    """The client end of a coordinator link."""

    def __init__(self, session: Session, name: str = "txn-controller",
                 capabilities: tuple[str, ...] = (TxnCapability.LOCAL_TRANSACTIONS,)) -> None:
        self.link = session.attach_sender(
            name, source=Source(outcomes=_OUTCOMES),
            target=CoordinatorTarget(capabilities=capabilities))
        self._requests: dict[int, tuple[str, bytes | None, bool]] = {}

    def declare(self, global_id: object = None) -> Delivery:
        d = self.link.send(_payload(Declare(global_id=global_id)), settled=False)
        self._requests[d.id] = ("declare", None, False)
        return d

    def discharge(self, txn_id: bytes, fail: bool = False) -> Delivery:
        d = self.link.send(_payload(Discharge(txn_id=txn_id, fail=fail)), settled=False)
        self._requests[d.id] = ("discharge", txn_id, fail)
        return d

    def handle(self, event: ev.Event) -> ev.Event | None:
        """The transaction event a link event means, if any (settles the
        request delivery when the coordinator has answered)."""
        if not isinstance(event, ev.DeliveryUpdated) or event.link is not self.link:
            return None
        req = self._requests.get(event.delivery.id)
        if req is None or event.state is None:
            return None
        kind, txn_id, fail = req
        del self._requests[event.delivery.id]
        state = event.state
        if not event.delivery.settled:
            event.delivery.settle()
        ch = event.channel
        if kind == "declare" and isinstance(state, Declared):
            return ev.TxnDeclared(ch, state.txn_id)
        if kind == "discharge" and isinstance(state, Accepted):
            assert txn_id is not None
            return ev.TxnDischarged(ch, txn_id, fail)
        error = state.error if isinstance(state, Rejected) else Error(
            condition=AmqpCondition.ILLEGAL_STATE,
            description=f"the coordinator answered {type(state).__name__}")
        return ev.TxnFailed(ch, txn_id, error)


class Coordinator:
    """The server end: requests arriving on coordinator links."""

    def handle(self, event: ev.Event) -> ev.Event | None:
        if not isinstance(event, ev.DeliveryReceived) or not is_coordinator_link(event.link):
            return None
        d = event.delivery
        try:
            body = decode_message(event.payload).body
            request = body.value if isinstance(body, AmqpValue) else None
        except DecodeError:  # the controller's payload is not a request
            request = None
        if isinstance(request, Declare):
            return ev.TxnDeclareRequested(event.channel, d, request.global_id)
        if isinstance(request, Discharge):
            return ev.TxnDischargeRequested(event.channel, d, request.txn_id,
                                            bool(request.fail))
        self.refuse(d, Error(condition=AmqpCondition.DECODE_ERROR,
                             description="a coordinator takes declare or discharge"))
        return None

    @staticmethod
    def declared(d: Delivery, txn_id: bytes) -> None:
        d.settle(Declared(txn_id=txn_id))

    @staticmethod
    def discharged(d: Delivery) -> None:
        d.settle(Accepted())

    @staticmethod
    def refuse(d: Delivery, error: Error) -> None:
        d.settle(Rejected(error=error))
