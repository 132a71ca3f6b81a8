"""The embedded runner's apply against the real target account: exactly the plan, once per step."""

from __future__ import annotations

import pytest

from shared.iac.embedded import EmbeddedRunner, PlanNotForThisRunner
from shared.iac.embedded.table_registry import registry_of
from shared.iac.model import PlanNoLongerHolds, StepResult, StepStatus
from shared.iac.tags import ManagementTags
from tests.iac.conftest import TENANT, DictJournal, specification, tags_for


def three_resources(names, owner="team-a"):
    return [
        {"type": "blob-container", "name": names("data"), "metadata": {"owner": owner}},
        {"type": "queue", "name": names("orders")},
        {"type": "table", "name": names("Ledger", table=True)},
    ]


def test_apply_creates_and_tags_the_resources_and_logs_configuration_names_only(target, account, names, environment):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()
    plan = runner.plan(spec, target)

    result = runner.apply(spec, target, plan, DictJournal(), {"db_password": "s3cr3t-value", "region": "eu"})

    assert [step.status for step in result.steps] == [StepStatus.APPLIED] * 3
    assert account.container_metadata(names("data")) == {"owner": "team-a", **tags_for(environment)}
    assert account.queue_metadata(names("orders")) == tags_for(environment)
    assert names("Ledger", table=True) in account.table_names()
    assert result.outputs[f"queue/{names('orders')}"]["url"].endswith(f"/{names('orders')}")
    logs = "\n".join(result.logs)
    assert "db_password, region" in logs and "s3cr3t-value" not in logs
    assert runner.plan(spec, target).counts["no-change"] == 3


def test_apply_updates_metadata_and_deletes_what_the_plan_deletes(target, account, names, environment):
    runner = EmbeddedRunner()
    first = specification(environment, three_resources(names))
    runner.apply(first, target, runner.plan(first, target), DictJournal(), {})
    second = specification(environment, three_resources(names, owner="team-b")[::2])  # the queue is dropped

    result = runner.apply(second, target, runner.plan(second, target), DictJournal(), {})

    statuses = {step.address: (step.action.value, step.status.value) for step in result.steps}
    assert statuses[f"blob-container/{names('data')}"] == ("update", "applied")
    assert statuses[f"queue/{names('orders')}"] == ("delete", "applied")
    assert account.container_metadata(names("data"))["owner"] == "team-b"
    assert names("orders") not in {queue.name for queue in account.queues.list_queues()}


def test_a_second_apply_with_the_same_journal_changes_nothing(target, account, names, environment):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()
    plan = runner.plan(spec, target)
    journal = DictJournal()
    first = runner.apply(spec, target, plan, journal, {})
    etag = account.container_etag(names("data"))

    again = runner.apply(spec, target, plan, journal, {})

    assert again.steps == first.steps  # every step answered from the journal
    assert account.container_etag(names("data")) == etag
    assert sum("already recorded" in line for line in again.logs) == 3


class CrashAfterWrite(DictJournal):
    """A journal whose host dies after the second step's change, before it is recorded."""

    def record(self, result: StepResult) -> None:
        if len(self) == 1:
            raise KeyboardInterrupt("host killed")
        super().record(result)


def test_an_apply_resumed_after_a_crash_between_change_and_record_creates_nothing_twice(
    target, account, names, environment
):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()
    plan = runner.plan(spec, target)
    journal = CrashAfterWrite()
    with pytest.raises(KeyboardInterrupt):
        runner.apply(spec, target, plan, journal, {})
    assert list(journal) == [f"blob-container/{names('data')}"]  # the queue exists but is not recorded
    etag = account.container_etag(names("data"))

    resumed = runner.apply(spec, target, plan, DictJournal(journal), {})

    by_address = {step.address: step for step in resumed.steps}
    queue_step = by_address[f"queue/{names('orders')}"]
    assert queue_step.status is StepStatus.APPLIED
    assert "earlier attempt applied it" in queue_step.message
    assert by_address[f"table/{names('Ledger', table=True)}"].message == "created"
    assert account.container_etag(names("data")) == etag  # the recorded step was not touched


def test_apply_refuses_when_the_target_changed_since_the_plan(target, account, names, environment):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()
    runner.apply(spec, target, runner.plan(spec, target), DictJournal(), {})
    changed = specification(environment, three_resources(names, owner="team-b"))
    plan = runner.plan(changed, target)
    account.blobs.get_container_client(names("data")).set_container_metadata(
        {**tags_for(environment), "owner": "someone-else"}
    )

    with pytest.raises(PlanNoLongerHolds) as refused:
        runner.apply(changed, target, plan, DictJournal(), {})

    assert f"blob-container/{names('data')}" in str(refused.value)
    assert account.container_metadata(names("data"))["owner"] == "someone-else"
    assert refused.value.result is not None and refused.value.result.steps == []


def test_apply_refuses_when_a_no_change_resource_disappeared_since_the_plan(target, account, names, environment):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()
    runner.apply(spec, target, runner.plan(spec, target), DictJournal(), {})
    plan = runner.plan(spec, target)
    account.queues.delete_queue(names("orders"))

    with pytest.raises(PlanNoLongerHolds, match=f"queue/{names('orders')}.*absent"):
        runner.apply(spec, target, plan, DictJournal(), {})


def test_apply_refuses_a_plan_made_for_another_specification(target, names, environment):
    runner = EmbeddedRunner()
    planned = specification(environment, three_resources(names))
    other = specification(environment, three_resources(names, owner="team-z"))

    with pytest.raises(PlanNotForThisRunner, match="does not match"):
        runner.apply(other, target, runner.plan(planned, target), DictJournal(), {})


def test_apply_pauses_the_step_interval_between_changes(target, names, environment):
    pauses: list[float] = []
    runner = EmbeddedRunner(step_interval_seconds=1.5, sleep=pauses.append)
    spec = specification(environment, three_resources(names))

    runner.apply(spec, target, runner.plan(spec, target), DictJournal(), {})

    assert pauses == [1.5, 1.5]


def test_a_table_is_registered_when_created_and_deleted_with_its_registration_when_dropped(
    target, account, names, environment
):
    runner = EmbeddedRunner()
    first = specification(environment, three_resources(names))
    runner.apply(first, target, runner.plan(first, target), DictJournal(), {})
    ledger = names("Ledger", table=True)
    assert registry_of(account.tables).owner(ledger) == ManagementTags(tenant=TENANT, environment=environment)

    second = specification(environment, three_resources(names)[:2])  # the table is dropped
    result = runner.apply(second, target, runner.plan(second, target), DictJournal(), {})

    statuses = {step.address: (step.action.value, step.status.value) for step in result.steps}
    assert statuses[f"table/{ledger}"] == ("delete", "applied")
    assert ledger not in account.table_names()
    assert registry_of(account.tables).owner(ledger) is None
