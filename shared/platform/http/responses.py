"""Turning what a handler returns into an ``HttpResponse``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import azure.functions as func
from pydantic import BaseModel


@dataclass
class JsonResult:
    """A JSON answer with a status other than 200, or extra headers."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    return value


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> func.HttpResponse:
    return func.HttpResponse(
        body=json.dumps(to_jsonable(body), default=str),
        status_code=status,
        headers=headers or {},
        mimetype="application/json",
        charset="utf-8",
    )


def to_http_response(result: Any) -> func.HttpResponse:
    if isinstance(result, func.HttpResponse):
        return result
    if isinstance(result, JsonResult):
        return json_response(result.body, result.status, result.headers)
    return json_response(result)
