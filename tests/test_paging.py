"""Issue 27: every list pages (``limit`` + an opaque, sealed ``continuation``) at a bounded cost per page.

Thousands of runs are written straight into Azurite (batches of 100, as the
store keeps them); the host pages through them over HTTP, and the store's page
read is measured in-process by counting the storage calls and the entities
Azurite answers: a page deep in the list costs what the first one costs.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableClient

from shared.platform.storage.clients import clients_from_connection_string
from shared.platform.storage.streams import stream_key
from shared.provisioning.runs import Run, RunState, SourceInfo, TimelineEntry
from shared.provisioning.store import RUNS_TABLE, ProvisioningStore

ENVIRONMENTS = ("env-a", "env-b", "env-c")
RUNS_PER_ENVIRONMENT = 1000
BATCH = 100
READ = ["factory.runtime.read"]
PROBLEM_MEDIA_TYPE = "application/problem+json"


@dataclass
class Seeded:
    tenant: str
    run_ids: dict[str, list[str]]  # environment -> its run ids, in key order


def _run(tenant: str, environment: str, number: int) -> Run:
    at = f"2026-01-01T00:{number // 60 % 60:02d}:{number % 60:02d}+00:00"
    return Run(
        id=f"{uuid.uuid4().hex}",
        tenant=tenant,
        environment=environment,
        environment_class="development",
        target="local",
        runner="local",
        state=RunState.APPLIED if number % 2 else RunState.FAILED,
        ordinal=number + 1,
        requested_by="paging-test",
        idempotency_key=f"key-{environment}-{number}",
        specification_digest="0" * 64,
        source=SourceInfo(kind="inline"),
        created_at=at,
        timeline=[TimelineEntry(state=RunState.QUEUED, at=at)],
    )


def _entity(run: Run) -> dict[str, Any]:
    return {
        "PartitionKey": stream_key(run.tenant, run.environment),
        "RowKey": f"run|{run.id}",
        "State": run.state.value,
        "Ordinal": run.ordinal,
        "CreatedAt": run.created_at,
        "Document": run.model_dump_json(),
    }


def _in_batches(table: TableClient, operation: str, entities: list[dict[str, Any]]) -> None:
    for start in range(0, len(entities), BATCH):
        table.submit_transaction([(operation, entity) for entity in entities[start : start + BATCH]])


@pytest.fixture(scope="module")
def seeded(azurite) -> Iterator[Seeded]:
    """Three environments of a tenant of its own, a thousand runs each, and their index rows; removed after."""
    tenant = f"paging-{uuid.uuid4().hex[:8]}"
    table = clients_from_connection_string(azurite.connection_string()).tables.get_table_client(RUNS_TABLE)
    with contextlib.suppress(ResourceExistsError):  # the host makes it at start, which may come later
        table.create_table()
    run_ids: dict[str, list[str]] = {}
    written: list[dict[str, Any]] = []
    for environment in ENVIRONMENTS:
        entities = [_entity(_run(tenant, environment, n)) for n in range(RUNS_PER_ENVIRONMENT)]
        _in_batches(table, "upsert", entities)
        written.extend(entities)
        run_ids[environment] = sorted(e["RowKey"].removeprefix("run|") for e in entities)
    index = [{"PartitionKey": tenant, "RowKey": f"env|{name}", "Environment": name} for name in ENVIRONMENTS]
    _in_batches(table, "upsert", index)
    yield Seeded(tenant, run_ids)
    for partition in {e["PartitionKey"] for e in written + index}:
        keys = [{"PartitionKey": e["PartitionKey"], "RowKey": e["RowKey"]} for e in written + index]
        _in_batches(table, "delete", [k for k in keys if k["PartitionKey"] == partition])


@dataclass
class Reads:
    """What Azurite answered the store's queries: one entry per call, the number of entities in it."""

    entities_per_call: list[int] = field(default_factory=list)

    def hook(self, response: Any) -> None:
        request = response.http_request
        if request.method == "GET" and f"/{RUNS_TABLE}()" in request.url:
            self.entities_per_call.append(len(json.loads(response.http_response.text())["value"]))


def _counted_store(azurite) -> tuple[ProvisioningStore, Reads]:
    reads = Reads()
    clients = clients_from_connection_string(azurite.connection_string(), raw_response_hook=reads.hook)
    return ProvisioningStore(clients, "paging-test"), reads


def test_a_deep_page_reads_as_many_rows_as_the_first(azurite, seeded: Seeded):
    store, reads = _counted_store(azurite)

    first, continuation = store.runs_page(seeded.tenant, None, None, limit=50, continuation=None)
    first_page_reads = list(reads.entities_per_call)
    for _ in range(50):  # 2,550 rows deep: into the last environment's partition
        _, continuation = store.runs_page(seeded.tenant, None, None, limit=50, continuation=continuation)
    reads.entities_per_call.clear()
    deep, _ = store.runs_page(seeded.tenant, None, None, limit=50, continuation=continuation)

    assert first_page_reads == [50]  # one call, the page's own 50 rows
    assert reads.entities_per_call == [50]  # the same at depth: nothing before the page is read again
    assert {run.environment for run in first} == {"env-a"} and {run.environment for run in deep} == {"env-c"}


