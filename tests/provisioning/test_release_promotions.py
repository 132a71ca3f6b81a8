"""Issue 28: a promotion may name a release (``{"release": {"id", "environment"}}``) instead of carrying desired
state. The host resolves it through DeliveryHost (a local stand-in speaking its contract, started by the test:
tests.support.neighbours), pins the release and its commit in the run and its plan receipt, and when DeliveryHost
cannot answer the run fails ``release-unresolved`` with a receipt and no plan job.

The host runs on an Azurite of its own: every host on the session's account takes promotions, and one without
DeliveryHost configured would fail this test's promotions ``release-unresolved``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from azure.data.tables import TableClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient, TextBase64DecodePolicy

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.provisioning.helpers import (
    READ,
    WRITE,
    runs_of,
    send_promotion,
    specification,
    target_queue_names,
    unique,
    wait_for_run_state,
)
from tests.support.host import HostProcess, wait_until
from tests.support.neighbours import DeliveryHostStandIn

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}


@pytest.fixture(scope="module")
def delivery_host() -> Iterator[DeliveryHostStandIn]:
    with DeliveryHostStandIn() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def own_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    azurite = Azurite(tmp_path_factory.mktemp("delivery-host-azurite"), persist=False).start()
    yield azurite
    azurite.stop(grace_seconds=0.5)


@pytest.fixture(scope="module")
def release_host(
    own_azurite: Azurite, key_dir: Path, delivery_host: DeliveryHostStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HostProcess]:
    settings = app_settings(
        own_azurite,
        key_dir,
        RuntimeCloud__DeliveryHost__BaseUrl=delivery_host.url,
        RuntimeCloud__DeliveryHost__TimeoutSeconds="2",
        RuntimeCloud__DeliveryHost__Retries="0",
    )
    host = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "delivery-host.log").start()
    yield host
    host.stop()


def promotion(environment: str, release_id: str, **changes: Any) -> dict[str, Any]:
    return {
        "promotion_id": unique("promo"),
        "tenant": "tenant-a",
        "environment": environment,
        "requested_by": "delivery",
        "release": {"id": release_id, "environment": environment},
        **changes,
    }


def only_run(host: HostProcess, token: str, environment: str) -> dict[str, Any]:
    runs = wait_until(lambda: runs_of(host, token, environment), timeout=60, message=f"a run of {environment}")
    assert len(runs) == 1, runs
    return wait_for_run_state(host, token, runs[0]["id"], FINAL)


def promotions_left(azurite: Azurite) -> int:
    """Messages in the promotions queue, those being handled included (they are deleted once handled)."""
    queue = QueueClient.from_connection_string(azurite.connection_string(), "promotions")
    count = queue.get_queue_properties().approximate_message_count
    assert count is not None, "the queue's properties carry its message count"
    return count


def jobs_of(azurite: Azurite, run_id: str) -> list[dict[str, Any]]:
    table = TableClient.from_connection_string(azurite.connection_string(), "RunnerJobs")
    return list(table.query_entities("PartitionKey eq @run", parameters={"run": run_id}))


def receipt(host: HostProcess, token: str, run_id: str, kind: str) -> dict[str, Any]:
    answer = host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/{kind}", token=token)
    assert answer.status_code == 200, answer.text
    assert answer.json()["verified"] is True
    return answer.json()["receipt"]


def events_of(azurite: Azurite, run_id: str, count: int) -> list[dict[str, Any]]:
    """The run's CloudEvents, in sequence (read as delivery reads them: deduplicated by id)."""
    queue = QueueClient.from_connection_string(
        azurite.connection_string(), "runtime-cloud-events", message_decode_policy=TextBase64DecodePolicy()
    )
    seen: dict[str, dict[str, Any]] = {}

    def drained() -> bool:
        for received in queue.receive_messages(messages_per_page=32, visibility_timeout=300):
            event = json.loads(received.content)
            seen.setdefault(event["id"], event)
        return len([e for e in seen.values() if e["subject"].endswith(run_id)]) >= count

    wait_until(drained, timeout=60, message=f"{count} event(s) of run {run_id}")
    return sorted((e for e in seen.values() if e["subject"].endswith(run_id)), key=lambda e: e["sequence"])


def assert_unresolved_with_a_receipt(host: HostProcess, azurite: Azurite, token: str, run: dict[str, Any]) -> None:
    assert run["state"] == "failed" and run["failure_reason"] == "release-unresolved", run
    assert "DeliveryHost" in run["failure_detail"]
    assert run["source"]["kind"] == "release" and run["source"]["commit"] is None
    assert run["plan_digest"] is None and jobs_of(azurite, run["id"]) == []
    apply = receipt(host, token, run["id"], "apply")
    assert apply["outcome"] == "failed" and apply["failure_reason"] == "release-unresolved"
    assert apply["steps"] == []


