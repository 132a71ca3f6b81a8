"""HTTP triggers on a real HTTP server, plus the host's own endpoints.

Requests become ``func.HttpRequest`` objects with route parameters; what the
function returns becomes the HTTP answer. Failures of the host itself (no such
route, wrong method, body too large, a function that raised) are answered as
``application/problem+json`` so that callers see one error format.

The host's own endpoints want a key, as Azure's do (``devhost.host_keys``):
``/admin/...`` the master key, the Durable webhooks the Durable system key.
The key is checked before anything else, so a caller without one learns
nothing (not even whether a function or instance exists). While the host
listens on loopback only, a request naming another host in its ``Host``
header is refused: that is how a web page reaches a local server by DNS
rebinding.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import azure.functions as func
from aiohttp import web

from devhost.catalog import FunctionCatalog, FunctionInfo
from devhost.host_keys import HostKeys, presented_key
from devhost.invoker import Invoker
from devhost.routes import Route, compile_route, order_routes
from devhost.tracing import carrier_of

log = logging.getLogger("devhost.http")

# Runs a non-HTTP function on demand: (function, input text) -> None
AdminRunner = Callable[[FunctionInfo, str], Awaitable[None]]
HostHandler = Callable[[web.Request, Mapping[str, str]], Awaitable[web.StreamResponse]]
KeyCheck = Callable[[str | None], bool]

ADMIN_PREFIX = "/admin/"
MAX_ADMIN_BODY = 64 * 1024  # an admin run's input becomes a queue message or timer input: Azure's 64 KiB
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}


def problem(status: int, title: str, detail: str, headers: Mapping[str, str] | None = None) -> web.Response:
    body = {
        "type": f"urn:runtime-cloud:problem:{title.lower().replace(' ', '-')}",
        "title": title,
        "status": status,
        "detail": detail,
    }
    return web.Response(
        status=status, text=json.dumps(body), headers=headers or {}, content_type="application/problem+json"
    )


def key_required() -> web.Response:
    return problem(
        401,
        "Unauthorized",
        "this endpoint of the host needs a host key "
        "(x-functions-key header or code query parameter); see `python -m devhost keys`",
    )


@dataclass(frozen=True)
class HostEndpoint:
    route: Route[HostHandler]
    handler: HostHandler
    accepts: KeyCheck


@dataclass(frozen=True)
class KeyPathAlias:
    """``/{alias}/{key}/rest`` answers as ``/{target}/rest`` when the key in the path is accepted.

    For clients that cannot add a header or query parameter to the URLs they
    build, such as the Durable SDK's RPC calls.
    """

    alias: str
    target: str
    accepts: KeyCheck

    def resolve(self, path: str) -> tuple[str, str] | None:
        """(key, target path) if ``path`` is under this alias."""
        prefix = f"/{self.alias.strip('/')}/"
        if not path.startswith(prefix):
            return None
        key, _, rest = path.removeprefix(prefix).partition("/")
        return key, f"/{self.target.strip('/')}/{rest}"


class HttpFrontDoor:
    def __init__(
        self,
        catalog: FunctionCatalog,
        invoker: Invoker,
        route_prefix: str,
        admin_runner: AdminRunner,
        keys: HostKeys,
        loopback_only: bool = True,
        max_body_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self._catalog = catalog
        self._invoker = invoker
        self._admin_runner = admin_runner
        self._keys = keys
        self._loopback_only = loopback_only
        self._max_body = max_body_bytes
        self._routes: list[Route[FunctionInfo]] = order_routes(
            [
                compile_route(route_prefix, f.trigger.get("route") or f.name, f.trigger.get("methods"), f)
                for f in catalog.with_trigger("httpTrigger")
            ]
        )
        self._host_endpoints: list[HostEndpoint] = []
        self._aliases: list[KeyPathAlias] = []

    @property
    def routes(self) -> list[Route[FunctionInfo]]:
        return list(self._routes)

    @property
    def keys(self) -> HostKeys:
        return self._keys

    def add_host_route(
        self, template: str, methods: list[str], handler: HostHandler, accepts: KeyCheck | None = None
    ) -> None:
        """An endpoint of the host itself (e.g. Durable management), not an app function.

        ``accepts`` says which keys open it; by default the Durable system key or the master key.
        """
        self._host_endpoints.append(
            HostEndpoint(compile_route("", template, methods, handler), handler, accepts or self._keys.is_durable)
        )

    def add_key_path_alias(self, alias: str, target: str, accepts: KeyCheck | None = None) -> None:
        self._aliases.append(KeyPathAlias(alias, target, accepts or self._keys.is_durable))

    def build(self) -> web.Application:
        # aiohttp's own size check is disabled; the limit is enforced below as a problem answer.
        app = web.Application(client_max_size=1024**4)
        # Every path, even one with a (percent-encoded) line break, which ``.`` would not match: else
        # aiohttp's own router answers a text/plain 404 instead of a problem document.
        app.router.add_route("*", r"/{tail:[\s\S]*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if self._loopback_only and request.url.host not in LOOPBACK_NAMES:
            return problem(421, "Misdirected Request", "this host answers only to a loopback host name")
        path = request.path
        if path.startswith(ADMIN_PREFIX):
            return await self._admin(request, path)
        answer = await self._host_endpoint(request, path)
        if answer is not None:
            return answer
        matches = [(route, params) for route in self._routes if (params := route.match(path)) is not None]
        if not matches:
            return problem(404, "Not Found", f"no function answers {path}")
        for route, params in matches:
            if not route.methods or request.method in route.methods:
                return await self._call(request, route.target, params)
        allowed = sorted({m for route, _ in matches for m in route.methods})
        return problem(
            405, "Method Not Allowed", f"{request.method} is not allowed on {path}", {"Allow": ", ".join(allowed)}
        )

    async def _host_endpoint(self, request: web.Request, path: str) -> web.StreamResponse | None:
        """The answer of a host endpoint, or None when ``path`` is none of theirs."""
        key = presented_key(request.headers, request.query)
        for alias in self._aliases:
            if (resolved := alias.resolve(path)) is not None:
                key, path = resolved
                if not alias.accepts(key):
                    return key_required()
        for endpoint in self._host_endpoints:
            params = endpoint.route.match(path)
            if params is None or (endpoint.route.methods and request.method not in endpoint.route.methods):
                continue
            if not endpoint.accepts(key):
                return key_required()
            try:
                return await endpoint.handler(request, params)
            except Exception:
                log.exception("host endpoint %s failed", path)
                return problem(500, "Internal Server Error", "the host endpoint failed; see the host log")
        return None

    async def _read_body(self, request: web.Request) -> bytes | None:
        if request.content_length is not None and request.content_length > self._max_body:
            return None
        body = bytearray()
        async for chunk in request.content.iter_chunked(65536):
            body.extend(chunk)
            if len(body) > self._max_body:
                return None
        return bytes(body)

    async def _call(self, request: web.Request, function: FunctionInfo, params: dict[str, str]) -> web.StreamResponse:
        body = await self._read_body(request)
        if body is None:
            return problem(413, "Payload Too Large", f"the limit is {self._max_body} bytes")
        http_request = func.HttpRequest(
            method=request.method,
            url=str(request.url),
            headers=dict(request.headers),
            params=dict(request.query),
            route_params=params,
            body=body,
        )
        try:
            return to_web_response(
                await self._invoker.invoke(
                    function,
                    http_request,
                    trace_parent=carrier_of(request.headers),
                    attributes={"http.request.method": request.method, "url.path": request.path},
                )
            )
        except Exception:
            log.exception("function %s failed", function.name)
            return problem(500, "Internal Server Error", f"function {function.name} failed; see the host log")

    async def _admin(self, request: web.Request, path: str) -> web.StreamResponse:
        """``POST /admin/functions/{name}`` with ``{"input": "..."}`` runs a non-HTTP function now (202)."""
        if not self._keys.is_master(presented_key(request.headers, request.query)):
            return key_required()
        name = path.removeprefix(f"{ADMIN_PREFIX}functions/")
        if name == path or "/" in name:
            return problem(404, "Not Found", f"no admin endpoint answers {path}")
        if request.method != "POST":
            return problem(405, "Method Not Allowed", "the admin API takes POST", {"Allow": "POST"})
        if request.content_type != "application/json":
            return problem(415, "Unsupported Media Type", 'send {"input": "..."} as application/json')
        if request.content_length is None:
            return problem(411, "Length Required", "send the body with a Content-Length")
        if request.content_length > MAX_ADMIN_BODY:
            return problem(413, "Payload Too Large", f"the admin API takes at most {MAX_ADMIN_BODY} bytes")
        function = self._catalog.get(name)
        if function is None:
            return problem(404, "Not Found", f"no function named {name}")
        if function.trigger_type.lower() == "httptrigger":
            return problem(400, "Bad Request", "HTTP functions are called on their own route")
        text = _admin_input(await request.read())
        if text is None:
            return problem(400, "Bad Request", 'send {"input": "..."} as JSON')
        await self._admin_runner(function, text)
        return web.Response(status=202)


def _admin_input(raw: bytes) -> str | None:
    """The function's input from an admin body, or None if the body is not the JSON the API takes."""
    try:
        document = json.loads(raw) if raw else {}
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    text = document.get("input", "")
    return text if isinstance(text, str) else json.dumps(text)


class UnencodableResult(TypeError):
    """What the worker answers when an HTTP function returns neither ``HttpResponse`` nor ``str``."""


def to_web_response(result: object) -> web.Response:
    """Encode a function's result as the worker does: ``func.HttpResponse`` or ``str``, nothing else.

    The worker raises for any other value (``None`` and ``dict`` included) and
    the host answers 500, so the local host does too rather than guess.
    """
    if isinstance(result, str):
        return web.Response(status=200, text=result)
    if not isinstance(result, func.HttpResponse):
        raise UnencodableResult(
            f'unable to encode outgoing TypedData: unsupported type "http" for Python type "{type(result).__name__}"'
        )
    headers = dict(result.headers.items())
    if not any(k.lower() == "content-type" for k in headers) and result.mimetype:
        charset = f"; charset={result.charset}" if result.charset else ""
        headers["Content-Type"] = f"{result.mimetype}{charset}"
    return web.Response(status=result.status_code, body=result.get_body(), headers=headers)
