"""AMQP 0-10, sans-IO: both roles, all three layers.

* :mod:`.spec` -- generated from ``amqp.0-10.xml`` by ``codegen/gen_0_10.py``:
  an attrs class per struct, control and command.
* :mod:`.codec` (typed values), :mod:`.framing` (frames, segments,
  assemblies), :mod:`.jsonform` (the JSON form of the CLI).
* :mod:`.connection` (the connection layer and :class:`~.connection.Connection`),
  :mod:`.session` (session and execution layers, resume),
  :mod:`.flow` (message credit), :mod:`.events`, :mod:`.messages`
  (:class:`~.messages.Message` <-> ``message.transfer``).
"""
