"""Where bindings live: table ``GitOpsBindings``, one row per environment.

``PartitionKey`` is the tenant and ``RowKey`` the environment, so a tenant
reads only its own bindings (another tenant's environment is simply not
there). The binding is one JSON document in ``Document`` (a few kilobytes at
most: 20 windows, an error cut to 2,000 characters), beside ``Suspended`` for
the poll's query. Every write but the first is conditional on the ETag read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from azure.data.tables import TableClient

from shared.gitops.bindings import Binding
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import (
    delete_if_unchanged,
    insert_if_absent,
    query_rows,
    read_row,
    replace_if_unchanged,
)
from shared.platform.storage.documents import read_stored

BINDINGS_TABLE = "GitOpsBindings"


@dataclass(frozen=True)
class Versioned:
    binding: Binding
    etag: str


class BindingStore:
    def __init__(self, storage: StorageClients) -> None:
        self.table: TableClient = storage.tables.get_table_client(BINDINGS_TABLE)

    def get(self, tenant: str, environment: str) -> Versioned | None:
        row = read_row(self.table, tenant, environment)
        if row is None:
            return None
        binding = read_stored(Binding, row["Document"], table=BINDINGS_TABLE, partition=tenant, row=environment)
        return Versioned(binding, row["etag"])

    def insert(self, binding: Binding) -> Versioned:
        """Create the row; :class:`shared.platform.errors.AlreadyExists` when the environment has one."""
        return Versioned(binding, insert_if_absent(self.table, _entity(binding)))

    def replace(self, binding: Binding, etag: str) -> Versioned:
        """Write it back; :class:`shared.platform.errors.ConcurrencyConflict` when someone wrote it since ``etag``."""
        return Versioned(binding, replace_if_unchanged(self.table, _entity(binding), etag))

    def delete(self, tenant: str, environment: str, etag: str) -> None:
        delete_if_unchanged(self.table, tenant, environment, etag)

    def active(self) -> list[tuple[str, str]]:
        """(tenant, environment) of every binding that is not suspended, for the poll."""
        rows = query_rows(self.table, "Suspended eq false", select=["PartitionKey", "RowKey"])
        return [(row["PartitionKey"], row["RowKey"]) for row in rows]


def _entity(binding: Binding) -> dict[str, object]:
    return {
        "PartitionKey": binding.tenant,
        "RowKey": binding.environment,
        "Suspended": binding.suspended,
        "Document": json.dumps(binding.model_dump(mode="json"), separators=(",", ":")),
    }
