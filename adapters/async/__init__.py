"""The async client, written once: each protocol's client (``client_0_10``,
``client_0_9_1``, ``client_1_0``), the pump and the waiting they share, on
any event loop that gives what :mod:`.runtime` asks for.

Users import an adapter, not this package: ``amqp_sansio_trio`` (Trio) and
``amqp_sansio_asyncio`` (asyncio) are each a runtime and these modules'
names.  Nothing is imported here: a program loads the protocol it speaks.
"""
