"""Where the inventory lives: table ``Inventory`` and blob container ``inventory``.

Table partitions:

- ``{tenant}|{environment}`` (one *stream*): the environment's inventory row
  (``environment``: observation status, last error, the scan lease), its
  findings (``finding|{id}``), ignore rules (``rule|{id}``), proposals
  (``proposal|{id}``), the ids of provisioning events already handled
  (``event|{id}``) and the outbox rows of its events. A scan's findings,
  proposal and events commit in one batch here.
- ``{tenant}``: ``proposal|{id}`` -> environment, so a proposal is found by id
  (and another tenant's id is simply not there: 404).

Observations can be large (an environment of 10,000 resources), so the last
good one is a blob, ``inventory/{tenant}/{environment}/observation.json``,
overwritten only by a successful read; a failed read never touches it.
Documents in rows are JSON split over ``Document0..n`` properties, because a
string property holds at most 64 KiB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode
from pydantic import BaseModel

from shared.inventory.findings import Finding, FindingState
from shared.inventory.ignore_rules import IgnoreRule
from shared.inventory.model import Observation
from shared.inventory.proposals import Proposal, ProposalState
from shared.platform.events.cloudevents import CloudEvent, NewEvent
from shared.platform.events.outbox import TransactionOperation, outbox_for
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import read_row, submit_batch
from shared.platform.storage.documents import read_stored, read_stored_blob
from shared.platform.storage.paging import after, paging_seal, read_page, scope_of
from shared.platform.storage.streams import ENVIRONMENT_ROW, EnvironmentRow, if_unchanged, stream_key

INVENTORY_TABLE = "Inventory"
INVENTORY_CONTAINER = "inventory"
BATCH_LIMIT = 100  # operations in one table transaction
CHUNK_CHARS = 30_000  # a string property holds 64 KiB of UTF-16


def pack(document: str) -> dict[str, str]:
    starts = range(0, len(document) or 1, CHUNK_CHARS)
    return {f"Document{n}": document[i : i + CHUNK_CHARS] for n, i in enumerate(starts)}


def unpack(row: dict[str, Any]) -> str:
    parts, n = [], 0
    while f"Document{n}" in row:
        parts.append(row[f"Document{n}"])
        n += 1
    return "".join(parts)


T = TypeVar("T")
Document = TypeVar("Document", bound=BaseModel)


def read_document(model: type[Document], row: dict[str, Any]) -> Document:
    """The row's document as ``model``; one that no longer reads names the row (never the caller's 422)."""
    return read_stored(model, unpack(row), table=INVENTORY_TABLE, partition=row["PartitionKey"], row=row["RowKey"])


@dataclass
class Versioned(Generic[T]):
    """A document read with the row's ETag, for a conditional write later."""

    value: T
    etag: str


