"""The storm: 32 concurrent workers on a 20-slot pool; never more than exists, nothing leaked.

Workers of four tenants (two editions) acquire with short TTLs, renew some
leases, release most and abandon the rest to expiry: 600 operations by
default, 2,500 in the full storm (``make test-storm``, ``-m storm``).
Afterwards the checks read the pool's *lease history* (the grant rows beside
the slot rows) and the fencing tokens the workers were given, never the
service's own view of how much is held:

- every grant a worker received is in the history with its slot and token,
  and the history holds no grant nobody received;
- each slot's fencing tokens run 1, 2, 3... in grant order, and one slot's
  validity intervals never overlap;
- sweeping over all intervals, at no instant were more than 20 leases valid,
  and no tenant ever held more than its edition allows;
- every grant ended: released (the worker said so) or expired (by its
  ``ExpiresAt``), and the outbox announced each ending exactly once;
- no acquire was refused 429 while the tenant held fewer granted leases than
  its quota: during every such request the tenant held its limit (its own
  acquires still in flight are not held leases).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
from azure.data.tables import TableServiceClient

from shared.capacity.api import parse_stamp
from tests.capacity.conftest import PROBLEM, CapacityApi
from tests.support.host import wait_until
from tests.support.lease_invariants import StormTally, assert_storm_invariants

POOL_SIZE = 20
CLIENTS = 32  # eight per tenant: more than a small edition's 4 and, together, more than the 20 slots
SLOTS_PER_SHARD = 4  # five shards: grants and releases in one shard contend on its outbox sequence row
LIMITS = {"big": 8, "small": 4}  # 2 x 8 + 2 x 4 = 24 > 20: both the quotas and the pool bind


@dataclass(frozen=True)
class StormSize:
    """How long the storm blows: it stops at ``operations`` (or at ``time_limit_seconds`` on a slow machine)."""

    operations: int
    time_limit_seconds: float
    at_least: int  # operations that must have happened for the checks to mean anything


# The full storm (about a minute and a half here) runs under ``-m storm`` (``make test-storm``);
# the default one has the same clients, pool and quotas, so the same contention, for fewer operations.
FULL = StormSize(operations=2500, time_limit_seconds=70, at_least=1000)
DEFAULT = StormSize(operations=600, time_limit_seconds=20, at_least=200)


def worker(
    api: CapacityApi, pool: Any, tenant: str, tally: StormTally, deadline: float, seed: int, operations: int
) -> None:
    rng = random.Random(seed)
    session = requests.Session()
    token = api.worker(tenant)
    headers = {"Authorization": f"Bearer {token}"}

    def call(method: str, path: str, body: Any = None) -> requests.Response:
        return session.request(method, api.host.url(path), headers=headers, json=body, timeout=30)

    while time.monotonic() < deadline and tally.operations < operations:
        lease_id = f"storm-{uuid.uuid4().hex[:16]}"
        sent = datetime.now(UTC)
        answer = call(
            "POST",
            "runtime-cloud/leases",
            {
                "kind": pool.kind,
                "region": pool.region,
                "purpose": "sandbox",
                "holder": f"{tenant}-w{seed}",
                "ttl_seconds": rng.choice((1, 2, 2, 3)),
                "lease_id": lease_id,
            },
        )
        if answer.status_code == 429:
            with tally.lock:
                tally.quota_refusals.append((tenant, sent, datetime.now(UTC)))
        if answer.status_code != 201:
            problem = answer.json()["type"].removeprefix(PROBLEM)
            tally.count(f"acquire {answer.status_code} {problem}")
            time.sleep(rng.uniform(0.01, 0.06))  # jittered back-off (shorter than Retry-After, to keep the storm up)
            continue
        tally.count("acquire 201")
        lease = answer.json()
        with tally.lock:
            tally.grants[lease_id] = (lease["slot"], lease["fencing_token"], lease["tenant"])
        for _ in range(rng.choice((0, 0, 1, 2))):
            time.sleep(rng.uniform(0.05, 0.3))
            renewed = call("POST", f"runtime-cloud/leases/{lease_id}/renew", {"ttl_seconds": rng.choice((1, 2))})
            tally.count(f"renew {renewed.status_code}")
            if renewed.status_code == 409:  # the lease is lost: a worker stops here
                assert renewed.json()["type"] == PROBLEM + "lease-lost"
                with tally.lock:
                    tally.lost_on_renew.add(lease_id)
                break
            assert renewed.status_code == 200, renewed.text
            assert renewed.json()["fencing_token"] == lease["fencing_token"]
        else:
            time.sleep(rng.uniform(0.0, 0.2))
            if rng.random() < 0.15:
                with tally.lock:
                    tally.abandoned.add(lease_id)  # crashed worker: never releases, the lease expires
                continue
            released = call("DELETE", f"runtime-cloud/leases/{lease_id}")
            tally.count(f"release {released.status_code}")
            while released.status_code == 503:  # lost every race in a busy shard: retry, as a worker does
                time.sleep(rng.uniform(0.05, 0.2))
                released = call("DELETE", f"runtime-cloud/leases/{lease_id}")
                tally.count(f"release {released.status_code}")
            assert released.status_code == 204, released.text
            with tally.lock:
                tally.released.add(lease_id)
                tally.release_answered[lease_id] = datetime.now(UTC)


def storm_rows(azurite: Any, pool_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pool's grant history and its outbox events, straight from the table."""
    table = TableServiceClient.from_connection_string(azurite.connection_string()).get_table_client("CapacitySlots")
    rows = list(
        table.query_entities(
            "PartitionKey ge @low and PartitionKey lt @high", parameters={"low": f"{pool_id}|", "high": f"{pool_id}}}"}
        )
    )
    history = [dict(r) for r in rows if r["RowKey"].startswith("grant|")]
    events = [json.loads(r["Event"]) for r in rows if r["RowKey"].startswith("~outbox|")]
    return history, events


