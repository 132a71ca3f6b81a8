"""``RuntimeCloud:Backup:*``: where backups go, how often, and the recovery point they promise.

Defaults:

- ``Connection``: empty, no backup location: nothing is exported and health
  says so (degraded). Set it to the *name* of a connection setting, as a
  Functions binding names one (``RuntimeCloudBackup``): that setting is a
  connection string (locally) or the identity-based
  ``RuntimeCloudBackup__accountName`` / ``__blobServiceUri`` / ``__credential``
  / ``__clientId`` (Azure), read by :mod:`shared.platform.storage.connection`.
- ``Container``: ``runtime-cloud-backup``
- ``Schedule``: ``0 */5 * * * *`` (every five minutes; 6-field NCRONTAB)
- ``RpoMinutes``: ``15``. The schedule must fire at least that often (checked
  when the settings are read), and health degrades when the latest complete
  export is older.
- ``OverlapSeconds``: ``300``: an incremental export re-reads rows changed
  this long before the previous export started, against clock skew between
  this host and the storage service that stamps ``Timestamp``.
- ``FullEveryHours``: ``24``: a full export (every row) at least this often,
  so a restore replays at most a day of incremental exports.
- ``FencingJumpPerSecond``: ``1000``: the most grants one capacity slot can
  see per second (a grant is an atomic batch of at least three entities in
  the slot's shard partition, which Azure serves at ~2,000 entities/s). A
  restore adds ``rate x (restore time - backup as-of time)`` to every slot's
  generation, so no fencing token issued before the loss is issued again.
- ``EventJumpPerSecond``: ``2000``: the most events one outbox stream can
  commit per second (every event is a row of the stream's one partition,
  which Azure serves at ~2,000 entities/s). A restore adds
  ``rate x (restore time - backup as-of time)`` to every stream's sequence
  (:mod:`shared.platform.events.sequence_floor`), so no event number is used twice.
- ``RetentionDays``: ``7``: exports a restore could start from are kept this
  long (every export whose ``as_of`` is this recent, with the chain it
  depends on); older chains are pruned after each successful export. The
  chain of the latest export is never pruned, whatever the value (``0``
  keeps only it).
- ``PauseBetweenPartsSeconds``: ``0``: an export pauses this long after each
  part (a table or a container) it finishes, to spare the store's throughput
  for the host on a large store; the restore drill uses it to stop an export
  between two parts.
- ``TimeoutSeconds``: ``30``: the longest one call to the backup location may
  take, retries included (three attempts, each with a third of it, less the
  pauses between them): an unreachable location fails the export in about
  this time, not in the minutes the storage SDK's default retries take.
- ``ReceiptsContainer``: empty, receipt copies go to ``Container`` with the
  rest. In Azure ``infra/`` sets it to a container with a time-based
  immutability policy: receipt copies are write-once there, and pruning
  exports never touches them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from azure.storage.blob import LinearRetry
from croniter import croniter
from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.platform.errors import InvalidSettings
from shared.platform.settings_section import NcrontabSchedule, Section

LOCATION_RETRIES = 2  # three attempts in all
LOCATION_BACKOFF = 1  # seconds between two attempts


class BackupSettings(Section):
    connection: str = Field(default="", alias="Connection")
    container: str = Field(default="runtime-cloud-backup", alias="Container", pattern=r"^[a-z0-9](-?[a-z0-9]){2,62}$")
    schedule: NcrontabSchedule = Field(default="0 */5 * * * *", alias="Schedule")
    rpo_minutes: float = Field(default=15, gt=0, le=366 * 24 * 60, alias="RpoMinutes")
    overlap_seconds: float = Field(default=300, ge=0, le=3600, alias="OverlapSeconds")
    full_every_hours: float = Field(default=24, gt=0, le=24 * 30, alias="FullEveryHours")
    fencing_jump_per_second: int = Field(default=1000, ge=1, le=100_000, alias="FencingJumpPerSecond")
    event_jump_per_second: int = Field(default=2000, ge=1, le=100_000, alias="EventJumpPerSecond")
    retention_days: float = Field(default=7, ge=0, le=3660, alias="RetentionDays")
    pause_between_parts_seconds: float = Field(default=0, ge=0, le=60, alias="PauseBetweenPartsSeconds")
    timeout_seconds: float = Field(default=30, ge=3, le=600, alias="TimeoutSeconds")
    receipts_container: str = Field(default="", alias="ReceiptsContainer", pattern=r"^$|^[a-z0-9](-?[a-z0-9]){2,62}$")

    @property
    def configured(self) -> bool:
        return bool(self.connection.strip())

    def location_options(self) -> dict[str, Any]:
        """Storage client options that bound every call to the location by ``TimeoutSeconds``: three
        attempts a second apart, each allowed a sixth of the rest to connect and a sixth to read."""
        attempt = max(0.5, (self.timeout_seconds - LOCATION_RETRIES * LOCATION_BACKOFF) / (LOCATION_RETRIES + 1) / 2)
        return {
            "retry_policy": LinearRetry(backoff=LOCATION_BACKOFF, retry_total=LOCATION_RETRIES, random_jitter_range=0),
            "connection_timeout": attempt,
            "read_timeout": attempt,
        }

    def probe_options(self) -> dict[str, Any]:
        """One attempt, a few seconds: for recording a failure in a location that may be what failed."""
        attempt = min(5.0, self.timeout_seconds / 6)
        return {"retry_total": 0, "connection_timeout": attempt, "read_timeout": attempt}

    @model_validator(mode="after")
    def _schedule_keeps_the_rpo(self) -> BackupSettings:
        gap = longest_gap(self.schedule)
        if gap > timedelta(minutes=self.rpo_minutes):
            raise ValueError(
                f"Schedule {self.schedule!r} leaves up to {gap.total_seconds() / 60:g} minutes between exports, "
                f"more than RpoMinutes ({self.rpo_minutes:g}): schedule exports at least that often"
            )
        return self


def longest_gap(schedule: str, horizon: timedelta | None = None, most: int = 20_000) -> timedelta:
    """The longest time between two firings of ``schedule`` over ``horizon`` (a week and a day covers
    day-of-week schedules), looking at ``most`` firings at most (so that a schedule firing every second
    is read in a moment; beyond them it is taken to repeat)."""
    if horizon is None:
        # A schedule that names no day, month or weekday fires alike every day, so a day and a day (as a week
        # and a day for the others) shows every gap: a quarter of the firings, read at every settings load
        # (the default, every 5 minutes: 0.07 s of CPU over 8 days, at every host and job scaler start).
        horizon = timedelta(days=2 if schedule.split()[3:] == ["*", "*", "*"] else 8)
    start = datetime(2024, 1, 1, tzinfo=UTC)  # a fixed start: the answer must not depend on today
    runs = croniter(schedule, start, second_at_beginning=True)
    previous, longest = runs.get_next(datetime), timedelta(0)
    for _ in range(most):
        following = runs.get_next(datetime)
        longest = max(longest, following - previous)
        previous = following
        if previous - start >= horizon:
            break
    return longest


class _BackupOnlySection(Section):
    backup: BackupSettings = Field(default_factory=BackupSettings, alias="Backup")


class _BackupOnly(BaseSettings):
    """``RuntimeCloud:Backup:*`` and nothing else of the host's settings."""

    model_config = SettingsConfigDict(
        env_nested_delimiter="__", case_sensitive=False, populate_by_name=True, extra="ignore", frozen=True
    )

    runtime_cloud: _BackupOnlySection = Field(default_factory=_BackupOnlySection, alias="RuntimeCloud")


def backup_settings_from_environment() -> BackupSettings:
    """The backup section alone, from the environment: what ``tools.backup`` needs to export, show the
    status and restore, without the host's other settings (auth, targets...)."""
    try:
        return _BackupOnly().runtime_cloud.backup
    except ValidationError as error:
        problems = "; ".join(
            "RuntimeCloud__Backup" + "".join(f"__{part}" for part in issue["loc"][2:]) + f": {issue['msg']}"
            for issue in error.errors()
        )
        raise InvalidSettings(f"invalid settings: {problems}") from None
