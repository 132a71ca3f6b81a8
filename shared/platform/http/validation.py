"""Request bodies: media type, JSON syntax and model validation as problems.

Only what the caller sent is the caller's 422. The pipeline reads the body and
query an endpoint declares (:func:`parse_model`, ``paging.parse_query``); a
handler that reads more of the request itself (a route value, a document inside
the body) does it inside :func:`caller_input`, which turns pydantic's
``ValidationError`` into the same 422 naming each field. Any other
``ValidationError`` reaching the pipeline (a stored document that no longer
reads, an answer the server cannot build) is a 500 (``endpoint._as_problem``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import azure.functions as func
from pydantic import BaseModel, ValidationError

from shared.platform import safe_json
from shared.platform.field_errors import field_errors
from shared.platform.http import problems

Model = TypeVar("Model", bound=BaseModel)


_UNKNOWN: Any = object()


def validation_problem(error: ValidationError, document: Any = _UNKNOWN) -> problems.Problem:
    if document is _UNKNOWN:
        return problems.validation_failed(field_errors(error))
    return problems.validation_failed(field_errors(error, document=document))


def parse_json_body(req: func.HttpRequest) -> Any:
    content_type = req.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type not in ("application/json", "") and not content_type.endswith("+json"):
        raise problems.unsupported_media_type("application/json")
    body = req.get_body()
    if not body:
        raise problems.validation_failed([{"path": "", "message": "a JSON body is required"}])
    try:
        return safe_json.loads(body)
    except safe_json.MalformedJson as error:  # syntax, depth, absurd numbers: never a 500
        raise problems.bad_request(f"the body cannot be read: {error}") from None


def parse_model(req: func.HttpRequest, model: type[Model]) -> Model:
    """Parse the JSON body into ``model``; invalid fields are a 422 pointing at each of them."""
    document = parse_json_body(req)
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise validation_problem(error, document) from None


@contextmanager
def caller_input(document: Any = _UNKNOWN, *, prefix: str = "") -> Iterator[None]:
    """Validation of the caller's own input, done by a handler: a ``ValidationError`` inside is the caller's
    422 naming each field (under ``prefix``, the pointer of ``document`` in the request), as the pipeline's."""
    try:
        yield
    except ValidationError as error:
        if document is _UNKNOWN:
            raise problems.validation_failed(field_errors(error, prefix=prefix)) from None
        raise problems.validation_failed(field_errors(error, prefix=prefix, document=document)) from None
