"""Spans the Functions host makes around invocations, made the same way here.

In Azure the Functions host starts a span per invocation (a request for HTTP,
a message for a queue, ...) and the Python worker runs the function inside it
(``PYTHON_ENABLE_OPENTELEMETRY``); the Durable extension (distributed tracing
V2) spans each orchestration and activity under the context the instance was
started in. The local host does the same with the OpenTelemetry API, so the
app's own spans and its storage calls nest under them. Whatever provider the
app configured (``shared/telemetry``) receives them; without one they cost
nothing. The context is W3C trace context (``traceparent``, ``tracestate``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TypedDict

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

_PROPAGATOR = TraceContextTextMapPropagator()
TRIGGERS = {
    "httptrigger": "http",
    "queuetrigger": "pubsub",
    "timertrigger": "timer",
    "activitytrigger": "other",
    "orchestrationtrigger": "other",
}
KINDS = {"http": SpanKind.SERVER, "pubsub": SpanKind.CONSUMER}


class TraceCarrier(TypedDict, total=False):
    """A W3C trace context as a carrier holds it: the two headers, named in lower case."""

    traceparent: str
    tracestate: str


def carrier_of(headers: Mapping[str, str] | None) -> TraceCarrier:
    """``traceparent`` / ``tracestate`` from headers (any case) or a stored carrier."""
    carrier: TraceCarrier = {}
    for key, value in (headers or {}).items():
        if not value:
            continue
        if key.lower() == "traceparent":
            carrier["traceparent"] = str(value)
        elif key.lower() == "tracestate":
            carrier["tracestate"] = str(value)
    return carrier


def current_carrier() -> TraceCarrier:
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers)
    return carrier_of(headers)


def _headers(carrier: TraceCarrier) -> dict[str, str]:
    headers: dict[str, str] = {}
    if "traceparent" in carrier:
        headers["traceparent"] = carrier["traceparent"]
    if "tracestate" in carrier:
        headers["tracestate"] = carrier["tracestate"]
    return headers


@contextmanager
def host_span(
    name: str,
    *,
    trigger: str,
    parent: TraceCarrier | None = None,
    attributes: Attributes = None,
    kind: SpanKind | None = None,
) -> Iterator[Span]:
    """A span of the host's, under ``parent`` (a W3C carrier) when it names a valid context."""
    context = _PROPAGATOR.extract(_headers(parent)) if parent else None
    if context is not None and not trace.get_current_span(context).get_span_context().is_valid:
        context = None
    tracer = trace.get_tracer("devhost")
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=kind or KINDS.get(trigger, SpanKind.INTERNAL),
        attributes={"faas.trigger": trigger, **(attributes or {})},
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        yield span


def mark_failed(span: Span, description: str) -> None:
    span.set_status(Status(StatusCode.ERROR, description))
