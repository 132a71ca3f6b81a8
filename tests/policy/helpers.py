"""Helpers for policy gate tests: bundle trees, tenants with layers of their own, a GovernanceHost stand-in."""

from __future__ import annotations

import functools
import http.server
import threading
import uuid
from pathlib import Path
from typing import Any

import yaml

from devhost.azurite import free_port
from tests.provisioning.helpers import WRITE
from tests.support.host import HostProcess, wait_until

OPERATOR_ROLES = ["Operator"]

INSTALLATION: dict[str, Any] = {
    "apiVersion": "runtime-cloud.policy/v1",
    "name": "test-installation",
    "parameters": {"types": ["queue", "blob-container", "table"], "regions": ["local"], "max_changes": 5},
    "rules": [
        {
            "id": "allowed-resource-types",
            "scope": "change",
            "expression": "change.type in params.types",
            "messageExpression": '"resource type " + change.type + " is not allowed"',
        },
        {
            "id": "allowed-regions",
            "scope": "plan",
            "expression": "target.region in params.regions",
            "messageExpression": '"region " + target.region + " is not allowed"',
        },
        {
            "id": "change-cap",
            "scope": "plan",
            "expression": "plan.total <= params.max_changes",
            "messageExpression": '"the run changes " + string(plan.total) + " resources; at most 5"',
        },
    ],
}

PRODUCTION: dict[str, Any] = {
    "apiVersion": "runtime-cloud.policy/v1",
    "name": "test-production",
    "rules": [
        {
            "id": "no-deletes-in-production",
            "scope": "change",
            "match": 'change.action in ["delete", "replace"]',
            "expression": "false",
            "messageExpression": '"deleting " + change.address + " in production needs an exception"',
        },
        {
            "id": "team-metadata",
            "enforcement": "warn",
            "scope": "change",
            "match": 'change.type == "queue" && change.action in ["create", "update"]',
            "expression": '"team" in change.metadata',
            "message": 'the queue has no "team" metadata',
        },
    ],
}


def write_layer(tree: Path, path: str, bundle: dict[str, Any]) -> Path:
    file = tree / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(yaml.safe_dump(bundle, sort_keys=False))
    return file


def policy_tenant(tree: Path, rules: list[dict[str, Any]] | None = None) -> str:
    """A tenant of the test's own, with a tenant layer holding ``rules`` (none: no tenant layer)."""
    tenant = f"pol-{uuid.uuid4().hex[:10]}"
    if rules:
        layer = {"apiVersion": "runtime-cloud.policy/v1", "name": f"tenant {tenant}", "rules": rules}
        write_layer(tree, f"tenants/{tenant}/tenant.yaml", layer)
    return tenant


def tokens(mint: Any, tenant: str) -> tuple[str, str]:
    """(requester, operator): two people of the tenant."""
    return (
        mint(tenant, scopes=WRITE, client_id="studio-alice"),
        mint(tenant, scopes=WRITE, roles=OPERATOR_ROLES, client_id="studio-bob"),
    )


def get_json(host: HostProcess, path: str, token: str, status: int = 200) -> Any:
    answer = host.request("GET", path, token=token)
    assert answer.status_code == status, answer.text
    return answer.json()


def receipt(host: HostProcess, token: str, run_id: str, kind: str) -> dict[str, Any]:
    document = get_json(host, f"runtime-cloud/runs/{run_id}/receipts/{kind}", token)
    assert document["verified"] is True
    return dict(document["receipt"])


def approve(host: HostProcess, operator: str, run: dict[str, Any]) -> Any:
    return host.request(
        "POST",
        f"runtime-cloud/runs/{run['id']}/approve",
        token=operator,
        json={"plan_digest": run["plan_digest"], "reason": "reviewed"},
    )


def create_exception(host: HostProcess, operator: str, environment: str, **fields: Any) -> Any:
    return host.request(
        "POST", f"runtime-cloud/environments/{environment}/policy/exceptions", token=operator, json=fields
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the tree; records each request's path and ``Authorization`` header, and (when the stand-in
    requires a token) answers 401 to a request without that bearer token, as GovernanceHost would."""

    def __init__(self, *args: Any, stand_in: GovernanceHostStandIn, **kwargs: Any) -> None:
        self._stand_in = stand_in
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        authorization = self.headers.get("Authorization")
        self._stand_in.requests.append((self.path, authorization))
        required = self._stand_in.required_token
        if required is not None and authorization != f"Bearer {required}":
            self.send_error(401, "a bearer token is required")
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class GovernanceHostStandIn:
    """A static HTTP server serving a bundle tree, standing in for GovernanceHost; stop it to take it down."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization header), as they came
        self.required_token: str | None = None  # set: answer 401 unless "Bearer <it>" is presented

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/governance/"

    def start(self) -> GovernanceHostStandIn:
        served = self.root.parent / f"{self.root.name}-served"
        served.mkdir(exist_ok=True)
        link = served / "governance"
        if not link.exists():
            link.symlink_to(self.root, target_is_directory=True)
        handler = functools.partial(_QuietHandler, directory=str(served), stand_in=self)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def wait_for_exception_to_lapse(host: HostProcess, token: str, environment: str, exception_id: str) -> None:
    path = f"runtime-cloud/environments/{environment}/policy/exceptions/{exception_id}"
    wait_until(lambda: get_json(host, path, token)["active"] is False, timeout=60, message="the exception to expire")
