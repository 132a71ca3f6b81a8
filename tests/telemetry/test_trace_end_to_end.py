"""One declaration, one connected trace: HTTP request -> orchestration -> activities -> storage calls.

A host of its own (with an Azurite of its own, so no other host takes its
promotions) writes OTLP JSON lines to a temporary folder, as ``make run`` does
under ``.data/telemetry``; the test reads them back.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.data.tables import TableClient
from azure.storage.queue import QueueClient

from devhost.azurite import Azurite
from shared.platform.telemetry.files import read_spans
from tests.conftest import app_settings
from tests.provisioning.helpers import READ, WRITE, runs_of, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, key_dir: Path) -> Iterator[tuple[HostProcess, Azurite, Path]]:
    azurite = Azurite(tmp_path_factory.mktemp("azurite-telemetry"), persist=False).start()
    directory = tmp_path_factory.mktemp("telemetry")
    log = tmp_path_factory.mktemp("logs") / "telemetry-host.log"
    settings = app_settings(
        azurite,
        key_dir,
        RuntimeCloud__Telemetry__LocalDirectory=str(directory),
        RuntimeCloud__Telemetry__MetricIntervalSeconds="1",
    )
    host = HostProcess(Path(__file__).resolve().parents[2], settings, log).start()
    try:
        yield host, azurite, directory
    finally:
        host.stop()
        azurite.stop(grace_seconds=0.5)


def _run_spans(directory: Path, run_id: str, names: set[str]) -> list[dict]:
    """The spans of the run's trace, once the activities named ``names`` have been written."""

    def ready() -> list[dict] | None:
        spans = read_spans(directory)
        traces = {s["traceId"] for s in spans if s["attributes"].get("run_id") == run_id}
        found = [s for s in spans if s["traceId"] in traces]
        # A process writes a span when it ends, so a parent (a runner job's own span) can land after
        # its children: wait until only the trace's root lacks its parent.
        ids = {s["spanId"] for s in found}
        orphans = [s for s in found if s.get("parentSpanId", "") not in ids]
        return found if names <= {s["name"] for s in found} and len(orphans) <= 1 else None

    return wait_until(ready, timeout=30, message=f"the spans {names} of run {run_id}")


def _check_connected(spans: list[dict], trace_id: str, root_name: str, run_id: str) -> None:
    strays = sorted(s["name"] for s in spans if s["traceId"] != trace_id)
    assert {s["traceId"] for s in spans} == {trace_id}, f"the run's spans are in one trace, the caller's: {strays}"
    by_id = {s["spanId"]: s for s in spans}

    def parent(span: dict) -> dict | None:
        return by_id.get(span.get("parentSpanId", ""))

    roots = [s for s in spans if parent(s) is None]
    assert [s["name"] for s in roots] == [root_name], [s["name"] for s in roots]
    orchestrations = [s for s in spans if s["name"] == "orchestration:provisioning_run"]
    assert orchestrations and all(parent(s) is roots[0] for s in orchestrations)
    activities = [s for s in spans if s["name"].startswith("activity:provisioning_")]
    assert {s["name"] for s in activities} >= {
        "activity:provisioning_plan",
        "activity:provisioning_apply",  # a run that needs no approval ends in its apply step
    }
    for activity in activities:
        assert parent(activity) in orchestrations
        assert activity["attributes"]["run_id"] == run_id
        assert activity["attributes"]["tenant_id"] == "tenant-a"
    # storage calls (azure-core's OpenTelemetry tracing) under the activities, and the IaC runner's spans
    under_activities = [s for s in spans if parent(s) in activities]
    assert any(
        s["attributes"].get("az.namespace") == "Microsoft.Storage" or "Table" in s["name"] for s in under_activities
    ), sorted({s["name"] for s in under_activities})
    assert {"iac.plan", "iac.apply"} <= {s["name"] for s in spans}
    assert any(parent(s) is roots[0] and s["name"] != "orchestration:provisioning_run" for s in spans), (
        "the request's own storage calls are in the trace too"
    )


