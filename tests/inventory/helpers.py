"""Helpers for inventory tests: applied environments, hands-on changes in the target, scans."""

from __future__ import annotations

from typing import Any

from azure.storage.queue import QueueServiceClient

from devhost.azurite import TARGET_ACCOUNT
from shared.iac.tags import ManagementTags
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until

OPERATOR_SCOPES = WRITE


def target_queues(azurite) -> QueueServiceClient:
    return QueueServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT))


def applied_environment(host: HostProcess, token: str, prefix: str = "inv") -> tuple[str, dict[str, Any]]:
    """A non-production environment declared over HTTP and applied; (environment, its specification)."""
    environment = unique(prefix)
    spec = specification(environment)
    answer = declare(host, token, spec)
    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(host, token, answer.json()["run_id"], {"applied", "failed"})
    assert run["state"] == "applied", run
    return environment, spec


def names(spec: dict[str, Any]) -> dict[str, str]:
    by_type = {resource["type"]: resource["name"] for resource in spec["resources"]}
    return {"queue": by_type["queue"], "container": by_type["blob-container"]}


def tags_of(tenant: str, environment: str) -> dict[str, str]:
    return ManagementTags(tenant=tenant, environment=environment).as_metadata()


def scan(host: HostProcess, token: str, environment: str) -> dict[str, Any]:
    """Scan now, as a caller does: a 409 ``scan-in-progress`` (the scan the applied run's event started, say,
    found by a queue trigger a moment later) is asked again once that scan has had time to end."""

    def scanned() -> dict[str, Any] | None:
        answer = host.request("POST", f"runtime-cloud/environments/{environment}/scan", token=token)
        if answer.status_code == 409 and answer.json()["type"] == "urn:runtime-cloud:problem:scan-in-progress":
            return None
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    return wait_until(scanned, timeout=60, interval=0.5, message=f"a scan of {environment} of its own")


def findings(host: HostProcess, token: str, environment: str, state: str = "open") -> list[dict[str, Any]]:
    answer = host.request("GET", f"runtime-cloud/environments/{environment}/findings?state={state}", token=token)
    assert answer.status_code == 200, answer.text
    return answer.json()["findings"]


def proposals(host: HostProcess, token: str, environment: str, state: str | None = None) -> list[dict[str, Any]]:
    query = f"environment={environment}" + (f"&state={state}" if state else "")
    answer = host.request("GET", f"runtime-cloud/proposals?{query}", token=token)
    assert answer.status_code == 200, answer.text
    return answer.json()["proposals"]


def accept(host: HostProcess, token: str, proposal_id: str, option: str, **extra: Any) -> Any:
    return host.request(
        "POST", f"runtime-cloud/proposals/{proposal_id}/accept", token=token, json={"option": option, **extra}
    )
