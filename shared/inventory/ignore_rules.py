"""Ignore rules: an operator's scoped, expiring "this drift is known".

A rule names an environment, a resource (its address, e.g. ``queue/orders``,
or its key) and optionally one field (``metadata.owner``), with a reason, an
author and an expiry. Until it expires it suppresses matching drift:

- a rule without a field suppresses every finding about the resource;
- a rule with a field removes that field (and fields under it) from a
  ``changed`` finding; the finding is suppressed once no unsuppressed field
  is left. A field rule never hides a ``missing`` or ``unexpected`` resource.

Rules always expire (at most ``MaxIgnoreDays``): drift that should be
ignored for ever belongs in the specification, which is what *adopt* does.
When a rule expires, the next scan shows the drift again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from shared.inventory.model import Drift, FieldDifference, FindingKind
from shared.platform.json_types import JsonTyped


class IgnoreRule(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str
    environment: str
    resource: str
    field: str | None = None
    reason: str
    author: str
    created_at: str
    expires_at: str
    proposal_id: str | None = None  # set when accepting a proposal created it

    def active_at(self, now: datetime) -> bool:
        return datetime.fromisoformat(self.expires_at) > now

    def covers_resource(self, drift: Drift) -> bool:
        return self.resource in (drift.address, drift.key)

    def covers_field(self, path: str) -> bool:
        return self.field is not None and (path == self.field or path.startswith(self.field + "."))

    def public_view(self, now: datetime) -> dict[str, object]:
        view = self.model_dump(mode="json", exclude={"tenant"})
        view["active"] = self.active_at(now)
        return view


class NewIgnoreRule(JsonTyped):
    """What a caller sends to create a rule (the expiry defaults from settings)."""

    model_config = ConfigDict(extra="forbid")

    resource: str = Field(min_length=1, max_length=1024)
    field: str | None = Field(default=None, min_length=1, max_length=512)
    reason: str = Field(min_length=1, max_length=2000)
    expires_at: datetime | None = None


def new_rule(
    tenant: str,
    environment: str,
    request: NewIgnoreRule,
    *,
    author: str,
    now: datetime,
    default_days: int,
    max_days: int,
    proposal_id: str | None = None,
) -> IgnoreRule:
    """A rule from a request; :class:`ValueError` naming the problem if its expiry is not acceptable."""
    expires = request.expires_at or now + timedelta(days=default_days)
    if expires.tzinfo is None:
        raise ValueError("expires_at needs a time zone (e.g. 2030-01-31T00:00:00Z)")
    if expires <= now:
        raise ValueError("expires_at is in the past")
    if expires > now + timedelta(days=max_days):
        raise ValueError(f"an ignore rule lives at most {max_days} days; adopt drift that is meant to stay")
    return IgnoreRule(
        id=f"ign-{uuid.uuid4().hex[:20]}",
        tenant=tenant,
        environment=environment,
        resource=request.resource,
        field=request.field,
        reason=request.reason,
        author=author,
        created_at=now.isoformat(),
        expires_at=expires.isoformat(),
        proposal_id=proposal_id,
    )


def apply_rules(drift: Drift, rules: Iterable[IgnoreRule], now: datetime) -> tuple[Drift, list[str]]:
    """The drift left after active rules, and the ids of the rules that suppress it entirely.

    A non-empty list means the whole finding is suppressed; fields a rule covers
    are removed from a ``changed`` drift either way.
    """
    mine = [rule for rule in rules if rule.active_at(now) and rule.covers_resource(drift)]
    whole = [rule.id for rule in mine if rule.field is None]
    if whole:
        return drift, whole
    if drift.kind is not FindingKind.CHANGED:
        return drift, []
    field_rules = [rule for rule in mine if rule.field is not None]
    kept: list[FieldDifference] = [f for f in drift.fields if not any(r.covers_field(f.path) for r in field_rules)]
    if len(kept) == len(drift.fields):
        return drift, []
    if not kept:
        used = sorted({r.id for r in field_rules if any(r.covers_field(f.path) for f in drift.fields)})
        return drift, used
    return drift.model_copy(update={"fields": kept}), []
