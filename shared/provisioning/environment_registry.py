"""Where an environment's class and target are registered: the authority, not each specification.

An environment's class decides what its runs need (approval by another person,
the production policy layer, the approval deadline); a specification is written
by whoever declares it, so the class cannot be taken from there. The registry
holds, per (tenant, environment), the class and target it was registered with,
when and by whom; :mod:`.environment_rules` says what a new declaration may
change.

The authority behind the registry is a setting (``RuntimeCloud:Environments:Source``):

- ``local`` (the default): this host's own table ``Environments``
  (:class:`LocalEnvironmentRegistry`), one row per environment, partition = tenant;
- ``control-plane``: ControlPlaneApi, read only
  (:class:`~shared.provisioning.control_plane_environments.ControlPlaneEnvironments`).

The first declaration registers the environment with an insert-if-absent, so two
first declarations racing each other agree on one registration; every later
change is a replace under the row's ETag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from azure.data.tables import TableClient

from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, RuntimeCloudError
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import insert_if_absent, read_row, replace_if_unchanged

ENVIRONMENTS_TABLE = "Environments"


class EnvironmentUnresolved(RuntimeCloudError):
    """The authority could not say what the environment is (it did not answer, or answered nonsense)."""


@dataclass(frozen=True)
class RegisteredEnvironment:
    """An environment as its authority registered it."""

    tenant: str
    environment: str
    environment_class: str
    target: str
    registered_at: str
    registered_by: str  # the principal whose declaration registered it
    registered_run_id: str  # the run that declaration created
    updated_at: str = ""  # the last change after the registration (empty: none)
    updated_by: str = ""
    updated_run_id: str = ""  # the run whose declaration (or apply) made that change
    etag: str | None = None  # the authority's version of this answer (a local row's ETag)

    def view(self) -> dict[str, Any]:
        """What callers see of the registration."""
        return {
            "environment_class": self.environment_class,
            "target": self.target,
            "registered_at": self.registered_at,
            "registered_by": self.registered_by,
            "registered_run_id": self.registered_run_id,
            "updated_at": self.updated_at or None,
            "updated_by": self.updated_by or None,
            "updated_run_id": self.updated_run_id or None,
        }


class EnvironmentAuthority(Protocol):
    """Who says what an environment is. :class:`EnvironmentUnresolved` whenever it cannot answer."""

    source: str  # "local" | "control-plane": named in health and in refusals
    writable: bool  # False: it registers and changes environments itself (nothing here may change them)

    def resolve(self, tenant: str, environment: str) -> RegisteredEnvironment | None:
        """The registration, or None when the environment was never registered."""
        ...

    def register(
        self, tenant: str, environment: str, environment_class: str, target: str, *, by: str, run_id: str
    ) -> RegisteredEnvironment:
        """Register it if nobody has; answers the registration that holds (this one, or the one that won)."""
        ...

    def update(
        self, current: RegisteredEnvironment, environment_class: str, target: str, *, by: str, run_id: str
    ) -> RegisteredEnvironment:
        """Change class and target, unless the registration moved since ``current`` was read
        (:class:`~shared.platform.errors.ConcurrencyConflict`: read again and decide again)."""
        ...


class LocalEnvironmentRegistry:
    """The host's own registry: table ``Environments``, ``PartitionKey`` tenant, ``RowKey`` environment."""

    source = "local"
    writable = True

    def __init__(self, storage: StorageClients) -> None:
        self._table: TableClient = storage.tables.get_table_client(ENVIRONMENTS_TABLE)

    def resolve(self, tenant: str, environment: str) -> RegisteredEnvironment | None:
        row = read_row(self._table, tenant, environment)
        return _registered(row) if row else None

    def register(
        self, tenant: str, environment: str, environment_class: str, target: str, *, by: str, run_id: str
    ) -> RegisteredEnvironment:
        entity = {
            "PartitionKey": tenant,
            "RowKey": environment,
            "EnvironmentClass": environment_class,
            "Target": target,
            "RegisteredAt": clock.now_iso(),
            "RegisteredBy": by,
            "RegisteredRunId": run_id,
        }
        try:
            etag = insert_if_absent(self._table, entity)
        except AlreadyExists:  # another first declaration won: its registration holds
            winner = self.resolve(tenant, environment)
            if winner is None:  # registered and gone again (a restore between the two calls): try again
                raise ConcurrencyConflict(f"registration of {environment} moved") from None
            return winner
        return _registered({**entity, "etag": etag})

    def update(
        self, current: RegisteredEnvironment, environment_class: str, target: str, *, by: str, run_id: str
    ) -> RegisteredEnvironment:
        if current.etag is None:
            raise ConcurrencyConflict(f"registration of {current.environment} has no version to replace")
        entity = {
            "PartitionKey": current.tenant,
            "RowKey": current.environment,
            "EnvironmentClass": environment_class,
            "Target": target,
            "RegisteredAt": current.registered_at,
            "RegisteredBy": current.registered_by,
            "RegisteredRunId": current.registered_run_id,
            "UpdatedAt": clock.now_iso(),
            "UpdatedBy": by,
            "UpdatedRunId": run_id,
        }
        etag = replace_if_unchanged(self._table, entity, current.etag)
        return _registered({**entity, "etag": etag})


def _registered(row: dict[str, Any]) -> RegisteredEnvironment:
    return RegisteredEnvironment(
        tenant=row["PartitionKey"],
        environment=row["RowKey"],
        environment_class=row["EnvironmentClass"],
        target=row["Target"],
        registered_at=row.get("RegisteredAt", ""),
        registered_by=row.get("RegisteredBy", ""),
        registered_run_id=row.get("RegisteredRunId", ""),
        updated_at=row.get("UpdatedAt", ""),
        updated_by=row.get("UpdatedBy", ""),
        updated_run_id=row.get("UpdatedRunId", ""),
        etag=row.get("etag"),
    )
