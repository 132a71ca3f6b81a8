"""Which traces are kept: those that start at a trigger, never stray storage calls.

A trace starts where work starts: an invocation (HTTP request, queue message,
timer, orchestration, activity; a span with ``faas.trigger`` or of kind
SERVER or CONSUMER). Spans with no parent that are not such a start are
dropped: azure-core spans of the metric gauges' reads, of the local host's
own queue polling and of health probes outside a request, which would
otherwise bury the traces worth reading. Everything else is decided by the
sampler the provider had (Azure Monitor's rate sampler, or always-on).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind

STARTS = (SpanKind.SERVER, SpanKind.CONSUMER)
TRIGGER = "faas.trigger"


class TriggerRootSampler(Sampler):
    def __init__(self, delegate: Sampler | None = None) -> None:
        self._delegate = delegate or ALWAYS_ON

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Any = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        if not parent.is_valid and kind not in STARTS and not (attributes and TRIGGER in attributes):
            return SamplingResult(Decision.DROP)
        return self._delegate.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"TriggerRootSampler{{{self._delegate.get_description()}}}"
