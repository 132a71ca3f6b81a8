"""The export status: written by every export attempt, read by health.

It is kept in two places. ``status.json`` lives in the backup location, not
in the store it protects: when the store is lost the status of its backups is
still there to read. The store's ``BackupState`` table (row
``status``/``export``) holds the last attempt too: when the location is what
cannot be reached, that failure is still recorded and shown. Health reads
both (the later attempt wins) and degrades when the latest complete export
is older than the RPO, when the last attempt failed, or when the location
cannot be read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import UpdateMode

from shared.backup.epochs import STATE_TABLE
from shared.backup.location import BackupLocation
from shared.backup.manifest import STATUS, Manifest
from shared.backup.settings import BackupSettings
from shared.platform.logs import app_logger
from shared.platform.storage.clients import StorageClients
from shared.platform.telemetry.names import PREFIX, MetricName

log = app_logger("backup")
STATUS_PARTITION = "status"
STATUS_ROW = "export"

# Not in shared.platform.telemetry.names.METRICS (whose names the infra's alert rules must also know): the
# backup's alert is health's "degraded" and this counter, filtered on outcome.
EXPORTS = MetricName(
    f"{PREFIX}.backup.exports", "counter", "{export}", ("outcome",), "backup exports, by outcome (ok, failed)"
)


def record_success(location: BackupLocation, manifest: Manifest, now: datetime) -> None:
    status = location.read_json(STATUS) or {}
    status.update(
        last_attempt_at=now.isoformat(),
        last_error=None,
        consecutive_failures=0,
        last_success={
            "sequence": manifest.sequence,
            "as_of": manifest.as_of.isoformat(),
            "finished_at": manifest.finished_at.isoformat(),
            "full": manifest.full,
            **manifest.counts(),
        },
    )
    location.write_json(STATUS, status)


def record_prune(location: BackupLocation, pruned: dict[str, Any]) -> None:
    """What the prune after the last export did (or its error): shown by health, never degrading it."""
    status = location.read_json(STATUS) or {}
    status["last_prune"] = pruned
    location.write_json(STATUS, status)


def record_failure(location: BackupLocation, error: str, now: datetime) -> None:
    status = location.read_json(STATUS) or {}
    status.update(
        last_attempt_at=now.isoformat(),
        last_error=error,
        consecutive_failures=int(status.get("consecutive_failures", 0)) + 1,
    )
    location.write_json(STATUS, status)


def record_in_store(store: StorageClients, fields: dict[str, Any]) -> None:
    """Merge ``fields`` (``LastAttemptAt``, ``LastError``...) into the store's record of the last attempt;
    a store that does not answer is logged, not raised (the export's own outcome is what callers see)."""
    try:
        table = store.tables.create_table_if_not_exists(STATE_TABLE)
        table.upsert_entity({"PartitionKey": STATUS_PARTITION, "RowKey": STATUS_ROW, **fields}, mode=UpdateMode.MERGE)
    except Exception as unrecorded:  # noqa: BLE001 - see above
        log.warning("backup attempt not recorded in the store: %s", type(unrecorded).__name__)


def store_record(store: StorageClients) -> dict[str, Any] | None:
    """The last attempt as the store recorded it (None before any), in ``status.json``'s terms."""
    try:
        row = store.tables.get_table_client(STATE_TABLE).get_entity(STATUS_PARTITION, STATUS_ROW)
    except ResourceNotFoundError:
        return None
    return {
        "last_attempt_at": row.get("LastAttemptAt"),
        "last_error": row.get("LastError") or None,
        "consecutive_failures": int(row.get("ConsecutiveFailures", 0)),
        "last_success": {"as_of": row["LastSuccessAsOf"], "sequence": row.get("LastSequence")}
        if row.get("LastSuccessAsOf")
        else None,
    }


@dataclass(frozen=True)
class BackupHealth:
    """What health shows about backups: the settings, the latest export and its age against the RPO."""

    healthy: bool
    detail: str
    configured: bool
    location: str
    schedule: str
    rpo_minutes: float
    retention_days: float = 0
    last_success_as_of: str | None = None
    age_seconds: float | None = None
    last_sequence: int | None = None
    last_attempt_at: str | None = None
    last_error: str | None = None
    consecutive_failures: int = 0
    last_prune: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if key not in ("healthy", "detail")}


def backup_health(
    settings: BackupSettings, location: BackupLocation | None, now: datetime, store: StorageClients | None = None
) -> BackupHealth:
    """What health shows; with ``store``, its record of the last attempt counts too, and a location that
    cannot be read is part of the answer (degraded, saying why) rather than an error."""
    if location is None:
        detail = "not configured (RuntimeCloud:Backup:Connection): the store has no backup"
        return BackupHealth(False, detail, False, "", settings.schedule, settings.rpo_minutes, settings.retention_days)
    recorded = store_record(store) if store is not None else None
    try:
        status = location.read_json(STATUS) or {}
    except Exception as error:
        if store is None:
            raise
        status = {"unreadable": f"backup location unreadable: {type(error).__name__}: {_first_line(error)}"}
    status = _later_attempt(status, recorded)
    success = status.get("last_success") or {}
    as_of = success.get("as_of")
    age = (now - datetime.fromisoformat(as_of)).total_seconds() if as_of else None
    found = BackupHealth(
        healthy=True,
        detail="",
        configured=True,
        location=location.description,
        schedule=settings.schedule,
        rpo_minutes=settings.rpo_minutes,
        retention_days=settings.retention_days,
        last_success_as_of=as_of,
        age_seconds=round(age, 1) if age is not None else None,
        last_sequence=success.get("sequence"),
        last_attempt_at=status.get("last_attempt_at"),
        last_error=status.get("last_error"),
        consecutive_failures=int(status.get("consecutive_failures", 0)),
        last_prune=status.get("last_prune"),
    )
    judged = _judged(found, settings.rpo_minutes * 60)
    if unreadable := status.get("unreadable"):
        judged = replace(judged, healthy=False, detail=f"{unreadable}; {judged.detail}")
    return judged


def _later_attempt(status: dict[str, Any], recorded: dict[str, Any] | None) -> dict[str, Any]:
    """The location's status, with the store's record of the last attempt where that is the later one
    (the location could not record its own failure), and its last success where the location has none."""
    if not recorded:
        return status
    merged = dict(status)
    if (recorded.get("last_attempt_at") or "") > (status.get("last_attempt_at") or ""):
        for key in ("last_attempt_at", "last_error", "consecutive_failures"):
            merged[key] = recorded.get(key)
    if not merged.get("last_success") and recorded.get("last_success"):
        merged["last_success"] = recorded["last_success"]
    return merged


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def _judged(found: BackupHealth, rpo_seconds: float) -> BackupHealth:
    if found.age_seconds is None:
        verdict, healthy = "no complete export yet", False
    else:
        healthy = found.age_seconds <= rpo_seconds
        verdict = f"the latest export is {found.age_seconds:.0f} s old; the RPO is {rpo_seconds:.0f} s"
    if found.last_error:
        verdict += (
            f"; the last attempt failed ({found.consecutive_failures} in a row) at {found.last_attempt_at}: "
            f"{found.last_error}"
        )
        healthy = False
    return replace(found, healthy=healthy, detail=verdict)