class InventoryStore:
    def __init__(self, storage: StorageClients, source: str) -> None:
        self.table: TableClient = storage.tables.get_table_client(INVENTORY_TABLE)
        self._tables = storage.tables
        self._blobs = storage.blobs.get_container_client(INVENTORY_CONTAINER)
        self._outbox = outbox_for(storage, INVENTORY_TABLE, source)

    # -- the environment row -----------------------------------------------------------

    def environment(self, tenant: str, environment: str) -> EnvironmentRow:
        return EnvironmentRow.read(self.table, tenant, environment)

    def environment_operation(self, env: EnvironmentRow, changes: dict[str, Any]) -> TransactionOperation:
        return env.write_operation(changes)

    def known_environments(self) -> list[tuple[str, str]]:
        """(tenant, environment) of every environment the inventory has a row for, across tenants."""
        rows = self.table.query_entities(f"RowKey eq '{ENVIRONMENT_ROW}'", select=["Tenant", "Environment"])
        return sorted(
            {(row["Tenant"], row["Environment"]) for row in rows if row.get("Tenant") and row.get("Environment")}
        )

    # -- observations --------------------------------------------------------------------

    def save_observation(self, tenant: str, environment: str, observation: Observation) -> None:
        self._blobs.upload_blob(
            f"{tenant}/{environment}/observation.json", observation.model_dump_json(), overwrite=True
        )

    def load_observation(self, tenant: str, environment: str) -> Observation | None:
        name = f"{tenant}/{environment}/observation.json"
        try:
            data = self._blobs.download_blob(name).readall()
        except ResourceNotFoundError:
            return None
        return read_stored_blob(Observation, data, container=INVENTORY_CONTAINER, blob=name)

    def save_blob(self, name: str, data: bytes) -> None:
        self._blobs.upload_blob(name, data, overwrite=True)

    # -- findings, rules, proposals -----------------------------------------------------------

    def findings(self, tenant: str, environment: str, state: FindingState | None = None) -> list[Finding]:
        extra = " and State eq @s" if state else ""
        rows = self._query(tenant, environment, "finding|", extra, {"s": state.value} if state else {})
        return sorted((read_document(Finding, row) for row in rows), key=lambda f: f.first_seen)

    def finding(self, tenant: str, environment: str, finding_id: str) -> Finding | None:
        row = read_row(self.table, stream_key(tenant, environment), f"finding|{finding_id}")
        return read_document(Finding, row) if row else None

    def finding_operation(self, finding: Finding) -> TransactionOperation:
        return (
            "upsert",
            {
                "PartitionKey": stream_key(finding.tenant, finding.environment),
                "RowKey": f"finding|{finding.id}",
                "State": finding.state.value,
                "Kind": finding.kind.value,
                "Address": finding.address,
                "LastSeen": finding.last_seen,
                "ResolvedAt": finding.resolved_at or "",
                **pack(finding.model_dump_json()),
            },
            {"mode": UpdateMode.REPLACE},
        )

    def rules(self, tenant: str, environment: str) -> list[Versioned[IgnoreRule]]:
        rows = self._query(tenant, environment, "rule|", "", {})
        return [Versioned(read_document(IgnoreRule, row), row.metadata["etag"]) for row in rows]

    def rule_operation(self, rule: IgnoreRule) -> TransactionOperation:
        return (
            "create",
            {
                "PartitionKey": stream_key(rule.tenant, rule.environment),
                "RowKey": f"rule|{rule.id}",
                "ExpiresAt": rule.expires_at,
                **pack(rule.model_dump_json()),
            },
        )

    def delete_rule(self, tenant: str, environment: str, rule_id: str) -> bool:
        if read_row(self.table, stream_key(tenant, environment), f"rule|{rule_id}") is None:
            return False
        self.table.delete_entity(stream_key(tenant, environment), f"rule|{rule_id}")
        return True

    def proposals(self, tenant: str, environment: str, state: ProposalState | None = None) -> list[Versioned[Proposal]]:
        extra = " and State eq @s" if state else ""
        rows = self._query(tenant, environment, "proposal|", extra, {"s": state.value} if state else {})
        found = [Versioned(read_document(Proposal, row), row.metadata["etag"]) for row in rows]
        return sorted(found, key=lambda v: v.value.created_at, reverse=True)

    def documents_page(
        self,
        model: type[Document],
        prefix: str,
        tenant: str,
        environment: str | None,
        *,
        state: str | None,
        limit: int,
        continuation: str | None,
        keep: tuple[str, Callable[[Document], bool]] | None = None,
    ) -> tuple[list[Document], str | None]:
        """A page of the documents (as ``model``) under ``prefix`` (``finding|``, ``rule|``, ``proposal|``) of one
        environment, or of every environment of the tenant (its stream partitions), in key order: the
        rows read are the page's own, however many there are. ``keep`` (a name for the continuation's
        scope, a test of the document) filters what the store cannot."""
        query = "RowKey ge @lo and RowKey lt @hi"
        parameters: dict[str, Any] = {"lo": prefix, "hi": after(prefix)}
        if environment:
            query += " and PartitionKey eq @p"
            parameters["p"] = stream_key(tenant, environment)
        else:
            query += " and PartitionKey gt @low and PartitionKey lt @high"
            parameters.update(low=stream_key(tenant, ""), high=after(stream_key(tenant, "")))
        if state:
            query += " and State eq @s"
            parameters["s"] = state
        test = keep[1] if keep else None
        page = read_page(
            self.table,
            query,
            parameters,
            scope=scope_of(prefix, tenant, environment, state, keep[0] if keep else None),
            seal=paging_seal(self._tables),
            limit=limit,
            continuation=continuation,
            keep=(lambda row: test(read_document(model, row))) if test else None,
        )
        return [read_document(model, row) for row in page.rows], page.continuation

    def proposal(self, tenant: str, proposal_id: str) -> Versioned[Proposal] | None:
        index = read_row(self.table, tenant, f"proposal|{proposal_id}")
        if index is None:
            return None
        row = read_row(self.table, stream_key(tenant, index["Environment"]), f"proposal|{proposal_id}")
        if row is None:
            return None
        return Versioned(read_document(Proposal, row), row["etag"])

    def index_proposal(self, proposal: Proposal) -> None:
        """The tenant's id -> environment row, written before the proposal itself (harmless if it stays alone)."""
        self.table.upsert_entity(
            {"PartitionKey": proposal.tenant, "RowKey": f"proposal|{proposal.id}", "Environment": proposal.environment}
        )

    def proposal_operation(self, proposal: Proposal, etag: str | None) -> TransactionOperation:
        entity = {
            "PartitionKey": stream_key(proposal.tenant, proposal.environment),
            "RowKey": f"proposal|{proposal.id}",
            "State": proposal.state.value,
            "CreatedAt": proposal.created_at,
            "UpdatedAt": proposal.updated_at,
            **pack(proposal.model_dump_json()),
        }
        if etag is None:
            return ("create", entity)
        return ("update", entity, if_unchanged(etag))

    # -- handled provisioning events ---------------------------------------------------------

    def event_handled(self, tenant: str, environment: str, event_id: str) -> bool:
        return read_row(self.table, stream_key(tenant, environment), f"event|{event_id}") is not None

    def event_operation(
        self, tenant: str, environment: str, *, event_id: str, event_type: str, at: str
    ) -> TransactionOperation:
        return (
            "create",
            {
                "PartitionKey": stream_key(tenant, environment),
                "RowKey": f"event|{event_id}",
                "EventType": event_type,
                "HandledAt": at,
            },
        )

    # -- committing ----------------------------------------------------------------------------

    def commit(
        self,
        tenant: str,
        environment: str,
        operations: Sequence[TransactionOperation],
        events: Iterable[NewEvent] = (),
        bulk: Sequence[TransactionOperation] = (),
    ) -> list[CloudEvent]:
        """Commit ``operations`` and ``events`` atomically; ``bulk`` (idempotent upserts) may go first in chunks.

        Why the split: a table transaction holds at most 100 operations. Bulk rows
        that fit ride in the atomic batch; a large scan's surplus goes first, in
        upserts that a retry simply writes again.
        """
        pending = list(events)
        room = BATCH_LIMIT - len(operations) - (len(pending) + 1 if pending else 0)
        if room < 0:
            raise ValueError("too many operations for one transaction")
        leading, riding = list(bulk[: max(0, len(bulk) - room)]), list(bulk[max(0, len(bulk) - room) :])
        for start in range(0, len(leading), BATCH_LIMIT):
            submit_batch(self.table, leading[start : start + BATCH_LIMIT])
        emitted = self._outbox.commit(stream_key(tenant, environment), [*riding, *operations], pending)
        self._outbox.dispatch(emitted)
        return emitted

    def delete_rows(self, partition: str, row_keys: Iterable[str]) -> int:
        keys = list(row_keys)
        for start in range(0, len(keys), BATCH_LIMIT):
            submit_batch(
                self.table,
                [("delete", {"PartitionKey": partition, "RowKey": key}) for key in keys[start : start + BATCH_LIMIT]],
            )
        return len(keys)

    def _query(self, tenant: str, environment: str, prefix: str, extra: str, parameters: dict[str, Any]) -> Any:
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return self.table.query_entities(
            f"PartitionKey eq @p and RowKey ge @lo and RowKey lt @hi{extra}",
            parameters={"p": stream_key(tenant, environment), "lo": prefix, "hi": end, **parameters},
        )
