"""Local stand-ins for the factory's neighbours (ControlPlaneApi, KnowledgeHost, DeliveryHost).

Each is a real HTTP server on a free loopback port (stdlib ``http.server``)
that speaks its neighbour's contract as :mod:`shared.platform.neighbours` documents it,
and can be told to fail the ways a neighbour fails:

- :meth:`StandIn.slow`: every answer waits first (past the client's time-out);
- :meth:`StandIn.failing`: every answer is that status (``503``, ``500``, ...);
- :meth:`StandIn.answering`: every answer is ``200`` with that body (schema-invalid JSON, or not JSON);
- :meth:`StandIn.stop`: down (connections refused); :meth:`StandIn.start` brings it back on the same port;
- :meth:`StandIn.heal`: speaks the contract again.

Every request is recorded (:attr:`StandIn.requests`, :meth:`StandIn.count`) with its
``Authorization`` header; the KnowledgeHost stand-in also counts artifacts by id
(:attr:`KnowledgeHostStandIn.puts`, :attr:`KnowledgeHostStandIn.created`) so a test
can check that each was published exactly once. It answers HTTP/1.0 (one request
per connection), so a stopped stand-in answers nothing, not even on a kept-alive
connection. Use it as a context manager or with :meth:`StandIn.start` / :meth:`StandIn.stop`.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from devhost.azurite import free_port

Answer = tuple[int, Any]  # status, JSON document (None: no body)
ARTIFACT_KINDS = {"plan-receipt", "apply-receipt", "run-outputs", "drift-report"}


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str  # as requested, without the query
    authorization: str | None


class StandIn:
    """A neighbour's stand-in; subclasses answer its contract in :meth:`answer`."""

    service = "neighbour"

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[Recorded] = []
        self._delay = 0.0
        self._status: int | None = None
        self._failures_left: int | None = None
        self._body: bytes | None = None
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> Self:
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- failures ---

    def slow(self, seconds: float) -> None:
        self._delay = seconds

    def failing(self, status: int = 503, times: int | None = None) -> None:
        """Answer ``status`` to every request (``times``: to that many, then speak the contract again)."""
        self._status, self._failures_left = status, times

    def answering(self, body: bytes) -> None:
        self._body = body

    def heal(self) -> None:
        self._delay, self._status, self._failures_left, self._body = 0.0, None, None, None

    def count(self, method: str | None = None, path: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if method in (None, r.method) and path in (None, r.path))

    def _failure(self) -> int | None:
        with self._lock:
            status = self._status
            if self._failures_left is not None:
                self._failures_left -= 1
                if self._failures_left <= 0:
                    self._status = self._failures_left = None
            return status

    # --- the contract ---

    def saw(self, method: str, parts: list[str]) -> None:
        """Every request as it arrives, before any failure is played (for counts)."""

    def answer(self, method: str, parts: list[str], body: Any) -> Answer:
        raise NotImplementedError

    def serve(self, method: str, target: str, authorization: str | None, raw: bytes) -> tuple[int, bytes]:
        path = urlsplit(target).path
        parts = [unquote(part) for part in path.strip("/").split("/") if part]
        with self._lock:
            self.requests.append(Recorded(method, path, authorization))
            self.saw(method, parts)
        if self._delay:
            time.sleep(self._delay)
        if (status := self._failure()) is not None:
            return status, json.dumps({"error": f"{self.service} stand-in failing"}).encode()
        if self._body is not None:
            return 200, self._body
        if not parts:
            return 200, json.dumps({"service": self.service}).encode()
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return 400, json.dumps({"error": "the body is not JSON"}).encode()
        with self._lock:
            status, document = self.answer(method, parts, body)
        return status, b"" if document is None else json.dumps(document).encode()


def _handler_for(stand_in: StandIn) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, body = stand_in.serve(self.command, self.path, self.headers.get("Authorization"), raw)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up (its time-out): nobody to answer

        do_GET = do_PUT = do_POST = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class's name
            pass

    return Handler


def _not_found(what: str) -> Answer:
    return 404, {"error": f"{what} not found"}


