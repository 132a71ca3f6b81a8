"""Backup and restore, built from the settings: the export the timer runs, and what follows a restore.

After a successful export the timer prunes exports older than
``RuntimeCloud:Backup:RetentionDays`` (:mod:`shared.backup.retention`); a
failed prune is logged and shown in health's ``backup.last_prune``, and the
next export's prune tries again (the export itself succeeded).

After the rows and blobs are back (:func:`shared.backup.restore.restore_store`),
:func:`after_restore` reconciles what the backup caught mid-flight:

- **runs**: a run still ``queued`` is left to the reconciler, which starts
  its orchestration afresh (the Durable task hub is not restored), so it is
  planned anew; a run ``planning``, ``awaiting-approval`` or ``applying``
  ends ``failed`` with reason ``store-restored`` and an apply receipt saying
  so: its plan and its approval may predate what happened after the backup,
  and it must never apply from a stale record;
- **inventory**: every environment is scanned again, so observed state and
  drift findings describe the target now, not the backup's time.
"""

from __future__ import annotations

import functools
from typing import Any

from shared.backup.attempts import ExportFailed, run_export
from shared.backup.location import BackupLocation, open_backup_location
from shared.backup.manifest import Manifest
from shared.backup.restore import RestoreReport
from shared.backup.retention import prune_exports
from shared.backup.settings import BackupSettings
from shared.backup.status import EXPORTS, record_prune
from shared.inventory.rescan import rescan_all
from shared.platform import clock, telemetry
from shared.platform.logs import app_logger
from shared.platform.manifest import FeatureManifest
from shared.platform.storage.clients import shared_host_storage
from shared.provisioning.restore_reconciliation import settle_runs_after_restore
from shared.wiring import inventory, provisioning
from shared.wiring.settings import get_settings

log = app_logger("backup")


def settings() -> BackupSettings:
    return get_settings().runtime_cloud.backup


@functools.lru_cache(maxsize=1)
def location() -> BackupLocation | None:
    """The process's backup location (every call bounded by ``TimeoutSeconds``); None when
    ``RuntimeCloud:Backup:Connection`` is not set."""
    return open_backup_location(settings())


@functools.lru_cache(maxsize=1)
def probe_location() -> BackupLocation | None:
    """The same location with one short attempt per call: for recording a failure it may have caused."""
    return open_backup_location(settings(), probe=True)


def export_once() -> Manifest | None:
    """One export; its outcome is recorded in the store and the location (for health), counted, and a
    failure raised as :class:`~shared.backup.attempts.ExportFailed` (one line)."""
    target, probe = location(), probe_location()
    if target is None or probe is None:
        log.warning("backup: RuntimeCloud:Backup:Connection is not set; nothing is exported")
        return None
    with telemetry.span("backup.export", attributes={"backup.location": target.description}):
        try:
            manifest = run_export(shared_host_storage(), target, probe, settings())
        except ExportFailed as error:
            telemetry.count(EXPORTS, outcome="failed")
            log.error("%s", error)
            raise
    telemetry.count(EXPORTS, outcome="ok")
    log.info(
        "backup export %d (%s) as of %s: %s",
        manifest.sequence,
        "full" if manifest.full else "incremental",
        manifest.as_of.isoformat(),
        manifest.counts(),
    )
    _prune(target)
    return manifest


def _prune(target: BackupLocation) -> None:
    """Prune old exports; its failure never fails the export that came before it."""
    try:
        report = prune_exports(target, settings(), clock.utcnow())
        pruned: dict[str, Any] = {"at": clock.now_iso(), "error": None}
        if report is not None:
            pruned.update(boundary=report.boundary, pruned=len(report.pruned), blobs_deleted=report.blobs_deleted)
            log.info("backup prune: %d export(s) below %d removed", len(report.pruned), report.boundary)
    except Exception as error:  # noqa: BLE001 - the next export prunes again
        text = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        log.error("backup prune failed: %s", text)
        pruned = {"at": clock.now_iso(), "error": text}
    try:
        record_prune(target, pruned)
    except Exception as unrecorded:  # noqa: BLE001 - the location is down: the next export's status shows it
        log.error("backup prune status not recorded: %s", type(unrecorded).__name__)


def after_restore(report: RestoreReport) -> dict[str, Any]:
    """Reconcile runs caught mid-flight and rescan every environment; answers what was done."""
    runs = _reconcile_runs(report)
    scans = _rescan()
    report.after_restore = {"runs": runs, "scans": scans}
    target = location()
    if target is not None:
        target.write_json(f"restores/{report.restored_at}.json", report.as_dict())
    return report.after_restore


def _reconcile_runs(report: RestoreReport) -> dict[str, list[str]]:
    detail = (
        f"the runtime-cloud store was restored from backup {report.backup_sequence} "
        f"(as of {report.backup_as_of}) at {report.restored_at}; this run was under way and does not "
        "continue from a record that may be stale: declare it again"
    )
    return settle_runs_after_restore(provisioning.store(), provisioning.steps(), detail)


def _rescan() -> dict[str, int]:
    return rescan_all(inventory.scanner(), inventory.scan_targets())


MANIFEST = FeatureManifest(name="backup", module=None, triggers=("functions.backup",))
