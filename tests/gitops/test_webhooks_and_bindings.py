"""Issue 17: who may bind, suspend and sync (Operators of the tenant), and a webhook authenticated by
its signature alone, whose refusals all look alike."""

from __future__ import annotations

import base64
import json
import uuid

from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from shared.gitops.signatures import sign
from tests.gitops.helpers import FILE, OPERATOR, READER, SECRET, azure_devops_push, bind, github_push, spec_yaml
from tests.support.host import wait_until

PROBLEM = "application/problem+json"


def _hook(tenant: str, environment: str) -> str:
    return f"runtime-cloud/gitops/webhooks/{tenant}/{environment}"


def _problem(answer) -> dict:
    assert answer.headers["Content-Type"].startswith(PROBLEM), answer.text
    document = answer.json()
    return {key: document.get(key) for key in ("type", "title", "status", "detail")}


def test_binding_needs_an_operator_an_allowed_repository_and_a_secret_by_reference(
    runtime_host, mint, operator, tenant, environment, repository
):
    path = f"runtime-cloud/environments/{environment}/gitops"
    reader = mint(tenant, **READER)
    writer_without_role = mint(tenant, scopes=OPERATOR["scopes"])

    assert bind(runtime_host, reader, environment, repository.path).status_code == 403
    assert bind(runtime_host, writer_without_role, environment, repository.path).status_code == 403
    outside = bind(runtime_host, operator, environment, "/etc")
    assert outside.status_code == 422 and outside.json()["errors"][0]["path"] == "/repository"
    by_value = bind(runtime_host, operator, environment, repository.path, webhook_secret="AzureWebJobsStorage")
    assert by_value.status_code == 422 and by_value.json()["errors"][0]["path"] == "/webhook_secret"
    bad_window = bind(
        runtime_host,
        operator,
        environment,
        repository.path,
        sync_windows=[{"kind": "allow", "schedule": "0 0 25 * * *"}],
    )
    assert bad_window.status_code == 422
    assert {e["path"] for e in bad_window.json()["errors"]} >= {"/sync_windows/0/schedule"}

    created = bind(runtime_host, operator, environment, repository.path)
    again = bind(runtime_host, operator, environment, repository.path)
    read = runtime_host.request("GET", path, token=reader)

    assert created.status_code == 201 and created.headers["Location"] == f"/{path}"
    assert again.status_code == 200
    view = read.json()
    assert read.status_code == 200 and view["repository"] == str(repository.path) and view["branch"] == "main"
    assert view["webhook_path"] == f"/runtime-cloud/gitops/webhooks/{tenant}/{environment}"
    assert "tenant" not in view and "uid" not in view and SECRET not in read.text

    assert runtime_host.request("DELETE", path, token=operator).status_code == 204
    assert runtime_host.request("GET", path, token=reader).status_code == 404
    assert runtime_host.request("DELETE", path, token=operator).status_code == 404


def test_another_tenant_finds_no_binding(runtime_host, mint, operator, environment, repository):
    repository.commit({FILE: spec_yaml(environment)})
    assert bind(runtime_host, operator, environment, repository.path).status_code == 201
    stranger = mint(f"gitops-b-{uuid.uuid4().hex[:8]}", **OPERATOR)
    path = f"runtime-cloud/environments/{environment}/gitops"

    answers = [
        runtime_host.request("GET", path, token=stranger),
        runtime_host.request("GET", f"{path}/status", token=stranger),
        runtime_host.request("POST", f"{path}/sync", token=stranger),
        runtime_host.request("POST", f"{path}/suspend", token=stranger),
        runtime_host.request("POST", f"{path}/resume", token=stranger),
        runtime_host.request("DELETE", path, token=stranger),
    ]

    assert [a.status_code for a in answers] == [404] * 6
    assert runtime_host.request("GET", path, token=operator).json()["suspended"] is False


