"""Who owns each table of a target account: the ownership registry.

Containers and queues say who manages them in their own metadata (the ``rc_``
tags, see :mod:`shared.iac.tags`); tables cannot carry metadata. So the
embedded runner registers every table it manages in one table of the target
account itself, :data:`~shared.desired_state.OWNERSHIP_TABLE`:
one row per table (partition ``tables``, row key the table's name in lower
case, since table names are case-insensitive) naming the tenant and
environment. Kept in the target, like the tags, it is shared by every host
that manages the account and read in the same listing pass.

With it a table is owned like any other resource: a second environment or
tenant declaring it is refused at plan, a table dropped from a specification
is deleted, and the inventory reports a registered table nobody declares.

Rules:

- a registration counts only while its table exists: a row left behind by a
  crash or by a table deleted by hand does not block the name (the next
  claim replaces it, under its ETag);
- claiming is an insert-if-absent, so of two environments racing for one
  name exactly one wins (the other's apply finds the plan no longer holds);
- the registry table is the product's own: the reader never lists it as a
  resource and a specification may not declare it.
"""

from __future__ import annotations

from collections.abc import Callable

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, TableServiceClient, UpdateMode

from shared.desired_state.api import OWNERSHIP_TABLE
from shared.iac.model import PlanNoLongerHolds
from shared.iac.tags import MANAGED_BY_VALUE, ManagementTags

PARTITION = "tables"


def is_registry(table_name: str) -> bool:
    return table_name.lower() == OWNERSHIP_TABLE.lower()


class TableRegistry:
    """The ownership rows of one target account's tables (over its table service client)."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    def owners(self) -> dict[str, ManagementTags]:
        """Every registration, by table name in lower case (one partition query)."""
        try:
            rows = list(self._table.query_entities("PartitionKey eq @p", parameters={"p": PARTITION}))
        except ResourceNotFoundError:  # no table was ever registered in this account
            return {}
        return {row["RowKey"]: _tags(row) for row in rows}

    def owner(self, name: str) -> ManagementTags | None:
        row = self._row(name)
        return _tags(row) if row is not None else None

    def claim(self, name: str, owner: ManagementTags, table_exists: Callable[[], bool]) -> None:
        """Register ``owner`` for table ``name``; :class:`PlanNoLongerHolds` if another owner holds it."""
        entity = {
            "PartitionKey": PARTITION,
            "RowKey": name.lower(),
            "Table": name,
            "ManagedBy": MANAGED_BY_VALUE,
            "Tenant": owner.tenant,
            "Environment": owner.environment,
        }
        try:
            self._insert(entity)
            return
        except ResourceExistsError:
            pass
        row = self._row(name)
        if row is not None and _tags(row) == owner:
            return  # an earlier attempt of this step registered it
        if row is not None and table_exists():
            raise PlanNoLongerHolds(
                f"table/{name} was registered to {_whose(_tags(row), owner)} since the plan; "
                "nothing further was applied: make a new plan and review it"
            )
        try:  # a registration without its table is stale: take it over, unless it moves meanwhile
            if row is None:
                self._table.create_entity(entity)
            else:
                self._table.update_entity(
                    entity,
                    mode=UpdateMode.REPLACE,
                    etag=row.metadata["etag"],
                    match_condition=MatchConditions.IfNotModified,
                )
        except (ResourceExistsError, ResourceModifiedError):
            raise PlanNoLongerHolds(f"table/{name} was claimed concurrently; make a new plan") from None

    def release(self, name: str, owner: ManagementTags) -> None:
        """Remove ``owner``'s registration of ``name`` (someone else's is left alone)."""
        row = self._row(name)
        if row is None or _tags(row) != owner:
            return
        try:
            self._table.delete_entity(
                PARTITION, name.lower(), etag=row.metadata["etag"], match_condition=MatchConditions.IfNotModified
            )
        except (ResourceNotFoundError, ResourceModifiedError):
            pass  # gone, or claimed anew since: not ours to remove

    def _row(self, name: str) -> TableEntity | None:
        try:
            return self._table.get_entity(PARTITION, name.lower())
        except ResourceNotFoundError:
            return None

    def _insert(self, entity: dict[str, str]) -> None:
        try:
            self._table.create_entity(entity)
        except ResourceNotFoundError:  # the first registration in this account creates the registry
            try:
                self._table.create_table()
            except ResourceExistsError:
                pass
            self._table.create_entity(entity)


def registry_of(tables: TableServiceClient) -> TableRegistry:
    """The registry of the account ``tables`` serves."""
    return TableRegistry(tables.get_table_client(OWNERSHIP_TABLE))


def _tags(row: TableEntity) -> ManagementTags:
    return ManagementTags(tenant=str(row.get("Tenant", "")), environment=str(row.get("Environment", "")))


def _whose(found: ManagementTags, ours: ManagementTags) -> str:
    # Never name another tenant (or its environments) in this tenant's run.
    return f"environment {found.environment!r}" if found.tenant == ours.tenant else "another tenant"
