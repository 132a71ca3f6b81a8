"""Exceptions that ended (expired or revoked) more than ``ExceptionRetentionDays`` (396) ago are purged by the
daily ``policy_purge`` timer; active and recently ended ones stay, and bundle snapshots are never purged.

Rows from long ago are written by the product's own store with a ``now`` in the past (an exception cannot be
made over HTTP with a past creation time); the purge is run through the host's admin endpoint, as an
operator runs a timer now.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient
from azure.storage.blob import ContainerClient

from shared.platform.storage.clients import clients_from_connection_string
from shared.policy.exceptions import TABLE, ExceptionStore, NewPolicyException
from shared.policy.gate import SNAPSHOTS_CONTAINER
from tests.policy.helpers import create_exception, get_json, policy_tenant, tokens
from tests.provisioning.helpers import declare, specification, unique, wait_for_run_state
from tests.support.host import wait_until


def made_days_ago(store: ExceptionStore, tenant: str, environment: str, days: float, lives: float, rule: str):
    created = datetime.now(UTC) - timedelta(days=days)
    request = NewPolicyException(
        rule=rule, resource="*", reason="CHG-1: long ago", expires_at=created + timedelta(days=lives)
    )
    exception, _ = store.create(tenant, environment, request, "op", "studio", created, None)
    return exception


def test_the_purge_removes_exceptions_ended_beyond_retention_and_keeps_the_rest(
    policy_host, policy_tree, azurite, mint
):
    tenant = policy_tenant(policy_tree)
    requester, operator = tokens(mint, tenant)
    environment = unique("purge")
    run = declare(policy_host, requester, specification(environment)).json()["run_id"]
    assert wait_for_run_state(policy_host, requester, run, {"applied", "failed"})["state"] == "applied"
    active = create_exception(
        policy_host,
        operator,
        environment,
        rule="change-cap",
        resource="*",
        reason="CHG-2: in force",
        expires_at=(datetime.now(UTC) + timedelta(days=30)).isoformat(),
    )
    assert active.status_code == 201, active.text
    store = ExceptionStore(clients_from_connection_string(azurite.connection_string()))
    expired_long_ago = made_days_ago(store, tenant, environment, days=430, lives=30, rule="a")  # ended 400 days ago
    revoked = made_days_ago(store, tenant, environment, days=400, lives=90, rule="b")  # expiry alone: 310 days ago
    store.revoke(tenant, revoked.id, "op", datetime.now(UTC) - timedelta(days=398))
    recently = made_days_ago(store, tenant, environment, days=40, lives=30, rule="c")  # ended 10 days ago
    snapshots_before = {
        blob.name
        for blob in ContainerClient.from_connection_string(
            azurite.connection_string(), SNAPSHOTS_CONTAINER
        ).list_blobs()
    }

    answer = policy_host.request("POST", "admin/functions/policy_purge", json={"input": ""})

    assert answer.status_code == 202, answer.text
    table = TableClient.from_connection_string(azurite.connection_string(), TABLE)

    def exists(exception_id: str) -> bool:
        try:
            table.get_entity(tenant, f"exc|{exception_id}")
            return True
        except ResourceNotFoundError:
            return False

    wait_until(lambda: not exists(expired_long_ago.id) and not exists(revoked.id), timeout=30, message="the purge")
    assert exists(recently.id) and exists(active.json()["id"])
    listed = get_json(policy_host, f"runtime-cloud/environments/{environment}/policy/exceptions", requester)
    assert sorted(e["id"] for e in listed["exceptions"]) == sorted([active.json()["id"], recently.id])
    snapshots_after = {
        blob.name
        for blob in ContainerClient.from_connection_string(
            azurite.connection_string(), SNAPSHOTS_CONTAINER
        ).list_blobs()
    }
    assert snapshots_before and snapshots_before <= snapshots_after  # audit: bundle snapshots stay
