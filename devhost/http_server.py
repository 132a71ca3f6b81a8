"""HTTP triggers on a real HTTP server, plus the host's admin endpoint.

Requests become ``func.HttpRequest`` objects with route parameters; what the
function returns becomes the HTTP answer. Failures of the host itself (no such
route, wrong method, body too large, a function that raised) are answered as
``application/problem+json`` so that callers see one error format.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, Callable

import azure.functions as func
from aiohttp import web

from devhost.catalog import FunctionCatalog, FunctionInfo
from devhost.invoker import Invoker
from devhost.routes import Route, compile_route, order_routes

log = logging.getLogger("devhost.http")

# Runs a non-HTTP function on demand: (function, input text) -> None
AdminRunner = Callable[[FunctionInfo, str], Awaitable[None]]


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"type": f"urn:runtime-cloud:problem:{title.lower().replace(' ', '-')}", "title": title,
            "status": status, "detail": detail}
    return web.Response(status=status, text=json.dumps(body), headers=headers or {},
                        content_type="application/problem+json")


class HttpFrontDoor:
    def __init__(self, catalog: FunctionCatalog, invoker: Invoker, route_prefix: str,
                 admin_runner: AdminRunner, max_body_bytes: int = 4 * 1024 * 1024) -> None:
        self._catalog = catalog
        self._invoker = invoker
        self._admin_runner = admin_runner
        self._max_body = max_body_bytes
        self._routes: list[Route] = order_routes([
            compile_route(route_prefix, f.trigger.get("route") or f.name, f.trigger.get("methods"), f)
            for f in catalog.with_trigger("httpTrigger")
        ])
        self._extra: list[tuple[Route, Callable[[web.Request, dict[str, str]], Awaitable[web.StreamResponse]]]] = []

    @property
    def routes(self) -> list[Route]:
        return list(self._routes)

    def add_host_route(self, template: str, methods: list[str],
                       handler: Callable[[web.Request, dict[str, str]], Awaitable[web.StreamResponse]]) -> None:
        """Endpoints of the host itself (admin, Durable management) that are not app functions."""
        self._extra.append((compile_route("", template, methods, handler), handler))

    def build(self) -> web.Application:
        # aiohttp's own size check is disabled; the limit is enforced below as a problem answer.
        app = web.Application(client_max_size=1024**4)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if request.method == "POST" and path.startswith("/admin/functions/"):
            return await self._admin(request, path.removeprefix("/admin/functions/"))
        for route, handler in self._extra:
            params = route.match(path)
            if params is not None and (not route.methods or request.method in route.methods):
                try:
                    return await handler(request, params)
                except Exception:
                    log.exception("host endpoint %s failed", path)
                    return problem(500, "Internal Server Error", "the host endpoint failed; see the host log")
        matches = [(route, params) for route in self._routes if (params := route.match(path)) is not None]
        if not matches:
            return problem(404, "Not Found", f"no function answers {path}")
        for route, params in matches:
            if not route.methods or request.method in route.methods:
                return await self._call(request, route.target, params)
        allowed = sorted({m for route, _ in matches for m in route.methods})
        return problem(405, "Method Not Allowed", f"{request.method} is not allowed on {path}",
                       {"Allow": ", ".join(allowed)})

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
            return to_web_response(await self._invoker.invoke(function, http_request))
        except Exception:
            log.exception("function %s failed", function.name)
            return problem(500, "Internal Server Error", f"function {function.name} failed; see the host log")

    async def _admin(self, request: web.Request, name: str) -> web.StreamResponse:
        function = self._catalog.get(name)
        if function is None:
            return problem(404, "Not Found", f"no function named {name}")
        if function.trigger_type.lower() == "httptrigger":
            return problem(400, "Bad Request", "HTTP functions are called on their own route")
        raw = await request.read()
        try:
            document = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return problem(400, "Bad Request", 'send {"input": "..."} as JSON')
        text = document.get("input", "") if isinstance(document, dict) else ""
        await self._admin_runner(function, text if isinstance(text, str) else json.dumps(text))
        return web.Response(status=202)


class UnencodableResult(TypeError):
    """What the worker answers when an HTTP function returns neither ``HttpResponse`` nor ``str``."""


def to_web_response(result: Any) -> web.Response:
    """Encode a function's result as the worker does: ``func.HttpResponse`` or ``str``, nothing else.

    The worker raises for any other value (``None`` and ``dict`` included) and
    the host answers 500, so the local host does too rather than guess.
    """
    if isinstance(result, str):
        return web.Response(status=200, text=result)
    if not isinstance(result, func.HttpResponse):
        raise UnencodableResult(f'unable to encode outgoing TypedData: unsupported type "http" '
                                f'for Python type "{type(result).__name__}"')
    headers = {k: v for k, v in result.headers.items()}
    if not any(k.lower() == "content-type" for k in headers) and result.mimetype:
        charset = f"; charset={result.charset}" if result.charset else ""
        headers["Content-Type"] = f"{result.mimetype}{charset}"
    return web.Response(status=result.status_code, body=result.get_body(), headers=headers)