def test_storm_never_over_grants_and_accounts_for_every_grant(capacity, azurite):
    storm_never_over_grants_and_accounts_for_every_grant(capacity, azurite, DEFAULT)


@pytest.mark.storm
def test_full_storm_never_over_grants_and_accounts_for_every_grant(capacity, azurite):
    storm_never_over_grants_and_accounts_for_every_grant(capacity, azurite, FULL)


def storm_never_over_grants_and_accounts_for_every_grant(capacity: CapacityApi, azurite: Any, size: StormSize) -> None:
    pool = capacity.create_pool(size=POOL_SIZE, max=POOL_SIZE, slots_per_shard=SLOTS_PER_SHARD)
    tenants = {}
    for limit in LIMITS.values():
        for tenant in capacity.tenants_with_limit("sandbox", limit, count=2):
            tenants[tenant] = limit
    tally = StormTally()
    deadline = time.monotonic() + size.time_limit_seconds
    with ThreadPoolExecutor(max_workers=CLIENTS) as clients:
        futures = [
            clients.submit(worker, capacity, pool, tenant, tally, deadline, seed, size.operations)
            for seed, tenant in enumerate(list(tenants) * (CLIENTS // len(tenants)))
        ]
        for future in futures:
            future.result()
    # Every worker has stopped, so no lease is renewed any more: wait until the last one has expired.
    last_expiry = max(parse_stamp(h["ExpiresAt"]) for h in storm_rows(azurite, pool.id)[0])
    wait_until(lambda: datetime.now(UTC) > last_expiry, timeout=30, interval=0.1, message="every lease to end")

    history, events = storm_rows(azurite, pool.id)
    now = datetime.now(UTC)
    print(f"storm: {tally.operations} operations, {len(history)} grants: {dict(tally.answers)}")

    # Both refusals happened, and were told apart.
    assert tally.operations >= size.at_least, tally.answers  # the storm happened (size.operations unless capped)
    assert tally.answers["acquire 429 quota-exceeded"] > 0, tally.answers
    assert tally.answers["acquire 503 capacity-unavailable"] > 0, tally.answers
    assert not [k for k in tally.answers if k.startswith("acquire 5") and "capacity-unavailable" not in k]

    assert_storm_invariants(history, events, tally, tenants, POOL_SIZE, now)
