"""The command line in-process: ``main(argv)`` with the standard streams swapped."""

from __future__ import annotations

import io
import sys

from amqp_sansio_cli.main import main


def run(argv: list[str], data: bytes = b"") -> tuple[int, bytes, str]:
    """main(argv) with stdin = data; returns (status, stdout, stderr)."""
    old = sys.stdin, sys.stdout, sys.stderr
    out = io.BytesIO()
    err = io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(data))
    stdout = io.TextIOWrapper(out, write_through=True)
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, err
    try:
        rc = main(argv)
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
        stdout.flush()
        # detach, or the wrappers close the BytesIO objects when collected
        stdout.detach()
        stdin.detach()
    return rc, out.getvalue(), err.getvalue()
