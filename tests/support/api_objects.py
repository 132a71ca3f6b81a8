"""One of every object the HTTP API serves, made by one tenant through the API, for tests that walk every route.

An applied environment (a run with receipts and outputs), a hands-on change
in the target found by a scan (a finding and a proposal), an ignore rule, a
lease, and a pool dedicated to the tenant. ``path_values`` names each route
parameter's value, so a test can call any route on these objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devhost.azurite import Azurite
from tests.inventory.helpers import findings, names, proposals, scan, target_queues
from tests.provisioning.helpers import declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess


@dataclass(frozen=True)
class ApiObjects:
    tenant: str
    environment: str
    run_id: str
    idempotency_key: str
    scan_id: str
    finding_id: str
    proposal_id: str
    rule_id: str
    lease_id: str
    pool_id: str
    edition: str
    policy_exception_id: str = ""

    def path_values(self) -> dict[str, str]:
        """A value for every route parameter name: ``{id}`` is qualified by the collection it follows."""
        return {
            "environment": self.environment,
            "scan_id": self.scan_id,
            "finding_id": self.finding_id,
            "rule_id": self.rule_id,
            "kind": "plan",
            "tenant": self.tenant,
            "edition": self.edition,
            "exception_id": self.policy_exception_id,
            "runs/{id}": self.run_id,
            "proposals/{id}": self.proposal_id,
            "leases/{id}": self.lease_id,
            "pools/{id}": self.pool_id,
        }

    def identifiers(self) -> dict[str, str]:
        """What names this tenant's data: an answer to another tenant holds none of it."""
        return {
            "tenant": self.tenant,
            "environment": self.environment,
            "run": self.run_id,
            "scan": self.scan_id,
            "finding": self.finding_id,
            "proposal": self.proposal_id,
            "ignore rule": self.rule_id,
            "lease": self.lease_id,
            "pool": self.pool_id,
            "policy exception": self.policy_exception_id,
        }

    def value_for(self, path: str, name: str) -> str | None:
        """The value of parameter ``name`` in the route ``path`` (``/runtime-cloud/runs/{id}/...``)."""
        values = self.path_values()
        for collection in ("runs", "proposals", "leases", "pools"):
            if f"/{collection}/{{{name}}}" in path:
                return values.get(f"{collection}/{{{name}}}")
        return values.get(name)


def create_api_objects(
    host: HostProcess, azurite: Azurite, tenant: str, token: str, admin_token: str, edition: str = "standard"
) -> ApiObjects:
    """``token`` holds the runtime scopes, ``capacity.lease`` and the Operator role; ``admin_token``
    is a PlatformAdmin's (for the dedicated pool)."""
    environment, key = unique("api"), unique("declared")
    spec = specification(environment)
    run_id = _ok(declare(host, token, spec, key), 202)["run_id"]
    assert wait_for_run_state(host, token, run_id, {"applied", "failed"})["state"] == "applied"
    target_queues(azurite).delete_queue(names(spec)["queue"])  # a hands-on change: a finding and a proposal
    scan_id = scan(host, token, environment)["scan_id"]
    [finding] = findings(host, token, environment)
    [proposal] = proposals(host, token, environment)
    rule = _ok(
        host.request(
            "POST",
            f"runtime-cloud/environments/{environment}/ignore-rules",
            token=token,
            json={"resource": f"blob-container/{names(spec)['container']}", "reason": "kept for a test of every route"},
        ),
        201,
    )
    exception = _ok(
        host.request(
            "POST",
            f"runtime-cloud/environments/{environment}/policy/exceptions",
            token=token,
            json={
                "rule": "change-cap",
                "resource": "*",
                "reason": "kept for a test of every route",
                "expires_at": _in_a_day(),
            },
        ),
        201,
    )
    lease = _ok(
        host.request(
            "POST",
            "runtime-cloud/leases",
            token=token,
            json={"kind": "build", "purpose": "build", "holder": f"{tenant}-worker", "ttl_seconds": 600},
        ),
        201,
    )
    # Released at once (it stays readable): a held slot of the shared pool would starve other tests.
    assert host.request("DELETE", f"runtime-cloud/leases/{lease['lease_id']}", token=token).status_code == 204
    pool_id = f"dedicated-{environment}"[:63]
    _ok(
        host.request(
            "PUT",
            f"runtime-cloud/pools/{pool_id}",
            token=admin_token,
            json={"kind": "sandbox", "size": 1, "min": 0, "max": 2, "scope": "dedicated", "tenant": tenant},
        ),
        201,
    )
    return ApiObjects(
        tenant=tenant,
        environment=environment,
        run_id=run_id,
        idempotency_key=key,
        scan_id=scan_id,
        finding_id=finding["id"],
        proposal_id=proposal["id"],
        rule_id=rule["id"],
        lease_id=lease["lease_id"],
        pool_id=pool_id,
        edition=edition,
        policy_exception_id=exception["id"],
    )


def _in_a_day() -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(days=1)).isoformat()


def _ok(answer: Any, status: int = 200) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    return answer.json()