class ControlPlaneStandIn(StandIn):
    """ControlPlaneApi: environments by (tenant, name), editions' quotas by name."""

    service = "ControlPlaneApi"

    def __init__(self) -> None:
        super().__init__()
        self.environments: dict[tuple[str, str], dict[str, Any]] = {}
        self.editions: dict[str, dict[str, int]] = {}

    def register(
        self,
        tenant: str,
        name: str,
        environment_class: str = "non-production",
        target: str = "local-storage",
        exists: bool = True,
    ) -> dict[str, Any]:
        record = {"tenant": tenant, "name": name, "class": environment_class, "target": target, "exists": exists}
        with self._lock:
            self.environments[(tenant, name)] = record
        return record

    def edition(self, name: str, quotas: dict[str, int]) -> None:
        with self._lock:
            self.editions[name] = dict(quotas)

    def answer(self, method: str, parts: list[str], body: Any) -> Answer:
        if method != "GET":
            return 405, {"error": "GET only"}
        match parts:
            case ["v1", "tenants", tenant, "environments", name]:
                record = self.environments.get((tenant, name))
                return (200, record) if record else _not_found(f"environment {name} of {tenant}")
            case ["v1", "editions", edition, "quotas"]:
                quotas = self.editions.get(edition)
                return (200, {"edition": edition, "quotas": quotas}) if quotas is not None else _not_found(edition)
        return _not_found("route")


class KnowledgeHostStandIn(StandIn):
    """KnowledgeHost: artifacts by id, stored once; a PUT of the same digest again is 200, of another 409."""

    service = "KnowledgeHost"

    def __init__(self) -> None:
        super().__init__()
        self.stored: dict[str, dict[str, Any]] = {}
        self.puts: Counter[str] = Counter()  # every PUT by artifact id, answered or not
        self.created: Counter[str] = Counter()  # the PUTs that stored it (exactly once: 1 per id)

    def tamper(self, artifact_id: str, content: str) -> None:
        """Change a stored artifact's content but not its digest (a broken mirror)."""
        with self._lock:
            self.stored[artifact_id] = {**self.stored[artifact_id], "content": content}

    def saw(self, method: str, parts: list[str]) -> None:
        if method == "PUT" and len(parts) == 3 and parts[:2] == ["v1", "artifacts"]:
            self.puts[parts[2]] += 1

    def answer(self, method: str, parts: list[str], body: Any) -> Answer:
        match parts:
            case ["v1", "artifacts", artifact_id] if method == "GET":
                stored = self.stored.get(artifact_id)
                return (200, stored) if stored else _not_found(f"artifact {artifact_id}")
            case ["v1", "artifacts", artifact_id] if method == "PUT":
                return self._put(artifact_id, body)
        return _not_found("route")

    def _put(self, artifact_id: str, body: Any) -> Answer:
        if problem := _artifact_problem(artifact_id, body):
            return 422, {"error": problem}
        stored = self.stored.get(artifact_id)
        if stored is not None:
            status = 200 if stored["sha256"] == body["sha256"] else 409
            return status, {"artifact_id": artifact_id, "sha256": stored["sha256"]}
        self.stored[artifact_id] = body
        self.created[artifact_id] += 1
        return 201, {"artifact_id": artifact_id, "sha256": body["sha256"]}


def _artifact_problem(artifact_id: str, body: Any) -> str | None:
    """What KnowledgeHost would refuse in a PUT's body (its own check, not the product's model)."""
    if not isinstance(body, dict):
        return "the body is not an object"
    missing = {"artifact_id", "kind", "tenant", "environment", "sha256"} - set(body)
    if missing:
        return f"missing {sorted(missing)}"
    if body["artifact_id"] != artifact_id:
        return "artifact_id differs from the path"
    if body["kind"] not in ARTIFACT_KINDS:
        return f"unknown kind {body['kind']}"
    if ("content" in body) == ("content_ref" in body):
        return "exactly one of content and content_ref"
    if "content" in body and hashlib.sha256(body["content"].encode()).hexdigest() != body["sha256"]:
        return "sha256 does not match the content"
    return None


class DeliveryHostStandIn(StandIn):
    """DeliveryHost: releases by (release id, environment)."""

    service = "DeliveryHost"

    def __init__(self) -> None:
        super().__init__()
        self.releases: dict[tuple[str, str], dict[str, Any]] = {}

    def publish(
        self, release_id: str, environment: str, specification_text: str, commit: str | None = None
    ) -> dict[str, Any]:
        """Make ``release_id`` resolve for ``environment`` (``commit``: a fresh one when not given)."""
        release = {
            "release_id": release_id,
            "environment": environment,
            "specification_text": specification_text,
            "commit": commit or hashlib.sha1(uuid.uuid4().bytes).hexdigest(),
        }
        with self._lock:
            self.releases[(release_id, environment)] = release
        return release

    def answer(self, method: str, parts: list[str], body: Any) -> Answer:
        match parts:
            case ["v1", "releases", release_id, "environments", environment] if method == "GET":
                release = self.releases.get((release_id, environment))
                return (200, release) if release else _not_found(f"release {release_id} for {environment}")
        return _not_found("route")
