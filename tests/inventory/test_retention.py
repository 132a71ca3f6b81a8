"""Retention: resolved findings, closed proposals and expired rules go after 13 months; open findings stay."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from shared.inventory.findings import Finding, FindingState
from shared.inventory.ignore_rules import IgnoreRule
from shared.inventory.model import FindingKind
from shared.inventory.retention import purge


def finding(environment: str, state: FindingState, resolved_at: str | None) -> Finding:
    return Finding(
        id=f"fnd-{uuid.uuid4().hex[:20]}",
        tenant="tenant-a",
        environment=environment,
        kind=FindingKind.MISSING,
        key="queue/q",
        address="queue/q",
        type="queue",
        name="q",
        state=state,
        first_seen="2020-01-01T00:00:00+00:00",
        last_seen="2020-01-02T00:00:00+00:00",
        resolved_at=resolved_at,
    )


def test_purge_keeps_open_findings_and_anything_younger_than_the_retention(store):
    environment = f"ret-{uuid.uuid4().hex[:8]}"
    old_resolved = finding(environment, FindingState.RESOLVED, "2020-01-02T00:00:00+00:00")
    still_open = finding(environment, FindingState.OPEN, None)
    recent = finding(environment, FindingState.RESOLVED, datetime.now(UTC).isoformat())
    expired_rule = IgnoreRule(
        id=f"ign-{uuid.uuid4().hex[:20]}",
        tenant="tenant-a",
        environment=environment,
        resource="queue/q",
        reason="r",
        author="a",
        created_at="2019-12-01T00:00:00+00:00",
        expires_at="2020-01-01T00:00:00+00:00",
    )
    store.commit(
        "tenant-a",
        environment,
        [store.rule_operation(expired_rule)],
        bulk=[store.finding_operation(f) for f in (old_resolved, still_open, recent)],
    )

    result = purge(store, retention_days=396, now=datetime.now(UTC) + timedelta(days=1))

    left = {f.id for f in store.findings("tenant-a", environment)}
    assert left == {still_open.id, recent.id}
    assert result.findings >= 1 and result.rules >= 1
    assert store.rules("tenant-a", environment) == []
