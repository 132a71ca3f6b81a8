"""Capacity's answers beyond the domain's own views (``LeaseView``, ``PoolView``); and its query."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shared.capacity.models import LeaseState, LeaseView, PoolView


class PoolList(BaseModel):
    pools: list[PoolView]


class EditionView(BaseModel):
    edition: str
    limits: dict[str, int] = Field(description="concurrent leases per pool kind; a kind not listed allows none")
    tenants: list[str] | None = Field(default=None, description="for a platform administrator only")


class QuotasView(BaseModel):
    default_edition: str
    your_edition: str
    editions: list[EditionView]


class EditionSaved(BaseModel):
    edition: str
    limits: dict[str, int]
    tenants_assigned: list[str]


class KindUsage(BaseModel):
    limit: int
    in_use: int
    available: int


class TenantUsage(BaseModel):
    tenant: str
    edition: str
    at: str
    kinds: dict[str, KindUsage]


class LeaseList(BaseModel):
    leases: list[LeaseView]
    continuation: str | None = Field(description="pass it back as ?continuation= for the next page")


class LeasesQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pool: str | None = None
    holder: str | None = None
    state: LeaseState | None = None
    limit: int = Field(default=100, ge=1, le=1000)
    continuation: str | None = Field(default=None, description="from the previous page")
