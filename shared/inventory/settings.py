"""Inventory settings: ``RuntimeCloud:Inventory:*`` (app settings ``RuntimeCloud__Inventory__...``).

Defaults:

- ``ScanSchedule``: ``0 */15 * * * *`` (every 15 minutes), a 6-field NCRONTAB
  expression (second minute hour day month day-of-week). The scan timer
  declares it as ``%RuntimeCloud:Inventory:ScanSchedule%``, so a change takes
  effect at the next start.
- ``PurgeSchedule``: ``0 15 4 * * *`` (daily at 04:15 UTC), when the purge runs.
- ``FindingRetentionDays``: ``396`` (13 months): resolved findings, closed
  proposals and expired ignore rules older than this are purged daily. Open
  findings are never purged, however old.
- ``DefaultIgnoreDays``: ``30``, the expiry of an ignore rule created by
  accepting a proposal without naming one.
- ``MaxIgnoreDays``: ``365``: no ignore rule lives longer; drift that should
  be ignored for ever belongs in the specification (adopt it).
- ``ScanLeaseSeconds``: ``300``: one scan per environment at a time; a scan
  that crashed gives the environment back after this long.
- ``TargetTimeoutSeconds``: ``5``: how long a target read may take per attempt
  before the observation is kept as stale.
- ``ScanWaitSeconds``: ``60``: how long ``POST .../scan`` waits for its scan
  (which runs as an orchestration) before answering 202 with the scan's status
  URL. At most 200: Azure ends an HTTP request at 230 s.

Why a module of its own: ``shared.wiring.settings`` imports it (as it does the
capacity settings), so it must not import ``shared.wiring.settings``.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from shared.platform.settings_section import NcrontabSchedule, Section, six_field_ncrontab

DEFAULT_SCAN_SCHEDULE = "0 */15 * * * *"
DEFAULT_PURGE_SCHEDULE = "0 15 4 * * *"


class InventorySettings(Section):
    scan_schedule: str = Field(default=DEFAULT_SCAN_SCHEDULE, alias="ScanSchedule")
    purge_schedule: NcrontabSchedule = Field(default=DEFAULT_PURGE_SCHEDULE, alias="PurgeSchedule")
    finding_retention_days: int = Field(default=396, ge=1, le=3650, alias="FindingRetentionDays")
    default_ignore_days: int = Field(default=30, ge=1, le=365, alias="DefaultIgnoreDays")
    max_ignore_days: int = Field(default=365, ge=1, le=3650, alias="MaxIgnoreDays")
    scan_lease_seconds: int = Field(default=300, ge=10, le=3600, alias="ScanLeaseSeconds")
    target_timeout_seconds: float = Field(default=5.0, gt=0, le=60, alias="TargetTimeoutSeconds")
    scan_wait_seconds: float = Field(default=60.0, ge=0, le=200, alias="ScanWaitSeconds")

    @field_validator("scan_schedule")
    @classmethod
    def _six_field_ncrontab(cls, value: str) -> str:
        return six_field_ncrontab(value)
