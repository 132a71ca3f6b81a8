"""The API's OpenAPI 3.1 document, generated from the app's registered HTTP functions.

Each function's route and methods come from its HTTP trigger, everything else
from the :class:`~shared.platform.http.contract.Contract` that ``@endpoint`` recorded on
it: security (bearer JWT with the scopes it needs), parameters (with the
patterns the handler enforces), the request body and the responses, as the
JSON Schemas of the very pydantic models the handler validates with
(``mode="validation"``) and answers with (``mode="serialization"``). Every
error answer is a problem document (RFC 9457, ``application/problem+json``).

A function without a documented contract is left out, so that the test which
compares the document with the app's routes names it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from azure.functions.decorators.function_app import Function
from azure.functions.decorators.http import HttpTrigger
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from shared.platform.http.contract import Contract, contract_of, pattern_text

OPENAPI_VERSION = "3.1.0"
REF_TEMPLATE = "#/components/schemas/{model}"
SECURITY_SCHEME = "bearer"
PROBLEM_MEDIA_TYPE = "application/problem+json"
EVERY_METHOD = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
ROUTE_PARAMETER = re.compile(r"\{(?P<name>[^}:?]+)(?::[^}?]+)?\??\}")


class FieldProblem(BaseModel):
    path: str = Field(description="JSON pointer (RFC 6901) at the invalid field; '' is the whole body")
    message: str


class ProblemDocument(BaseModel):
    """An RFC 9457 problem: branch on ``type``; ``errors`` lists each invalid field of a 422."""

    # Some problems carry more (a quota's edition and limit, a lost lease's id).
    model_config = ConfigDict(extra="allow")

    type: str = Field(pattern=r"^urn:runtime-cloud:problem:[a-z0-9-]+$")
    title: str
    status: int = Field(ge=400, le=599)
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldProblem] | None = None


# Why each error status can happen; which ones an operation lists follows from its contract.
PROBLEM_REASONS: dict[int, str] = {
    400: "the body or a header cannot be read",
    401: "no bearer token, or one that is not acceptable (see WWW-Authenticate)",
    403: "a scope or role is missing",
    404: "no such resource (or another tenant's)",
    409: "the request contradicts the resource's current state",
    413: "the body is larger than the host accepts",
    415: "the body is not JSON",
    422: "a field, parameter or the body is not valid (see errors)",
    429: "the tenant's quota is used up (see Retry-After)",
    431: "a header or the request line (path and query) is longer than the host accepts",
    500: "an unexpected failure, logged under the reference in detail",
    503: "a dependency did not answer, or no capacity is free (see Retry-After)",
}
PROBLEM_HEADERS: dict[int, tuple[str, ...]] = {401: ("WWW-Authenticate",), 429: ("Retry-After",), 503: ("Retry-After",)}
HEADER_DESCRIPTIONS: dict[str, str] = {
    "Location": "where the resource (or the status of the accepted work) is",
    "Retry-After": "seconds to wait before trying again (jittered)",
    "WWW-Authenticate": "the bearer challenge, with the reason the token was refused",
    "Idempotent-Replayed": "'true' when this answers an earlier request with the same id",
}


def http_functions(functions: Iterable[Function]) -> list[tuple[Function, HttpTrigger]]:
    found = [(function, function.get_trigger()) for function in functions]
    return [(function, trigger) for function, trigger in found if isinstance(trigger, HttpTrigger)]


def route_methods(trigger: HttpTrigger) -> list[str]:
    methods: Iterable[object] = trigger.methods or EVERY_METHOD  # a trigger without methods takes them all
    return [str(getattr(method, "value", method)).upper() for method in methods]


def function_name(function: Function) -> str:
    return function.get_function_name() or function.get_user_function().__name__


def route_of(function: Function, trigger: HttpTrigger) -> str:
    """The trigger's route; the function's name when it has none, as the Functions host does."""
    return trigger.route or function_name(function)


def openapi_path(route: str) -> str:
    """``runtime-cloud/pools/{id:alpha}`` -> ``/runtime-cloud/pools/{id}`` (routePrefix is empty)."""
    return "/" + ROUTE_PARAMETER.sub(lambda m: "{" + m.group("name") + "}", route.strip("/"))


def build_document(functions: Iterable[Function], title: str, version: str, description: str = "") -> dict[str, Any]:
    """The document for ``functions`` (the app's, as ``FunctionApp.get_functions()`` lists them)."""
    operations = [
        (function, trigger, contract)
        for function, trigger in http_functions(functions)
        if (contract := contract_of(function.get_user_function())) is not None and contract.documented
    ]
    schemas = SchemaRegistry()
    paths: dict[str, dict[str, Any]] = {}
    for function, trigger, contract in operations:
        item = paths.setdefault(openapi_path(route_of(function, trigger)), {})
        for method in route_methods(trigger):
            item[method.lower()] = _operation(function, trigger, contract, schemas)
    components = schemas.resolve()  # fills in the operations' references, so before they are served
    other_schemes = {name: dict(scheme) for _, _, contract in operations for name, scheme in contract.security.items()}
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": version, "description": description},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": components,
            "securitySchemes": {
                SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "an OAuth2 client-credentials access token (Entra ID; locally `devhost token`); "
                    "the tenant claim is the row filter of everything the caller reads or writes",
                },
                **other_schemes,
            },
        },
    }


