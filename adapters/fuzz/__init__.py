"""amqp-sansio's fuzzer for AMQP 0-10 peers (brokers, and clients), AMQP
0-9-1 brokers and AMQP 1.0 peers in the server role (``*_0_10``, ``*_0_9_1``
and ``*_1_0`` modules; :mod:`.protocols` picks the generator).

Pure parts: :mod:`.specinfo_0_10` and :mod:`.values` (what the spec says, values
built from it), :mod:`.case` (the case model), :mod:`.generate_0_10` (cases as
functions of seed and case number), :mod:`.monitor_0_10` (the peer's output
checked by our core), :mod:`.oracle` (outcomes), :mod:`.minimise` (delta
debugging) and :mod:`.reproducer` (the saved form).  I/O: :mod:`.runner`
(one case over a socket; :mod:`.runner_0_10`), :mod:`.campaign` (many, with progress and a
summary), :mod:`.server` (the server role) and :mod:`.spark` (case ranges on
Spark executors).  See ``adapters/fuzz/README.md``.
"""
