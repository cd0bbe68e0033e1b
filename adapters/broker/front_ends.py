"""Which front ends the broker has, without the model knowing any of them.

The model (``model.py``) is protocol-neutral: it asks this registry which
protocols exist (each one's broker-wide state, ``FrontEnd.service``) and
what to make a transport's connection with.  The listener
(``listener.py``) fills it in as it is imported -- with its front ends and
its ``BrokerConnection`` -- and the package imports the listener first, so
a broker made through the package serves every protocol.  A fifth front
end registers here (``register``) and gets everything the model does.
"""

from __future__ import annotations

__all__ = ["FRONT_ENDS", "register", "connection_class", "set_connection_class"]

from typing import Any

#: Protocol (registry name) -> its front end class, the default first.
FRONT_ENDS: dict[str, Any] = {}
_CONNECTION: list[Any] = []


def register(name: str, front_end: Any) -> None:
    """``front_end`` (a ``front.FrontEnd`` subclass) serves protocol ``name``."""
    FRONT_ENDS[name] = front_end


def set_connection_class(cls: Any) -> None:
    """What a transport gets (the listener's ``BrokerConnection``)."""
    _CONNECTION[:] = [cls]


def connection_class() -> Any:
    if not _CONNECTION:
        raise RuntimeError("no listener registered: import amqp_sansio_broker first")
    return _CONNECTION[0]
