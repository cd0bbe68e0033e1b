"""amqp-sansio: AMQP without I/O -- a pure state-machine core for every
protocol version the project speaks, in both roles.

Feed received octets to a connection's ``receive_data(data, now)``, act on
the typed events it returns, and write what ``data_to_send()`` gives you;
time comes in as ``now`` and ``handle_timer(now)``.  Nothing here opens a
socket, starts a thread, reads a clock or runs an event loop.

* :mod:`amqp_sansio.v0_10` -- AMQP 0-10 (connection, session, execution).
* :mod:`amqp_sansio.v0_9_1` -- AMQP 0-9-1 as RabbitMQ speaks it.
* ``amqp_sansio.v1_0`` -- AMQP 1.0 (in progress).
* Shared by every protocol: :mod:`~amqp_sansio.errors` (who broke the
  protocol), :mod:`~amqp_sansio.exceptions` (what the adapters raise),
  :mod:`~amqp_sansio.events`, :mod:`~amqp_sansio.message`,
  :mod:`~amqp_sansio.connection` (what an adapter drives),
  :mod:`~amqp_sansio.registry` (the protocols), :mod:`~amqp_sansio.url`,
  :mod:`~amqp_sansio.sasl`, :mod:`~amqp_sansio.serial`,
  :mod:`~amqp_sansio.heartbeat`.

The adapters that drive it over real I/O are separate packages:
``amqp_sansio_trio``, ``amqp_sansio_socket``, ``amqp_sansio_spark``,
``amqp_sansio_broker`` (the embedded broker), ``amqp_sansio_fuzz`` and
``amqp_sansio_cli`` (the ``amqp-sansio`` command).
"""

#: The project's version -- the one place it is written (pyproject.toml reads
#: it from here; peers see it in the ``version`` client/server property).
__version__ = "0.1.0.dev0"
