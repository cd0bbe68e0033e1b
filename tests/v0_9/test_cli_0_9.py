"""``decode``/``encode --protocol 0-9``: the 0-9-1 commands with 0-9's table."""

from __future__ import annotations

import json
from typing import Any

from cli_main import run

from amqp_sansio.v0_9 import spec
from amqp_sansio.v0_9.connection import TABLE_0_9
from amqp_sansio.v0_9_1.framing import encode_content, encode_method

P = ("--protocol", "0-9")


def every_method() -> bytes:
    """A 0-9 header, then every 0-9 method (content ones with properties and a
    body cut into frames), each on its own channel."""
    out = [spec.PROTOCOL_HEADER]
    for i, (_, cls) in enumerate(sorted(TABLE_0_9.methods.items())):
        m = cls()
        if cls.CONTENT:
            pcls = TABLE_0_9.properties[cls.CLASS_ID]
            first = pcls.FIELDS[0]
            props = pcls(**{first.attr: {"n": 1} if first.type == "table" else "x"})
            out.append(encode_content(i + 1, m, props, bytes(range(256)) * 40, 4096,
                                      properties_of=TABLE_0_9.properties))
        else:
            out.append(encode_method(i + 1, m))
    return b"".join(out)


def test_decode_encode_reproduces_every_0_9_method() -> None:
    data = every_method()
    rc, out, err = run(["decode", *P], data)
    assert rc == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0] == {"protocol-header": [1, 1, 0, 9]}
    names = [j["method"] for j in lines[1:]]
    assert names == [m.NAME for _, m in sorted(TABLE_0_9.methods.items())]
    staged: dict[str, Any] = next(j for j in lines if j.get("method") == "file.stage")
    assert staged["properties"] == {"content-type": "x"} and staged["frame-max"] == 4096
    rc, again, err = run(["encode", *P], out)
    assert rc == 0, err
    assert again == data


def test_0_9_1_does_not_read_what_only_0_9_has() -> None:
    data = every_method()
    rc, out, err = run(["decode", "--protocol", "0-9-1"], data)
    assert rc != 0 and "unknown method (10, 42)" in err  # connection.redirect
    line = json.dumps({"method": "file.open", "channel": 1, "fields": {"identifier": "f"}})
    rc, out, err = run(["encode", "--protocol", "0-9-1"], line.encode())
    assert rc != 0 and "unknown method 'file.open'" in err
    rc, out, err = run(["encode", *P], line.encode())
    assert rc == 0 and out == encode_method(1, spec.FileOpen(identifier="f"))
