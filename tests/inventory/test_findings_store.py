"""Drift from comparison to recorded findings, on an in-memory store: what a scan writes and reads back.

``tests/inventory/test_comparison.py`` pins the comparison and ``test_findings_and_rules.py`` the pure
bookkeeping; the scan on a host runs on Azurite in ``test_drift_end_to_end.py``. Here the two meet
the inventory store on :class:`tests.support.memory_storage.MemoryStorage` (held to Azurite by
``tests/storage_contract/``) at the limits the store is built around: a scan with more findings than
one table transaction holds, a finding larger than one string property, the same drift seen again
as the same finding, and drift that went away resolved, with the scan's events committed with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from shared.inventory.comparison import compare
from shared.inventory.findings import FindingState, reconcile
from shared.inventory.model import ExpectedResource, Observation, ObservedItem
from shared.inventory.store import BATCH_LIMIT, CHUNK_CHARS, INVENTORY_TABLE, InventoryStore
from shared.platform.events.cloudevents import NewEvent
from shared.platform.events.outbox import OUTBOX_PREFIX
from shared.platform.storage.streams import stream_key
from tests.support.domain import install_clock, memory_store, unique
from tests.support.memory_storage import MAX_STRING_UNITS, MemoryStorage

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryStorage, InventoryStore]]:
    install_clock(monkeypatch)
    storage, clients = memory_store()
    yield storage, InventoryStore(clients, "/tests/inventory")
    clients.close()


def expected(name: str, owner: str = "a") -> ExpectedResource:
    return ExpectedResource(
        key=f"queue/{name}", address=f"queue/{name}", type="queue", name=name, state={"metadata": {"owner": owner}}
    )


def observed(name: str, owner: str = "a") -> ObservedItem:
    return ObservedItem(
        key=f"queue/{name}",
        address=f"queue/{name}",
        type="queue",
        name=name,
        state={"metadata": {"owner": owner}},
        managed_here=True,  # tagged as this environment's: one nobody declared is unexpected
    )


def scan(
    store: InventoryStore,
    tenant: str,
    environment: str,
    wanted: list[ExpectedResource],
    seen: list[ObservedItem],
    at: datetime,
) -> None:
    """What a scan does with its comparison: reconcile against the open findings, commit them with an event."""
    observation = Observation(observer="test", target="local", observed_at=at.isoformat(), items=seen)
    drift = compare(wanted, observation)
    changes = reconcile(tenant, environment, store.findings(tenant, environment, FindingState.OPEN), drift, [], at)
    event = NewEvent("InventoryScanned", f"{tenant}/{environment}", tenant, {"drift": len(drift)})
    store.commit(tenant, environment, [], [event], bulk=[store.finding_operation(f) for f in changes.written])


def test_a_scan_with_more_findings_than_one_transaction_holds_records_them_all_once(
    memory: tuple[MemoryStorage, InventoryStore],
) -> None:
    storage, store = memory
    tenant, environment = unique("tenant"), "prod"
    count = 2 * BATCH_LIMIT + 30
    wanted = [expected(f"q{n:03d}") for n in range(count)]

    scan(store, tenant, environment, wanted, [], NOW)  # nothing there: every queue is missing

    findings = store.findings(tenant, environment)
    assert len(findings) == count and {f.kind.value for f in findings} == {"missing"}
    assert len({f.id for f in findings}) == count
    partition = stream_key(tenant, environment)
    events = [
        r
        for r in storage.rows(INVENTORY_TABLE)
        if r["PartitionKey"] == partition and r["RowKey"].startswith(OUTBOX_PREFIX)
    ]
    assert [json.loads(r["Event"])["data"]["drift"] for r in events] == [count]


def test_the_same_drift_seen_again_is_the_same_finding_and_drift_gone_is_resolved(
    memory: tuple[MemoryStorage, InventoryStore],
) -> None:
    _, store = memory
    tenant, environment = unique("tenant"), "prod"
    wanted = [expected("orders"), expected("invoices"), expected("audit")]
    there = [observed("orders", owner="b"), observed("audit"), observed("stray")]

    scan(store, tenant, environment, wanted, there, NOW)
    first = {f.address: f for f in store.findings(tenant, environment)}
    scan(store, tenant, environment, wanted, there, NOW + timedelta(hours=1))
    second = {f.address: f for f in store.findings(tenant, environment)}

    assert sorted(first) == ["queue/invoices", "queue/orders", "queue/stray"]
    assert {a: (f.kind.value, f.times_seen) for a, f in second.items()} == {
        "queue/invoices": ("missing", 2),
        "queue/orders": ("changed", 2),
        "queue/stray": ("unexpected", 2),
    }
    assert all(second[a].id == first[a].id for a in first)

    fixed = [observed("orders"), observed("invoices"), observed("audit")]
    scan(store, tenant, environment, wanted, fixed, NOW + timedelta(hours=2))
    assert store.findings(tenant, environment, FindingState.OPEN) == []
    resolved = store.findings(tenant, environment, FindingState.RESOLVED)
    assert sorted(f.address for f in resolved) == sorted(first)
    assert all(f.resolved_at == (NOW + timedelta(hours=2)).isoformat() for f in resolved)


def test_a_finding_larger_than_one_string_property_is_chunked_and_read_back_whole(
    memory: tuple[MemoryStorage, InventoryStore],
) -> None:
    storage, store = memory
    tenant, environment = unique("tenant"), "prod"
    large = {"metadata": {f"key{n}": "v" * 500 for n in range(200)}}  # ~100 kB of JSON
    wanted = [ExpectedResource(key="queue/big", address="queue/big", type="queue", name="big", state=large)]
    there = [ObservedItem(key="queue/big", address="queue/big", type="queue", name="big", state={"metadata": {}})]

    scan(store, tenant, environment, wanted, there, NOW)

    [finding] = store.findings(tenant, environment)
    assert finding.expected == large
    [row] = [r for r in storage.rows(INVENTORY_TABLE) if r["RowKey"] == f"finding|{finding.id}"]
    chunks = [name for name in row if name.startswith("Document")]
    assert len(chunks) >= 3 and all(len(row[name]) <= CHUNK_CHARS < MAX_STRING_UNITS for name in chunks)
