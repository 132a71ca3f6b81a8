"""The table clients' transport refuses, before sending, an entity Azure would refuse.

Every table write the app makes (the SDK's own calls, the lean single-row writes of
:mod:`shared.platform.storage.rows`, the batches of :mod:`storage_protocol.table_batch`) ends in
the client's transport, so that is the one place that sees them all. :class:`EntityGuard` wraps
the transport: a write whose entity breaks :mod:`shared.platform.storage.limits` is not sent,
and is answered as the service answers it (400 with the error code in ``x-ms-error-code`` and
the JSON ``odata.error`` body; inside a batch, the changeset's answer naming the failing change's
index). Above the transport nothing changes: the SDK's retry, logging and tracing see the answer,
and its own error decoding raises exactly what Azure's answer raises (``HttpResponseError`` with
``error_code``, or ``TableTransactionError`` with ``index``).

Azurite does not refuse more than 252 properties nor more than 1 MiB; with this guard the local
host refuses them as Azure does. It sees only what a request carries: a merge that grows a
stored row past a limit is refused by Azure but not here.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any
from urllib.parse import unquote, urlsplit

from azure.core.pipeline.transport import HttpTransport
from azure.core.rest._http_response_impl import HttpResponseImpl  # the response type azure-core's transports make
from azure.core.utils import CaseInsensitiveDict

from shared.platform.storage.limits import MAX_CUSTOM_PROPERTIES, Refusal, entity_refusal

# A body shorter than this holds neither more than 252 properties (each is at least `"a":0,`)
# nor 1 MiB as the service counts it, so it is sent without being read.
SMALLEST_REFUSABLE_BODY = (MAX_CUSTOM_PROPERTIES + 1) * len('"a":0,')
WRITES = frozenset({"POST", "PUT", "PATCH", "MERGE"})
ERROR_TYPE = "application/json;odata=minimalmetadata;charset=utf-8"
_ENTITY_KEYS = re.compile(r"\(PartitionKey='(?P<pk>(?:[^']|'')*)',RowKey='(?P<rk>(?:[^']|'')*)'\)$")


class EntityGuard(HttpTransport[Any, Any]):
    """A transport that answers a write Azure would refuse itself, and sends every other request on."""

    def __init__(self, inner: HttpTransport[Any, Any]) -> None:
        self.inner = inner

    def send(self, request: Any, **kwargs: Any) -> Any:
        if request.method in WRITES:
            body = _body(request)
            if len(body) >= SMALLEST_REFUSABLE_BODY:
                answer = _refused(request, body)
                if answer is not None:
                    return answer
        return self.inner.send(request, **kwargs)

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def sleep(self, duration: float) -> None:
        self.inner.sleep(duration)

    def __enter__(self) -> EntityGuard:
        self.inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self.inner.__exit__(*args)


def _body(request: Any) -> bytes:
    body = request.content if hasattr(request, "content") else request.body  # azure.core.rest or legacy
    if isinstance(body, str):
        return body.encode("utf-8")
    return body if isinstance(body, bytes) else b""


def _refused(request: Any, body: bytes) -> HttpResponseImpl | None:
    resource = _resource(request.url)
    if resource == "$batch":
        return _refused_batch(request, body)
    if resource == "Tables" or resource.startswith("Tables("):
        return None  # a table, not an entity
    refusal = _entity_refusal(body.decode("utf-8"), resource)
    if refusal is None:
        return None
    headers = {"x-ms-error-code": refusal.code, "Content-Type": ERROR_TYPE}
    return _answer(request, refusal.status, headers, _error_body(refusal))


def _resource(url: str) -> str:
    """The URL's last path segment, unquoted after splitting (a quoted key may hold a slash)."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def _entity_refusal(text: str, resource: str) -> Refusal | None:
    """The refusal of one write's entity (its JSON body; the keys from the body or the URL)."""
    try:
        entity = json.loads(text)
    except ValueError:
        return None  # not an entity this guard can read: the service judges it
    if not isinstance(entity, dict):
        return None
    url_keys = _url_keys(resource)
    partition_key = entity.get("PartitionKey", url_keys[0])
    row_key = entity.get("RowKey", url_keys[1])
    if not isinstance(partition_key, str) or not isinstance(row_key, str):
        return None  # missing keys are the service's to refuse (PropertiesNeedValue)
    return entity_refusal(entity, partition_key, row_key)