def test_a_promotion_naming_a_release_is_resolved_pinned_and_applied_once(
    release_host, own_azurite, delivery_host, mint
):
    reader = mint("tenant-a", scopes=READ)
    environment, release_id = unique("rel"), unique("release")
    desired = specification(environment)
    del desired["environment"]  # the release's text may leave it out: the release names it
    published = delivery_host.publish(release_id, environment, yaml.safe_dump(desired))
    message = promotion(environment, release_id)

    for _ in range(2):  # delivered twice at once: both may ask DeliveryHost, one run is recorded
        send_promotion(own_azurite, message)
    run = only_run(release_host, reader, environment)

    assert run["state"] == "applied", run
    assert run["source"] == {
        "kind": "release",
        "release": release_id,
        "commit": published["commit"],
        "repository": None,
        "path": None,
        "revision": None,
    }
    assert f"orders-{environment[-8:]}" in target_queue_names(own_azurite)
    plan = receipt(release_host, reader, run["id"], "plan")
    assert plan["source"]["release"] == release_id and plan["source"]["commit"] == published["commit"]
    assert plan["counts"]["create"] == 2
    path = f"/v1/releases/{release_id}/environments/{environment}"
    asked = delivery_host.count("GET", path)
    send_promotion(own_azurite, message)  # once more, after it applied: its run, pinned, asks nothing again
    wait_until(lambda: promotions_left(own_azurite) == 0, timeout=60, message="the repeated promotion taken")
    assert len(runs_of(release_host, reader, environment)) == 1
    assert delivery_host.count("GET", path) == asked
    declared, applied = events_of(own_azurite, run["id"], 2)
    assert applied["type"].endswith("ProvisioningApplied")
    assert applied["data"]["release"] == release_id and applied["data"]["commit"] == published["commit"]
    assert applied["data"]["promotion_id"] == message["promotion_id"]


def test_an_unknown_release_fails_release_unresolved_with_a_receipt_and_no_plan_job(
    release_host, own_azurite, delivery_host, mint
):
    reader = mint("tenant-a", scopes=READ)
    environment = unique("rel-unknown")
    message = promotion(environment, unique("never-published"))
    send_promotion(own_azurite, message)

    run = only_run(release_host, reader, environment)

    assert_unresolved_with_a_receipt(release_host, own_azurite, reader, run)
    assert "unknown" in run["failure_detail"]
    (failed,) = events_of(own_azurite, run["id"], 1)  # it declared nothing: delivery hears only the failure
    assert failed["type"].endswith("ProvisioningFailed")
    assert failed["data"]["reason"] == "release-unresolved"
    assert failed["data"]["release"] == message["release"]["id"] and failed["data"]["commit"] is None


def test_with_delivery_host_down_a_promotion_fails_release_unresolved_with_a_receipt(
    release_host, own_azurite, delivery_host, mint
):
    reader = mint("tenant-a", scopes=READ)
    environment, release_id = unique("rel-down"), unique("release")
    delivery_host.publish(release_id, environment, json.dumps(specification(environment)))
    delivery_host.stop()
    try:
        send_promotion(own_azurite, promotion(environment, release_id))
        run = only_run(release_host, reader, environment)
    finally:
        delivery_host.start()

    assert_unresolved_with_a_receipt(release_host, own_azurite, reader, run)


def test_delivery_host_answering_off_its_contract_fails_the_promotion_over_http_too(
    release_host, own_azurite, delivery_host, mint
):
    writer = mint("tenant-a", scopes=WRITE)
    environment, release_id = unique("rel-invalid"), unique("release")
    delivery_host.answering(b'{"release_id": "something else"}')
    try:
        answer = release_host.request(
            "POST",
            "runtime-cloud/specifications",
            token=writer,
            json={"release": {"id": release_id, "environment": environment}},
        )
        assert answer.status_code == 202, answer.text  # recorded: the run says why it failed
        run = wait_for_run_state(release_host, writer, answer.json()["run_id"], FINAL)
    finally:
        delivery_host.heal()

    assert_unresolved_with_a_receipt(release_host, own_azurite, writer, run)
    assert run["requested_by_kind"] == "person"


def test_a_release_and_desired_state_together_are_refused(release_host, own_azurite, delivery_host, mint):
    writer = mint("tenant-a", scopes=WRITE)
    environment, release_id = unique("rel-both"), unique("release")
    delivery_host.publish(release_id, environment, json.dumps(specification(environment)))
    both = {"release": {"id": release_id, "environment": environment}, "specification": specification(environment)}

    answer = release_host.request("POST", "runtime-cloud/specifications", token=writer, json=both)

    assert answer.status_code == 422, answer.text
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert "exactly one of specification, specification_text, git or release" in answer.text
    assert runs_of(release_host, writer, environment) == []

    message = promotion(environment, release_id, specification=specification(environment))
    send_promotion(own_azurite, message)
    run = only_run(release_host, writer, environment)
    assert run["state"] == "failed" and run["failure_reason"] == "invalid-specification", run
    kept = BlobServiceClient.from_connection_string(own_azurite.connection_string()).get_container_client("rejections")
    bodies = [json.loads(kept.download_blob(b.name).readall()) for b in kept.list_blobs(name_starts_with="promotions/")]
    refused = [b for b in bodies if json.loads(b["message"]).get("promotion_id") == message["promotion_id"]]
    assert refused and "exactly one of" in json.dumps(refused[0]), refused
    assert delivery_host.count("GET", f"/v1/releases/{release_id}/environments/{environment}") == 0


def test_a_policy_dry_run_of_a_release_checks_what_it_holds(release_host, delivery_host, mint):
    writer = mint("tenant-a", scopes=WRITE)
    environment, release_id = unique("rel-dry"), unique("release")
    delivery_host.publish(release_id, environment, json.dumps(specification(environment)))

    def dry_run(release: str) -> Any:
        body = {"release": {"id": release, "environment": environment}}
        return release_host.request("POST", "runtime-cloud/policy/dry-run", token=writer, json=body)

    checked, unknown = dry_run(release_id), dry_run(unique("never-published"))

    assert checked.status_code == 200, checked.text
    assert checked.json()["environment"] == environment and checked.json()["plan_counts"]["create"] == 2
    assert unknown.status_code == 422, unknown.text
    assert [e["path"] for e in unknown.json()["errors"]] == ["/release"]
    assert runs_of(release_host, writer, environment) == []  # a dry run declares nothing
