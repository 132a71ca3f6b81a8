"""Where telemetry goes: Application Insights, OTLP JSON lines, memory (tests), or nowhere.

- ``APPLICATIONINSIGHTS_CONNECTION_STRING`` set (Azure): the Azure Monitor
  OpenTelemetry distro exports traces, metrics and logs, authenticating with
  Entra ID through the process's one credential (:mod:`shared.platform.credentials`;
  Application Insights has local authentication off, so no instrumentation
  key is ever used to send). ``RuntimeCloud:Telemetry:EntraAuthentication``
  ``false`` sends without it (an Application Insights that accepts keys).
- ``RuntimeCloud:Telemetry:LocalDirectory`` set (``make run`` sets
  ``.data/telemetry``): OTLP JSON lines, see :mod:`shared.platform.telemetry.files`.
- neither: the OpenTelemetry API's no-op providers; the app runs the same.

Either way azure-core's OpenTelemetry tracing is on, so every storage call
(Table, Blob, Queue, Key Vault, ARM) is a span under the work that made it.
Before any exporter, spans and log records pass :mod:`shared.platform.telemetry.scrub`.
Logs: records of the ``runtime_cloud`` loggers, with their id fields
(``extra=``, :mod:`shared.platform.logs`) as attributes and the current trace context.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.platform.telemetry.scrub import ScrubLogProcessor, ScrubSpanProcessor

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
LOCAL_DIRECTORY = "RuntimeCloud__Telemetry__LocalDirectory"
METRIC_INTERVAL = "RuntimeCloud__Telemetry__MetricIntervalSeconds"
ENTRA_AUTHENTICATION = "RuntimeCloud__Telemetry__EntraAuthentication"
SERVICE_NAME = "runtime-cloud-host"
LOGGER_NAME = "runtime_cloud"

_lock = threading.Lock()
_configured: Configured | None = None


@dataclass
class Configured:
    """What :func:`configure` set up (``mode``: ``azure-monitor``, ``otlp-files``, ``memory`` or ``none``)."""

    mode: str
    directory: Path | None = None
    providers: list[Any] = field(default_factory=list)


def _setting(name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in os.environ.items() if key.lower() == wanted and value), None)


def configure(*, span_exporter: Any = None, metric_reader: Any = None, log_exporter: Any = None) -> Configured:
    """Set up the process's telemetry once (later calls return the first answer).

    Tests pass in-memory exporters (``span_exporter``, ``metric_reader``,
    ``log_exporter``); the app passes nothing and the settings decide.
    """
    global _configured
    with _lock:
        if _configured is not None:
            return _configured
        _enable_azure_sdk_tracing()
        if span_exporter is not None or metric_reader is not None or log_exporter is not None:
            _configured = _sdk("memory", None, span_exporter, metric_reader, log_exporter)
        elif connection_string := _setting(CONNECTION_STRING):
            _configured = _azure_monitor(connection_string)
        elif directory := _setting(LOCAL_DIRECTORY):
            _configured = _files(Path(directory))
        else:
            _configured = Configured("none")
        return _configured


def configured() -> Configured | None:
    return _configured


def _enable_azure_sdk_tracing() -> None:
    from azure.core.settings import settings

    settings.tracing_implementation = "opentelemetry"


def _resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    import shared

    return Resource.create(
        {
            "service.name": SERVICE_NAME,
            "service.version": shared.__version__,
            "service.namespace": "connectsoft.factory",
        }
    )


def _azure_monitor(connection_string: str) -> Configured:
    from azure.monitor.opentelemetry import configure_azure_monitor

    from shared.platform.credentials import azure_credential

    options: dict[str, Any] = {
        "connection_string": connection_string,
        "logger_name": LOGGER_NAME,
        "resource": _resource(),
        "span_processors": [ScrubSpanProcessor()],
        "log_record_processors": [ScrubLogProcessor()],
        "instrumentation_options": {"azure_sdk": {"enabled": True}},
    }
    if (_setting(ENTRA_AUTHENTICATION) or "true").strip().lower() != "false":
        options["credential"] = azure_credential()
    configure_azure_monitor(**options)
    _keep_trigger_roots_only()
    return Configured("azure-monitor")


def _keep_trigger_roots_only() -> None:
    from opentelemetry import trace

    from shared.platform.telemetry.sampling import TriggerRootSampler

    provider: Any = trace.get_tracer_provider()
    if hasattr(provider, "sampler") and not isinstance(provider.sampler, TriggerRootSampler):
        provider.sampler = TriggerRootSampler(provider.sampler)


def _files(directory: Path) -> Configured:
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from shared.platform.telemetry.files import LogFileExporter, MetricFileExporter, SpanFileExporter

    directory = directory.resolve()
    interval = float(_setting(METRIC_INTERVAL) or 15)
    reader = PeriodicExportingMetricReader(MetricFileExporter(directory), export_interval_millis=interval * 1000)
    configured = _sdk(
        "otlp-files", directory, SpanFileExporter(directory), reader, LogFileExporter(directory), batch=True
    )
    return configured


def _sdk(
    mode: str, directory: Path | None, span_exporter: Any, metric_reader: Any, log_exporter: Any, batch: bool = False
) -> Configured:
    from opentelemetry import metrics, trace
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    resource = _resource()
    providers: list[Any] = []
    if span_exporter is not None:
        from shared.platform.telemetry.sampling import TriggerRootSampler

        tracer_provider = TracerProvider(resource=resource, sampler=TriggerRootSampler())
        tracer_provider.add_span_processor(ScrubSpanProcessor())
        tracer_provider.add_span_processor(
            BatchSpanProcessor(span_exporter, schedule_delay_millis=1000)
            if batch
            else SimpleSpanProcessor(span_exporter)
        )
        trace.set_tracer_provider(tracer_provider)
        providers.append(tracer_provider)
    if metric_reader is not None:
        meter_provider = MeterProvider(resource=resource, metric_readers=[metric_reader])
        metrics.set_meter_provider(meter_provider)
        providers.append(meter_provider)
    if log_exporter is not None:
        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(ScrubLogProcessor())
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(log_exporter, schedule_delay_millis=1000)
            if batch
            else SimpleLogRecordProcessor(log_exporter)
        )
        set_logger_provider(logger_provider)
        logging.getLogger(LOGGER_NAME).addHandler(LoggingHandler(level=logging.INFO, logger_provider=logger_provider))
        providers.append(logger_provider)
    return Configured(mode, directory, providers)


def flush() -> None:
    """Export what is buffered now (tests; the host's shutdown)."""
    if _configured is None:
        return
    for provider in _configured.providers:
        provider.force_flush()
