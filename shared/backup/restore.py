"""Rebuild an empty store from the latest complete export.

What a restore writes, and why:

- **Rows**: for each table, the chain of exports is replayed oldest first
  (a full export, then the incremental ones; a later version of a row wins),
  and only the keys of the *latest* export's key set are kept, so rows deleted
  before it stay deleted. A key whose row no export holds (deleted while the
  export read) is skipped and counted.
- **Capacity rows** pass through :func:`shared.capacity.epoch.restored_entity`:
  every lease of the backup ends, every slot's generation jumps past any
  fencing token issued before the loss, and the generation floor for new
  slots moves up with it.
- **Event numbering**: every outbox stream's sequence row jumps past any
  number issued before the loss, and so does the sequence floor for streams
  the backup does not hold (:mod:`shared.platform.events.sequence_floor`): a number
  is never given to two events. Outbox rows come back as they were, so an
  event the backup holds undispatched is sent with its original id.
- **Blobs** of the latest export's index are written back from their copies,
  each checked against its digest, with their content type and metadata; a
  blob already there (``--force``, a receipts container that survived under
  immutability) is kept, never overwritten.
- **Receipts the backup lacks** (their runs recorded them, the blobs are not
  in it) are read back from KnowledgeHost, the audit mirror, when ``mirror``
  is given (:mod:`shared.backup.mirror`); every receipt written back says
  where it came from (metadata ``source``: ``backup`` or ``mirror``).
- **Not restored**: queues (their messages were in flight; the outbox rows
  that produced events are restored, and the dispatcher sends the undispatched
  ones again with their original ids, so consumers deduplicate) and the
  Durable task hub (runs are reconciled from their own rows instead).

- **The backup epoch**: the restore starts the next one, in the store and in
  the backup location (:mod:`shared.backup.epochs`), so that no later export
  resumes an attempt from before it. A chain that crosses a restore (two
  epochs) and a latest export that a history discarded at a restore wrote
  late are refused, naming the exports.

A store that already holds rows or blobs is refused unless ``force`` is
given: a restore over live data would mix two histories. So is a store a host
is running on (:mod:`shared.backup.liveness`): it would write under the restore.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode
from azure.storage.blob import ContentSettings

from shared.backup.codec import decode_entity
from shared.backup.epochs import check_chain, check_latest, start_epoch
from shared.backup.liveness import refuse_live_host
from shared.backup.location import BackupLocation, PartRef
from shared.backup.manifest import Manifest, latest_manifest, read_manifest
from shared.backup.mirror import restore_receipts_from_mirror, restored_metadata
from shared.backup.settings import BackupSettings
from shared.capacity.api import POOLS_TABLE, epoch
from shared.platform import clock
from shared.platform.errors import RuntimeCloudError
from shared.platform.events import sequence_floor
from shared.platform.neighbours.knowledge_host import KnowledgeHost
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import submit_batch
from shared.platform.storage.resources import CONTAINERS, TABLES, ensure_resources

BATCH_OPERATIONS = 100  # Table Storage's limit per batch
BATCH_BYTES = 3 * 1024 * 1024  # under the 4 MiB limit per batch, with room for the envelope


class NoBackup(RuntimeCloudError):
    """The backup location holds no complete export."""


class StoreNotEmpty(RuntimeCloudError):
    """The store already holds data; a restore would mix two histories (``--force`` overrides)."""


@dataclass
class RestoreReport:
    backup_sequence: int
    backup_as_of: str
    backup_location: str
    source_account: str
    restored_at: str
    chain: list[int]
    epoch: dict[str, Any] = field(default_factory=dict)  # the backup epoch this restore started
    rows: dict[str, int] = field(default_factory=dict)
    skipped_keys: dict[str, int] = field(default_factory=dict)
    blobs: dict[str, int] = field(default_factory=dict)
    blob_bytes: int = 0
    fencing: dict[str, Any] = field(default_factory=dict)
    events: dict[str, Any] = field(default_factory=dict)  # the sequence jump and floor, streams moved on
    after_restore: dict[str, Any] = field(default_factory=dict)  # what the host did next (runs, scans)
    mirror: dict[str, Any] = field(default_factory=dict)  # receipts read back from KnowledgeHost, and not

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def occupied(store: StorageClients, tables: Iterable[str], containers: Iterable[str]) -> list[str]:
    """Tables and containers of the store that hold anything."""
    found = []
    for table in tables:
        try:
            if next(iter(store.tables.get_table_client(table).list_entities(results_per_page=1)), None):
                found.append(f"table {table}")
        except ResourceNotFoundError:
            pass
    for container in containers:
        try:
            if next(iter(store.blobs.get_container_client(container).list_blobs(results_per_page=1)), None):
                found.append(f"container {container}")
        except ResourceNotFoundError:
            pass
    return found


def restore_store(
    store: StorageClients,
    location: BackupLocation,
    settings: BackupSettings,
    *,
    force: bool = False,
    tables: Iterable[str] = TABLES,
    containers: Iterable[str] = CONTAINERS,
    now: Callable[[], datetime] | None = None,  # None: the one clock (a test that replaces it is seen)
    mirror: KnowledgeHost | None = None,
) -> RestoreReport:
    tables, containers = list(tables), list(containers)
    manifest = latest_manifest(location)
    if manifest is None:
        raise NoBackup(f"{location.description} holds no complete export")
    check_latest(location, manifest)
    chain = [_manifest(location, sequence) for sequence in manifest.chain]
    check_chain(chain)
    if not force:
        refuse_live_host(store)
    if (taken := occupied(store, tables, containers)) and not force:
        raise StoreNotEmpty("the store is not empty (" + ", ".join(taken) + "); restore into an empty one")
    restored_at = (now or clock.utcnow)()
    jump = epoch.fencing_jump(manifest.as_of, restored_at, settings.fencing_jump_per_second)
    event_jump = sequence_floor.sequence_jump(manifest.as_of, restored_at, settings.event_jump_per_second)
    report = RestoreReport(
        backup_sequence=manifest.sequence,
        backup_as_of=manifest.as_of.isoformat(),
        backup_location=location.description,
        source_account=manifest.source_account,
        restored_at=restored_at.isoformat(),
        chain=manifest.chain,
    )
    ensure_resources(store)
    previous_epoch: dict[str, Any] | None = None
    previous_floor: dict[str, Any] | None = None
    streams = 0
    for table in tables:
        rows, skipped = _rows(location, chain, manifest, table)
        previous_epoch = next((r for r in rows if epoch.is_epoch_row(table, r)), previous_epoch)
        previous_floor = next((r for r in rows if sequence_floor.is_floor_row(table, r)), previous_floor)
        written = [_restored(table, row, jump, event_jump, restored_at) for row in rows]
        streams += sum(1 for row in rows if sequence_floor.is_sequence_row(row))
        _write(store.tables.get_table_client(table), written)
        report.rows[table], report.skipped_keys[table] = len(written), skipped
    epoch_row = epoch.epoch_entity(previous_epoch, jump, restored_at, manifest.as_of)
    store.tables.get_table_client(POOLS_TABLE).upsert_entity(epoch_row, mode=UpdateMode.REPLACE)
    report.fencing = {key: epoch_row[key] for key in ("Epoch", "Floor", "Jump")}
    floor_row = sequence_floor.floor_entity(previous_floor, event_jump, restored_at)
    store.tables.get_table_client(sequence_floor.FLOOR_TABLE).upsert_entity(floor_row, mode=UpdateMode.REPLACE)
    report.events = {"Floor": floor_row["Floor"], "Jump": event_jump, "streams": streams}
    for container in containers:
        report.blobs[container], size = _restore_container(store, location, manifest, container)
        report.blob_bytes += size
    if mirror is not None:  # after the rows (they name the receipts) and the blobs (what the backup held)
        report.mirror = restore_receipts_from_mirror(store, mirror)
    report.epoch = start_epoch(store, location, manifest, restored_at).as_dict()
    return report


def _restored(table: str, row: dict[str, Any], jump: int, event_jump: int, restored_at: datetime) -> dict[str, Any]:
    """A row as the restore writes it: capacity rows through the fencing epoch, sequence rows moved on."""
    if sequence_floor.is_sequence_row(row):
        return sequence_floor.restored_sequence_row(row, event_jump)
    return epoch.restored_entity(table, row, jump, restored_at)


def _manifest(location: BackupLocation, sequence: int) -> Manifest:
    found = read_manifest(location, sequence)
    if found is None:
        raise NoBackup(f"export {sequence} of the chain has no manifest")
    return found


def _rows(
    location: BackupLocation, chain: list[Manifest], latest: Manifest, table: str
) -> tuple[list[dict[str, Any]], int]:
    if table not in latest.tables:
        return [], 0
    versions: dict[tuple[str, str], dict[str, Any]] = {}
    for export in chain:
        if table in export.tables:
            for encoded in location.read_lines(export.tables[table].changes_part()):
                versions[(encoded["pk"], encoded["rk"])] = encoded
    rows, skipped = [], 0
    for partition_key, row_key in location.read_lines(latest.tables[table].keys_part()):
        version = versions.get((partition_key, row_key))
        if version is None:
            skipped += 1
        else:
            rows.append(decode_entity(version))
    return rows, skipped


def _write(table: TableClient, rows: list[dict[str, Any]]) -> None:
    by_partition: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_partition[row["PartitionKey"]].append(row)
    for partition_rows in by_partition.values():
        for batch in _batches(partition_rows):
            submit_batch(table, [("upsert", row, {"mode": UpdateMode.REPLACE}) for row in batch])


def _batches(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        row_size = len(repr(row))  # an estimate: the JSON on the wire is of the same order
        if batch and (len(batch) == BATCH_OPERATIONS or size + row_size > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += row_size
    if batch:
        yield batch


def _restore_container(
    store: StorageClients, location: BackupLocation, manifest: Manifest, name: str
) -> tuple[int, int]:
    if name not in manifest.containers:
        return 0, 0
    container = store.blobs.get_container_client(name)
    count = size = 0
    for entry in location.read_lines(PartRef.of(manifest.containers[name].index)):
        data = location.read_object(entry["sha256"], kept=bool(entry.get("kept", False)))
        try:
            container.upload_blob(
                entry["name"],
                data,
                overwrite=False,  # a blob that survived (a receipt under immutability) is kept as it is
                metadata=restored_metadata(name, entry.get("metadata")),
                content_settings=ContentSettings(content_type=entry.get("content_type")),
            )
        except ResourceExistsError:
            continue
        count, size = count + 1, size + len(data)
    return count, size
