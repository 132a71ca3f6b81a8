"""The artifacts' outbox: what is to be mirrored to KnowledgeHost, recorded before anyone relies on it.

Why: receipts, run outputs and drift reports are mirrored to KnowledgeHost
(the audit mirror restores read receipts back from), but a run must never
wait on it, nor lose an artifact because it was down or because the host
died between writing a receipt and sending it. So the writer records an
*entry* here, and the dispatcher (:mod:`shared.platform.events.artifact_dispatch`,
on its timer) sends it.

When: every entry is recorded by the writer of the artifact's blob, after the
blob and before the writer returns its digest (:meth:`record`). A receipt's
digest reaches its run only through that return, and the steps that write
receipts are repeated until the digest is on the run (a repeated write finds
the blob and records the entry again, a no-op). So no run records a receipt
whose entry is not here: the same guarantee the event outbox gives a state
change and its events, for a blob that cannot be in a table batch.

Table ``KnowledgeArtifacts``, one partition per *stream* (``{tenant}|{environment}``):

- ``~sequence``: the stream's last entry number (replaced under its ETag, so
  numbers are gap-free and ordered across writers);
- ``entry|{sequence:012d}``: an artifact still to send: its id, kind, run,
  digest and where its content is (a blob of this store, read when it is
  sent: a receipt outgrows a table property) or its ``content_ref``;
  attempts so far, when the next may be made and the last error. Deleted
  once sent or dead-lettered;
- ``artifact|{artifact_id}``: the artifact's record, created in the same
  batch as its entry (so one id is recorded once, whoever records it again),
  and moved to ``published`` or ``dead-lettered`` (with its attempts and the
  last error) in the batch that deletes the entry.

The dispatcher finds streams with entries through markers in
``OutboxPending`` (partition ``KnowledgeArtifacts``), as the event outbox
does, so it never scans the table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from azure.core import MatchConditions
from azure.data.tables import TableClient, UpdateMode

from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.neighbours.knowledge_host import ArtifactKind
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import read_row, submit_batch
from shared.platform.storage.optimistic import on_conflict
from shared.platform.storage.streams import stream_key

ARTIFACTS_TABLE = "KnowledgeArtifacts"
MARKERS_TABLE = "OutboxPending"  # the event outbox's markers; this table's under its own partition
SEQUENCE_ROW = "~sequence"
ENTRY_PREFIX = "entry|"
ENTRY_END = "entry}"  # the character after "|": an exclusive upper bound for the prefix
RECORD_PREFIX = "artifact|"
MAX_ID_LENGTH = 200  # KnowledgeHost's artifact ids (shared.platform.neighbours.models.NAME_PATTERN)

ArtifactState = Literal["pending", "published", "dead-lettered"]


def artifact_id(tenant: str, environment: str, name: str, kind: ArtifactKind) -> str:
    """The artifact's id: the same for the same artifact on every host and every attempt, so
    KnowledgeHost stores it once. ``name`` is the run's id (or a scan's stamp for a drift report).
    Readable when it fits KnowledgeHost's 200 characters, else the SHA-256 of the same parts."""
    readable = f"{tenant}:{environment}:{name}:{kind}"
    if len(readable) <= MAX_ID_LENGTH:
        return readable
    return f"{kind}:{hashlib.sha256(readable.encode('utf-8')).hexdigest()}"


@dataclass(frozen=True)
class PendingArtifact:
    """What an entry says of its artifact: who it is, its digest, where its content is.

    Exactly one of ``blob`` (``(container, name)`` in this store: the content, read when it is sent)
    and ``content_ref`` (the artifact goes by reference: run outputs)."""

    artifact_id: str
    kind: ArtifactKind
    tenant: str
    environment: str
    run_id: str | None
    sha256: str
    blob: tuple[str, str] | None = None
    content_ref: str | None = None

    def __post_init__(self) -> None:
        if (self.blob is None) == (self.content_ref is None):
            raise ValueError("a pending artifact names exactly one of blob and content_ref")

    def entity(self, stream: str, sequence: int) -> dict[str, Any]:
        return {
            "PartitionKey": stream,
            "RowKey": entry_row_key(sequence),
            "ArtifactId": self.artifact_id,
            "Kind": self.kind,
            "Tenant": self.tenant,
            "Environment": self.environment,
            "RunId": self.run_id or "",
            "Sha256": self.sha256,
            "Container": self.blob[0] if self.blob else "",
            "Blob": self.blob[1] if self.blob else "",
            "ContentRef": self.content_ref or "",
            "Attempts": 0,
            "NextAttemptAt": "",
            "LastError": "",
            "CreatedAt": clock.now_iso(),
        }

    @classmethod
    def from_entity(cls, row: dict[str, Any]) -> PendingArtifact:
        return cls(
            artifact_id=row["ArtifactId"],
            kind=row["Kind"],
            tenant=row["Tenant"],
            environment=row["Environment"],
            run_id=row.get("RunId") or None,
            sha256=row["Sha256"],
            blob=(row["Container"], row["Blob"]) if row.get("Blob") else None,
            content_ref=row.get("ContentRef") or None,
        )