class SchemaRegistry:
    """Collects the models the operations name; ``resolve`` turns them into ``components/schemas``.

    An operation holds a placeholder per model until the end, because pydantic names a model's
    two schemas ``Model-Input`` and ``Model-Output`` only when they differ, which it can tell
    only once it sees every model at once.
    """

    def __init__(self) -> None:
        self._wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ProblemDocument, "serialization")]
        self._placeholders: list[tuple[dict[str, Any], tuple[type[BaseModel], JsonSchemaMode]]] = []
        self._query_placeholders: list[tuple[type[BaseModel], str, dict[str, Any]]] = []

    def ref(self, shape: Any, mode: JsonSchemaMode) -> dict[str, Any]:
        if isinstance(shape, dict):  # a raw JSON schema (say, for the document itself)
            return shape
        if not (isinstance(shape, type) and issubclass(shape, BaseModel)):
            raise TypeError(f"a contract names {shape!r}: a pydantic model or a JSON schema (dict) is expected")
        key = (shape, mode)
        if key not in self._wanted:
            self._wanted.append(key)
        placeholder: dict[str, Any] = {}
        self._placeholders.append((placeholder, key))
        return placeholder

    def query_parameters(self, model: type[BaseModel]) -> list[dict[str, Any]]:
        """One parameter per field, its schema with references into the components (refs filled later)."""
        self.ref(model, "validation")
        parameters = []
        for name, info in model.model_fields.items():
            schema: dict[str, Any] = {}
            self._query_placeholders.append((model, info.alias or name, schema))
            parameters.append(
                {
                    "name": info.alias or name,
                    "in": "query",
                    "required": info.is_required(),
                    "description": info.description or "",
                    "schema": schema,
                }
            )
        return parameters

    def resolve(self) -> dict[str, Any]:
        refs, definitions = models_json_schema(self._wanted, ref_template=REF_TEMPLATE)
        components: dict[str, Any] = definitions.get("$defs", {})
        for placeholder, key in self._placeholders:
            placeholder.update(refs[key])
        for component in components.values():
            _mark_timestamps(component)
        for model, parameter, schema in self._query_placeholders:
            component = components[refs[(model, "validation")]["$ref"].rsplit("/", 1)[-1]]
            schema.update(_without_null(component["properties"][parameter]))
        return dict(sorted(components.items()))


# The API's naming rule for timestamps: a string field named ``at`` or ``..._at`` (and a finding's
# ``first_seen``/``last_seen``) holds an RFC 3339 date-time with its offset, whether the model types it
# ``datetime`` or keeps the text it stored; the document says so for every one of them.
TIMESTAMP_FIELD = re.compile(r"^(?:at|.+_at|first_seen|last_seen)$")


