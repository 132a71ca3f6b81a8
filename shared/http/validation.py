"""Request bodies: media type, JSON syntax and model validation as problems."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import azure.functions as func
from pydantic import BaseModel, ValidationError

from shared.http import problems

Model = TypeVar("Model", bound=BaseModel)


def json_pointer(location: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in location)


def validation_problem(error: ValidationError) -> problems.Problem:
    return problems.validation_failed(
        [{"path": json_pointer(issue["loc"]), "message": issue["msg"]} for issue in error.errors()]
    )


def parse_json_body(req: func.HttpRequest) -> Any:
    content_type = req.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type not in ("application/json", "") and not content_type.endswith("+json"):
        raise problems.unsupported_media_type("application/json")
    body = req.get_body()
    if not body:
        raise problems.validation_failed([{"path": "/", "message": "a JSON body is required"}])
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise problems.bad_request(f"the body is not valid JSON: {error}") from None


def parse_model(req: func.HttpRequest, model: type[Model]) -> Model:
    """Parse the JSON body into ``model``; a ValidationError becomes a 422 upstream."""
    return model.model_validate(parse_json_body(req))
