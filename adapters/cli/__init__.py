"""The ``amqp-sansio`` command line (an adapter: it does the I/O)."""
