"""The embedded runner's plan against the real target account (Azurite's second account)."""

from __future__ import annotations

import pytest

from shared.desired_state.api import ResourceType
from shared.iac.embedded import (
    EmbeddedRunner,
    ObservedResource,
    ObservedState,
    OwnedElsewhere,
    plan_changes,
    read_target_state,
)
from shared.iac.embedded.table_registry import registry_of
from shared.iac.model import Action, FieldChange
from shared.iac.tags import ManagementTags
from tests.iac.conftest import TENANT, specification, tags_for


def by_address(plan):
    return {change.address: change for change in plan.changes}


def test_plan_of_an_absent_environment_creates_everything_with_each_field(target, names, environment):
    spec = specification(
        environment,
        [
            {"type": "blob-container", "name": names("data"), "metadata": {"owner": "team-a"}},
            {"type": "queue", "name": names("orders")},
            {"type": "table", "name": names("Ledger", table=True)},
        ],
    )

    plan = EmbeddedRunner().plan(spec, target)

    assert plan.runner == "embedded" and plan.runner_version
    assert plan.counts["create"] == 3 and sum(plan.counts.values()) == 3
    container = by_address(plan)[f"blob-container/{names('data')}"]
    assert container.before is None
    assert container.after == {"metadata": {"owner": "team-a", **tags_for(environment)}}
    assert FieldChange(path="metadata.owner", before=None, after="team-a") in container.fields
    assert FieldChange(path="metadata.rc_environment", before=None, after=environment) in container.fields
    table = by_address(plan)[f"table/{names('Ledger', table=True)}"]
    assert (table.before, table.after) == (None, {"registration": tags_for(environment)})
    assert FieldChange(path="registration.rc_tenant", before=None, after=TENANT) in table.fields


def test_plan_lists_update_no_change_and_delete_with_field_level_diffs(target, account, names, environment):
    ours = tags_for(environment)
    account.blobs.create_container(names("data"), metadata={**ours, "owner": "team-a", "tier": "hot"})
    account.queues.create_queue(names("orders"), metadata=ours)
    account.queues.create_queue(names("retired"), metadata={**ours, "owner": "team-a"})
    account.tables.create_table(names("Ledger", table=True))
    register(account, names("Ledger", table=True), environment)
    spec = specification(
        environment,
        [
            {"type": "blob-container", "name": names("data"), "metadata": {"owner": "team-b", "region": "eu"}},
            {"type": "queue", "name": names("orders")},
            {"type": "table", "name": names("Ledger", table=True)},
        ],
    )

    plan = EmbeddedRunner().plan(spec, target)
    changes = by_address(plan)

    update = changes[f"blob-container/{names('data')}"]
    assert update.action is Action.UPDATE
    assert update.fields == [
        FieldChange(path="metadata.owner", before="team-a", after="team-b"),
        FieldChange(path="metadata.region", before=None, after="eu"),
        FieldChange(path="metadata.tier", before="hot", after=None),
    ]
    assert changes[f"queue/{names('orders')}"].action is Action.NO_CHANGE
    assert changes[f"queue/{names('orders')}"].fields == []
    assert changes[f"table/{names('Ledger', table=True)}"].action is Action.NO_CHANGE
    deletion = changes[f"queue/{names('retired')}"]
    assert deletion.action is Action.DELETE and deletion.after is None
    assert FieldChange(path="metadata.owner", before="team-a", after=None) in deletion.fields
    assert plan.changes[-1] is deletion  # deletes come last
    assert any("deletes it, with its messages" in line for line in plan.diagnostics)


def register(account, table: str, environment: str, tenant: str = TENANT) -> None:
    """Register ``table`` for an environment, as an earlier apply of that environment would have."""
    registry_of(account.tables).claim(table, ManagementTags(tenant=tenant, environment=environment), lambda: True)


def test_tables_are_owned_through_the_registry_adopted_refused_and_deleted(target, account, names, environment):
    for table in ("Found", "Theirs", "Retired"):
        account.tables.create_table(names(table, table=True))
    register(account, names("Theirs", table=True), environment, tenant="tenant-secret-b")
    register(account, names("Retired", table=True), environment)
    found = {"type": "table", "name": names("Found", table=True)}

    plan = EmbeddedRunner().plan(specification(environment, [found]), target)

    changes = by_address(plan)
    adopted = changes[f"table/{names('Found', table=True)}"]
    assert adopted.action is Action.UPDATE and adopted.before == {}
    assert any("adopts it" in line for line in plan.diagnostics)
    retired = changes[f"table/{names('Retired', table=True)}"]
    assert retired.action is Action.DELETE and any("with its entities" in line for line in plan.diagnostics)
    with pytest.raises(OwnedElsewhere) as refused:
        EmbeddedRunner().plan(
            specification(environment, [{"type": "table", "name": names("Theirs", table=True)}]), target
        )
    assert "another tenant" in str(refused.value) and "tenant-secret-b" not in str(refused.value)


