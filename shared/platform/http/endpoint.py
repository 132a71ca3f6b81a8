"""The pipeline every HTTP function goes through.

``@endpoint(scopes=..., roles=...)`` sits under the Functions route decorator:

    @bp.route(route="runtime-cloud/health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
    @endpoint(scopes=[Scope.HEALTH_READ])
    def health(req: func.HttpRequest, caller: Caller) -> func.HttpResponse: ...

It authenticates the bearer token, checks the declared scopes and roles, hands
the handler the :class:`Caller`, and turns every failure into a problem
document. Handlers may be sync (run in a worker thread, as the Functions worker
does) or async. The wrapper exposes the handler's signature without ``caller``,
``body`` and ``query`` so the Functions indexer sees only real bindings.

The models an endpoint declares are read here, once, after the caller is
authorised: ``body=Model`` parses the JSON body (415 for another media type,
400 for one that cannot be read, 422 naming each invalid field by its JSON
pointer; with ``body_required=False`` an empty body is the model's defaults),
``query=Model`` the query parameters the model names (422 per invalid one).
The handler receives them as its ``body`` and ``query`` parameters, typed as
the models:

    @endpoint(scopes=[Scope.RUNTIME_WRITE], body=PoolSpec, responses={200: PoolView})
    def put_pool(req: func.HttpRequest, caller: Caller, body: PoolSpec) -> PoolView: ...

Only the request is the caller's 422. A pydantic ``ValidationError`` that reaches the
pipeline from the handler is the server's: a stored document that no longer reads,
an answer the server cannot build. It is the generic 500 (``internal-error`` with
a reference), logged with the model, the failing fields and the kind of each
failure, never pydantic's text (it quotes the input). A handler that reads more of
the request itself (a document inside the body, a route value) does it inside
:func:`shared.platform.http.validation.caller_input`, which
keeps the caller's 422 naming each field; a feature service says the same with
:class:`shared.platform.errors.InvalidInput`.

A token that verified is remembered, by its exact text, until the earlier of
its own ``exp`` and five minutes (:class:`VerifiedTokens`): repeating the
signature, issuer, audience and claim checks on the same bytes can only give
the same answer until then. Nothing is remembered for a refused token, and a
remembered one is never accepted past its expiry (stricter than the check
itself, which allows the configured clock skew).

Tokens are checked against the ``RuntimeCloud:Auth`` section, which
``function_app.py`` hands over once at start (:func:`configure_authentication`):
the request pipeline sits below the composition root and never reads the
settings root (pyproject.toml, the "settings-root" contract). Until then every
call answers 500 (logged with its reference), never an unauthenticated 200.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import inspect
import json
import re
import traceback
import typing
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import azure.functions as func
from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from pydantic import BaseModel, ValidationError

from shared.platform import clock
from shared.platform.auth.caller import Caller, Role, Scope
from shared.platform.auth.signing_keys import key_source_for
from shared.platform.auth.tokens import TokenValidator
from shared.platform.errors import (
    AlreadyExists,
    AuthenticationFailed,
    ConcurrencyConflict,
    Conflict,
    InvalidInput,
    NotConfigured,
    NotFound,
    PermissionDenied,
    StoreUnavailable,
)
from shared.platform.host_settings import AuthSettings
from shared.platform.http import problems
from shared.platform.http.contract import CONTRACT_ATTRIBUTE, Contract, names
from shared.platform.http.paging import parse_query
from shared.platform.http.responses import to_http_response
from shared.platform.http.validation import caller_input, parse_model
from shared.platform.logs import app_logger
from shared.platform.lru_cache import LruCache
from shared.platform.storage.documents import failures_of

log = app_logger("http")

Handler = Callable[..., Any]
Model = TypeVar("Model", bound=BaseModel)


_auth: AuthSettings | None = None  # set once at start by configure_authentication


def configure_authentication(auth: AuthSettings) -> None:
    """Check bearer tokens against ``auth`` (the issuer, audience and signing keys it names)."""
    global _auth
    _auth = auth
    token_validator.cache_clear()  # the validator holds the section it was made with
    verified_tokens.clear()  # and what it accepted was accepted under the previous section


@functools.lru_cache(maxsize=1)
def token_validator() -> TokenValidator:
    """Made at the first request, not at start: a key source may fetch signing keys when made."""
    if _auth is None:
        raise NotConfigured("the HTTP pipeline has no RuntimeCloud:Auth section; function_app.py hands it over")
    return TokenValidator(_auth, key_source_for(_auth))


class VerifiedTokens:
    """Callers of tokens that verified, by the token's exact text, each until the token's ``exp`` (at most
    ``MAX_SECONDS``). Bounded; thread-safe."""

    MAX_SECONDS = 300.0

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._entries: LruCache[str, tuple[float, Caller]] = LruCache(capacity)

    def get(self, token: str) -> Caller | None:
        entry = self._entries.get(token)
        if entry is None:
            return None
        until, caller = entry
        if clock.utcnow().timestamp() >= until:
            self._entries.forget(token)
            return None
        return caller

    def remember(self, token: str, caller: Caller) -> None:
        expires = _expiry_of(token)
        if expires is not None:
            self._entries.put(token, (min(expires, clock.utcnow().timestamp() + self.MAX_SECONDS), caller))

    def clear(self) -> None:
        self._entries = LruCache(self._capacity)


verified_tokens = VerifiedTokens()


def _expiry_of(token: str) -> float | None:
    """The ``exp`` of a token that has just verified (so its payload is well-formed JSON), or None."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        expires = claims.get("exp")
    except (IndexError, ValueError, AttributeError):
        return None
    return float(expires) if isinstance(expires, (int, float)) and not isinstance(expires, bool) else None


