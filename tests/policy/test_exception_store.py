"""Policy exceptions where they are kept, and their effect on a verdict, on an in-memory store.

``tests/policy/test_exception_retention.py`` purges through the host's timer on Azurite; here the
exception store's own promises are held on :class:`tests.support.memory_storage.MemoryStorage`
(kept honest by ``tests/storage_contract/``): one exception per idempotency key, a key reused for
another body refused, a revocation recorded once however many race, a tenant's exceptions never
another's, paging in id order, the purge by end time; and an active exception from the store turns
the shipped bundle's denial into an allow that names it, until it is revoked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from shared.iac.model import Action
from shared.platform.errors import Conflict, NotFound
from shared.policy.evaluation import evaluate_rules
from shared.policy.exceptions import TABLE, ExceptionStore, NewPolicyException
from shared.policy.verdict import verdict_of
from tests.conftest import REPO
from tests.policy.test_bundles import bundle_from, change, facts
from tests.support.domain import install_clock, memory_store, unique
from tests.support.memory_storage import MemoryStorage

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryStorage, ExceptionStore]]:
    install_clock(monkeypatch)
    storage, clients = memory_store()
    yield storage, ExceptionStore(clients)
    clients.close()


def request(rule: str = "no-deletes-in-production", resource: str = "*", days: float = 30) -> NewPolicyException:
    return NewPolicyException(rule=rule, resource=resource, reason="CHG-1", expires_at=NOW + timedelta(days=days))


def test_one_exception_per_idempotency_key_and_a_reused_key_is_a_conflict(
    memory: tuple[MemoryStorage, ExceptionStore],
) -> None:
    _, store = memory
    tenant = unique("tenant")
    made, created = store.create(tenant, "prod", request(), "op", "studio", NOW, "key-1")
    again, created_again = store.create(tenant, "prod", request(), "op", "studio", NOW + timedelta(minutes=1), "key-1")

    assert (created, created_again) == (True, False)
    assert again == made
    with pytest.raises(Conflict):
        store.create(tenant, "prod", request(resource="queue/other"), "op", "studio", NOW, "key-1")
    with pytest.raises(Conflict):
        store.create(tenant, "staging", request(), "op", "studio", NOW, "key-1")
    other, _ = store.create(tenant, "prod", request(), "op", "studio", NOW, None)  # no key: a new one each time
    assert other.id != made.id
    assert {e.id for e in store.find(tenant)} == {made.id, other.id}


def test_a_tenants_exceptions_are_never_another_tenants(memory: tuple[MemoryStorage, ExceptionStore]) -> None:
    _, store = memory
    owner, stranger = unique("tenant"), unique("tenant")
    made, _ = store.create(owner, "prod", request(), "op", None, NOW, "shared-key")
    theirs, created = store.create(stranger, "prod", request(), "op", None, NOW, "shared-key")

    assert created and theirs.id != made.id
    with pytest.raises(NotFound):
        store.get(stranger, made.id)
    with pytest.raises(NotFound):
        store.revoke(stranger, made.id, "intruder", NOW)
    assert [e.id for e in store.find(stranger)] == [theirs.id]
    assert store.get(owner, made.id).revoked_at is None


def test_racing_revocations_record_the_first_and_every_caller_sees_it(
    memory: tuple[MemoryStorage, ExceptionStore],
) -> None:
    _, store = memory
    tenant = unique("tenant")
    made, _ = store.create(tenant, "prod", request(), "op", None, NOW, None)
    answers: list[tuple[str | None, str | None]] = []
    lock = threading.Lock()

    def revoke(n: int) -> None:
        revoked = store.revoke(tenant, made.id, f"op-{n}", NOW + timedelta(minutes=n))
        with lock:
            answers.append((revoked.revoked_by, revoked.revoked_at))

    threads = [threading.Thread(target=revoke, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    stored = store.get(tenant, made.id)
    assert stored.revoked_by is not None and stored.revoked_at is not None
    # Whoever wrote first stands, and every caller is answered that revocation: the losers of the race
    # read it again on their conflict, and those after it find it.
    assert len(answers) == 6 and set(answers) == {(stored.revoked_by, stored.revoked_at)}
    assert store.revoke(tenant, made.id, "late", NOW + timedelta(days=1)) == stored
    assert not stored.active_at(NOW)


def test_pages_of_one_environment_in_id_order(memory: tuple[MemoryStorage, ExceptionStore]) -> None:
    _, store = memory
    tenant = unique("tenant")
    made = [store.create(tenant, "prod", request(), "op", None, NOW, f"k-{n}")[0] for n in range(5)]
    store.create(tenant, "staging", request(), "op", None, NOW, "k-staging")

    seen: list[str] = []
    continuation: str | None = None
    while True:
        page, continuation = store.page(tenant, "prod", limit=2, continuation=continuation)
        seen += [e.id for e in page]
        if continuation is None:
            break
    assert seen == sorted(e.id for e in made)


def test_the_purge_removes_only_exceptions_ended_beyond_retention(memory: tuple[MemoryStorage, ExceptionStore]) -> None:
    storage, store = memory
    tenant = unique("tenant")

    def made_days_ago(days: float, lives: float) -> str:
        created = NOW - timedelta(days=days)
        when = NewPolicyException(rule="r", resource="*", reason="old", expires_at=created + timedelta(days=lives))
        return store.create(tenant, "prod", when, "op", None, created, None)[0].id

    made_days_ago(days=430, lives=30)  # ended 400 days ago: purged
    revoked = made_days_ago(days=400, lives=90)  # expires 310 days ago, but revoked 398 days ago
    store.revoke(tenant, revoked, "op", NOW - timedelta(days=398))
    recently = made_days_ago(days=40, lives=30)  # ended 10 days ago
    active = made_days_ago(days=1, lives=30)

    assert store.purge(retention_days=396, now=NOW) == 2
    assert store.purge(retention_days=396, now=NOW) == 0
    assert {row["RowKey"] for row in storage.rows(TABLE)} == {f"exc|{recently}", f"exc|{active}"}


def test_an_active_exception_lets_the_denied_change_through_and_its_revocation_ends_that(
    memory: tuple[MemoryStorage, ExceptionStore],
) -> None:
    _, store = memory
    tenant = "tenant-a"  # the plan facts' tenant
    bundle = bundle_from(REPO / "policies")
    plan = facts(change("legacy", Action.DELETE, {"team": "b"}))
    assert verdict_of("files", bundle.digest, evaluate_rules(bundle, plan), [], NOW).outcome == "deny"

    covering, _ = store.create(tenant, "demo", request(resource="queue/legacy"), "op", None, NOW, unique("k"))
    store.create(tenant, "demo", request(resource="queue/other"), "op", None, NOW, unique("k"))  # covers nothing here
    active = store.active(tenant, "demo", NOW)
    verdict = verdict_of("files", bundle.digest, evaluate_rules(bundle, plan), active, NOW)

    assert verdict.outcome == "allow"
    assert [use.id for use in verdict.exceptions] == [covering.id]

    store.revoke(tenant, covering.id, "op", NOW + timedelta(hours=1))
    later = NOW + timedelta(hours=2)
    again = verdict_of("files", bundle.digest, evaluate_rules(bundle, plan), store.active(tenant, "demo", later), later)
    assert again.outcome == "deny"
    expired = NOW + timedelta(days=31)  # and one past its expiry covers nothing either
    assert store.active(tenant, "demo", expired) == []
