"""A throwaway certificate authority for TLS tests (the openssl CLI): a
server certificate for 127.0.0.1/localhost and client certificates whose
common name is the user they log in as (SASL EXTERNAL)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import attrs
import pytest

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None,
                                   reason="needs the openssl CLI")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


@attrs.frozen
class CA:
    dir: Path

    @property
    def cafile(self) -> Path:
        return self.dir / "ca.pem"

    def issue(self, cn: str, *, server: bool = False) -> tuple[Path, Path]:
        """``(certfile, keyfile)`` for ``cn``, signed by this CA."""
        cert, key, csr = (self.dir / f"{cn}.{x}" for x in ("pem", "key", "csr"))
        _openssl("req", *_KEY, "-subj", f"/O=amqp-sansio tests/CN={cn}", "-keyout", key.name,
                 "-out", csr.name, cwd=self.dir)
        ext = self.dir / f"{cn}.ext"
        ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server
                       else "extendedKeyUsage=clientAuth\n")
        _openssl("x509", "-req", "-in", csr.name, "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", ext.name, "-out", cert.name,
                 cwd=self.dir)
        return cert, key

    def server_context(self, *, ask_client_cert: bool = True) -> ssl.SSLContext:
        """A server context; with ``ask_client_cert``, client certificates
        signed by this CA are asked for (not required) and verified."""
        cert, key = self.issue("localhost", server=True)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        if ask_client_cert:
            ctx.load_verify_locations(self.cafile)
            ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx


def make_ca(directory: Path) -> CA:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", *_KEY, "-days", "2", "-subj", "/CN=amqp-sansio test CA",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=directory)
    return CA(directory)
