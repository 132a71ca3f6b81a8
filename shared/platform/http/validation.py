"""Request bodies: media type, JSON syntax and model validation as problems."""

from __future__ import annotations

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
