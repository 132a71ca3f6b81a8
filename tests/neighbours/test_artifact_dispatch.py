"""The artifacts' outbox and its dispatcher, in process, against Azurite and KnowledgeHost's stand-in (a
real HTTP server speaking its contract): the order per environment, what is dead-lettered at once, and
that an artifact is recorded once whoever records it again.

The host-level behaviour (runs, retries, a killed host, restores) is in test_artifact_mirror.py and
test_receipts_from_mirror.py."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from urllib.parse import unquote

import pytest

from devhost.azurite import Azurite
from shared.platform.events.artifact_dispatch import ArtifactPublisher, PublishPolicy
from shared.platform.events.artifact_outbox import ArtifactOutbox, PendingArtifact, artifact_id
from shared.platform.neighbours.knowledge_host import Artifact, KnowledgeHost
from shared.platform.neighbours.settings import KnowledgeHostSettings
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.platform.storage.resources import ensure_resources
from tests.provisioning.helpers import unique
from tests.support.neighbours import KnowledgeHostStandIn

CONTAINER = "receipts"


@pytest.fixture
def storage(azurite: Azurite) -> StorageClients:
    clients = clients_from_connection_string(azurite.connection_string())
    ensure_resources(clients)
    return clients


@pytest.fixture
def stand_in() -> Iterator[KnowledgeHostStandIn]:
    with KnowledgeHostStandIn() as knowledge_host:
        yield knowledge_host


def publisher(storage: StorageClients, stand_in: KnowledgeHostStandIn, attempts: int = 5) -> ArtifactPublisher:
    client = KnowledgeHost(KnowledgeHostSettings.model_validate({"BaseUrl": stand_in.url, "Retries": 0}))
    return ArtifactPublisher(ArtifactOutbox(storage), storage, client, PublishPolicy(attempts, backoff_seconds=0))


def receipt(storage: StorageClients, tenant: str, environment: str, run_id: str, text: str) -> PendingArtifact:
    """A receipt-like blob written as the host writes one, and the entry the mirror records for it."""
    name = f"{tenant}/{environment}/{run_id}/plan.json"
    storage.blobs.get_container_client(CONTAINER).upload_blob(name, text.encode(), overwrite=True)
    return PendingArtifact(
        artifact_id=artifact_id(tenant, environment, run_id, "plan-receipt"),
        kind="plan-receipt",
        tenant=tenant,
        environment=environment,
        run_id=run_id,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        blob=(CONTAINER, name),
    )


def put_order(stand_in: KnowledgeHostStandIn) -> list[str]:
    return [unquote(r.path.rsplit("/", 1)[1]) for r in stand_in.requests if r.method == "PUT"]


def test_a_streams_artifacts_go_in_the_order_recorded_and_a_failed_one_holds_the_rest(storage, stand_in):
    tenant, environment = "tenant-a", unique("order")
    outbox = ArtifactOutbox(storage)
    recorded = [receipt(storage, tenant, environment, f"run-{n}", f'{{"n":{n}}}') for n in range(3)]
    for artifact in recorded:
        assert outbox.record(artifact) is True
    stand_in.failing(503, times=1)

    first = publisher(storage, stand_in).publish_pending()
    assert recorded[0].artifact_id in first.failed and not first.published
    assert len(put_order(stand_in)) == 1  # the ones after it waited

    publisher(storage, stand_in).publish_pending()
    ids = [artifact.artifact_id for artifact in recorded]
    assert put_order(stand_in) == [ids[0], *ids]
    assert all(stand_in.created[artifact] == 1 for artifact in ids)
    assert [outbox.record_of(tenant, environment, a)["State"] for a in ids] == ["published"] * 3


def test_an_artifact_is_recorded_once_whoever_records_it_again(storage, stand_in):
    tenant, environment = "tenant-a", unique("once")
    outbox = ArtifactOutbox(storage)
    artifact = receipt(storage, tenant, environment, "run-1", '{"once":true}')

    assert [outbox.record(artifact), outbox.record(artifact)] == [True, False]
    publisher(storage, stand_in).publish_pending()
    assert stand_in.puts[artifact.artifact_id] == 1 and stand_in.created[artifact.artifact_id] == 1


def test_an_id_knowledge_host_holds_with_another_digest_is_dead_lettered_at_once_and_the_next_goes_on(
    storage, stand_in
):
    tenant, environment = "tenant-a", unique("conflict")
    outbox = ArtifactOutbox(storage)
    clash = receipt(storage, tenant, environment, "run-1", '{"ours":1}')
    after = receipt(storage, tenant, environment, "run-2", '{"ours":2}')
    client = KnowledgeHost(KnowledgeHostSettings.model_validate({"BaseUrl": stand_in.url}))
    client.put(
        Artifact.of_content(
            artifact_id=clash.artifact_id,
            kind="plan-receipt",
            tenant=tenant,
            environment=environment,
            run_id="run-1",
            content='{"theirs":1}',
        )
    )
    outbox.record(clash)
    outbox.record(after)

    report = publisher(storage, stand_in, attempts=10).publish_pending()

    assert report.dead_lettered == [clash.artifact_id] and report.published == [after.artifact_id]
    dead = outbox.record_of(tenant, environment, clash.artifact_id)
    assert dead["State"] == "dead-lettered" and dead["Attempts"] == 1 and "another digest" in dead["LastError"]
    assert stand_in.stored[clash.artifact_id]["content"] == '{"theirs":1}'  # never overwritten
    assert any(row["RowKey"] == f"artifact|{clash.artifact_id}" for row in outbox.dead_letters())


def test_a_blob_altered_after_it_was_recorded_is_never_mirrored(storage, stand_in):
    tenant, environment = "tenant-a", unique("altered")
    outbox = ArtifactOutbox(storage)
    artifact = receipt(storage, tenant, environment, "run-1", '{"as":"written"}')
    outbox.record(artifact)
    receipt(storage, tenant, environment, "run-1", '{"as":"edited"}')  # the blob changed under its digest

    report = publisher(storage, stand_in).publish_pending()

    assert report.dead_lettered == [artifact.artifact_id]
    assert stand_in.puts[artifact.artifact_id] == 0
    assert "no longer hashes" in outbox.record_of(tenant, environment, artifact.artifact_id)["LastError"]


def test_an_artifact_off_knowledge_hosts_contract_is_dead_lettered_and_does_not_block_its_stream(storage, stand_in):
    environment = unique("contract")
    outbox = ArtifactOutbox(storage)
    off_contract = receipt(storage, "tenant a", environment, "run-1", '{"n":1}')  # no space in a tenant's name
    outbox.record(off_contract)

    report = publisher(storage, stand_in).publish_pending()

    assert report.dead_lettered == [off_contract.artifact_id] and stand_in.puts[off_contract.artifact_id] == 0
    record = outbox.record_of("tenant a", environment, off_contract.artifact_id)
    assert record["State"] == "dead-lettered" and "contract" in record["LastError"]
