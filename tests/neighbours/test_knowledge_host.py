"""KnowledgeHost's client against its stand-in (a real local HTTP server speaking the contract)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from shared.platform.neighbours.errors import (
    ArtifactConflict,
    ArtifactNotFound,
    NeighbourAnswerInvalid,
    NeighbourUnavailable,
)
from shared.platform.neighbours.knowledge_host import Artifact, KnowledgeHost, sha256_of
from shared.platform.neighbours.settings import KnowledgeHostSettings
from tests.support.neighbours import KnowledgeHostStandIn

RECEIPT = json.dumps({"kind": "plan", "run_id": "run-1", "changes": []}, sort_keys=True)


def client(stand_in: KnowledgeHostStandIn, **settings: object) -> KnowledgeHost:
    values = {"BaseUrl": stand_in.url, "TimeoutSeconds": 1, "Retries": 2} | settings
    return KnowledgeHost(KnowledgeHostSettings.model_validate(values))


def plan_receipt(content: str = RECEIPT, artifact_id: str = "tenant-a:shop:run-1:plan") -> Artifact:
    return Artifact.of_content(
        artifact_id=artifact_id,
        kind="plan-receipt",
        tenant="tenant-a",
        environment="shop",
        run_id="run-1",
        content=content,
    )


def test_an_artifact_is_stored_once_and_a_repeat_is_unchanged(knowledge_host_stand_in):
    mirror = client(knowledge_host_stand_in)
    artifact = plan_receipt()

    assert mirror.put(artifact) == "created"
    assert mirror.put(artifact) == "unchanged"

    assert knowledge_host_stand_in.puts[artifact.artifact_id] == 2
    assert knowledge_host_stand_in.created[artifact.artifact_id] == 1
    assert knowledge_host_stand_in.stored[artifact.artifact_id]["sha256"] == sha256_of(RECEIPT)


def test_the_same_id_with_another_digest_is_a_conflict_and_nothing_is_overwritten(knowledge_host_stand_in):
    mirror = client(knowledge_host_stand_in)
    mirror.put(plan_receipt())

    with pytest.raises(ArtifactConflict) as raised:
        mirror.put(plan_receipt(content=RECEIPT + " "))

    assert raised.value.stored_sha256 == sha256_of(RECEIPT)
    assert knowledge_host_stand_in.stored["tenant-a:shop:run-1:plan"]["content"] == RECEIPT


def test_an_artifact_reads_back_with_its_content_and_digest(knowledge_host_stand_in):
    mirror = client(knowledge_host_stand_in)
    mirror.put(plan_receipt())

    stored = mirror.get("tenant-a:shop:run-1:plan")

    assert stored.content == RECEIPT and stored.sha256 == sha256_of(RECEIPT)
    assert (stored.kind, stored.tenant, stored.environment, stored.run_id) == (
        "plan-receipt",
        "tenant-a",
        "shop",
        "run-1",
    )


def test_outputs_go_by_reference_and_drift_reports_belong_to_no_run(knowledge_host_stand_in):
    mirror = client(knowledge_host_stand_in)
    outputs = Artifact(
        artifact_id="tenant-a:shop:run-1:outputs",
        kind="run-outputs",
        tenant="tenant-a",
        environment="shop",
        run_id="run-1",
        sha256="a" * 64,
        content_ref="https://store.example/outputs/tenant-a/shop/run-1.json",
    )
    drift = Artifact.of_content(
        artifact_id="tenant-a:shop:scan-7",
        kind="drift-report",
        tenant="tenant-a",
        environment="shop",
        run_id=None,
        content="{}",
    )

    assert mirror.put(outputs) == "created" and mirror.put(drift) == "created"

    assert mirror.get(outputs.artifact_id).content_ref == outputs.content_ref
    assert "run_id" not in knowledge_host_stand_in.stored[drift.artifact_id]


def test_an_artifact_that_does_not_match_its_digest_is_never_sent():
    with pytest.raises(ValidationError):
        Artifact(
            artifact_id="x",
            kind="plan-receipt",
            tenant="t",
            environment="e",
            run_id="r",
            sha256="0" * 64,
            content="{}",
        )
    with pytest.raises(ValidationError):
        Artifact(artifact_id="x", kind="apply-receipt", tenant="t", environment="e", sha256="0" * 64)


def test_a_missing_artifact_is_artifact_not_found(knowledge_host_stand_in):
    with pytest.raises(ArtifactNotFound):
        client(knowledge_host_stand_in).get("tenant-a:shop:run-9:apply")


def test_stored_content_that_does_not_match_its_digest_is_answer_invalid(knowledge_host_stand_in):
    mirror = client(knowledge_host_stand_in)
    mirror.put(plan_receipt())
    knowledge_host_stand_in.tamper("tenant-a:shop:run-1:plan", RECEIPT.replace("run-1", "run-2"))

    with pytest.raises(NeighbourAnswerInvalid) as raised:
        mirror.get("tenant-a:shop:run-1:plan")

    assert "does not match its sha256" in str(raised.value)


def test_a_put_retried_after_a_503_stores_the_artifact_exactly_once(knowledge_host_stand_in):
    knowledge_host_stand_in.failing(503, times=2)

    assert client(knowledge_host_stand_in, Retries=3).put(plan_receipt()) == "created"

    assert knowledge_host_stand_in.puts["tenant-a:shop:run-1:plan"] == 3
    assert knowledge_host_stand_in.created["tenant-a:shop:run-1:plan"] == 1


def test_5xx_slow_and_down_are_unavailable(knowledge_host_stand_in):
    mirror = client(knowledge_host_stand_in, TimeoutSeconds=0.3, Retries=0)

    knowledge_host_stand_in.failing(502)
    with pytest.raises(NeighbourUnavailable) as failing:
        mirror.put(plan_receipt())
    knowledge_host_stand_in.heal()
    knowledge_host_stand_in.slow(3)
    with pytest.raises(NeighbourUnavailable) as slow:
        mirror.get("tenant-a:shop:run-1:plan")
    knowledge_host_stand_in.stop()
    with pytest.raises(NeighbourUnavailable) as down:
        mirror.put(plan_receipt())

    assert failing.value.status == 502
    assert "did not answer within" in str(slow.value)
    assert "could not be reached" in str(down.value)
    assert not knowledge_host_stand_in.created


@pytest.mark.parametrize(
    "body",
    [
        b'{"artifact_id": "tenant-a:shop:run-1:plan"}',
        b'{"artifact_id": "other", "sha256": "' + b"0" * 64 + b'"}',
        b"ok",
    ],
    ids=["no-digest", "another-artifact", "not-json"],
)
def test_an_answer_off_the_contract_is_answer_invalid(knowledge_host_stand_in, body):
    knowledge_host_stand_in.answering(body)

    with pytest.raises(NeighbourAnswerInvalid):
        client(knowledge_host_stand_in).put(plan_receipt())