def _url_keys(resource: str) -> tuple[str, str]:
    """``Table(PartitionKey='p',RowKey='r')`` -> ("p", "r"); ("", "") for a table's URL."""
    match = _ENTITY_KEYS.search(resource)
    if match is None:
        return "", ""
    return match["pk"].replace("''", "'"), match["rk"].replace("''", "'")


def _refused_batch(request: Any, body: bytes) -> HttpResponseImpl | None:
    """The first change whose entity the service would refuse, answered as the service answers a batch."""
    for index, (resource, text) in enumerate(_changes(body.decode("utf-8"))):
        if len(text) < SMALLEST_REFUSABLE_BODY:
            continue
        refusal = _entity_refusal(text, resource)
        if refusal is not None:
            return _batch_answer(request, index, refusal)
    return None


def _changes(text: str) -> list[tuple[str, str]]:
    """Each change of the batch's one changeset: its resource (the URL's last segment) and its body."""
    changeset = ""
    for line in text.split("\r\n"):
        if line.lower().startswith("content-type:") and "boundary=" in line and "changeset" in line:
            changeset = line.split("boundary=", 1)[1].strip().strip('"')
            break
    changes: list[tuple[str, str]] = []
    if not changeset:
        return changes
    for chunk in text.split(f"--{changeset}")[1:]:
        if chunk.startswith("--"):
            break  # the closing delimiter
        _, _, http = chunk.partition("\r\n\r\n")  # past the part's own headers
        head, _, entity = http.partition("\r\n\r\n")
        request_line = head.split("\r\n", 1)[0].split(" ")
        if len(request_line) < 2:
            continue
        changes.append((_resource(request_line[1]), entity.removesuffix("\r\n")))
    return changes


def _batch_answer(request: Any, index: int, refusal: Refusal) -> HttpResponseImpl:
    """202 with one changeset answer: the failing change's status, and its index before the message."""
    batch, changeset = f"batchresponse_{uuid.uuid4()}", f"changesetresponse_{uuid.uuid4()}"
    part = "\r\n".join(
        [
            f"HTTP/1.1 {refusal.status} Bad Request",
            f"Content-ID: {index + 1}",
            f"Content-Type: {ERROR_TYPE}",
            "",
            _error_body(refusal, f"{index}:").decode("utf-8"),
        ]
    )
    lines = [
        f"--{batch}",
        f"Content-Type: multipart/mixed; boundary={changeset}",
        "",
        f"--{changeset}",
        "Content-Type: application/http",
        "Content-Transfer-Encoding: binary",
        "",
        part,
        f"--{changeset}--",
        f"--{batch}--",
        "",
    ]
    headers = {"Content-Type": f"multipart/mixed; boundary={batch}"}
    return _answer(request, 202, headers, "\r\n".join(lines).encode("utf-8"))


def _error_body(refusal: Refusal, prefix: str = "") -> bytes:
    message = f"{prefix}{refusal.message} Refused here before sending, as Azure refuses it."
    return json.dumps({"odata.error": {"code": refusal.code, "message": {"lang": "en-US", "value": message}}}).encode()


def _answer(request: Any, status: int, headers: dict[str, str], content: bytes) -> HttpResponseImpl:
    response = HttpResponseImpl(
        request=request,
        internal_response=_NoConnection(),
        status_code=status,
        reason="Accepted" if status == 202 else "Bad Request",
        content_type=headers.get("Content-Type", ""),
        headers=CaseInsensitiveDict(headers),
        stream_download_generator=_whole_body,
    )
    response._content = content  # read already: nothing to stream
    return response


def _whole_body(pipeline: Any = None, response: Any = None, **kwargs: Any) -> Any:
    return iter([getattr(response, "_content", None) or b""])


class _NoConnection:
    """The answer's connection: there is none to close."""

    def close(self) -> None:
        pass
