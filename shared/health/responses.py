"""The host's own endpoints: health, target metadata and the API document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from shared.health import HealthReport
from shared.platform.http.contract import view_of

HealthView = view_of(HealthReport, "HealthView", live=(bool, ...))


class RunnerView(BaseModel):
    name: str
    version: str | None
    available: bool


class TargetView(BaseModel):
    """A target as callers see it: its credential's kind, never where the credential is."""

    id: str
    kind: str
    region: str
    endpoint: str | None
    subscription_id: str | None
    resource_group: str | None
    credential: str
    description: str


class TargetsView(BaseModel):
    topology: str
    iac_runner: RunnerView
    targets: list[TargetView]


# The document itself: an OpenAPI 3.1 object (its schema is the OpenAPI specification's, not repeated here).
OPENAPI_DOCUMENT: dict[str, Any] = {
    "type": "object",
    "required": ["openapi", "info", "paths"],
    "properties": {"openapi": {"type": "string", "pattern": r"^3\.1\.\d+$"}},
}
