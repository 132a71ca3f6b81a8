"""Table Storage (and a little of Queue Storage) in memory, behind the Azure SDK's own clients.

The seam is the SDK's HTTP transport: :class:`MemoryTransport` answers the requests the real
``TableServiceClient``/``TableClient`` (and ``QueueServiceClient``) send, in the Table service's
own REST protocol, from dictionaries in this process. Everything above the transport is the
product's code unchanged: the SDK's serialisation and error decoding, the lean writes of
:mod:`shared.platform.storage.rows`, the batches of :mod:`storage_protocol.table_batch`, the
adapters of :mod:`shared.platform.storage.conditional` and :mod:`shared.platform.storage.paging`,
and every feature store on top of them. One fake therefore serves every store, and it cannot be
used in a way the real service could not: it speaks only what goes over the wire.

What it answers is what Azurite answers (``tests/storage_contract/`` runs one suite against both
and must pass on both): single-row inserts, replaces, merges, upserts and deletes with their
``If-Match`` conditions, 409/412/404 with the service's error codes; queries with ``$filter``,
``$select``, ``$top`` and the ``NextPartitionKey``/``NextRowKey`` continuation, in key order;
atomic batches (one partition, at most 100 changes, one change per row, 4 MiB, all or nothing,
the failing change's index); a new ETag and ``Timestamp`` at every write, strictly increasing;
the key and property limits Azurite enforces (keys of at most 512 UTF-16 units without
``/ \\ # ?`` or control characters, strings of at most 32 Ki UTF-16 units, binaries of at most
64 KiB); and the limits Azure enforces but Azurite does not (at most 252 custom properties, at
most 1 MiB per entity by the service's size formula, a merge judged on the row it makes), which
against Azurite the product's own transport guard enforces
(:mod:`shared.platform.storage.entity_guard`), so the suite pins them on both.

Queues: create, send, peek, receive and delete only, enough for the outbox to publish events.
Blobs: containers, and block blobs written in one request (what ``upload_blob`` sends below 64 MiB),
conditional on ``If-None-Match: *`` or an ETag, read whole or by range, listed by prefix, deleted.
Anything else (leases, block lists, append blobs, immutability, metadata) is answered 501, so a
test that needs it fails loudly instead of passing on a guess.

Not a product module: test support only. Thread-safe (one lock per service), so racing writers
in a test see the service's atomicity; no network, no process, no timing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.sax.saxutils import escape

from azure.core.credentials import AzureNamedKeyCredential
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest._http_response_impl import HttpResponseImpl
from azure.core.utils import CaseInsensitiveDict
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from shared.platform.storage.clients import QUEUE_CODEC, StorageClients

ACCOUNT_KEY = base64.b64encode(b"in-memory storage, not a secret").decode("ascii")
HOST = "memory.invalid"  # never resolved: the transport answers every request itself
TABLE_HOST, QUEUE_HOST, BLOB_HOST = (f"{service}.{HOST}" for service in ("table", "queue", "blob"))

MAX_KEY_UNITS = 512  # UTF-16 code units of a PartitionKey or RowKey (1 KiB)
MAX_STRING_UNITS = 32 * 1024  # UTF-16 code units of a string property (64 KiB)
MAX_BINARY_BYTES = 64 * 1024
MAX_PROPERTIES = 252  # custom properties, besides PartitionKey, RowKey and Timestamp
MAX_ENTITY_BYTES = 1024 * 1024  # by the service's size formula (see _entity_size)
MAX_BATCH_CHANGES = 100
MAX_BATCH_BYTES = 4 * 1024 * 1024
MAX_PAGE = 1000  # rows per query answer, with or without $top
_KEY_FORBIDDEN = re.compile("[/\\\\#?\x00-\x1f\x7f-\x9f]")
_TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{2,62}")
_ENTITY_PATH = re.compile(r"^(?P<table>[^(/]+)\(PartitionKey='(?P<pk>(?:[^']|'')*)',RowKey='(?P<rk>(?:[^']|'')*)'\)$")

_MESSAGES = {
    "EntityAlreadyExists": "The specified entity already exists.",
    "ResourceNotFound": "The specified resource does not exist.",
    "UpdateConditionNotSatisfied": "The update condition specified in the request was not satisfied.",
    "TableNotFound": "The table specified does not exist.",
    "TableAlreadyExists": "The table specified already exists.",
    "InvalidInput": "An error occurred while processing this request.",
    "InvalidResourceName": "The specified resource name contains invalid characters.",
    "PropertyValueTooLarge": "The property value exceeds the maximum allowed size (64KB). If the property value "
    "is a string, it is UTF-16 encoded and the maximum number of characters should be 32K or less.",
    "InvalidDuplicateRow": "The batch request contains multiple changes with same row key. An entity can appear "
    "only once in a batch request.",
    "CommandsInBatchActOnDifferentPartitions": "All commands in a batch must operate on same entity group.",
    "RequestBodyTooLarge": "The request body is too large and exceeds the maximum permissible limit.",
    "TooManyProperties": "The entity has more than 252 properties besides PartitionKey, RowKey and Timestamp.",
    "EntityTooLarge": "The entity is larger than the 1 MiB the service stores.",
    "QueueNotFound": "The specified queue does not exist.",
    "MessageNotFound": "The specified message does not exist.",
    "NotImplemented": "The in-memory storage does not serve this request.",
    "ContainerAlreadyExists": "The specified container already exists.",
    "ContainerNotFound": "The specified container does not exist.",
    "BlobAlreadyExists": "The specified blob already exists.",
    "BlobNotFound": "The specified blob does not exist.",
    "ConditionNotMet": "The condition specified using HTTP conditional header(s) is not met.",
    "InvalidRange": "The range specified is invalid for the current size of the resource.",
}
_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    409: "Conflict",
    412: "Precondition Failed",
    206: "Partial Content",
    413: "Request Entity Too Large",
    416: "Range Not Satisfiable",
    501: "Not Implemented",
}


class ServiceError(Exception):
    """An answer other than success: its status and the service's error code."""

    def __init__(self, status: int, code: str, message: str | None = None) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.message = message or _MESSAGES.get(code, code)


