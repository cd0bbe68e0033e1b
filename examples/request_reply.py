"""Request/reply (RPC) over AMQP with the blocking client.

    python examples/request_reply.py [COUNT]

A server thread consumes the ``rpc`` queue and answers each request to its
``reply_to`` with the same ``correlation_id``; the client sends COUNT
requests at once and matches the answers by correlation id.
"""

from __future__ import annotations

import sys
import threading
import uuid

from amqp_sansio.v0_10.messages import Message
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect


def serve(url: str, ready: threading.Event, count: int) -> None:
    with connect(url) as conn, conn.session() as s:
        s.declare_queue("rpc")
        with s.subscribe("rpc", prefetch=10) as sub:
            ready.set()
            for answered, d in enumerate(sub, 1):
                request = d.message
                assert request.reply_to is not None
                exchange, key = request.reply_to
                reply = Message(body=request.body.upper(), routing_key=key,
                                correlation_id=request.correlation_id)
                s.publish(reply, exchange=exchange)
                d.accept()
                if answered == count:
                    return


def main(count: int) -> None:
    host, port, stop = start_broker_thread()
    url = f"amqp://{host}:{port}"
    ready = threading.Event()
    server = threading.Thread(target=serve, args=(url, ready, count), daemon=True)
    server.start()
    ready.wait(30)
    try:
        with connect(url) as conn, conn.session() as s:
            replies = f"replies-{uuid.uuid4().hex[:8]}"
            s.declare_queue(replies, exclusive=True, auto_delete=True)
            pending: dict[object, bytes] = {}  # (0-10 ids are octets)
            for i in range(count):
                cid = uuid.uuid4().bytes
                pending[cid] = f"request {i}".encode()
                s.publish(Message(body=pending[cid], routing_key="rpc", correlation_id=cid,
                                  reply_to=("", replies)), wait=False)
            s.sync()
            with s.subscribe(replies) as sub:
                for d in sub:
                    asked = pending.pop(d.message.correlation_id or b"")
                    assert d.message.body == asked.upper()
                    d.accept()
                    if not pending:
                        break
        server.join(30)
        print(f"{count} requests answered, each matched by its correlation id")
    finally:
        stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
