"""What a backup costs: a full export, an incremental one with few changes, and a restore, per 1,000 rows.

Everything runs in one process against an Azurite of its own (the host's
store in its first account, the backup location in its second, as a second
storage account in Azure), on one table of ``ROWS`` rows of about 1 KB in
20 partitions:

- **baseline**: one raw read of every row of the table (``list_entities``),
  the least any export must do;
- **full export**: ``export_store`` into an empty location (every row and the
  key set, gzip'd, digested, the manifest);
- **incremental export**: the next export after ``CHANGED`` rows changed
  (the key set, a projection, and the changed rows only);
- **restore**: ``restore_store`` of the chain (full + incremental) into the
  emptied table (read, check digests, decode, write in batches of 100);
- **raw write**: the same rows written again in batches of 100 by the SDK,
  the least any restore must do.

Printed and recorded in ``.data/bench/latest.json``, as ratios against the
baseline measured in the same run (medians of ``REPEATS``):
``backup_full_export_ratio``, ``backup_incremental_export_ratio``,
``backup_incremental_vs_full_ratio``, ``backup_restore_ratio`` and
``backup_restore_vs_raw_write_ratio`` (against the raw write); and plain
figures for orientation (they move with the machine's load):
``backup_full_export_ms_per_1000_rows``, ``backup_restore_rows_per_second``.

Run: ``.venv/bin/python bench/backup.py [rows]`` (default 5,000; about a
minute on a busy 2-core machine).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._results import record
from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.backup.export import export_store
from shared.backup.location import BackupLocation
from shared.backup.restore import restore_store
from shared.backup.settings import BackupSettings
from shared.platform.storage.clients import StorageClients, clients_from_connection_string

TABLE = "BenchRows"
CHANGED = 10
REPEATS = 3
SETTINGS = BackupSettings(overlap_seconds=0)


def fill(store: StorageClients, rows: int) -> None:
    table = store.tables.create_table_if_not_exists(TABLE)
    padding = "x" * 900
    by_partition: dict[str, list[dict[str, object]]] = {}
    for index in range(rows):
        partition = f"p{index % 20:02d}"
        by_partition.setdefault(partition, []).append(
            {"PartitionKey": partition, "RowKey": f"r{index:07d}", "Index": index, "Padding": padding}
        )
    for partition_rows in by_partition.values():
        for start in range(0, len(partition_rows), 100):
            table.submit_transaction([("upsert", row) for row in partition_rows[start : start + 100]])


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def location(backups: StorageClients) -> BackupLocation:
    return BackupLocation(backups.blobs.get_container_client(f"bench-{uuid.uuid4().hex[:10]}"))


def one_round(store: StorageClients, backups: StorageClients, rows: int) -> dict[str, float]:
    table = store.tables.get_table_client(TABLE)
    target = location(backups)
    baseline = timed(lambda: sum(1 for _ in table.list_entities()))
    full = timed(lambda: export_store(store, target, SETTINGS, tables=[TABLE], containers=[]))
    for index in range(CHANGED):
        table.upsert_entity({"PartitionKey": f"p{index % 20:02d}", "RowKey": f"r{index:07d}", "Changed": True})
    incremental = timed(lambda: export_store(store, target, SETTINGS, tables=[TABLE], containers=[]))
    store.tables.delete_table(TABLE)
    store.tables.create_table(TABLE)
    restore = timed(lambda: restore_store(store, target, SETTINGS, tables=[TABLE], containers=[]))
    store.tables.delete_table(TABLE)
    write = timed(lambda: fill(store, rows))  # the same rows, written raw: what a restore cannot avoid
    restored = sum(1 for _ in table.list_entities(select=["RowKey"]))
    assert restored == rows, f"restored {restored} of {rows} rows"
    target.container.delete_container()
    return {"baseline": baseline, "full": full, "incremental": incremental, "restore": restore, "write": write}


def main(rows: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        azurite = Azurite(Path(scratch) / "azurite").start()
        try:
            store = clients_from_connection_string(azurite.connection_string())
            backups = clients_from_connection_string(azurite.connection_string(TARGET_ACCOUNT))
            fill(store, rows)
            rounds = [one_round(store, backups, rows) for _ in range(REPEATS)]
        finally:
            azurite.stop(grace_seconds=0.5)
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    per_thousand = 1000 / rows
    print(f"{rows} rows of ~1 KB, medians of {REPEATS}:")
    for key, seconds in median.items():
        print(f"  {key:12s} {seconds * 1000:8.1f} ms  ({seconds * 1000 * per_thousand:6.1f} ms per 1,000 rows)")
    record(
        "backup",
        {
            "backup_full_export_ratio": median["full"] / median["baseline"],
            "backup_incremental_export_ratio": median["incremental"] / median["baseline"],
            "backup_incremental_vs_full_ratio": median["incremental"] / median["full"],
            "backup_restore_ratio": median["restore"] / median["baseline"],
            "backup_restore_vs_raw_write_ratio": median["restore"] / median["write"],
            "backup_full_export_ms_per_1000_rows": median["full"] * 1000 * per_thousand,
            "backup_restore_rows_per_second": rows / median["restore"],
        },
        {"rows": rows, "changed": CHANGED, "repeats": REPEATS},
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
