"""Tables are owned through the target's registry: another tenant is refused, a dropped table is deleted."""

from __future__ import annotations

from azure.data.tables import TableServiceClient

from devhost.azurite import TARGET_ACCOUNT
from shared.iac.embedded.table_registry import registry_of
from shared.iac.tags import ManagementTags
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state


def test_a_table_belongs_to_one_environment_and_is_deleted_when_dropped(provisioning_host, azurite, mint):
    owner = mint("tenant-a", scopes=WRITE)
    other = mint("tenant-b", scopes=WRITE)
    environment = unique("tables")
    ledger = f"Ledger{environment[-8:]}"
    queue = {"type": "queue", "name": f"orders-{environment[-8:]}"}
    target = TableServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT))

    first = declare(
        provisioning_host, owner, specification(environment, resources=[queue, {"type": "table", "name": ledger}])
    ).json()["run_id"]
    assert wait_for_run_state(provisioning_host, owner, first, {"applied", "failed"})["state"] == "applied"
    assert registry_of(target).owner(ledger) == ManagementTags(tenant="tenant-a", environment=environment)

    # Another tenant declaring the same table (names are shared across the account) is refused at plan.
    theirs = unique("tables")
    refused = declare(
        provisioning_host, other, specification(theirs, resources=[{"type": "table", "name": ledger.lower()}])
    ).json()["run_id"]
    run = wait_for_run_state(provisioning_host, other, refused, {"applied", "failed"})
    assert run["state"] == "failed" and run["failure_reason"] == "plan-failed", run
    assert "another tenant" in run["failure_detail"] and "tenant-a" not in run["failure_detail"]
    assert registry_of(target).owner(ledger) == ManagementTags(tenant="tenant-a", environment=environment)

    # Dropped from the specification, the table is planned for deletion and deleted.
    dropped = declare(provisioning_host, owner, specification(environment, resources=[queue])).json()["run_id"]
    run = wait_for_run_state(provisioning_host, owner, dropped, {"applied", "failed"})
    assert run["state"] == "applied" and run["plan_counts"]["delete"] == 1, run
    assert ledger.lower() not in {table.name.lower() for table in target.list_tables()}
    assert registry_of(target).owner(ledger) is None
