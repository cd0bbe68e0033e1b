"""AMQP 0-9 (the version before 0-9-1), sans-IO: a dialect of :mod:`..v0_9_1`.

* :mod:`.spec` -- generated from the 0-9 XML by ``codegen/gen_0_9.py``: the
  methods and content properties 0-9 has and 0-9-1 has not (access, file,
  stream, tunnel, dtx, the work-in-progress message class, 0-9's
  ``basic.recover``, ``connection.redirect``, ``channel.ping`` ...); the
  rest *are* the 0-9-1 classes.
* :mod:`.connection` -- the 0-9-1 connection and channel state machines,
  both roles, with 0-9's method table and header (``AMQP 1 1 0 9``).

Framing, codec, events and the JSON form are 0-9-1's.
"""
