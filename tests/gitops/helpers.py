"""GitOps test helpers: signed webhooks, the poll, the ledger, and specifications to commit.

Repositories are :class:`bench._git.BareRepository` (bare, as a Git server keeps
them; one helper for the tests and the benchmark) under the folder the test
hosts allow (``tests.conftest.git_sources_root``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from bench._git import FILE as FILE  # re-exported: the tests name the file they commit
from bench._git import BareRepository as BareRepository
from shared.gitops.signatures import sign
from tests.support.host import HostProcess, wait_until

SECRET = "test-webhook-secret-0123456789abcdef"  # tests/conftest.py: RuntimeCloudGitOps__WebhookSecret
OPERATOR = {"scopes": ["factory.runtime.write", "factory.runtime.read"], "roles": ["Operator"]}
READER = {"scopes": ["factory.runtime.read"]}


def spec_yaml(environment: str, environment_class: str = "non-production", queues: tuple[str, ...] = ("a",)) -> bytes:
    suffix = environment[-8:]
    resources = "".join(f"  - type: queue\n    name: gq{name}-{suffix}\n" for name in queues)
    return (
        f"environment: {environment}\nenvironment_class: {environment_class}\n"
        f"target: local-storage\nrunner: embedded\nresources:\n{resources}"
    ).encode()


def bind(host: HostProcess, token: str, environment: str, repository: Path, **extra: Any) -> Any:
    body = {"repository": str(repository), "path": FILE, "branch": "main", **extra}
    return host.request("PUT", f"runtime-cloud/environments/{environment}/gitops", token=token, json=body)


def github_push(
    host: HostProcess, tenant: str, environment: str, commit: str, branch: str = "main", secret: str = SECRET
) -> Any:
    body = json.dumps(
        {"ref": f"refs/heads/{branch}", "after": commit, "repository": {"clone_url": "https://example.com/r.git"}}
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-Hub-Signature-256": sign(secret.encode(), body),
    }
    return host.request("POST", _hook(tenant, environment), data=body, headers=headers)


def azure_devops_push(host: HostProcess, tenant: str, environment: str, commit: str, secret: str = SECRET) -> Any:
    """Azure DevOps service hooks authenticate with Basic authentication (the password is the secret)."""
    body = {
        "eventType": "git.push",
        "resource": {
            "refUpdates": [{"name": "refs/heads/main", "oldObjectId": "0" * 40, "newObjectId": commit}],
            "repository": {"remoteUrl": "https://dev.azure.com/contoso/app/_git/desired"},
        },
    }
    basic = base64.b64encode(f"azure-devops:{secret}".encode()).decode()
    return host.request("POST", _hook(tenant, environment), json=body, headers={"Authorization": f"Basic {basic}"})


def _hook(tenant: str, environment: str) -> str:
    return f"runtime-cloud/gitops/webhooks/{tenant}/{environment}"


def run_poll(host: HostProcess) -> None:
    """Run the poll timer now (through the host's admin endpoint, as an operator would)."""
    answer = host.request("POST", "admin/functions/gitops_poll", json={"input": ""})
    assert answer.status_code == 202, answer.text


def status(host: HostProcess, token: str, environment: str) -> dict[str, Any]:
    answer = host.request("GET", f"runtime-cloud/environments/{environment}/gitops/status", token=token)
    assert answer.status_code == 200, answer.text
    return answer.json()


def wait_for_syncs(host: HostProcess, token: str, environment: str, at_least: int) -> dict[str, Any]:
    """Wait until the binding has handled ``at_least`` syncs (its ledger counts every one)."""
    return wait_until(
        lambda: (s := status(host, token, environment))["sync_attempts"] >= at_least and s,
        timeout=90,
        interval=0.3,
        message=f"{environment} to handle {at_least} sync(s)",
    )


def sync_now(host: HostProcess, token: str, environment: str) -> Any:
    return host.request("POST", f"runtime-cloud/environments/{environment}/gitops/sync", token=token)
