"""The longest gap between two exports, which the settings check against RpoMinutes at every load.

A schedule that names no day, month or weekday is read over two days instead of eight (a quarter of
the work at every host start); the answer must be the one eight days give.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.backup.settings import longest_gap

EIGHT_DAYS = timedelta(days=8)


@pytest.mark.parametrize(
    "schedule",
    [
        "0 */5 * * * *",  # the default
        "0 0 0,1 * * *",  # fires at the start of the window: the gap before its second firing is short
        "0 0 0 * * *",  # once a day
        "0 0 23 * * *",
        "30 */7 1-5,22 * * *",
        "*/20 * * * * *",
    ],
)
def test_a_daily_schedule_read_over_two_days_has_the_gap_eight_days_show(schedule):
    assert longest_gap(schedule) == longest_gap(schedule, horizon=EIGHT_DAYS)


@pytest.mark.parametrize("schedule", ["0 0 0 * * 1", "0 0 12 * * 1-5", "0 0 0 1 * *", "0 */5 * * 1 *"])
def test_a_schedule_naming_days_is_read_over_eight_days(schedule):
    assert longest_gap(schedule) == longest_gap(schedule, horizon=EIGHT_DAYS)


def test_a_weekday_schedule_s_weekend_is_its_longest_gap():
    assert longest_gap("0 0 12 * * 1-5") == timedelta(days=3)
