"""Event sequence numbers across a restore: never the same number for two different events.

Every outbox stream numbers its events 1, 2, 3... on its sequence row
(``~outbox-sequence``, property ``Last``; see :mod:`shared.platform.events.outbox`).
A backup is up to the RPO old, and the store kept committing events after it
(and dispatching them, so consumers have them): a sequence row restored as it
was would number the next event with a number a lost event already carried,
under a different id. A consumer ordering by ``(stream, sequence)`` would see
two events with one number. So a restore moves numbering past the loss:

- every restored sequence row's ``Last`` is raised by the restore's
  **jump**, a bound on the events one stream can have committed between the
  backup's as-of time and the restore
  (``RuntimeCloud:Backup:EventJumpPerSecond`` times that interval, plus one
  second's worth): a stream's events are rows of one table partition, which
  Azure serves at ~2,000 entities/s, and every event is one such row;
- the jump is also added to the store's **sequence floor** (row
  ``~sequence-floor``/``current`` of ``OutboxPending``): a stream whose
  sequence row is not in the backup (its first event came after it) starts
  numbering there instead of at 1, since it may have numbered events before
  the loss.

Consumers therefore see a gap in each stream's numbering at a restore (the
one place the numbering is not gap-free, documented in the README) and never
a number reused. Events still pending in the restored outbox keep their rows,
numbers and ids: the dispatcher sends them as they were, and consumers
deduplicate by id whatever was sent before the loss.

Numbers stay within ``Edm.Int32`` (the type the outbox writes ``Last`` as): a
jump that would overflow it is refused, naming the limit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from azure.data.tables import TableClient

from shared.platform.errors import RuntimeCloudError
from shared.platform.storage.conditional import read_row

SEQUENCE_ROW = "~outbox-sequence"  # the outbox's sequence row (shared.platform.events.outbox.SEQUENCE_ROW)
FLOOR_TABLE = "OutboxPending"  # the outbox's own table (shared.platform.events.outbox.PENDING_TABLE)
FLOOR_PARTITION = "~sequence-floor"  # never a table name, so the dispatcher never reads it as markers
FLOOR_ROW = "current"
MAX_SEQUENCE = 2**31 - 1  # Edm.Int32, how the outbox stores Last


class SequenceOverflow(RuntimeCloudError):
    """The jump would carry a stream's sequence past what its sequence row can store."""


def sequence_jump(backup_as_of: datetime, restored_at: datetime, events_per_second: int) -> int:
    """The most events one stream can have committed between the backup and the restore, and then some."""
    seconds = max(0.0, (restored_at - backup_as_of).total_seconds())
    return int(seconds * events_per_second) + events_per_second + 1


def sequence_floor(markers: TableClient | None) -> int:
    """The ``Last`` a stream without a sequence row starts from: 0 before any restore."""
    if markers is None:
        return 0
    row = read_row(markers, FLOOR_PARTITION, FLOOR_ROW)
    return int(row["Floor"]) if row else 0


def is_sequence_row(entity: dict[str, Any]) -> bool:
    return entity.get("RowKey") == SEQUENCE_ROW and "Last" in entity


def is_floor_row(table: str, entity: dict[str, Any]) -> bool:
    return table == FLOOR_TABLE and entity["PartitionKey"] == FLOOR_PARTITION and entity["RowKey"] == FLOOR_ROW


def restored_sequence_row(entity: dict[str, Any], jump: int) -> dict[str, Any]:
    """A stream's sequence row as a restore writes it: numbering moved past anything issued before the loss."""
    last = int(entity["Last"]) + jump
    if last > MAX_SEQUENCE:
        raise SequenceOverflow(
            f"stream {entity['PartitionKey']}: sequence {last} is over {MAX_SEQUENCE}; lower "
            "RuntimeCloud:Backup:EventJumpPerSecond or restore from a more recent backup"
        )
    return {**entity, "Last": last}


def floor_entity(previous: dict[str, Any] | None, jump: int, restored_at: datetime) -> dict[str, Any]:
    """The floor row after a restore (``previous`` is the row the backup holds, if any)."""
    floor = (int(previous["Floor"]) if previous else 0) + jump
    if floor > MAX_SEQUENCE:
        raise SequenceOverflow(f"the sequence floor would reach {floor}, over {MAX_SEQUENCE}")
    return {
        "PartitionKey": FLOOR_PARTITION,
        "RowKey": FLOOR_ROW,
        "Floor": floor,
        "Jump": jump,
        "RestoredAt": restored_at.isoformat(),
    }
