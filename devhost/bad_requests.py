"""Requests the HTTP parser refuses (a header too large, a malformed request line), answered as problems.

aiohttp answers them itself, before any route runs: as ``text/plain`` quoting
the offending bytes (for an oversized ``Authorization`` header, the start of
the bearer token) and logging them with a stack trace. Azure's front end
answers such a request with a bare status (431 for headers too large) and
never reflects it. Here the answer is a problem document that names no byte
of the request, and the log line says only what was refused.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

log = logging.getLogger("devhost.http")


class _ProblemRequestHandler(RequestHandler):
    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if not isinstance(exc, BadHttpMessage):
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:  # an answer already started: nothing more can be said
            raise ConnectionError("the response was already started")
        too_large = isinstance(exc, LineTooLong)
        status = 431 if too_large else 400
        title = "Request header fields too large" if too_large else "Bad request"
        log.warning("refused a request from %s: %s", request.remote, title.lower())
        body = {
            "type": "urn:runtime-cloud:problem:" + ("headers-too-large" if too_large else "bad-request"),
            "title": title,
            "status": status,
            "detail": "a header or the request line is longer than the host accepts"
            if too_large
            else "the request is not valid HTTP",
        }
        response = web.Response(status=status, text=json.dumps(body), content_type="application/problem+json")
        response.force_close()
        return response


class _ProblemServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _ProblemRequestHandler(self, loop=self._loop, **self._kwargs)


class ProblemAppRunner(web.AppRunner):
    """An ``AppRunner`` whose connections answer unparseable requests with problem documents."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _ProblemServer  # the same object, its connections made by the handler above
        return server
