"""The embedded AMQP broker: a pure, protocol-neutral model (``model``)
with a front end per protocol (``front_0_10``, ``front_0_9_1``) chosen by
the client's protocol header (``listener``), served over Trio (``server``).
See the README for what it implements."""

from .listener import BrokerConnection
from .model import Broker

__all__ = ["Broker", "BrokerConnection"]
