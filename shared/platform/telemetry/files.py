"""OTLP JSON lines: the local exporters (``make run``), one file per signal under a folder.

Each line is one OTLP/JSON export request, as an OpenTelemetry Collector's
file exporter writes it: ``traces.jsonl`` holds ``ExportTraceServiceRequest``
documents (``resourceSpans``), ``metrics.jsonl`` ``ExportMetricsServiceRequest``
(``resourceMetrics``), ``logs.jsonl`` ``ExportLogsServiceRequest``
(``resourceLogs``). Trace and span ids are hex, as OTLP/JSON requires.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from google.protobuf.message import Message  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

TRACES, METRICS, LOGS = "traces.jsonl", "metrics.jsonl", "logs.jsonl"
_ID_FIELDS = {"traceId", "spanId", "parentSpanId"}


def otlp_json(message: Message) -> dict[str, Any]:
    """The OTLP/JSON form of an OTLP protobuf message (ids in hex, enums as numbers)."""
    document: dict[str, Any] = _hex_ids(MessageToDict(message, use_integers_for_enums=True))
    return document


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: (base64.b64decode(item).hex() if key in _ID_FIELDS and isinstance(item, str) else _hex_ids(item))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


class _JsonLines:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()

    def write(self, message: Message) -> None:
        line = json.dumps(otlp_json(message), separators=(",", ":"))
        with self._lock, self.path.open("a", encoding="utf-8") as file:
            file.write(line + "\n")


class SpanFileExporter(SpanExporter):
    def __init__(self, directory: Path) -> None:
        self._file = _JsonLines(directory / TRACES)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            self._file.write(encode_spans(spans))
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


class MetricFileExporter(MetricExporter):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self._file = _JsonLines(directory / METRICS)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        try:
            self._file.write(encode_metrics(metrics_data))
        except OSError:
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


class LogFileExporter(LogRecordExporter):
    def __init__(self, directory: Path) -> None:
        self._file = _JsonLines(directory / LOGS)

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        try:
            self._file.write(encode_logs(batch))
        except OSError:
            return LogRecordExportResult.FAILURE
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        return None


def read_spans(directory: Path) -> list[dict[str, Any]]:
    """Every span of ``traces.jsonl``, flattened, each with its ``attributes`` as a plain dict."""
    path = directory / TRACES
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    complete = text[: text.rfind("\n") + 1]  # a line still being appended has no newline yet: read it next time
    spans = []
    for line in complete.splitlines():
        if not line.strip():
            continue
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    spans.append({**span, "attributes": attribute_dict(span.get("attributes", []))})
    return spans


def attribute_dict(attributes: list[dict[str, Any]]) -> dict[str, Any]:
    """OTLP/JSON ``[{key, value: {stringValue|intValue|...}}]`` as ``{key: value}``."""
    result: dict[str, Any] = {}
    for attribute in attributes:
        value = attribute.get("value", {})
        result[attribute["key"]] = next(iter(value.values()), None) if value else None
    return result
