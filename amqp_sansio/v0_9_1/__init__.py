"""AMQP 0-9-1 (as RabbitMQ speaks it), sans-IO.

* :mod:`.spec` -- generated from the RabbitMQ-extended XML by
  ``codegen/gen_0_9_1.py``: a frozen attrs class per method and the basic
  content properties, with their encoders and decoders.
* :mod:`.codec` -- primitives, field tables and arrays (the tag profiles).
* :mod:`.framing` -- frames, content assembly, encoding of methods and
  content.
* :mod:`.connection` / :mod:`.channel` -- the state machines, both roles.
* :mod:`.confirms` -- publisher-confirm and delivery-tag bookkeeping.
* :mod:`.events` -- what ``Connection.receive_data`` reports.
"""
