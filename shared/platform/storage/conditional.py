"""ETag-conditional table writes and batches that speak the domain's language.

One meaning per answer, for single rows and batches alike:

- 409 (insert of an existing key): :class:`AlreadyExists`;
- 412 (the ETag moved on) and 404 (a conditional replace or delete of a row
  deleted since it was read): :class:`ConcurrencyConflict`, the read is stale
  (retry with :func:`shared.platform.storage.optimistic.on_conflict`);
- no answer at all (connection refused, reset, timed out after the SDK's own
  retries): :class:`StoreUnavailable`, which every trigger answers with 503.

Callers decide what a conflict means for them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.data.tables import TableClient, TableTransactionError

from shared.platform.errors import AlreadyExists, ConcurrencyConflict, StoreUnavailable
from shared.platform.storage.rows import insert_row, replace_row
from storage_protocol.table_batch import send_batch


@contextmanager
def store_errors() -> Iterator[None]:
    """Turn the SDK's "the store did not answer" into :class:`StoreUnavailable`."""
    try:
        yield
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error


def submit_batch(table: TableClient, operations: Sequence[Any]) -> list[Mapping[str, Any]]:
    """An atomic batch in one partition. Returns each operation's metadata (with its new ``etag``).

    Sent by :func:`storage_protocol.table_batch.send_batch`: ``submit_transaction``'s request and answers,
    without its per-batch thread pools.
    """
    try:
        with store_errors():
            return send_batch(table, operations)
    except TableTransactionError as error:
        code = getattr(error, "error_code", None)  # set by the SDK when it decodes the answer; not declared
        if error.status_code == 409:
            raise AlreadyExists(f"{table.table_name}: {code}") from error
        if error.status_code in (404, 412):
            raise ConcurrencyConflict(f"{table.table_name}: {code}") from error
        raise


def query_rows(
    table: TableClient, filter_text: str, *, select: list[str] | None = None, **parameters: Any
) -> list[dict[str, Any]]:
    """All rows matching ``filter_text``, each with its ETag under ``"etag"``."""
    with store_errors():
        entities = table.query_entities(filter_text, parameters=parameters or None, select=select)
        return [{**entity, "etag": entity.metadata.get("etag")} for entity in entities]


def insert_if_absent(table: TableClient, entity: Mapping[str, Any]) -> str:
    """Insert the row; :class:`AlreadyExists` if its key is taken. Returns the new ETag.

    Written by :func:`shared.platform.storage.rows.insert_row` (``create_entity``'s request, without its
    generated layer).
    """
    try:
        return insert_row(table, entity)
    except ResourceExistsError as error:
        raise AlreadyExists(_describe(table, entity)) from error
    except HttpResponseError as error:
        if error.status_code == 409:
            raise AlreadyExists(_describe(table, entity)) from error
        raise
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error


def replace_if_unchanged(table: TableClient, entity: Mapping[str, Any], etag: str) -> str:
    """Replace the row only if nobody wrote it since ``etag`` was read. Returns the new ETag.

    Written by :func:`shared.platform.storage.rows.replace_row` (``update_entity``'s request, without its
    generated layer).
    """
    try:
        return replace_row(table, entity, etag)
    except (ResourceModifiedError, ResourceNotFoundError) as error:  # changed or deleted since read
        raise ConcurrencyConflict(_describe(table, entity)) from error
    except HttpResponseError as error:
        if error.status_code == 412:
            raise ConcurrencyConflict(_describe(table, entity)) from error
        raise
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error


def delete_if_unchanged(table: TableClient, partition_key: str, row_key: str, etag: str) -> None:
    """Delete the row only if it is still the version read; gone already is fine."""
    try:
        with store_errors():
            table.delete_entity(
                partition_key=partition_key,
                row_key=row_key,
                etag=etag,
                match_condition=MatchConditions.IfNotModified,
            )
    except ResourceModifiedError as error:
        raise ConcurrencyConflict(f"{table.table_name}/{partition_key}/{row_key}") from error
    except HttpResponseError as error:
        if error.status_code == 412:
            raise ConcurrencyConflict(f"{table.table_name}/{partition_key}/{row_key}") from error
        raise


def read_row(table: TableClient, partition_key: str, row_key: str) -> dict[str, Any] | None:
    """The row with its ETag under ``"etag"``, or None."""
    try:
        entity = table.get_entity(partition_key=partition_key, row_key=row_key)
    except ResourceNotFoundError:
        return None
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error
    row = dict(entity)
    row["etag"] = entity.metadata["etag"]
    return row


def _describe(table: TableClient, entity: Mapping[str, Any]) -> str:
    return f"{table.table_name}/{entity.get('PartitionKey')}/{entity.get('RowKey')}"
