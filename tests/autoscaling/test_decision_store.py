"""The autoscaler's memory and decisions where they are kept, on an in-memory store: one decision per race.

``tests/autoscaling/test_decide.py`` holds the pure decision; the scaler on a host is tested on
Azurite elsewhere. Here the store's promises the scaler builds on, on
:class:`tests.support.memory_storage.MemoryStorage` (``tests/storage_contract/`` keeps it honest):
every evaluation writes the pool's state row conditionally on the ETag it read, so of evaluations
that read the same state exactly one commits its decision and its event, and the others commit
nothing; decisions list newest first and page back; old ones are purged past the number kept.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from shared.autoscaling import store as rows
from shared.autoscaling.decide import Direction, LastDecision, Sample
from shared.autoscaling.records import DecisionRecord, Phase, ScalerState
from shared.capacity.settings import CapacitySettings
from shared.capacity.store import CapacityStore
from shared.platform.errors import ConcurrencyConflict
from shared.platform.events.cloudevents import NewEvent
from shared.platform.events.outbox import OUTBOX_PREFIX
from tests.support.domain import install_clock, memory_store, unique
from tests.support.memory_storage import MemoryStorage

OWNER = "platform"


@pytest.fixture
def capacity(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryStorage, CapacityStore]]:
    install_clock(monkeypatch)
    storage, clients = memory_store()
    yield storage, CapacityStore.from_clients(clients, CapacitySettings(), "/tests/autoscaling")
    clients.close()


def decision(pool: str, number: int) -> DecisionRecord:
    at = f"2026-01-01T00:00:{number % 60:02d}.000000Z"
    return DecisionRecord(
        pool=pool,
        number=number,
        direction=Direction.UP,
        from_size=number,
        to_size=number + 1,
        reason="denials",
        phase=Phase.PROVISIONING,
        environment=f"pool-{pool}",
        decided_at=at,
        updated_at=at,
    )


def decided(state: ScalerState, pool: str, at: float) -> tuple[ScalerState, DecisionRecord, NewEvent]:
    """What an evaluation that decides writes: the next number, the decision in flight, its event."""
    number = state.number + 1
    record = decision(pool, number)
    event = NewEvent("PoolScalingDecided", f"pools/{pool}", OWNER, {"number": number})
    return replace(state, number=number, active=number, last=LastDecision(at, Direction.UP)), record, event


def stored_rows(storage: MemoryStorage, pool: str, prefix: str) -> list[dict[str, Any]]:
    key = rows.partition(OWNER, pool)
    return [r for r in storage.rows("CapacityPools") if r["PartitionKey"] == key and r["RowKey"].startswith(prefix)]


def test_of_two_evaluations_on_one_read_only_the_first_commits_its_decision_and_event(
    capacity: tuple[MemoryStorage, CapacityStore],
) -> None:
    storage, store = capacity
    pool = unique("pool")
    rows.commit(store, OWNER, pool, ScalerState(samples=[Sample(1.0, 1, 2)]))  # a first evaluation: a hold
    first_read = rows.read_state(store, OWNER, pool)
    second_read = rows.read_state(store, OWNER, pool)

    state, record, event = decided(first_read, pool, 2.0)
    committed, sent = rows.commit(store, OWNER, pool, state, [record], [event])
    late_state, late_record, late_event = decided(second_read, pool, 2.5)
    with pytest.raises(ConcurrencyConflict):
        rows.commit(store, OWNER, pool, late_state, [late_record], [late_event])

    assert [event.type for event in sent] == ["PoolScalingDecided"]
    now = rows.read_state(store, OWNER, pool)
    assert (now.number, now.active, now.etag) == (1, 1, committed.etag)
    assert now.last == LastDecision(2.0, Direction.UP)
    assert rows.read_decision(store, OWNER, pool, 1) == record
    assert len(stored_rows(storage, pool, rows.DECISION_PREFIX)) == 1
    assert len(stored_rows(storage, pool, OUTBOX_PREFIX)) == 1  # the loser's event went nowhere


def test_two_first_evaluations_of_a_pool_create_its_state_once(capacity: tuple[MemoryStorage, CapacityStore]) -> None:
    _, store = capacity
    pool = unique("pool")
    rows.commit(store, OWNER, pool, ScalerState(samples=[Sample(1.0, 0, 2)]))
    with pytest.raises(ConcurrencyConflict):  # it read "no row" too: its create meets the first one's row
        rows.commit(store, OWNER, pool, ScalerState(samples=[Sample(1.1, 0, 2)]))
    assert rows.read_state(store, OWNER, pool).samples == [Sample(1.0, 0, 2)]


def test_racing_evaluations_take_one_decision(capacity: tuple[MemoryStorage, CapacityStore]) -> None:
    storage, store = capacity
    pool = unique("pool")
    rows.commit(store, OWNER, pool, ScalerState())
    racers = 6
    all_read = threading.Barrier(racers)
    outcomes: list[str] = []
    lock = threading.Lock()

    def evaluate(n: int) -> None:
        state = rows.read_state(store, OWNER, pool)
        all_read.wait(10)  # every racer has read the same state before any commits
        new_state, record, event = decided(state, pool, 10.0 + n)
        try:
            rows.commit(store, OWNER, pool, new_state, [record], [event])
            outcome = "decided"
        except ConcurrencyConflict:
            outcome = "lost"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=evaluate, args=(n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["decided"] + ["lost"] * (racers - 1)
    assert rows.read_state(store, OWNER, pool).number == 1
    assert len(stored_rows(storage, pool, rows.DECISION_PREFIX)) == 1
    assert len(stored_rows(storage, pool, OUTBOX_PREFIX)) == 1


def test_the_state_row_keeps_at_most_max_samples(capacity: tuple[MemoryStorage, CapacityStore]) -> None:
    _, store = capacity
    pool = unique("pool")
    samples = [Sample(float(n), n % 5, 8, n % 2) for n in range(rows.MAX_SAMPLES + 50)]
    rows.commit(store, OWNER, pool, ScalerState(samples=samples, sampled_at="2026-01-01T00:00:00.000000Z"))
    read = rows.read_state(store, OWNER, pool)
    assert read.samples == samples[-rows.MAX_SAMPLES :]
    assert read.sampled_at == "2026-01-01T00:00:00.000000Z"


def test_decisions_list_newest_first_page_back_and_are_purged_past_the_number_kept(
    capacity: tuple[MemoryStorage, CapacityStore],
) -> None:
    storage, store = capacity
    pool = unique("pool")
    state = ScalerState()
    for n in range(1, 13):
        state, record, event = decided(rows.read_state(store, OWNER, pool) if n > 1 else state, pool, float(n))
        state, _ = rows.commit(store, OWNER, pool, state, [record], [event])

    newest = rows.list_decisions(store, OWNER, pool, limit=5, before=None)
    assert [d.number for d in newest] == [12, 11, 10, 9, 8]
    older = rows.list_decisions(store, OWNER, pool, limit=5, before=newest[-1].number)
    assert [d.number for d in older] == [7, 6, 5, 4, 3]

    assert rows.purge_decisions(store, OWNER, pool, newest=12, keep=4) == 8
    assert rows.purge_decisions(store, OWNER, pool, newest=12, keep=4) == 0  # again: nothing left to purge
    assert [d.number for d in rows.list_decisions(store, OWNER, pool, limit=50, before=None)] == [12, 11, 10, 9]
    assert len(stored_rows(storage, pool, rows.DECISION_PREFIX)) == 4
