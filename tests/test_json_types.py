"""Request bodies take JSON's types as the API document states them (shared/platform/json_types.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from shared.inventory.api import AcceptBody
from shared.platform.json_types import JsonTyped


class Body(JsonTyped):
    count: int | None = None
    enabled: bool | None = None
    at: datetime | None = None
    limits: dict[str, int] = {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"count": "5"}, "count"),
        ({"count": True}, "count"),
        ({"enabled": 0}, "enabled"),
        ({"enabled": "true"}, "enabled"),
        ({"at": 0}, "at"),
        ({"at": 1.5}, "at"),
        ({"at": True}, "at"),
        ({"limits": {"build": False}}, "limits"),
    ],
)
def test_a_value_the_document_calls_the_wrong_type_is_refused_at_its_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Body.model_validate(body)
    assert [error["loc"][0] for error in refused.value.errors()] == [field]


def test_what_the_document_allows_is_read() -> None:
    body = Body.model_validate({"count": 5.0, "enabled": False, "at": "2026-12-30T00:00:00Z", "limits": {"build": 3}})
    expected = (5, False, datetime(2026, 12, 30, tzinfo=UTC), {"build": 3})
    assert (body.count, body.enabled, body.at, body.limits) == expected


def test_a_proposal_acceptance_refuses_a_number_as_its_expiry() -> None:
    """Schemathesis found it: lax pydantic read ``"expires_at": 0`` as 1970-01-01 and the accept went through."""
    with pytest.raises(ValidationError):
        AcceptBody.model_validate({"option": "adopt", "expires_at": 0})
