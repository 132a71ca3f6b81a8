"""No secret leaves the process in telemetry: span, event and log attributes and log bodies are scrubbed.

The host's own spans carry ids only (tenant, environment, run, lease, pool),
but libraries add what they see: azure-core records request URLs (a SAS URL
carries its signature in ``sig=``), exception messages may quote a connection
string, a log line may quote a header. Before any exporter sees a span or a
log record, the values are rewritten here: a key, signature, password or
token becomes ``<redacted>``, and an attribute whose *name* says secret
(``password``, ``authorization``, ``account_key``...) loses its value.
"""

from __future__ import annotations

import re
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.util.types import AttributeValue

REDACTED = "<redacted>"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # name=value pairs of connection strings and query strings (SAS signatures, function keys)
    (
        re.compile(
            r"(?i)\b(AccountKey|SharedAccessKey|SharedAccessSignature|sig|code|password|pwd|client_secret"
            r"|access_token|refresh_token|token|key)=([^;&\s\"']+)"
        ),
        rf"\1={REDACTED}",
    ),
    (re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+"), rf"\1 {REDACTED}"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), REDACTED),  # a JWT
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"), REDACTED),
    (re.compile(r"://([^/\s:@]+):([^/\s@]+)@"), rf"://\1:{REDACTED}@"),  # a password inside a URL
    (re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{86}=="), REDACTED),  # a storage account key
]
_SECRET_NAME = re.compile(
    r"(?i)(password|passwd|secret|authorization|api[_-]?key|account[_-]?key|"
    r"access[_-]?key|signature|credential|connection[_-]?string|cookie|token$)"
)


def scrub_text(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _scrub_value(value: Any) -> Any:
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub_value(item) for item in value)
    return value


def scrub_attributes(attributes: Any) -> dict[str, AttributeValue]:
    if not attributes:
        return {}
    return {key: (REDACTED if _SECRET_NAME.search(key) else _scrub_value(value)) for key, value in attributes.items()}


def _needs_scrub(attributes: Any) -> bool:
    return bool(attributes) and scrub_attributes(attributes) != dict(attributes)


class ScrubSpanProcessor(SpanProcessor):
    """Registered before the exporting processors: they see the scrubbed attributes."""

    def on_end(self, span: ReadableSpan) -> None:
        from opentelemetry.attributes import BoundedAttributes

        if _needs_scrub(span._attributes):
            span._attributes = BoundedAttributes(attributes=scrub_attributes(span._attributes), immutable=True)
        for event in span._events:
            if _needs_scrub(event._attributes):
                event._attributes = BoundedAttributes(attributes=scrub_attributes(event._attributes), immutable=True)
        if span._status.description:
            from opentelemetry.trace import Status

            span._status = Status(span._status.status_code, scrub_text(span._status.description))


class ScrubLogProcessor(LogRecordProcessor):
    """Registered before the exporting processors: a log record's body and attributes are scrubbed in place."""

    def on_emit(self, log_record: Any) -> None:
        record = log_record.log_record
        if isinstance(record.body, str):
            record.body = scrub_text(record.body)
        if record.attributes:
            record.attributes = scrub_attributes(record.attributes)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
