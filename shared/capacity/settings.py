"""Capacity settings: ``RuntimeCloud:Capacity:*`` (app settings ``RuntimeCloud__Capacity__...``).

Defaults:

- ``Pools``: one shared pool per kind in region ``local`` (agent-runtime 8,
  sandbox 8, build 4, browser 4 slots; min 0, max 64). A JSON array of
  ``{"Id", "Kind", "Region", "Scope", "Tenant", "Size", "Min", "Max"}``.
  Seeds are created when missing and never overwrite a pool an
  administrator changed through the API.
- ``Editions``: ``free`` (1 of each kind), ``standard`` (agent-runtime 4,
  sandbox 4, build 2, browser 2), ``enterprise`` (16 of each). A JSON object
  ``{"edition": {"kind": limit}}``; seeded like pools.
- ``TenantEditions``: ``{}``, a JSON object ``{"tenant": "edition"}``. An
  assignment made through ``PUT /runtime-cloud/quotas/{edition}`` wins.
- ``DefaultEdition``: ``standard``, for tenants nobody assigned.
- ``MaxTtlSeconds``: ``900``, the longest lease a request may ask for.
- ``TakeoverGraceSeconds``: ``1``, how long past its expiry a lease's slot
  (and quota token) stays untouched before another acquirer may take it, so
  that a few hundred milliseconds of clock skew between instances cannot
  make two holders overlap.
- ``SlotsPerShard``: ``4``, slots per table partition for pools created from
  now on (see :mod:`shared.capacity.slots`).
- ``LeaseRetentionDays``: ``90``; ``DenialRetentionHours``: ``24``;
  ``RecentDenialsMinutes``: ``15`` (the window ``GET pools/{id}`` reports).
- ``SweepIntervalSeconds``: ``30``, the expiry orchestration's period.
- ``MaintenanceSchedule``: ``0 * * * * *`` (every minute): seeds missing pools
  and editions and repairs slot rows (the first capacity call of an instance
  seeds too, so nothing waits for it).
- ``ExpiryStarterSchedule``: ``30 * * * * *``: starts each pool's expiry
  orchestration unless it runs.
- ``PurgeSchedule``: ``0 45 3 * * *`` (daily at 03:45 UTC): lease history,
  records and denials past their retention.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, field_validator, model_validator

from shared.capacity.models import EDITION_NAME, POOL_ID, PoolKind, PoolScope
from shared.platform.settings_section import NcrontabSchedule, Section
from shared.platform.uniqueness import repeated


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value.strip() else value


class PoolSeed(Section):
    id: str = Field(alias="Id", pattern=POOL_ID.pattern)
    kind: PoolKind = Field(alias="Kind")
    region: str = Field(default="local", alias="Region", min_length=1, max_length=64)
    scope: PoolScope = Field(default=PoolScope.SHARED, alias="Scope")
    tenant: str | None = Field(default=None, alias="Tenant")
    size: int = Field(alias="Size", ge=0)
    min: int = Field(default=0, alias="Min", ge=0)
    max: int = Field(default=64, alias="Max", ge=0)

    @model_validator(mode="after")
    def _within_bounds(self) -> PoolSeed:
        if not self.min <= self.size <= self.max:
            raise ValueError(f"pool {self.id}: Size must be within Min..Max")
        if (self.scope is PoolScope.DEDICATED) != bool(self.tenant):
            raise ValueError(f"pool {self.id}: a dedicated pool (and only one) names its Tenant")
        return self


def _default_pools() -> list[PoolSeed]:
    sizes = {PoolKind.AGENT_RUNTIME: 8, PoolKind.SANDBOX: 8, PoolKind.BUILD: 4, PoolKind.BROWSER: 4}
    return [PoolSeed(id=f"{kind.value}-local", kind=kind, size=size) for kind, size in sizes.items()]


def _default_editions() -> dict[str, dict[PoolKind, int]]:
    every = list(PoolKind)
    return {
        "free": dict.fromkeys(every, 1),
        "standard": {PoolKind.AGENT_RUNTIME: 4, PoolKind.SANDBOX: 4, PoolKind.BUILD: 2, PoolKind.BROWSER: 2},
        "enterprise": dict.fromkeys(every, 16),
    }


class CapacitySettings(Section):
    pools: list[PoolSeed] = Field(default_factory=_default_pools, alias="Pools")
    editions: dict[str, dict[PoolKind, int]] = Field(default_factory=_default_editions, alias="Editions")
    tenant_editions: dict[str, str] = Field(default_factory=dict, alias="TenantEditions")
    default_edition: str = Field(default="standard", alias="DefaultEdition")
    max_ttl_seconds: int = Field(default=900, ge=1, le=86_400, alias="MaxTtlSeconds")
    takeover_grace_seconds: float = Field(default=1.0, ge=0, le=60, alias="TakeoverGraceSeconds")
    slots_per_shard: int = Field(default=4, ge=1, le=64, alias="SlotsPerShard")
    lease_retention_days: int = Field(default=90, ge=1, alias="LeaseRetentionDays")
    denial_retention_hours: int = Field(default=24, ge=1, alias="DenialRetentionHours")
    recent_denials_minutes: int = Field(default=15, ge=1, alias="RecentDenialsMinutes")
    sweep_interval_seconds: int = Field(default=30, ge=1, le=3600, alias="SweepIntervalSeconds")
    maintenance_schedule: NcrontabSchedule = Field(default="0 * * * * *", alias="MaintenanceSchedule")
    expiry_starter_schedule: NcrontabSchedule = Field(default="30 * * * * *", alias="ExpiryStarterSchedule")
    purge_schedule: NcrontabSchedule = Field(default="0 45 3 * * *", alias="PurgeSchedule")

    @field_validator("pools", "editions", "tenant_editions", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        return _json(value)

    @field_validator("pools")
    @classmethod
    def _unique_pools(cls, pools: list[PoolSeed]) -> list[PoolSeed]:
        if twice := repeated(pool.id for pool in pools):
            raise ValueError(f"pool ids must be unique; repeated: {twice}")
        return pools

    @field_validator("editions")
    @classmethod
    def _edition_names(cls, editions: dict[str, dict[PoolKind, int]]) -> dict[str, dict[PoolKind, int]]:
        for name, limits in editions.items():
            if not EDITION_NAME.fullmatch(name):
                raise ValueError(f"edition name {name!r}: lower-case letters, digits and '-'")
            if any(limit < 0 for limit in limits.values()):
                raise ValueError(f"edition {name}: limits are not negative")
        return editions

    @model_validator(mode="after")
    def _editions_exist(self) -> CapacitySettings:
        known = set(self.editions)
        if self.default_edition not in known:
            raise ValueError(f"DefaultEdition {self.default_edition!r} is not one of Editions {sorted(known)}")
        unknown = sorted({e for e in self.tenant_editions.values() if e not in known})
        if unknown:
            raise ValueError(f"TenantEditions name unknown edition(s) {unknown}")
        return self