def entry_row_key(sequence: int) -> str:
    return f"{ENTRY_PREFIX}{sequence:012d}"


def record_row_key(artifact: str) -> str:
    return f"{RECORD_PREFIX}{artifact}"


class ArtifactOutbox:
    """Records artifacts to mirror (the writers' side); :mod:`.artifact_dispatch` sends them."""

    def __init__(self, storage: StorageClients) -> None:
        self.table: TableClient = storage.tables.get_table_client(ARTIFACTS_TABLE)
        self.markers: TableClient = storage.tables.get_table_client(MARKERS_TABLE)

    @on_conflict
    def record(self, artifact: PendingArtifact) -> bool:
        """Record ``artifact`` for sending, once per id: True if this call recorded it."""
        stream = stream_key(artifact.tenant, artifact.environment)
        if read_row(self.table, stream, record_row_key(artifact.artifact_id)) is not None:
            return False  # recorded before (a repeated receipt write)
        sequence_row = read_row(self.table, stream, SEQUENCE_ROW)
        sequence = int(sequence_row["Last"]) + 1 if sequence_row else 1
        operations: list[tuple[Any, ...]] = [
            ("create", artifact.entity(stream, sequence)),
            ("create", _record_entity(stream, artifact, sequence)),
            _sequence_operation(stream, sequence_row, sequence),
        ]
        self._mark(stream)
        try:
            submit_batch(self.table, operations)
        except AlreadyExists:
            if read_row(self.table, stream, record_row_key(artifact.artifact_id)) is not None:
                return False  # another writer recorded it meanwhile
            raise ConcurrencyConflict(f"{ARTIFACTS_TABLE} {stream}: numbered concurrently") from None
        return True

    def record_of(self, tenant: str, environment: str, artifact: str) -> dict[str, Any] | None:
        """The artifact's record (``State``: pending, published or dead-lettered; ``Attempts``, ``LastError``)."""
        return read_row(self.table, stream_key(tenant, environment), record_row_key(artifact))

    def dead_letters(self) -> list[dict[str, Any]]:
        """Every dead-lettered artifact's record, across streams (for operators; a scan of the table)."""
        query = "RowKey ge @start and RowKey lt @end and State eq 'dead-lettered'"
        rows = self.table.query_entities(query, parameters={"start": RECORD_PREFIX, "end": "artifact}"})
        return [dict(row) for row in rows]

    def _mark(self, stream: str) -> None:
        """Tell the dispatcher this stream has entries (before the batch: it may then find none yet)."""
        self.markers.upsert_entity({"PartitionKey": ARTIFACTS_TABLE, "RowKey": stream}, mode=UpdateMode.REPLACE)


def _record_entity(stream: str, artifact: PendingArtifact, sequence: int) -> dict[str, Any]:
    return {
        "PartitionKey": stream,
        "RowKey": record_row_key(artifact.artifact_id),
        "Kind": artifact.kind,
        "RunId": artifact.run_id or "",
        "Sha256": artifact.sha256,
        "Sequence": sequence,
        "State": "pending",
        "Attempts": 0,
        "LastError": "",
        "RecordedAt": clock.now_iso(),
    }


def _sequence_operation(stream: str, current: dict[str, Any] | None, last: int) -> tuple[Any, ...]:
    entity = {"PartitionKey": stream, "RowKey": SEQUENCE_ROW, "Last": last}
    if current is None:
        return ("create", entity)
    return (
        "update",
        entity,
        {"mode": UpdateMode.REPLACE, "etag": current["etag"], "match_condition": MatchConditions.IfNotModified},
    )
