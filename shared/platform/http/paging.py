"""Lists page: the ``limit`` and ``continuation`` every list takes, and reading a list's query.

A list's query is a pydantic model (a :class:`PageQuery` with its filters);
the handler validates the request's parameters with it (:func:`parse_query`)
and the API document describes the parameters from the same model, so the
document says exactly what the handler refuses: an empty filter
(``?environment=``) is a 422 naming ``/environment``, as is a ``limit``
out of bounds or a continuation this list did not hand out.
"""

from __future__ import annotations

from typing import TypeVar

import azure.functions as func
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.platform.http.validation import validation_problem
from shared.platform.storage.paging import MAX_CONTINUATION_CHARS

DEFAULT_LIMIT = 50
MAX_LIMIT = 200

Query = TypeVar("Query", bound=BaseModel)


class PageQuery(BaseModel):
    """``limit`` items at most from where ``continuation`` left off; in the store's stable key order."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="items at most in this page")
    continuation: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CONTINUATION_CHARS,
        pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$",
        description="the previous page's continuation (opaque; only for the same list, filters and caller)",
    )


class PageInfo(BaseModel):
    """What every page answers beside its items."""

    continuation: str | None = Field(
        description="pass it back as ?continuation= for the next page; null at the end. A page may hold fewer "
        "items than the limit (even none) and still go on"
    )


def parse_query(req: func.HttpRequest, model: type[Query]) -> Query:
    """The request's query parameters that ``model`` declares, validated by it (422 per invalid one)."""
    names = {info.alias or name for name, info in model.model_fields.items()}
    values = {name: value for name, value in req.params.items() if name in names}
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise validation_problem(error) from None
