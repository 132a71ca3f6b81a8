"""Streams: the per-environment table partitions that modules keep their state in.

A module's table keeps one partition per ``{tenant}|{environment}``: an
environment row, the module's rows for that environment, and the outbox rows of
its events, so a state change and its events commit in one batch. This module
holds what every such table shares: the partition key, the environment row read
with its ETag, and the batch operation that writes it back conditionally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, UpdateMode

from shared.platform.storage.conditional import read_row

ENVIRONMENT_ROW = "environment"
_KEYS = ("etag", "PartitionKey", "RowKey")


def stream_key(tenant: str, environment: str) -> str:
    return f"{tenant}|{environment}"


def if_unchanged(etag: str) -> dict[str, Any]:
    """Batch-operation options for a replace that only succeeds if the row is still ``etag``."""
    return {"mode": UpdateMode.REPLACE, "etag": etag, "match_condition": MatchConditions.IfNotModified}


@dataclass
class EnvironmentRow:
    """An environment's row as read (empty ``row`` when there is none yet), with its ETag."""

    tenant: str
    environment: str
    row: dict[str, Any]

    @classmethod
    def read(cls, table: TableClient, tenant: str, environment: str) -> EnvironmentRow:
        return cls(tenant, environment, read_row(table, stream_key(tenant, environment), ENVIRONMENT_ROW) or {})

    @property
    def etag(self) -> str | None:
        return self.row.get("etag")

    def get(self, name: str, default: Any = None) -> Any:
        return self.row.get(name, default)

    def write_operation(self, changes: dict[str, Any]) -> tuple[Any, ...]:
        """Create the row, or replace it if nobody wrote it since it was read."""
        fields = {k: v for k, v in self.row.items() if k not in _KEYS}
        fields.update(changes)
        entity = {
            "PartitionKey": stream_key(self.tenant, self.environment),
            "RowKey": ENVIRONMENT_ROW,
            "Tenant": self.tenant,
            "Environment": self.environment,
            **fields,
        }
        if self.etag is None:
            return ("create", entity)
        return ("update", entity, if_unchanged(self.etag))