# -- typed values ---------------------------------------------------------------------------------

Typed = tuple[str, Any]  # (Edm type, Python value) as stored; comparable within a type


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _utf16(text: str) -> bytes:
    """A string's sort key: the service orders and compares strings by UTF-16 code units."""
    return text.encode("utf-16-be")


def _parse_datetime(text: str) -> datetime:
    body = text.rstrip("Z")
    whole, _, fraction = body.partition(".")
    parsed = datetime.fromisoformat(whole).replace(tzinfo=UTC)
    if fraction:
        parsed += timedelta(microseconds=int(fraction[:6].ljust(6, "0")))
    return parsed


def _format_datetime(value: datetime, ticks: int = 0) -> str:
    """ISO 8601 with seven fractional digits, as the service writes ``Timestamp``."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond:06d}{ticks % 10}Z"


def _typed_from_json(name: str, value: Any, annotation: str | None) -> Typed | None:
    if value is None:
        return None  # a null property is not stored
    if annotation is None:
        if isinstance(value, bool):
            return ("Edm.Boolean", value)
        if isinstance(value, int):
            return ("Edm.Int32", value) if -(2**31) <= value < 2**31 else ("Edm.Int64", value)
        if isinstance(value, float):
            return ("Edm.Double", value)
        if isinstance(value, str):
            return ("Edm.String", value)
        raise ServiceError(400, "InvalidInput")
    try:
        if annotation == "Edm.String":
            return ("Edm.String", str(value))
        if annotation == "Edm.Int64":
            return ("Edm.Int64", int(value))
        if annotation == "Edm.Int32":
            return ("Edm.Int32", int(value))
        if annotation == "Edm.Double":
            return ("Edm.Double", float(value))
        if annotation == "Edm.Boolean":
            return ("Edm.Boolean", bool(value))
        if annotation == "Edm.DateTime":
            return ("Edm.DateTime", _parse_datetime(str(value)))
        if annotation == "Edm.Guid":
            return ("Edm.Guid", str(uuid.UUID(str(value))))
        if annotation == "Edm.Binary":
            return ("Edm.Binary", base64.b64decode(str(value), validate=True))
    except (ValueError, binascii.Error) as error:
        raise ServiceError(400, "InvalidInput") from error
    raise ServiceError(400, "InvalidInput", f"unknown type {annotation} of {name}")


def _typed_to_json(name: str, typed: Typed, out: dict[str, Any]) -> None:
    edm, value = typed
    if edm == "Edm.Int64":
        out[f"{name}@odata.type"] = edm
        out[name] = str(value)
    elif edm == "Edm.DateTime":
        out[f"{name}@odata.type"] = edm
        out[name] = _format_datetime(value)
    elif edm == "Edm.Binary":
        out[f"{name}@odata.type"] = edm
        out[name] = base64.b64encode(value).decode("ascii")
    elif edm == "Edm.Guid":
        out[f"{name}@odata.type"] = edm
        out[name] = value
    else:
        out[name] = value


# -- the OData $filter the service evaluates --------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')"
    r"|(?P<typed>(?:datetime|guid|X|binary)'[^']*')"
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[LlDdMmFf]?)"
    r"|(?P<paren>[()])"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*))"
)
_COMPARISONS = {"eq", "ne", "gt", "ge", "lt", "le"}
Predicate = Callable[[dict[str, Typed]], bool]


def _tokens(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ServiceError(400, "InvalidInput", f"cannot read the filter at {text[position:]!r}")
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        position = match.end()
    return found


def _literal(kind: str, text: str) -> Typed:
    if kind == "string":
        return ("Edm.String", text[1:-1].replace("''", "'"))
    if kind == "typed":
        prefix, _, rest = text.partition("'")
        body = rest[:-1]
        if prefix == "datetime":
            return ("Edm.DateTime", _parse_datetime(body))
        if prefix == "guid":
            return ("Edm.Guid", str(uuid.UUID(body)))
        return ("Edm.Binary", bytes.fromhex(body))
    if kind == "number":
        suffix = text[-1]
        if suffix in "Ll":
            return ("Edm.Int64", int(text[:-1]))
        if suffix in "DdMmFf":
            return ("Edm.Double", float(text[:-1]))
        if any(c in text for c in ".eE"):
            return ("Edm.Double", float(text))
        return ("Edm.Int32", int(text))
    if text in ("true", "false"):
        return ("Edm.Boolean", text == "true")
    raise ServiceError(400, "InvalidInput", f"not a value: {text}")


_NUMBERS = {"Edm.Int32", "Edm.Int64", "Edm.Double"}


def _compare(left: Typed, op: str, right: Typed) -> bool:
    (left_type, a), (right_type, b) = left, right
    if left_type != right_type and not (left_type in _NUMBERS and right_type in _NUMBERS):
        return False  # values of different types never match (the service compares within a type)
    if left_type == "Edm.String":
        a, b = _utf16(a), _utf16(b)
    if op == "eq":
        return bool(a == b)
    if op == "ne":
        return bool(a != b)
    if left_type == "Edm.Boolean":
        a, b = int(a), int(b)
    if op == "gt":
        return bool(a > b)
    if op == "ge":
        return bool(a >= b)
    if op == "lt":
        return bool(a < b)
    return bool(a <= b)


class _FilterParser:
    """``or`` < ``and`` < ``not`` < comparison, with parentheses; a property on either side."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def parse(self) -> Predicate:
        predicate = self._or()
        if self.at != len(self.tokens):
            raise ServiceError(400, "InvalidInput", "trailing text in the filter")
        return predicate

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise ServiceError(400, "InvalidInput", "the filter ends too soon")
        self.at += 1
        return token

    def _or(self) -> Predicate:
        parts = [self._and()]
        while self._peek() == ("word", "or"):
            self.at += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else (lambda row: any(part(row) for part in parts))

    def _and(self) -> Predicate:
        parts = [self._not()]
        while self._peek() == ("word", "and"):
            self.at += 1
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else (lambda row: all(part(row) for part in parts))

    def _not(self) -> Predicate:
        if self._peek() == ("word", "not"):
            self.at += 1
            inner = self._not()
            return lambda row: not inner(row)
        if self._peek() == ("paren", "("):
            self.at += 1
            inner = self._or()
            if self._take() != ("paren", ")"):
                raise ServiceError(400, "InvalidInput", "unbalanced parentheses in the filter")
            return inner
        return self._comparison()

    def _operand(self) -> Callable[[dict[str, Typed]], Typed | None]:
        kind, text = self._take()
        if kind == "word" and text not in ("true", "false"):
            return lambda row: row.get(text)
        value = _literal(kind, text)
        return lambda row: value

    def _comparison(self) -> Predicate:
        left = self._operand()
        kind, op = self._take()
        if kind != "word" or op not in _COMPARISONS:
            raise ServiceError(400, "InvalidInput", f"not a comparison: {op}")
        right = self._operand()

        def compare(row: dict[str, Typed]) -> bool:
            a, b = left(row), right(row)
            return a is not None and b is not None and _compare(a, op, b)

        return compare


