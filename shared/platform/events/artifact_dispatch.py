"""Sending the artifacts' outbox to KnowledgeHost: in order per environment, retried, dead-lettered.

The dispatcher timer (``artifact_publisher``) calls :meth:`ArtifactPublisher.publish_pending`:

- **Exactly once per artifact id.** An entry is deleted only after
  KnowledgeHost answered its PUT (201 stored, or 200: already stored with the
  same digest). A host that dies after the PUT and before the delete sends it
  again, and KnowledgeHost answers 200 without storing it twice: it keeps one
  artifact per id, the id is the same on every attempt
  (:func:`shared.platform.events.artifact_outbox.artifact_id`), and so is the digest.
- **In order per environment.** A stream's entries go oldest first; one that
  fails holds the ones after it until it is sent or dead-lettered.
- **Retried with back-off.** A failed attempt (KnowledgeHost down, a 5xx, an
  answer off its contract) waits ``PublishBackoffSeconds``, doubling with each
  attempt up to an hour, before the next (besides the client's own quick
  retries within one attempt).
- **Dead-lettered with a record.** After ``PublishAttempts`` failed attempts,
  or at once when no attempt can succeed (KnowledgeHost holds the id with
  another digest: 409; the blob is gone or no longer hashes to the digest
  recorded with it), the entry is removed and the artifact's record says
  ``dead-lettered``, with its attempts and the last error; it is logged as an
  error. The next entries of its stream go on.
- **Never blocking a run.** Runs only record entries; this runs on its own
  timer, within a time budget per firing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import UpdateMode
from pydantic import ValidationError

from shared.platform import clock
from shared.platform.errors import ConcurrencyConflict
from shared.platform.events.artifact_outbox import (
    ARTIFACTS_TABLE,
    ENTRY_END,
    ENTRY_PREFIX,
    ArtifactOutbox,
    PendingArtifact,
    record_row_key,
)
from shared.platform.events.outbox import remove_stale_marker
from shared.platform.logs import app_logger
from shared.platform.neighbours.errors import ArtifactConflict, NeighbourError
from shared.platform.neighbours.knowledge_host import Artifact, KnowledgeHost, sha256_of
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import submit_batch

log = app_logger("knowledge-host")

Row = dict[str, Any]

MAX_BACKOFF = timedelta(hours=1)
BUDGET_SECONDS = 45.0  # one firing stops starting PUTs after this long: the next firing goes on


@dataclass(frozen=True)
class PublishPolicy:
    attempts: int  # failed attempts before an artifact is dead-lettered
    backoff_seconds: float  # the wait after the first failed attempt; doubled after each one

    def wait_after(self, attempts: int) -> timedelta:
        seconds = self.backoff_seconds * 2 ** max(0, attempts - 1)
        return min(timedelta(seconds=seconds), MAX_BACKOFF)


@dataclass
class PublishReport:
    published: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # tried again later
    dead_lettered: list[str] = field(default_factory=list)


class Undeliverable(Exception):
    """No attempt can send this artifact: it is dead-lettered at once."""


class ArtifactPublisher:
    def __init__(
        self,
        outbox: ArtifactOutbox,
        storage: StorageClients,
        client: KnowledgeHost,
        policy: PublishPolicy,
        now: Callable[[], datetime] | None = None,  # None: the one clock (a test that replaces it is seen)
        budget_seconds: float = BUDGET_SECONDS,
    ) -> None:
        self._outbox = outbox
        self._storage = storage
        self._client = client
        self._policy = policy
        self._now = now or clock.utcnow
        self._budget = budget_seconds

    def publish_pending(self) -> PublishReport:
        """Send what the streams hold, oldest first per stream, until each is empty, waiting or the budget ends."""
        report = PublishReport()
        deadline = time.monotonic() + self._budget
        markers = self._outbox.markers.query_entities("PartitionKey eq @t", parameters={"t": ARTIFACTS_TABLE})
        for marker in list(markers):
            if time.monotonic() >= deadline:
                break
            if self._publish_stream(marker["RowKey"], report, deadline):
                self._unmark(marker)
        return report

    def _publish_stream(self, stream: str, report: PublishReport, deadline: float) -> bool:
        """Send the stream's entries in order; True when it has none left."""
        query = "PartitionKey eq @stream and RowKey ge @start and RowKey lt @end"
        parameters = {"stream": stream, "start": ENTRY_PREFIX, "end": ENTRY_END}
        for row in self._outbox.table.query_entities(query, parameters=parameters):
            entry = {**row, "etag": row.metadata["etag"]}
            due = entry.get("NextAttemptAt")
            if due and datetime.fromisoformat(due) > self._now():
                return False  # waiting out its back-off: the entries after it wait too (order)
            if time.monotonic() >= deadline or not self._publish(entry, report):
                return False
        return True

    def _publish(self, entry: Row, report: PublishReport) -> bool:
        """One attempt at one entry; True when the stream may go on to the next."""
        pending = PendingArtifact.from_entity(entry)
        attempts = int(entry.get("Attempts", 0)) + 1
        try:
            self._client.put(self._artifact(pending))
        except (Undeliverable, ArtifactConflict) as error:
            self._dead_letter(entry, attempts, str(error))
            report.dead_lettered.append(pending.artifact_id)
            return True
        except NeighbourError as error:
            if attempts >= self._policy.attempts:
                self._dead_letter(entry, attempts, str(error))
                report.dead_lettered.append(pending.artifact_id)
                return True
            self._failed(entry, attempts, str(error))
            report.failed.append(pending.artifact_id)
            return False
        self._settle(entry, attempts, {"State": "published", "PublishedAt": clock.now_iso()})
        report.published.append(pending.artifact_id)
        return True

    def _artifact(self, pending: PendingArtifact) -> Artifact:
        """The artifact as KnowledgeHost gets it: the blob's content (checked against the digest recorded
        with it: an altered receipt is never mirrored) or the reference."""
        try:
            if pending.blob is None:
                return Artifact(**_fields(pending), content_ref=pending.content_ref)
            container, name = pending.blob
            try:
                data = self._storage.blobs.get_container_client(container).download_blob(name).readall()
            except ResourceNotFoundError:
                raise Undeliverable(f"{container}/{name} is gone") from None
            content = data.decode("utf-8")
            if sha256_of(content) != pending.sha256:
                raise Undeliverable(f"{container}/{name} no longer hashes to the {pending.sha256} recorded with it")
            return Artifact(**_fields(pending), content=content)
        except (ValidationError, UnicodeDecodeError) as error:  # no attempt could send it: never block the rest
            raise Undeliverable(f"not an artifact KnowledgeHost's contract allows: {error}") from None

    def _failed(self, entry: Row, attempts: int, error: str) -> None:
        due = self._now() + self._policy.wait_after(attempts)
        progress = {"Attempts": attempts, "LastError": error[:2000]}
        log.warning("artifact %s not published (attempt %d): %s", entry["ArtifactId"], attempts, error)
        try:
            submit_batch(
                self._outbox.table,
                [
                    (
                        "update",
                        {**_key(entry), **progress, "NextAttemptAt": due.isoformat()},
                        {
                            "mode": UpdateMode.MERGE,
                            "etag": entry["etag"],
                            "match_condition": MatchConditions.IfNotModified,
                        },
                    ),
                    ("upsert", {**_record_key(entry), **progress}, {"mode": UpdateMode.MERGE}),
                ],
            )
        except ConcurrencyConflict:
            pass  # another dispatcher got to it first: its word stands

    def _dead_letter(self, entry: Row, attempts: int, error: str) -> None:
        log.error(
            "artifact %s dead-lettered after %d attempt(s): %s; its record in %s says so",
            entry["ArtifactId"],
            attempts,
            error,
            ARTIFACTS_TABLE,
        )
        self._settle(
            entry, attempts, {"State": "dead-lettered", "DeadLetteredAt": clock.now_iso(), "LastError": error[:2000]}
        )

    def _settle(self, entry: Row, attempts: int, outcome: Row) -> None:
        """Remove the entry and write its outcome on the artifact's record, in one batch."""
        try:
            submit_batch(
                self._outbox.table,
                [
                    ("delete", _key(entry), {"etag": entry["etag"], "match_condition": MatchConditions.IfNotModified}),
                    ("upsert", {**_record_key(entry), "Attempts": attempts, **outcome}, {"mode": UpdateMode.MERGE}),
                ],
            )
        except ConcurrencyConflict:
            pass  # another dispatcher settled it meanwhile

    def _unmark(self, marker: Any) -> None:
        remove_stale_marker(self._outbox.markers, marker, self._now())


def _fields(pending: PendingArtifact) -> Row:
    return {
        "artifact_id": pending.artifact_id,
        "kind": pending.kind,
        "tenant": pending.tenant,
        "environment": pending.environment,
        "run_id": pending.run_id,
        "sha256": pending.sha256,
    }


def _key(entry: Row) -> Row:
    return {"PartitionKey": entry["PartitionKey"], "RowKey": entry["RowKey"]}


def _record_key(entry: Row) -> Row:
    return {"PartitionKey": entry["PartitionKey"], "RowKey": record_row_key(entry["ArtifactId"])}