def test_a_declaration_is_one_trace_from_request_to_storage(traced, mint):
    host, azurite, directory = traced
    trace_id = uuid.uuid4().hex
    environment = unique("dev")
    answer = host.request(
        "POST",
        "runtime-cloud/specifications",
        token=mint("tenant-a", scopes=WRITE),
        json={"specification": specification(environment)},
        headers={"traceparent": f"00-{trace_id}-{'1' * 16}-01"},
    )
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run_id"]
    wait_for_run_state(host, mint("tenant-a", scopes=READ), run_id, {"applied"})

    spans = _run_spans(directory, run_id, {"activity:provisioning_apply"})
    _check_connected(spans, trace_id, "POST /runtime-cloud/specifications", run_id)
    # the events the run emitted carry the same trace (CloudEvents Distributed Tracing extension)
    table = TableClient.from_connection_string(azurite.connection_string(), "ProvisioningRuns")
    rows = list(table.query_entities("RowKey ge '~outbox|' and RowKey lt '~outbox}'"))
    events = [json.loads(row["Event"]) for row in rows]
    ours = [event for event in events if environment in event["subject"]]
    assert ours and all(event["traceparent"].split("-")[1] == trace_id for event in ours), ours


def test_a_promotion_continues_the_trace_its_message_names(traced, mint):
    host, azurite, directory = traced
    trace_id = uuid.uuid4().hex
    environment = unique("dev")
    message = {
        "promotion_id": unique("promo"),
        "tenant": "tenant-a",
        "environment": environment,
        "requested_by": "delivery",
        "specification": specification(environment),
        "traceparent": f"00-{trace_id}-{'2' * 16}-01",
    }
    queue = QueueClient.from_connection_string(azurite.connection_string(), "promotions")
    queue.send_message(base64.b64encode(json.dumps(message).encode()).decode())
    token = mint("tenant-a", scopes=READ)
    run = wait_until(lambda: runs_of(host, token, environment), timeout=60, message="the promotion's run")[0]
    wait_for_run_state(host, token, run["id"], {"applied"})

    spans = _run_spans(directory, run["id"], {"activity:provisioning_apply"})
    _check_connected(spans, trace_id, "promotion received", run["id"])
    received = next(s for s in spans if s["name"] == "promotion received")
    assert received["links"], "the span links to the host's invocation of the queue trigger"


def test_the_inbox_lag_gauge_and_no_secret_in_the_files(traced, mint):
    host, azurite, directory = traced
    token = mint("tenant-a", scopes=["factory.health.read"])
    assert host.request("GET", "runtime-cloud/health", token=token).status_code == 200

    def lag_points() -> list[dict] | None:
        path = directory / "metrics.jsonl"
        if not path.exists():
            return None
        points = []
        for line in path.read_text().splitlines():
            for resource in json.loads(line)["resourceMetrics"]:
                for scope in resource["scopeMetrics"]:
                    for metric in scope["metrics"]:
                        if metric["name"] == "connectsoft.factory.runtime_cloud.host.inbox_lag":
                            assert metric["unit"] == "s"
                            points += metric["gauge"]["dataPoints"]
        return points or None

    points = wait_until(lag_points, timeout=30, message="the inbox lag gauge")
    modules = {
        attribute["value"]["stringValue"]
        for point in points
        for attribute in point["attributes"]
        if attribute["key"] == "module"
    }
    assert "provisioning" in modules and "inventory" in modules, modules
    host.stop()  # flushes what is buffered
    written = "".join(path.read_text() for path in directory.glob("*.jsonl"))
    account_key = azurite.connection_string().split("AccountKey=")[1].split(";")[0]
    assert account_key not in written
    assert token not in written and token.split(".")[0] not in written
    assert "Bearer" not in written or "Bearer <redacted>" in written
