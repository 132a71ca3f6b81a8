"""The pure parts: a finding's identity across scans, and how ignore rules narrow drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.inventory.findings import FindingState, reconcile
from shared.inventory.ignore_rules import IgnoreRule, apply_rules
from shared.inventory.model import Drift, FieldDifference, FindingKind

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def changed(*paths: str) -> Drift:
    return Drift(
        kind=FindingKind.CHANGED,
        key="queue/q",
        address="queue/q",
        type="queue",
        name="q",
        fields=[FieldDifference(path=p, before="a", after="b") for p in paths],
    )


def rule(field: str | None = None, days: int = 1, resource: str = "queue/q") -> IgnoreRule:
    return IgnoreRule(
        id=f"ign-{field}-{days}",
        tenant="t",
        environment="e",
        resource=resource,
        field=field,
        reason="r",
        author="a",
        created_at=NOW.isoformat(),
        expires_at=(NOW + timedelta(days=days)).isoformat(),
    )


def test_the_same_drift_on_the_next_scan_is_the_same_finding_and_gone_drift_is_resolved():
    first = reconcile("t", "e", [], [changed("metadata.a")], [], NOW)
    [opened] = first.opened

    second = reconcile("t", "e", [opened], [changed("metadata.a", "metadata.b")], [], NOW + timedelta(minutes=15))
    [seen] = second.seen_again
    third = reconcile("t", "e", [seen], [], [], NOW + timedelta(minutes=30))

    assert second.opened == [] and seen.id == opened.id and seen.times_seen == 2
    assert [f.path for f in seen.fields] == ["metadata.a", "metadata.b"]
    assert [(f.id, f.state) for f in third.resolved] == [(opened.id, FindingState.RESOLVED)]


def test_a_field_rule_removes_its_field_and_suppresses_the_finding_only_when_nothing_is_left():
    narrowed, suppressed = apply_rules(changed("metadata.a", "metadata.b"), [rule("metadata.a")], NOW)
    assert [f.path for f in narrowed.fields] == ["metadata.b"] and suppressed == []

    _, suppressed = apply_rules(changed("metadata.a"), [rule("metadata")], NOW)
    assert suppressed == ["ign-metadata-1"]


def test_an_expired_rule_or_another_resources_rule_suppresses_nothing():
    _, expired = apply_rules(changed("metadata.a"), [rule(None, days=-1)], NOW)
    _, elsewhere = apply_rules(changed("metadata.a"), [rule(None, resource="queue/other")], NOW)
    assert expired == [] and elsewhere == []


def test_a_field_rule_never_hides_a_missing_resource():
    missing = Drift(kind=FindingKind.MISSING, key="queue/q", address="queue/q", type="queue", name="q")
    _, suppressed = apply_rules(missing, [rule("metadata.a")], NOW)
    assert suppressed == []
