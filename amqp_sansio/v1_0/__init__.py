"""AMQP 1.0: the codec, framing, and the connection, session and link
endpoints (both roles).  Importing the package registers the generated
spec classes with the codec, so a described value whose descriptor the spec
defines always decodes to its class."""

from . import spec as spec
