"""Single-row table writes (insert, conditional replace, merge) without the SDK's generated operation layer.

``TableClient.create_entity`` and ``update_entity`` build their request through
generated code: a per-value serializer walk, a request builder, and (for an
insert) an answer that carries the whole entity back, which the SDK parses.
On the lease path that layer cost more CPU than the call's HTTP exchange.
This module writes the same request directly, the way ``storage_protocol/table_batch.py``
writes a batch:

- the entity is serialised by the SDK's own ``_add_entity_properties`` (types
  and ``@odata.type`` annotations exactly as ``create_entity`` sends them), and
  the keys are quoted as the SDK quotes them;
- the request goes through the table client's own pipeline, so the shared key
  or bearer token, retries, request id, user agent and tracing (a span named as
  the SDK's method) are unchanged;
- an insert asks for no content back (``Prefer: return-no-content``): the
  caller only needs the new ETag, which is in the answer's headers either way;
- a failure is the SDK's own exception, made by the SDK's error decoder from
  the answer (``ResourceExistsError`` for a taken key, ``ResourceModifiedError``
  for a moved ETag, ``ResourceNotFoundError``...), with its status code.

``tests/test_storage_rows.py`` writes the same rows both ways against Azurite
and compares what is stored and what is raised; the SDK version is pinned.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from azure.core.rest import HttpRequest
from azure.core.tracing.decorator import distributed_trace
from azure.data.tables import TableClient
from azure.data.tables import _error as sdk_errors  # the SDK's own decoding of an error answer
from azure.data.tables._serialize import _add_entity_properties, _prepare_key  # what create_entity sends


@distributed_trace(name_of_span="TableClient.create_entity")
def insert_row(table: TableClient, entity: Mapping[str, Any]) -> str:
    """``table.create_entity(entity)``; returns the new ETag."""
    return _write(table, "POST", _table_url(table), entity, {"Prefer": "return-no-content"})


@distributed_trace(name_of_span="TableClient.update_entity")
def replace_row(table: TableClient, entity: Mapping[str, Any], etag: str) -> str:
    """``table.update_entity(entity, mode=REPLACE, etag=etag, match_condition=IfNotModified)``; the new ETag."""
    return _write(table, "PUT", _row_url(table, entity), entity, {"If-Match": etag})


@distributed_trace(name_of_span="TableClient.update_entity")
def merge_row(table: TableClient, entity: Mapping[str, Any]) -> str:
    """``table.update_entity(entity, mode=MERGE)`` (the row must exist, whatever its ETag); the new ETag."""
    return _write(table, "PATCH", _row_url(table, entity), entity, {"If-Match": "*"})


def _table_url(table: TableClient) -> str:
    return f"{table.scheme}://{table._primary_hostname}/{quote(table.table_name, safe='')}"


def _row_url(table: TableClient, entity: Mapping[str, Any]) -> str:
    partition = quote(_prepare_key(entity["PartitionKey"]), safe="")
    row = quote(_prepare_key(entity["RowKey"]), safe="")
    return f"{_table_url(table)}(PartitionKey='{partition}',RowKey='{row}')"


def _write(table: TableClient, method: str, url: str, entity: Mapping[str, Any], headers: dict[str, str]) -> str:
    body = json.dumps(_add_entity_properties(entity))  # raises the SDK's TypeError for a value it cannot store
    request = HttpRequest(
        method=method,
        url=url,
        headers={
            "x-ms-version": table.api_version,
            "DataServiceVersion": "3.0",
            "Content-Type": "application/json;odata=nometadata",
            "Accept": "application/json;odata=minimalmetadata",
            "x-ms-client-request-id": str(uuid.uuid4()),  # see _batch_request in storage_protocol/table_batch.py
            **headers,
        },
        content=body.encode("utf-8"),
    )
    response = table._client.send_request(request)
    if not 200 <= response.status_code < 300:
        error = sdk_errors._decode_error(response)  # type: ignore[no-untyped-call]
        sdk_errors._validate_tablename_error(error, table.table_name)  # type: ignore[no-untyped-call]
        raise error
    return str(response.headers["ETag"])