# -- the table service ----------------------------------------------------------------------------


@dataclass
class _Row:
    properties: dict[str, Typed]  # without PartitionKey, RowKey and Timestamp
    timestamp: datetime
    etag: str


@dataclass
class _Table:
    name: str
    rows: dict[tuple[str, str], _Row] = field(default_factory=dict)


@dataclass
class _Message:
    id: str
    text: str
    inserted: datetime
    visible_at: datetime
    pop_receipt: str
    dequeue_count: int = 0


class MemoryStorage:
    """One storage account's tables and queues, in memory. Hand :meth:`clients` to any store."""

    def __init__(self) -> None:
        # An account of its own: the product keeps per-account caches (the paging seal's key, the outbox's
        # sequence rows, remembered quota tokens) keyed by the service's URL, which must not outlive a store.
        self.account = f"memory{uuid.uuid4().hex[:12]}"
        self._lock = threading.RLock()
        self._tables: dict[str, _Table] = {}  # by lower-case name: table names are case-insensitive
        self._queues: dict[str, list[_Message]] = {}
        self._containers: dict[str, dict[str, _Blob]] = {}
        self._last_ticks = 0
        self.requests = 0  # requests answered (a test may count storage calls)

    # -- clients ---------------------------------------------------------------------------------

    def transport(self) -> MemoryTransport:
        return MemoryTransport(self)

    def clients(self) -> StorageClients:
        """The product's :class:`StorageClients`, every request answered by this storage."""
        credential = AzureNamedKeyCredential(self.account, ACCOUNT_KEY)
        account = self.account
        options: dict[str, Any] = {"transport": self.transport(), "retry_total": 0}
        return StorageClients(
            tables=TableServiceClient(f"https://{TABLE_HOST}/{account}", credential=credential, **options),
            blobs=BlobServiceClient(f"https://{BLOB_HOST}/{account}", credential=credential, **options),
            queues=QueueServiceClient(
                f"https://{QUEUE_HOST}/{account}", credential=credential, **QUEUE_CODEC, **options
            ),
        )

    # -- inspection, for tests -------------------------------------------------------------------

    def rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` in key order, values as Python values (for assertions)."""
        with self._lock:
            stored = self._table(table)
            return [
                {"PartitionKey": pk, "RowKey": rk, **{name: value for name, (_, value) in row.properties.items()}}
                for (pk, rk), row in sorted(stored.rows.items(), key=_row_order)
            ]

    def messages(self, queue: str) -> list[str]:
        with self._lock:
            return [message.text for message in self._queues.get(queue, [])]

    # -- time ------------------------------------------------------------------------------------

    def _stamp(self) -> tuple[datetime, str, str]:
        """A write's Timestamp and ETag: 100 ns ticks, strictly increasing across the service."""
        now = datetime.now(UTC)
        ticks = int((now - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 10_000_000)
        ticks = max(ticks, self._last_ticks + 1)
        self._last_ticks = ticks
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ticks // 10)
        text = _format_datetime(moment, ticks)
        return moment, text, "W/\"datetime'" + quote(text, safe="-.") + "'\""

    # -- requests --------------------------------------------------------------------------------

    def answer(
        self, method: str, url: str, headers: CaseInsensitiveDict, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        path = unquote(parts.path)
        query = {name: values[-1] for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
        prefix = f"/{self.account}/"
        if not path.startswith(prefix):
            return _error_answer(ServiceError(400, "InvalidInput", "not this account"))
        resource = path[len(prefix) :]
        with self._lock:
            self.requests += 1
            try:
                if parts.hostname == TABLE_HOST:
                    return self._table_request(method, resource, query, headers, body)
                if parts.hostname == QUEUE_HOST:
                    return self._queue_request(method, resource, query, body)
                if parts.hostname == BLOB_HOST:
                    return self._blob_request(method, resource, query, headers, body)
                raise ServiceError(501, "NotImplemented")
            except ServiceError as error:
                return _error_answer(error) if parts.hostname == TABLE_HOST else _xml_error_answer(error, method)

    def _table_request(
        self, method: str, resource: str, query: dict[str, str], headers: CaseInsensitiveDict, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if resource == "$batch" and method == "POST":
            return self._batch(headers, body)
        if resource == "Tables" or resource.startswith("Tables("):
            return self._tables_request(method, resource, body)
        if resource.endswith("()") and method == "GET":
            return self._query(resource[:-2], query)
        entity = _ENTITY_PATH.match(resource)
        if entity is not None:
            pk, rk = entity["pk"].replace("''", "'"), entity["rk"].replace("''", "'")
            status, answer_headers, content = self._entity(
                method, entity["table"], pk, rk, headers.get("If-Match"), body, headers.get("Prefer")
            )
            return status, answer_headers, content
        if method == "POST" and "(" not in resource:
            return self._entity("POST", resource, None, None, None, body, headers.get("Prefer"))
        if method == "GET" and "(" not in resource:
            return self._query(resource, query)
        raise ServiceError(501, "NotImplemented")

    def _table(self, name: str) -> _Table:
        table = self._tables.get(name.lower())
        if table is None:
            raise ServiceError(404, "TableNotFound")
        return table

    def _tables_request(self, method: str, resource: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method == "POST":
            name = str(json.loads(body or b"{}").get("TableName", ""))
            if not _TABLE_NAME.fullmatch(name):
                raise ServiceError(400, "InvalidResourceName")
            if name.lower() in self._tables:
                raise ServiceError(409, "TableAlreadyExists")
            self._tables[name.lower()] = _Table(name)
            return _json_answer(201, {"TableName": name})
        if method == "DELETE":
            name = resource[len("Tables('") : -2]
            if self._tables.pop(name.lower(), None) is None:
                raise ServiceError(404, "ResourceNotFound")
            return 204, {}, b""
        if method == "GET":
            return _json_answer(200, {"value": [{"TableName": t.name} for t in self._tables.values()]})
        raise ServiceError(501, "NotImplemented")

    # -- one row ---------------------------------------------------------------------------------

    def _entity(
        self,
        method: str,
        table_name: str,
        pk: str | None,
        rk: str | None,
        if_match: str | None,
        body: bytes,
        prefer: str | None,
    ) -> tuple[int, dict[str, str], bytes]:
        table = self._table(table_name)
        if method == "GET":
            assert pk is not None and rk is not None
            row = table.rows.get((pk, rk))
            if row is None:
                raise ServiceError(404, "ResourceNotFound")
            return _json_answer(200, _row_json(pk, rk, row, None), {"ETag": row.etag})
        if method == "DELETE":
            assert pk is not None and rk is not None
            self._check_condition(table, pk, rk, if_match or "*")
            del table.rows[(pk, rk)]
            return 204, {}, b""
        entity = json.loads(body or b"{}")
        if method == "POST":
            pk, rk = entity.get("PartitionKey"), entity.get("RowKey")
            if not isinstance(pk, str) or not isinstance(rk, str):
                raise ServiceError(400, "PropertiesNeedValue")
        elif entity.get("PartitionKey", pk) != pk or entity.get("RowKey", rk) != rk:
            raise ServiceError(400, "InvalidInput", "the body's keys are not the URL's")
        assert pk is not None and rk is not None
        properties = _properties(pk, rk, entity)
        if method == "POST":
            if (pk, rk) in table.rows:
                raise ServiceError(409, "EntityAlreadyExists")
            row = self._write(table, pk, rk, properties)
            if prefer == "return-no-content":
                return 204, {"ETag": row.etag, "Preference-Applied": "return-no-content"}, b""
            return _json_answer(201, _row_json(pk, rk, row, None), {"ETag": row.etag})
        if method in ("PUT", "PATCH", "MERGE"):
            if if_match is not None:
                self._check_condition(table, pk, rk, if_match)
            if method != "PUT" and (pk, rk) in table.rows:
                properties = {**table.rows[(pk, rk)].properties, **properties}
                _check_entity(pk, rk, properties)  # a merge is judged on the row it makes
            row = self._write(table, pk, rk, properties)
            return 204, {"ETag": row.etag}, b""
        raise ServiceError(501, "NotImplemented")

    def _check_condition(self, table: _Table, pk: str, rk: str, if_match: str) -> None:
        row = table.rows.get((pk, rk))
        if row is None:
            raise ServiceError(404, "ResourceNotFound")
        if if_match != "*" and if_match != row.etag:
            raise ServiceError(412, "UpdateConditionNotSatisfied")

    def _write(self, table: _Table, pk: str, rk: str, properties: dict[str, Typed]) -> _Row:
        moment, _, etag = self._stamp()
        row = _Row(properties, moment, etag)
        table.rows[(pk, rk)] = row
        return row

    # -- queries ---------------------------------------------------------------------------------

    def _query(self, table_name: str, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        table = self._table(table_name)
        predicate = _FilterParser(query["$filter"]).parse() if query.get("$filter") else None
        top = int(query.get("$top") or MAX_PAGE)
        if not 1 <= top <= MAX_PAGE:
            raise ServiceError(400, "InvalidInput", "$top must be between 1 and 1000")
        select = [name.strip() for name in query["$select"].split(",")] if query.get("$select") else None
        start = None
        if "NextPartitionKey" in query:
            start = (_unb64(query["NextPartitionKey"]), _unb64(query.get("NextRowKey", "")))
        found: list[tuple[tuple[str, str], _Row]] = []
        following: tuple[str, str] | None = None
        for key, row in sorted(table.rows.items(), key=_row_order):
            if start is not None and _row_order((key, row)) < (_utf16(start[0]), _utf16(start[1])):
                continue
            if predicate is not None and not predicate(_filterable(key, row)):
                continue
            if len(found) == top:
                following = key
                break
            found.append((key, row))
        headers: dict[str, str] = {}
        if following is not None:
            headers["x-ms-continuation-NextPartitionKey"] = _b64(following[0])
            headers["x-ms-continuation-NextRowKey"] = _b64(following[1])
        value = [_row_json(pk, rk, row, select) for (pk, rk), row in found]
        return _json_answer(200, {"value": value}, headers)

    # -- batches ---------------------------------------------------------------------------------

    def _batch(self, headers: CaseInsensitiveDict, body: bytes) -> tuple[int, dict[str, str], bytes]:
        batch_boundary = _boundary(headers.get("Content-Type", ""))
        if len(body) > MAX_BATCH_BYTES:
            raise ServiceError(413, "RequestBodyTooLarge")
        changes = _batch_changes(body.decode("utf-8"), batch_boundary, self.account)
        response_boundary = f"batchresponse_{uuid.uuid4()}"
        changeset_boundary = f"changesetresponse_{uuid.uuid4()}"
        try:
            parts = self._apply_changes(changes)
        except _ChangeFailed as failed:
            parts = [
                _http_part(
                    failed.error.status,
                    {
                        "Content-ID": str(failed.index + 1),
                        "Content-Type": "application/json;odata=minimalmetadata;charset=utf-8",
                    },
                    _error_body(failed.error, f"{failed.index}:"),
                )
            ]
        lines = [f"--{response_boundary}", f"Content-Type: multipart/mixed; boundary={changeset_boundary}", ""]
        for part in parts:
            lines += [
                f"--{changeset_boundary}",
                "Content-Type: application/http",
                "Content-Transfer-Encoding: binary",
                "",
                part,
            ]
        lines += [f"--{changeset_boundary}--", f"--{response_boundary}--", ""]
        content = "\r\n".join(lines).encode("utf-8")
        return 202, {"Content-Type": f"multipart/mixed; boundary={response_boundary}"}, content

    def _apply_changes(self, changes: list[_Change]) -> list[str]:
        """Every change or none: applied to a copy of each table, which replaces it only if all succeed."""
        if len(changes) > MAX_BATCH_CHANGES:
            raise _ChangeFailed(
                0,
                ServiceError(
                    400, "InvalidInput", "The batch request operation exceeds the maximum 100 changes per change set."
                ),
            )
        seen: set[tuple[str, str, str]] = set()
        partition: str | None = None
        originals: dict[str, dict[tuple[str, str], _Row]] = {}
        answers: list[str] = []
        try:
            for index, change in enumerate(changes):
                try:
                    pk, rk = change.keys()
                    if partition is not None and pk != partition:
                        raise ServiceError(400, "CommandsInBatchActOnDifferentPartitions")
                    partition = pk
                    if (change.table.lower(), pk, rk) in seen:
                        raise ServiceError(400, "InvalidDuplicateRow")
                    seen.add((change.table.lower(), pk, rk))
                    table = self._table(change.table)
                    originals.setdefault(table.name.lower(), dict(table.rows))
                    status, headers, content = self._entity(
                        change.method, change.table, *change.url_keys(), change.if_match, change.body, change.prefer
                    )
                except ServiceError as error:
                    raise _ChangeFailed(index, error) from error
                answers.append(_http_part(status, headers, content.decode("utf-8")))
        except _ChangeFailed:
            for name, rows in originals.items():
                self._tables[name].rows = rows
            raise
        return answers

    # -- queues (just enough for the outbox) -----------------------------------------------------

    def _queue_request(
        self, method: str, resource: str, query: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        name, _, rest = resource.partition("/")
        if not rest:
            if method == "PUT":
                created = name not in self._queues
                self._queues.setdefault(name, [])
                return (201 if created else 204), {}, b""
            if method == "DELETE":
                if self._queues.pop(name, None) is None:
                    raise ServiceError(404, "QueueNotFound")
                return 204, {}, b""
            if method == "GET" and query.get("comp") == "metadata":
                return 200, {"x-ms-approximate-messages-count": str(len(self._queue(name)))}, b""
            raise ServiceError(501, "NotImplemented")
        messages = self._queue(name)
        now = datetime.now(UTC)
        if rest == "messages" and method == "POST":
            text = _xml_text(body.decode("utf-8"), "MessageText")
            delay = int(query.get("visibilitytimeout") or 0)
            message = _Message(str(uuid.uuid4()), text, now, now + timedelta(seconds=delay), str(uuid.uuid4()))
            messages.append(message)
            return _xml_answer(201, [message], with_text=False)
        if rest == "messages" and method == "GET":
            count = int(query.get("numofmessages") or 1)
            visible = [m for m in messages if m.visible_at <= now][:count]
            if query.get("peekonly") == "true":
                return _xml_answer(200, visible, with_text=True, peek=True)
            hide = int(query.get("visibilitytimeout") or 30)
            for message in visible:
                message.visible_at = now + timedelta(seconds=hide)
                message.pop_receipt = str(uuid.uuid4())
                message.dequeue_count += 1
            return _xml_answer(200, visible, with_text=True)
        if rest == "messages" and method == "DELETE":
            messages.clear()
            return 204, {}, b""
        if rest.startswith("messages/") and method == "DELETE":
            message_id = rest[len("messages/") :]
            kept = [m for m in messages if not (m.id == message_id and m.pop_receipt == query.get("popreceipt"))]
            if len(kept) == len(messages):
                raise ServiceError(404, "MessageNotFound")
            messages[:] = kept
            return 204, {}, b""
        raise ServiceError(501, "NotImplemented")

    def _queue(self, name: str) -> list[_Message]:
        if name not in self._queues:
            raise ServiceError(404, "QueueNotFound")
        return self._queues[name]

    # -- blobs (containers and single-shot block blobs) ------------------------------------------

    def _blob_request(
        self, method: str, resource: str, query: dict[str, str], headers: CaseInsensitiveDict, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        container, _, name = resource.partition("/")
        if not name and query.get("restype") == "container":
            return self._container_request(method, container, query)
        blobs = self._containers.get(container)
        if blobs is None:
            raise ServiceError(404, "ContainerNotFound")
        if query.get("comp") or not name:
            raise ServiceError(501, "NotImplemented")  # leases, blocks, metadata, tiers...: not served
        current = blobs.get(name)
        _check_blob_conditions(current, headers)
        if method == "PUT":
            if headers.get("x-ms-blob-type") != "BlockBlob":
                raise ServiceError(501, "NotImplemented")
            now = self._blob_time()
            blob = _Blob(
                data=body,
                etag=self._blob_etag(),
                created=current.created if current else now,
                modified=now,
                content_type=str(headers.get("x-ms-blob-content-type") or "application/octet-stream"),
            )
            blobs[name] = blob
            md5 = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode("ascii")
            return 201, {"ETag": blob.etag, "Last-Modified": _http_date(now), "Content-MD5": md5}, b""
        if current is None:
            raise ServiceError(404, "BlobNotFound")
        if method == "DELETE":
            del blobs[name]
            return 202, {"x-ms-delete-type-permanent": "true"}, b""
        if method == "HEAD":
            return 200, {**current.headers(), "Content-Length": str(len(current.data))}, b""
        if method == "GET":
            return _blob_read(current, str(headers.get("x-ms-range") or headers.get("Range") or ""))
        raise ServiceError(501, "NotImplemented")

    def _container_request(
        self, method: str, container: str, query: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        if method == "PUT" and not query.get("comp"):
            if container in self._containers:
                raise ServiceError(409, "ContainerAlreadyExists")
            self._containers[container] = {}
            return 201, {"ETag": self._blob_etag(), "Last-Modified": _http_date(self._blob_time())}, b""
        if container not in self._containers:
            raise ServiceError(404, "ContainerNotFound")
        if method == "DELETE":
            del self._containers[container]
            return 202, {}, b""
        if method in ("GET", "HEAD") and query.get("comp") == "list":
            return _blob_list(container, self._containers[container], query)
        if method in ("GET", "HEAD") and not query.get("comp"):
            return 200, {"ETag": self._blob_etag(), "Last-Modified": _http_date(self._blob_time())}, b""
        raise ServiceError(501, "NotImplemented")

    def _blob_time(self) -> datetime:
        return datetime.now(UTC).replace(microsecond=0)

    def _blob_etag(self) -> str:
        _, _, _ = self._stamp()  # the service's clock moves on at every write
        return f'"0x{self._last_ticks:X}"'


@dataclass
class _Blob:
    data: bytes
    etag: str
    created: datetime
    modified: datetime
    content_type: str

    def headers(self) -> dict[str, str]:
        return {
            "ETag": self.etag,
            "Last-Modified": _http_date(self.modified),
            "x-ms-creation-time": _http_date(self.created),
            "Content-Type": self.content_type,
            "x-ms-blob-type": "BlockBlob",
            "x-ms-lease-state": "available",
            "x-ms-lease-status": "unlocked",
            "Accept-Ranges": "bytes",
        }


def _check_blob_conditions(current: _Blob | None, headers: CaseInsensitiveDict) -> None:
    if_match, if_none_match = headers.get("If-Match"), headers.get("If-None-Match")
    if if_none_match == "*" and current is not None:
        raise ServiceError(409, "BlobAlreadyExists")
    if if_none_match not in (None, "*") and current is not None and current.etag == if_none_match:
        raise ServiceError(412, "ConditionNotMet")
    if if_match is not None and (current is None or (if_match != "*" and if_match != current.etag)):
        raise ServiceError(412 if current is not None else 404, "ConditionNotMet" if current else "BlobNotFound")


def _blob_read(blob: _Blob, requested: str) -> tuple[int, dict[str, str], bytes]:
    size = len(blob.data)
    if not requested:
        return 200, {**blob.headers(), "Content-Length": str(size)}, blob.data
    first, _, last = requested.removeprefix("bytes=").partition("-")
    start, end = int(first), min(int(last) if last else size - 1, size - 1)
    if start >= size:
        raise ServiceError(416, "InvalidRange")
    part = blob.data[start : end + 1]
    headers = {**blob.headers(), "Content-Length": str(len(part)), "Content-Range": f"bytes {start}-{end}/{size}"}
    return 206, headers, part


def _blob_list(container: str, blobs: dict[str, _Blob], query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    prefix, marker = query.get("prefix", ""), query.get("marker", "")
    limit = int(query.get("maxresults") or 5000)
    names = sorted(name for name in blobs if name.startswith(prefix) and name > marker)
    page, rest = names[:limit], names[limit:]
    items = "".join(
        f"<Blob><Name>{escape(name)}</Name><Properties>"
        f"<Creation-Time>{_http_date(blobs[name].created)}</Creation-Time>"
        f"<Last-Modified>{_http_date(blobs[name].modified)}</Last-Modified>"
        f"<Etag>{blobs[name].etag.strip(chr(34))}</Etag><Content-Length>{len(blobs[name].data)}</Content-Length>"
        f"<Content-Type>{escape(blobs[name].content_type)}</Content-Type><BlobType>BlockBlob</BlobType>"
        "<LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState></Properties></Blob>"
        for name in page
    )
    next_marker = f"<NextMarker>{escape(page[-1])}</NextMarker>" if rest else "<NextMarker/>"
    xml = (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<EnumerationResults ContainerName="{escape(container)}"><Prefix>{escape(prefix)}</Prefix>'
        f"<MaxResults>{limit}</MaxResults><Blobs>{items}</Blobs>{next_marker}</EnumerationResults>"
    )
    return 200, {"Content-Type": "application/xml"}, xml.encode("utf-8")


def _http_date(moment: datetime) -> str:
    return moment.strftime("%a, %d %b %Y %H:%M:%S GMT")


class _ChangeFailed(Exception):
    def __init__(self, index: int, error: ServiceError) -> None:
        super().__init__(error.code)
        self.index = index
        self.error = error


@dataclass
class _Change:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    account: str

    @property
    def table(self) -> str:
        path = unquote(urlsplit(self.url).path)
        resource = path.split(f"/{self.account}/", 1)[-1]
        return resource.split("(", 1)[0]

    @property
    def if_match(self) -> str | None:
        return self.headers.get("if-match")

    @property
    def prefer(self) -> str | None:
        return self.headers.get("prefer")

    def url_keys(self) -> tuple[str | None, str | None]:
        if self.method == "POST":
            return None, None
        resource = unquote(urlsplit(self.url).path).split(f"/{self.account}/", 1)[-1]
        match = _ENTITY_PATH.match(resource)
        if match is None:
            raise ServiceError(400, "InvalidInput")
        return match["pk"].replace("''", "'"), match["rk"].replace("''", "'")

    def keys(self) -> tuple[str, str]:
        if self.method == "POST":
            entity = json.loads(self.body or b"{}")
            return str(entity.get("PartitionKey")), str(entity.get("RowKey"))
        pk, rk = self.url_keys()
        assert pk is not None and rk is not None
        return pk, rk


def _batch_changes(text: str, batch_boundary: str, account: str) -> list[_Change]:
    """The changeset's sub-requests, in order."""
    changeset = next(
        (
            _boundary(line.split(":", 1)[1])
            for line in text.split("\r\n")
            if line.lower().startswith("content-type:") and "changeset" in line
        ),
        "",
    )
    if not changeset:
        raise ServiceError(400, "InvalidInput", f"no changeset in batch {batch_boundary}")
    changes: list[_Change] = []
    for chunk in text.split(f"--{changeset}")[1:]:
        if chunk.startswith("--"):
            break
        _, _, http = chunk.partition("\r\n\r\n")  # past the part's own headers
        head, _, body = http.partition("\r\n\r\n")
        lines = head.split("\r\n")
        method, url, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = body.removesuffix("\r\n")
        changes.append(_Change(method, url, headers, body.encode("utf-8"), account))
    return changes


# -- answers --------------------------------------------------------------------------------------


def _properties(pk: str, rk: str, entity: dict[str, Any]) -> dict[str, Typed]:
    for key in (pk, rk):
        if _utf16_units(key) > MAX_KEY_UNITS or _KEY_FORBIDDEN.search(key):
            raise ServiceError(400, "InvalidInput")
    properties: dict[str, Typed] = {}
    for name, value in entity.items():
        if name.endswith("@odata.type") or name in ("PartitionKey", "RowKey", "Timestamp") or name.startswith("odata."):
            continue
        typed = _typed_from_json(name, value, entity.get(f"{name}@odata.type"))
        if typed is None:
            continue
        if typed[0] == "Edm.String" and _utf16_units(typed[1]) > MAX_STRING_UNITS:
            raise ServiceError(400, "PropertyValueTooLarge")
        if typed[0] == "Edm.Binary" and len(typed[1]) > MAX_BINARY_BYTES:
            raise ServiceError(400, "PropertyValueTooLarge")
        properties[name] = typed
    _check_entity(pk, rk, properties)
    return properties


# A value's size by type in the service's formula; a String and a Binary add a 4-byte length.
_EDM_SIZES = {"Edm.Boolean": 1, "Edm.Int32": 4, "Edm.Int64": 8, "Edm.Double": 8, "Edm.DateTime": 8, "Edm.Guid": 16}


def _entity_size(pk: str, rk: str, properties: dict[str, Typed]) -> int:
    """The service's documented size of an entity: 4 bytes, the keys as UTF-16, and per property
    8 bytes, its name as UTF-16 and its value."""
    size = 4 + 2 * (_utf16_units(pk) + _utf16_units(rk))
    for name, (edm, value) in properties.items():
        if edm == "Edm.String":
            value_size = 4 + 2 * _utf16_units(value)
        elif edm == "Edm.Binary":
            value_size = 4 + len(value)
        else:
            value_size = _EDM_SIZES[edm]
        size += 8 + 2 * _utf16_units(name) + value_size
    return size


def _check_entity(pk: str, rk: str, properties: dict[str, Typed]) -> None:
    if len(properties) > MAX_PROPERTIES:
        raise ServiceError(400, "TooManyProperties")
    if _entity_size(pk, rk, properties) > MAX_ENTITY_BYTES:
        raise ServiceError(400, "EntityTooLarge")


def _filterable(key: tuple[str, str], row: _Row) -> dict[str, Typed]:
    return {
        "PartitionKey": ("Edm.String", key[0]),
        "RowKey": ("Edm.String", key[1]),
        "Timestamp": ("Edm.DateTime", row.timestamp),
        **row.properties,
    }


def _row_order(item: tuple[tuple[str, str], Any]) -> tuple[bytes, bytes]:
    (pk, rk), _ = item
    return _utf16(pk), _utf16(rk)


def _row_json(pk: str, rk: str, row: _Row, select: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"odata.etag": row.etag}
    everything: dict[str, Typed] = {
        "PartitionKey": ("Edm.String", pk),
        "RowKey": ("Edm.String", rk),
        **row.properties,
        "Timestamp": ("Edm.DateTime", row.timestamp),
    }
    for name, typed in everything.items():
        if select is None or name in select:
            if name == "Timestamp":
                out["Timestamp"] = row.etag.split("'")[1].replace("%3A", ":")  # seven digits, as in the ETag
            else:
                _typed_to_json(name, typed, out)
    return out


def _json_answer(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    answer = {"Content-Type": "application/json;odata=minimalmetadata", **(headers or {})}
    return status, answer, json.dumps(body).encode("utf-8")


def _error_body(error: ServiceError, prefix: str = "") -> str:
    message = f"{prefix}{error.message}\nRequestId:{uuid.uuid4()}\nTime:{datetime.now(UTC).isoformat()}"
    return json.dumps({"odata.error": {"code": error.code, "message": {"lang": "en-US", "value": message}}})


def _error_answer(error: ServiceError) -> tuple[int, dict[str, str], bytes]:
    headers = {"x-ms-error-code": error.code, "Content-Type": "application/json;odata=minimalmetadata;charset=utf-8"}
    return error.status, headers, _error_body(error).encode("utf-8")


def _xml_error_answer(error: ServiceError, method: str) -> tuple[int, dict[str, str], bytes]:
    """A Blob or Queue service error: the code in ``x-ms-error-code`` and an XML body (none for HEAD)."""
    headers = {"x-ms-error-code": error.code}
    if error.status == 416:
        headers["Content-Range"] = "bytes */0"
    if method == "HEAD":
        return error.status, headers, b""
    message = escape(f"{error.message}\nRequestId:{uuid.uuid4()}\nTime:{datetime.now(UTC).isoformat()}")
    xml = f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{error.code}</Code><Message>{message}</Message></Error>'
    return error.status, {**headers, "Content-Type": "application/xml"}, xml.encode("utf-8")


def _http_part(status: int, headers: dict[str, str], body: str) -> str:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, '')}", *(f"{k}: {v}" for k, v in headers.items()), ""]
    return "\r\n".join(lines) + "\r\n" + body


def _boundary(content_type: str) -> str:
    for parameter in content_type.split(";"):
        name, _, value = parameter.strip().partition("=")
        if name.lower() == "boundary":
            return value.strip('"')
    return ""


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _unb64(text: str) -> str:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True).decode("utf-8")
    except (ValueError, binascii.Error) as error:
        raise ServiceError(400, "InvalidInput", "not a continuation this service handed out") from error


def _xml_text(xml: str, tag: str) -> str:
    match = re.search(f"<{tag}>(.*?)</{tag}>", xml, re.S)
    if match is None:
        raise ServiceError(400, "InvalidInput")
    text = match.group(1)
    return (
        text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", '"')
        .replace("&apos;", "'")
        .replace("&amp;", "&")
    )


def _xml_answer(
    status: int, messages: list[_Message], *, with_text: bool, peek: bool = False
) -> tuple[int, dict[str, str], bytes]:
    def http_date(moment: datetime) -> str:
        return moment.strftime("%a, %d %b %Y %H:%M:%S GMT")

    items = []
    for message in messages:
        fields = [
            f"<MessageId>{message.id}</MessageId>",
            f"<InsertionTime>{http_date(message.inserted)}</InsertionTime>",
            f"<ExpirationTime>{http_date(message.inserted + timedelta(days=7))}</ExpirationTime>",
        ]
        if not peek:
            fields += [
                f"<PopReceipt>{message.pop_receipt}</PopReceipt>",
                f"<TimeNextVisible>{http_date(message.visible_at)}</TimeNextVisible>",
            ]
        if with_text:
            fields += [
                f"<DequeueCount>{message.dequeue_count}</DequeueCount>",
                f"<MessageText>{escape(message.text)}</MessageText>",
            ]
        items.append("<QueueMessage>" + "".join(fields) + "</QueueMessage>")
    xml = '<?xml version="1.0" encoding="utf-8"?><QueueMessagesList>' + "".join(items) + "</QueueMessagesList>"
    return status, {"Content-Type": "application/xml"}, xml.encode("utf-8")


# -- the transport --------------------------------------------------------------------------------


class _Closed:
    def close(self) -> None:
        pass


class MemoryTransport(HttpTransport):
    """An azure-core transport that hands every request to a :class:`MemoryStorage` (no socket)."""

    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage

    def send(self, request: Any, **kwargs: Any) -> HttpResponseImpl:
        body = request.content if hasattr(request, "content") else request.body
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = CaseInsensitiveDict(dict(request.headers))
        status, answer_headers, content = self.storage.answer(request.method, request.url, headers, body or b"")
        response = HttpResponseImpl(
            request=request,
            internal_response=_Closed(),
            status_code=status,
            reason=_REASONS.get(status, ""),
            content_type=answer_headers.get("Content-Type", ""),
            headers=CaseInsensitiveDict(answer_headers),
            stream_download_generator=_BodyStream,
        )
        response._content = content  # read already: there is nothing to stream
        return response

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> MemoryTransport:
        return self

    def __exit__(self, *args: object) -> None:
        pass


class _BodyStream:
    """The answer's body as a download stream (it is all in memory already). An object, not a generator: the
    Blob SDK hangs the blob's properties on the stream it is handed, as on azure-core's own."""

    CHUNK = 4 * 1024 * 1024

    def __init__(self, pipeline: Any = None, response: Any = None, **kwargs: Any) -> None:
        self.pipeline = pipeline
        self.response = response
        self.request = getattr(response, "request", None)
        content = getattr(response, "_content", None) or b""
        self.content_length = len(content)
        self._chunks = iter([content[i : i + self.CHUNK] for i in range(0, len(content), self.CHUNK)])

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        pass
