"""Pages of a table query: a bounded number of rows read per page, and a sealed continuation.

Every list the API answers reads one page at a time with Table Storage's own
continuation (``results_per_page`` and the ``NextPartitionKey``/``NextRowKey``
the service hands back), so a page costs the same storage reads at any depth:
nothing is read past what the page shows. The order is the table's key order
(``PartitionKey`` then ``RowKey``), which is stable while rows come and go.

The continuation a caller gets is opaque and tamper-evident: the service's
token, sealed with an HMAC over the list it belongs to (its ``scope``: the
tenant, the list and its filters). A token edited by hand, or replayed on
another list, filter or tenant, is a 422 naming ``/continuation``, never a
silent jump. The key is random, made once per store and kept in the store
(table ``PagingKeys``), so every instance of the host seals and opens alike.
It is not in the backup: a restored store makes a new key, and continuations
handed out before the restore are refused (the caller starts again).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from azure.core.exceptions import ResourceExistsError, ServiceRequestError, ServiceResponseError
from azure.core.paging import PageIterator
from azure.data.tables import TableClient, TableEntity, TableServiceClient

from shared.platform.errors import InvalidInput, StoreUnavailable

KEYS_TABLE = "PagingKeys"
_KEY_ROW = ("paging", "v1")
MAX_CONTINUATION_CHARS = 2048  # a token holds two keys of at most 1 KiB... base64 of far less in practice
# Storage calls one page may take when rows are filtered out after reading: a page may hold fewer
# items than asked (its continuation goes on), never more reads than this.
MAX_CALLS_PER_PAGE = 4
_SEAL_BYTES = 16

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Page:
    rows: list[TableEntity]
    continuation: str | None
    calls: int  # storage calls this page took (bounded by MAX_CALLS_PER_PAGE)


class PageSeal:
    """Seals and opens continuations with one key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def seal(self, scope: str, token: Mapping[str, str | None]) -> str:
        body = _b64(json.dumps([token.get("PartitionKey"), token.get("RowKey")], separators=(",", ":")).encode())
        return f"{body}.{_b64(self._mac(scope, body))}"

    def open(self, scope: str, continuation: str) -> dict[str, str | None]:
        """The service's token inside ``continuation``, if this service sealed it for ``scope``."""
        body, _, mac = continuation.partition(".")
        try:
            valid = len(continuation) <= MAX_CONTINUATION_CHARS and hmac.compare_digest(
                _unb64(mac), self._mac(scope, body)
            )
            keys = json.loads(_unb64(body)) if valid else None
        except (ValueError, binascii.Error, UnicodeError, RecursionError):
            keys = None
        if not (isinstance(keys, list) and len(keys) == 2 and all(k is None or isinstance(k, str) for k in keys)):
            raise InvalidInput([{"path": "/continuation", "message": "not a continuation this list handed out"}])
        return {"PartitionKey": keys[0], "RowKey": keys[1]}

    def _mac(self, scope: str, body: str) -> bytes:
        return hmac.new(self._key, f"{scope}\n{body}".encode(), hashlib.sha256).digest()[:_SEAL_BYTES]


def read_page(
    table: TableClient,
    query: str,
    parameters: dict[str, Any],
    *,
    scope: str,
    seal: PageSeal,
    limit: int,
    continuation: str | None,
    keep: Callable[[TableEntity], bool] | None = None,
    select: list[str] | None = None,
) -> Page:
    """At most ``limit`` rows of ``query`` (those ``keep`` keeps), from where ``continuation`` left off.

    Each storage call asks for no more rows than the page still needs, so the rows read are at most
    ``limit`` per call and ``MAX_CALLS_PER_PAGE`` calls per page, whatever the depth.
    """
    token: dict[str, str | None] | None = seal.open(scope, continuation) if continuation else None
    found: list[TableEntity] = []
    calls = 0
    try:
        while calls < MAX_CALLS_PER_PAGE and len(found) < limit:
            pages = cast(
                PageIterator[TableEntity],
                table.query_entities(
                    query, parameters=parameters, results_per_page=limit - len(found), select=select
                ).by_page(continuation_token=token),  # type: ignore[arg-type]  # the Tables SDK's token is a dict
            )
            calls += 1
            rows = list(next(pages, []))
            found.extend(row for row in rows if keep is None or keep(row))
            token = cast(dict[str, str | None] | None, pages.continuation_token)
            if token is None:
                break
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error
    return Page(found, seal.seal(scope, token) if token else None, calls)


def scope_of(*parts: object) -> str:
    """A list's scope from its parts (a list name, the tenant, each filter; None for an absent one)."""
    return json.dumps([None if part is None else str(part) for part in parts], separators=(",", ":"))


def after(prefix: str) -> str:
    """The first string after every string that starts with ``prefix`` (its key range's end)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


_keys: dict[str, bytes] = {}
_keys_lock = threading.Lock()


def paging_seal(tables: TableServiceClient) -> PageSeal:
    """The store's seal: its key read (or made, once for every instance) at the first page, then kept."""
    account = tables.url
    with _keys_lock:
        key = _keys.get(account)
        if key is None:
            try:
                key = _store_key(tables)
            except (ServiceRequestError, ServiceResponseError) as error:
                raise StoreUnavailable(str(error)) from error
            _keys[account] = key
    return PageSeal(key)


def _store_key(tables: TableServiceClient) -> bytes:
    table = tables.get_table_client(KEYS_TABLE)
    try:
        tables.create_table(KEYS_TABLE)
    except ResourceExistsError:
        pass
    partition, row = _KEY_ROW
    try:
        table.create_entity({"PartitionKey": partition, "RowKey": row, "Key": _b64(secrets.token_bytes(32))})
    except ResourceExistsError:
        pass  # another instance made it first: everyone uses that one
    return _unb64(str(table.get_entity(partition, row)["Key"]))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4))
