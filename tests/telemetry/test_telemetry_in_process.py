"""Telemetry in this process, with in-memory exporters: spans, trace context, gauges, scrubbing, Azure Monitor."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.storage.queue import QueueClient
from opentelemetry.sdk._logs.export import InMemoryLogExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.platform import telemetry
from shared.platform.telemetry import names

REPO = Path(__file__).resolve().parents[2]


class Exporters:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        self.logs = InMemoryLogExporter()


@pytest.fixture(scope="session")
def exporters() -> Exporters:
    """The process's telemetry, once (OpenTelemetry's global providers are set once per process)."""
    found = Exporters()
    configured = telemetry.configure(span_exporter=found.spans, metric_reader=found.metrics, log_exporter=found.logs)
    if configured.mode != "memory":
        pytest.skip(f"telemetry of this process was already configured ({configured.mode})")
    return found


@pytest.fixture
def fresh(exporters: Exporters) -> Iterator[Exporters]:
    exporters.spans.clear()
    exporters.logs.clear()
    yield exporters


def gauge_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def test_a_message_traceparent_is_continued_and_events_carry_it(fresh: Exporters) -> None:
    from shared.platform.events.cloudevents import NewEvent
    from shared.platform.events.outbox import Outbox

    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    body = json.dumps({"tenant": "t", "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
    with telemetry.message_span("promotion received", body, tenant="tenant-a", run="run-1"):
        outbox = Outbox(None, None, "/runtime-cloud")  # type: ignore[arg-type] - only the envelope is made
        envelope = outbox._envelope("stream", NewEvent("X", "s", "tenant-a"), 1, "now")
    spans = fresh.spans.get_finished_spans()
    assert [s.name for s in spans] == ["promotion received"]
    assert format(spans[0].context.trace_id, "032x") == trace_id
    assert spans[0].attributes == {"tenant_id": "tenant-a", "run_id": "run-1"}
    assert envelope.to_dict()["traceparent"].split("-")[1] == trace_id

    with telemetry.message_span("promotion received", json.dumps({"traceparent": "00-nonsense"})):
        pass
    assert format(fresh.spans.get_finished_spans()[-1].context.trace_id, "032x") != trace_id


def test_no_secret_in_any_span_or_log(fresh: Exporters) -> None:
    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhYmNkZWZnaGlqIn0.c2lnbmF0dXJlc2lnbmF0dXJl"
    sas = "https://acct.blob.core.windows.net/c/b?sv=2024&sig=SECRETSIGNATURE123"
    log = logging.getLogger("runtime_cloud.test")
    with telemetry.span(
        "work",
        kind=SpanKind.SERVER,
        attributes={"url.full": sas, "db.connection_string": f"AccountKey={key};", "note": f"Bearer {jwt}"},
    ) as current:
        current.add_event("failed", {"exception.message": f"DefaultEndpointsProtocol=http;AccountKey={key};"})
        log.warning("calling with Authorization: Bearer %s and key %s", jwt, key, extra={"tenant_id": "tenant-a"})
    telemetry.flush()
    spans = fresh.spans.get_finished_spans()
    logs = fresh.logs.get_finished_logs()
    written = "".join(span.to_json() for span in spans) + "".join(record.to_json() for record in logs)
    for secret in (key, jwt, "SECRETSIGNATURE123"):
        assert secret not in written
    assert logs and logs[-1].log_record.attributes["tenant_id"] == "tenant-a"
    assert logs[-1].log_record.trace_id == spans[-1].context.trace_id, "logs carry the trace context"


def test_the_inbox_lag_gauge_reports_an_old_message(
    exporters: Exporters, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared import health
    from shared.wiring.health import health_sections
    from shared.wiring.settings import Settings
    from shared.wiring.telemetry import _inbox_lag

    # The target account: no host of the tests takes messages from its queues.
    connection = azurite.connection_string(TARGET_ACCOUNT)
    monkeypatch.setenv("AzureWebJobsStorage", connection)
    monkeypatch.setenv("RuntimeCloud__Host__EnabledModules", "inventory")
    health._probe_clients.cache_clear()
    queue = QueueClient.from_connection_string(connection, "inventory-inbox")
    try:
        queue.create_queue()
    except Exception:
        pass
    queue.clear_messages()
    queue.send_message("an event nobody took")
    time.sleep(2.5)
    sections = health_sections(Settings())
    telemetry.observe(names.INBOX_LAG, lambda: _inbox_lag(sections))
    try:
        points = gauge_points(exporters.metrics, names.INBOX_LAG.name)
        lags = {point.attributes["module"]: point.value for point in points}
        assert lags["inventory"] >= 2.0, lags
    finally:
        telemetry.metrics.forget_gauges()
        queue.clear_messages()
        health._probe_clients.cache_clear()


def test_counters_keep_their_declared_dimensions_only(exporters: Exporters) -> None:
    telemetry.count(names.LEASE_DENIALS, pool="sandbox-local", reason="quota-exceeded", tenant="tenant-a")
    data = exporters.metrics.get_metrics_data()
    points = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == names.LEASE_DENIALS.name
        for point in metric.data.data_points
    ]
    assert points and all(set(point.attributes) <= {"pool", "reason"} for point in points)


def test_the_names_agree_with_the_alert_rules() -> None:
    sys.path.insert(0, str(REPO / "infra"))
    try:
        from runtime_cloud_infra import telemetry as infra
    finally:
        sys.path.remove(str(REPO / "infra"))
    ours = {metric.name: metric for metric in names.METRICS}
    for metric in infra.METRICS:
        assert metric.name in ours, metric.name
        mine = ours[metric.name]
        assert (metric.instrument, metric.unit, metric.dimensions) == (mine.instrument, mine.unit, mine.dimensions)
    assert names.INBOX_LAG.name == "connectsoft.factory.runtime_cloud.host.inbox_lag"


AZURE_MONITOR_PROBE = """
import json, os
from opentelemetry import metrics, trace
from shared.platform.telemetry import configure

