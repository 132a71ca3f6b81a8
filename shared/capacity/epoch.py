"""Fencing across a restore: the capacity rows a backup gives back, made safe to grant from.

A backup is up to the RPO old, and the store kept granting after it: slot
rows restored as they were would hand out fencing tokens (generations) that
workers from before the loss already hold. So a restore starts a new
**fencing epoch**:

- every slot row's ``Generation`` is raised by the restore's **jump**, a
  bound on the grants one slot can have seen between the backup's as-of time
  and the restore (``RuntimeCloud:Backup:FencingJumpPerSecond`` times that
  interval, plus one); the next grant's token is therefore larger than any
  token issued before the loss, and larger tokens keep winning;
- the jump is also added to the store's **generation floor** (row
  ``fencing-epoch``/``current`` of ``CapacityPools``): a slot row created
  later (a pool re-created or grown after the restore, whose slots may have
  existed before the loss without being in the backup) starts there instead
  of at 0;
- every lease the backup holds is **ended**: slot rows are freed, grant
  history rows still ``held`` end ``expired`` (reason ``store-restored``),
  lease records become ``expired`` and quota tokens are free. A worker that
  renews such a lease gets the lease-lost answer (409) and must stop; one
  whose lease came after the backup has no record at all (404).

Tokens stay within ``Edm.Int32`` (how the slot row stores them): a jump that
would overflow it is refused, naming the limit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from azure.data.tables import TableClient

from shared.capacity.keys import GRANT_PREFIX, LEASES_TABLE, POOLS_TABLE, QUOTAS_TABLE, SLOT_PREFIX, SLOTS_TABLE, stamp
from shared.capacity.models import LeaseState
from shared.platform.errors import RuntimeCloudError
from shared.platform.storage.conditional import read_row

EPOCH_PARTITION = "fencing-epoch"
EPOCH_ROW = "current"
RESTORED_REASON = "store-restored"
MAX_GENERATION = 2**31 - 1  # Edm.Int32, the type of Generation on the slot row


class FencingOverflow(RuntimeCloudError):
    """The jump would carry a slot's generation past what the slot row can store."""


def fencing_jump(backup_as_of: datetime, restored_at: datetime, grants_per_second: int) -> int:
    """The most grants one slot can have seen between the backup and the restore, plus one."""
    seconds = max(0.0, (restored_at - backup_as_of).total_seconds())
    return int(seconds * grants_per_second) + grants_per_second + 1


def generation_floor(pools: TableClient) -> int:
    """Where a new slot row's generation starts: 0 before any restore, the sum of their jumps after."""
    row = read_row(pools, EPOCH_PARTITION, EPOCH_ROW)
    return int(row["Floor"]) if row else 0


def epoch_entity(previous: dict[str, Any] | None, jump: int, restored_at: datetime, as_of: datetime) -> dict[str, Any]:
    """The epoch row after a restore (``previous`` is the row the backup holds, if any)."""
    floor = (int(previous["Floor"]) if previous else 0) + jump
    if floor > MAX_GENERATION:
        raise FencingOverflow(f"the generation floor would reach {floor}, over {MAX_GENERATION}")
    return {
        "PartitionKey": EPOCH_PARTITION,
        "RowKey": EPOCH_ROW,
        "Epoch": (int(previous["Epoch"]) if previous else 0) + 1,
        "Floor": floor,
        "Jump": jump,
        "RestoredAt": stamp(restored_at),
        "BackupAsOf": stamp(as_of),
    }


def restored_entity(table: str, entity: dict[str, Any], jump: int, restored_at: datetime) -> dict[str, Any]:
    """``entity`` as a restore must write it: leases ended, slot generations raised (others unchanged)."""
    row_key = str(entity["RowKey"])
    if table == SLOTS_TABLE and row_key.startswith(SLOT_PREFIX):
        return _slot(entity, jump)
    if table == SLOTS_TABLE and row_key.startswith(GRANT_PREFIX) and entity.get("Outcome") == "held":
        return {**entity, "Outcome": "expired", "EndedAt": stamp(restored_at), "Reason": RESTORED_REASON}
    if table == QUOTAS_TABLE and "Index" in entity:
        return {**entity, "LeaseId": "", "ExpiresAt": "", "ClaimedAt": ""}
    if table == LEASES_TABLE and entity.get("State") == LeaseState.ACTIVE.value:
        return {**entity, "State": LeaseState.EXPIRED.value, "EndedAt": stamp(restored_at), "Reason": RESTORED_REASON}
    return entity


def _slot(entity: dict[str, Any], jump: int) -> dict[str, Any]:
    generation = int(entity["Generation"]) + jump
    if generation > MAX_GENERATION:
        raise FencingOverflow(
            f"slot {entity['PartitionKey']}/{entity['RowKey']}: generation {generation} is over {MAX_GENERATION}; "
            "lower RuntimeCloud:Backup:FencingJumpPerSecond or restore from a more recent backup"
        )
    return {
        **entity,
        "Generation": generation,
        "LeaseId": "",
        "Tenant": "",
        "TokenIndex": -1,
        "GrantedAt": "",
        "ExpiresAt": "",
    }


def is_epoch_row(table: str, entity: dict[str, Any]) -> bool:
    return table == POOLS_TABLE and entity["PartitionKey"] == EPOCH_PARTITION and entity["RowKey"] == EPOCH_ROW
