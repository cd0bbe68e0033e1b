"""A TCP proxy on 127.0.0.1 that cuts its connections: the n-th connection
is closed (both ways, no goodbye) once ``budgets[n]`` octets went from the
client to the server; connections past the list are left alone.  Threads,
all joined on ``close()``."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


class CuttingProxy:
    def __init__(self, target: tuple[str, int], budgets: Sequence[int]) -> None:
        self.target = target
        self.budgets = list(budgets)
        self.cuts = 0
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                n = self.connections
                self.connections += 1
                budget = self.budgets[n] if n < len(self.budgets) else None
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            left = [budget]
            with self._lock:
                self._socks += [client, server]
            for src, dst, counted in ((client, server, True), (server, client, False)):
                t = threading.Thread(target=self._pipe, args=(src, dst, left if counted
                                                              else None, client, server),
                                     daemon=True)
                t.start()
                self._threads.append(t)

    def _pipe(self, src: socket.socket, dst: socket.socket, left: list[int | None] | None,
              a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if left is not None and left[0] is not None:
                    if len(data) >= left[0]:
                        dst.sendall(data[:left[0]])
                        with self._lock:
                            self.cuts += 1
                        break
                    left[0] -= len(data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (a, b):  # one side ending ends both: a cut, not a half-close
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close does not)
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        for t in self._threads:
            t.join(5)


@contextmanager
def cutting_proxy(target: tuple[str, int], budgets: Sequence[int]) -> Iterator[CuttingProxy]:
    p = CuttingProxy(target, budgets)
    try:
        yield p
    finally:
        p.close()
