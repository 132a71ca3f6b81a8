"""Issue 24: no token can pass for one of the host's own actors (the autoscaler, GitOps, restore, ...).

A token whose ``oid`` or ``sub`` is a system principal's name is refused on every endpoint, and the
shipped production policy's one standing exemption (the autoscaler deleting drained slots of its
``pool-*`` environment) asks for the principal's kind, which only the host's own code sets: a token's
run or a promotion in such an environment is denied, whatever name it carries.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.platform.auth.principal import PrincipalKind, SystemPrincipal
from shared.provisioning.runs import Run
from tests.policy.helpers import OPERATOR_ROLES, approve
from tests.provisioning.helpers import (
    WRITE,
    declare,
    runs_of,
    send_promotion,
    specification,
    target_queue_names,
    unique,
    wait_for_run_state,
)
from tests.support.host import HostProcess, wait_until

PROBLEM = "application/problem+json"
FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}
EVERY_SCOPE = [
    "factory.health.read",
    "factory.meta.read",
    "factory.runtime.read",
    "factory.runtime.write",
    "factory.capacity.lease",
]
EVERY_ROLE = ["Observer", "Operator", "PlatformAdmin"]
REFUSED_DETAIL = "the token's principal is not accepted"


def _bearer_operations(host: HostProcess, mint: Any) -> list[tuple[str, str]]:
    """Every (method, path) the API document says takes a bearer token, path parameters filled in."""
    answer = host.request("GET", "runtime-cloud/openapi.json", token=mint("tenant-a", scopes=["factory.meta.read"]))
    assert answer.status_code == 200, answer.text
    operations = []
    for path, item in answer.json()["paths"].items():
        for method, operation in item.items():
            if any("bearer" in requirement for requirement in operation.get("security", [])):
                operations.append((method.upper(), _filled(path, operation)))
    return operations


def _filled(path: str, operation: dict[str, Any]) -> str:
    """``path`` with each parameter replaced by a value its pattern accepts (a route constraint would
    otherwise answer 404 before the function, and authentication, ever ran)."""
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path":
            pattern = parameter.get("schema", {}).get("pattern", "")
            choices = re.fullmatch(r"\^?\(?([a-z|-]+)\)?\$?", pattern)
            value = choices.group(1).split("|")[0] if choices and "|" in pattern else "abc1"
            path = path.replace("{" + parameter["name"] + "}", value)
    return path.lstrip("/")


def assert_refused(answer: Any) -> None:
    assert answer.status_code == 401, (answer.request.method, answer.request.url, answer.text)
    assert answer.headers["Content-Type"].startswith(PROBLEM)
    assert answer.json()["type"] == "urn:runtime-cloud:problem:unauthorized"
    assert answer.json()["detail"] == REFUSED_DETAIL  # and no word of which names are reserved


def test_a_token_with_sub_autoscaler_gets_401_on_every_endpoint(runtime_host, mint):
    operations = _bearer_operations(runtime_host, mint)
    impostor = mint("platform", scopes=EVERY_SCOPE, roles=EVERY_ROLE, client_id="autoscaler")  # sub=autoscaler

    answers = [runtime_host.request(method, path, token=impostor, json={}) for method, path in operations]

    assert len(operations) > 30
    for answer in answers:
        assert_refused(answer)


@pytest.mark.parametrize(
    "claims",
    [
        {"subject": "gitops"},
        {"subject": "AutoScaler"},  # any case
        {"subject": "ＡＵＴＯＳＣＡＬＥＲ"},  # full-width letters fold onto the name
        {"object_id": "restore"},
        {"object_id": "reconciler", "subject": "someone"},
        {"object_id": "someone", "subject": "runtime-cloud"},  # either claim
        {"subject": "system:anything-new"},  # the reserved prefix
    ],
)
def test_a_token_naming_any_system_principal_is_refused(runtime_host, mint, claims):
    token = mint("tenant-a", scopes=["factory.runtime.read"], **claims)

    assert_refused(runtime_host.request("GET", "runtime-cloud/runs", token=token))


def test_a_name_that_only_resembles_a_system_principal_is_let_in(runtime_host, mint):
    for name in ("autoscaler-team", "alice.gitops", "systems:ops"):
        token = mint("tenant-a", scopes=["factory.runtime.read"], subject=name)
        # An environment of this test's own: the answer depends on the token alone, not on the rows that other
        # tests of the session leave in tenant-a.
        answer = runtime_host.request("GET", "runtime-cloud/runs?environment=principals-only", token=token)
        assert answer.status_code == 200, (name, answer.text)


def _production_pool(host: HostProcess, mint: Any, tenant: str) -> tuple[str, dict[str, Any], str]:
    """A production environment named like a pool's, applied by a person: (environment, spec, operator)."""
    requester = mint(tenant, scopes=WRITE, client_id="studio-alice")
    operator = mint(tenant, scopes=WRITE, roles=OPERATOR_ROLES, client_id="studio-bob")
    environment = unique("pool-x")
    suffix = environment[-8:]
    spec = specification(
        environment, "production", resources=[{"type": "queue", "name": f"slot-{suffix}-{n}"} for n in range(2)]
    )
    run = wait_for_run_state(
        host, requester, declare(host, requester, spec).json()["run_id"], FINAL | {"awaiting-approval"}
    )
    assert run["state"] == "awaiting-approval", run
    assert run["requested_by"] == "studio-alice" and run["requested_by_kind"] == "person"
    assert approve(host, operator, run).status_code == 200
    assert wait_for_run_state(host, requester, run["id"], FINAL)["state"] == "applied"
    return environment, spec, operator


