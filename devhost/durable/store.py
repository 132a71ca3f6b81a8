"""Instances and history in Azurite tables: ``<hub>Instances`` and ``<hub>History``.

As in the Azure Storage provider, an instance is one row keyed by its id, and
its history is one row per event in a partition of its own. History row keys
start with the execution id, so a ``continue_as_new`` writes the new
execution beside the old one, moves the instance row over, and only then
deletes the old rows: the history stays bounded and a crash in between
loses nothing. An episode's new rows go in one entity-group batch (as the
provider writes them), sent by ``storage_protocol.table_batch`` rather than the SDK's
``submit_transaction``: the same request and answers for a quarter of the CPU.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableEntity, UpdateMode
from azure.data.tables.aio import TableClient

from devhost.durable.history import Origin, Record, history_event
from devhost.durable.instances import InstanceState, ParentRef, RuntimeStatus
from devhost.durable.payloads import PayloadStore
from storage_protocol.table_batch import send_batch_async

BATCH_OPERATIONS = 100
BATCH_CHARACTERS = 1_500_000  # well under the 4 MiB transaction limit (UTF-16)

# A property of a row this store writes: text (JSON text included), a count or a time. Rows read back
# are the SDK's TableEntity, whose values the readers below convert one by one.
Property = str | int | datetime
Row = dict[str, Property]
QueryParameter = str | datetime


class InstanceConflict(Exception):
    """The instance row changed since it was read: another writer got there first."""


class InstanceStore:
    def __init__(self, instances: TableClient, history: TableClient, payloads: PayloadStore) -> None:
        self._instances = instances
        self._history = history
        self._payloads = payloads

    async def ensure(self) -> None:
        for table in (self._instances, self._history):
            try:
                await table.create_table()
            except ResourceExistsError:
                pass

    # -- instances ---------------------------------------------------------

    async def get(self, instance_id: str) -> InstanceState | None:
        try:
            entity = await self._instances.get_entity(instance_id, "")
        except ResourceNotFoundError:
            return None
        return await self._from_entity(entity)

    async def insert(self, state: InstanceState) -> str:
        """Create the row; raises :class:`InstanceConflict` if it exists."""
        try:
            result = await self._instances.create_entity(await self._to_entity(state))
        except ResourceExistsError as error:
            raise InstanceConflict(state.instance_id) from error
        return str(result["etag"])

    async def replace(self, state: InstanceState) -> str:
        """Write the row if nobody changed it since ``state.etag`` was read."""
        if state.etag is None:
            return await self.insert(state)
        try:
            result = await self._instances.update_entity(
                await self._to_entity(state),
                mode=UpdateMode.REPLACE,
                etag=state.etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except (ResourceModifiedError, ResourceNotFoundError) as error:
            raise InstanceConflict(state.instance_id) from error
        return str(result["etag"])

    async def delete_row(self, instance_id: str, etag: str) -> None:
        """Delete the instance row if it is still the one written with ``etag`` (history untouched)."""
        try:
            await self._instances.delete_entity(
                instance_id, "", etag=etag, match_condition=MatchConditions.IfNotModified
            )
        except (ResourceModifiedError, ResourceNotFoundError) as error:
            raise InstanceConflict(instance_id) from error

    async def query(
        self,
        statuses: list[str] | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        prefix: str | None = None,
        after: str | None = None,
    ) -> AsyncIterator[InstanceState]:
        """Instances in id order, filtered as the management API asks."""
        clauses: list[str] = ["RowKey eq ''"]
        parameters: dict[str, QueryParameter] = {}
        if statuses:
            names = [f"@s{i}" for i in range(len(statuses))]
            # (spaces around parameters: the SDK finds them by splitting on whitespace)
            clauses.append("( " + " or ".join(f"RuntimeStatus eq {n}" for n in names) + " )")
            parameters.update({n[1:]: s for n, s in zip(names, statuses, strict=True)})
        if created_from is not None:
            clauses.append("CreatedTime ge @created_from")
            parameters["created_from"] = created_from
        if created_to is not None:
            clauses.append("CreatedTime le @created_to")
            parameters["created_to"] = created_to
        if prefix:
            clauses.append("PartitionKey ge @prefix_lo and PartitionKey lt @prefix_hi")
            parameters.update(prefix_lo=prefix, prefix_hi=prefix + "\uffff")
        if after:
            clauses.append("PartitionKey gt @after")
            parameters["after"] = after
        async for entity in self._instances.query_entities(" and ".join(clauses), parameters=parameters):
            yield await self._from_entity(entity)

    async def _to_entity(self, state: InstanceState) -> Row:
        entity: Row = {
            "PartitionKey": state.instance_id,
            "RowKey": "",
            "Name": state.name,
            "ExecutionId": state.execution_id,
            "RuntimeStatus": state.status.value,
            "CreatedTime": state.created,
            "LastUpdatedTime": state.updated,
            "HistoryLength": state.history_length,
        }
        for key, value in (("Input", state.input), ("Output", state.output), ("CustomStatus", state.custom_status)):
            await self._put_text(entity, key, value, state.instance_id)
        if state.parent is not None:
            entity["Parent"] = json.dumps(state.parent.to_event())
        if state.failure is not None:
            entity["FailureDetails"] = json.dumps(state.failure)
        return entity

    async def _from_entity(self, entity: TableEntity) -> InstanceState:
        return InstanceState(
            instance_id=entity["PartitionKey"],
            name=entity["Name"],
            execution_id=entity["ExecutionId"],
            status=RuntimeStatus(entity["RuntimeStatus"]),
            input=await self._get_text(entity, "Input"),
            output=await self._get_text(entity, "Output"),
            custom_status=await self._get_text(entity, "CustomStatus"),
            created=entity["CreatedTime"],
            updated=entity["LastUpdatedTime"],
            parent=ParentRef.from_event(json.loads(entity["Parent"])) if entity.get("Parent") else None,
            history_length=int(entity.get("HistoryLength", 0)),
            failure=json.loads(entity["FailureDetails"]) if entity.get("FailureDetails") else None,
            etag=entity.metadata.get("etag"),
        )

    async def _put_text(self, entity: Row, key: str, value: str | None, instance_id: str) -> None:
        if value is None:
            return
        if self._payloads.fits(value):
            entity[key] = value
        else:
            entity[key + "Blob"] = await self._payloads.put(instance_id, key.lower(), value)

    async def _get_text(self, entity: TableEntity, key: str) -> str | None:
        if entity.get(key + "Blob"):
            return await self._payloads.get(entity[key + "Blob"])
        text = entity.get(key)
        return None if text is None else str(text)

    # -- history -----------------------------------------------------------

    async def load_history(self, instance_id: str, execution_id: str, length: int) -> list[Record]:
        """The execution's first ``length`` events (rows beyond are uncommitted leftovers)."""
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
        rows: dict[int, TableEntity] = {}
        async for entity in self._history.query_entities(
            query, parameters={"pk": instance_id, "lo": f"{execution_id}.", "hi": f"{execution_id}/"}
        ):
            index = int(entity["RowKey"].rpartition(".")[2])
            if index < length:
                rows[index] = entity
        if len(rows) != length:
            raise RuntimeError(f"history of {instance_id} is missing rows: {length} committed, {len(rows)} found")
        return [await self._record(rows[i]) for i in range(length)]

    async def write_history(self, instance_id: str, execution_id: str, start: int, records: list[Record]) -> None:
        """Write rows ``start..`` whole; they count only once the instance row says so.

        A row may already exist: an episode whose instance row never committed (its host killed, or its
        lease lost to another host) left its rows beyond the committed length, and the episode that runs
        in its place writes the same row keys. Each row is replaced, never merged: a merge would keep the
        lost episode's properties this row does not set (its ``Origin``, ``MessageId``, an ``EventBlob``),
        so the history read back would pair this event with the other episode's task -- the replay after a
        move of the task hub then failed as non-deterministic. The Azure Storage provider writes history
        rows with insert-or-replace, so it never mixes two episodes' rows either."""
        batch: list[tuple[str, Row, dict[str, UpdateMode]]] = []
        size = 0
        for offset, record in enumerate(records):
            entity = await self._history_entity(instance_id, execution_id, start + offset, record)
            weight = sum(len(v) for v in entity.values() if isinstance(v, str))
            if batch and (len(batch) >= BATCH_OPERATIONS or size + weight > BATCH_CHARACTERS):
                await send_batch_async(self._history, batch)
                batch, size = [], 0
            batch.append(("upsert", entity, {"mode": UpdateMode.REPLACE}))
            size += weight
        if batch:
            await send_batch_async(self._history, batch)

    async def delete_other_executions(self, instance_id: str, execution_id: str) -> None:
        """Drop history rows that do not belong to ``execution_id`` (after a continue-as-new or restart)."""
        await self._delete_history(instance_id, keep=f"{execution_id}.")

    async def _delete_history(self, instance_id: str, keep: str | None) -> None:
        stale = [
            e
            async for e in self._history.query_entities(
                "PartitionKey eq @pk", parameters={"pk": instance_id}, select=["PartitionKey", "RowKey"]
            )
            if keep is None or not e["RowKey"].startswith(keep)
        ]
        for start in range(0, len(stale), BATCH_OPERATIONS):
            await send_batch_async(self._history, [("delete", e) for e in stale[start : start + BATCH_OPERATIONS]])

    async def purge(self, instance_id: str) -> None:
        """Delete the instance, all its history and its large payloads."""
        await self._delete_history(instance_id, keep=None)
        await self._payloads.delete_instance(instance_id)
        try:
            await self._instances.delete_entity(instance_id, "")
        except ResourceNotFoundError:
            pass

    async def _history_entity(self, instance_id: str, execution_id: str, index: int, record: Record) -> Row:
        entity: Row = {
            "PartitionKey": instance_id,
            "RowKey": f"{execution_id}.{index:08d}",
            "ExecutionId": execution_id,
            "EventType": record.type,
            "EventId": record.event_id,
        }
        await self._put_text(entity, "Event", json.dumps(record.event), instance_id)
        if record.origin is not None:
            entity["Origin"] = json.dumps(record.origin.to_json())
        if record.message_id:
            entity["MessageId"] = record.message_id
        if record.consumed:
            await self._put_text(entity, "Consumed", json.dumps(list(record.consumed)), instance_id)
        return entity

    async def _record(self, entity: TableEntity) -> Record:
        event = history_event(json.loads(await self._get_text(entity, "Event") or "{}"))
        origin = Origin.from_json(json.loads(entity["Origin"])) if entity.get("Origin") else None
        consumed = tuple(json.loads(await self._get_text(entity, "Consumed") or "[]"))
        return Record(event, origin, entity.get("MessageId"), consumed)
