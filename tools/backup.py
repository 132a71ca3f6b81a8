"""Back up, restore and inspect the runtime-cloud store from the command line.

    python -m tools.backup status            # the latest export, its age against the RPO, the last error
    python -m tools.backup export            # one export now (the timer's work)
    python -m tools.backup restore           # rebuild an EMPTY store from the latest complete export
    python -m tools.backup restore --force   # ... even into a store that holds data (mixes histories)
                                             #     or that a host still holds leases on (stop it first!)
    python -m tools.backup empty-store --yes # a drill's loss: delete the store's tables, containers, queues
                                             #     (refused while a host runs, or if the backup is there)

Settings are the host's app settings, read key by key: a setting in the
environment wins, any other comes from ``local.settings.json`` ``Values`` in
the current folder, so it runs beside ``make run`` as is. ``status`` and
``export`` need only the store (``AzureWebJobsStorage...``) and the backup
(``RuntimeCloud__Backup__*`` and the connection it names); ``restore`` also
reconciles runs and rescans environments afterwards, which needs the host's
settings (targets...) unless ``--no-reconcile`` is given.

``export`` prints the manifest; a failure is one line on stderr (exit 1),
recorded in the store and, when it answers, in the backup location, where
health reads it. A location that does not answer fails it within about
``RuntimeCloud__Backup__TimeoutSeconds`` (30 s).

``restore`` prints a JSON report: which export (its sequence and as-of time:
anything written after it is lost), the backup epoch it started, rows per
table, blobs per container, the fencing epoch and jump, the runs it failed or
left to be planned again, and the scans it ran. Stop the host before a
restore and start it after (its in-memory caches describe the lost store):
the restore refuses while a host holds leases on the store (the Durable task
hub's, the Functions host's locks). Exit status: 0 done, 1 the export failed,
2 refused (no backup, a host running, a store that is not empty, a chain that
crosses a restore, settings missing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from azure.core.exceptions import AzureError

from shared.backup.attempts import ExportFailed, run_export
from shared.backup.epochs import MixedChain
from shared.backup.liveness import HostActive, refuse_live_host
from shared.backup.location import BackupLocation, open_backup_location
from shared.backup.manifest import latest_manifest
from shared.backup.mirror import mirror_from_environment
from shared.backup.restore import NoBackup, StoreNotEmpty, restore_store
from shared.backup.settings import BackupSettings, backup_settings_from_environment
from shared.backup.status import backup_health
from shared.platform import clock
from shared.platform.errors import InvalidSettings
from shared.platform.neighbours.knowledge_host import KnowledgeHost
from shared.platform.storage.clients import StorageClients


def _load_local_settings() -> None:
    """``local.settings.json`` Values into the environment, each unless the environment sets it already."""
    local = Path("local.settings.json")
    if local.exists():
        for name, value in json.loads(local.read_text()).get("Values", {}).items():
            os.environ.setdefault(name, str(value))


def _print(document: dict[str, Any]) -> None:
    print(json.dumps(document, indent=2, sort_keys=True, default=str))


def _fail(prefix: str, error: Exception, code: int) -> int:
    print(f"{prefix}: {error}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.backup", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="the latest export and its age against the RPO")
    commands.add_parser("export", help="run one export now")
    restore = commands.add_parser("restore", help="rebuild an empty store from the latest complete export")
    restore.add_argument(
        "--force",
        action="store_true",
        help="restore even into a store that holds data or that a host holds leases on (once you know it stopped)",
    )
    restore.add_argument("--no-reconcile", action="store_true", help="skip failing mid-flight runs and rescans")
    empty = commands.add_parser(
        "empty-store", help="delete every table, container and queue of the host's store (never the backup's)"
    )
    empty.add_argument("--yes", action="store_true", required=True, help="yes, delete everything in the store")
    empty.add_argument("--force", action="store_true", help="even while a host holds leases on it")
    args = parser.parse_args(argv)
    _load_local_settings()
    try:
        from shared.platform.storage.clients import shared_host_storage

        settings = backup_settings_from_environment()
        location = open_backup_location(settings)
        probe = open_backup_location(settings, probe=True)
        store = shared_host_storage()
        if args.command == "restore" and not args.no_reconcile:
            from shared.wiring.settings import get_settings

            get_settings()  # the reconcile after the restore needs the host's settings: check them first
    except InvalidSettings as error:
        return _fail("error", error, 2)
    if location is None or probe is None:
        print("error: RuntimeCloud__Backup__Connection is not set: there is no backup location", file=sys.stderr)
        return 2
    if args.command == "empty-store":
        return _empty_store(store, location, force=args.force)
    if args.command == "status":
        health = backup_health(settings, location, clock.utcnow(), store=store)
        try:
            latest = latest_manifest(location)
        except AzureError:  # the location does not answer: the detail above says so
            latest = None
        latest_counts = latest.counts() if latest else None
        _print({"healthy": health.healthy, "detail": health.detail, **health.as_dict(), "latest": latest_counts})
        return 0
    if args.command == "export":
        try:
            manifest = run_export(store, location, probe, settings)
        except ExportFailed as error:
            return _fail("error", error, 1)
        _print(manifest.model_dump(mode="json"))
        return 0
    return _restore(args, settings, store, location)


def _empty_store(store: StorageClients, location: BackupLocation, *, force: bool) -> int:
    """What losing the store looks like, for a drill: every table, container and queue of its account."""
    if location.container.account_name == store.account_name:
        print(f"refused: the backup location {location.description} is in the store's account", file=sys.stderr)
        return 2
    if not force:
        try:
            refuse_live_host(store)
        except HostActive as error:
            return _fail("refused", error, 2)
    tables = [table.name for table in store.tables.list_tables()]
    containers = [container.name for container in store.blobs.list_containers()]
    queues = [queue.name for queue in store.queues.list_queues()]
    for table in tables:
        store.tables.delete_table(table)
    for container in containers:
        store.blobs.delete_container(container)
    for queue in queues:
        store.queues.delete_queue(queue)
    _print({"account": store.account_name, "tables": tables, "containers": containers, "queues": queues})
    return 0


def _mirror() -> KnowledgeHost | None:
    """KnowledgeHost, when configured: receipts the backup lacks are read back from it."""
    from shared.wiring.neighbours import scoped_token

    return mirror_from_environment(scoped_token)


def _restore(
    args: argparse.Namespace, settings: BackupSettings, store: StorageClients, location: BackupLocation
) -> int:
    try:
        report = restore_store(store, location, settings, force=args.force, mirror=_mirror())
    except (NoBackup, HostActive, StoreNotEmpty, MixedChain) as error:
        return _fail("refused", error, 2)
    if not args.no_reconcile:
        from shared.wiring import backup as wiring

        wiring.after_restore(report)
    _print(report.as_dict())
    print(
        f"restored export {report.backup_sequence} as of {report.backup_as_of} (backup epoch "
        f"{report.epoch.get('epoch')}): {sum(report.rows.values())} rows, {sum(report.blobs.values())} blobs; "
        f"anything written after {report.backup_as_of} is lost. Start the host now.",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
