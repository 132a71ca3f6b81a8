"""CloudEvents 1.0 (JSON, structured mode) as this host emits them.

Extensions: ``tenant`` (the row filter of the event's subject) and
``sequence`` (a number per stream, e.g. per environment or per pool, that
increases by one with every event, so consumers can see gaps and order).
Consumers dedupe by ``id``: dispatch is at-least-once. The Distributed Tracing
extension's ``traceparent`` (and ``tracestate``, when there is one) name the
trace of the work that emitted the event, so its delivery can join that trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SPEC_VERSION = "1.0"
TYPE_PREFIX = "factory.runtime-cloud."


@dataclass(frozen=True)
class NewEvent:
    """An event a state change wants to emit; the outbox gives it id, time and sequence."""

    type: str  # short name, e.g. "ProvisioningApplied"
    subject: str
    tenant: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CloudEvent:
    id: str
    source: str
    type: str
    subject: str
    time: str
    tenant: str
    stream: str
    sequence: int
    data: dict[str, Any]
    traceparent: str | None = None
    tracestate: str | None = None

    def to_dict(self) -> dict[str, Any]:
        tracing = {
            name: value for name, value in (("traceparent", self.traceparent), ("tracestate", self.tracestate)) if value
        }
        return tracing | {
            "specversion": SPEC_VERSION,
            "id": self.id,
            "source": self.source,
            "type": TYPE_PREFIX + self.type,
            "subject": self.subject,
            "time": self.time,
            "datacontenttype": "application/json",
            "tenant": self.tenant,
            "stream": self.stream,
            "sequence": self.sequence,
            "data": self.data,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)
