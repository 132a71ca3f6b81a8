"""Promotions from delivery's queue become recorded runs, once, and bad ones are kept."""

from __future__ import annotations

import base64
import json

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from tests.provisioning.helpers import (
    READ,
    runs_of,
    send_promotion,
    specification,
    target_blobs,
    target_queue_names,
    unique,
    wait_for_run_state,
)
from tests.support.host import wait_until


def promotion(environment: str, **spec_changes) -> dict:
    return {
        "promotion_id": unique("promo"),
        "tenant": "tenant-a",
        "environment": environment,
        "requested_by": "delivery",
        "specification": specification(environment, **spec_changes),
    }


def only_run(host, token, environment: str) -> dict:
    runs = wait_until(lambda: runs_of(host, token, environment), timeout=60, message=f"a run of {environment}")
    assert len(runs) == 1, runs
    return runs[0]


def test_a_non_production_promotion_is_applied_with_receipts_that_verify(provisioning_host, azurite, mint):
    token = mint("tenant-a", scopes=READ)
    environment = unique("dev")
    message = promotion(environment)
    send_promotion(azurite, message)

    run = wait_for_run_state(
        provisioning_host, token, only_run(provisioning_host, token, environment)["id"], {"applied", "failed"}
    )

    assert run["state"] == "applied", run
    assert [entry["state"] for entry in run["timeline"]] == ["queued", "planning", "applying", "applied"]
    suffix = environment[-8:]
    assert f"orders-{suffix}" in target_queue_names(azurite)
    container = target_blobs(azurite).get_container_client(f"invoices-{suffix}").get_container_properties()
    assert container.metadata["retention"] == "short"
    for kind in ("plan", "apply"):
        receipt = provisioning_host.request("GET", f"runtime-cloud/runs/{run['id']}/receipts/{kind}", token=token)
        assert receipt.status_code == 200
        assert receipt.json()["verified"] is True
    plan = provisioning_host.request("GET", f"runtime-cloud/runs/{run['id']}/receipts/plan", token=token).json()
    assert plan["digest"] == run["plan_digest"]
    assert plan["receipt"]["counts"]["create"] == 2


def test_the_same_promotion_delivered_three_times_is_one_run(provisioning_host, azurite, mint):
    token = mint("tenant-a", scopes=READ)
    environment = unique("dup")
    message = promotion(environment)
    for _ in range(3):
        send_promotion(azurite, message)

    run = wait_for_run_state(
        provisioning_host, token, only_run(provisioning_host, token, environment)["id"], {"applied", "failed"}
    )

    assert run["state"] == "applied"
    assert len(runs_of(provisioning_host, token, environment)) == 1


def test_an_invalid_specification_fails_its_run_and_the_message_is_kept(provisioning_host, azurite, mint):
    token = mint("tenant-a", scopes=READ)
    environment = unique("bad")
    message = promotion(environment, resources=[])  # the embedded runner needs resources
    send_promotion(azurite, message)

    run = wait_for_run_state(
        provisioning_host, token, only_run(provisioning_host, token, environment)["id"], {"failed"}
    )

    assert run["failure_reason"] == "invalid-specification"
    kept = BlobServiceClient.from_connection_string(azurite.connection_string()).get_container_client("rejections")
    bodies = [json.loads(kept.download_blob(b.name).readall()) for b in kept.list_blobs(name_starts_with="promotions/")]
    assert any(json.loads(b["message"]).get("promotion_id") == message["promotion_id"] for b in bodies)


def test_a_message_that_is_not_json_is_kept_as_a_rejection_not_retried(provisioning_host, azurite):
    marker = unique("garbage")
    promotions = QueueClient.from_connection_string(azurite.connection_string(), "promotions")
    sent = promotions.send_message(base64.b64encode(f"this is not json {marker}".encode()).decode())

    kept = BlobServiceClient.from_connection_string(azurite.connection_string()).get_container_client("rejections")
    rejection = kept.get_blob_client(f"promotions/{sent.id}.json")  # one record per message id
    wait_until(rejection.exists, timeout=60, message="the rejection record")
    assert marker in json.loads(rejection.download_blob().readall())["message"]

    # Not retried: the first delivery completed, so the host deleted the message. A failed delivery
    # would leave it in the queue, to come back after the visibility timeout and end in poison.
    def deleted() -> bool:
        try:  # the host's dequeue changed the pop receipt: a message still there answers 400, a deleted one 404
            promotions.update_message(sent.id, sent.pop_receipt, visibility_timeout=0)
        except ResourceNotFoundError:
            return True
        except HttpResponseError:
            return False
        raise AssertionError("the host never received the message")

    wait_until(deleted, timeout=60, message="the message to be deleted after its first delivery")
    poison = QueueClient.from_connection_string(azurite.connection_string(), "promotions-poison")
    try:
        poisoned = [base64.b64decode(m.content).decode(errors="replace") for m in poison.peek_messages(max_messages=32)]
    except ResourceNotFoundError:  # no message was ever poisoned
        poisoned = []
    assert not [text for text in poisoned if marker in text]


def test_an_unreachable_target_fails_the_run_with_a_receipt(provisioning_host, azurite, mint):
    token = mint("tenant-a", scopes=READ)
    environment = unique("far")
    send_promotion(azurite, promotion(environment, target="unreachable-storage"))

    run = wait_for_run_state(
        provisioning_host,
        token,
        only_run(provisioning_host, token, environment)["id"],
        {"failed", "applied"},
        timeout=120,
    )

    assert run["state"] == "failed"
    assert run["failure_reason"] == "target-unreachable"
    receipt = provisioning_host.request("GET", f"runtime-cloud/runs/{run['id']}/receipts/apply", token=token).json()
    assert receipt["verified"] is True
    assert receipt["receipt"]["outcome"] == "failed"
    assert receipt["receipt"]["failure_reason"] == "target-unreachable"


def test_delivery_hears_declared_and_applied_as_cloudevents_in_sequence(provisioning_host, azurite, mint):
    from azure.storage.queue import QueueClient, TextBase64DecodePolicy

    token = mint("tenant-a", scopes=READ)
    environment = unique("told")
    message = promotion(environment)
    send_promotion(azurite, message)
    run = wait_for_run_state(
        provisioning_host, token, only_run(provisioning_host, token, environment)["id"], {"applied", "failed"}
    )
    events_queue = QueueClient.from_connection_string(
        azurite.connection_string(), "runtime-cloud-events", message_decode_policy=TextBase64DecodePolicy()
    )
    seen: dict[str, dict] = {}

    def drain() -> bool:
        # As a consumer reads them: delivery is at-least-once and a queue does not promise order,
        # so events are deduplicated by id and put in order by their sequence.
        for received in events_queue.receive_messages(messages_per_page=32, visibility_timeout=300):
            event = json.loads(received.content)  # base64 CloudEvents, as a queue trigger reads them
            seen.setdefault(event["id"], event)
        return len([e for e in seen.values() if e["subject"].endswith(run["id"])]) >= 2

    wait_until(drain, timeout=60, message="both events of the run")
    ours = sorted((e for e in seen.values() if e["subject"].endswith(run["id"])), key=lambda e: e["sequence"])
    assert [e["type"] for e in ours] == [
        "factory.runtime-cloud.SpecificationDeclared",
        "factory.runtime-cloud.ProvisioningApplied",
    ]
    assert [e["sequence"] for e in ours] == [1, 2]  # a sequence per environment, gap-free
    assert ours[1]["data"]["promotion_id"] == message["promotion_id"]
    assert ours[1]["specversion"] == "1.0" and ours[1]["tenant"] == "tenant-a"
