"""Helpers for provisioning tests: specifications, promotions, waiting for a run's state."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from devhost.azurite import TARGET_ACCOUNT
from tests.support.host import HostProcess, wait_until

WRITE = ["factory.runtime.write", "factory.runtime.read"]
READ = ["factory.runtime.read"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def specification(
    environment: str,
    environment_class: str = "non-production",
    target: str = "local-storage",
    resources: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    suffix = environment[-8:]
    return {
        "environment": environment,
        "environment_class": environment_class,
        "target": target,
        "runner": "embedded",
        "resources": resources
        if resources is not None
        else [
            {"type": "queue", "name": f"orders-{suffix}", "metadata": {"team": "checkout"}},
            {"type": "blob-container", "name": f"invoices-{suffix}", "metadata": {"retention": "short"}},
        ],
        **extra,
    }


def send_promotion(azurite, document: dict[str, Any] | str) -> None:
    queue = QueueClient.from_connection_string(azurite.connection_string(), "promotions")
    text = document if isinstance(document, str) else json.dumps(document)
    queue.send_message(base64.b64encode(text.encode()).decode())


def runs_of(host: HostProcess, token: str, environment: str) -> list[dict[str, Any]]:
    """Every run of the environment, newest first (the list pages in run id order: every page is read)."""
    runs: list[dict[str, Any]] = []
    params: dict[str, Any] = {"environment": environment, "limit": 200}
    while True:
        answer = host.request("GET", "runtime-cloud/runs", token=token, params=params)
        assert answer.status_code == 200, answer.text
        runs.extend(answer.json()["runs"])
        if not answer.json()["continuation"]:
            return sorted(runs, key=lambda run: run["created_at"], reverse=True)
        params["continuation"] = answer.json()["continuation"]


def wait_for_run_state(
    host: HostProcess, token: str, run_id: str, states: set[str], timeout: float = 90
) -> dict[str, Any]:
    def current() -> dict[str, Any] | None:
        answer = host.request("GET", f"runtime-cloud/runs/{run_id}", token=token)
        return answer.json() if answer.status_code == 200 and answer.json()["state"] in states else None

    return wait_until(current, timeout=timeout, interval=0.3, message=f"run {run_id} to reach {states}")


def target_blobs(azurite) -> BlobServiceClient:
    return BlobServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT))


def target_queue_names(azurite) -> set[str]:
    from azure.storage.queue import QueueServiceClient

    service = QueueServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT))
    return {q.name for q in service.list_queues()}


def declare(host: HostProcess, token: str, spec: dict[str, Any], key: str | None = None) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    return host.request(
        "POST", "runtime-cloud/specifications", token=token, json={"specification": spec}, headers=headers
    )