def authenticate(req: func.HttpRequest) -> Caller:
    header = req.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise problems.missing_token()
    if scheme.lower() != "bearer" or not token.strip():
        raise problems.unauthorized("expected 'Authorization: Bearer <token>'")
    token = token.strip()
    known = verified_tokens.get(token)
    if known is not None:
        return known
    try:
        caller = token_validator().validate(token)
    except AuthenticationFailed as error:
        raise problems.unauthorized(str(error)) from None
    verified_tokens.remember(token, caller)
    return caller


def authorize(
    caller: Caller, scopes: Iterable[Scope | str], roles: Iterable[Role | str], any_scopes: Iterable[Scope | str] = ()
) -> None:
    missing = [s for s in scopes if not caller.has_scope(s)]
    if missing:
        raise problems.forbidden(f"missing scope: {', '.join(names(missing))}")
    alternatives = list(any_scopes)
    if alternatives and not any(caller.has_scope(s) for s in alternatives):
        raise problems.forbidden(f"missing scope: {' or '.join(names(alternatives))}")
    wanted = list(roles)
    if wanted and not any(caller.has_role(r) for r in wanted):
        raise problems.forbidden(f"requires role {' or '.join(names(wanted))}")


def endpoint(
    *,
    scopes: Iterable[Scope | str] = (),
    roles: Iterable[Role | str] = (),
    any_scopes: Iterable[Scope | str] = (),
    **documented: Any,
) -> Callable[[Handler], Handler]:
    """The pipeline: ``scopes`` are all required, ``any_scopes`` one of them, ``roles`` any one.

    ``documented`` is the endpoint's contract for the API document (see
    :class:`shared.platform.http.contract.Contract`: ``summary``, ``body``, ``query``,
    ``path``, ``headers``, ``responses``, ``problems``...). Of it, ``body`` and
    ``query`` (pydantic models) are also read at run time and handed to the
    handler's ``body`` and ``query`` parameters (see the module's docstring).
    """
    required_scopes = tuple(scopes)
    required_roles = tuple(roles)
    alternative_scopes = tuple(any_scopes)
    body_model = _model_or_none(documented.get("body"))
    body_required = bool(documented.get("body_required", True))
    query_model = _model_or_none(documented.get("query"))

    def decorate(handler: Handler) -> Handler:
        signature = inspect.signature(handler)
        for name, model in (("body", body_model), ("query", query_model)):
            if name in signature.parameters and model is None:
                raise TypeError(f"{handler.__name__} takes {name!r} but its @endpoint declares no {name}= model")
        request_param = _request_parameter(signature)
        run = _runner_for(handler)

        async def pipeline(*args: Any, **kwargs: Any) -> func.HttpResponse:
            bound = dict(zip(signature.parameters, args, strict=False), **kwargs)  # the rest come as keywords
            request: func.HttpRequest = bound[request_param]
            try:
                caller = authenticate(request)
                authorize(caller, required_scopes, required_roles, alternative_scopes)
                if "caller" in signature.parameters:
                    bound["caller"] = caller
                # Read after authorisation, as the handlers did: an unauthorised caller learns nothing of the shape.
                if body_model is not None:
                    body = read_body(request, body_model, required=body_required)
                    if "body" in signature.parameters:
                        bound["body"] = body
                if query_model is not None:
                    query = parse_query(request, query_model)
                    if "query" in signature.parameters:
                        bound["query"] = query
                return to_http_response(await run(**bound))
            except Exception as error:  # noqa: BLE001 - every failure becomes a problem document
                return _error_response(error, request, handler.__name__)

        _present_as(pipeline, handler, signature)
        setattr(
            pipeline,
            CONTRACT_ATTRIBUTE,
            Contract(
                scopes=names(required_scopes),
                any_scopes=names(alternative_scopes),
                roles=names(required_roles),
                description=inspect.getdoc(handler),
                **documented,
            ),
        )
        return pipeline

    return decorate