def _denied(run: dict[str, Any]) -> None:
    assert run["state"] == "failed" and run["failure_reason"] == "policy-denied", run
    assert run["policy"]["denied_rules"] == ["no-deletes-in-production"]


def test_a_tokens_production_delete_in_a_pool_environment_is_denied_by_the_shipped_policy(runtime_host, azurite, mint):
    tenant = unique("sysp")
    environment, spec, _ = _production_pool(runtime_host, mint, tenant)
    dropped = spec["resources"][1]["name"]
    # A service's own token (application permissions, no delegated scopes) is a service, never a system
    # principal; and one naming the autoscaler would not get this far (401).
    service = mint(tenant, roles=["factory.runtime.write", "factory.runtime.read"], object_id="scaler-svc")

    shrunk = {**spec, "resources": spec["resources"][:1]}
    run = wait_for_run_state(
        runtime_host,
        service,
        declare(runtime_host, service, shrunk).json()["run_id"],
        FINAL | {"awaiting-approval"},
    )

    _denied(run)
    assert (run["requested_by"], run["requested_by_kind"]) == ("scaler-svc", "service")
    assert dropped in target_queue_names(azurite)  # nothing was deleted


def test_a_promotion_naming_the_autoscaler_is_not_the_autoscaler(runtime_host, azurite, mint):
    tenant = unique("sysp")
    environment, spec, _ = _production_pool(runtime_host, mint, tenant)
    reader = mint(tenant, scopes=["factory.runtime.read"])
    dropped = spec["resources"][1]["name"]
    promotion = {
        "promotion_id": unique("promo"),
        "tenant": tenant,
        "environment": environment,
        "requested_by": "autoscaler",  # delivery's word, not the host's own actor
        "specification": {**spec, "resources": spec["resources"][:1]},
    }

    send_promotion(azurite, promotion)
    ended = FINAL - {"applied"}  # the first run applied; the promotion's must end otherwise
    newest = wait_until(
        lambda: next((r for r in runs_of(runtime_host, reader, environment) if r["state"] in ended), None),
        timeout=90,
        message="the promotion's run to end",
    )

    _denied(newest)
    assert (newest["requested_by"], newest["requested_by_kind"]) == ("autoscaler", "delivery")
    assert dropped in target_queue_names(azurite)


def test_a_run_recorded_before_kinds_were_kept_reads_as_a_tokens_person_even_when_named_autoscaler():
    row = {  # a stored run's document as written before requested_by_kind existed
        "id": "run-1",
        "tenant": "platform",
        "environment": "pool-old",
        "environment_class": "production",
        "target": "local-storage",
        "runner": "embedded",
        "state": "queued",
        "ordinal": 1,
        "requested_by": "autoscaler",
        "idempotency_key": "autoscaling.old.2",
        "specification_digest": "0" * 64,
        "source": {"kind": "autoscaling"},
        "created_at": "2026-01-01T00:00:00+00:00",
    }

    requester = Run.model_validate(row).requester

    assert (requester.principal, requester.kind) == ("autoscaler", PrincipalKind.PERSON)
    assert not requester.is_system(SystemPrincipal.AUTOSCALER)
