"""AMQP 1.0 codec speed: one transfer carrying header + properties +
3 application-properties + a 100-octet data section, encoded and decoded by
our core, by python-qpid-proton (``Message.encode``/``decode``: its C codec
behind the Python binding) and by Azure's pure-Python ``_pyamqp`` codec
(``encode_payload``/``decode_payload`` plus its transfer frame), in the same
run.  Messages and performatives are built once; what is timed is turning
them into octets and back.

What each library does per message:

* ``ours`` and ``_pyamqp``: the transfer performative and frame header as
  well as the payload (the whole frame, both ways);
* ``proton``: the payload only (``Message`` has no transfer: proton's engine
  frames it in C, out of reach of a codec bench) -- so ``ours-payload``
  (``encode_message``/``decode_message`` alone) is the like-for-like row
  for proton, ``ours`` the one for ``_pyamqp``;
* decode then reads the same fields from every library: the subject, the
  message-id, the application property ``b`` and the body octets.  Proton
  leaves the properties section in C until a field is read (a read goes
  through its binding), while ours and ``_pyamqp`` build every value at
  decode; a decode nobody reads from is no use, so the reads are timed.

    python bench/codec_1_0.py [--n 20000] [--rounds 5]

Prints the best of ``rounds`` per workload (wall-clock, microseconds per
message) and the ratios.  The machine is shared: for figures that do not
swing, see ``bench/instructions_1_0.py`` (callgrind instruction counts of
the same workloads).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

BODY = bytes(range(100))
APP = {"a": 1, "b": "two", "c": True}


def ours(mode: str, frame: bool = True) -> Callable[[], object]:
    from amqp_sansio.v1_0 import spec
    from amqp_sansio.v1_0.framing import decode_frame, encode_frame
    from amqp_sansio.v1_0.message import AmqpMessage, decode_message, encode_message

    msg = AmqpMessage(
        header=spec.Header(durable=True, priority=5),
        properties=spec.Properties(message_id="id-1", to="queue", subject="s",
                                   content_type="text/plain"),
        application_properties=spec.ApplicationProperties(APP),
        body=(spec.Data(BODY),))
    xfer = spec.Transfer(handle=0, delivery_id=1, delivery_tag=b"t1", message_format=0)

    def enc() -> object:
        return encode_frame(xfer, 0, encode_message(msg))

    def enc_payload() -> object:
        return encode_message(msg)

    wire = enc()
    payload = decode_frame(wire).payload

    def dec() -> object:
        f = decode_frame(wire)
        m = decode_message(f.payload)
        p = m.properties
        assert p is not None and m.application_properties is not None
        return f.body, p.subject, p.message_id, m.application_properties.value["b"], m.data

    def dec_payload() -> object:
        m = decode_message(payload)
        p = m.properties
        assert p is not None and m.application_properties is not None
        return p.subject, p.message_id, m.application_properties.value["b"], m.data

    if mode == "encode":
        return enc if frame else enc_payload
    return dec if frame else dec_payload


def ours_payload(mode: str) -> Callable[[], object]:
    return ours(mode, frame=False)


def proton(mode: str) -> Callable[[], object]:
    import proton as p

    m = p.Message(body=BODY, durable=True, priority=5, id="id-1", address="queue",
                  subject="s", content_type="text/plain", properties=dict(APP))
    m.inferred = True
    wire = m.encode()

    def dec() -> object:
        d = p.Message()
        d.decode(wire)
        return d.subject, d.id, d.properties["b"], d.body

    return m.encode if mode == "encode" else dec


def pyamqp(mode: str) -> Callable[[], object]:
    from azure.servicebus._pyamqp import _decode as d
    from azure.servicebus._pyamqp import _encode as e
    from azure.servicebus._pyamqp import message as m
    from azure.servicebus._pyamqp import performatives as pf

    msg = m.Message(header=m.Header(durable=True, priority=5),
                    properties=m.Properties(message_id="id-1", to="queue", subject="s",
                                            content_type="text/plain"),
                    application_properties=dict(APP), data=[BODY])

    def enc() -> object:
        out = bytearray()
        e.encode_payload(out, msg)
        frame = pf.TransferFrame(handle=0, delivery_id=1, delivery_tag=b"t1", message_format=0,
                                 settled=None, more=None, rcv_settle_mode=None, state=None,
                                 resume=None, aborted=None, batchable=None, payload=bytes(out))
        head, body = e.encode_frame(frame)
        return head + b"\0\0" + (body or b"")

    wire = enc()
    assert isinstance(wire, bytes)

    def dec() -> object:
        _, fields = d.decode_frame(memoryview(wire)[8:])
        m = d.decode_payload(fields[-1])
        return (fields, m.properties.subject, m.properties.message_id,
                m.application_properties[b"b"], b"".join(m.data))

    return enc if mode == "encode" else dec


LIBS = {"ours": ours, "ours-payload": ours_payload, "proton": proton, "pyamqp": pyamqp}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = {(lib, mode): LIBS[lib](mode) for lib in LIBS for mode in ("encode", "decode")}
    best = {k: float("inf") for k in work}
    for _ in range(args.rounds):  # interleaved, so load swings hit all alike
        for k, f in work.items():
            t = time.perf_counter()
            for _ in range(args.n):
                f()
            best[k] = min(best[k], (time.perf_counter() - t) / args.n * 1e6)
    for mode in ("encode", "decode"):
        o, op = best[("ours", mode)], best[("ours-payload", mode)]
        pr, py = best[("proton", mode)], best[("pyamqp", mode)]
        print(f"{mode}: ours {o:.2f} us (payload only {op:.2f} us), proton {pr:.2f} us "
              f"({pr / op:.2f}x payload to payload; {pr / o:.2f}x vs ours with the frame), "
              f"_pyamqp {py:.2f} us ({py / o:.2f}x)")


if __name__ == "__main__":
    main()
