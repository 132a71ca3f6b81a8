"""Backup epochs: which history an export reads, so that no chain ever joins two of them.

A restore discards everything written after its export's ``as_of``: the store
goes on from there, a new history. Every restore therefore starts a new
**epoch** (a number, one more than any the backup location has seen), and
records it in two places:

- the backup location's ``epoch.json``: it survives another loss of the
  store, so the next restore numbers its epoch past it;
- the restored store's ``BackupState`` table (row ``epoch``/``current``):
  the next export reads which history the rows it reads belong to. The table
  is the backup's own (:mod:`shared.backup.attempts` keeps the last attempt
  there too), not in the registry's list: it is never exported, so a restore
  never brings back a stale epoch with the rows.

An export stamps its manifest with the epoch it read under, resumes only an
unfinished attempt of that same epoch started after the restore, and starts a
new chain (a full export) in each epoch; a restore refuses a chain whose
manifests do not all share one epoch (:func:`check_chain`), and the export a
history lost at a restore wrote late (:func:`check_latest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import UpdateMode

from shared.platform.errors import RuntimeCloudError
from shared.platform.storage.clients import StorageClients

if TYPE_CHECKING:
    from shared.backup.location import BackupLocation
    from shared.backup.manifest import Manifest

EPOCH_BLOB = "epoch.json"
STATE_TABLE = "BackupState"  # the backup's own table in the store (never exported)
EPOCH_PARTITION = "epoch"
EPOCH_ROW = "current"


class MixedChain(RuntimeCloudError):
    """A chain of exports joins two histories (it crosses a restore), or the latest export is from a
    history a restore discarded."""


class SupersededStore(RuntimeCloudError):
    """The store belongs to an older epoch than the backup location's latest restore."""


@dataclass(frozen=True)
class BackupEpoch:
    """Epoch ``number`` (0: no restore yet), started by the restore at ``restored_at`` from export
    ``from_sequence``."""

    number: int = 0
    restored_at: datetime | None = None
    from_sequence: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.number,
            "restored_at": self.restored_at.isoformat() if self.restored_at else None,
            "from_sequence": self.from_sequence,
        }

    @classmethod
    def of(cls, document: dict[str, Any] | None) -> BackupEpoch:
        if not document:
            return cls()
        restored_at = document.get("restored_at")
        from_sequence = document.get("from_sequence")
        return cls(
            int(document.get("epoch", 0)),
            datetime.fromisoformat(restored_at) if restored_at else None,
            int(from_sequence) if from_sequence is not None else None,
        )


def location_epoch(location: BackupLocation) -> BackupEpoch:
    return BackupEpoch.of(location.read_json(EPOCH_BLOB))


def store_epoch(store: StorageClients) -> BackupEpoch:
    try:
        row = store.tables.get_table_client(STATE_TABLE).get_entity(EPOCH_PARTITION, EPOCH_ROW)
    except ResourceNotFoundError:  # no table or no row: the store was never restored
        return BackupEpoch()
    return BackupEpoch.of({"epoch": row["Epoch"], "restored_at": row["RestoredAt"], "from_sequence": row["From"]})


def current_epoch(store: StorageClients, location: BackupLocation) -> BackupEpoch:
    """The epoch an export of ``store`` to ``location`` runs in; refused if the location saw a later
    restore than the store (the store is a history that restore discarded, or another store)."""
    mine, latest = store_epoch(store), location_epoch(location)
    if mine.number < latest.number:
        raise SupersededStore(
            f"this store is in backup epoch {mine.number}, but {location.description} was restored into "
            f"epoch {latest.number} at {latest.as_dict()['restored_at']}: the store's history was discarded "
            "by that restore, and its exports would mix two histories. Restore it from the backup, or give it a "
            "backup location of its own (RuntimeCloud:Backup:Container)"
        )
    return mine


def start_epoch(
    store: StorageClients, location: BackupLocation, manifest: Manifest, restored_at: datetime
) -> BackupEpoch:
    """A restore from ``manifest`` starts the next epoch: recorded in the store, then in the location."""
    number = max(location_epoch(location).number, store_epoch(store).number, manifest.epoch) + 1
    started = BackupEpoch(number, restored_at, manifest.sequence)
    table = store.tables.create_table_if_not_exists(STATE_TABLE)
    row = {
        "PartitionKey": EPOCH_PARTITION,
        "RowKey": EPOCH_ROW,
        "Epoch": number,
        "RestoredAt": restored_at.isoformat(),
        "From": manifest.sequence,
    }
    table.upsert_entity(row, mode=UpdateMode.REPLACE)
    location.write_json(EPOCH_BLOB, started.as_dict())
    return started


def check_latest(location: BackupLocation, manifest: Manifest) -> None:
    """Refuse a latest export written by a history that the location's latest restore discarded (an
    export of an older epoch, numbered after the one that restore came from)."""
    latest = location_epoch(location)
    if manifest.epoch < latest.number and manifest.sequence > (latest.from_sequence or 0):
        raise MixedChain(
            f"export {manifest.sequence} is from backup epoch {manifest.epoch}, but epoch {latest.number} "
            f"began when export {latest.from_sequence} was restored: export {manifest.sequence} holds "
            "history that restore discarded. Remove its folder (exports/"
            f"{manifest.sequence:010d}/) to restore from export {latest.from_sequence}"
        )


def check_chain(chain: list[Manifest]) -> None:
    """Refuse a chain that is not one history: a full export, then exports that each follow the one
    before, all in one epoch (a chain that crosses a restore would replay rows of two histories)."""
    for earlier, later in zip(chain, chain[1:], strict=False):
        if later.epoch != earlier.epoch:
            raise MixedChain(
                f"the chain of export {chain[-1].sequence} crosses a restore: export {earlier.sequence} is from "
                f"backup epoch {earlier.epoch} and export {later.sequence} from epoch {later.epoch}; "
                "refusing to replay two histories as one"
            )
        if later.follows is not None and later.follows != earlier.sequence:
            raise MixedChain(
                f"the chain of export {chain[-1].sequence} is broken: export {later.sequence} follows export "
                f"{later.follows}, not {earlier.sequence}"
            )
    if chain and not chain[0].full:
        raise MixedChain(f"the chain of export {chain[-1].sequence} does not start with a full export")
