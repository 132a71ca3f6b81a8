"""ETag-conditional table writes that speak the domain's language.

Storage answers a lost race with 409 (insert of an existing key) or 412
(ETag moved on); callers get :class:`AlreadyExists` or
:class:`ConcurrencyConflict` instead and decide what a conflict means for them.
"""

from __future__ import annotations

from typing import Any, Mapping

from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.data.tables import TableClient, UpdateMode

from shared.errors import AlreadyExists, ConcurrencyConflict, NotFound, StoreUnavailable


def insert_if_absent(table: TableClient, entity: Mapping[str, Any]) -> str:
    """Insert the row; :class:`AlreadyExists` if its key is taken. Returns the new ETag."""
    try:
        metadata = table.create_entity(entity=entity)
    except ResourceExistsError as error:
        raise AlreadyExists(_describe(table, entity)) from error
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error
    return metadata["etag"]


def replace_if_unchanged(table: TableClient, entity: Mapping[str, Any], etag: str) -> str:
    """Replace the row only if nobody wrote it since ``etag`` was read. Returns the new ETag."""
    try:
        metadata = table.update_entity(
            entity=entity, mode=UpdateMode.REPLACE, etag=etag, match_condition=MatchConditions.IfNotModified
        )
    except ResourceModifiedError as error:
        raise ConcurrencyConflict(_describe(table, entity)) from error
    except ResourceNotFoundError as error:
        raise NotFound(_describe(table, entity)) from error
    except HttpResponseError as error:
        if error.status_code == 412:
            raise ConcurrencyConflict(_describe(table, entity)) from error
        raise
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error
    return metadata["etag"]


def delete_if_unchanged(table: TableClient, partition_key: str, row_key: str, etag: str) -> None:
    """Delete the row only if it is still the version read; gone already is fine."""
    try:
        table.delete_entity(
            partition_key=partition_key, row_key=row_key, etag=etag, match_condition=MatchConditions.IfNotModified
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
