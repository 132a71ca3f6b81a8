"""Lease stamps (shared.capacity.keys): the fast reader answers exactly as strptime with the stamp format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.capacity.keys import parse_stamp, stamp

FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
BASE = "2026-12-01T07:08:09.123456Z"


def _strptime(text: str) -> datetime | str:
    try:
        return datetime.strptime(text, FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return "refused"


def _parsed(text: str) -> datetime | str:
    try:
        return parse_stamp(text)
    except ValueError:
        return "refused"


def test_every_stamp_reads_back_as_the_moment_it_was_made_from():
    start = datetime(2020, 1, 1, tzinfo=UTC)
    for step in range(0, 10**15, 7_777_777_777_777):
        moment = start + timedelta(microseconds=step)
        assert parse_stamp(stamp(moment)) == moment


@pytest.mark.parametrize("index", range(len(BASE)))
def test_a_damaged_stamp_is_read_or_refused_exactly_as_strptime_does(index):
    for char in "0123456789-:.TZ +x２":
        for text in (BASE[:index] + char + BASE[index + 1 :], BASE[:index] + char + BASE[index:]):
            assert _parsed(text) == _strptime(text), text
    assert _parsed(BASE[:index] + BASE[index + 1 :]) == _strptime(BASE[:index] + BASE[index + 1 :])


def test_out_of_range_fields_are_refused():
    for text in ("2026-02-30T00:00:00.000000Z", "2026-12-01T07:08:60.000000Z", "2026-00-01T00:00:00.000000Z"):
        assert _parsed(text) == _strptime(text) == "refused"
