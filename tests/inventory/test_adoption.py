"""The pure part of a decision: which specification it declares, and what it keeps as observed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.tags import ManagementTags
from shared.inventory.adoption import NotAdoptable, declared_specification
from shared.inventory.findings import reconcile
from shared.inventory.ignore_rules import IgnoreRule
from shared.inventory.model import Drift, FieldDifference, FindingKind

NOW = datetime(2030, 1, 1, tzinfo=UTC)
TAGS = ManagementTags(tenant="t", environment="dev").as_metadata()


def applied(runner: str = "embedded") -> EnvironmentSpecification:
    common = {"tenant": "t", "environment": "dev", "environment_class": "non-production", "target": "x"}
    if runner != "embedded":
        return EnvironmentSpecification.model_validate(
            {**common, "runner": runner, "pulumi": {"project": "p", "stack": "s"}}
        )
    return EnvironmentSpecification.model_validate(
        {
            **common,
            "runner": runner,
            "resources": [
                {"type": "queue", "name": "orders", "metadata": {"team": "checkout", "owner": "ann"}},
                {"type": "blob-container", "name": "invoices", "metadata": {"retention": "short"}},
            ],
        }
    )


def changed_queue() -> Drift:
    expected = {"metadata": {"team": "checkout", "owner": "ann", **TAGS}}
    observed = {"metadata": {"team": "payments", "owner": "bob", **TAGS}}
    return Drift(
        kind=FindingKind.CHANGED,
        key="queue/orders",
        address="queue/orders",
        type="queue",
        name="orders",
        expected=expected,
        observed=observed,
        fields=[
            FieldDifference(path="metadata.owner", before="ann", after="bob"),
            FieldDifference(path="metadata.team", before="checkout", after="payments"),
        ],
    )


def unexpected_queue() -> Drift:
    return Drift(
        kind=FindingKind.UNEXPECTED,
        key="queue/stray",
        address="queue/stray",
        type="queue",
        name="stray",
        observed={"metadata": {"owner": "ops", **TAGS}},
    )


def rule(resource: str, field: str | None = None) -> IgnoreRule:
    return IgnoreRule(
        id=f"ign-{resource}",
        tenant="t",
        environment="dev",
        resource=resource,
        field=field,
        reason="r",
        author="a",
        created_at=NOW.isoformat(),
        expires_at=(NOW + timedelta(days=1)).isoformat(),
    )


def test_reverting_a_finding_keeps_the_field_and_the_resource_that_ignore_rules_cover():
    findings = reconcile(
        "t",
        "dev",
        [],
        [changed_queue(), unexpected_queue()],
        [rule("queue/orders", "metadata.owner"), rule("queue/stray")],
        NOW,
    ).opened
    queue = next(f for f in findings if f.address == "queue/orders")

    declared = declared_specification(applied(), findings, {queue.id: "revert"})

    resources = {r.address: r.metadata for r in declared.specification.resources}
    assert resources["queue/orders"] == {"team": "checkout", "owner": "bob"}  # team reverted, owner ignored
    assert resources["queue/stray"] == {"owner": "ops"}  # ignored: declared as it is, so not deleted
    assert sorted(change.address for change in declared.kept) == ["queue/orders", "queue/stray"]
    assert declared.diff == []


def test_a_plain_revert_with_nothing_to_keep_declares_the_applied_specification_itself():
    findings = reconcile("t", "dev", [], [changed_queue()], [], NOW).opened

    declared = declared_specification(applied(), findings, {findings[0].id: "revert"})

    assert declared.specification.digest() == applied().digest() and declared.kept == []


def test_a_program_cannot_keep_drift_so_its_revert_is_refused_when_there_is_some_to_keep():
    findings = reconcile("t", "dev", [], [changed_queue(), unexpected_queue()], [rule("queue/orders")], NOW).opened
    stray = next(f for f in findings if f.address == "queue/stray")

    with pytest.raises(NotAdoptable, match="queue/orders"):
        declared_specification(applied("pulumi"), findings, {stray.id: "revert"})
    queue = next(f for f in findings if f.address == "queue/orders")
    assert declared_specification(applied("pulumi"), findings, {queue.id: "revert"}).kept == []