def read_body(request: func.HttpRequest, model: type[Model], *, required: bool = True) -> Model:
    """The request's JSON body as ``model``; an optional body that is absent is the model's defaults."""
    if not required and not request.get_body():
        with caller_input({}):  # a model that cannot default everything: the caller left out what it needs
            return model.model_validate({})
    return parse_model(request, model)


def _model_or_none(shape: object) -> type[BaseModel] | None:
    """The pydantic model a contract names for a body or query (a raw schema is documentation only)."""
    return shape if isinstance(shape, type) and issubclass(shape, BaseModel) else None


def _request_parameter(signature: inspect.Signature) -> str:
    for name, parameter in signature.parameters.items():
        if parameter.annotation in (func.HttpRequest, "func.HttpRequest"):
            return name
    return next(iter(signature.parameters))


def _runner_for(handler: Handler) -> Callable[..., Awaitable[Any]]:
    if inspect.iscoroutinefunction(handler):
        return handler

    async def in_thread(**kwargs: Any) -> Any:
        return await asyncio.to_thread(functools.partial(handler, **kwargs))

    return in_thread


# Parameters the pipeline fills (the caller, the parsed body and query), not Functions bindings: a handler
# takes "body" or "query" only when its endpoint declares that model (checked when it is decorated).
_PIPELINE_PARAMETERS = frozenset({"caller", "body", "query"})


def _present_as(pipeline: Handler, handler: Handler, signature: inspect.Signature) -> None:
    """Show the Functions worker the handler's bindings, minus what the pipeline hands over itself.

    The worker resolves annotations with ``typing.get_type_hints`` against the
    registered function's own module (this one), and insists that an HTTP
    function returns ``func.HttpResponse``. So the annotations are resolved
    here, in the handler's module, and the return is what the pipeline really
    returns, whatever the handler itself produces.
    """
    hints = typing.get_type_hints(handler)
    parameters = [
        parameter.replace(annotation=hints.get(name, inspect.Parameter.empty))
        for name, parameter in signature.parameters.items()
        if name not in _PIPELINE_PARAMETERS
    ]
    pipeline.__name__ = handler.__name__
    pipeline.__qualname__ = handler.__qualname__
    pipeline.__doc__ = handler.__doc__
    pipeline.__module__ = handler.__module__
    pipeline.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=func.HttpResponse
    )
    pipeline.__annotations__ = {
        **{p.name: p.annotation for p in parameters if p.annotation is not inspect.Parameter.empty},
        "return": func.HttpResponse,
    }


