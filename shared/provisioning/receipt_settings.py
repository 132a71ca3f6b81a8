"""``RuntimeCloud:Receipts:*``: the write-once retention of receipts (:mod:`shared.provisioning.receipt_retention`).

Defaults:

- ``Immutability``: ``true``. Receipts are written with a version-level
  immutability policy and the retention timer extends it. Azurite does not
  emulate immutability policies (it ignores them on upload and answers 501 to
  Set Blob Immutability Policy), so the local sample sets ``false``: the timer
  still lists every receipt and decides, then logs what it would set instead
  of sending it.
- ``PolicyMode``: ``Locked``: nobody can shorten or remove the policy, whatever
  their role; ``Unlocked`` only for a trial deployment that must be torn down
  before seven years (the host still never shortens one).
- ``RetentionDays``: ``2557`` (seven years; never less): kept after the
  environment is deleted.
- ``ExtendStepDays``: ``30``: how far beyond ``RetentionDays`` an extension
  reaches (and a receipt's expiry when written).
- ``ExtendLeadDays``: ``7``: a living environment's receipt is extended when it
  has less than ``RetentionDays + ExtendLeadDays`` ahead; shorter than the step.
- ``RetentionSchedule``: ``0 15 4 * * *`` (daily; 6-field NCRONTAB). A schedule
  that leaves more than ``ExtendLeadDays`` between firings is refused.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from croniter import croniter
from pydantic import Field, model_validator

from shared.platform.settings_section import NcrontabSchedule, Section
from shared.provisioning.receipt_retention import SEVEN_YEARS, PolicyMode, RetentionRule


class ReceiptSettings(Section):
    immutability: bool = Field(default=True, alias="Immutability")
    policy_mode: PolicyMode = Field(default=PolicyMode.LOCKED, alias="PolicyMode")
    retention_days: int = Field(default=SEVEN_YEARS.days, ge=SEVEN_YEARS.days, le=146_000, alias="RetentionDays")
    extend_step_days: int = Field(default=30, ge=2, le=365, alias="ExtendStepDays")
    extend_lead_days: int = Field(default=7, ge=1, le=364, alias="ExtendLeadDays")
    retention_schedule: NcrontabSchedule = Field(default="0 15 4 * * *", alias="RetentionSchedule")

    @model_validator(mode="after")
    def _lead_shorter_than_step(self) -> ReceiptSettings:
        if self.extend_lead_days >= self.extend_step_days:
            raise ValueError(
                f"ExtendLeadDays ({self.extend_lead_days}) must be shorter than ExtendStepDays "
                f"({self.extend_step_days}), or every firing would extend every receipt"
            )
        gap = _longest_gap(self.retention_schedule)
        if gap > timedelta(days=self.extend_lead_days):
            raise ValueError(
                f"RetentionSchedule {self.retention_schedule!r} leaves up to {gap.days} days between firings, "
                f"more than ExtendLeadDays ({self.extend_lead_days}): receipts could lapse below RetentionDays"
            )
        return self

    def rule(self) -> RetentionRule:
        return RetentionRule(
            retention=timedelta(days=self.retention_days),
            step=timedelta(days=self.extend_step_days),
            lead=timedelta(days=self.extend_lead_days),
        )


def _longest_gap(schedule: str, most: int = 400) -> timedelta:
    """The longest time between two of the first ``most`` firings of ``schedule`` from a fixed start (a year
    of daily firings; a schedule firing more often is taken to repeat beyond them)."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    runs = croniter(schedule, start, second_at_beginning=True)
    # A schedule that names no day, month or weekday fires alike every day: two days of it show every gap its
    # first ``most`` firings do (read at every settings load: the daily default's 400 cost 0.02 s of CPU).
    daily = schedule.split()[3:] == ["*", "*", "*"]
    previous, longest = runs.get_next(datetime), timedelta(0)
    for _ in range(most):
        following = runs.get_next(datetime)
        longest, previous = max(longest, following - previous), following
        if daily and previous - start >= timedelta(days=2):
            break
    return longest
