"""AMQP 0-9 spec classes (generated) -- see ``_generated.py``."""

from ._generated import *  # noqa: F403
from ._generated import __all__  # noqa: F401
