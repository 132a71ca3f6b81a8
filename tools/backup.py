"""Back up, restore and inspect the runtime-cloud store from the command line.

    python -m tools.backup status            # the latest export, its age against the RPO, the last error
    python -m tools.backup export            # one export now (the timer's work)
    python -m tools.backup restore           # rebuild an EMPTY store from the latest complete export
    python -m tools.backup restore --force   # ... even into a store that holds data (mixes histories)
                                             #     or that a host still holds leases on (stop it first!)

Settings are the host's app settings (``AzureWebJobsStorage``,
``RuntimeCloud__Backup__Connection`` and the connection it names, the
targets...), read from the environment, else from ``local.settings.json``
``Values`` in the current folder, so it runs beside ``make run`` as is.

``restore`` prints a JSON report: which export (its sequence and as-of time:
anything written after it is lost), rows per table, blobs per container, the
fencing epoch and jump, the runs it failed or left to be planned again, and
the scans it ran. Stop the host before a restore and start it after (its
in-memory caches describe the lost store): the restore refuses while a host
holds leases on the store (the Durable task hub's, the Functions host's
locks). Exit status: 0 done, 2 refused (no backup, a host running, a store
that is not empty, a chain that crosses a restore, settings missing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from shared.backup.epochs import MixedChain
from shared.backup.liveness import HostActive
from shared.backup.manifest import latest_manifest
from shared.backup.restore import NoBackup, StoreNotEmpty, restore_store
from shared.backup.status import backup_health
from shared.clock import now
from shared.errors import InvalidSettings


def _load_local_settings() -> None:
    """``local.settings.json`` Values into the environment, unless the host's settings are there already."""
    if any(name.lower().startswith("azurewebjobsstorage") for name in os.environ):
        return
    local = Path("local.settings.json")
    if local.exists():
        for name, value in json.loads(local.read_text()).get("Values", {}).items():
            os.environ.setdefault(name, str(value))


def _print(document: dict[str, Any]) -> None:
    print(json.dumps(document, indent=2, sort_keys=True, default=str))


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
    args = parser.parse_args(argv)
    _load_local_settings()
    try:
        from shared.storage.clients import shared_host_storage
        from shared.wiring import backup as wiring

        location = wiring.location()
    except InvalidSettings as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if location is None:
        print("error: RuntimeCloud__Backup__Connection is not set: there is no backup location", file=sys.stderr)
        return 2
    if args.command == "status":
        health = backup_health(wiring.settings(), location, now())
        latest = latest_manifest(location)
        latest_counts = latest.counts() if latest else None
        _print({"healthy": health.healthy, "detail": health.detail, **health.as_dict(), "latest": latest_counts})
        return 0
    if args.command == "export":
        manifest = wiring.export_once()
        _print(manifest.model_dump(mode="json") if manifest else {})
        return 0
    try:
        report = restore_store(shared_host_storage(), location, wiring.settings(), force=args.force)
    except (NoBackup, HostActive, StoreNotEmpty, MixedChain) as error:
        print(f"refused: {error}", file=sys.stderr)
        return 2
    if not args.no_reconcile:
        wiring.after_restore(report)
    _print(report.as_dict())
    print(
        f"restored export {report.backup_sequence} as of {report.backup_as_of}: "
        f"{sum(report.rows.values())} rows, {sum(report.blobs.values())} blobs; "
        f"anything written after {report.backup_as_of} is lost. Start the host now.",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
