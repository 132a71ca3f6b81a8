"""A target account listed once per scan-timer tick for every environment on it, and listed fast.

The timer is fired through the local host's admin endpoint (as Azure's admin
API fires a timer); the listing is compared with the storage SDK's own
against Azurite. No mocks.
"""

from __future__ import annotations

import re
import uuid

from azure.storage.blob import BlobServiceClient

from devhost.azurite import TARGET_ACCOUNT
from shared.desired_state.api import ResourceType
from shared.iac.embedded.listing import list_containers, list_queues
from shared.iac.embedded.observed import ObservedResource
from shared.inventory.model import ObservedItem
from shared.inventory.observers.account_reads import AccountReads, Basis
from tests.inventory.helpers import applied_environment, findings, names, tags_of, target_queues
from tests.provisioning.helpers import WRITE
from tests.support.host import wait_until

TICK = re.compile(r"inventory scan: \{'fresh': (\d+), 'stale': \d+, 'skipped': \d+\} \((\d+) account listing")


def test_one_timer_tick_lists_the_shared_account_once_and_finds_each_environments_own_drift(
    inventory_host, azurite, mint
):
    token = mint("tenant-a", scopes=WRITE)
    first, first_spec = applied_environment(inventory_host, token)
    second, _ = applied_environment(inventory_host, token)
    target_queues(azurite).delete_queue(names(first_spec)["queue"])
    stray = f"stray-{second[-8:]}"
    target_queues(azurite).create_queue(stray, metadata={"owner": "someone", **tags_of("tenant-a", second)})
    ticks_before = len(TICK.findall(inventory_host.log()))

    fired = inventory_host.request("POST", "admin/functions/inventory_scan", json={"input": ""})

    assert fired.status_code == 202, fired.text
    # Wait for this tick's findings, then for its summary line.
    wait_until(
        lambda: findings(inventory_host, token, first) and findings(inventory_host, token, second),
        timeout=120,
        message="the tick's findings",
    )
    ticks = wait_until(lambda: TICK.findall(inventory_host.log())[ticks_before:], message="the tick to end")
    assert all(int(listings) == 1 for _, listings in ticks)  # the session's environments share one account
    assert max(int(fresh) for fresh, _ in ticks) >= 2
    [missing] = findings(inventory_host, token, first)
    assert missing["kind"] == "missing" and missing["address"] == f"queue/{names(first_spec)['queue']}"
    [unexpected] = findings(inventory_host, token, second)
    assert unexpected["kind"] == "unexpected" and unexpected["address"] == f"queue/{stray}"


def test_a_shared_listing_serves_only_an_environment_whose_applied_state_is_still_the_ticks_basis():
    reads = AccountReads({("tenant-a", "dev"): Basis("sha256:one", "run-1")})

    assert reads.serves("tenant-a", "dev", digest="sha256:one", run_id="run-1", run_in_flight=False)
    # applied since; being changed; no basis read
    assert not reads.serves("tenant-a", "dev", digest="sha256:two", run_id="run-2", run_in_flight=False)
    assert not reads.serves("tenant-a", "dev", digest="sha256:one", run_id="run-1", run_in_flight=True)
    assert not reads.serves("tenant-a", "prod", digest="sha256:one", run_id="run-1", run_in_flight=False)
    assert not reads.serves("tenant-b", "dev", digest="sha256:one", run_id="run-1", run_in_flight=False)


def test_the_listing_reads_what_the_storage_sdk_reads_across_pages(azurite):
    connection = azurite.connection_string(TARGET_ACCOUNT)
    blobs = BlobServiceClient.from_connection_string(connection)
    queues = target_queues(azurite)
    prefix = f"lst{uuid.uuid4().hex[:8]}"
    blobs.create_container(f"{prefix}-public", public_access="container", metadata={"owner": "a", "Team": "B"})
    blobs.create_container(f"{prefix}-private")
    for n in range(3):
        queues.create_queue(f"{prefix}-q{n}", metadata={"n": str(n), **tags_of("tenant-a", "dev")})

    ours = sorted(
        (c.name, c.metadata, c.last_modified, c.public_access)
        for c in list_containers(blobs, page_size=2, prefix=prefix)
    )
    sdks = sorted(
        (c.name, c.metadata or {}, c.last_modified, str(c.public_access) if c.public_access else None)
        for c in blobs.list_containers(name_starts_with=prefix, include_metadata=True)
    )
    assert ours == sdks and len(ours) == 2 and ours[1][3] == "container"
    our_queues = {q.name: q.metadata for q in list_queues(queues, page_size=2, prefix=prefix)}
    sdk_queues = {q.name: q.metadata or {} for q in queues.list_queues(name_starts_with=prefix, include_metadata=True)}
    assert our_queues == sdk_queues and len(our_queues) == 3


def test_an_item_built_from_a_read_resource_equals_the_validated_item():
    resource = ObservedResource(
        type=ResourceType.QUEUE, name="orders", metadata={"owner": "a"}, tags=tags_of("tenant-a", "dev")
    )
    item = ObservedItem.trusted(
        resource.key, resource.address, resource.type_name, resource.name, resource.comparable, True, {}
    )

    assert item == ObservedItem.model_validate(item.model_dump())
    assert item.model_dump(mode="json") == {
        "key": "queue/orders",
        "address": "queue/orders",
        "type": "queue",
        "name": "orders",
        "state": {"metadata": {"owner": "a", **tags_of("tenant-a", "dev")}},
        "managed_here": True,
        "properties": {},
    }
    assert resource.management is not None and resource.owner == ("tenant-a", "dev")
    assert resource.model_copy(update={"name": "other"}).key == "queue/other"
