"""One export attempt, its outcome recorded where health can always read it, in bounded time.

The location's ``status.json`` (:mod:`shared.backup.status`) cannot record
that the location itself is unreachable. So every attempt is also recorded in
the host's store, in the backup's own ``BackupState`` table (row
``status``/``export``: the last attempt, the last error, the failures in a
row, the last success), which health reads beside the location's status.

Time is bounded by the location's client options
(:meth:`~shared.backup.settings.BackupSettings.location_options`:
``TimeoutSeconds`` per call, retries included); recording a failure in the
location uses a probe client (one short attempt), since the location may be
what failed. A failure is raised as :class:`ExportFailed`, whose message is
one line: what failed and why, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from azure.core.exceptions import ServiceRequestError, ServiceResponseError

from shared.backup.export import export_store
from shared.backup.location import BackupLocation
from shared.backup.manifest import Manifest
from shared.backup.settings import BackupSettings
from shared.backup.status import record_failure, record_in_store, record_success, store_record
from shared.platform import clock
from shared.platform.errors import RuntimeCloudError
from shared.platform.logs import app_logger
from shared.platform.storage.clients import StorageClients

log = app_logger("backup")


class ExportFailed(RuntimeCloudError):
    """An export attempt failed; the message is the one line recorded and shown."""


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def run_export(
    store: StorageClients,
    location: BackupLocation,
    probe: BackupLocation,
    settings: BackupSettings,
    now: Callable[[], datetime] | None = None,  # None: the one clock (a test that replaces it is seen)
) -> Manifest:
    """Export once; record the outcome in the store and the location (``probe``: the same location with
    one short attempt per call). Raises :class:`ExportFailed` with one line."""
    now = now or clock.utcnow
    try:
        manifest = export_store(store, location, settings, now=now)
    except Exception as error:  # noqa: BLE001 - every failure is recorded, then raised as one line
        text = one_line(error)
        if isinstance(error, (ServiceRequestError, ServiceResponseError)):
            text = f"{text} (the backup location {location.description} or the store did not answer)"
        where = "" if _record_failure(store, probe, text, now()) else " (recorded in the store only)"
        raise ExportFailed(f"backup export failed: {text}{where}") from None
    fields = {"LastAttemptAt": now().isoformat(), "LastError": "", "ConsecutiveFailures": 0}
    record_in_store(store, {**fields, **_success(manifest)})
    try:
        record_success(location, manifest, now())
    except Exception as unrecorded:  # noqa: BLE001 - the export is committed (its manifest); the store says so
        log.warning("backup success not recorded in the location: %s", one_line(unrecorded))
    return manifest


def _success(manifest: Manifest) -> dict[str, Any]:
    return {"LastSuccessAsOf": manifest.as_of.isoformat(), "LastSequence": manifest.sequence}


def _record_failure(store: StorageClients, probe: BackupLocation, text: str, at: datetime) -> bool:
    """Record the failure in the store, then in the location; answers whether the location took it."""
    failures = _failures_so_far(store) + 1
    record_in_store(store, {"LastAttemptAt": at.isoformat(), "LastError": text, "ConsecutiveFailures": failures})
    try:
        record_failure(probe, text, at)
    except Exception as unrecorded:  # noqa: BLE001 - the location is down: the store's record says so
        log.debug("backup failure not recorded in the location: %s", one_line(unrecorded))
        return False
    return True


def _failures_so_far(store: StorageClients) -> int:
    try:
        return int((store_record(store) or {}).get("consecutive_failures") or 0)
    except Exception:  # noqa: BLE001 - the store is down too: count from here
        return 0
