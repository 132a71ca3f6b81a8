"""Declaring desired state: how a run begins, on an in-memory store, including declarations that race.

``tests/provisioning/test_runs_http.py`` declares through a host on Azurite; here
:class:`ProvisioningService` is called in process on :mod:`tests.support.memory_storage` (its tables,
blobs and queues held to Azurite's by ``tests/storage_contract/``). A declaration validates, saves
its specification once by content, claims its idempotency key and records a queued run with the
next number of its environment and its event, all or nothing; the same request again names the same
run and emits nothing; the same key with other desired state is refused; and racing declarations
never lose or double a run.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from shared.platform.auth.principal import PrincipalKind, Requester
from shared.platform.errors import InvalidInput
from shared.platform.targets import ProvisioningTarget
from shared.provisioning.runs import Run, RunState
from shared.provisioning.service import ProvisioningService
from shared.provisioning.settings import ProvisioningSettings
from shared.provisioning.sources import Declaration
from shared.provisioning.store import IdempotencyConflict, ProvisioningStore
from tests.support.domain import install_clock, memory_store, unique
from tests.support.memory_storage import MemoryStorage

TARGET = ProvisioningTarget.model_validate(
    {
        "Id": "local-storage",
        "Kind": "storage-account",
        "Region": "local",
        "Endpoint": "https://acct.blob.core.windows.net",
        "Credential": {"Kind": "managed-identity"},
    }
)
ALICE = Requester("alice", PrincipalKind.PERSON, "studio")


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryStorage, ProvisioningStore, ProvisioningService]]:
    install_clock(monkeypatch)
    storage, clients = memory_store()
    store = ProvisioningStore(clients, "/tests/provisioning/domain")
    yield storage, store, ProvisioningService(store, policy=ProvisioningSettings(), targets=[TARGET])
    clients.close()


def document(environment: str, queues: tuple[str, ...] = ("orders",)) -> dict[str, Any]:
    return {
        "environment": environment,
        "environment_class": "non-production",
        "target": "local-storage",
        "runner": "embedded",
        "resources": [{"type": "queue", "name": name, "metadata": {"team": "checkout"}} for name in queues],
    }


def declare(service: ProvisioningService, tenant: str, body: dict[str, Any], key: str) -> tuple[Run, bool]:
    specification, source = service.specification_from(tenant, Declaration.model_validate({"specification": body}))
    return service.declare(specification, source, key, ALICE)


Memory = tuple[MemoryStorage, ProvisioningStore, ProvisioningService]


def test_a_declaration_records_a_queued_run_its_specification_and_its_event(memory: Memory) -> None:
    storage, store, service = memory
    tenant = unique("tenant")

    run, new = declare(service, tenant, document("dev-1"), "key-1")

    assert new and (run.state, run.ordinal, run.requested_by) == (RunState.QUEUED, 1, "alice")
    saved = store.load_specification(tenant, "dev-1", run.specification_digest)
    assert saved.tenant == tenant and [r.name for r in saved.resources] == ["orders"]
    assert [event["type"] for event in _events(storage)] == ["factory.runtime-cloud.SpecificationDeclared"]


def test_the_same_request_again_names_the_same_run_and_emits_nothing(memory: Memory) -> None:
    storage, store, service = memory
    tenant = unique("tenant")
    first, first_new = declare(service, tenant, document("dev-1"), "key-1")
    again, again_new = declare(service, tenant, document("dev-1"), "key-1")

    assert (first_new, again_new) == (True, False)
    assert again.id == first.id and again.ordinal == first.ordinal
    assert [r.id for r in store.runs(tenant, "dev-1")] == [first.id]
    assert len(_events(storage)) == 1


def test_a_key_reused_for_other_desired_state_is_refused_and_records_nothing(memory: Memory) -> None:
    _, store, service = memory
    tenant = unique("tenant")
    declare(service, tenant, document("dev-1"), "key-1")
    with pytest.raises(IdempotencyConflict):
        declare(service, tenant, document("dev-1", queues=("orders", "invoices")), "key-1")
    with pytest.raises(InvalidInput):  # and an unknown target is refused before anything is written
        declare(service, tenant, {**document("dev-2"), "target": "nowhere"}, "key-2")
    assert len(store.runs(tenant, "dev-1")) == 1 and store.runs(tenant, "dev-2") == []


def test_racing_declarations_number_every_run_once_and_the_same_key_once(memory: Memory) -> None:
    storage, store, service = memory
    tenant = unique("tenant")
    racers = 6
    start = threading.Barrier(racers * 2)
    answers: list[tuple[str, bool]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def declare_as(key: str, queue: str) -> None:
        try:
            start.wait(10)
            run, new = declare(service, tenant, document("dev-1", (queue,)), key)
            with lock:
                answers.append((run.id, new))
        except BaseException as failure:  # surfaced below, where the test can fail on it
            with lock:
                failures.append(failure)

    threads = [threading.Thread(target=declare_as, args=(f"key-{n}", f"queue-{n}")) for n in range(racers)]
    threads += [threading.Thread(target=declare_as, args=("shared-key", "shared")) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    runs = store.runs(tenant, "dev-1")
    assert sorted(run.ordinal for run in runs) == list(range(1, racers + 2))  # every run numbered, none twice
    [shared] = [run for run in runs if run.idempotency_key == "shared-key"]
    same_key = [new for run_id, new in answers if run_id == shared.id]
    # Every racer of the key is answered the one run. At most one is told it created it; none may be: the
    # key's claimer can find the run already written by a racer that lost the claim (declare goes on to
    # create_run either way), and then both answer "found" (reported: the wake of older waiting runs is
    # then left to their own recheck).
    assert len(same_key) == racers and same_key.count(True) <= 1
    assert len(_events(storage)) == racers + 1  # one SpecificationDeclared per run


def _events(storage: MemoryStorage) -> list[dict[str, Any]]:
    """The public events queue's messages (base64, as the Functions queue trigger reads them)."""
    return [json.loads(base64.b64decode(text)) for text in storage.messages("runtime-cloud-events")]