def _mark_timestamps(schema: Any) -> None:
    """Add ``format: date-time`` to every timestamp field's string schema, however deeply nested."""
    if isinstance(schema, list):
        for item in schema:
            _mark_timestamps(item)
        return
    if not isinstance(schema, dict):
        return
    for name, field in (schema.get("properties") or {}).items():
        if TIMESTAMP_FIELD.match(name) and isinstance(field, dict):
            for option in [field, *field.get("anyOf", [])]:
                if option.get("type") == "string":
                    option.setdefault("format", "date-time")
    for key, value in schema.items():
        if key != "properties":
            _mark_timestamps(value)
    for field in (schema.get("properties") or {}).values():
        _mark_timestamps(field)


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is either absent or a string: ``null`` cannot be sent, so it is no option."""
    options = schema.get("anyOf")
    if not options:
        return schema
    kept = [option for option in options if option.get("type") != "null"]
    rest = {key: value for key, value in schema.items() if key not in ("anyOf", "default")}
    return {**rest, **kept[0]} if len(kept) == 1 else {**rest, "anyOf": kept}


def _operation(function: Function, trigger: HttpTrigger, contract: Contract, schemas: SchemaRegistry) -> dict[str, Any]:
    user_function: Callable[..., Any] = function.get_user_function()
    route_names = [m.group("name") for m in ROUTE_PARAMETER.finditer(route_of(function, trigger))]
    operation: dict[str, Any] = {
        "operationId": function_name(function),
        "tags": [user_function.__module__.rsplit(".", 1)[-1]],
        "summary": contract.summary or _first_line(contract.description) or _spoken(function_name(function)),
        "description": _describe(contract),
        "security": _security(contract),
        "parameters": _path_parameters(route_names, contract)
        + _header_parameters(contract)
        + (schemas.query_parameters(contract.query) if contract.query else []),
        "responses": _responses(contract, schemas, bool(route_names)),
    }
    if contract.body is not None:
        operation["requestBody"] = {
            "required": contract.body_required,
            "content": {"application/json": {"schema": schemas.ref(contract.body, "validation")}},
        }
    if not operation["parameters"]:
        del operation["parameters"]
    return operation


def _spoken(function_name: str) -> str:
    """``capacity_list_leases`` -> ``Capacity list leases``: a summary for a handler without a docstring."""
    return function_name.replace("_", " ").capitalize()


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0]


def _describe(contract: Contract) -> str:
    parts = [contract.description or ""]
    if contract.roles:
        parts.append(f"Requires the role {' or '.join(contract.roles)}.")
    return "\n\n".join(part for part in parts if part)


def _security(contract: Contract) -> list[dict[str, list[str]]]:
    """Every scope of ``scopes`` and, when ``any_scopes`` is given, one of those (alternatives); or any one
    of the contract's own schemes (a webhook's signature) instead of a bearer token."""
    if contract.security:
        return [{name: []} for name in contract.security]
    if contract.any_scopes:
        return [{SECURITY_SCHEME: [*contract.scopes, scope]} for scope in contract.any_scopes]
    return [{SECURITY_SCHEME: list(contract.scopes)}]


def _path_parameters(route_names: list[str], contract: Contract) -> list[dict[str, Any]]:
    parameters = []
    for name in route_names:
        pattern = contract.path.get(name)
        schema = {"type": "string", "pattern": pattern_text(pattern)} if pattern else {"type": "string", "minLength": 1}
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    return parameters


def _header_parameters(contract: Contract) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "header",
            "required": False,
            "schema": {"type": "string", "pattern": pattern_text(pattern)},
        }
        for name, pattern in contract.headers.items()
    ]


def _responses(contract: Contract, schemas: SchemaRegistry, has_path_parameters: bool) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, shape in sorted(contract.responses.items()):
        answer: dict[str, Any] = {"description": _success_description(status)}
        if shape is not None:
            answer["content"] = {"application/json": {"schema": schemas.ref(shape, "serialization")}}
        headers = contract.response_headers.get(status, ())
        if headers:
            answer["headers"] = {name: _header(name) for name in headers}
        responses[str(status)] = answer
    for status in _problem_statuses(contract, has_path_parameters):
        if str(status) not in responses:
            responses[str(status)] = _problem_response(status, schemas)
    return responses


def _problem_statuses(contract: Contract, has_path_parameters: bool) -> list[int]:
    statuses = {431, 500, 503, *contract.problems}  # any request line can be too long (431)
    if not contract.security:  # an endpoint with its own scheme answers bad credentials as it documents
        statuses.add(401)
    if contract.scopes or contract.any_scopes or contract.roles:
        statuses.add(403)
    if contract.body is not None:
        statuses.update({400, 413, 415, 422})
    if contract.query is not None:
        statuses.add(422)
    if contract.headers:
        statuses.add(400)
    if has_path_parameters:
        statuses.add(404)
    return sorted(statuses)


def _problem_response(status: int, schemas: SchemaRegistry) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": PROBLEM_REASONS.get(status, "a problem"),
        "content": {PROBLEM_MEDIA_TYPE: {"schema": schemas.ref(ProblemDocument, "serialization")}},
    }
    if status in PROBLEM_HEADERS:
        answer["headers"] = {name: _header(name, required=True) for name in PROBLEM_HEADERS[status]}
    return answer


def _header(name: str, required: bool = False) -> dict[str, Any]:
    return {"description": HEADER_DESCRIPTIONS.get(name, name), "required": required, "schema": {"type": "string"}}


def _success_description(status: int) -> str:
    return {200: "OK", 201: "Created", 202: "Accepted: the work goes on; follow Location", 204: "Done; no content"}.get(
        status, "Success"
    )
