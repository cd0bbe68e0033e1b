"""The embedded AMQP 0-10 broker: a pure model (``model``) served over Trio
(``server``).  In memory only; see the README for what it implements."""

from .model import Broker, BrokerConnection

__all__ = ["Broker", "BrokerConnection"]
