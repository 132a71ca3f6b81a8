"""A recording HTTP proxy in front of Azurite: which tables, containers and queues did a process touch?

A process is pointed at it by its connection string (:meth:`StorageRecorder.connection_string`):
each of Azurite's three services gets a port of its own here, every request is
forwarded unchanged (Shared Key signs the path, not the host, so signatures
hold) and the resource it names is recorded -- for a table batch, each table
its operations name. Nothing is mocked: the process talks to the real Azurite.

A test may also act at an exact moment of the process's work
(:meth:`StorageRecorder.before`): the hook runs before the first request it
matches is forwarded, e.g. to alter a blob between two writes of the process.
"""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from devhost.azurite import HOST_ACCOUNT, Azurite

SERVICES = ("blob", "queue", "table")
_TABLE_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9]*)(?:\(.*\))?$")
_BATCH_TARGET = re.compile(rb"^[A-Z]+ https?://[^/\s]+/([^/\s]+)/([A-Za-z][A-Za-z0-9]*)", re.MULTILINE)
_CREATED_TABLE = re.compile(rb'"TableName"\s*:\s*"([^"]+)"')
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


@dataclass(frozen=True)
class Touch:
    service: str  # blob | queue | table
    account: str
    resource: str  # the container, queue or table ("" for an account-level call, e.g. listing containers)
    method: str


def resources_of(service: str, method: str, path: str, body: bytes) -> list[Touch]:
    """What one request names: its account and container, queue or table."""
    parts = [unquote(part) for part in urlsplit(path).path.split("/") if part]
    account = parts[0] if parts else ""
    first = parts[1] if len(parts) > 1 else ""
    if service != "table":
        return [Touch(service, account, first, method)]
    if first == "$batch":  # a transaction: the tables its operations name (one it cannot read names itself)
        named = [Touch(service, inner.decode(), table.decode(), method) for inner, table in _BATCH_TARGET.findall(body)]
        return named or [Touch(service, account, first, method)]
    if first.startswith("Tables"):  # the table service: create, delete or query tables
        named = re.findall(r"'([^']+)'", first) or [name.decode() for name in _CREATED_TABLE.findall(body)]
        return [Touch(service, account, f"Tables:{name}", method) for name in named] or [
            Touch(service, account, "Tables", method)
        ]
    match = _TABLE_NAME.match(first)
    return [Touch(service, account, match.group(1) if match else first, method)]


class StorageRecorder:
    def __init__(self, azurite: Azurite) -> None:
        self._azurite = azurite
        self._servers: dict[str, ThreadingHTTPServer] = {}
        self._lock = threading.Lock()
        self.touches: list[Touch] = []
        self._hooks: list[tuple[Callable[[Touch, bytes], bool], Callable[[], None]]] = []

    def before(self, matches: Callable[[Touch, bytes], bool], action: Callable[[], None]) -> None:
        """Run ``action`` once, before the first request that ``matches`` (a touch and the body) is forwarded."""
        with self._lock:
            self._hooks.append((matches, action))

    def connection_string(self, account: str = HOST_ACCOUNT) -> str:
        """The account's connection string with every endpoint here instead of at Azurite."""
        text = self._azurite.connection_string(account)
        for service, port in self._upstream_ports().items():
            text = text.replace(f":{port}/", f":{self._servers[service].server_address[1]}/")
        return text

    def resources(self, service: str, account: str = HOST_ACCOUNT) -> set[str]:
        with self._lock:
            return {t.resource for t in self.touches if t.service == service and t.account == account}

    def accounts(self) -> set[str]:
        with self._lock:
            return {touch.account for touch in self.touches}

    def _upstream_ports(self) -> dict[str, int]:
        azurite = self._azurite
        return {"blob": azurite.blob_port, "queue": azurite.queue_port, "table": azurite.table_port}

    def _record(self, touches: list[Touch], body: bytes) -> None:
        with self._lock:
            self.touches.extend(touches)
            due = [hook for hook in self._hooks if any(hook[0](touch, body) for touch in touches)]
            self._hooks = [hook for hook in self._hooks if hook not in due]
        for _, action in due:
            action()

    @contextmanager
    def running(self) -> Iterator[StorageRecorder]:
        threads = []
        for service, port in self._upstream_ports().items():
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, service, port))
            server.daemon_threads = True
            self._servers[service] = server
            thread = threading.Thread(target=server.serve_forever, name=f"recorder-{service}", daemon=True)
            thread.start()
            threads.append(thread)
        try:
            yield self
        finally:
            for server in self._servers.values():
                server.shutdown()
                server.server_close()
            for thread in threads:
                thread.join(timeout=5)


def _handler(recorder: StorageRecorder, service: str, upstream_port: int) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            recorder._record(resources_of(service, self.command, self.path, body), body)
            upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
            try:
                headers = {key: value for key, value in self.headers.items() if key.lower() not in _HOP_BY_HOP}
                headers["Content-Length"] = str(len(body))
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
            finally:
                upstream.close()
            self.send_response(answer.status, answer.reason)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP_BY_HOP:
                    self.send_header(key, value)
            # A HEAD answer's length is the resource's (a blob's size), not its empty body's.
            size = answer.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", size or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_MERGE = do_OPTIONS = _forward

    return Forward
