"""The adapter's exceptions: the shared vocabulary of
:mod:`amqp_sansio.exceptions` (the same classes in every adapter)."""

from amqp_sansio.exceptions import *  # noqa: F403
from amqp_sansio.exceptions import __all__ as __all__