def test_a_webhook_is_authenticated_by_its_signature_and_refusals_look_alike(
    runtime_host, operator, tenant, environment, repository
):
    commit = repository.commit({FILE: spec_yaml(environment)})
    assert bind(runtime_host, operator, environment, repository.path).status_code == 201
    body = json.dumps({"ref": "refs/heads/main", "after": commit}).encode()
    push = {"Content-Type": "application/json", "X-GitHub-Event": "push"}

    def post(headers: dict, data: bytes = body, where: str = environment, who: str = tenant):
        return runtime_host.request("POST", _hook(who, where), data=data, headers={**push, **headers})

    refusals = {
        "unsigned": post({}),
        "wrong secret": post({"X-Hub-Signature-256": sign(b"not-the-secret-at-all-00000", body)}),
        "tampered body": post({"X-Hub-Signature-256": sign(SECRET.encode(), body)}, data=body + b" "),
        "a bearer token instead": post({"Authorization": f"Bearer {operator}"}),
        "unknown environment": post({"X-Hub-Signature-256": sign(SECRET.encode(), body)}, where="never-bound-env"),
        "unknown tenant": post({"X-Hub-Signature-256": sign(SECRET.encode(), body)}, who="no-such-tenant"),
        "Azure DevOps, wrong password": azure_devops_push(
            runtime_host, tenant, environment, commit, "wrong-password-123456"
        ),
    }
    for name, answer in refusals.items():
        assert answer.status_code == 404, (name, answer.text)
    assert len({json.dumps(_problem(a), sort_keys=True) for a in refusals.values()}) == 1

    signed = {"X-Hub-Signature-256": sign(SECRET.encode(), body)}
    ping = runtime_host.request(
        "POST",
        _hook(tenant, environment),
        data=b"{}",
        headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": sign(SECRET.encode(), b"{}")},
    )
    other_branch = github_push(runtime_host, tenant, environment, commit, branch="feature")
    garbage = runtime_host.request(
        "POST",
        _hook(tenant, environment),
        data=b"not json",
        headers={**push, "X-Hub-Signature-256": sign(SECRET.encode(), b"not json")},
    )
    accepted = post(signed)
    azure_devops = azure_devops_push(runtime_host, tenant, environment, commit)

    assert ping.status_code == 200 and ping.json()["outcome"] == "pong"
    assert other_branch.status_code == 200 and other_branch.json()["outcome"] == "ignored"
    assert garbage.status_code == 400 and garbage.headers["Content-Type"].startswith(PROBLEM)
    assert accepted.status_code == 202 and accepted.json() == {"outcome": "queued"}
    assert azure_devops.status_code == 202


def test_a_binding_with_its_own_secret_refuses_the_installations(
    runtime_host, operator, tenant, environment, repository
):
    commit = repository.commit({FILE: spec_yaml(environment)})
    own = "RuntimeCloudGitOps__NotSetAnywhere"  # a reference that resolves to nothing: the webhook is off
    assert bind(runtime_host, operator, environment, repository.path, webhook_secret=own).status_code == 201

    answer = github_push(runtime_host, tenant, environment, commit)

    assert answer.status_code == 404
    assert "NotSetAnywhere" not in answer.text


def test_a_sync_message_that_is_not_one_is_kept_as_a_rejection(runtime_host, azurite):
    queue = QueueClient.from_connection_string(azurite.connection_string(), "gitops-sync")
    body = json.dumps({"tenant": "a/b", "environment": "x", "trigger": "poll"})
    sent = queue.send_message(base64.b64encode(body.encode()).decode())
    kept = BlobServiceClient.from_connection_string(azurite.connection_string()).get_container_client("rejections")

    blob = wait_until(
        lambda: (
            kept.get_blob_client(f"gitops-sync/{sent.id}.json").exists()
            and kept.get_blob_client(f"gitops-sync/{sent.id}.json")
        ),
        timeout=60,
        message="the rejection record",
    )
    record = json.loads(blob.download_blob().readall())
    assert record["reason"] == "not a sync" and record["message"] == body
    assert any(error["path"] == "/tenant" for error in record["errors"])


def test_the_api_document_declares_the_webhooks_signature_and_basic_schemes_not_a_bearer_token(runtime_host, mint):
    answer = runtime_host.request(
        "GET", "runtime-cloud/openapi.json", token=mint("tenant-a", scopes=["factory.meta.read"])
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    webhook = document["paths"]["/runtime-cloud/gitops/webhooks/{tenant}/{environment}"]["post"]
    schemes = document["components"]["securitySchemes"]

    assert webhook["security"] == [{"gitopsSignature": []}, {"gitopsBasic": []}]
    assert (schemes["gitopsSignature"]["type"], schemes["gitopsSignature"]["in"]) == ("apiKey", "header")
    assert schemes["gitopsSignature"]["name"] == "X-Hub-Signature-256"
    assert (schemes["gitopsBasic"]["type"], schemes["gitopsBasic"]["scheme"]) == ("http", "basic")
    assert "401" not in webhook["responses"] and "404" in webhook["responses"]  # a bad signature is a 404
    bind_operation = document["paths"]["/runtime-cloud/environments/{environment}/gitops"]["put"]
    assert bind_operation["security"] == [{"bearer": ["factory.runtime.write"]}]  # the rest keeps its bearer
