"""Spans and W3C trace context: the small helpers the triggers and domain code call.

Spans name the objects they are about with the ids of :mod:`shared.platform.telemetry.names`
(``tenant_id``, ``environment_id``, ``run_id``, ``lease_id``, ``pool``), never a
payload, token, key or secret. Context crosses queues as W3C ``traceparent``
(and ``tracestate``): messages the host accepts may carry it, every CloudEvent it
emits carries it (the CloudEvents Distributed Tracing extension).

Orchestrator functions never call these: they replay, and a replay must not
create spans. The Durable engine (in Azure the Durable extension with
distributed tracing V2; locally ``devhost/durable``) spans orchestrations and
activities itself, as children of the context the orchestration was started in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.platform.telemetry.names import ENVIRONMENT, LEASE, POOL, RUN, TENANT

TRACER_NAME = "runtime_cloud"
_PROPAGATOR = TraceContextTextMapPropagator()
TRACEPARENT_PATTERN = r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
_TRACEPARENT = re.compile(TRACEPARENT_PATTERN)


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def id_attributes(
    *,
    tenant: str | None = None,
    environment: str | None = None,
    run: str | None = None,
    lease: str | None = None,
    pool: str | None = None,
) -> dict[str, str]:
    given = {TENANT: tenant, ENVIRONMENT: environment, RUN: run, LEASE: lease, POOL: pool}
    return {name: str(value) for name, value in given.items() if value is not None}


@contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    traceparent: str | None = None,
    tracestate: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    **ids: str | None,
) -> Iterator[Span]:
    """A span around a piece of work, current inside the block.

    With ``traceparent`` (from a message) the span continues that trace and links
    to the one it runs in (the host's invocation), so both can be followed.
    """
    parent = context_from(traceparent, tracestate)
    links = []
    if parent is not None:
        current = trace.get_current_span().get_span_context()
        if current.is_valid:
            links.append(Link(current))
    with tracer().start_as_current_span(
        name, context=parent, kind=kind, links=links, attributes={**(attributes or {}), **id_attributes(**ids)}
    ) as current_span:
        yield current_span


def annotate(**ids: str | None) -> None:
    """Name the objects the current span (say, the host's activity span) is about."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(id_attributes(**ids))


def is_traceparent(value: Any) -> bool:
    return isinstance(value, str) and bool(_TRACEPARENT.match(value)) and not value.startswith("00-" + "0" * 32)


def context_from(traceparent: str | None, tracestate: str | None = None) -> otel_context.Context | None:
    """The context a W3C ``traceparent`` names, or ``None`` when it is absent or malformed."""
    if not is_traceparent(traceparent):
        return None
    carrier = {"traceparent": str(traceparent)}
    if tracestate and len(tracestate) <= 512:
        carrier["tracestate"] = tracestate
    extracted = _PROPAGATOR.extract(carrier)
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def current_trace_context() -> dict[str, str]:
    """``{"traceparent": ..., "tracestate": ...}`` of the current span; empty when there is none."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def current_traceparent() -> str | None:
    return current_trace_context().get("traceparent")


def message_trace(body: str | bytes) -> dict[str, str]:
    """The ``traceparent`` / ``tracestate`` a JSON message carries at its top level (W3C), if any."""
    import json

    try:
        document = json.loads(body)
    except (ValueError, TypeError, RecursionError):
        return {}
    if not isinstance(document, dict) or not is_traceparent(document.get("traceparent")):
        return {}
    found = {"traceparent": str(document["traceparent"])}
    if isinstance(document.get("tracestate"), str):
        found["tracestate"] = document["tracestate"]
    return found


@contextmanager
def message_span(
    name: str, body: str | bytes, *, tenant: str | None = None, environment: str | None = None, run: str | None = None
) -> Iterator[Span]:
    """A span for handling one queue message, continuing the trace the message names (if it names one)."""
    carried = message_trace(body)
    with span(
        name,
        kind=SpanKind.CONSUMER,
        traceparent=carried.get("traceparent"),
        tracestate=carried.get("tracestate"),
        tenant=tenant,
        environment=environment,
        run=run,
    ) as current:
        yield current
