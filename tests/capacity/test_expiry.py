"""The lease-expiry orchestration: an eternal Durable orchestration per pool sweeps expired leases.

This runs on a host of its own (its own Azurite, so its own task hub) with
``SweepIntervalSeconds=1``, so that several sweep periods pass quickly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueClient, TextBase64DecodePolicy

from devhost.azurite import Azurite
from tests.capacity.conftest import PROBLEM, CapacityApi
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess, wait_until


@pytest.fixture(scope="module")
def sweeping(
    tmp_path_factory: pytest.TempPathFactory, key_dir: Path, mint: Any
) -> Iterator[tuple[CapacityApi, Azurite]]:
    root = tmp_path_factory.mktemp("sweeping")
    azurite = Azurite(root / "azurite").start()
    settings = app_settings(
        azurite,
        key_dir,
        RuntimeCloud__Host__EnabledModules="capacity",
        RuntimeCloud__Capacity__SweepIntervalSeconds="1",
    )
    host = HostProcess(REPO, settings, root / "host.log").start()
    try:
        yield CapacityApi(host, mint), azurite
    finally:
        host.stop()
        azurite.stop(grace_seconds=0.5)


def instance_status(api: CapacityApi, pool_id: str) -> dict[str, Any]:
    answer = api.call("GET", f"runtime/webhooks/durabletask/instances/capacity-expiry-{pool_id}", None)
    return answer.json() if answer.status_code in (200, 202) else {}


def test_the_expiry_orchestration_sweeps_an_abandoned_lease(sweeping):
    api, azurite = sweeping
    pool = api.create_pool(size=2)
    [tenant] = api.tenants_with_limit("sandbox", 2)
    lease = api.acquire(tenant, pool, ttl_seconds=1).json()

    started = api.call("POST", "admin/functions/capacity_expiry_starter", None, json={"input": ""})
    assert started.status_code == 202

    def swept() -> dict[str, Any] | None:
        status = instance_status(api, pool.id)
        custom = status.get("customStatus") or {}
        if isinstance(custom, str):
            custom = json.loads(custom)
        return status if (custom.get("last_sweep") or {}).get("expired") else None

    status = wait_until(swept, timeout=30, message="a sweep that expired the lease")
    assert status["runtimeStatus"] in ("Running", "Pending", "ContinuedAsNew")

    tables = TableServiceClient.from_connection_string(azurite.connection_string())
    grant = tables.get_table_client("CapacitySlots").get_entity(
        f"{pool.id}|000", f"grant|{lease['slot']:05d}|{lease['fencing_token']:010d}"
    )
    assert (grant["Outcome"], grant["Reason"], grant["EndedAt"]) == ("expired", "swept", lease["expires_at"])
    record = api.lease(tenant, lease["lease_id"]).json()
    assert record["state"] == "expired" and record["ended_at"] == lease["expires_at"]

    queue = QueueClient.from_connection_string(
        azurite.connection_string(), "runtime-cloud-events", message_decode_policy=TextBase64DecodePolicy()
    )
    seen: dict[str, dict] = {}  # by event id: a queue shared with every other test, read to its end

    def lease_expired() -> list[dict]:
        for received in queue.receive_messages(messages_per_page=32, visibility_timeout=300):
            event = json.loads(received.content)
            seen.setdefault(event["id"], event)
        return [
            e
            for e in seen.values()
            if e["type"].endswith("LeaseExpired") and e["data"]["lease_id"] == lease["lease_id"]
        ]

    expired = wait_until(lease_expired, timeout=20, message="the LeaseExpired event")
    # One expiry of the lease (delivery is at-least-once: a copy of it, same id, counts once).
    assert len(expired) == 1 and expired[0]["data"]["fencing_token"] == lease["fencing_token"]

    renew = api.renew(tenant, lease["lease_id"])
    assert renew.status_code == 409 and renew.json()["type"] == PROBLEM + "lease-lost"

    # Eternal: it keeps sweeping (continue-as-new), and starting it again is harmless.
    periods = lambda: (instance_status(api, pool.id).get("customStatus") or {}).get("periods", 0)  # noqa: E731
    first = periods()
    wait_until(lambda: periods() >= first + 2, timeout=20, message="more sweep periods")
    assert api.call("POST", "admin/functions/capacity_expiry_starter", None, json={"input": ""}).status_code == 202
    assert instance_status(api, pool.id)["runtimeStatus"] in ("Running", "Pending", "ContinuedAsNew")
