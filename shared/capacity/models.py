"""The capacity domain's vocabulary: pools, editions, lease requests and views.

Request models forbid unknown fields so that a typo (``ttl`` for
``ttl_seconds``) is a 422 naming the field instead of a silently ignored
option. Views are what the API answers; they are built from rows, never
stored as such.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, TypeVar, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticKnownError, core_schema

from shared.platform.errors import FieldError
from shared.platform.identifiers import TENANT_PATTERN
from shared.platform.json_types import JsonTyped

POOL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
EDITION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Lease ids become table RowKeys: keep them to characters every key accepts.
LEASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_POOL_SIZE = 10_000


class PoolKind(str, Enum):
    AGENT_RUNTIME = "agent-runtime"
    SANDBOX = "sandbox"
    BUILD = "build"
    BROWSER = "browser"


class Purpose(str, Enum):
    ATTEMPT = "attempt"
    SANDBOX = "sandbox"
    BUILD = "build"
    BROWSER = "browser"


class PoolScope(str, Enum):
    SHARED = "shared"  # any tenant may lease from it
    DEDICATED = "dedicated"  # only ``tenant`` may


class LeaseState(str, Enum):
    ACTIVE = "active"
    RELEASED = "released"
    EXPIRED = "expired"


class _Request(JsonTyped):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PoolSpec(_Request):
    """Body of ``PUT /runtime-cloud/pools/{id}``: create a pool or resize it within min/max."""

    # A PUT states the pool's bounds: min and max are required, so a resize that leaves one out is a 422
    # naming it, never a silent reset to a default. (kind, region, scope and tenant cannot change: a PUT
    # whose defaults differ from an existing pool's is a 409, not a change.)
    kind: PoolKind
    region: str = Field(default="local", min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")
    scope: PoolScope = PoolScope.SHARED
    tenant: str | None = Field(default=None, pattern=TENANT_PATTERN, description="a dedicated pool's tenant")
    size: int = Field(ge=0, le=MAX_POOL_SIZE, description="within min..max")
    min: int = Field(ge=0, le=MAX_POOL_SIZE, description="at most max")
    max: int = Field(ge=0, le=MAX_POOL_SIZE)
    draining: bool | None = Field(default=None, description="null keeps the current flag; false re-opens")
    # Slots per table partition; fixed at creation (default: the SlotsPerShard setting).
    slots_per_shard: int | None = Field(default=None, ge=1, le=64)

    @model_validator(mode="after")
    def _consistent(self) -> PoolSpec:
        # Each complaint names the field to fix (a 422 path), not the whole body.
        if self.min > self.max:
            raise FieldError(("min",), "min must not exceed max")
        if not self.min <= self.size <= self.max:
            raise FieldError(("size",), f"size must be within min..max ({self.min}..{self.max})")
        if self.scope is PoolScope.DEDICATED and not self.tenant:
            raise FieldError(("tenant",), "a dedicated pool names its tenant")
        if self.scope is PoolScope.SHARED and self.tenant:
            raise FieldError(("tenant",), "a shared pool has no tenant; use scope 'dedicated'")
        return self


class Pool(BaseModel):
    """A pool as stored. ``slots_per_shard`` is fixed at creation: it maps slot index to partition."""

    id: str
    kind: PoolKind
    region: str
    scope: PoolScope
    tenant: str | None = None
    size: int
    min: int
    max: int
    draining: bool = False
    slots_per_shard: int
    # Highest slot count the pool ever had: slot rows up to here exist (surplus ones closed).
    slots_created: int
    created_at: str
    updated_at: str

    def serves(self, tenant: str) -> bool:
        return self.scope is PoolScope.SHARED or self.tenant == tenant

    def shard_of(self, index: int) -> int:
        return index // self.slots_per_shard

    def shards(self, upto: int | None = None) -> range:
        count = self.slots_created if upto is None else upto
        return range((count + self.slots_per_shard - 1) // self.slots_per_shard)


class EditionSpec(_Request):
    """Body of ``PUT /runtime-cloud/quotas/{edition}``.

    ``limits``: concurrent leases per pool kind; a kind not listed allows none.
    ``tenants``: tenants to move to this edition (others keep theirs).
    """

    # The bound is on each value, so an out-of-range limit is reported at /limits/{kind}.
    limits: dict[PoolKind, Annotated[int, Field(ge=0, le=MAX_POOL_SIZE)]] = Field(default_factory=dict)
    tenants: list[Annotated[str, Field(pattern=TENANT_PATTERN)]] = Field(default_factory=list, max_length=1000)

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, tenants: list[str]) -> list[str]:
        return list(dict.fromkeys(tenants))


class Edition(BaseModel):
    name: str
    limits: dict[PoolKind, int]

    def limit_for(self, kind: PoolKind) -> int:
        return self.limits.get(kind, 0)


class AcquireRequest(_Request):
    """Body of ``POST /runtime-cloud/leases``. ``lease_id`` makes a retried acquire return the same lease."""

    kind: PoolKind
    region: str | None = Field(default=None, min_length=1, max_length=64)
    purpose: Purpose
    holder: str = Field(min_length=1, max_length=200)
    ttl_seconds: int = Field(ge=1, description="at most the host's MaxTtlSeconds")
    lease_id: str | None = Field(
        default=None,
        pattern=LEASE_ID.pattern,
        description="1..128 characters: letters, digits, '.', '_' or '-', starting with a letter or digit",
    )

    def same_request(self, other: dict[str, Any]) -> bool:
        """Does a stored lease answer this request (for an idempotent retry)?"""
        return bool(
            other["Kind"] == self.kind.value
            and other["Purpose"] == self.purpose.value
            and other["Holder"] == self.holder
            and other.get("RequestedRegion", "") == (self.region or "")
        )


Ttl = TypeVar("Ttl", bound=BaseModel)


@dataclass(frozen=True)
class AtMost:
    """``<= limit()``, the limit asked for when a value is validated and when the schema is made: a bound
    that is a setting is read when it is used, not when the model is made (at import)."""

    limit: Callable[[], int]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        shown = handler(schema)
        shown["maximum"] = self.limit()
        return shown

    def _check(self, value: int) -> int:
        limit = self.limit()
        if value > limit:  # the error pydantic's own ``le`` gives, so a caller sees no difference
            raise PydanticKnownError("less_than_equal", {"le": limit})
        return value


def with_ttl_bound(model: type[Ttl], max_seconds: Callable[[], int]) -> type[Ttl]:
    """``model`` with ``ttl_seconds`` at most ``max_seconds()`` (the host's ``MaxTtlSeconds``, read when a
    body is validated): the handler validates with it and the API document shows it, so the bound is
    stated where it is enforced."""
    info = model.model_fields["ttl_seconds"]
    bounded = Annotated[int, Field(ge=1), AtMost(max_seconds)]
    annotation: Any = bounded if info.is_required() else bounded | None
    bound = Field(default=... if info.is_required() else info.default, description=info.description)
    return cast(
        type[Ttl],
        create_model(model.__name__, __base__=model, __doc__=model.__doc__, ttl_seconds=(annotation, bound)),
    )


class RenewRequest(_Request):
    ttl_seconds: int | None = Field(default=None, ge=1, description="at most the host's MaxTtlSeconds")


class LeaseView(BaseModel):
    """What acquire, renew and GET answer."""

    lease_id: str
    tenant: str
    pool: str
    kind: PoolKind
    region: str
    slot: int
    fencing_token: int
    holder: str
    purpose: Purpose
    state: LeaseState
    ttl_seconds: int
    granted_at: str
    expires_at: str
    ended_at: str | None = None


class Denial(BaseModel):
    at: str
    tenant: str
    kind: str
    reason: str
    holder: str


class PoolView(BaseModel):
    id: str
    kind: PoolKind
    region: str
    scope: PoolScope
    tenant: str | None
    size: int
    min: int
    max: int
    draining: bool
    held: int
    free: int
    # Leases still held on slots that a shrink or drain closed; they vanish when released.
    held_on_closed_slots: int
    # Slots a scale-down is draining (shared/capacity/draining.py): no new grants, held leases live on.
    draining_slots: int = 0
    recent_denials: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