def _error_response(error: Exception, request: func.HttpRequest, function_name: str) -> func.HttpResponse:
    problem = _as_problem(error, function_name)
    return problem.to_response(instance=_path_of(request))


def _as_problem(error: Exception, function_name: str) -> problems.Problem:
    if isinstance(error, problems.Problem):
        return error
    registered = problems.registered_problem(error)  # a feature's own refusals (the mapping it registered)
    if registered is not None:
        return registered
    if isinstance(error, ValidationError):
        # Not the caller's: what the caller sent was read before the handler ran (the body, query and path the
        # endpoint declares, each a 422 naming its fields), and a handler that reads more of the request itself
        # says so (validation.caller_input). Anything else that does not fit its model (a stored document, an
        # answer the server builds) is the server's fault: the generic 500, logged without pydantic's text.
        return _server_fault(error, function_name)
    if isinstance(error, InvalidInput):
        return problems.validation_failed(error.errors)
    if isinstance(error, Conflict):
        return problems.conflict(str(error), kind=error.kind)
    if isinstance(error, NotFound):
        return problems.not_found()
    if isinstance(error, (AlreadyExists, ConcurrencyConflict)):
        return problems.conflict("the resource changed concurrently; read it again and retry")
    if isinstance(error, PermissionDenied):
        return problems.forbidden(str(error))
    # The adapters turn "the store did not answer" into StoreUnavailable; a read that went to the SDK
    # directly (a paged query) raises the SDK's own error: the same outage, the same answer.
    if isinstance(error, (StoreUnavailable, ServiceRequestError, ServiceResponseError)):
        return problems.service_unavailable("store-unavailable", "the runtime-cloud store did not answer", 5)
    if task_hub_unavailable(error):
        log.warning("%s: the Durable task hub did not answer: %s", function_name, error)
        return problems.service_unavailable(
            "store-unavailable", "the runtime-cloud store (its Durable task hub) did not answer", 5
        )
    reference = uuid.uuid4().hex
    log.error("unhandled error in %s (reference %s)", function_name, reference, exc_info=error)
    return problems.internal_error(reference)


def _server_fault(error: ValidationError, function_name: str) -> problems.Problem:
    """The 500 of a model the server could not read or build; the log names the model, the failing fields and
    the kind of each failure, and the code that raised it (pydantic's message quotes the input: never logged)."""
    reference = uuid.uuid4().hex
    where = "".join(traceback.format_tb(error.__traceback__))
    log.error(
        "unhandled error in %s (reference %s): %s does not fit its model: %s\n%s",
        function_name,
        reference,
        error.title,
        "; ".join(failures_of(error)),
        where,
    )
    return problems.internal_error(reference)


# The Durable client (azure-durable-functions) raises a bare ``Exception`` when the extension's HTTP API
# answers a status it does not expect: ``start_new`` with the answer's body (a problem document, whose
# ``status`` says 503 when the task hub's storage is down), ``raise_event``, ``get_status``, ``terminate``
# and the others with a sentence naming the status code. Those are the store's outage too.
_OUTAGE_STATUSES = frozenset({502, 503, 504})
_STATUS_IN_SENTENCE = re.compile(r"status code (\d{3})\b")


def task_hub_unavailable(error: BaseException) -> bool:
    """Whether ``error`` is the Durable client's report that the task hub (its storage) did not answer."""
    if type(error) is not Exception or not error.args:  # the client raises exactly Exception, nothing finer
        return False
    detail = error.args[0]
    if isinstance(detail, dict):
        status = detail.get("status", detail.get("Status"))
        return isinstance(status, int) and status in _OUTAGE_STATUSES
    found = _STATUS_IN_SENTENCE.search(detail) if isinstance(detail, str) else None
    return found is not None and int(found.group(1)) in _OUTAGE_STATUSES


def _path_of(request: func.HttpRequest) -> str:
    from urllib.parse import urlsplit

    return urlsplit(str(request.url)).path
