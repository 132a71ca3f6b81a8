"""A recording proxy in front of one Azurite service, for evidence a test cannot get from the storage itself.

A test points a target's connection string at the proxy instead of Azurite
(the shared-key signature covers the path and headers, not the host, so
signed requests pass through unchanged). The proxy records every request and
the status Azurite answered, so the test can count, say, how many times a
queue was created rather than only see that it exists. It can also *hold* the
answer to a request it has already passed on: the change is made in the
store, but the caller has not heard so. A host killed meanwhile dies with that
step in flight.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
}


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str  # without the query
    query: str
    status: int


class StorageProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.exchanges: list[Exchange] = []
        self.held: list[Exchange] = []  # requests made upstream whose answers are being held back
        self._hold: Callable[[str, str], bool] | None = None
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> StorageProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def hold_answers(self, matches: Callable[[str, str], bool]) -> None:
        """From now on, pass requests ``matches(method, path)`` on but keep their answers until :meth:`release`."""
        self._release.clear()
        self._hold = matches

    def release(self) -> None:
        self._hold = None
        self._release.set()

    def count(self, method: str, path: str, status: int | None = None, query: str = "") -> int:
        """How many ``method path?query`` requests reached the store (answered ``status``, if given)."""
        with self._lock:
            return sum(
                1
                for e in self.exchanges
                if e.method == method and e.path == path and e.query == query and (status is None or e.status == status)
            )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _forward(self) -> None:
                head = self.command == "HEAD"
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    content = answer.read()
                finally:
                    upstream.close()
                parts = urlsplit(self.path)
                exchange = Exchange(self.command, parts.path, parts.query, answer.status)
                with proxy._lock:
                    proxy.exchanges.append(exchange)
                hold = proxy._hold
                if hold is not None and hold(self.command, parts.path):
                    with proxy._lock:
                        proxy.held.append(exchange)
                    proxy._release.wait(timeout=120)
                try:
                    self.send_response(answer.status, answer.reason)
                    for key, value in answer.getheaders():
                        if key.lower() not in HOP_BY_HOP and (key.lower() != "content-length" or head):
                            self.send_header(key, value)
                    if not head:  # a HEAD answer keeps the length of what a GET would send
                        self.send_header("Content-Length", str(len(content)))
                    self.end_headers()
                    if not head:
                        self.wfile.write(content)
                except OSError:
                    pass  # the caller is gone (a killed host)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_MERGE = do_PATCH = do_OPTIONS = _forward

        return Handler
