"""Capacity's answers beyond the domain's own views (``LeaseView``, ``PoolView``); and its query."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.capacity.models import POOL_ID, LeaseState, LeaseView, PoolView
from shared.platform.http.paging import PageInfo, PageQuery


class PoolList(PageInfo):
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


class LeaseList(PageInfo):
    leases: list[LeaseView]


class LeasesQuery(PageQuery):
    """Leases in the store's key order."""

    pool: str | None = Field(default=None, pattern=POOL_ID.pattern, description="only this pool's leases")
    holder: str | None = Field(default=None, min_length=1, max_length=200, description="only this holder's leases")
    state: LeaseState | None = None


class PoolsQuery(PageQuery):
    """Pools in id order."""
