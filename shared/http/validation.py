"""Request bodies: media type, JSON syntax and model validation as problems."""

from __future__ import annotations

from typing import Any, TypeVar

import azure.functions as func
from pydantic import BaseModel, ValidationError

from shared import safe_json
from shared.errors import FieldError
from shared.http import problems

Model = TypeVar("Model", bound=BaseModel)


_UNKNOWN = object()


def json_pointer(location: tuple[Any, ...], document: Any = _UNKNOWN) -> str:
    """The RFC 6901 pointer at the field a pydantic error ``loc`` names ("" is the whole body).

    A ``loc`` also holds steps that are not in the document: ``[key]`` after a dict key
    that is itself invalid (the pointer ends at the key), and the union member or validator
    pydantic tried (``int``, ``function-after[...]``). With the document at hand, steps that
    are not in it are dropped, except a last one (a missing field); without it, only the
    steps that cannot be field names are.
    """
    parts: list[str] = []
    current = document
    for index, step in enumerate(location):
        if step == "[key]":
            break
        if isinstance(current, dict) and step in current:
            current = current[step]
        elif isinstance(current, list) and isinstance(step, int) and 0 <= step < len(current):
            current = current[step]
        elif document is _UNKNOWN:
            if isinstance(step, str) and "[" in step:
                continue
        elif not (index == len(location) - 1 and isinstance(current, dict)):
            continue  # a union member or validator's name, not a field of the document
        parts.append(str(step))
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def validation_problem(error: ValidationError, document: Any = _UNKNOWN) -> problems.Problem:
    return problems.validation_failed([_issue(issue, document) for issue in error.errors()])


def _issue(issue: Any, document: Any) -> dict[str, str]:
    """One error; a cross-field check names its field by raising :class:`FieldError`."""
    location = tuple(issue["loc"])
    cause = (issue.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        return {"path": json_pointer(location + cause.location, document), "message": str(cause)}
    return {"path": json_pointer(location, document), "message": issue["msg"]}


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