def test_a_filtered_page_reads_only_its_own_rows(azurite, seeded: Seeded):
    store, reads = _counted_store(azurite)

    page, continuation = store.runs_page(seeded.tenant, "env-b", RunState.FAILED, limit=30, continuation=None)

    assert len(page) == 30 and {(r.environment, r.state) for r in page} == {("env-b", RunState.FAILED)}
    assert sum(reads.entities_per_call) == 30 and continuation


def _walk(host, token: str, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    continuation = None
    for _ in range(100):
        answer = host.request(
            "GET", path, token=token, params={**params, **({"continuation": continuation} if continuation else {})}
        )
        assert answer.status_code == 200, answer.text
        items.extend(answer.json()[key])
        continuation = answer.json()["continuation"]
        if continuation is None:
            return items
    raise AssertionError(f"{path} did not end within 100 pages")


def test_the_host_pages_through_every_run_once_in_a_stable_order(runtime_host, mint, seeded: Seeded):
    token = mint(seeded.tenant, scopes=READ)

    listed = _walk(runtime_host, token, "runtime-cloud/runs", "runs", limit=200)
    one_environment = _walk(runtime_host, token, "runtime-cloud/runs", "runs", environment="env-b", limit=200)

    expected = [(env, run_id) for env in ENVIRONMENTS for run_id in seeded.run_ids[env]]
    assert [(run["environment"], run["id"]) for run in listed] == expected
    assert [run["id"] for run in one_environment] == seeded.run_ids["env-b"]


def test_the_default_page_is_bounded_and_says_where_to_go_on(runtime_host, mint, seeded: Seeded):
    answer = runtime_host.request("GET", "runtime-cloud/runs", token=mint(seeded.tenant, scopes=READ))

    assert answer.status_code == 200, answer.text
    assert len(answer.json()["runs"]) == 50 and answer.json()["continuation"]


def _problem(answer, pointer: str) -> None:
    assert answer.status_code == 422, answer.text
    assert answer.headers["Content-Type"].startswith(PROBLEM_MEDIA_TYPE)
    assert [error["path"] for error in answer.json()["errors"]] == [pointer], answer.json()


def test_a_continuation_edited_or_used_on_another_list_is_a_422(runtime_host, mint, seeded: Seeded):
    token = mint(seeded.tenant, scopes=READ)
    page = runtime_host.request("GET", "runtime-cloud/runs", token=token, params={"environment": "env-a", "limit": 5})
    continuation = page.json()["continuation"]
    body, _, seal = continuation.partition(".")
    edited = f"{body[:-2]}{'A' if body[-2] != 'A' else 'B'}{body[-1]}.{seal}"

    for params in (
        {"environment": "env-a", "continuation": edited},
        {"environment": "env-b", "continuation": continuation},  # another filter
        {"continuation": continuation},  # no filter: another list
    ):
        _problem(runtime_host.request("GET", "runtime-cloud/runs", token=token, params=params), "/continuation")
    other_tenant = mint(f"{seeded.tenant}-x", scopes=READ)
    answer = runtime_host.request(
        "GET", "runtime-cloud/runs", token=other_tenant, params={"environment": "env-a", "continuation": continuation}
    )
    _problem(answer, "/continuation")


LISTS = [
    ("runtime-cloud/runs", "environment"),
    ("runtime-cloud/runs", "state"),
    ("runtime-cloud/environments", "continuation"),
    ("runtime-cloud/proposals", "environment"),
    ("runtime-cloud/proposals", "state"),
    ("runtime-cloud/environments/env-a/findings", "state"),
    ("runtime-cloud/environments/env-a/ignore-rules", "continuation"),
    ("runtime-cloud/environments/env-a/policy/exceptions", "continuation"),
    ("runtime-cloud/pools", "continuation"),
    ("runtime-cloud/leases", "pool"),
    ("runtime-cloud/leases", "holder"),
]


@pytest.mark.parametrize(("path", "name"), LISTS)
def test_an_empty_filter_is_a_422_naming_it(runtime_host, mint, seeded: Seeded, path: str, name: str):
    token = mint(seeded.tenant, scopes=[*READ, "factory.capacity.lease"])

    _problem(runtime_host.request("GET", path, token=token, params={name: ""}), f"/{name}")


@pytest.mark.parametrize("path", sorted({path for path, _ in LISTS}))
@pytest.mark.parametrize("limit", ["0", "201", "-1", "ten", ""])
def test_a_limit_out_of_bounds_is_a_422(runtime_host, mint, seeded: Seeded, path: str, limit: str):
    token = mint(seeded.tenant, scopes=[*READ, "factory.capacity.lease"])

    _problem(runtime_host.request("GET", path, token=token, params={"limit": limit}), "/limit")


def test_the_environments_list_pages_in_name_order(runtime_host, mint, seeded: Seeded):
    token = mint(seeded.tenant, scopes=READ)

    listed = _walk(runtime_host, token, "runtime-cloud/environments", "environments", limit=2)

    assert [item["environment"] for item in listed] == list(ENVIRONMENTS)
