"""How long a receipt must stay write-once: the environment's lifetime plus seven years, as expiry dates.

Azure keeps a receipt version write-once until its version-level immutability
policy expires; a *locked* policy can be extended, never shortened nor
removed. "Lifetime plus seven years" has no fixed end while the environment
lives, so the expiry is kept ahead of time:

- **written**: a receipt is written with an expiry of ``retention + step``
  from now (seven years and 30 days by default);
- **alive**: whenever a receipt has less than ``retention + lead`` ahead of it
  (seven years and 7 days), the retention timer pushes it to ``retention +
  step`` ahead again. So a living environment's receipts always have at least
  seven years ahead, with ``lead`` to spare for timer firings that are late:
  a host that stops extending (deleted, broken) still leaves every receipt at
  least seven years;
- **deleted**: once the environment is deleted at ``D``, its receipts need
  ``D + retention`` and nothing more; an expiry that is already later stays
  as it is (never shortened).

This module is the decision only (dates in, dates out); the timer's walk over
the stored receipts is :mod:`shared.provisioning.receipt_sweep`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

SEVEN_YEARS = timedelta(days=2557)  # 7 x 365 days and the two leap days any seven years contain at least


class PolicyMode(str, Enum):
    """Azure's modes of a version-level policy: a locked one may only be extended."""

    LOCKED = "Locked"
    UNLOCKED = "Unlocked"


@dataclass(frozen=True)
class CurrentPolicy:
    """A receipt version's policy as stored: its expiry (None: no policy) and whether it is locked."""

    expiry: datetime | None = None
    locked: bool = False


@dataclass(frozen=True)
class PolicyChange:
    """The policy to set on a receipt version."""

    expiry: datetime
    mode: PolicyMode


@dataclass(frozen=True)
class RetentionRule:
    retention: timedelta = SEVEN_YEARS
    step: timedelta = timedelta(days=30)
    lead: timedelta = timedelta(days=7)

    def __post_init__(self) -> None:
        if self.retention < SEVEN_YEARS:
            raise ValueError(f"receipts are kept at least seven years ({SEVEN_YEARS.days} days)")
        if not timedelta(0) <= self.lead < self.step:
            raise ValueError("the lead must be shorter than the step, or every firing would extend every receipt")

    def at_write(self, now: datetime) -> datetime:
        """The expiry a receipt is written with (its environment is alive: it is running)."""
        return now + self.retention + self.step

    def required(self, now: datetime, deleted_at: datetime | None) -> datetime:
        """The earliest expiry that keeps the rule now."""
        if deleted_at is None:
            return now + self.retention + self.lead
        return deleted_at + self.retention

    def change(
        self, now: datetime, deleted_at: datetime | None, current: CurrentPolicy, mode: PolicyMode
    ) -> PolicyChange | None:
        """The policy a receipt version needs, or None when the one it has keeps the rule.

        Never earlier than ``current.expiry`` (a locked policy cannot be shortened, and an
        unlocked one is not shortened either); an unlocked policy is locked when ``mode`` says so,
        and a locked one stays locked whatever ``mode`` says (Azure cannot unlock it)."""
        if current.locked:
            mode = PolicyMode.LOCKED
        needed = self.required(now, deleted_at)
        if needed <= now:
            return None  # seven years since the environment was deleted: nothing left to keep
        enough = current.expiry is not None and current.expiry >= needed
        lock = mode is PolicyMode.LOCKED and not current.locked and current.expiry is not None
        if enough and not lock:
            return None
        if enough:
            assert current.expiry is not None  # for the type checker: enough says so
            return PolicyChange(current.expiry, mode)
        target = self.at_write(now) if deleted_at is None else needed
        if current.expiry is not None:
            target = max(target, current.expiry)
        return PolicyChange(target, mode)
