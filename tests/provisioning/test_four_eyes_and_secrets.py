"""Issue 11: approvals compare people, not client apps; secrets never enter a specification;
queue messages whose ids a table key cannot hold are kept as rejections, not retried."""

from __future__ import annotations

import base64
import json
from typing import Any

from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from devhost.azurite import HOST_KEY
from tests.provisioning.helpers import READ, WRITE, declare, runs_of, specification, unique, wait_for_run_state
from tests.support.host import wait_until

PASSWORD = "hunter2-Very-Secret"


def awaiting_production_run(host, requester: str) -> dict[str, Any]:
    answer = declare(host, requester, specification(unique("prod"), "production"))
    assert answer.status_code == 202, answer.text
    return wait_for_run_state(host, requester, answer.json()["run_id"], {"awaiting-approval"})


def approve(host, token: str, run: dict[str, Any]):
    return host.request(
        "POST",
        f"runtime-cloud/runs/{run['id']}/approve",
        token=token,
        json={"plan_digest": run["plan_digest"], "reason": "reviewed"},
    )


def send(azurite, queue: str, document: dict[str, Any]) -> str:
    client = QueueClient.from_connection_string(azurite.connection_string(), queue)
    return client.send_message(base64.b64encode(json.dumps(document).encode()).decode()).id


def kept_rejection(azurite, queue: str, message_id: str) -> dict[str, Any]:
    container = BlobServiceClient.from_connection_string(azurite.connection_string()).get_container_client("rejections")
    blob = container.get_blob_client(f"{queue}/{message_id}.json")
    wait_until(blob.exists, timeout=60, message=f"the rejection record of {queue} message {message_id}")
    return json.loads(blob.download_blob().readall())


# -- four eyes ---------------------------------------------------------------------------------------


def test_the_requester_cannot_approve_through_a_second_client_app(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-web", object_id="alice")
    same_person = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="ops-cli", object_id="alice")
    run = awaiting_production_run(provisioning_host, requester)

    refused = approve(provisioning_host, same_person, run)

    assert refused.status_code == 403, refused.text
    assert run["requested_by"] == "alice" and run["requested_by_client"] == "studio-web"


def test_without_oid_the_subject_is_the_person(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-web", subject="carol")
    same_person = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="ops-cli", subject="carol")
    run = awaiting_production_run(provisioning_host, requester)

    assert approve(provisioning_host, same_person, run).status_code == 403


def test_another_person_through_the_same_client_app_approves_and_the_app_is_recorded(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-web", object_id="alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-web", object_id="bob")
    run = awaiting_production_run(provisioning_host, requester)

    approved = approve(provisioning_host, operator, run)

    assert approved.status_code == 200, approved.text
    assert approved.json()["decision"]["by"] == "bob" and approved.json()["decision"]["client"] == "studio-web"
    applied = wait_for_run_state(provisioning_host, requester, run["id"], {"applied", "failed"})
    assert applied["state"] == "applied"
    receipt = provisioning_host.request(
        "GET", f"runtime-cloud/runs/{run['id']}/receipts/apply", token=requester
    ).json()["receipt"]
    assert [(a["by"], a["client"]) for a in receipt["approvals"]] == [("bob", "studio-web")]


# -- secrets -----------------------------------------------------------------------------------------


def test_a_storage_key_or_password_in_resource_metadata_is_a_422_naming_the_field(provisioning_host, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("leaky")
    spec = specification(
        environment,
        resources=[
            {
                "type": "queue",
                "name": f"orders-{environment[-8:]}",
                "metadata": {"team": "checkout", "storage": HOST_KEY},
            },
            {"type": "blob-container", "name": f"invoices-{environment[-8:]}", "metadata": {"password": PASSWORD}},
        ],
    )

    answer = declare(provisioning_host, token, spec)

    assert answer.status_code == 422, answer.text
    assert sorted(e["path"] for e in answer.json()["errors"]) == [
        "/specification/resources/0/metadata/storage",
        "/specification/resources/1/metadata/password",
    ]
    assert HOST_KEY not in answer.text and PASSWORD not in answer.text
    assert runs_of(provisioning_host, token, environment) == []
    stored = provisioning_host.request("GET", f"runtime-cloud/environments/{environment}/specification", token=token)
    assert stored.status_code == 404


def test_a_secret_in_specification_text_is_a_422_naming_the_field(provisioning_host, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("leaky")
    text = (
        f"environment: {environment}\nenvironment_class: non-production\ntarget: local-storage\n"
        f"runner: embedded\nresources:\n  - type: queue\n    name: q-{environment[-8:]}\n"
        f"    metadata:\n      conn: DefaultEndpointsProtocol=https;AccountName=x;AccountKey={HOST_KEY}\n"
    )

    answer = provisioning_host.request(
        "POST", "runtime-cloud/specifications", token=token, json={"specification_text": text, "format": "yaml"}
    )

    assert answer.status_code == 422, answer.text
    assert [e["path"] for e in answer.json()["errors"]] == ["/specification/resources/0/metadata/conn"]
    assert HOST_KEY not in answer.text


def test_a_promotion_carrying_a_secret_fails_and_its_kept_message_withholds_it(provisioning_host, azurite, mint):
    token = mint("tenant-a", scopes=READ)
    environment = unique("leaky")
    spec = specification(
        environment,
        resources=[{"type": "queue", "name": f"q-{environment[-8:]}", "metadata": {"db_password": PASSWORD}}],
    )
    message_id = send(
        azurite,
        "promotions",
        {
            "promotion_id": unique("promo"),
            "tenant": "tenant-a",
            "environment": environment,
            "requested_by": "delivery",
            "specification": spec,
        },
    )

    kept = kept_rejection(azurite, "promotions", message_id)
    [run] = wait_until(lambda: runs_of(provisioning_host, token, environment), message="the failed run")

    assert kept["errors"][0]["path"] == "/specification/resources/0/metadata/db_password"
    assert PASSWORD not in json.dumps(kept)
    assert run["state"] == "failed" and run["failure_reason"] == "invalid-specification"
    assert PASSWORD not in json.dumps(run)


# -- ids a table key cannot hold ----------------------------------------------------------------------


def test_a_promotion_id_a_table_key_cannot_hold_is_kept_as_a_rejection(provisioning_host, azurite, mint):
    environment = unique("keys")
    ids = ["promo/1", "promo#1", "promo?1", "promo\\1", "x" * 300]
    sent = {
        promotion_id: send(
            azurite,
            "promotions",
            {
                "promotion_id": promotion_id,
                "tenant": "tenant-a",
                "environment": environment,
                "requested_by": "delivery",
                "specification": specification(environment),
            },
        )
        for promotion_id in ids
    }

    for promotion_id, message_id in sent.items():
        kept = kept_rejection(azurite, "promotions", message_id)
        assert kept["errors"][0]["path"] == "/promotion_id", (promotion_id, kept)
    assert runs_of(provisioning_host, mint("tenant-a", scopes=READ), environment) == []


def test_an_approval_message_naming_ids_a_key_cannot_hold_is_kept_as_a_rejection(azurite, provisioning_host):
    message_id = send(
        azurite,
        "approvals",
        {
            "tenant": "tenant/a",
            "environment": "prod",
            "run_id": "run#1",
            "decision": "approve",
            "plan_digest": "0" * 64,
            "approver": "bob",
        },
    )

    kept = kept_rejection(azurite, "approvals", message_id)

    assert {e["path"] for e in kept["errors"]} == {"/tenant", "/run_id"}
