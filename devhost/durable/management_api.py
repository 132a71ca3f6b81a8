"""The Durable HTTP management API, served by the local host.

The endpoints answer under ``/runtime/webhooks/durabletask/``, both as the
public webhook URLs that ``create_check_status_response`` hands out and as the
RPC base URL the Python SDK's client calls: start, restart,
status (``showHistory``, ``showHistoryOutput``, ``showInput``), list with
filters, raise event, terminate, suspend, resume and purge. The status codes
are the extension's: 400 an unknown orchestrator or instance to restart, 404
an unknown instance, 409 an instance id in use that host.json says not to
replace, 410 an event or command for a finished instance, 412 purging or
rewinding an instance in the wrong state. The errors the SDK's client reads
(start and restart) have the extension's body (``Message``, and
``ExceptionMessage`` for the SDK's ``start_new``); the others are
``application/problem+json``.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TypedDict

from aiohttp import web
from azure.core.exceptions import AzureError

from devhost.durable import history as h
from devhost.durable.client_binding import WEBHOOK_PREFIX, ClientBinding
from devhost.durable.functions import DurableFunctions
from devhost.durable.history import HistoryEvent
from devhost.durable.instances import InstanceState, RuntimeStatus
from devhost.durable.queues import ControlMessage
from devhost.durable.starter import InstanceExists, Starter, UnknownOrchestrator
from devhost.durable.status import StatusDocument, status_document
from devhost.durable.task_hub import TaskHub
from devhost.http_server import problem
from devhost.routes import compile_route
from devhost.tracing import carrier_of

log = logging.getLogger("devhost.durable")

Handler = Callable[[web.Request, Mapping[str, str]], Awaitable[web.StreamResponse]]

_INVALID_ID = re.compile(r"[/\\#?\x00-\x1f\x7f]")
MAX_ID_LENGTH = 256
LIST_PAGE = 100


class ManagementApi:
    def __init__(self, hub: TaskHub, functions: DurableFunctions, binding: ClientBinding) -> None:
        self._hub = hub
        self._starter = Starter(hub, functions)
        self._binding = binding

    def routes(self) -> list[tuple[str, list[str], Handler]]:
        """(template, methods, handler) for the host's front door."""
        return [(template, methods, _answering_problems(handler)) for template, methods, handler in self._routes()]

    def _routes(self) -> list[tuple[str, list[str], Handler]]:
        prefix = WEBHOOK_PREFIX
        instance = f"{prefix}/instances/{{instanceId}}"
        return [
            (f"{prefix}/orchestrators/{{functionName}}", ["POST"], self.start),
            (f"{prefix}/orchestrators/{{functionName}}/{{instanceId}}", ["POST"], self.start),
            (f"{prefix}/instances", ["GET"], self.list),
            (f"{prefix}/instances", ["DELETE"], self.purge_many),
            (instance, ["GET"], self.status),
            (instance, ["DELETE"], self.purge),
            (f"{instance}/raiseEvent/{{eventName}}", ["POST"], self.raise_event),
            (f"{instance}/terminate", ["POST"], self.terminate),
            (f"{instance}/suspend", ["POST"], self.suspend),
            (f"{instance}/resume", ["POST"], self.resume),
            (f"{instance}/rewind", ["POST"], self.rewind),
            (f"{instance}/restart", ["POST"], self.restart),
            (f"{prefix}/{{*rest}}", [], self.unknown),
        ]

    # -- start -------------------------------------------------------------

    async def start(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        if (wrong_hub := self._check_hub(request)) is not None:
            return wrong_hub
        instance_id = params.get("instanceId") or uuid.uuid4().hex
        if (bad_id := _check_instance_id(instance_id)) is not None:
            return bad_id
        try:
            input_json = request_json(await request.read())
        except ValueError as error:
            return problem(400, "Bad Request", f"the orchestration input must be JSON: {error}")
        try:
            await self._starter.start(
                params["functionName"], instance_id, input_json, trace_context=carrier_of(request.headers)
            )
        except UnknownOrchestrator as error:
            # the SDK's start_new raises Exception(ExceptionMessage) on a 400: the user reads this message
            return extension_error(400, str(error))
        except InstanceExists as error:
            return extension_error(409, str(error))  # the SDK raises Exception({"Message": ...}), as in Azure
        return self._check_status_response(request, instance_id)

    async def restart(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        """Start the instance's orchestrator again with its input, as a new instance (the default) or in its place."""
        if (wrong_hub := self._check_hub(request)) is not None:
            return wrong_hub
        await self._hub.ready()
        state = await self._hub.store.get(params["instanceId"])
        if state is None:
            return extension_error(
                400,
                "InstanceId does not match a valid orchestration instance.",
                f"An orchestration with the instanceId {params['instanceId']} was not found.",
            )
        same_id = request.query.get("restartWithNewInstanceId", "true").lower() == "false"
        instance_id = state.instance_id if same_id else uuid.uuid4().hex
        try:
            await self._starter.start(state.name, instance_id, state.input)
        except UnknownOrchestrator as error:
            return extension_error(400, "InstanceId does not match a valid orchestration instance.", str(error))
        except InstanceExists:
            return extension_error(409, "A non-terminal instance with this instance ID already exists.")
        return self._check_status_response(request, instance_id)

    def _check_status_response(self, request: web.Request, instance_id: str) -> web.StreamResponse:
        payload = self._binding.management_payload(instance_id, _origin(request))
        return web.json_response(payload, status=202, headers={"Location": payload["statusQueryGetUri"]})

    # -- queries -----------------------------------------------------------

    async def status(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        state, missing = await self._instance(request, params)
        if state is None:
            return missing
        records = None
        if _flag(request, "showHistory"):
            records = await self._hub.store.load_history(state.instance_id, state.execution_id, state.history_length)
        document = status_document(
            state,
            show_input=_flag(request, "showInput", default=True),
            history=records,
            show_history_output=_flag(request, "showHistoryOutput"),
        )
        if state.status in (RuntimeStatus.COMPLETED, RuntimeStatus.TERMINATED):
            return web.json_response(document, status=200)
        if state.status == RuntimeStatus.FAILED:
            code = 500 if _flag(request, "returnInternalServerErrorOnFailure") else 200
            return web.json_response(document, status=code)
        return web.json_response(document, status=202, headers={"Location": str(request.url)})

    async def list(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        if (wrong_hub := self._check_hub(request)) is not None:
            return wrong_hub
        try:
            filters = _filters(request)
            top = int(request.query.get("top") or LIST_PAGE)
            if top < 1:
                raise ValueError("top must be at least 1")
        except ValueError as error:
            return problem(400, "Bad Request", str(error))
        await self._hub.ready()
        show_input = _flag(request, "showInput")
        found: list[StatusDocument] = []
        more: str | None = None
        after = request.headers.get("x-ms-continuation-token") or None
        async for state in self._hub.store.query(after=after, prefix=request.query.get("instanceIdPrefix"), **filters):
            if len(found) == top:
                more = found[-1]["instanceId"]
                break
            found.append(status_document(state, show_input=show_input))
        headers = {"x-ms-continuation-token": more} if more else {}
        return web.json_response(found, status=200, headers=headers)

    # -- commands ----------------------------------------------------------

    async def raise_event(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        state, refusal = await self._running_instance(request, params, "raise an event to")
        if refusal is not None:
            return refusal
        try:
            data = request_json(await request.read())
        except ValueError as error:
            return problem(400, "Bad Request", f"the event data must be JSON: {error}")
        event = h.event_raised(h.now(), params["eventName"], data)
        await self._hub.queues.send_control(ControlMessage(params["instanceId"], None, event))
        return web.Response(status=202)

    async def terminate(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        return await self._command(request, params, "terminate", h.execution_terminated)

    async def suspend(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        return await self._command(request, params, "suspend", h.execution_suspended)

    async def resume(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        return await self._command(request, params, "resume", h.execution_resumed)

    async def _command(
        self,
        request: web.Request,
        params: Mapping[str, str],
        verb: str,
        make_event: Callable[[datetime, str], HistoryEvent],
    ) -> web.StreamResponse:
        _, refusal = await self._running_instance(request, params, verb)
        if refusal is not None:
            return refusal
        event = make_event(h.now(), request.query.get("reason", ""))
        await self._hub.queues.send_control(ControlMessage(params["instanceId"], None, event))
        return web.Response(status=202)

    async def _running_instance(
        self, request: web.Request, params: Mapping[str, str], verb: str
    ) -> tuple[InstanceState | None, web.StreamResponse | None]:
        state, missing = await self._instance(request, params)
        if state is None:
            return None, missing
        if state.status.finished:
            return state, problem(
                410,
                "Gone",
                f"cannot {verb} instance '{state.instance_id}': it has already "
                f"{'ended' if verb != 'terminate' else 'finished'} "
                f"({state.status.value})",
            )
        return state, None

    # -- purge -------------------------------------------------------------

    async def purge(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        state, missing = await self._instance(request, params)
        if state is None:
            return missing
        if not state.status.finished:
            return problem(
                412,
                "Precondition Failed",
                "only orchestrations in a terminal state can be purged, but "
                f"instance '{state.instance_id}' is {state.status.value} (terminate it first)",
            )
        await self._hub.store.purge(state.instance_id)
        self._hub.cache.forget(state.instance_id)
        return web.json_response({"instancesDeleted": 1}, status=200)

    async def purge_many(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        if (wrong_hub := self._check_hub(request)) is not None:
            return wrong_hub
        try:
            filters = _filters(request)
        except ValueError as error:
            return problem(400, "Bad Request", str(error))
        if filters["created_from"] is None:
            return problem(400, "Bad Request", "createdTimeFrom is required to purge by filter")
        await self._hub.ready()
        doomed = [s.instance_id async for s in self._hub.store.query(**filters) if s.status.finished]
        for instance_id in doomed:
            await self._hub.store.purge(instance_id)
            self._hub.cache.forget(instance_id)
        if not doomed:
            return problem(404, "Not Found", "no finished instances match")
        return web.json_response({"instancesDeleted": len(doomed)}, status=200)

    # -- the rest ----------------------------------------------------------

    async def rewind(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        """Not run by the local engine (so the check-status payload does not offer it); answered as Azure
        answers a storage provider without rewind, after the checks Azure makes first."""
        state, missing = await self._instance(request, params)
        if state is None:
            return missing
        if state.status != RuntimeStatus.FAILED:
            return problem(
                412,
                "Precondition Failed",
                f"instance '{state.instance_id}' is {state.status.value}, "
                "but only failed orchestrations can be rewound",
            )
        return problem(501, "Not Implemented", "rewind is not supported by the local Durable engine")

    async def unknown(self, request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        # The webhook path, also for a call that came by the RPC alias (whose path holds the key: never echoed).
        path = f"/{WEBHOOK_PREFIX}/{params.get('rest', '')}"
        for template, methods, _ in self._routes()[:-1]:
            if methods and _matches(template, path):
                return problem(
                    405,
                    "Method Not Allowed",
                    f"{request.method} is not allowed on {path}",
                    {"Allow": ", ".join(methods)},
                )
        return problem(404, "Not Found", f"no Durable management endpoint at {path}")

    async def _instance(
        self, request: web.Request, params: Mapping[str, str]
    ) -> tuple[InstanceState | None, web.StreamResponse]:
        """The instance the route names, or (None, the 404 that says why it is not here)."""
        if (wrong_hub := self._check_hub(request)) is not None:
            return None, wrong_hub
        await self._hub.ready()
        state = await self._hub.store.get(params["instanceId"])
        missing = problem(404, "Not Found", f"no orchestration instance with ID '{params['instanceId']}'")
        return state, missing

    def _check_hub(self, request: web.Request) -> web.StreamResponse | None:
        hub = request.query.get("taskHub")
        if hub and hub.lower() != self._hub.settings.hub_name.lower():
            return problem(
                404,
                "Not Found",
                f"task hub '{hub}' is not served by this host (it serves '{self._hub.settings.hub_name}')",
            )
        return None


def _answering_problems(handler: Handler) -> Handler:
    """A failure inside the engine's API is a problem answer, never a stack trace."""

    @functools.wraps(handler)
    async def answer(request: web.Request, params: Mapping[str, str]) -> web.StreamResponse:
        try:
            return await handler(request, params)
        except AzureError as error:
            log.warning("Durable management API: the task hub's storage failed: %s", str(error).splitlines()[0])
            return problem(
                503, "Service Unavailable", "the task hub's storage is not reachable; try again", {"Retry-After": "5"}
            )
        except Exception:
            log.exception("Durable management API failed on %s %s", request.method, request.path)
            return problem(500, "Internal Server Error", "the Durable engine failed; see the host log")

    return answer


def request_json(body: bytes) -> str | None:
    """A request body as the JSON text to store.

    The Python SDK sends inputs and event data as its JSON text wrapped in a
    JSON string; other callers send plain JSON. Both are accepted: a string
    that is itself JSON text is taken as that text.
    """
    if not body.strip():
        return None
    value = json.loads(body)
    if isinstance(value, str):
        try:
            json.loads(value)
            return value
        except json.JSONDecodeError:
            pass
    return json.dumps(value)


def _check_instance_id(instance_id: str) -> web.StreamResponse | None:
    if len(instance_id) > MAX_ID_LENGTH or _INVALID_ID.search(instance_id) or not instance_id.strip():
        return problem(
            400,
            "Bad Request",
            f"'{instance_id}' is not a valid instance ID: at most {MAX_ID_LENGTH} "
            "characters, without '/', '\\', '#', '?' or control characters",
        )
    return None


class _Filters(TypedDict):
    """The list and purge filters, as :meth:`InstanceStore.query` takes them."""

    statuses: list[str] | None
    created_from: datetime | None
    created_to: datetime | None


def _filters(request: web.Request) -> _Filters:
    statuses = [s.strip() for s in request.query.get("runtimeStatus", "").split(",") if s.strip()]
    known = {s.value.lower(): s.value for s in RuntimeStatus}
    unknown = [s for s in statuses if s.lower() not in known]
    if unknown:
        raise ValueError(f"unknown runtimeStatus {', '.join(unknown)}; use {', '.join(known.values())}")
    return {
        "statuses": [known[s.lower()] for s in statuses] or None,
        "created_from": _time(request, "createdTimeFrom"),
        "created_to": _time(request, "createdTimeTo"),
    }


def _time(request: web.Request, key: str) -> datetime | None:
    value = request.query.get(key)
    if not value:
        return None
    try:
        return h.parse_timestamp(value)
    except ValueError:
        raise ValueError(f"{key} must be an ISO 8601 time, not {value!r}") from None


def _flag(request: web.Request, key: str, default: bool = False) -> bool:
    value = request.query.get(key)
    return default if value is None else value.lower() == "true"


def _origin(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _matches(template: str, path: str) -> bool:
    return compile_route("", template, None, None).match(path) is not None


def extension_error(
    status: int, message: str, exception_message: str | None = None, exception_type: str = "System.ArgumentException"
) -> web.Response:
    """An error as the Durable extension writes it (ASP.NET's ``HttpError``), for the SDK's client to read:
    ``Message``, and with an exception ``ExceptionMessage`` and ``ExceptionType``."""
    body: dict[str, str] = {"Message": message}
    if exception_message is not None or status == 400:
        body.update(ExceptionMessage=exception_message or message, ExceptionType=exception_type)
    return web.json_response(body, status=status)
