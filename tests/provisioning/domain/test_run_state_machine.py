"""A run's state machine where it is kept: the run store, its ETags, its events and supersession, in memory.

The orchestrator's decisions are replayed in ``tests/orchestrations/``; the steps that move a run
run through the host elsewhere. Here the run's own rules are held to on an in-memory store
(:mod:`tests.support.memory_storage`, kept honest by ``tests/storage_contract/``): which moves are
allowed, that a declaration is numbered and recorded once, that a state change and its events
commit together or not at all, that a stale read cannot overwrite a decision, and that of a racing
approval and a supersession exactly one wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from shared.platform.errors import ConcurrencyConflict
from shared.platform.events.outbox import OUTBOX_PREFIX
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.streams import stream_key
from shared.provisioning import events
from shared.provisioning.runs import (
    ALLOWED,
    FINAL_STATES,
    MAX_DETAIL_CHARS,
    Decision,
    FailureReason,
    InvalidTransition,
    Run,
    RunState,
    SourceInfo,
)
from shared.provisioning.store import RUNS_TABLE, IdempotencyConflict, ProvisioningStore
from shared.provisioning.supersession import newer_run, supersede_awaiting_approval
from tests.support.domain import install_clock, memory_store, unique
from tests.support.memory_storage import MemoryStorage

SOURCE = "/tests/provisioning/domain"


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryStorage, StorageClients]]:
    install_clock(monkeypatch)
    storage, clients = memory_store()
    yield storage, clients
    clients.close()


@pytest.fixture
def store(memory: tuple[MemoryStorage, StorageClients]) -> ProvisioningStore:
    return ProvisioningStore(memory[1], SOURCE)


def declared(tenant: str, environment: str, key: str | None = None, digest: str = "sha256:spec") -> Run:
    key = key or unique("key")
    return Run(
        id=f"run-{key}",
        tenant=tenant,
        environment=environment,
        environment_class="dev",
        target="local-storage",
        runner="embedded",
        state=RunState.QUEUED,
        ordinal=0,
        requested_by="someone",
        idempotency_key=key,
        specification_digest=digest,
        source=SourceInfo(kind="inline"),
        created_at="2026-01-01T00:00:00+00:00",
    )


def outbox_rows(storage: MemoryStorage, tenant: str, environment: str) -> list[dict[str, Any]]:
    partition = stream_key(tenant, environment)
    return [
        row
        for row in storage.rows(RUNS_TABLE)
        if row["PartitionKey"] == partition and row["RowKey"].startswith(OUTBOX_PREFIX)
    ]


def awaiting_approval(store: ProvisioningStore, run: Run) -> Run:
    """Move ``run`` through planning to awaiting approval, as the plan step does."""
    for state in (RunState.PLANNING, RunState.AWAITING_APPROVAL):
        current, etag = store.run_with_etag(run.tenant, run.environment, run.id)
        store.save_run(current.moved_to(state, plan_digest="sha256:plan"), etag)
    return store.run_with_etag(run.tenant, run.environment, run.id)[0]


# -- the transitions ----------------------------------------------------------------------------


def test_only_the_allowed_moves_are_made_and_a_final_state_is_final() -> None:
    run = declared("tenant-a", "dev-1")
    for source in RunState:
        for target in RunState:
            start = run.model_copy(update={"state": source})
            if target in ALLOWED.get(source, frozenset()):
                moved = start.moved_to(target, note="why")
                assert (moved.state, moved.timeline[-1].state, moved.timeline[-1].note) == (target, target, "why")
            else:
                with pytest.raises(InvalidTransition):
                    start.moved_to(target)
    assert all(not ALLOWED.get(final) for final in FINAL_STATES)
    assert {state for state in RunState if state not in FINAL_STATES} == set(ALLOWED)


def test_a_failure_detail_is_bounded_to_fit_the_runs_row() -> None:
    run = declared("tenant-a", "dev-1").model_copy(update={"state": RunState.PLANNING})
    failed = run.moved_to(RunState.FAILED, note="n" * 10_000, failure_detail="d" * 100_000)
    assert failed.failure_detail is not None and failed.failure_detail.startswith("d" * MAX_DETAIL_CHARS)
    assert len(failed.failure_detail) < 2 * MAX_DETAIL_CHARS and len(failed.timeline[-1].note) < 2 * MAX_DETAIL_CHARS
    assert len(failed.model_dump_json()) < 32 * 1024  # the run's document is one string property


# -- the store ----------------------------------------------------------------------------------


def test_a_declaration_is_numbered_recorded_once_and_its_event_commits_with_it(
    store: ProvisioningStore, memory: tuple[MemoryStorage, StorageClients]
) -> None:
    storage = memory[0]
    tenant, environment = unique("tenant"), "dev-1"
    first = declared(tenant, environment)
    second = declared(tenant, environment)

    created, emitted = store.create_run(first, [events.specification_declared(first)])
    again, emitted_again = store.create_run(first, [events.specification_declared(first)])
    later, _ = store.create_run(second, [events.specification_declared(second)])

    assert (created.ordinal, again.ordinal, later.ordinal) == (1, 1, 2)
    assert len(emitted) == 1 and emitted_again == []  # the same declaration: no second run, no second event
    assert [event.sequence for event in emitted] == [1]
    env = store.environment(tenant, environment)
    assert (env.get("RunCounter"), env.get("DeclaredRunId")) == (2, second.id)
    recorded = outbox_rows(storage, tenant, environment)
    assert [json.loads(row["Event"])["sequence"] for row in recorded] == [1, 2]
    assert [r.id for r in store.runs(tenant, environment)] == [first.id, second.id]
    # Dispatched at once: both events on the public queue and the inventory's inbox.
    assert len(storage.messages("runtime-cloud-events")) == 2
    assert len(storage.messages("inventory-inbox")) == 2


def test_an_idempotency_key_claims_once_and_refuses_other_desired_state(store: ProvisioningStore) -> None:
    tenant = unique("tenant")
    assert store.claim_idempotency_key(tenant, "k-1", "run-1", "dev-1", "sha256:a")
    assert not store.claim_idempotency_key(tenant, "k-1", "run-1", "dev-1", "sha256:a")  # the same request again
    with pytest.raises(IdempotencyConflict):
        store.claim_idempotency_key(tenant, "k-1", "run-1", "dev-1", "sha256:b")
    with pytest.raises(IdempotencyConflict):
        store.claim_idempotency_key(tenant, "k-1", "run-1", "dev-2", "sha256:a")
    assert store.environment_of_run(tenant, "run-1") == "dev-1"
    assert store.environments(tenant) == ["dev-1"]


def test_a_save_from_a_stale_read_is_a_conflict_and_writes_nothing(
    store: ProvisioningStore, memory: tuple[MemoryStorage, StorageClients]
) -> None:
    storage = memory[0]
    tenant, environment = unique("tenant"), "dev-1"
    run, _ = store.create_run(declared(tenant, environment), [])
    current, etag = store.run_with_etag(tenant, environment, run.id)
    store.save_run(current.moved_to(RunState.PLANNING), etag)
    events_before = len(outbox_rows(storage, tenant, environment))

    failed = current.moved_to(RunState.FAILED)  # decided on the stale read: queued -> failed
    with pytest.raises(ConcurrencyConflict):
        store.save_run(failed, etag, [events.specification_declared(failed)])

    assert store.run_with_etag(tenant, environment, run.id)[0].state is RunState.PLANNING
    assert len(outbox_rows(storage, tenant, environment)) == events_before  # the event went with the write


def test_runs_page_by_key_order_and_only_unfinished_runs_are_listed_unfinished(store: ProvisioningStore) -> None:
    tenant = unique("tenant")
    runs = [store.create_run(declared(tenant, environment), [])[0] for environment in ("a", "b", "b", "c")]
    current, etag = store.run_with_etag(tenant, "b", runs[1].id)
    store.save_run(current.moved_to(RunState.CANCELLED), etag)

    seen: list[str] = []
    continuation: str | None = None
    while True:
        page, continuation = store.runs_page(tenant, None, None, limit=3, continuation=continuation)
        assert len(page) <= 3
        seen += [run.id for run in page]
        if continuation is None:
            break
    by_key = sorted(runs, key=lambda run: (stream_key(tenant, run.environment), f"run|{run.id}"))
    assert seen == [run.id for run in by_key]
    assert [run.id for run in store.runs_page(tenant, "b", RunState.QUEUED, limit=10, continuation=None)[0]] == [
        runs[2].id
    ]
    unfinished = {run.id for run in store.unfinished_runs() if run.tenant == tenant}
    assert unfinished == {runs[0].id, runs[2].id, runs[3].id}


# -- supersession -------------------------------------------------------------------------------


def test_a_newer_declaration_supersedes_a_run_awaiting_approval(store: ProvisioningStore) -> None:
    tenant, environment = unique("tenant"), "dev-1"
    older, _ = store.create_run(declared(tenant, environment), [])
    awaiting_approval(store, older)
    newer, _ = store.create_run(declared(tenant, environment, digest="sha256:newer"), [])

    assert newer_run(store, older) is not None
    assert supersede_awaiting_approval(store, tenant, environment, newer.id) == [older.id]
    decided = store.find_run(tenant, environment, older.id)
    assert decided is not None and decided.decision is not None
    assert (decided.decision.decision, decided.state) == ("superseded", RunState.AWAITING_APPROVAL)
    assert supersede_awaiting_approval(store, tenant, environment, newer.id) == []  # decided once


def test_an_approval_recorded_first_wins_over_a_supersession(store: ProvisioningStore) -> None:
    tenant, environment = unique("tenant"), "dev-1"
    older, _ = store.create_run(declared(tenant, environment), [])
    stale = awaiting_approval(store, older)
    _, etag = store.run_with_etag(tenant, environment, older.id)
    approval = Decision(decision="approved", by="approver", at="2026-01-01T00:00:00+00:00", plan_digest="sha256:plan")
    store.save_run(stale.model_copy(update={"decision": approval}), etag)
    newer, _ = store.create_run(declared(tenant, environment, digest="sha256:newer"), [])

    assert supersede_awaiting_approval(store, tenant, environment, newer.id) == []
    kept = store.find_run(tenant, environment, older.id)
    assert kept is not None and kept.decision is not None and kept.decision.decision == "approved"
    # And a supersession written from a read before the approval cannot overwrite it.
    with pytest.raises(ConcurrencyConflict):
        store.save_run(stale.model_copy(update={"decision": approval.model_copy(update={"decision": "x"})}), etag)


def test_a_cancelled_or_invalid_newer_run_supersedes_nothing(store: ProvisioningStore) -> None:
    tenant, environment = unique("tenant"), "dev-1"
    older, _ = store.create_run(declared(tenant, environment), [])
    older = awaiting_approval(store, older)
    newer, _ = store.create_run(declared(tenant, environment), [])
    current, etag = store.run_with_etag(tenant, environment, newer.id)
    store.save_run(current.moved_to(RunState.CANCELLED, failure_reason=FailureReason.CANCELLED), etag)

    assert newer_run(store, older) is None