def test_a_listing_that_repeats_a_resource_plans_its_change_once(environment):
    ours = ManagementTags(tenant=TENANT, environment=environment)
    retired = ObservedResource(type=ResourceType.QUEUE, name="retired-q", tags=ours.as_metadata())
    kept = ObservedResource(type=ResourceType.QUEUE, name="kept-q", tags=ours.as_metadata())
    # Azurite's queue listing repeats queues past its first page (it pages by insertion, sorts by name).
    observed = ObservedState(target="t", account="a", observed_at="now", resources=[retired, kept, retired, kept])

    planned = plan_changes(specification(environment, [{"type": "queue", "name": "kept-q"}]), observed)

    assert [(c.address, c.action) for c in planned.changes] == [
        ("queue/kept-q", Action.NO_CHANGE),
        ("queue/retired-q", Action.DELETE),
    ]


def test_plan_leaves_other_environments_and_untagged_resources_and_tables_alone(target, account, names, environment):
    account.queues.create_queue(names("theirs"), metadata=tags_for("other-env"))
    account.queues.create_queue(names("handmade"))
    account.tables.create_table(names("Undeclared", table=True))
    spec = specification(environment, [{"type": "queue", "name": names("mine")}])

    plan = EmbeddedRunner().plan(spec, target)

    assert [change.address for change in plan.changes] == [f"queue/{names('mine')}"]


def test_plan_adopts_a_declared_untagged_container_by_adding_the_tags(target, account, names, environment):
    account.blobs.create_container(names("legacy"), metadata={"owner": "ops"})
    spec = specification(
        environment, [{"type": "blob-container", "name": names("legacy"), "metadata": {"owner": "ops"}}]
    )

    plan = EmbeddedRunner().plan(spec, target)

    change = plan.changes[0]
    assert change.action is Action.UPDATE
    assert [field.path for field in change.fields] == [
        "metadata.rc_environment",
        "metadata.rc_managed_by",
        "metadata.rc_tenant",
    ]
    assert any("adopts it" in line for line in plan.diagnostics)


def test_a_resource_managed_by_another_environment_is_a_plan_error_naming_it(target, account, names, environment):
    account.blobs.create_container(names("shared"), metadata=tags_for("staging"))
    spec = specification(environment, [{"type": "blob-container", "name": names("shared")}])

    with pytest.raises(OwnedElsewhere) as refused:
        EmbeddedRunner().plan(spec, target)

    message = str(refused.value)
    assert f"blob-container/{names('shared')}" in message and "'staging'" in message


def test_a_resource_of_another_tenant_is_a_plan_error_that_does_not_name_the_tenant(
    target, account, names, environment
):
    account.queues.create_queue(names("jobs"), metadata=tags_for(environment, tenant="tenant-secret-b"))
    spec = specification(environment, [{"type": "queue", "name": names("jobs")}])

    with pytest.raises(OwnedElsewhere) as refused:
        EmbeddedRunner().plan(spec, target)

    assert "another tenant" in str(refused.value)
    assert "tenant-secret-b" not in str(refused.value)


def test_the_reader_returns_every_resource_with_properties_and_tags(target, account, names, environment):
    account.blobs.create_container(names("seen"), metadata={**tags_for(environment), "owner": "x"})
    account.tables.create_table(names("Seen", table=True))

    observed = read_target_state(target)

    container = observed.find(ResourceType.BLOB_CONTAINER, names("seen"))
    assert container is not None
    assert container.metadata == {"owner": "x"}
    assert container.management is not None and container.management.tenant == TENANT
    assert container.properties["url"].endswith(f"/{names('seen')}")
    table = observed.find(ResourceType.TABLE, names("seen", table=True).lower())  # table names are case-insensitive
    assert table is not None and table.tags == {} and table.management is None
    assert observed.account == "targetaccount1" and observed.counts()["table"] >= 1
