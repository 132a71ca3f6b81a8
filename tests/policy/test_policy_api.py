"""The policy gate's API: dry runs without side effects, the effective policy, exceptions (authored,
expiring, Operator-only, tenant-scoped)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from azure.storage.blob import BlobServiceClient

from tests.policy.helpers import create_exception, get_json, policy_tenant, tokens
from tests.provisioning.helpers import (
    READ,
    declare,
    runs_of,
    specification,
    target_queue_names,
    unique,
    wait_for_run_state,
)

DRY_RUN = "runtime-cloud/policy/dry-run"


def snapshots(azurite) -> int:
    service = BlobServiceClient.from_connection_string(azurite.connection_string())
    return sum(1 for _ in service.get_container_client("policy-bundles").list_blobs())


def applied_environment(host, token: str, environment_class: str = "non-production") -> str:
    environment = unique("api")
    answer = declare(host, token, specification(environment, environment_class))
    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(host, token, answer.json()["run_id"], {"applied", "awaiting-approval", "failed"})
    assert run["state"] in ("applied", "awaiting-approval"), run
    return environment


def later(**delta: float) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat()


def test_the_dry_run_answers_without_side_effects(policy_host, policy_tree, azurite, mint):
    tenant = policy_tenant(policy_tree, [{"id": "no-tables", "expression": 'change.type != "table"'}])
    requester, _ = tokens(mint, tenant)
    environment = unique("dry")
    suffix = environment[-8:]
    resources = [
        {"type": "queue", "name": f"plain-{suffix}"},
        {"type": "table", "name": f"Ledger{suffix}"},
    ]
    before = snapshots(azurite)

    answer = policy_host.request(
        "POST",
        DRY_RUN,
        token=requester,
        json={"specification": specification(environment, "production", resources=resources)},
    )

    assert answer.status_code == 200, answer.text
    verdict = answer.json()
    assert verdict["summary"]["outcome"] == "deny" and verdict["summary"]["denied_rules"] == ["no-tables"]
    assert verdict["summary"]["warnings"][0]["rule"] == "team-metadata"
    assert verdict["plan_counts"]["create"] == 2 and verdict["requires_approval"] is True
    rules = {rule["id"]: rule["status"] for rule in verdict["verdict"]["rules"]}
    assert rules["no-tables"] == "fail" and rules["allowed-regions"] == "pass"
    # Nothing happened: no run, no environment, nothing in the target, no snapshot.
    assert runs_of(policy_host, requester, environment) == []
    get_json(policy_host, f"runtime-cloud/environments/{environment}/policy", requester, status=404)
    assert f"plain-{suffix}" not in target_queue_names(azurite)
    assert snapshots(azurite) == before


def test_a_dry_run_refuses_what_a_declaration_refuses(policy_host, policy_tree, mint):
    tenant = policy_tenant(policy_tree)
    requester, _ = tokens(mint, tenant)
    reader = mint(tenant, scopes=READ)
    spec = specification(unique("dry"))

    assert policy_host.request("POST", DRY_RUN, json={"specification": spec}).status_code == 401
    assert policy_host.request("POST", DRY_RUN, token=reader, json={"specification": spec}).status_code == 403
    bad = policy_host.request("POST", DRY_RUN, token=requester, json={"specification": {**spec, "target": 7}})
    assert bad.status_code == 422 and bad.headers["Content-Type"].startswith("application/problem+json")
    unreachable = policy_host.request(
        "POST", DRY_RUN, token=requester, json={"specification": {**spec, "target": "unreachable-storage"}}
    )
    assert unreachable.status_code == 503, unreachable.text  # the target cannot be planned against: not a verdict
    assert unreachable.json()["type"].endswith("target-unreachable")


def test_the_effective_policy_of_an_environment_names_its_layers_and_digest(policy_host, policy_tree, mint):
    tenant = policy_tenant(policy_tree, [{"id": "tenant-rule", "expression": "true"}])
    requester, operator = tokens(mint, tenant)
    environment = applied_environment(policy_host, requester)
    created = create_exception(
        policy_host,
        operator,
        environment,
        rule="change-cap",
        resource="*",
        reason="migration",
        expires_at=later(days=1),
    )
    assert created.status_code == 201, created.text

    effective = get_json(policy_host, f"runtime-cloud/environments/{environment}/policy", mint(tenant, scopes=READ))

    assert effective["source"] == "files" and effective["environment_class"] == "non-production"
    assert [layer["path"] for layer in effective["layers"]] == ["installation.yaml", f"tenants/{tenant}/tenant.yaml"]
    assert [rule["id"] for rule in effective["layers"][1]["bundle"]["rules"]] == ["tenant-rule"]
    [run] = runs_of(policy_host, requester, environment)
    assert effective["bundle_digest"] == run["policy"]["bundle_digest"]
    assert [e["id"] for e in effective["exceptions"]] == [created.json()["id"]]
    stranger = mint(f"other-{unique('t')}", scopes=READ)
    assert (
        policy_host.request("GET", f"runtime-cloud/environments/{environment}/policy", token=stranger).status_code
        == 404
    )


def test_exceptions_are_operator_only_authored_expiring_idempotent_and_tenant_scoped(policy_host, policy_tree, mint):
    tenant = policy_tenant(policy_tree)
    requester, operator = tokens(mint, tenant)
    environment = applied_environment(policy_host, requester)
    body: dict[str, Any] = {
        "rule": "change-cap",
        "resource": "queue/orders",
        "reason": "why",
        "expires_at": later(days=2),
    }
    path = f"runtime-cloud/environments/{environment}/policy/exceptions"

    assert create_exception(policy_host, requester, environment, **body).status_code == 403  # not an Operator
    for field, value, where in (
        ("expires_at", later(days=-1), "/expires_at"),
        ("expires_at", later(days=400), "/expires_at"),
        ("expires_at", "2030-01-01T00:00:00", "/expires_at"),
        ("rule", "Not A Rule", "/rule"),
        ("reason", "", "/reason"),
    ):
        refused = create_exception(policy_host, operator, environment, **{**body, field: value})
        assert refused.status_code == 422, (field, refused.text)
        assert [error["path"] for error in refused.json()["errors"]] == [where]
    assert create_exception(policy_host, operator, unique("never"), **body).status_code == 404

    key = {"Idempotency-Key": f"exc-{unique('k')}"}
    first = policy_host.request("POST", path, token=operator, json=body, headers=key)
    again = policy_host.request("POST", path, token=operator, json=body, headers=key)
    other = policy_host.request("POST", path, token=operator, json={**body, "reason": "else"}, headers=key)
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    exception = first.json()
    assert again.json()["id"] == exception["id"] and exception["created_by"] == "studio-bob"
    assert exception["created_by_client"] == "studio-bob" and "tenant" not in exception

    stranger = mint(
        f"other-{unique('t')}", scopes=["factory.runtime.write", "factory.runtime.read"], roles=["Operator"]
    )
    mine = f"{path}/{exception['id']}"
    assert policy_host.request("GET", mine, token=stranger).status_code == 404
    assert policy_host.request("DELETE", mine, token=stranger).status_code == 404
    assert policy_host.request("DELETE", mine, token=requester).status_code == 403

    revoked = policy_host.request("DELETE", mine, token=operator)
    assert revoked.status_code == 200 and revoked.json()["active"] is False
    assert revoked.json()["revoked_by"] == "studio-bob"
    repeated = policy_host.request("DELETE", mine, token=operator).json()
    assert repeated["revoked_at"] == revoked.json()["revoked_at"]
    listed = get_json(policy_host, path, requester)["exceptions"]
    assert [(e["id"], e["active"]) for e in listed] == [(exception["id"], False)]
