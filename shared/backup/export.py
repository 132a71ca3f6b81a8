"""Export what changed in the host's store since the last export to the backup location.

Table Storage has no change feed, so an export reads, per table of the
registry (:data:`shared.platform.storage.resources.TABLES`):

1. **every key** (``PartitionKey``, ``RowKey`` only: a projection, cheap next
   to the rows): a row missing from the latest key set was deleted, so
   deletes are captured without tombstones;
2. **the rows changed** since the previous export *started*, less
   ``OverlapSeconds`` against clock skew (``Timestamp ge since``); every
   row when the export is full (the first one, then every ``FullEveryHours``).

Keys are read before rows: a row inserted between the two reads is in the
rows but not the keys, so a restore leaves it out (and the next export has
it); the reverse order could name a key whose row no export holds. The
windows of consecutive exports overlap, so every version a row took lies in
some export of the chain; re-reading a row twice is harmless (idempotent).

Blobs of the registry's containers (:data:`shared.platform.storage.resources.CONTAINERS`:
receipts, specifications, ...) are copied by content digest; a blob whose
ETag the previous export already recorded is not read again. Receipts are
copied to the location's kept container (write-once in Azure).

Resumable and idempotent: the parts of export ``n`` have fixed names, each
finished part is noted in ``progress.json``, and a retry of ``n`` (within the
RPO) skips those. The manifest is written last, create-only; of two exporters
racing for ``n`` the first manifest wins and the other answers it.

Epochs (:mod:`shared.backup.epochs`): an export runs in the store's backup
epoch and stamps it on its manifest. It resumes only an attempt of that same
epoch that started after the restore which began it: the parts of an attempt
killed before a restore describe rows the restore discarded, and its start
time would stamp ``as_of`` before the data the export now reads. The first
export of an epoch is full (a restore rewrites every row, so an incremental
one would read them all anyway), so a chain never joins two histories.

Durable Functions' task hub tables are *not* exported: an orchestration's
history restored without its queues would replay into a world that moved on.
Runs are reconciled from their own rows after a restore instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient

from shared.backup.codec import encode_line
from shared.backup.epochs import BackupEpoch, current_epoch
from shared.backup.location import BackupLocation, PartRef, export_prefix
from shared.backup.manifest import ContainerPart, Manifest, TableParts, latest_manifest, point_latest, read_manifest
from shared.backup.settings import BackupSettings
from shared.platform import clock
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.resources import CONTAINERS, TABLES

PROGRESS = "progress.json"
# Containers whose copies go to the location's kept (write-once) container: receipts are audit, kept
# for the environment's lifetime plus seven years, and must survive whatever happens to the exports.
KEPT_CONTAINERS = frozenset({"receipts"})


@dataclass(frozen=True)
class ExportPlan:
    sequence: int
    as_of: datetime
    full: bool
    since: datetime | None
    chain: list[int]
    previous: Manifest | None
    epoch: BackupEpoch


def export_store(
    store: StorageClients,
    location: BackupLocation,
    settings: BackupSettings,
    *,
    tables: Iterable[str] = TABLES,
    containers: Iterable[str] = CONTAINERS,
    now: Callable[[], datetime] | None = None,  # None: the one clock (a test that replaces it is seen)
) -> Manifest:
    """Run one export (or finish an interrupted one) and answer its manifest."""
    now = now or clock.utcnow
    location.ensure()
    epoch = current_epoch(store, location)
    previous = latest_manifest(location)
    plan = _plan(previous, settings, now(), epoch)
    progress = _resumed(location, plan, settings, now())
    plan = _with_start(plan, progress)
    prefix = export_prefix(plan.sequence)
    for table in tables:
        unit = f"table:{table}"
        if unit not in progress["units"]:
            keys, changes = _export_table(store.tables.get_table_client(table), location, prefix, table, plan)
            progress["units"][unit] = {"keys": keys.as_dict(), "changes": changes.as_dict()}
            _noted(location, prefix, progress, settings)
    for container in containers:
        unit = f"container:{container}"
        if unit not in progress["units"]:
            progress["units"][unit] = _export_container(store, location, prefix, container, plan)
            _noted(location, prefix, progress, settings)
    manifest = Manifest(
        sequence=plan.sequence,
        as_of=plan.as_of,
        finished_at=now(),
        full=plan.full,
        since=plan.since,
        chain=plan.chain,
        base_as_of=plan.as_of if plan.full or plan.previous is None else plan.previous.base_as_of,
        tables={u[6:]: TableParts(**v) for u, v in progress["units"].items() if u.startswith("table:")},
        containers={u[10:]: ContainerPart(**v) for u, v in progress["units"].items() if u.startswith("container:")},
        source_account=store.account_name,
        epoch=plan.epoch.number,
        follows=plan.previous.sequence if plan.previous else None,
    )
    if not location.write_json(manifest.name, manifest.model_dump(mode="json"), overwrite=False):
        committed = read_manifest(location, plan.sequence)  # another exporter finished this one first
        assert committed is not None
        return committed
    point_latest(location, manifest)
    return manifest


def _plan(previous: Manifest | None, settings: BackupSettings, now: datetime, epoch: BackupEpoch) -> ExportPlan:
    full = (
        previous is None
        or previous.epoch != epoch.number  # a new history starts a new chain
        or now - previous.base_as_of >= timedelta(hours=settings.full_every_hours)
    )
    sequence = previous.sequence + 1 if previous else 1
    since = None if full or previous is None else previous.as_of - timedelta(seconds=settings.overlap_seconds)
    chain = [sequence] if full or previous is None else [*previous.chain, sequence]
    return ExportPlan(sequence, now, full, since, chain, previous, epoch)


def _resumed(location: BackupLocation, plan: ExportPlan, settings: BackupSettings, now: datetime) -> dict[str, Any]:
    """The progress of an interrupted attempt at this export, if recent, of the same kind and of this epoch
    (started after its restore); else a fresh one."""
    found = location.read_json(export_prefix(plan.sequence) + PROGRESS)
    fresh = {
        "as_of": plan.as_of.isoformat(),
        "full": plan.full,
        "since": _text(plan.since),
        "epoch": plan.epoch.number,
        "units": {},
    }
    if found is None or found.get("epoch", 0) != plan.epoch.number:
        return fresh
    started = datetime.fromisoformat(found["as_of"])
    recent = now - started < timedelta(minutes=settings.rpo_minutes)
    after_restore = plan.epoch.restored_at is None or started >= plan.epoch.restored_at
    if recent and after_restore and found["full"] == plan.full and found["since"] == _text(plan.since):
        return found
    return fresh


def _with_start(plan: ExportPlan, progress: dict[str, Any]) -> ExportPlan:
    """A resumed export is as old as its first attempt: its first parts were read then (never before
    the restore that began its epoch: :func:`_resumed` keeps only attempts started after it)."""
    started = datetime.fromisoformat(progress["as_of"])
    return ExportPlan(plan.sequence, started, plan.full, plan.since, plan.chain, plan.previous, plan.epoch)


def _noted(location: BackupLocation, prefix: str, progress: dict[str, Any], settings: BackupSettings) -> None:
    """Note a finished part, then pause ``PauseBetweenPartsSeconds`` (sparing the store's throughput)."""
    location.write_json(prefix + PROGRESS, progress)
    if settings.pause_between_parts_seconds:
        time.sleep(settings.pause_between_parts_seconds)


def _text(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _export_table(
    table: TableClient, location: BackupLocation, prefix: str, name: str, plan: ExportPlan
) -> tuple[PartRef, PartRef]:
    keys = location.write_lines(f"{prefix}tables/{name}.keys.jsonl.gz", _key_lines(table))
    changes = location.write_lines(f"{prefix}tables/{name}.changes.jsonl.gz", _changed_lines(table, plan.since))
    return keys, changes


def _key_lines(table: TableClient) -> Iterator[bytes]:
    try:
        for row in table.list_entities(select=["PartitionKey", "RowKey"]):
            yield _json_line([row["PartitionKey"], row["RowKey"]])
    except ResourceNotFoundError:  # a table never created holds nothing
        return


def _changed_lines(table: TableClient, since: datetime | None) -> Iterator[bytes]:
    try:
        rows = (
            table.list_entities()
            if since is None
            else table.query_entities("Timestamp ge @since", parameters={"since": since})
        )
        for row in rows:
            yield encode_line(row)
    except ResourceNotFoundError:
        return


def _export_container(
    store: StorageClients, location: BackupLocation, prefix: str, name: str, plan: ExportPlan
) -> dict[str, Any]:
    known = _previous_index(location, plan.previous, name)
    container = store.blobs.get_container_client(name)
    lines: list[bytes] = []
    total = copied = 0
    try:
        for blob in container.list_blobs(include=["metadata"]):
            entry = known.get(blob.name)
            if entry is None or entry.get("etag") != blob.etag:
                data = container.download_blob(blob.name).readall()
                kept = name in KEPT_CONTAINERS
                digest, added = location.put_object(data, kept=kept)
                entry = {
                    "name": blob.name,
                    "kept": kept,
                    "sha256": digest,
                    "size": len(data),
                    "etag": blob.etag,
                    "content_type": blob.content_settings.content_type,
                    "metadata": dict(blob.metadata or {}),
                }
                copied += int(added)
            total += int(entry["size"])
            lines.append(_json_line(entry))
    except ResourceNotFoundError:
        pass
    index = location.write_lines(f"{prefix}blobs/{name}.jsonl.gz", lines)
    return {"index": index.as_dict(), "blobs": len(lines), "bytes": total, "copied": copied}


def _previous_index(location: BackupLocation, previous: Manifest | None, name: str) -> dict[str, dict[str, Any]]:
    if previous is None or name not in previous.containers:
        return {}
    part = PartRef.of(previous.containers[name].index)
    return {entry["name"]: entry for entry in location.read_lines(part)}


def _json_line(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode() + b"\n"