configured = configure()
provider = trace.get_tracer_provider()
processors = provider._active_span_processor._span_processors

def exporter_of(processor):
    batch = getattr(processor, "_batch_processor", None)
    return getattr(processor, "span_exporter", None) or getattr(batch, "_exporter", None)

azure = [exporter_of(p) for p in processors if "AzureMonitor" in type(exporter_of(p)).__name__]
print(json.dumps({
    "mode": configured.mode,
    "span_processors": [type(p).__name__ for p in processors],
    "exporters": [type(exporter_of(p)).__name__ for p in processors],
    "readers": [type(getattr(r, "_exporter", None)).__name__ for r in metrics.get_meter_provider()._metric_readers],
    "sampler": provider.sampler.get_description(),
    "credential": type(getattr(azure[0], "_credential", None)).__name__ if azure else None,
}))
os._exit(0)  # nothing is sent: no span was made, and the exit skips the final metric export
"""


def test_with_a_connection_string_azure_monitor_is_configured_without_a_network_call(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("APPLICATIONINSIGHTS", "RuntimeCloud__Telemetry"))
    }
    env.update(
        {
            # a port nothing listens on: had anything been sent, it would fail, not reach Azure
            "APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=00000000-0000-0000-0000-000000000000;"
            "IngestionEndpoint=http://127.0.0.1:9/;LiveEndpoint=http://127.0.0.1:9/",
            "APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL": "true",
            "AZURE_CLIENT_ID": "11111111-1111-1111-1111-111111111111",
            "PYTHONPATH": str(REPO),
            "TMPDIR": str(tmp_path),
        }
    )
    done = subprocess.run(
        [sys.executable, "-c", AZURE_MONITOR_PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Retrying" not in done.stderr and "request error" not in done.stderr, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["mode"] == "azure-monitor"
    assert "AzureMonitorTraceExporter" in found["exporters"]
    assert "AzureMonitorMetricExporter" in found["readers"]
    assert found["span_processors"].index("ScrubSpanProcessor") < found["span_processors"].index("BatchSpanProcessor")
    assert found["sampler"].startswith("TriggerRootSampler")
    assert found["credential"] == "DefaultAzureCredential", "Entra authentication, with the process's credential"


def test_the_open_findings_gauge_counts_open_findings_by_kind(
    exporters: Exporters, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azure.data.tables import TableServiceClient

    from shared.inventory.gauges import open_findings
    from shared.platform.storage import clients

    # The target account's own Inventory table: no host of the tests writes findings there.
    connection = azurite.connection_string(TARGET_ACCOUNT)
    monkeypatch.setenv("AzureWebJobsStorage", connection)
    monkeypatch.setattr(clients, "_shared", None)
    table = TableServiceClient.from_connection_string(connection).create_table_if_not_exists("Inventory")
    rows = [("open", "missing"), ("open", "missing"), ("open", "changed"), ("resolved", "missing")]
    for index, (state, kind) in enumerate(rows):
        table.upsert_entity(
            {"PartitionKey": "tenant-g|env", "RowKey": f"finding|g{index}", "State": state, "Kind": kind}
        )
    table.upsert_entity({"PartitionKey": "tenant-g|env", "RowKey": "rule|r1", "State": "open", "Kind": "missing"})
    try:
        readings = {
            dimensions["kind"]: value for value, dimensions in open_findings(clients.shared_host_storage().tables)
        }
        assert readings == {"missing": 2.0, "changed": 1.0}
    finally:
        TableServiceClient.from_connection_string(connection).delete_table("Inventory")
