"""OpenTelemetry for the host: one place for setup, spans, trace context and metrics.

Triggers and domain code call the small helpers re-exported here:
``span(...)`` around a piece of work, ``annotate(...)`` to name what the
current span is about, ``current_trace_context()`` / ``context_from(...)`` for
W3C ``traceparent`` across queues and CloudEvents, ``count`` / ``record`` /
``observe`` for metrics (names in :mod:`shared.platform.telemetry.names`). Setup
(:func:`configure`) runs once, when ``function_app`` is loaded.
"""

from __future__ import annotations

from shared.platform.telemetry.metrics import count, observe, record
from shared.platform.telemetry.setup import configure, flush
from shared.platform.telemetry.tracing import (
    annotate,
    context_from,
    current_trace_context,
    current_traceparent,
    id_attributes,
    is_traceparent,
    message_span,
    span,
)

__all__ = [
    "annotate",
    "configure",
    "context_from",
    "count",
    "current_trace_context",
    "current_traceparent",
    "flush",
    "id_attributes",
    "is_traceparent",
    "message_span",
    "observe",
    "record",
    "span",
]
