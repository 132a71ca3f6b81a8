"""Policy exceptions: an operator's explicit, scoped, expiring, authored "let this through".

An exception names a tenant (from the token, never the body), one
environment, one rule id and one resource address -- or ``*`` for every
resource of that rule in that environment (a ``plan`` rule's violation has no
address, so only ``*`` covers it). It has a reason, an author (the person:
``oid``, else ``sub``; the client app beside it) and an expiry at most
``MaxExceptionDays`` ahead. It covers a violation only while it is active
(not expired, not revoked) *when the plan is checked*; the plan receipt names
each exception it relied on, and the verdict is bound to the plan's digest
like the rest of what the approver reviews.

Rows live in the ``PolicyExceptions`` table, partition = tenant, so another
tenant's exception is never read. Revoking keeps the row (receipts name it).
Retention: a row is purged ``ExceptionRetentionDays`` (396) after it *ended*
(``EndsAt``: its expiry, or its revocation if earlier), by the daily
``policy_purge`` timer; an active exception is never purged, and the plan
receipts that relied on one keep a copy of it as it was
(:class:`~shared.policy.verdict.ExceptionUse`), so purging loses no evidence.
The same ``Idempotency-Key`` names the same exception; with a different body
it is a conflict.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from pydantic import BaseModel, ConfigDict, Field

from shared.desired_state.api import NAME_PATTERN
from shared.platform.errors import AlreadyExists, Conflict, NotFound
from shared.platform.json_types import JsonTyped
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import insert_if_absent, query_rows, read_row, replace_if_unchanged
from shared.platform.storage.documents import read_stored
from shared.platform.storage.optimistic import on_conflict
from shared.platform.storage.paging import paging_seal, read_page, scope_of
from shared.policy.bundle import RULE_ID_PATTERN

TABLE = "PolicyExceptions"
ROW_PREFIX = "exc|"
EVERY_RESOURCE = "*"


class NewPolicyException(JsonTyped):
    """What an operator sends to create an exception."""

    model_config = ConfigDict(extra="forbid")

    rule: str = Field(pattern=RULE_ID_PATTERN, description="the rule id it excepts")
    resource: str = Field(
        min_length=1, max_length=1024, description="a resource address (e.g. queue/orders), or * for every resource"
    )
    reason: str = Field(min_length=1, max_length=2000)
    expires_at: datetime = Field(description="when it stops applying (with a time zone), at most MaxExceptionDays")


class PolicyException(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str
    environment: str = Field(pattern=NAME_PATTERN)
    rule: str
    resource: str
    reason: str
    created_by: str
    created_by_client: str | None = None
    created_at: str
    expires_at: str
    revoked_at: str | None = None
    revoked_by: str | None = None

    @property
    def ends_at(self) -> datetime:
        """When it stopped (or stops) applying: its expiry, or its revocation if that came first."""
        expiry = datetime.fromisoformat(self.expires_at)
        revoked = datetime.fromisoformat(self.revoked_at) if self.revoked_at else None
        return min(expiry, revoked) if revoked is not None else expiry

    def active_at(self, moment: datetime) -> bool:
        return self.revoked_at is None and datetime.fromisoformat(self.expires_at) > moment

    def covers(self, rule_id: str, address: str | None) -> bool:
        return self.rule == rule_id and (self.resource == EVERY_RESOURCE or self.resource == address)

    def public_view(self, moment: datetime) -> dict[str, Any]:
        view = self.model_dump(mode="json", exclude={"tenant"})
        view["active"] = self.active_at(moment)
        return view


def check_expiry(expires_at: datetime, now: datetime, max_days: int) -> None:
    """:class:`ValueError` naming the problem when an expiry is not acceptable."""
    if expires_at.tzinfo is None:
        raise ValueError("expires_at needs a time zone (e.g. 2030-01-31T00:00:00Z)")
    if expires_at <= now:
        raise ValueError("expires_at is in the past")
    if expires_at > now + timedelta(days=max_days):
        raise ValueError(f"an exception lives at most {max_days} days; change the policy for what is meant to stay")


class ExceptionStore:
    def __init__(self, storage: StorageClients) -> None:
        self._table = storage.tables.get_table_client(TABLE)
        self._tables = storage.tables

    def create(
        self,
        tenant: str,
        environment: str,
        request: NewPolicyException,
        author: str,
        client: str | None,
        now: datetime,
        idempotency_key: str | None,
    ) -> tuple[PolicyException, bool]:
        """The new exception (True), or the one this key made before (False); a key reused differently is a 409."""
        digest = _request_digest(environment, request)
        exception = PolicyException(
            id=_exception_id(tenant, idempotency_key),
            tenant=tenant,
            environment=environment,
            rule=request.rule,
            resource=request.resource,
            reason=request.reason,
            created_by=author,
            created_by_client=client,
            created_at=now.isoformat(),
            expires_at=request.expires_at.isoformat(),
        )
        try:
            insert_if_absent(self._table, {**_row(exception), "RequestDigest": digest})
        except AlreadyExists:
            row = read_row(self._table, tenant, ROW_PREFIX + exception.id)
            if row is None or row.get("RequestDigest") != digest:
                raise Conflict("idempotency-key-reused", "this Idempotency-Key made a different exception") from None
            return _exception(row), False
        return exception, True

    def get(self, tenant: str, exception_id: str) -> PolicyException:
        row = read_row(self._table, tenant, ROW_PREFIX + exception_id)
        if row is None:
            raise NotFound(f"exception {exception_id}")
        return _exception(row)

    def find(self, tenant: str, environment: str | None = None) -> list[PolicyException]:
        """A tenant's exceptions (of one environment), newest first."""
        text = "PartitionKey eq @tenant and RowKey ge @start and RowKey lt @end"
        parameters: dict[str, Any] = {"tenant": tenant, "start": ROW_PREFIX, "end": "exc}"}
        if environment is not None:
            text += " and Environment eq @environment"
            parameters["environment"] = environment
        rows = query_rows(self._table, text, **parameters)
        return sorted((_exception(row) for row in rows), key=lambda e: e.created_at, reverse=True)

    def page(
        self, tenant: str, environment: str, *, limit: int, continuation: str | None
    ) -> tuple[list[PolicyException], str | None]:
        """A page of one environment's exceptions, in exception id order (the tenant partition's key order)."""
        found = read_page(
            self._table,
            "PartitionKey eq @tenant and RowKey ge @start and RowKey lt @end and Environment eq @environment",
            {"tenant": tenant, "start": ROW_PREFIX, "end": "exc}", "environment": environment},
            scope=scope_of("policy-exceptions", tenant, environment),
            seal=paging_seal(self._tables),
            limit=limit,
            continuation=continuation,
        )
        return [_exception(row) for row in found.rows], found.continuation

    def active(self, tenant: str, environment: str, moment: datetime) -> list[PolicyException]:
        return [e for e in self.find(tenant, environment) if e.active_at(moment)]

    @on_conflict
    def revoke(self, tenant: str, exception_id: str, by: str, now: datetime) -> PolicyException:
        """Revoke (idempotent: a revoked exception stays as it was revoked first)."""
        row = read_row(self._table, tenant, ROW_PREFIX + exception_id)
        if row is None:
            raise NotFound(f"exception {exception_id}")
        current = _exception(row)
        if current.revoked_at is not None:
            return current
        revoked = current.model_copy(update={"revoked_at": now.isoformat(), "revoked_by": by})
        replace_if_unchanged(self._table, {**_row(revoked), "RequestDigest": row.get("RequestDigest", "")}, row["etag"])
        return revoked

    def purge(self, retention_days: int, now: datetime) -> int:
        """Delete the rows of exceptions that ended more than ``retention_days`` ago; how many went.

        Deleting a row already gone is fine, so two purges may race. ``EndsAt`` is written in UTC,
        so the string comparison is a time comparison."""
        cutoff = _utc_text(now - timedelta(days=retention_days))
        rows = self._table.query_entities(
            "RowKey ge @start and RowKey lt @end and EndsAt lt @cutoff",
            parameters={"start": ROW_PREFIX, "end": "exc}", "cutoff": cutoff},
            select=["PartitionKey", "RowKey"],
        )
        purged = 0
        for row in list(rows):
            with contextlib.suppress(ResourceNotFoundError):
                self._table.delete_entity(row["PartitionKey"], row["RowKey"])
            purged += 1
        return purged


def _utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _exception_id(tenant: str, idempotency_key: str | None) -> str:
    if idempotency_key is None:
        return f"exc-{uuid.uuid4().hex[:20]}"
    return "exc-" + hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()[:20]


def _request_digest(environment: str, request: NewPolicyException) -> str:
    document = {"environment": environment, **request.model_dump(mode="json")}
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _row(exception: PolicyException) -> dict[str, Any]:
    return {
        "PartitionKey": exception.tenant,
        "RowKey": ROW_PREFIX + exception.id,
        "Environment": exception.environment,
        "EndsAt": _utc_text(exception.ends_at),  # what the purge filters on
        "Document": exception.model_dump_json(),
    }


def _exception(row: dict[str, Any]) -> PolicyException:
    return read_stored(PolicyException, row["Document"], table=TABLE, partition=row["PartitionKey"], row=row["RowKey"])
