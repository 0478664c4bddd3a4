"""A real network partition for the PostgreSQL store tests: a TCP proxy between the store and the
server that stops forwarding on command.

While cut, the proxy reads nothing from either side and accepts no connection: what a client
sends waits in the kernel's buffers, unanswered, and a new connection is accepted by the kernel
but never reaches the server, as when the network between them drops every packet. Healed, it
forwards again what was held, as TCP does once a partition ends.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from types import TracebackType

from psycopg.conninfo import make_conninfo

__all__ = ("Partition",)


class Partition:
    """Forwards ``127.0.0.1:port`` to ``upstream`` until :meth:`cut`, again after :meth:`heal`.

    Use as a context manager: leaving it heals and closes every connection and the thread."""

    def __init__(self, upstream: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._peers: dict[socket.socket, socket.socket] = {}
        self._lock = threading.Lock()
        self._cut = False
        self._closing = False
        self.cuts = 0  # how many times cut() was called (what a test's model can check)
        self._thread = threading.Thread(target=self._run, name="partition", daemon=True)
        self._thread.start()

    def conninfo(self, url: str) -> str:
        """``url`` (a libpq URL or keyword string) pointed at this proxy."""
        return make_conninfo(url, host="127.0.0.1", port=str(self.port))

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            self.cuts += 1
        self._wake()

    def heal(self) -> None:
        with self._lock:
            self._cut = False
        self._wake()

    def __enter__(self) -> Partition:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closing = True
        self._wake()
        self._thread.join(timeout=30)
        for sock in [*self._peers, self._listener, self._wake_r, self._wake_w]:
            sock.close()
        self._selector.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run(self) -> None:
        registered = False
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        while True:
            with self._lock:
                closing, cut = self._closing, self._cut
            if closing:
                return
            if cut == registered:  # cut: stop reading everything; healed: read again
                for sock in [self._listener, *self._peers]:
                    if cut:
                        self._selector.unregister(sock)
                    else:
                        self._selector.register(sock, selectors.EVENT_READ)
                registered = not cut
            for key, _ in self._selector.select():
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._wake_r:
                    sock.recv(4096)
                elif sock is self._listener:
                    self._accept()
                else:
                    self._forward(sock)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        try:
            server = socket.create_connection(self.upstream, timeout=30)
        except OSError:
            client.close()
            return
        for sock in (client, server):
            sock.setblocking(True)
            sock.settimeout(30)
            self._selector.register(sock, selectors.EVENT_READ)
        self._peers[client], self._peers[server] = server, client

    def _forward(self, sock: socket.socket) -> None:
        peer = self._peers.get(sock)
        if peer is None:
            return  # closed with its peer earlier in this round
        try:
            data = sock.recv(65536)
            if data:
                peer.sendall(data)
                return
        except OSError:
            pass
        for end in (sock, peer):  # one side closed: close the other
            self._selector.unregister(end)
            del self._peers[end]
            end.close()
