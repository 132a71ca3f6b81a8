"""The lifetime-plus-seven-years rule at its boundaries: which expiry a receipt needs, given the dates.

Pure decision logic (no storage): the timer's walk and the requests it sends
are tested in ``test_receipt_retention_edge``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter
from pydantic import ValidationError

from shared.provisioning.receipt_retention import (
    SEVEN_YEARS,
    CurrentPolicy,
    PolicyChange,
    PolicyMode,
    RetentionRule,
)
from shared.provisioning.receipt_settings import ReceiptSettings, _longest_gap

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
RULE = RetentionRule()  # seven years, a 30-day step, a 7-day lead
LOCKED = PolicyMode.LOCKED
THRESHOLD = NOW + SEVEN_YEARS + timedelta(days=7)  # below this a living environment's receipt is extended
EXTENDED = NOW + SEVEN_YEARS + timedelta(days=30)


def locked(expiry: datetime) -> CurrentPolicy:
    return CurrentPolicy(expiry=expiry, locked=True)


def test_seven_years_is_2557_days() -> None:
    assert SEVEN_YEARS == timedelta(days=7 * 365 + 2)
    assert NOW.replace(year=NOW.year + 7) - NOW <= SEVEN_YEARS


def test_a_receipt_is_written_seven_years_and_a_step_ahead() -> None:
    assert RULE.at_write(NOW) == EXTENDED


def test_a_receipt_without_a_policy_gets_one_locked() -> None:
    assert RULE.change(NOW, None, CurrentPolicy(), LOCKED) == PolicyChange(EXTENDED, LOCKED)


def test_alive_exactly_at_the_threshold_is_left_alone() -> None:
    assert RULE.change(NOW, None, locked(THRESHOLD), LOCKED) is None


def test_alive_one_second_below_the_threshold_is_extended_a_step() -> None:
    assert RULE.change(NOW, None, locked(THRESHOLD - SECOND), LOCKED) == PolicyChange(EXTENDED, LOCKED)


def test_alive_one_second_above_the_threshold_is_left_alone() -> None:
    assert RULE.change(NOW, None, locked(THRESHOLD + SECOND), LOCKED) is None


def test_alive_a_receipt_extended_once_is_not_extended_again_until_it_reaches_the_threshold() -> None:
    later = NOW + timedelta(days=23)  # step - lead: the extension's expiry is exactly at the threshold then
    assert RULE.change(later, None, locked(EXTENDED), LOCKED) is None
    assert RULE.change(later + SECOND, None, locked(EXTENDED), LOCKED) is not None


def test_a_living_environment_keeps_seven_years_ahead_whenever_the_timer_fires_within_the_lead() -> None:
    expiry, moment = RULE.at_write(NOW), NOW
    for _ in range(200):  # ~11 years of weekly firings (the lead is 7 days)
        moment += timedelta(days=7)
        assert expiry >= moment + SEVEN_YEARS  # a host that stops here still leaves seven years
        if (change := RULE.change(moment, None, locked(expiry), LOCKED)) is not None:
            assert change.expiry > expiry
            expiry = change.expiry


def test_deleted_environment_gets_seven_years_from_the_deletion() -> None:
    deleted = NOW - timedelta(days=3)
    assert RULE.change(NOW, deleted, CurrentPolicy(), LOCKED) == PolicyChange(deleted + SEVEN_YEARS, LOCKED)


def test_deleted_environment_boundary_one_second_short_is_raised_exactly_to_seven_years() -> None:
    deleted = NOW - timedelta(days=3)
    short = locked(deleted + SEVEN_YEARS - SECOND)
    assert RULE.change(NOW, deleted, short, LOCKED) == PolicyChange(deleted + SEVEN_YEARS, LOCKED)
    assert RULE.change(NOW, deleted, locked(deleted + SEVEN_YEARS), LOCKED) is None


def test_deleted_environment_policy_already_later_is_never_shortened() -> None:
    deleted = NOW - timedelta(days=3)
    assert RULE.change(NOW, deleted, locked(EXTENDED + timedelta(days=900)), LOCKED) is None


def test_deleted_more_than_seven_years_ago_needs_nothing() -> None:
    deleted = NOW - SEVEN_YEARS - SECOND
    assert RULE.change(NOW, deleted, CurrentPolicy(), LOCKED) is None


def test_an_unlocked_policy_that_is_long_enough_is_locked_at_its_own_expiry() -> None:
    unlocked = CurrentPolicy(expiry=EXTENDED + timedelta(days=90), locked=False)
    assert RULE.change(NOW, None, unlocked, LOCKED) == PolicyChange(unlocked.expiry, LOCKED)  # type: ignore[arg-type]
    assert RULE.change(NOW, None, unlocked, PolicyMode.UNLOCKED) is None


def test_a_locked_policy_is_extended_locked_even_where_the_mode_is_unlocked() -> None:
    change = RULE.change(NOW, None, locked(THRESHOLD - SECOND), PolicyMode.UNLOCKED)
    assert change == PolicyChange(EXTENDED, LOCKED)  # Azure refuses to unlock a locked policy


def test_an_extension_never_goes_below_the_current_expiry() -> None:
    # Unlocked and short of the threshold, but a mode change must not shorten it either.
    current = CurrentPolicy(expiry=THRESHOLD - SECOND, locked=False)
    change = RULE.change(NOW, None, current, PolicyMode.UNLOCKED)
    assert change is not None and change.expiry == EXTENDED >= current.expiry  # type: ignore[operator]


def test_the_rule_refuses_less_than_seven_years_or_a_lead_not_shorter_than_the_step() -> None:
    with pytest.raises(ValueError, match="seven years"):
        RetentionRule(retention=SEVEN_YEARS - timedelta(days=1))
    with pytest.raises(ValueError, match="shorter than the step"):
        RetentionRule(step=timedelta(days=7), lead=timedelta(days=7))


def test_settings_refuse_a_schedule_that_leaves_more_than_the_lead() -> None:
    assert ReceiptSettings().rule() == RULE
    with pytest.raises(ValidationError, match="ExtendLeadDays"):
        ReceiptSettings.model_validate({"RetentionSchedule": "0 0 0 1 * *"})  # monthly, lead is 7 days
    with pytest.raises(ValidationError, match="ExtendLeadDays"):
        ReceiptSettings.model_validate({"ExtendLeadDays": 30, "ExtendStepDays": 30})
    with pytest.raises(ValidationError, match="RetentionDays"):
        ReceiptSettings.model_validate({"RetentionDays": 2556})


@pytest.mark.parametrize(
    "schedule", ["0 15 4 * * *", "0 0 0,1 * * *", "0 */5 * * * *", "* * * * * *", "0 0 12 * * 1-5"]
)
def test_a_schedule_s_longest_gap_is_the_one_its_first_400_firings_show(schedule: str) -> None:
    # A daily schedule is read over two days only (at every settings load): the answer must not change.
    runs = croniter(schedule, datetime(2024, 1, 1, tzinfo=UTC), second_at_beginning=True)
    firings = [runs.get_next(datetime) for _ in range(401)]
    assert _longest_gap(schedule) == max(later - earlier for earlier, later in zip(firings, firings[1:], strict=False))
