"""Fixtures of the capacity tests: a client that speaks the capacity API of the session's host.

Every test makes its own pool (unique id and region, so no other pool can
serve its acquires), its own edition and its own tenants, so tests neither
see nor disturb each other on the shared host.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from tests.support.host import HostProcess

ADMIN_SCOPES = ("factory.runtime.write", "factory.runtime.read")
WORKER_SCOPES = ("factory.capacity.lease", "factory.runtime.read")
PROBLEM = "urn:runtime-cloud:problem:"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Pool:
    id: str
    kind: str
    region: str


@dataclass
class CapacityApi:
    host: HostProcess
    mint: Any
    _tokens: dict[str, str] = field(default_factory=dict)
    session: requests.Session = field(default_factory=requests.Session)

    def admin(self) -> str:
        return self._token("platform-ops", ADMIN_SCOPES, ("PlatformAdmin",))

    def worker(self, tenant: str) -> str:
        return self._token(tenant, WORKER_SCOPES, ())

    def _token(self, tenant: str, scopes: tuple[str, ...], roles: tuple[str, ...]) -> str:
        key = f"{tenant}|{scopes}|{roles}"
        if key not in self._tokens:
            self._tokens[key] = self.mint(tenant, scopes=list(scopes), roles=list(roles))
        return self._tokens[key]

    def call(self, method: str, path: str, token: str | None, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if path.startswith(HostProcess.HOST_KEY_PATHS):  # the host's own endpoints want its key
            headers["x-functions-key"] = self.host.master_key
        return self.session.request(method, self.host.url(path), headers=headers, timeout=30, **kwargs)

    def create_pool(self, kind: str = "sandbox", size: int = 2, **spec: Any) -> Pool:
        pool = Pool(unique("pool"), kind, unique("region"))
        answer = self.call(
            "PUT",
            f"runtime-cloud/pools/{pool.id}",
            self.admin(),
            json={"kind": kind, "region": pool.region, "size": size, "min": 0, "max": max(size, 64), **spec},
        )
        assert answer.status_code == 201, answer.text
        return pool

    def create_edition(self, limits: dict[str, int], tenants: list[str]) -> str:
        name = unique("edition")
        answer = self.call(
            "PUT", f"runtime-cloud/quotas/{name}", self.admin(), json={"limits": limits, "tenants": tenants}
        )
        assert answer.status_code == 201, answer.text
        return name

    def tenants_with_limit(self, kind: str, limit: int, count: int = 1) -> list[str]:
        tenants = [unique("tenant") for _ in range(count)]
        self.create_edition({kind: limit}, tenants)
        return tenants

    def acquire(self, tenant: str, pool: Pool, **body: Any) -> requests.Response:
        document = {
            "kind": pool.kind,
            "region": pool.region,
            "purpose": "sandbox",
            "holder": "worker-1",
            "ttl_seconds": 60,
            **body,
        }
        return self.call("POST", "runtime-cloud/leases", self.worker(tenant), json=document)

    def renew(self, tenant: str, lease_id: str, **body: Any) -> requests.Response:
        return self.call("POST", f"runtime-cloud/leases/{lease_id}/renew", self.worker(tenant), json=body or None)

    def release(self, tenant: str, lease_id: str) -> requests.Response:
        return self.call("DELETE", f"runtime-cloud/leases/{lease_id}", self.worker(tenant))

    def lease(self, tenant: str, lease_id: str) -> requests.Response:
        return self.call("GET", f"runtime-cloud/leases/{lease_id}", self.worker(tenant))

    def pool_view(self, pool: Pool) -> dict[str, Any]:
        answer = self.call("GET", f"runtime-cloud/pools/{pool.id}", self.admin())
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture(scope="session")
def capacity(runtime_host: HostProcess, mint: Any) -> CapacityApi:
    return CapacityApi(runtime_host, mint)


def outbox_events(azurite: Any, table: str, partition_prefix: str) -> list[dict[str, Any]]:
    """The CloudEvents a stream (or a family of streams) committed, read from its outbox rows."""
    import json

    from azure.data.tables import TableServiceClient

    client = TableServiceClient.from_connection_string(azurite.connection_string()).get_table_client(table)
    rows = client.query_entities(
        "PartitionKey ge @low and PartitionKey lt @high and RowKey ge '~outbox|'",
        parameters={"low": partition_prefix, "high": partition_prefix + "\uffff"},
    )
    return [json.loads(row["Event"]) for row in rows if row["RowKey"].startswith("~outbox|")]
